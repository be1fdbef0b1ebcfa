"""Mixed-precision traces: ``trace_dtype=jnp.bfloat16`` stores the eligibility traces in
bfloat16, computes each update in the model's float32 and rounds once on store.

* the stored traces really are bfloat16 (and stay so after steps and resets);
* the online gradients equal the float32-trace ones to bfloat16 rounding (relative, a few
  :math:`2^{-8}` over the steps compared);
* the gradient fidelity against BPTT is reported (``-s``) and is that of float32 up to the
  same rounding;
* a non-floating dtype is refused with a message naming the fix.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
import etp_viz.nn as nn
from tests.learn import models
from tests.learn.helpers import online_gradients, sequence_loss, shared
from tests.oracles import assert_tree_allclose, bptt_gradients, relative_error

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

#: bfloat16 keeps 8 significant bits: one rounding is at most 2^-9 relative, 2^-8 = its eps
BF16_EPS = 2.0**-8
STEPS = 8
#: the stored trace is rounded once per step; the error of a leaky trace is a decaying sum of
#: those roundings, and a gradient sums STEPS contractions: a few eps, far below a real bug
RTOL = 4 * BF16_EPS

IN, HID = models.NUM_IN, models.NUM_HID
#: oracle models (tests/learn/models.py and the cells): element-wise recurrences where D-RTRL
#: is exact, gated cells and a spiking one, S = 1 and S = 2
MODELS = {
    "leaky_dense": models.LeakyDense,
    "leaky_elemwise": models.LeakyElemwise,
    "gru": functools.partial(nn.GRUCell, IN, HID),
    "lstm": functools.partial(nn.LSTMCell, IN, HID),
    "lif": functools.partial(nn.LIF, IN, HID, recurrent=True),
    "alif": functools.partial(nn.ALIF, IN, HID, recurrent=True),
}
#: input scale that makes the spiking cells spike within STEPS (else every gradient is zero)
SCALE = {"lif": 10.0, "alif": 10.0}
LEARNERS = {
    "d_rtrl": etp_viz.D_RTRL,
    "es_d_rtrl": functools.partial(etp_viz.ES_D_RTRL, decay_or_rank=0.9),
}


def _model(name: str, batch: int = 2):
    model = models.build(MODELS[name], batch_size=batch)
    return model, SCALE.get(name, 1.0) * models.inputs(model, STEPS, batch)


def _online(name: str, learner: str, trace_dtype):
    """``(model, xs, learner, online gradients)``."""
    model, xs = _model(name)
    alg = LEARNERS[learner](model, trace_dtype=trace_dtype)
    alg.compile_graph(xs[0])
    return model, xs, alg, online_gradients(alg, xs)


# the D-RTRL runs of the fidelity test are those of the bf16-vs-f32 test: each (model, learner,
# trace dtype) run once for the module; the learner's stored traces are kept beside
@shared
def _gradients(name: str, learner: str, trace_dtype):
    """``(online gradients, the stored traces after the run)`` of a fresh model."""
    _, _, alg, got = _online(name, learner, trace_dtype)
    return got, alg.etrace.value


@shared
def _bptt(name: str):
    """BPTT's gradients on the fresh model (the learners' start)."""
    return bptt_gradients(*_model(name), sequence_loss)


def _float_leaves(tree) -> list:
    return [leaf for leaf in jax.tree.leaves(tree) if jnp.issubdtype(leaf.dtype, jnp.floating)]


@pytest.mark.parametrize("learner", sorted(LEARNERS))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_bf16_traces_equal_f32_traces_to_bf16_rounding(name, learner):
    expected, reference = _gradients(name, learner, None)
    got, traces = _gradients(name, learner, jnp.bfloat16)
    assert {leaf.dtype for leaf in _float_leaves(reference)} == {jnp.dtype("float32")}
    assert {leaf.dtype for leaf in _float_leaves(traces)} == {jnp.dtype("bfloat16")}
    # the gradients keep the weights' dtype: only the stored traces are narrow
    assert {leaf.dtype for leaf in jax.tree.leaves(got)} == {jnp.dtype("float32")}
    assert any(np.any(np.asarray(leaf) != 0) for leaf in jax.tree.leaves(expected))
    assert_tree_allclose(got, expected, rtol=RTOL)
    # and the traces themselves: the bf16 ones are the f32 ones, rounded (a few eps)
    for a, e in zip(_float_leaves(traces), _float_leaves(reference)):
        assert relative_error(a, e) <= RTOL


def test_stored_traces_stay_bf16_through_steps_and_resets():
    model, xs, alg, _ = _online("gru", "d_rtrl", "bfloat16")
    alg.reset_traces()
    assert {leaf.dtype for leaf in jax.tree.leaves(alg.etrace.value)} == {jnp.dtype("bfloat16")}
    alg.reset_state()
    alg(xs[0])
    assert {leaf.dtype for leaf in jax.tree.leaves(alg.etrace.value)} == {jnp.dtype("bfloat16")}
    # half the bytes of the float32 traces
    reference = etp_viz.D_RTRL(model)
    reference.compile_graph(xs[0])
    nbytes = [sum(v.nbytes for v in jax.tree.leaves(a.etrace.value)) for a in (alg, reference)]
    assert nbytes[0] * 2 == nbytes[1]


def test_default_trace_dtype_is_the_model_dtype():
    model = models.build(models.LeakyDense, batch_size=2)
    alg = etp_viz.D_RTRL(model)
    assert alg.trace_dtype is None
    alg.compile_graph(models.inputs(model, 1, 2)[0])
    assert {leaf.dtype for leaf in jax.tree.leaves(alg.etrace.value)} == {jnp.dtype("float32")}


@pytest.mark.parametrize("learner", sorted(LEARNERS))
def test_multi_step_window_with_bf16_traces(learner):
    from tests.learn.helpers import multi_step_gradients

    grads = {}
    for dtype in (None, jnp.bfloat16):
        model = models.build(MODELS["gru"], batch_size=2)
        xs = models.inputs(model, STEPS, 2)
        alg = LEARNERS[learner](model, trace_dtype=dtype, vjp_method="multi-step")
        alg.compile_graph(xs[0])
        grads[dtype] = [multi_step_gradients(alg, xs[:4]), multi_step_gradients(alg, xs[4:])]
        assert jax.tree.leaves(alg.etrace.value)[0].dtype == jnp.dtype(dtype or "float32")
    assert_tree_allclose(grads[jnp.bfloat16], grads[None], rtol=RTOL)


@pytest.mark.parametrize("name", ["leaky_dense", "gru", "alif"])
def test_bf16_fidelity_against_bptt_is_reported(name):
    """D-RTRL's fidelity to BPTT with bf16 traces: on the element-wise model (exact in f32)
    the relative error is bf16 rounding; elsewhere it moves by no more than that rounding."""
    errors = {}
    for dtype in (None, jnp.bfloat16):
        got, _ = _gradients(name, "d_rtrl", dtype)
        expected = _bptt(name)
        # the weights the learner learns (GRU's Wr is not learned: its online gradient is 0)
        got = {
            p: v
            for p, v in got.items()
            if p in expected and any(np.any(np.asarray(leaf) != 0) for leaf in jax.tree.leaves(v))
        }
        errors[str(dtype)] = relative_error(got, {p: expected[p] for p in got})
    print(
        f"\n{name}: D-RTRL relative error to BPTT, f32 traces {errors['None']:.2e}, "
        f"bf16 traces {errors[str(jnp.bfloat16)]:.2e}"
    )
    assert errors[str(jnp.bfloat16)] <= errors["None"] + RTOL


@pytest.mark.parametrize("bad", [jnp.int32, "bool", np.uint8])
def test_a_non_floating_trace_dtype_is_refused(bad):
    model = models.build(models.LeakyDense, batch_size=2)
    with pytest.raises(ValueError, match="trace_dtype must be a floating dtype"):
        etp_viz.D_RTRL(model, trace_dtype=bad)
    with pytest.raises(ValueError, match="trace_dtype must be a floating dtype"):
        etp_viz.ES_D_RTRL(model, 0.9, trace_dtype=bad)


def test_a_non_dtype_is_refused():
    model = models.build(models.LeakyDense, batch_size=2)
    with pytest.raises(TypeError, match="trace_dtype must be a floating dtype"):
        etp_viz.D_RTRL(model, trace_dtype="not-a-dtype")
