"""The influence learners' claims against BPTT on generated architectures (float64).

The same generated architectures as :mod:`tests.learn.test_claims_property`, for the learners
that read their claims off the step's structural sparsity (SnAp-n, OSTL, truncated BPTT) and
for RTRL: on a fresh run of ``NUM_STEPS`` steps with the weights held fixed,

* a leaf claimed ``exact`` equals BPTT's gradient of the summed loss to 1e-9 (relative);
* a leaf whose online gradient is exactly zero while BPTT's is not is claimed ``none`` with a
  reason, decided before the run (no silent zero, and never "approximate" at an exact zero:
  issue 29), and a leaf claimed ``none`` gets exactly 0.

UORO is sampled too: its rank-1 estimate is noisy, so only the ``none`` rules bite there.

A window ``W < NUM_STEPS`` makes truncated BPTT drop terms, so its exact claims are tested
where they bite. ``ETP_VIZ_INFLUENCE_CLAIM_EXAMPLES`` sets the number of examples: 25 on the
oldest stack's leg, 15 on the newest, each leg drawing its own sequence (:mod:`tests.legs`;
40 distinct a CI run, as before, when the newest leg re-drew the first 12 of the same 40).

The same rules hold on the hand-written models of :mod:`tests.learn.influence_models`
(issue 23), each with the learners where it bites: a stack in both wirings (layer 2 reading
layer 1's new or old state), an embedding compiled with one token id and run on others, a
sparse recurrent ring, and solver sub-steps in ``fori_loop`` / ``while_loop`` (a fixed trip
count; its oracle is forward-mode RTRL, ``while`` has no reverse mode). (The generated
architectures cover stacks reading the old state; ``jax.checkpoint`` and every learner on each
loop are in ``tests/learn/test_influence.py``.)
"""

from __future__ import annotations

import warnings

import brainstate
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from etp_viz.live.sources import build_algorithm
from tests.learn import archs, influence_models
from tests.learn.helpers import online_gradients, step_loss
from tests.learn.test_claims_property import ARCHS, EXACT_RTOL, NUM_STEPS, leaf_errors
from tests.legs import examples, leg_sequence
from tests.oracles import bptt_gradients, rtrl_gradients

EXAMPLES = examples("ETP_VIZ_INFLUENCE_CLAIM_EXAMPLES", oldest=25, newest=15)
ALGORITHMS = ["rtrl", "snap1", "snap2", "ostl_recurrent", "uoro", "tbptt1", "tbptt2", "tbptt4"]


def make(model, name: str):
    if name.startswith("tbptt"):
        return build_algorithm(model, "tbptt", None, window=int(name[5:]))
    return build_algorithm(model, name, None)


def check(arch: archs.Arch, name: str) -> None:
    model = archs.build(arch)
    xs = archs.inputs(arch, NUM_STEPS)
    check_model(model, xs[0], xs, name, f"{arch.describe()} [{name}]")


def check_model(model, x0, xs, name: str, where: str, oracle=bptt_gradients) -> None:
    """The soundness rules (module docstring) for learner ``name`` on ``model``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = oracle(model, xs, lambda ys: sum(step_loss(y) for y in ys))
        alg = make(model, name)
        alg.compile_graph(x0)
        claims = alg.graph.gradient_claims(alg)
        errors = leaf_errors(expected, online_gradients(alg, xs))
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


@pytest.mark.filterwarnings("ignore::UserWarning")
@leg_sequence
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(arch=ARCHS, name=st.sampled_from(ALGORITHMS))
def test_influence_claims_hold_on_generated_architectures(x64, arch, name):
    check(arch, name)


#: (hand-written model, learner): each model with the learners where it bites
HAND_WRITTEN = [
    ("stack_new", "ostl_recurrent"),
    ("embedding", "snap2"),
    ("sparse_ring", "snap1"),
    ("fori", "snap1"),
    ("while", "rtrl"),
]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(("model", "name"), HAND_WRITTEN, ids=[f"{m}-{n}" for m, n in HAND_WRITTEN])
def test_influence_claims_hold_on_hand_written_models(x64, model, name):
    x0, xs = influence_models.example(model, NUM_STEPS)
    oracle = rtrl_gradients if model == "while" else bptt_gradients
    check_model(influence_models.build(model), x0, xs, name, f"{model} [{name}]", oracle)


L = archs.Layer


def test_a_step_with_a_while_loop_and_a_custom_vjp_is_refused_naming_both():
    """No Jacobian of such a step can be taken (a ``while_loop`` has no reverse mode, a
    ``custom_vjp`` no forward mode): a clear error, not jax's."""
    import jax
    import jax.numpy as jnp

    @jax.custom_vjp
    def spike(v):
        return (v >= 0).astype(v.dtype)

    spike.defvjp(lambda v: (spike(v), v), lambda v, g: (g / (1.0 + jnp.abs(v)) ** 2,))

    class SpikingSolver(influence_models.SolverCell):
        def update(self, x):
            return super().update(x) + spike(self.h.value).sum()

    model = SpikingSolver("while")
    brainstate.nn.init_all_states(model)
    x0, _ = influence_models.example("while", 1)
    with pytest.raises(ValueError, match="while_loop.*custom_vjp.*fori_loop.*custom_jvp"):
        make(model, "rtrl").compile_graph(x0)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", ["rtrl", "uoro", "snap2", "ostl_recurrent"])
def test_a_custom_vjp_spike_on_the_h_to_h_path(x64, name):
    """An LIF reset by a ``jax.custom_vjp`` spike of the previous potential (no forward mode):
    the step's Jacobian products go in reverse (``jax.jacfwd`` raised before); RTRL exact."""
    arch = archs.Arch((L(act="lif_vjp", rec="dense", bias="etp"),), batch=2)
    check(arch, name)
    if name == "rtrl":
        model = archs.build(arch)
        alg = make(model, name)
        alg.compile_graph(archs.inputs(arch, 1)[0])
        assert alg.reverse_only and not alg.forward_only


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(
    ("arch", "window", "kinds"),
    [
        # a leaky state keeps every past step: the recurrent leaves lose a term at any W
        (archs.Arch((L(),)), 2, {"layers.0.Win": "approximate", "Wo": "exact"}),
        # nothing recurrent: the step forgets its state, W = 1 drops nothing
        (archs.Arch((L(rec="none"),)), 1, {"layers.0.Win": "exact", "Wo": "exact"}),
        # a feed-forward top over a recurrent layer: only the bottom layer loses terms
        (
            archs.Arch((L(), L(rec="none"))),
            2,
            {"layers.0.Win": "approximate", "layers.1.Win": "exact"},
        ),
    ],
    ids=["leaky", "feed-forward", "stacked"],
)
def test_truncated_bptt_claims_by_structure(x64, arch, window, kinds):
    model = archs.build(arch)
    alg = make(model, f"tbptt{window}")
    alg.compile_graph(archs.inputs(arch, 1)[0])
    claims = alg.graph.gradient_claims(alg)
    assert {p: claims[p].kind for p in kinds} == kinds
    check(arch, f"tbptt{window}")
