"""Fused gate weights learn online block by block (issue 41; float64).

brainstate's ``GRUCell`` (``Wrz``: reset and update gates in one matrix), ``LSTMCell`` and
``URLSTMCell`` (``W``: four gates) compute several gates with one weight and ``jnp.split``.
Compiled with ``lift=True``, each block of columns is its own relation
(:mod:`etp_viz.compiler.lift.blocks`); the online gradient of the fused weight must equal,
block by block, the gradient of the same cell wired gate by gate (one weight per gate, the
same values) to 1e-9, for D-RTRL and ES-D-RTRL, and equal BPTT where a block is claimed
exact. Each block's claim is checked both ways against the measured gradient (``verify``'s
block rows).
"""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
from tests.learn.helpers import online_gradients, step_loss
from tests.oracles import bptt_gradients

IN, N, STEPS = 3, 4, 6


@pytest.fixture
def x64():
    """float64 parameters and inputs for the whole test (brainstate's precision switches jax
    x64 too)."""
    with brainstate.environ.context(precision=64):
        yield


def _sigmoid(v):
    return jax.nn.sigmoid(v)


class Net(brainstate.nn.Module):
    """A brainstate cell under a brainstate readout."""

    def __init__(self, cell):
        super().__init__()
        self.cell = cell
        self.out = brainstate.nn.Linear(N, 2)

    def update(self, x):
        return self.out(self.cell(x))


class GateCell(brainstate.nn.Module):
    """brainstate's cell of ``kind`` written gate by gate: ``self.gates[k]`` is a Linear of
    ``concat([x, h])`` holding the columns of block ``k`` of the fused weight.
    ``split_input=True`` writes each gate as ``x @ Wx + h @ Wh`` (input rows and recurrent
    rows as two weights)."""

    def __init__(self, kind, fused, split_input=False):
        super().__init__()
        self.kind, self.split_input = kind, split_input
        weight = fused.value["weight"]
        bias = fused.value.get("bias")
        count = weight.shape[1] // N
        self.gates = []
        for k in range(count):
            cols = slice(k * N, (k + 1) * N)
            value = {"weight": weight[:, cols]}
            if bias is not None:
                value["bias"] = bias[cols]
            if split_input:
                value = {
                    "wx": value["weight"][:IN],
                    "wh": value["weight"][IN:],
                    **({"bias": value["bias"]} if bias is not None else {}),
                }
            self.gates.append(brainstate.ParamState(value))

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.zeros(N))
        if self.kind != "GRUCell":
            self.c = brainstate.HiddenState(jnp.zeros(N))

    def _gate(self, k, x, h):
        p = self.gates[k].value
        if self.split_input:
            y = x @ p["wx"] + h @ p["wh"]
        else:
            y = jnp.concatenate([x, h]) @ p["weight"]
        return y + p["bias"] if "bias" in p else y

    def update(self, x):
        h = self.h.value
        if self.kind == "GRUCell":
            r, z = _sigmoid(self._gate(0, x, h)), _sigmoid(self._gate(1, x, h))
            cand = jnp.tanh(self.wh_layer(jnp.concatenate([x, r * h])))
            new = (1 - z) * h + z * cand
        elif self.kind == "LSTMCell":
            i, g, f, o = (self._gate(k, x, h) for k in range(4))
            self.c.value = _sigmoid(f + 1.0) * self.c.value + _sigmoid(i) * jnp.tanh(g)
            new = _sigmoid(o) * jnp.tanh(self.c.value)
        else:  # URLSTMCell
            f, r, u, o = (self._gate(k, x, h) for k in range(4))
            fg = _sigmoid(f + self.bias.value)
            rg = _sigmoid(r - self.bias.value)
            g = 2 * rg * fg + (1 - 2 * rg) * fg**2
            self.c.value = g * self.c.value + (1 - g) * jnp.tanh(u)
            new = _sigmoid(o) * jnp.tanh(self.c.value)
        self.h.value = new
        return new


def _fused_weight(cell, kind):
    return cell.Wrz.weight if kind == "GRUCell" else cell.W.weight


def _models(kind, split_input=False):
    """The brainstate cell in a net, and its gate-by-gate twin with the same values."""
    brainstate.random.seed(3)
    fused = Net(getattr(brainstate.nn, kind)(IN, N))
    brainstate.nn.init_all_states(fused)
    if True:
        twin_cell = GateCell(kind, _fused_weight(fused.cell, kind), split_input)
        if kind == "GRUCell":
            twin_cell.wh_layer = brainstate.nn.Linear(IN + N, N)
            twin_cell.wh_layer.weight.value = fused.cell.Wh.weight.value
        if kind == "URLSTMCell":
            twin_cell.bias = brainstate.ParamState(fused.cell.bias.value)
        twin = Net(twin_cell)
        twin.out.weight.value = fused.out.weight.value
        brainstate.nn.init_all_states(twin)
    return fused, twin


def _xs():
    return jax.random.normal(jax.random.PRNGKey(7), (STEPS, IN), dtype=jnp.float64)


def _grads(model, algorithm):
    alg = etp_viz.learn.registry.resolve(model, algorithm, {"lift": True})
    alg.compile_graph(_xs()[0])
    return {tuple(k): v for k, v in online_gradients(alg, _xs()).items()}


def _gate_path(grads, k):
    return next(p for p in grads if p[:2] == ("cell", "gates") and str(p[2]) == str(k))


def _rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


KINDS = ["GRUCell", "LSTMCell", "URLSTMCell"]


@pytest.mark.parametrize("algorithm", ["d_rtrl", "es_d_rtrl"])
@pytest.mark.parametrize("kind", KINDS)
def test_fused_weight_equals_gate_by_gate_twin(x64, kind, algorithm):
    fused, twin = _models(kind)
    got, want = _grads(fused, algorithm), _grads(twin, algorithm)
    path = ("cell", "Wrz", "weight") if kind == "GRUCell" else ("cell", "W", "weight")
    leaf = got[path]
    count = leaf["weight"].shape[1] // N
    assert count == len(twin.cell.gates)
    for k in range(count):
        cols = slice(k * N, (k + 1) * N)
        gate = want[_gate_path(want, k)]
        # the GRU's reset gate reaches h only through Wh: no online gradient in either
        unlearned = kind == "GRUCell" and k == 0
        for key in gate:
            assert (np.linalg.norm(np.asarray(gate[key])) > 0) != unlearned, (kind, k, key)
            assert _rel(leaf[key][..., cols], gate[key]) < 1e-9, (kind, algorithm, k, key)
    for other in want:  # the readout and the other weights agree too
        if other[:2] != ("cell", "gates") and other in got:
            for a, b in zip(jax.tree.leaves(got[other]), jax.tree.leaves(want[other])):
                assert _rel(a, b) < 1e-9, other


@pytest.mark.parametrize("algorithm", ["d_rtrl", "es_d_rtrl"])
def test_concat_form_equals_input_and_recurrent_rows_as_two_weights(x64, algorithm):
    fused, twin = _models("LSTMCell", split_input=True)
    got, want = _grads(fused, algorithm), _grads(twin, algorithm)
    leaf = got[("cell", "W", "weight")]
    for k in range(4):
        gate = want[_gate_path(want, k)]
        cols = slice(k * N, (k + 1) * N)
        assert _rel(leaf["weight"][:IN, cols], gate["wx"]) < 1e-9
        assert _rel(leaf["weight"][IN:, cols], gate["wh"]) < 1e-9
        assert _rel(leaf["bias"][cols], gate["bias"]) < 1e-9


@pytest.mark.parametrize("kind", [*KINDS, "MGUCell", "ValinaRNNCell"])
def test_every_gate_weight_learns_and_block_claims_hold(x64, kind):
    fused, _ = _models(kind) if kind in KINDS else (None, None)
    if fused is None:
        fused = Net(getattr(brainstate.nn, kind)(IN, N))
        brainstate.nn.init_all_states(fused)
    report = etp_viz.verify(fused, _xs(), algorithm="d_rtrl", lift=True)
    assert not report.contradictions, report.table()
    for row in report.rows:  # every weight of the cell is learned online
        assert row.claim != "none", row
        assert row.online_norm > 0, row
    if kind in KINDS:
        assert report.blocks, "a fused weight reports its blocks"
    if kind == "GRUCell":
        kinds = {row.path: row.claim for row in report.blocks}
        assert kinds["cell.Wrz.weight[..., 0:4] (r)"] == "none"
        assert kinds["cell.Wrz.weight[..., 4:8] (z)"] == "approximate"
        none = next(r for r in report.blocks if r.path == "cell.Wrz.weight[..., 0:4] (r)")
        assert none.online_norm == 0 and none.true_norm > 0
        assert "cell.Wh.weight" in none.reason


class InputGates(brainstate.nn.Module):
    """Two gates from one input weight, meeting h element-wise: D-RTRL is exact on it."""

    def __init__(self, form):
        super().__init__()
        self.form = form
        self.W = brainstate.ParamState(
            jax.random.normal(jax.random.PRNGKey(1), (IN, 2 * N), dtype=jnp.float64) * 0.5
        )
        self.readout = brainstate.nn.Linear(N, 1)

    def init_state(self, batch_size=None, **kwargs):
        shape = (N,) if batch_size is None else (batch_size, N)
        self.h = brainstate.HiddenState(jnp.zeros(shape))

    def update(self, x):
        y = jnp.tanh(x @ self.W.value)
        if self.form == "split":
            a, b = jnp.split(y, 2, axis=-1)
        else:
            a = y[..., :N]
            b = y[..., N:]
        self.h.value = _sigmoid(a) * self.h.value + b
        return self.readout(self.h.value)


@pytest.mark.parametrize("form", ["split", "slices"])
@pytest.mark.parametrize("batch", [None, 2])
def test_exact_blocks_equal_bptt(x64, form, batch):
    model = InputGates(form)
    brainstate.nn.init_all_states(model, batch_size=batch)
    xs = _xs() if batch is None else jnp.stack([_xs(), -_xs()], axis=1)
    claims = etp_viz.compile_etrace_graph(model, xs[0], lift=True).gradient_claims("d_rtrl")
    assert claims["W"].kind == "exact", claims["W"]
    assert [b.label for b in claims["W"].blocks] == ["a", "b"]
    assert [b.kind for b in claims["W"].blocks] == ["exact", "exact"]
    want = bptt_gradients(model, xs, lambda ys: jnp.sum(jax.vmap(step_loss)(ys)))
    alg = etp_viz.D_RTRL(model, lift=True)
    alg.compile_graph(xs[0])
    got = online_gradients(alg, xs)
    assert _rel(got[("W",)], want[("W",)]) < 1e-9


def test_blocks_reading_one_input_share_one_es_input_trace(x64):
    """ES-D-RTRL's input trace depends only on the input: the four blocks of the LSTM's
    ``W`` keep one input trace, not four (the twin test above shows the gradients are those
    of four weights with four traces)."""
    fused, _ = _models("LSTMCell")
    alg = etp_viz.ES_D_RTRL(fused, 0.9, lift=True)
    alg.compile_graph(_xs()[0])
    blocks = {b.eqn_index for b in alg.graph.module_info.blocks}
    gates = [r for r in alg.graph_executor.plan.relations if r.eqn_index in blocks]
    assert len(gates) == 4 and len({id(r.x_var) for r in gates}) == 1
    x_traces = alg.etrace.value["x"]
    assert sum(1 for r in gates if r.index in x_traces) == 1
