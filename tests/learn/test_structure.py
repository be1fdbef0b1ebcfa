"""Structural checks of the compiled online step (no timings: those live in ``bench/``).

* For groups with D != 0 (gated and spiking cells) the D-RTRL gradient contracts the
  parameter-sized trace with dL/dh without an element-wise product reduced over the batch axis
  (``reduce_sum`` of a trace-sized array, a slow strided reduction in XLA): small batches as
  adds of contiguous per-sample slices, larger ones as one ``dot_general`` over the trace.
* No recompilation on the second step, for every cell and primitive family.
"""

from __future__ import annotations

import functools
import logging
import re

import brainstate
import jax
import jax.numpy as jnp
import pytest

import etp_viz
import etp_viz.nn as nn
from etp_viz.ops._common import UNROLL_MAX_BATCH
from tests.learn import models
from tests.learn.helpers import step_loss

pytestmark = pytest.mark.filterwarnings("ignore:.*non-temporal parameter:UserWarning")

IN, HID = models.NUM_IN, models.NUM_HID
GATED_CELLS = {
    "gru": functools.partial(nn.GRUCell, IN, HID),
    "lstm": functools.partial(nn.LSTMCell, IN, HID),
    "mgu": functools.partial(nn.MGUCell, IN, HID),
    "minigru": functools.partial(nn.MiniGRU, IN, HID),
    "lif": functools.partial(nn.LIF, IN, HID, recurrent=True),
    "alif": functools.partial(nn.ALIF, IN, HID, recurrent=True),
}
ALL_CELLS = {"rnn": functools.partial(nn.ValinaRNNCell, IN, HID), **GATED_CELLS}
PRIMITIVE_FAMILIES = {
    "dense": models.LeakyDense,
    "elemwise": models.LeakyElemwise,
    "conv": models.LeakyConv,
    "sparse": models.LeakySparse,
    "lora": models.LeakyLora,
}


def _equations(jaxpr):
    """Every equation of ``jaxpr`` and of the jaxprs nested in its params, depth first."""
    for eqn in jaxpr.eqns:
        yield eqn
        for value in eqn.params.values():
            for sub in value if isinstance(value, tuple | list) else (value,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    yield from _equations(inner)


def _step_jaxpr(cell, batch: int):
    model = models.build(cell, batch_size=batch)
    xs = models.inputs(model, 1, batch)
    alg = etp_viz.D_RTRL(model)
    alg.compile_graph(xs[0])
    grad_step = brainstate.transform.grad(lambda x: step_loss(alg(x)), alg.param_states)
    closed, _ = brainstate.transform.make_jaxpr(grad_step)(xs[0])
    return closed.jaxpr, model


def _trace_size(model, batch: int) -> int:
    """Elements of the smallest D-RTRL weight trace slice of the cell: ``batch * |W|``."""
    states = model.cell.states(brainstate.ParamState).values()
    weights = [leaf for state in states for leaf in jax.tree.leaves(state.value)]
    return batch * min(leaf.size for leaf in weights if leaf.ndim == 2)


def _size(var) -> int:
    shape = getattr(var.aval, "shape", ())
    return int(jnp.prod(jnp.array(shape))) if shape else 1


@pytest.mark.parametrize("batch", [4, UNROLL_MAX_BATCH + 1], ids=["unrolled", "dot_general"])
@pytest.mark.parametrize("name", sorted(GATED_CELLS))
def test_gated_cell_gradient_does_not_reduce_the_trace_elementwise(name, batch):
    jaxpr, model = _step_jaxpr(GATED_CELLS[name], batch)
    big = _trace_size(model, batch)
    equations = list(_equations(jaxpr))
    reduced = [
        e for e in equations if e.primitive.name == "reduce_sum" and _size(e.invars[0]) >= big
    ]
    assert reduced == [], f"{name}: reduce_sum over a trace-sized array: {reduced[:2]}"
    dots = [
        e
        for e in equations
        if e.primitive.name == "dot_general" and max(_size(v) for v in e.invars) >= big
    ]
    if batch > UNROLL_MAX_BATCH:
        assert dots, f"{name}: the trace contraction should be a dot_general"
    else:
        assert dots == [], f"{name}: small batches contract slice by slice, got {dots[:1]}"


def _compiles_after_first_step(alg, xs, caplog) -> list:
    grad_step = brainstate.transform.jit(
        brainstate.transform.grad(lambda x: step_loss(alg(x)), alg.param_states)
    )
    grad_step(xs[0])
    with jax.log_compiles(), caplog.at_level(logging.DEBUG):
        caplog.clear()
        for t in range(1, len(xs)):
            jax.block_until_ready(grad_step(xs[t]))
    return [r.getMessage() for r in caplog.records if "ompil" in r.getMessage()]


CASES = {**ALL_CELLS, **PRIMITIVE_FAMILIES}


@pytest.mark.parametrize("alg_name", ["d_rtrl", "es_d_rtrl"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_no_recompilation_on_the_second_step(name, alg_name, caplog):
    model = models.build(CASES[name], batch_size=2)
    xs = models.inputs(model, 3, 2)
    alg = etp_viz.D_RTRL(model) if alg_name == "d_rtrl" else etp_viz.ES_D_RTRL(model, 0.9)
    alg.compile_graph(xs[0])
    assert _compiles_after_first_step(alg, xs, caplog) == []


#: ALIF and LSTM have S = 2. A recurrent LIF is not here: XLA fuses the trace update a second
#: time into the fusion that writes the step's gradient, which then reads the old trace too,
#: and keeps a copy of it (seen in the compiled HLO, left as is).
SINGLE_STATE_CELLS = ("gru", "mgu", "minigru")


def _compiled_scan_text(alg, xs) -> str:
    """The loop bodies of the optimised HLO of a jitted scan of per-step gradients (the trace
    is a loop carry)."""
    grad_step = brainstate.transform.grad(lambda x: step_loss(alg(x)), alg.param_states)

    def run(xs):
        return brainstate.transform.for_loop(lambda x: grad_step(x), xs)

    text = brainstate.transform.jit(run).lower(xs).compile().as_text()
    bodies = []
    for name in re.findall(r"body=(%[\w.\-]+)", text):
        match = re.search(rf"^{re.escape(name)} .*?^}}", text, re.MULTILINE | re.DOTALL)
        bodies.append(match.group(0) if match else "")
    assert bodies, "no while loop in the compiled scan"
    return "\n".join(bodies)


@pytest.mark.parametrize("name", SINGLE_STATE_CELLS)
def test_single_state_trace_is_updated_in_place(name):
    # S = 1: the trace is scaled in its own (..., 1) layout; a squeeze / expand round trip
    # around the update is a bitcast, and XLA then copies the carried trace every step
    model = models.build(GATED_CELLS[name], batch_size=4)
    xs = models.inputs(model, 3, 4)
    alg = etp_viz.D_RTRL(model)
    alg.compile_graph(xs[0])
    text = _compiled_scan_text(alg, xs)
    shapes = {
        ",".join(map(str, leaf.shape))
        for trace in alg.etrace.value.values()
        for leaf in jax.tree.leaves(trace)
        if leaf.ndim == 4
    }
    assert shapes, f"{name}: no (batch, in, out, S) weight trace"
    copies = [s for s in shapes if re.search(rf"= f32\[{s}\]\S* copy\(", text)]
    assert copies == [], f"{name}: the compiled step copies its trace {copies}"


@pytest.mark.parametrize("alg_name", ["d_rtrl", "es_d_rtrl"])
def test_readout_is_transposed_once(alg_name):
    # the backward pulls dL/dy back through the readout once; the pullback of the relation
    # gradients to the weights is a VJP of its own (no readout dot on a zero cotangent)
    model = models.build(ALL_CELLS["rnn"], batch_size=5)  # no activation shaped like W_out
    xs = models.inputs(model, 1, 5)
    alg = etp_viz.D_RTRL(model) if alg_name == "d_rtrl" else etp_viz.ES_D_RTRL(model, 0.9)
    alg.compile_graph(xs[0])
    grad_step = brainstate.transform.grad(lambda x: step_loss(alg(x)), alg.param_states)
    closed, _ = brainstate.transform.make_jaxpr(grad_step)(xs[0])
    out_cotangent_shape = (5, models.NUM_OUT)  # dL/dy
    dots = [
        e
        for e in _equations(closed.jaxpr)
        if e.primitive.name == "dot_general"
        and any(tuple(v.aval.shape) == out_cotangent_shape for v in e.invars)
    ]
    # dL/dy pulled back once: dL/dh = dL/dy @ W^T and dW = h^T @ dL/dy (was twice, the second
    # time on a zero cotangent)
    assert len(dots) == 2, [str(e)[:120] for e in dots]
