"""Learning a plain model with ``lift=True`` (issue 32; float64).

On generated architectures (:mod:`tests.learn.archs`) written in plain jnp (``Arch.ops =
"plain"``: ``x @ W``, ``x * gain``, ``y + b``), D-RTRL and ES-D-RTRL built with ``lift=True``

* give the gradients of the same learner on the architecture's twin written with ETP ops
  (``ops="etp"``) to 1e-9 (relative),
* make the same claims and the same relations (each weight leaf driving the same hidden
  states; a lifted ``x @ W + b`` is one ``etp_mm`` where the twin may mark ``b`` on its own),
* and equal BPTT (``jax.grad`` through the unrolled sequence) to 1e-9 where they claim exact.

The pre-activation may be computed in a top-level ``cond`` (``Layer.cond``): under
``lift=True`` a ``cond`` that takes a weight is if-converted, so its branches' plain ops lift.

``ETP_VIZ_LIFT_EXAMPLES`` sets the number of generated examples (8 on the oldest stack's
leg, 5 on the newest by default, each leg drawing its own sequence: :mod:`tests.legs`).
"""

from __future__ import annotations

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import etp_viz
from etp_viz.learn.registry import build_learner, resolve
from tests.learn import archs
from tests.learn.helpers import online_gradients, step_loss
from tests.learn.test_claims_property import CONDS, layers, leaf_errors
from tests.legs import examples, leg_sequence
from tests.oracles import bptt_gradients

EXAMPLES = examples("ETP_VIZ_LIFT_EXAMPLES", oldest=8, newest=5)
NUM_STEPS = 4
RTOL = 1e-9
ES_DECAYS = (0.5, 0.9)

ARCHS = st.builds(
    archs.Arch,
    layers=st.one_of(st.tuples(layers(0, CONDS)), st.tuples(layers(0, CONDS), layers(1, CONDS))),
    out=st.sampled_from(["etp", "plain"]),
    batch=st.sampled_from([None, 2]),
    seed=st.integers(0, 10_000),
    shared=st.booleans(),
    feedback=st.sampled_from(archs.FEEDBACKS),
)


def learner(model, algorithm: str, lift: bool):
    if algorithm == "d_rtrl":
        return etp_viz.D_RTRL(model, lift=lift)
    return etp_viz.ES_D_RTRL(model, ES_DECAYS, lift=lift)


def learn(arch: archs.Arch, algorithm: str, lift: bool, bptt: bool = False):
    """``(graph, online gradients, BPTT gradients or None)`` over NUM_STEPS steps."""
    model = archs.build(arch)
    xs = archs.inputs(arch, NUM_STEPS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = None
        if bptt:
            expected = bptt_gradients(model, xs, lambda ys: sum(step_loss(y) for y in ys))
        alg = learner(model, algorithm, lift)
        alg.compile_graph(xs[0])
    return alg.graph, online_gradients(alg, xs, jit=False), expected


def leaf_relations(graph) -> dict:
    """``{(weight path, leaf index): hidden paths it drives}`` over every relation."""
    out: dict = {}
    for rel in graph.hidden_param_op_relations:
        hidden = {tuple(p) for p in rel.connected_hidden_paths}
        for key, path in rel.trainable_paths.items():
            leaf = (tuple(path), rel.trainable_leaf_indices[key])
            out[leaf] = sorted(set(out.get(leaf, ())) | hidden)
    return out


def check(arch: archs.Arch, algorithm: str) -> None:
    plain = dataclasses.replace(arch, ops="plain")
    twin = dataclasses.replace(arch, ops="etp")
    where = f"{plain.describe()} [{algorithm}]"
    lifted_graph, lifted, expected = learn(plain, algorithm, lift=True, bptt=True)
    twin_graph, wired, _ = learn(twin, algorithm, lift=False)
    assert lifted_graph.module_info.lifting.not_lifted == (), where
    assert leaf_relations(lifted_graph) == leaf_relations(twin_graph), where
    assert lifted_graph.weight_status == twin_graph.weight_status, where
    claims = lifted_graph.gradient_claims(algorithm)
    twin_claims = twin_graph.gradient_claims(algorithm)
    assert {k: c.kind for k, c in claims.items()} == {k: c.kind for k, c in twin_claims.items()}
    for leaf, (err, _, norm) in leaf_errors(wired, lifted).items():
        assert err <= RTOL or norm == 0.0, f"{where}: {leaf} differs from its twin by {err:.3g}"
    for leaf, (err, _, _) in leaf_errors(expected, lifted).items():
        if claims[leaf].kind == "exact":
            assert err <= RTOL, f"{where}: {leaf} claimed exact, off BPTT by {err:.3g}"


@pytest.mark.filterwarnings("ignore::UserWarning")
@leg_sequence
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(arch=ARCHS, algorithm=st.sampled_from(["d_rtrl", "es_d_rtrl"]))
def test_lifted_plain_architectures_learn_like_their_etp_twins(x64, arch, algorithm):
    check(arch, algorithm)


L = archs.Layer
NAMED = {
    "leaky, plain bias, batch": archs.Arch((L(bias="plain"),), batch=2),
    "gain input, concat top, plain readout": archs.Arch(
        (L(inp="elemwise", bias="etp"), L(rec="concat")), out="plain"
    ),
    "weight norm, two states, feedback through a matmul": archs.Arch(
        (L(inp="wnorm", states=2), L(rec="mix", bias="mixed")), feedback="etp", batch=2
    ),
    # a cond taking a weight is if-converted under lift=True, so its branches' plain ops lift
    # (they were refused: "cond has no lifting rule")
    "plain ops in both branches of a cond": archs.Arch(
        (L(cond="lax", bias="plain", rec="dense"),), batch=2
    ),
    "plain ops in a brainstate cond, stacked": archs.Arch(
        (L(cond="brainstate", inp="elemwise"), L(cond="lax", bias="mixed"))
    ),
}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", list(NAMED))
def test_named_plain_architectures(x64, name):
    check(NAMED[name], "d_rtrl")


def test_an_exact_plain_leaky_rnn_equals_bptt(x64):
    """Every weight of a plain leaky RNN (``x @ W``, a plain bias, a plain readout) is exact
    under D-RTRL once lifted: each online gradient equals BPTT's."""
    arch = archs.Arch((L(bias="plain"),), batch=2, ops="plain", out="plain")
    graph, online, expected = learn(arch, "d_rtrl", lift=True, bptt=True)
    claims = graph.gradient_claims("d_rtrl")
    errors = leaf_errors(expected, online)
    assert set(errors) == {"layers.0.Win", "layers.0.b", "Wo"}
    for leaf, (err, online_norm, _) in errors.items():
        assert claims[leaf].kind == "exact", (leaf, claims[leaf].reason)
        assert err <= RTOL and online_norm > 0, (leaf, err)
    # without lifting the same model learns nothing online but its readout
    plain_graph, _, _ = learn(arch, "d_rtrl", lift=False)
    assert plain_graph.gradient_claims("d_rtrl")["layers.0.Win"].kind == "none"


def test_lift_is_an_option_of_the_etp_learners_by_name_and_class(x64):
    arch = archs.Arch((L(bias="plain"),), ops="plain")
    twin = dataclasses.replace(arch, ops="etp")
    xs = archs.inputs(arch, NUM_STEPS)
    results = []
    for given_arch, options in ((arch, {"lift": True}), (twin, {})):
        model = archs.build(given_arch)
        alg = build_learner(model, "eprop", options)
        alg.compile_graph(xs[0])
        results.append(online_gradients(alg, xs, jit=False))
    for leaf, (err, _, _) in leaf_errors(results[1], results[0]).items():
        assert err <= RTOL, (leaf, err)
    model = archs.build(arch)
    alg = resolve(model, etp_viz.ES_D_RTRL, {"lift": True})
    alg.compile_graph(xs[0])
    assert alg.graph.module_info.lifting.lifted
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['lift'\]"):
        build_learner(model, "rtrl", {"lift": True})


def test_lifted_online_gradients_are_finite_in_float32():
    """The lifted step runs in the model's own dtype (no float64 needed)."""
    arch = archs.Arch((L(bias="plain"), L(rec="dense")), batch=2, ops="plain")
    model = archs.build(arch)
    xs = archs.inputs(arch, 3).astype(jnp.float32)
    alg = etp_viz.D_RTRL(model, lift=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alg.compile_graph(xs[0])
    grads = online_gradients(alg, xs, jit=True)
    assert all(np.isfinite(np.asarray(g)).all() for g in jax.tree.leaves(grads))
