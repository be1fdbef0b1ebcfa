"""Hidden output bypass (issue 12 A): an output that reads hidden values from before the step's
update adds dL^t/dh^{t-1} · e^{t-1} to the online gradient. Float64; oracle BPTT where the
learner is exact, a hand-written recursion where it is approximate by design."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
import etp_viz.nn as nn
from tests.learn import bypass_models as bm
from tests.learn.helpers import (
    multi_step_gradients,
    online_gradients,
    sequence_loss,
    shared,
    step_loss,
)
from tests.oracles import (
    assert_tree_allclose,
    bptt_gradients,
    cosine_similarity_per_param,
)

RTOL = 1e-9

ALGORITHMS = [
    pytest.param(etp_viz.D_RTRL, id="d_rtrl"),
    pytest.param(functools.partial(etp_viz.ES_D_RTRL, decay_or_rank=0.9), id="es_d_rtrl"),
]

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _compiled(alg_cls, model, x0, **kwargs):
    alg = alg_cls(model, **kwargs)
    alg.compile_graph(x0)
    return alg


@pytest.mark.parametrize("batch", [2, None], ids=["mm", "mv"])
def test_spiking_cell_d_rtrl_equals_bptt(x64, batch):
    model = bm.build(bm.SpikingCell, batch)
    xs = bm.inputs(20, batch or 1)
    xs = xs if batch else xs[:, 0]
    checkpoints = (1, 4, 20)
    expected = {t: bptt_gradients(model, xs[:t], sequence_loss) for t in checkpoints}
    alg = _compiled(etp_viz.D_RTRL, model, xs[0])
    assert alg.graph.bypass_hidden == (("v",),)
    online = online_gradients(alg, xs, checkpoints=checkpoints)
    assert float(jnp.abs(expected[20][("W",)]).max()) > 1e-3  # the case the issue reports
    for t in checkpoints:
        assert_tree_allclose(online[t], expected[t], rtol=RTOL)


def test_delayed_readout_on_an_elementwise_gated_cell_equals_bptt(x64):
    model = bm.build(functools.partial(bm.DelayedReadout, nn.MiniGRU))
    xs = bm.inputs(12)
    expected = bptt_gradients(model, xs, sequence_loss)
    online = online_gradients(_compiled(etp_viz.D_RTRL, model, xs[0]), xs)
    assert_tree_allclose(online, expected, rtol=RTOL)


@pytest.mark.parametrize("make", ALGORITHMS)
@pytest.mark.parametrize(
    "cell", [nn.GRUCell, nn.ValinaRNNCell, nn.MiniGRU], ids=["gru", "vanilla_d0", "minigru"]
)
def test_delayed_readout_is_the_undelayed_readout_one_step_later(x64, make, cell):
    """``out_t = f(h_{t-1})``: step t's gradient is dL^t/dh^{t-1} · e^{t-1}, which is exactly
    what the learner gives the undelayed model ``out'_{t-1} = f(h_{t-1})`` at step t-1 (same
    traces, same bias correction). Holds whether or not the learner is exact for the cell
    (GRU: approximate; vanilla RNN: D ≡ 0)."""
    xs = bm.inputs(9)
    delayed = bm.build(functools.partial(bm.DelayedReadout, cell, True))
    undelayed = bm.build(functools.partial(bm.DelayedReadout, cell, False))
    got = online_gradients(_compiled(make, delayed, xs[0]), xs)
    want = online_gradients(_compiled(make, undelayed, xs[0]), xs[:-1])
    cell_params = [p for p in want if p[0] == "cell"]
    assert any(float(jnp.abs(want[p]["weight"]).max()) > 1e-3 for p in cell_params)
    assert_tree_allclose({p: got[p] for p in cell_params}, {p: want[p] for p in cell_params}, 1e-10)


@pytest.mark.parametrize("read_lower", [False, True], ids=["top_reads_old", "both_read_old"])
def test_stacked_top_layer_reading_an_old_state_equals_bptt(x64, read_lower):
    model = bm.build(functools.partial(bm.StackedSpiking, read_lower))
    xs = bm.inputs(10)
    expected = bptt_gradients(model, xs, sequence_loss)
    alg = _compiled(etp_viz.D_RTRL, model, xs[0])
    assert alg.graph.hidden_feeds_hidden
    online = online_gradients(alg, xs)
    top = [p for p in expected if p[0] in ("top", "Wl")]
    assert_tree_allclose({p: online[p] for p in top}, {p: expected[p] for p in top}, RTOL)
    lower = [p for p in expected if p[0] == "lower"]
    if read_lower:
        # the lower layer learns through its own bypass; D-RTRL drops its effect on the top
        # layer's future states (a cross-layer temporal term): compare with BPTT of the model
        # with that effect cut
        detached = bm.build(functools.partial(bm.StackedSpiking, read_lower, detach=True))
        claimed = bptt_gradients(detached, xs, sequence_loss)
        assert float(jnp.abs(claimed[lower[0]]["weight"]).max()) > 1e-3
        assert_tree_allclose({p: online[p] for p in lower}, {p: claimed[p] for p in lower}, RTOL)
    else:  # the lower layer's effect on the loss is a cross-layer temporal term only
        assert all(float(jnp.abs(online[p]["weight"]).max()) == 0.0 for p in lower)


@shared
def _spiking_bptt(steps):
    """BPTT on a fresh spiking cell over ``steps`` inputs: the oracle of both learners below."""
    return bptt_gradients(bm.build(bm.SpikingCell), bm.inputs(steps), sequence_loss)


@pytest.mark.parametrize("make", ALGORITHMS)
def test_multi_step_whole_sequence_from_a_fresh_state_equals_bptt(x64, make):
    model = bm.build(bm.SpikingCell)
    xs = bm.inputs(8)
    expected = _spiking_bptt(8)
    got = multi_step_gradients(_compiled(make, model, xs[0], vjp_method="multi-step"), xs)
    assert_tree_allclose(got, expected, RTOL)


@pytest.mark.parametrize(
    "factory",
    [bm.SpikingCell, functools.partial(bm.DelayedReadout, nn.MiniGRU)],
    ids=["spiking", "delayed_minigru"],
)
def test_multi_step_windows_add_up_to_bptt(x64, factory):
    """The second window enters through e^{t0}, the trace of h^{t0}: its first output reads
    h^{t0} before the update, so dL/dh^{t0} must hold that bypass path (it does: it is the
    window's exact VJP w.r.t. its entry state)."""
    model = bm.build(factory)
    xs = bm.inputs(10)
    expected = bptt_gradients(model, xs, sequence_loss)
    alg = _compiled(etp_viz.D_RTRL, model, xs[0], vjp_method="multi-step")
    first = multi_step_gradients(alg, xs[:4])
    second = multi_step_gradients(alg, xs[4:])
    total = jax.tree.map(jnp.add, first, second)
    assert_tree_allclose(total, expected, RTOL)


def _cell_jacobians(v, a, y):
    """Per unit, ``D[..., new, old]`` of ``(v, a)`` and ``D_f[..., new]`` (w.r.t. ``y``): the
    cell is element-wise, so one JVP with an all-ones tangent per input gives them."""
    ones = jnp.ones_like(v)
    _, d_v = jax.jvp(lambda v_: bm.cell_step(v_, a, y), (v,), (ones,))
    _, d_a = jax.jvp(lambda a_: bm.cell_step(v, a_, y), (a,), (ones,))
    _, d_y = jax.jvp(lambda y_: bm.cell_step(v, a, y_), (y,), (ones,))
    return jnp.stack([jnp.stack(d_v, -1), jnp.stack(d_a, -1)], -1), jnp.stack(d_y, -1)


def _es_reference(model, xs, alpha):
    """ES-D-RTRL on the spiking cell, by hand: the output reads only v^{t-1}, so W's whole
    online gradient is the bypass term xy_to_dw(e_x^{t-1}, e_f^{t-1}/(1-alpha^{k}) ⊙ dL^t/dh^{t-1})
    with k the number of trace updates before step t."""
    W, Wo = model.W.value, model.Wo.value
    v, a = model.v.value, model.a.value
    e_x = jnp.zeros(xs.shape[1:])
    e_f = jnp.zeros((*v.shape, 2))  # states (v, a)
    grad = jnp.zeros_like(W)
    for k, x in enumerate(xs):
        dl_dv = jax.grad(lambda v_prev: step_loss(bm.spike(v_prev) @ Wo))(v)
        if k:
            grad = grad + e_x.T @ (e_f[..., 0] / (1 - alpha**k) * dl_dv)
        y = x @ W
        D, d_y = _cell_jacobians(v, a, y)
        e_x = alpha * e_x + x
        e_f = alpha * jnp.einsum("...ab,...b->...a", D, e_f) + (1 - alpha) * d_y
        v, a = bm.cell_step(v, a, y)
    return grad


def test_es_d_rtrl_bypass_term_matches_a_hand_written_recursion(x64):
    model = bm.build(bm.SpikingCell)
    xs = bm.inputs(15)
    expected = _es_reference(model, xs, 0.9)
    bptt = bptt_gradients(model, xs, sequence_loss)
    online = online_gradients(_compiled(etp_viz.ES_D_RTRL, model, xs[0], decay_or_rank=0.9), xs)
    assert float(jnp.abs(expected).max()) > 1e-3
    assert_tree_allclose(online[("W",)], expected, rtol=1e-10)
    assert_tree_allclose(online[("Wo",)], bptt[("Wo",)], rtol=RTOL)  # a readout: exact
    cosine = cosine_similarity_per_param(online, bptt)
    assert cosine[("W",)] > 0.5, cosine


def test_models_without_bypass_keep_no_previous_trace(x64):
    model = bm.build(bm.PlainGRU)
    alg = _compiled(etp_viz.D_RTRL, model, bm.inputs(1)[0])
    assert alg.graph.bypass_hidden == ()
    assert alg.graph_executor.plan.bypass_groups == ()
    calls = []
    alg.bypass_residuals = lambda *args: calls.append(args)  # never consulted
    online_gradients(alg, bm.inputs(2), jit=False)
    assert calls == []
    assert np.all(np.isfinite(np.asarray(jax.tree.leaves(alg.etrace.value)[0])))
