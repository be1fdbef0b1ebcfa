"""Structural: a scanned D-RTRL training step updates its carried traces in place.

Per dense cell family (tanh RNN, GRU, LSTM, recurrent LIF) a ``jax.lax.scan`` (brainstate's
``for_loop``) over ``T`` steps of one online gradient and an SGD update is compiled on CPU, as
``bench/train_step.py`` does, and the optimised HLO (``lowered.compile().as_text()``) of every
while-loop body must hold no ``copy`` of a trace-sized array (the shape of a carried trace
leaf): such a copy is one more read and write of the largest array of the step, every step.

Findings (n = 64, batch 16, float32 and bfloat16 traces):

* tanh RNN, GRU, LIF: no trace-sized copy.
* LSTM (two states per hidden position, S = 2): the new trace is built by a fusion whose output
  ``[..., a]`` reads the old trace at ``[..., b]`` for both ``b`` (``D^t`` mixes ``h`` and
  ``c``). XLA lets a loop fusion write over an operand only when every output element reads
  that operand at its own index, so the new trace goes to a temporary and is copied into the
  loop carry: one copy per trace leaf per step (xfail below). Avoiding it needs a layout with
  one array per state updated by one multi-output fusion, or a 2x unrolled loop (ping-pong).
* A recurrent LIF at batch 8 (not 16) also copies: XLA then duplicates the trace update into
  the fusion that applies the weight gradient, which reads the old trace after the in-place
  update (a fusion heuristic that depends on the sizes).
"""

from __future__ import annotations

import re

import brainstate
import jax
import jax.numpy as jnp
import pytest

import etp_viz
import etp_viz.nn as nn

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

BATCH, NUM_IN, NUM_HID, NUM_OUT, STEPS = 16, 16, 64, 4, 6
LEARNING_RATE = 0.01

CELLS = {
    "tanh_rnn": lambda: nn.ValinaRNNCell(NUM_IN, NUM_HID, "tanh"),
    "gru": lambda: nn.GRUCell(NUM_IN, NUM_HID),
    "lstm": lambda: nn.LSTMCell(NUM_IN, NUM_HID),
    "lif": lambda: nn.LIF(NUM_IN, NUM_HID, recurrent=True),
}
LSTM_COPIES = pytest.mark.xfail(
    strict=True,
    reason="S = 2: the trace update reads the old trace at the other state's index, so XLA "
    "builds the new trace in a temporary and copies it into the loop carry (module docstring)",
)


class Net(brainstate.nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.cell = cell
        self.out = nn.Linear(NUM_HID, NUM_OUT)

    def update(self, x):
        return self.out(self.cell(x))


def _learner(name: str, trace_dtype=None):
    brainstate.random.seed(0)
    model = Net(CELLS[name]())
    brainstate.nn.init_all_states(model, batch_size=BATCH)
    xs = jax.random.normal(jax.random.PRNGKey(0), (STEPS, BATCH, NUM_IN))
    alg = etp_viz.D_RTRL(model, trace_dtype=trace_dtype)
    alg.compile_graph(xs[0])
    return alg, xs


def _loop_bodies(alg, xs) -> str:
    """The while-loop bodies of the optimised HLO of a jitted scan of online SGD steps."""
    grad_step = brainstate.transform.grad(lambda x: jnp.sum(alg(x) ** 2), alg.param_states)

    def sgd_step(x):
        grads = grad_step(x)
        for path, state in alg.param_states.items():
            state.value = jax.tree.map(lambda w, g: w - LEARNING_RATE * g, state.value, grads[path])

    def train(xs):
        brainstate.transform.for_loop(sgd_step, xs)

    text = brainstate.transform.jit(train).lower(xs).compile().as_text()
    bodies = []
    for name in re.findall(r"body=(%[\w.\-]+)", text):
        match = re.search(rf"^{re.escape(name)} .*?^}}", text, re.MULTILINE | re.DOTALL)
        bodies.append(match.group(0) if match else "")
    assert any(bodies), "no while loop in the compiled scan"
    return "\n".join(bodies)


def _trace_copies(alg, text: str) -> list[str]:
    """The ``copy`` instructions whose result has the shape and dtype of a carried trace."""
    hlo_dtype = {"float32": "f32", "bfloat16": "bf16", "float64": "f64"}
    shapes = {
        f"{hlo_dtype[leaf.dtype.name]}[{','.join(map(str, leaf.shape))}]"
        for leaf in jax.tree.leaves(alg.etrace.value)
    }
    return [
        line.strip()[:160]
        for line in text.splitlines()
        if re.search(r"\bcopy\(", line) and any(f"= {s}" in line for s in shapes)
    ]


@pytest.mark.parametrize(
    "name", ["tanh_rnn", "gru", pytest.param("lstm", marks=LSTM_COPIES), "lif"]
)
def test_no_trace_sized_copy_in_the_scanned_training_step(name):
    alg, xs = _learner(name)
    copies = _trace_copies(alg, _loop_bodies(alg, xs))
    assert copies == [], f"{name}: the loop body copies a carried trace: {copies}"


@pytest.mark.parametrize("name", ["gru", "lif"])
def test_bf16_traces_are_updated_in_place_too(name):
    alg, xs = _learner(name, jnp.bfloat16)
    assert {leaf.dtype for leaf in jax.tree.leaves(alg.etrace.value)} == {jnp.dtype("bfloat16")}
    copies = _trace_copies(alg, _loop_bodies(alg, xs))
    assert copies == [], f"{name}: the loop body copies a carried bf16 trace: {copies}"


def test_the_check_sees_a_copy_where_there_is_one():
    """The LSTM's copies are found by the same check (so an empty list above means none)."""
    alg, xs = _learner("lstm")
    assert _trace_copies(alg, _loop_bodies(alg, xs))
