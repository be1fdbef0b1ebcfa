"""The learners' public behaviour: readouts, excluded weights, status, jit, errors."""

from __future__ import annotations

import functools
import logging

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
import etp_viz.nn as nn
from tests.learn import models
from tests.learn.helpers import online_gradients, sequence_loss, step_loss
from tests.oracles import assert_tree_allclose, bptt_gradients

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

GRU = functools.partial(nn.GRUCell, models.NUM_IN, models.NUM_HID)
READOUT = ("readout", "weight")
WR = ("cell", "Wr", "weight")


def _gru_learner(alg_cls=etp_viz.D_RTRL, batch=2, steps=5):
    model = models.build(GRU, batch_size=batch)
    xs = models.inputs(model, steps, batch)
    alg = alg_cls(model)
    alg.compile_graph(xs[0])
    return model, alg, xs


def test_readout_gradient_equals_bptt_and_gru_wr_gets_exactly_zero(x64):
    model, alg, xs = _gru_learner()
    expected = bptt_gradients(model, xs, sequence_loss)
    online = online_gradients(alg, xs)
    assert_tree_allclose(online[READOUT], expected[READOUT], rtol=1e-10)
    assert all(np.all(np.asarray(leaf) == 0) for leaf in jax.tree.leaves(online[WR]))
    assert any(np.any(np.asarray(leaf) != 0) for leaf in jax.tree.leaves(expected[WR]))


def test_status_names_every_parameter_and_explain_names_wr(capsys):
    _, alg, _ = _gru_learner()
    status = alg.learning_status
    assert set(status) == set(alg.param_states.keys())
    assert status[READOUT].kind == "readout"
    assert status[("cell", "Wz", "weight")].kind == "online"
    assert status[WR].kind == "not learned" and "Wr" in status[WR].reason
    assert "Wr" in str(status)
    records = alg.graph.explain(weight_path=WR)
    assert records and "Wr" in capsys.readouterr().out


def test_status_agrees_with_the_compiler_weight_status():
    _, alg, _ = _gru_learner()
    names = {"online": "online", "readout": "exact", "not learned": "not_learned"}
    compiler_view = getattr(alg.graph, "weight_status", {}) or {}
    for path, expected in compiler_view.items():
        assert names[alg.learning_status[tuple(path)].kind] == expected, path


def test_get_etrace_of_and_reset_state():
    model, alg, xs = _gru_learner(batch=2)
    alg(xs[0])
    traces = alg.get_etrace_of(alg.param_states[("cell", "Wz", "weight")])
    assert traces and all(
        leaf.shape[0] == 2 and np.any(np.asarray(leaf) != 0) for leaf in jax.tree.leaves(traces)
    )
    assert alg.get_etrace_of("cell.Wz.weight").keys() == traces.keys()
    alg.reset_state()
    assert all(np.all(np.asarray(v) == 0) for v in jax.tree.leaves(alg.etrace.value))
    alg.reset_state(batch_size=3)
    assert alg(jnp.zeros((3, models.NUM_IN))).shape == (3, models.NUM_OUT)


@pytest.mark.parametrize("alg_cls", [etp_viz.D_RTRL, etp_viz.ES_D_RTRL], ids=["d_rtrl", "es"])
def test_float32_batched_under_jit_matches_float64(alg_cls):
    model = models.build(models.LeakyDense, batch_size=3)
    xs = models.inputs(model, 4, 3)
    expected = bptt_gradients(model, xs, sequence_loss)
    alg = alg_cls(model)
    alg.compile_graph(xs[0])
    online = online_gradients(alg, xs, jit=True)
    assert {leaf.dtype for leaf in jax.tree.leaves(online)} == {jnp.dtype("float32")}
    if alg_cls is etp_viz.D_RTRL:
        assert_tree_allclose(online, expected, rtol=1e-4)


def test_no_recompilation_after_the_first_step(caplog):
    model, alg, xs = _gru_learner(steps=6)
    grad_step = brainstate.transform.jit(
        brainstate.transform.grad(lambda x: step_loss(alg(x)), alg.param_states)
    )
    grad_step(xs[0])
    with jax.log_compiles(), caplog.at_level(logging.DEBUG):
        caplog.clear()
        for t in range(1, len(xs)):
            jax.block_until_ready(grad_step(xs[t]))
    compiles = [r.getMessage() for r in caplog.records if "ompil" in r.getMessage()]
    assert compiles == []
    with jax.log_compiles(), caplog.at_level(logging.DEBUG):  # the probe itself works
        caplog.clear()
        jax.jit(lambda v: v * 3.0)(jnp.ones(7))
    assert any("ompil" in r.getMessage() for r in caplog.records)


def test_stepping_before_compile_graph_is_a_clear_error():
    model = models.build(GRU)
    alg = etp_viz.D_RTRL(model)
    with pytest.raises(RuntimeError, match=r"not compiled: call `alg.compile_graph\(x0\)`"):
        alg(jnp.zeros(models.NUM_IN))


def test_batch_size_different_from_compiled_is_a_clear_error():
    _, alg, _ = _gru_learner(batch=2)
    with pytest.raises(ValueError, match=r"batch size differs from the compiled one \(2\)"):
        alg(jnp.zeros((5, models.NUM_IN)))


def test_sequence_to_a_single_step_learner_is_a_clear_error():
    _, alg, xs = _gru_learner(batch=2)
    with pytest.raises(ValueError, match="looks like a whole sequence"):
        alg(xs)
    with pytest.raises(ValueError, match="vjp_method='single-step'.*MultiStepData"):
        alg(etp_viz.MultiStepData(xs))  # the plain forward call already refuses it
    grad = brainstate.transform.grad(
        lambda: sequence_loss(alg(etp_viz.MultiStepData(xs))), alg.param_states
    )
    with pytest.raises(ValueError, match="vjp_method='single-step'.*MultiStepData"):
        grad()


def test_bad_decay_and_vjp_method_are_clear_errors():
    model = models.build(GRU)
    with pytest.raises(ValueError, match=r"decay must be in \[0, 1\)"):
        etp_viz.ES_D_RTRL(model, decay_or_rank=1.5)
    with pytest.raises(ValueError, match="vjp_method must be"):
        etp_viz.D_RTRL(model, vjp_method="window")
