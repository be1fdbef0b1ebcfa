"""Structural: the compiled ES-D-RTRL training step does the least work its gradient needs.

Per dense cell family a ``brainstate.transform.for_loop`` of online ES-D-RTRL steps with an
SGD update is compiled on CPU, as ``bench/vs_braintrace.py``'s online harness does, and the
while-loop body of XLA's optimised HLO is read (issue 43, where the GRU and tanh RNN steps at
n = 256 were compared with braintrace 0.2.8's: the same fusions, dots and copies, so there is
no extra work left there to remove; ``bench/README.md``). Per step it must hold

* exactly one weight-gradient contraction (a ``dot`` producing a weight-shaped array) per
  learned ETP relation and one for the readout: one ``xy_to_dw`` per relation, not one per
  (relation, state) or per (relation, group), and none for a weight not learned online (the
  GRU's reset gate ``Wr``, which reaches ``h`` only through the ``Wh`` ETP op);
* no ``transpose`` (the input trace's layout is the one the contraction reads);
* no ``copy`` of a carried trace (a trace updated in place).

Found and not removed (strict xfails below): the LSTM (S = 2) copies each of its four df
traces every step (the update of state ``a`` reads the old trace at both states, so XLA builds
it in a temporary; the D-RTRL LSTM has the same copy, ``test_hlo_copies.py``), and the
recurrent LIF copies its df trace (XLA duplicates the trace update into a later fusion that
reads the old trace after the in-place update). Both are ``(batch, n, S)`` arrays, small
beside the step's weight-sized dots.
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

BATCH, NUM_IN, NUM_HID, NUM_OUT, STEPS = 16, 16, 64, 4, 4

CELLS = {
    "tanh_rnn": lambda: nn.ValinaRNNCell(NUM_IN, NUM_HID, "tanh"),
    "gru": lambda: nn.GRUCell(NUM_IN, NUM_HID),
    "mgu": lambda: nn.MGUCell(NUM_IN, NUM_HID),
    "lstm": lambda: nn.LSTMCell(NUM_IN, NUM_HID),
    "lif": lambda: nn.LIF(NUM_IN, NUM_HID, recurrent=True),
}
#: learned ETP relations with a 2-D weight per cell (the GRU's Wr: not learned online)
WEIGHT_RELATIONS = {"tanh_rnn": 1, "gru": 2, "mgu": 2, "lstm": 4, "lif": 1}
COPIES_DF_TRACES = pytest.mark.xfail(
    strict=True, reason="the df trace is copied every step (module docstring)"
)

_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_SHAPE = re.compile(r"^%\S+ = \w+\[([\d,]*)\]")


class Net(brainstate.nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.cell = cell
        self.out = nn.Linear(NUM_HID, NUM_OUT)

    def update(self, x):
        return self.out(self.cell(x))


def _computations(text: str) -> dict[str, list[str]]:
    comps: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header and not line[:1].isspace():
            current = header.group(2)
            comps[current] = []
        elif line.strip() == "}":
            current = None
        elif current is not None:
            comps[current].append(re.sub(r", metadata=\{.*", "", line.strip()))
    return comps


def _compiled_step(name: str):
    """``(learner, {computation: lines}, loop body lines)`` of the online SGD harness."""
    brainstate.random.seed(0)
    model = Net(CELLS[name]())
    brainstate.nn.init_all_states(model, batch_size=BATCH)
    xs = jax.random.normal(jax.random.PRNGKey(0), (STEPS, BATCH, NUM_IN))
    alg = etp_viz.ES_D_RTRL(model, 0.9)
    alg.compile_graph(xs[0])
    grad_step = brainstate.transform.grad(lambda x: jnp.sum(alg(x) ** 2), alg.param_states)

    def sgd_step(x):
        grads = grad_step(x)
        for path, state in alg.param_states.items():
            state.value = jax.tree.map(lambda w, g: w - 0.01 * g, state.value, grads[path])

    def train(xs):
        brainstate.transform.for_loop(sgd_step, xs)

    comps = _computations(brainstate.transform.jit(train).lower(xs).compile().as_text())
    bodies = [m.group(1) for lines in comps.values() for line in lines
              for m in [re.search(r"\bwhile\(.*?body=%?([\w.\-]+)", line)] if m]  # fmt: skip
    # the loop over time steps is the largest: with most of XLA's optimisations off, as the
    # suite runs, the LSTM keeps a small second loop (13 instructions, over its two states)
    assert bodies, "expected a loop over time steps"
    step = max(bodies, key=lambda body: len(comps[body]))
    assert all(len(comps[b]) < len(comps[step]) / 4 for b in bodies if b != step), bodies
    return alg, comps, comps[step]


def _shape(line: str) -> tuple[int, ...] | None:
    found = _SHAPE.match(line)
    return tuple(int(d) for d in found.group(1).split(",") if d) if found else None


def _weight_dots(alg, comps: dict, body: list[str]) -> list[str]:
    """Body instructions that compute a weight-shaped array with a ``dot`` (bare or inside
    the fusion they call)."""
    shapes = {tuple(leaf.shape) for state in alg.param_states.values()
              for leaf in jax.tree.leaves(state.value) if leaf.ndim == 2}  # fmt: skip

    def has_dot(line: str) -> bool:
        called = re.search(r"calls=%?([\w.\-]+)", line)
        inner = comps.get(called.group(1), []) if called else []
        return " dot(" in line or any(" dot(" in x for x in inner)

    return [line[:120] for line in body if _shape(line) in shapes and has_dot(line)]


def _trace_copies(alg, body: list[str]) -> list[str]:
    shapes = {tuple(leaf.shape) for leaf in jax.tree.leaves(alg.etrace.value)}
    return [line[:120] for line in body if " copy(" in line and _shape(line) in shapes]


@pytest.mark.parametrize("name", list(CELLS))
def test_one_weight_gradient_dot_per_learned_relation_and_no_transpose(name):
    alg, comps, body = _compiled_step(name)
    dots = _weight_dots(alg, comps, body)
    assert len(dots) == WEIGHT_RELATIONS[name] + 1, f"{name}: {dots}"
    assert [line for line in body if " transpose(" in line] == []


@pytest.mark.parametrize(
    "name",
    [
        "tanh_rnn",
        "gru",
        "mgu",
        pytest.param("lstm", marks=COPIES_DF_TRACES),
        pytest.param("lif", marks=COPIES_DF_TRACES),
    ],
)
def test_no_trace_sized_copy_in_the_es_step(name):
    alg, _, body = _compiled_step(name)
    assert _trace_copies(alg, body) == []


def test_the_checks_see_a_per_state_contraction():
    """``es_gradient`` called once per state (what ``es_signal`` replaced) makes one dot per
    (relation, state) on an LSTM: the dot count sees it."""
    from etp_viz.learn.etp import trace_math

    alg, _, _ = _compiled_step("lstm")
    trace_f = jnp.ones((BATCH, NUM_HID, 2))
    trace_x, dl_dh = jnp.ones((BATCH, NUM_IN + NUM_HID)), jnp.ones((BATCH, NUM_HID, 2))
    rel = alg.graph_executor.plan.relations[0]
    weights = {"weight": jnp.ones((NUM_IN + NUM_HID, NUM_HID)), "bias": jnp.ones(NUM_HID)}

    def per_state(trace_x, trace_f, dl_dh):
        parts = [
            trace_math.es_gradient(
                trace_x,
                trace_f[..., a : a + 1],
                dl_dh[..., a : a + 1],
                1.0,
                weights,
                rel.rules,
                (BATCH, NUM_HID),
            )  # fmt: skip
            for a in range(2)
        ]
        return jax.tree.map(jnp.add, *parts)

    text = jax.jit(per_state).lower(trace_x, trace_f, dl_dh).compile().as_text()
    comps = _computations(text)
    entry = [lines for name, lines in comps.items() if "main" in name][-1]
    assert len(_weight_dots(alg, comps, entry)) == 2
