"""RTRL, SnAp-n and UORO (issue 15) against the BPTT oracle in float64: RTRL is exact on every
generated architecture (plain `@` weights and GRU's Wr included), SnAp-n is exact once n
reaches the step's coupling depth and measurably not before, UORO is unbiased (its mean over
projection keys converges like 1/sqrt(K)); each states its claims, verify() agrees."""

from __future__ import annotations

import warnings

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
from tests.learn import archs
from tests.learn.helpers import online_gradients, step_loss
from tests.oracles import bptt_gradients

ARCHS = [
    archs.Arch(layers=(archs.Layer(rec="dense"),), batch=2, seed=1),
    archs.Arch(layers=(archs.Layer(rec="mix", bias="plain"),), batch=None, seed=2),
    archs.Arch(
        layers=(
            archs.Layer(states=2, rec="concat", act="spike", reads="old"),
            archs.Layer(rec="leaky", cross=True),
        ),
        batch=None,
        seed=3,
    ),
]
STEPS = 5


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def rel_error(got: dict, expected: dict) -> float:
    num = sum(
        float(np.sum((np.asarray(a) - np.asarray(b)) ** 2))
        for p in expected
        for a, b in zip(jax.tree.leaves(got[p]), jax.tree.leaves(expected[p]))
    )
    den = sum(float(np.sum(np.asarray(b) ** 2)) for b in jax.tree.leaves(expected))
    return float(np.sqrt(num / den))


def leaf_errors(make, arch) -> tuple:
    """``(learner, {dotted leaf path: relative error})`` of one fresh online run vs BPTT."""
    from etp_viz.compiler.dataflow import leaf_name

    xs = archs.inputs(arch, STEPS)
    alg = make(archs.build(arch))
    alg.compile_graph(xs[0])
    expected = bptt_gradients(archs.build(arch), xs, lambda ys: sum(step_loss(y) for y in ys))
    got = online_gradients(alg, xs)
    out = {}
    for path, tree in expected.items():
        for (key, t), o in zip(
            jax.tree_util.tree_flatten_with_path(tree)[0], jax.tree.leaves(got[path])
        ):
            t, o = np.asarray(t), np.asarray(o)
            out[leaf_name(path, key)] = float(
                np.linalg.norm(o - t) / max(np.linalg.norm(t), 1e-300)
            )
    return alg, out


def check_claims_per_leaf(make, arch) -> None:
    """Every leaf claimed exact is exact (1e-10), per leaf, on a fresh run."""
    alg, errors = leaf_errors(make, arch)
    claims = alg.graph.gradient_claims(alg)
    for key, err in errors.items():
        if claims[key].kind == "exact":
            assert err < 1e-10, (key, err)


def run(arch, make):
    xs = archs.inputs(arch, STEPS)
    expected = bptt_gradients(archs.build(arch), xs, lambda ys: sum(step_loss(y) for y in ys))
    alg = make(archs.build(arch))
    alg.compile_graph(xs[0])
    return alg, rel_error(online_gradients(alg, xs), expected)


@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: a.describe())
def test_rtrl_is_exact(arch, x64):
    alg, err = run(arch, etp_viz.RTRL)
    assert err < 1e-10
    claims = alg.graph.gradient_claims(alg)
    assert {c.kind for c in claims.values()} == {"exact"} and {
        c.algorithm for c in claims.values()
    } == {"rtrl"}


def test_rtrl_learns_what_d_rtrl_cannot(x64):
    """A GRU's Wr reaches h only through Wh's product: no ETP relation, exact under RTRL."""

    class Net(brainstate.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = etp_viz.nn.GRUCell(3, 4)
            self.out = etp_viz.nn.Linear(4, 2)

        def update(self, x):
            return self.out(self.rnn(x))

    brainstate.random.seed(0)
    model = Net()
    brainstate.nn.init_all_states(model)
    xs = jnp.asarray(np.random.default_rng(0).standard_normal((STEPS, 3)))
    report = etp_viz.verify(model, xs, algorithm=etp_viz.RTRL(model))
    assert not report.contradictions
    assert report["rnn.Wr"].claim == "exact" and report["rnn.Wr"].relative_error < 1e-10
    assert etp_viz.verify(model, xs)["rnn.Wr"].claim == "none"  # D-RTRL's view of it


@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: a.describe())
def test_snap_is_exact_from_the_coupling_depth_on(arch, x64):
    probe = etp_viz.SnAp(archs.build(arch), 1)
    probe.compile_graph(archs.inputs(arch, 1)[0])
    depth = probe.depth
    for n in range(1, depth + 2):
        alg, err = run(arch, lambda m, n=n: etp_viz.SnAp(m, n))
        kinds = {c.kind for c in alg.graph.gradient_claims(alg).values()}
        if n >= depth:
            assert alg.exact and kinds == {"exact"} and err < 1e-10, (n, err)
        else:
            assert not alg.exact and "approximate" in kinds and err > 1e-6, (n, err)
            check_claims_per_leaf(lambda m, n=n: etp_viz.SnAp(m, n), arch)


def test_snap2_is_rtrl_on_a_dense_single_layer_rnn(x64):
    alg, err = run(ARCHS[0], lambda m: etp_viz.SnAp(m, 2))
    assert alg.depth == 2 and err < 1e-10


def test_uoro_is_unbiased(x64):
    """The mean of UORO's gradient over K projection keys approaches RTRL's (= BPTT's) as
    1/sqrt(K): quadrupling K about halves the error, and 256 keys are within 25 %."""
    arch = ARCHS[0]
    xs = archs.inputs(arch, STEPS)
    model = archs.build(arch)
    expected = bptt_gradients(model, xs, lambda ys: sum(step_loss(y) for y in ys))
    alg = etp_viz.UORO(model)
    alg.compile_graph(xs[0])
    start = {k: s.value for k, s in brainstate.graph.states(model).items()}
    params = alg.param_states

    def sequence():
        def one(x):
            return brainstate.transform.grad(lambda: step_loss(alg(x)), params)()

        grads = brainstate.transform.for_loop(one, xs)
        return jax.tree.map(lambda g: g.sum(0), grads)

    sequence = brainstate.transform.jit(sequence)
    samples = []
    for k in range(256):
        for key, state in brainstate.graph.states(model).items():
            state.value = start[key]
        alg.projection_key = jax.random.PRNGKey(k)
        alg.reset_traces()
        samples.append(dict(sequence()))

    def mean_error(count):
        mean = jax.tree.map(lambda *g: sum(g) / count, *samples[:count])
        return rel_error(mean, expected)

    errors = {k: mean_error(k) for k in (16, 64, 256)}
    assert errors[256] < 0.25, errors
    assert errors[256] < 0.75 * errors[16], errors  # ~1/4 expected (1/sqrt(16)); noise allowed
    claims = alg.graph.gradient_claims(alg)
    assert {c.kind for c in claims.values()} == {"approximate"}


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda m: etp_viz.SnAp(m, 0), "positive integer"),
        (lambda m: etp_viz.SnAp(m, 1.5), "positive"),
    ],
)
def test_bad_snap_order(make, match):
    with pytest.raises(ValueError, match=match):
        make(archs.build(ARCHS[0]))


def test_a_live_session_runs_rtrl():
    from etp_viz.live import Session

    task = etp_viz.tasks.get_task("sine")
    model = task.suggested_model(hidden_size=6)
    session = Session(model, task.example_input(), algorithm=etp_viz.RTRL(model), task=task)
    session.step(8)
    assert session.history.num_steps == 8 and np.isfinite(session.history.loss).all()


def test_ostl_recurrent_is_exact_for_one_layer_and_says_so_for_a_stack(x64):
    """One layer (one hidden group), dense recurrence: OSTL is RTRL. Two layers with a
    cross-layer past: the temporal cross-layer terms are dropped, measurably."""
    alg, err = run(ARCHS[0], etp_viz.OSTLRecurrent)
    assert alg.exact and err < 1e-10
    assert {c.kind for c in alg.graph.gradient_claims(alg).values()} == {"exact"}
    alg, err = run(ARCHS[2], etp_viz.OSTLRecurrent)
    claims = alg.graph.gradient_claims(alg)
    assert not alg.exact and err > 1e-6
    # per leaf: the first layer's weights lose their cross-layer future; the last layer's,
    # whose influence stays in their own layer, and the readout are exact
    assert claims["layers.0.Wcat"].kind == "approximate"
    assert "own layer" in claims["layers.0.Wcat"].reason
    assert claims["Wo"].kind == "exact" and claims["layers.1.Win"].kind == "exact"
    check_claims_per_leaf(etp_viz.OSTLRecurrent, ARCHS[2])


def test_ostl_feedforward_is_the_factorised_trace(x64):
    """OSTL for feed-forward layers factorises the trace into pre x post: ES-D-RTRL's numbers."""
    arch = archs.Arch(layers=(archs.Layer(rec="leaky"),), batch=2, seed=4)
    xs = archs.inputs(arch, STEPS)
    ostl = etp_viz.OSTLFeedforward(archs.build(arch), decay_or_rank=0.5)
    ostl.compile_graph(xs[0])
    es = etp_viz.ES_D_RTRL(archs.build(arch), 0.5)
    es.compile_graph(xs[0])
    assert rel_error(online_gradients(ostl, xs), online_gradients(es, xs)) < 1e-12
    claims = ostl.graph.gradient_claims(ostl)
    assert {c.algorithm for c in claims.values()} == {"ostl_feedforward"}
    assert claims["layers.0.Win"].kind == "approximate"
