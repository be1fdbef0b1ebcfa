"""Gradient claims against BPTT on generated architectures (issue 12 G; float64).

For every generated architecture (:mod:`tests.learn.archs`) and algorithm:

* an ``exact`` claim equals the BPTT gradient to 1e-9 (relative);
* no weight with a non-zero BPTT gradient gets an unexplained zero (an online gradient of
  exactly zero has an ``approximate`` or ``none`` claim with a reason);
* every compiler WARNING that names a weight or a hidden group has a measurable effect (some
  weight it concerns is off by more than 1e-6; weights without any gradient on the input,
  as below a spiking layer that never fires, are not counted);
* an ``approximate`` leaf whose online gradient is identically zero while BPTT's is not is a
  failure (the claim should be ``none``: issue 23), and so is a ``none`` leaf with a non-zero
  online gradient;
* a ``ParamState``'s claim is its leaves' worst (a matrix and a plainly added bias).

The generator (``tests/learn/archs.py``) covers pre-update reads across groups, stacks in both
wirings, top-down feedback of the top layer's previous state into the first layer
(element-wise, through an ETP matmul or a plain one: without it, deleting the cross-group rule
of ``_relation_drops`` passed the suite while such a weight was claimed exact at a relative
error of 0.6), weight normalisation, one weight shared by two layers, integer countdown states
and mixed per-leaf claims; ES-D-RTRL runs with unequal decays. Issue 41 added two groups that
read each other through weight ops (``Arch.wiring = "siblings"``: both read the input, the
second reads the first through ``Wlat``, the first the second's previous state through ``Wfb``,
the output the second only), drawn by their own test and named below. Issue 29 ("peers") added
Heaviside spikes with surrogate derivatives (braintools' ``heaviside_surrogate_gradient``
primitive, ``custom_jvp``, ``custom_vjp``; LIF soft resets that put the surrogate on the h -> h
path), LayerNorm-style normalisation of the pre-activation (zero by structure below it), the
pre-activation computed in a top-level ``cond`` (``jax.lax`` and brainstate), and an embedding
of integer tokens as the first layer's input. Three etp_viz failures the new draws found are
named cases below (each failed before its fix): a ``custom_vjp`` spike on a ``y -> h`` tail
(D-RTRL / ES-D-RTRL raised jax's "can't apply forward-mode autodiff (jvp) to a custom_vjp
function"), one on the h -> h path (RTRL, UORO, dense SnAp-n, OSTL: the same,
``tests/learn/test_influence_claims_property.py``), and a normalisation after a ``cond``
(claimed approximate at an identically zero online gradient).

The examples are derandomized (CI is reproducible). ``ETP_VIZ_CLAIM_EXAMPLES`` sets their
number: 60 on the oldest stack's leg, 40 on the newest by default, each leg drawing its own
sequence (:mod:`tests.legs`): 100 distinct architectures a CI run. (200 before issue 30, then
100 on the oldest leg with the newest drawing the first 40 of the same sequence again.)
Sized by what they have caught (docs/development.md, "The CI's time budget", lists which test
kills each deleted claim rule); a bug they find gets a named case or an ``@example`` (the
cross-group one below).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

import etp_viz
from etp_viz.compiler import DiagnosticLevel
from tests.conftest import float64
from tests.learn import archs
from tests.learn.helpers import online_gradients, step_loss
from tests.legs import examples, leg_sequence
from tests.oracles import bptt_gradients

EXAMPLES = examples("ETP_VIZ_CLAIM_EXAMPLES", oldest=60, newest=40)
NUM_STEPS = 5
EXACT_RTOL = 1e-9
EFFECT = 1e-6


#: ``Layer.norm`` / ``Layer.cond`` values drawn, "none" half of the time (a normalisation makes
#: most weights below it zero by structure; the other fields keep their share of the draws)
NORMS = ["none", "none", "ln", "affine", "brainstate"]
CONDS = ["none", "none", "lax", "brainstate"]


def layers(index: int, conds: Sequence = ("none",)) -> st.SearchStrategy:
    """Layer ``index`` of a generated arch, with its ``Layer.cond`` drawn from ``conds`` (none
    by default)."""
    return st.builds(
        archs.Layer,
        states=st.sampled_from([1, 2]),
        rec=st.sampled_from(archs.RECS),
        inp=st.sampled_from(["dense", "elemwise", "wnorm"] + ([] if index else ["embed"])),
        bias=st.sampled_from(["none", "etp", "plain", "mixed"]),
        act=st.sampled_from(archs.ACTS),
        reads=st.sampled_from(["new", "old"]),
        cross=st.booleans() if index else st.just(False),
        adapt=st.sampled_from(["old", "new", "first"]),
        count=st.booleans(),
        norm=st.sampled_from(NORMS),
        cond=st.sampled_from(conds),
    )


#: one or two generated layers (:func:`layers`, every ``Layer.cond``); shared with the
#: influence learners' claims test
ARCHS = st.builds(
    archs.Arch,
    layers=st.one_of(
        st.tuples(layers(0, CONDS)),
        st.tuples(layers(0, CONDS), layers(1, CONDS)),
    ),
    out=st.sampled_from(["etp", "plain"]),
    batch=st.sampled_from([None, 2]),
    seed=st.integers(0, 10_000),
    shared=st.booleans(),
    feedback=st.sampled_from(archs.FEEDBACKS),
)
#: ES-D-RTRL's (alpha_x, alpha_f): unequal, so a swap of the two is visible
ES_DECAYS = (0.5, 0.9)


def leaf_errors(expected: dict, online: dict) -> dict:
    """``{dotted leaf path: (relative error, |online|, |true|)}``."""
    from etp_viz.compiler.dataflow import leaf_name as _leaf_name

    out = {}
    for path, true in expected.items():
        got = online.get(path)
        true_leaves = jax.tree_util.tree_flatten_with_path(true)[0]
        got_leaves = jax.tree.leaves(got) if got is not None else [None] * len(true_leaves)
        for (key, t), o in zip(true_leaves, got_leaves):
            t = np.asarray(t)
            o = np.zeros_like(t) if o is None else np.asarray(o)
            norm = float(np.linalg.norm(t))
            err = float(np.linalg.norm(o - t)) / max(norm, 1e-300)
            out[_leaf_name(path, key)] = (err, float(np.linalg.norm(o)), norm)
    return out


def run(arch: archs.Arch, algorithm: str):
    model = archs.build(arch)
    xs = archs.inputs(arch, NUM_STEPS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = bptt_gradients(model, xs, lambda ys: sum(step_loss(y) for y in ys))
        if algorithm == "d_rtrl":
            alg = etp_viz.D_RTRL(model)
        else:
            alg = etp_viz.ES_D_RTRL(model, ES_DECAYS)
        alg.compile_graph(xs[0])
    claims = alg.graph.gradient_claims(algorithm)
    online = online_gradients(alg, xs, jit=False)
    return alg.graph, claims, leaf_errors(expected, online)


def check(arch: archs.Arch, algorithm: str) -> tuple:
    """The properties above on one architecture; returns :func:`run`'s result."""
    graph, claims, errors = run(arch, algorithm)
    where = f"{arch.describe()} [{algorithm}]"
    assert set(errors) <= set(claims), where
    for path, (err, online_norm, true_norm) in errors.items():
        claim = claims[path]
        if claim.kind == "exact":
            assert err <= EXACT_RTOL, f"{where}: {path} claimed exact, off by {err:.3g}"
        if true_norm > 1e-10 and online_norm == 0.0:
            assert claim.kind == "none" and claim.reason, (
                f"{where}: {path} gets an identically zero online gradient but is claimed "
                f"{claim.kind} ({claim.reason})"
            )
        if claim.kind == "none":
            assert online_norm == 0.0, f"{where}: {path} claimed none, online {online_norm:.3g}"
    order = {"none": 0, "approximate": 1, "exact": 2}
    for state_path in {".".join(map(str, p)) for p in graph.module_info.weight_path_to_invars}:
        leaves = [c.kind for k, c in claims.items() if k.startswith(state_path + ".")]
        if len(leaves) > 1:
            worst = min(leaves, key=order.__getitem__)
            assert claims[state_path].kind == worst, f"{where}: {state_path} is not its worst leaf"
    for record in graph.diagnostics:
        if record.level < DiagnosticLevel.WARNING:
            continue
        concerned = _concerned_leaves(graph, record, errors)
        assert concerned, f"{where}: warning names no weight: {record.message}"
        # a weight with no gradient, BPTT's or online (a spiking layer that never fires on
        # this input), cannot show the effect
        concerned = [p for p in concerned if errors[p][1] or errors[p][2]]
        worst = max((errors[p][0] for p in concerned), default=np.inf)
        assert worst > EFFECT, f"{where}: warning without a measurable effect: {record.message}"
    return graph, claims, errors


def _concerned_leaves(graph, record, errors) -> list:
    """Leaves of the weight a record names, or of the weights feeding the groups it names."""
    paths = set()
    if record.weight_path is not None:
        paths.add(tuple(record.weight_path))
    hidden = {tuple(p) for p in (record.hidden_paths or ())}
    for rel in graph.hidden_param_op_relations:
        if hidden & {tuple(p) for g in rel.hidden_groups for p in g.hidden_paths}:
            paths |= {tuple(p) for p in rel.trainable_paths.values()}
    names = {".".join(map(str, p)) for p in paths}
    return [k for k in errors if any(k == n or k.startswith(n + ".") for n in names)]


@pytest.mark.filterwarnings("ignore::UserWarning")
@leg_sequence
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),  # messages name the arch
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(arch=ARCHS, algorithm=st.sampled_from(["d_rtrl", "d_rtrl", "es_d_rtrl"]))
# top-down feedback whose only dropped term is the cross-group one (the generated examples
# alone did not reach it within 200: this one kills a deleted cross-group rule)
@example(
    arch=archs.Arch((archs.Layer(), archs.Layer(rec="none")), feedback="add"), algorithm="d_rtrl"
)
def test_claims_hold_on_generated_architectures(x64, arch, algorithm):
    check(arch, algorithm)


#: two groups that both read the model's input, the second reading the first through a weight
#: op (``Wlat``) and, with ``feedback``, the first the second's previous state through another
#: (``Arch.wiring = "siblings"``, issue 41): the first group's weights reach the output only
#: through that op, the dropped A -> B term
SIBLINGS = st.builds(
    archs.Arch,
    layers=st.tuples(layers(0, CONDS), layers(1, CONDS)),
    out=st.sampled_from(["etp", "plain"]),
    batch=st.sampled_from([None, 2]),
    seed=st.integers(0, 10_000),
    shared=st.booleans(),
    feedback=st.sampled_from(["etp", "etp", *archs.FEEDBACKS]),
    wiring=st.just("siblings"),
)


@pytest.mark.filterwarnings("ignore::UserWarning")
@leg_sequence
@settings(
    max_examples=examples("ETP_VIZ_SIBLING_EXAMPLES", oldest=12, newest=8),
    deadline=None,
    derandomize=True,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(arch=SIBLINGS, algorithm=st.sampled_from(["d_rtrl", "d_rtrl", "es_d_rtrl"]))
def test_claims_hold_when_two_groups_read_each_other_through_weight_ops(x64, arch, algorithm):
    check(arch, algorithm)


# -- named cases: each rule once, readable when it fails ----------------------------------
L = archs.Layer
SIBLING = {"feedback": "etp", "wiring": "siblings", "seed": 3}
NAMED = {
    "leaky": (archs.Arch((L(),)), {"layers.0.Win": "exact", "Wo": "exact"}),
    "dense recurrence": (archs.Arch((L(rec="dense"),)), {"layers.0.Wrec": "approximate"}),
    "concat [x, h]": (archs.Arch((L(rec="concat"),), batch=2), {"layers.0.Wcat": "approximate"}),
    "bias (N,) on (B, N)": (archs.Arch((L(bias="etp"),), batch=2), {"layers.0.b": "exact"}),
    "plain bias": (archs.Arch((L(bias="plain"),), batch=2), {"layers.0.b": "none"}),
    "position mixing": (archs.Arch((L(rec="mix"),)), {"layers.0.Win": "approximate"}),
    "two states, spike": (archs.Arch((L(states=2, act="spike"),)), {"layers.0.Win": "exact"}),
    "output reads old": (archs.Arch((L(states=2, reads="old"),)), {"layers.0.Win": "exact"}),
    "a state read new, off the output": (
        archs.Arch((L(states=2, adapt="new"),)),
        {"layers.0.Win": "exact"},
    ),
    # the group's other state reads the new one unperturbed: the in-step path counted once
    # (it was counted twice, by the signal and by the trace, before compiler/perturbation.py)
    "a state read new, on the output": (
        archs.Arch((L(states=2, adapt="first"),)),
        {"layers.0.Win": "exact"},
    ),
    "stacked, recurrent top": (
        archs.Arch((L(), L())),
        {"layers.0.Win": "approximate", "layers.1.Win": "exact"},
    ),
    "readout of the top layer's pre-update state": (
        archs.Arch((L(), L(reads="old"))),
        {"layers.0.Win": "none", "layers.1.Win": "exact"},
    ),
    "one weight shared by two layers": (
        archs.Arch((L(reads="old"), L(inp="elemwise")), shared=True),
        {"layers.0.Win": "approximate"},
    ),
    "weight normalisation": (archs.Arch((L(inp="wnorm"),)), {"layers.0.g": "exact"}),
    "a matrix and a plain bias in one ParamState": (
        archs.Arch((L(bias="mixed"),), batch=2),
        {"layers.0.Win.weight": "exact", "layers.0.Win.bias": "none", "layers.0.Win": "none"},
    ),
    "an integer countdown": (archs.Arch((L(count=True),)), {"layers.0.Win": "exact"}),
    "top-down feedback of the top layer's previous state": (
        archs.Arch((L(), L(rec="none")), feedback="add"),
        {"layers.0.Win": "approximate", "layers.1.Win": "approximate"},
    ),
    # the shared weight's second use reads the new lower state: a path through another
    # group's new value (the learning signal's), once warned as an untraced part
    "one weight shared by two layers that read the new lower state": (
        archs.Arch(
            (L(rec="none", bias="etp", count=True), L(rec="none", bias="etp", count=True)),
            batch=2,
            shared=True,
        ),
        {"layers.1.b": "exact"},
    ),
    "stacked, feed-forward top": (
        archs.Arch((L(), L(rec="none"))),
        {"layers.0.Win": "exact", "layers.1.Win": "exact"},
    ),
    # issue 29 (peers): braintools' surrogate primitive on the h -> h path of a soft reset
    "LIF soft reset by a braintools surrogate spike": (
        archs.Arch((L(act="lif"),), batch=2),
        {"layers.0.Win": "exact"},
    ),
    "LIF reset by a custom_vjp spike of the previous potential": (
        archs.Arch((L(act="lif_vjp", bias="etp"),)),
        {"layers.0.Win": "exact", "layers.0.b": "exact"},
    ),
    "layer norm with a gain and bias, below it zero by structure": (
        archs.Arch((L(norm="affine"),)),
        {"layers.0.Win": "none", "layers.0.ln_gain": "exact", "layers.0.ln_bias": "exact"},
    ),
    "ETP ops in both branches of a cond": (
        archs.Arch((L(cond="lax", bias="etp"),)),
        {"layers.0.Win": "exact", "layers.0.b": "exact"},
    ),
    "an embedding of tokens": (archs.Arch((L(inp="embed"),), batch=2), {"layers.0.table": "exact"}),
    # a custom_vjp spike of the step's ETP output: the y -> h tail's all-ones JVP (D_f) is
    # taken by reverse over reverse (jax.jvp raised)
    "a custom_vjp spike on the y -> h tail": (
        archs.Arch((L(act="vjp", bias="etp"),), batch=2),
        {"layers.0.Win": "exact", "layers.0.b": "exact"},
    ),
    "a custom_vjp LIF whose adaptation reads y": (
        archs.Arch((L(act="lif_vjp", states=2, adapt="first"),)),
        {"layers.0.Win": "exact"},
    ),
    # issue 41: A = sigmoid(W_a x + Wfb B_old), B = W_b x + Wrec B_old + Wlat A, the output
    # reading B: A's weights reach it only through Wlat, a weight op (the dropped A -> B
    # term). With B reading A's previous value, or the output B's, no learning signal meets
    # A's traces: none, with that reason
    "two groups through weight ops, B reads A's previous value": (
        archs.Arch((L(rec="none", act="spike", reads="old"), L(rec="dense")), **SIBLING),
        {"layers.0.Win": "none", "Wfb": "none", "Wlat": "approximate"},
    ),
    "two groups through weight ops, the output reads B's previous value": (
        archs.Arch((L(rec="none", act="spike"), L(rec="dense", reads="old")), **SIBLING),
        {"layers.0.Win": "none", "Wfb": "none", "Wlat": "approximate"},
    ),
    # B reading A's new value: the signal reaches A through Wlat (learned, approximately)
    "two groups through weight ops, B reads A's new value": (
        archs.Arch((L(rec="none", act="spike"), L(rec="dense")), **SIBLING),
        {"layers.0.Win": "approximate", "Wfb": "approximate"},
    ),
    # the if-converted select_n of a top-level cond gates the tangent by an unknown scalar,
    # which the normalisation still cancels: zero by structure (was "approximate" at 0)
    "layer norm after a cond": (
        archs.Arch((L(cond="lax", norm="ln"),)),
        {"layers.0.Win": "none", "Wo": "exact"},
    ),
}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", list(NAMED))
def test_named_architectures(x64, name):
    arch, kinds = NAMED[name]
    _, claims, errors = check(arch, "d_rtrl")
    assert {p: claims[p].kind for p in kinds} == kinds
    for path, kind in kinds.items():
        if kind == "approximate" and errors[path][2] > 0:
            assert errors[path][0] > EFFECT, f"{name}: {path} approximate but exact here"


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_shared_weight_below_a_norm_read_through_the_old_state_is_none():
    """Found by drawing another derandomized sequence (session 37): one relation of a weight
    shared by a stack feeds both layers; the upper layer's tail is a normalisation (its trace
    is zero by structure) and the output reads the upper layer's previous state. The D-RTRL
    gradient is identically zero, which was claimed approximate: the bypass read of the upper
    state counted although its trace stays 0 (also with tanh / braintools / custom_vjp
    spikes)."""
    arch = archs.Arch(
        (
            L(states=2, rec="concat", inp="elemwise", bias="plain", act="tanh", adapt="new"),
            L(rec="concat", bias="mixed", act="relu_grad", reads="old", adapt="new", norm="affine"),
        ),
        out="plain",
        batch=2,
        seed=1610,
        shared=True,
        feedback="add",
    )
    with float64():
        _, claims, errors = check(arch, "d_rtrl")
    claim = claims["layers.0.Wcat"]
    assert claim.kind == "none" and errors["layers.0.Wcat"][2] > 1e-3
    assert "layers.1.h stays 0" in claim.reason and "normalisation" in claim.reason


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_es_d_rtrl_claims_online_weights_approximate_and_readouts_exact(x64):
    arch = archs.Arch((L(),))
    _, claims, _ = check(arch, "es_d_rtrl")
    assert claims["layers.0.Win"].kind == "approximate"
    assert "factorises" in claims["layers.0.Win"].reason
    assert claims["Wo"].kind == "exact"


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("algorithm", ["d_rtrl", "es_d_rtrl"])
@pytest.mark.parametrize("reads", ["old", "new"])
def test_verify_agrees_with_the_claims_of_two_groups_through_weight_ops(x64, reads, algorithm):
    """Issue 41's shape measured by ``etp_viz.verify`` (float64): A = sigmoid(W_a x + Wfb
    B_old), B = W_b x + Wrec B_old + Wlat A, the output reading B. Reading A's previous value,
    B carries no learning signal back to A's traces: A's weights are claimed none, their
    online gradient is exactly 0 and BPTT's is not; reading A's new value, they learn."""
    arch = archs.Arch((L(rec="none", act="spike", reads=reads), L(rec="dense")), **SIBLING)
    model = archs.build(arch)
    report = etp_viz.verify(model, archs.inputs(arch, NUM_STEPS), algorithm=algorithm)
    assert not report.contradictions, report.table()
    rows = {row.path: row for row in report.rows}
    for path in ("layers.0.Win", "Wfb"):
        row = rows[path]
        assert row.true_norm > 1e-6, path
        if reads == "old":
            assert row.claim == "none" and row.online_norm == 0.0, (path, row)
            assert "reaches the loss only in a later step" in row.reason, row.reason
            assert "which reads it at Wlat (etp_mv" in row.reason, row.reason  # the A -> B op
        else:
            assert row.claim == "approximate" and row.online_norm > 0.0, (path, row)
