"""e-prop (issue 15): symmetric feedback without a filter is D-RTRL; the kappa filter and
random feedback match hand-derived updates; its claims say approximate where they change the
gradient; bad arguments name themselves (float64 oracles)."""

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

SINGLE = [
    archs.Arch(layers=(archs.Layer(rec="leaky", bias="etp"),), batch=2, seed=1),
    archs.Arch(layers=(archs.Layer(states=2, rec="dense", act="spike"),), batch=None, seed=2),
    archs.Arch(layers=(archs.Layer(rec="concat", reads="old"),), batch=2, seed=3),
]
STEPS = 6


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _grads(arch, make, steps=STEPS, **kwargs):
    model = archs.build(arch)
    xs = archs.inputs(arch, steps)
    alg = make(model, **kwargs)
    alg.compile_graph(xs[0])
    return online_gradients(alg, xs, jit=False), alg, model, xs


def _assert_trees_close(a, b, rtol):
    for path in b:
        for x, y in zip(jax.tree.leaves(a[path]), jax.tree.leaves(b[path])):
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("arch", SINGLE, ids=lambda a: a.describe())
def test_symmetric_without_filter_is_d_rtrl(arch, x64):
    eprop, *_ = _grads(arch, etp_viz.EProp)
    drtrl, *_ = _grads(arch, etp_viz.D_RTRL)
    _assert_trees_close(eprop, drtrl, 1e-12)


def test_exact_where_d_rtrl_is_exact(x64):
    arch = SINGLE[0]
    eprop, alg, model, xs = _grads(arch, etp_viz.EProp)
    expected = bptt_gradients(archs.build(arch), xs, lambda ys: sum(step_loss(y) for y in ys))
    _assert_trees_close(eprop, expected, 1e-9)
    claims = alg.graph.gradient_claims(alg)
    assert {c.kind for c in claims.values()} == {"exact"}
    assert {c.algorithm for c in claims.values()} == {"eprop"}


def test_kappa_filter_is_the_filtered_trace_sum(x64):
    """sum_t L^t . ebar^t with ebar^t = k ebar^{t-1} + e^t equals, by reordering, the
    D-RTRL per-step contributions g_s = L^s . e^s only when L is constant; in general it is
    sum_t L^t . sum_{s<=t} k^{t-s} e^s. Checked on a leaky cell (e^s = D-RTRL trace) by
    reading the D-RTRL traces step by step."""
    arch = archs.Arch(layers=(archs.Layer(rec="leaky"),), batch=None, seed=5)
    kappa = 0.6
    eprop, *_ = _grads(arch, etp_viz.EProp, kappa_filter_decay=kappa)
    # hand-derived: run D-RTRL, record e^t and L^t = dL^t/dh^t, filter by hand
    model = archs.build(arch)
    xs = archs.inputs(arch, STEPS)
    alg = etp_viz.D_RTRL(model)
    alg.compile_graph(xs[0])
    win = model.layers[0].Win
    path = ("layers", 0, "Win")
    filtered, total = None, None
    for t in range(STEPS):
        h_prev = {k: s.value for k, s in brainstate.graph.states(model).items()}

        def loss_of_h(hvec, x=xs[t], h_prev=h_prev):
            # the loss of this step as a function of the new hidden value (readout only)
            return step_loss(etp_viz.matmul(hvec, model.Wo.value))

        alg(xs[t])
        h_new = model.layers[0].h.value
        signal = jax.grad(loss_of_h)(h_new)
        (trace,) = [v for v in alg.get_etrace_of(win).values()]
        eps = next(iter(trace.values()))[..., 0]  # (in, N) per-weight trace, one state
        filtered = eps if filtered is None else kappa * filtered + eps
        part = filtered * signal[None, :]
        total = part if total is None else total + part
        del h_prev
    np.testing.assert_allclose(np.asarray(eprop[path]), np.asarray(total), rtol=1e-10)
    d_rtrl, *_ = _grads(arch, etp_viz.D_RTRL)
    assert not np.allclose(np.asarray(eprop[path]), np.asarray(d_rtrl[path]))


def test_random_feedback_projects_the_output_error(x64):
    """Random e-prop on cell -> plain readout: the hidden group's learning signal is
    B^T (dL/dy); the readout weight keeps its exact gradient."""
    arch = archs.Arch(layers=(archs.Layer(rec="leaky"),), out="etp", batch=2, seed=7)
    model = archs.build(arch)
    xs = archs.inputs(arch, 1)
    alg = etp_viz.EProp(model, feedback="random", random_feedback_key=3)
    alg.compile_graph(xs[0])
    assert alg.random_groups() == (0,)
    (matrix,) = alg.feedback_matrices.values()
    assert matrix.shape == (2, 3)  # outputs per sample x hidden units per sample

    def loss(x):
        y = alg(x)
        return step_loss(y), y

    grads, y = brainstate.transform.grad(loss, alg.param_states, has_aux=True)(xs[0])
    error = 2 * np.asarray(y)  # d sum(y^2)/dy
    signal = error @ np.asarray(matrix)  # (batch, hidden)
    (trace,) = alg.get_etrace_of(model.layers[0].Win).values()
    eps = np.asarray(next(iter(trace.values())))[..., 0]  # (batch, in, hidden)
    expected = np.einsum("bih,bh->ih", eps, signal)
    np.testing.assert_allclose(np.asarray(grads[("layers", 0, "Win")]), expected, rtol=1e-10)
    exact = bptt_gradients(archs.build(arch), xs, lambda ys: step_loss(ys[0]))
    np.testing.assert_allclose(np.asarray(grads[("Wo",)]), np.asarray(exact[("Wo",)]), rtol=1e-10)
    claims = alg.graph.gradient_claims(alg)
    assert claims["layers.0.Win"].kind == "approximate"
    assert "random feedback" in claims["layers.0.Win"].reason
    assert claims["Wo"].kind == "exact"


def test_leaky_readout_state_keeps_the_exact_signal():
    task = etp_viz.tasks.get_task("sine")
    model = task.suggested_model(hidden_size=8, spiking=True)
    alg = etp_viz.EProp(model, feedback="random")
    alg.compile_graph(task.example_input())
    paths = {g.index: g.hidden_paths for g in alg.graph_executor.plan.groups}
    random = {p for g in alg.random_groups() for p in paths[g]}
    assert random == {("rnn", "V")}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"feedback": "backprop"}, "feedback must be one of"),
        ({"kappa_filter_decay": 1.0}, r"kappa_filter_decay must be in \[0, 1\)"),
        ({"feedback": "random", "vjp_method": "multi-step"}, "single-step"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, match):
    model = archs.build(SINGLE[0])
    with pytest.raises(ValueError, match=match):
        etp_viz.EProp(model, **kwargs)


def test_verify_holds_eprop_to_its_claims(x64):
    arch = SINGLE[0]
    model = archs.build(arch)
    xs = archs.inputs(arch, STEPS)
    for options in ({}, {"kappa_filter_decay": 0.5}, {"feedback": "random"}):
        alg = etp_viz.EProp(model, **options)
        report = etp_viz.verify(model, xs, algorithm=alg)
        assert not report.contradictions, report.table()
        assert report.algorithm == "eprop" or not options


def test_live_session_runs_eprop():
    from etp_viz.live import Session

    task = etp_viz.tasks.get_task("sine")
    model = task.suggested_model(hidden_size=8)
    session = Session(model, task.example_input(), algorithm="eprop", task=task)
    session.step(5)
    assert session.history.num_steps == 5 and np.isfinite(session.history.loss).all()
    assert jnp.ndim(session.history.loss[-1]) == 0


class LeakyGain(brainstate.nn.Module):
    """h = 0.5 h + x W (an ETP matmul), output h: D = 0.5, D_f = 1."""

    def __init__(self):
        super().__init__()
        self.W = brainstate.ParamState(jnp.asarray(np.arange(6.0).reshape(2, 3) / 10))

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.zeros(3))

    def update(self, x):
        self.h.value = 0.5 * self.h.value + etp_viz.matmul(x, self.W.value)
        return self.h.value


def test_three_factor_is_modulator_times_eligibility(x64):
    """Hand-derived: eps^t[i, o] = 0.5 eps^{t-1}[i, o] + x^t[i]; the reported gradient is
    sum_t -M(t) eps^t (whatever the loss)."""
    rewards = jnp.asarray([1.0, -2.0, 0.5, 3.0])
    model = LeakyGain()
    brainstate.nn.init_all_states(model)
    xs = jnp.asarray(np.random.default_rng(0).standard_normal((4, 2)))
    alg = etp_viz.ThreeFactor(model, modulator=lambda t: rewards[t])
    alg.compile_graph(xs[0])
    got = online_gradients(alg, xs)[("W",)]
    eps, expected = np.zeros((2, 3)), np.zeros((2, 3))
    for t in range(4):
        eps = 0.5 * eps + np.asarray(xs[t])[:, None]
        expected -= float(rewards[t]) * eps
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-12)
    claims = alg.graph.gradient_claims(alg)
    assert claims["W"].kind == "approximate" and "three-factor" in claims["W"].reason
    alg.reset_state()
    assert int(alg.etrace.value[(-1,)]) == 0


def test_three_factor_needs_a_function():
    with pytest.raises(TypeError, match="modulator must be a function of the step"):
        etp_viz.ThreeFactor(LeakyGain(), modulator=1.0)


def test_three_factor_runs_live():
    from etp_viz.live import Session

    task = etp_viz.tasks.get_task("sine")
    model = task.suggested_model(hidden_size=8)
    alg = etp_viz.ThreeFactor(model, modulator=lambda t: jnp.cos(0.1 * t))
    session = Session(model, task.example_input(), algorithm=alg, task=task)
    session.step(6)
    assert session.history.num_steps == 6 and np.isfinite(session.history.loss).all()
    assert any(name.startswith("trace/r") for name in session.history.names)
    assert not any("-1" in name for name in session.history.names)  # the step counter
