"""The conv, linear-variant and extra recurrent layers of etp_viz.nn: shapes, forward values,
what the compiler relates, D-RTRL = BPTT where the recurrence is element-wise, honest
'approximate' claims where it is not, and a consistent explorer view model."""

from __future__ import annotations

import math
import warnings

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from saiunit import sparse as ss

import etp_viz
from etp_viz import nn
from etp_viz.view import build_view_model
from tests.learn.helpers import online_gradients, sequence_loss
from tests.oracles import assert_tree_allclose, bptt_gradients

RTOL = 1e-10  # float64
STEPS = 6


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _sparse_mat():
    mask = jax.random.uniform(jax.random.PRNGKey(5), (3, 4)) < 0.6
    values = jax.random.normal(jax.random.PRNGKey(6), (3, 4))
    return ss.CSR.fromdense(jnp.where(mask, values, 0.0))


#: feed-forward layers: name -> (factory, input shape without batch)
LAYERS = {
    "Conv1d": (lambda: nn.Conv1d((5, 3), 4, 3, b_init=nn.normal(0.1)), (5, 3)),
    "Conv1d_groups_mask": (
        lambda: nn.Conv1d(
            (6, 4),
            4,
            3,
            stride=2,
            groups=2,
            rhs_dilation=2,
            w_mask=jnp.array([1.0, 0.0, 1.0])[:, None, None],
        ),
        (6, 4),
    ),
    "Conv2d": (lambda: nn.Conv2d((4, 4, 2), 3, (3, 2), stride=2, b_init=nn.normal(0.1)), (4, 4, 2)),
    "Conv3d": (lambda: nn.Conv3d((3, 3, 3, 2), 2, 2, padding="VALID"), (3, 3, 3, 2)),
    "SignedWLinear": (
        lambda: nn.SignedWLinear(3, 4, w_sign=jnp.array([1.0, -1.0, 1.0])[:, None]),
        (3,),
    ),
    "ScaledWSLinear": (lambda: nn.ScaledWSLinear(3, 4, b_init=nn.normal(0.1)), (3,)),
    "SparseLinear": (lambda: nn.SparseLinear(_sparse_mat(), b_init=nn.normal(0.1)), (3,)),
    "LoRA": (
        lambda: nn.LoRA(3, 2, 4, alpha=0.7, A_init=nn.normal(0.5), base_module=nn.Linear(3, 4)),
        (3,),
    ),
}


class Leaky(brainstate.nn.Module):
    """``h = 0.8 h + tanh(layer(x))``: an element-wise recurrence around a feed-forward layer."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def init_state(self, batch_size=None, **kwargs):
        lead = () if batch_size is None else (batch_size,)
        self.h = brainstate.HiddenState(jnp.zeros((*lead, *self.layer.out_size)))

    def update(self, x):
        self.h.value = 0.8 * self.h.value + jnp.tanh(self.layer(x))
        return self.h.value


#: cells: name -> (factory, input features, output features, hidden names)
EXACT_CELLS = {
    "MiniLSTM": (lambda: nn.MiniLSTM(3, 4), 3, 4, ("h",)),
    "LRUCell": (lambda: nn.LRUCell(3, 4, r_min=0.4, r_max=0.9), 3, 3, ("h_re", "h_im")),
    "CFNCell_input_gates": (lambda: nn.CFNCell(3, 4, recurrent_gates=False), 3, 4, ("h",)),
}
APPROX_CELLS = {
    "URLSTMCell": (lambda: nn.URLSTMCell(3, 4), 3, 4, ("h", "c")),
    "MinimalRNNCell": (lambda: nn.MinimalRNNCell(3, 4), 3, 4, ("h",)),
    "CFNCell": (lambda: nn.CFNCell(3, 4), 3, 4, ("h",)),
}
CELLS = {**EXACT_CELLS, **APPROX_CELLS}

#: weight paths of each cell's ETP relations (readouts excluded)
RELATED = {
    "MiniLSTM": {("Wf", "weight"), ("Wi", "weight"), ("Wh", "weight")},
    "LRUCell": {
        ("nu_log",),
        ("theta_log",),
        ("gamma_log",),
        ("B_re", "weight"),
        ("B_im", "weight"),
    },
    "CFNCell_input_gates": {("W", "weight"), ("Wtheta", "weight"), ("Weta", "weight")},
    "URLSTMCell": {("Wf", "weight"), ("Wr", "weight"), ("Wu", "weight"), ("Wo", "weight")},
    "MinimalRNNCell": {("phi", "weight"), ("Wu", "weight")},
    "CFNCell": {("W", "weight"), ("Wtheta", "weight"), ("Weta", "weight")},
}
READOUTS = {"LRUCell": {("C_re", "weight"), ("C_im", "weight"), ("D",)}}


def _lead(batch_size):
    return () if batch_size is None else (batch_size,)


def build_layer(name, batch_size=None):
    brainstate.random.seed(0)
    model = Leaky(LAYERS[name][0]())
    brainstate.nn.init_all_states(model, batch_size=batch_size)
    return model


def build_cell(name, batch_size=None):
    brainstate.random.seed(0)
    model = CELLS[name][0]()
    brainstate.nn.init_all_states(model, batch_size=batch_size)
    return model


def layer_inputs(name, steps, batch_size=None, seed=1):
    shape = (steps, *_lead(batch_size), *LAYERS[name][1])
    return jax.random.normal(jax.random.PRNGKey(seed), shape)


def cell_inputs(name, steps, batch_size=None, seed=1):
    shape = (steps, *_lead(batch_size), CELLS[name][1])
    return jax.random.normal(jax.random.PRNGKey(seed), shape)


def _param_paths(model):
    return set(model.states(brainstate.ParamState).keys())


# ---------------------------------------------------------------- shapes and forward values


@pytest.mark.parametrize("batch_size", [None, 2])
@pytest.mark.parametrize("name", list(LAYERS))
def test_layer_forward_shape(name, batch_size):
    brainstate.random.seed(0)
    layer = LAYERS[name][0]()
    x = jnp.ones((*_lead(batch_size), *LAYERS[name][1]))
    y = layer(x)
    assert y.shape == (*_lead(batch_size), *layer.out_size)
    assert bool(jnp.all(jnp.isfinite(y)))


@pytest.mark.parametrize("batch_size", [None, 2])
@pytest.mark.parametrize("name", list(CELLS))
def test_cell_forward_shape_and_states(name, batch_size):
    model = build_cell(name, batch_size)
    _, _, num_out, states = CELLS[name]
    y = model(cell_inputs(name, 1, batch_size)[0])
    assert y.shape == (*_lead(batch_size), num_out)
    hidden = model.states(brainstate.HiddenState)
    assert sorted(path[-1] for path in hidden.keys()) == sorted(states)
    for state in hidden.values():
        assert state.value.shape == (*_lead(batch_size), model.num_out)
    brainstate.nn.reset_all_states(model, batch_size=3)
    assert model(cell_inputs(name, 1, 3)[0]).shape == (3, num_out)


def _conv_reference(layer, x):
    params = layer.weight.value
    kernel = params["weight"] if layer.w_mask is None else params["weight"] * layer.w_mask
    y = lax.conv_general_dilated(
        x,
        kernel,
        layer.stride,
        layer.padding,
        layer.lhs_dilation,
        layer.rhs_dilation,
        lax.conv_dimension_numbers(x.shape, kernel.shape, layer.dimension_numbers),
        layer.groups,
    )
    return y + params["bias"] if "bias" in params else y


@pytest.mark.parametrize("name", [n for n in LAYERS if n.startswith("Conv")])
def test_conv_matches_lax(name):
    brainstate.random.seed(0)
    layer = LAYERS[name][0]()
    x = jax.random.normal(jax.random.PRNGKey(2), (2, *LAYERS[name][1]))
    np.testing.assert_allclose(layer(x), _conv_reference(layer, x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer(x[0]), _conv_reference(layer, x[:1])[0], rtol=1e-5, atol=1e-6)


def test_conv_rejects_wrong_input_and_in_size():
    with pytest.raises(ValueError, match="in_size"):
        nn.Conv2d((8, 3), 4, 3)
    with pytest.raises(ValueError, match="divisible"):
        nn.Conv1d((8, 3), 4, 3, groups=2)
    with pytest.raises(ValueError, match="channels-last"):
        nn.Conv1d((8, 3), 4, 3)(jnp.ones((3, 8)))


def test_linear_variants_match_plain_jnp():
    brainstate.random.seed(0)
    x = jax.random.normal(jax.random.PRNGKey(2), (5, 3))

    sign = jnp.array([1.0, -1.0, 1.0])[:, None]
    signed = nn.SignedWLinear(3, 4, w_sign=sign)
    w = signed.weight.value["weight"]
    np.testing.assert_allclose(signed(x), x @ (jnp.abs(w) * sign), rtol=1e-6)
    assert bool(jnp.all(nn.SignedWLinear(3, 4)(jnp.abs(x)) >= 0))

    ws = nn.ScaledWSLinear(3, 4, b_init=nn.normal(0.1))
    ws.weight.value = {**ws.weight.value, "gain": jnp.arange(1.0, 5.0)[None]}
    p = ws.weight.value
    mean, var = p["weight"].mean(0, keepdims=True), p["weight"].var(0, keepdims=True)
    w_hat = p["gain"] * (p["weight"] - mean) / jnp.sqrt(jnp.maximum(3 * var, 1e-4))
    np.testing.assert_allclose(ws(x), x @ w_hat + p["bias"], rtol=1e-5, atol=1e-6)
    assert "gain" not in nn.ScaledWSLinear(3, 4, ws_gain=False).weight.value

    mat = _sparse_mat()
    sparse = nn.SparseLinear(mat, b_init=nn.normal(0.1))
    expected = x @ mat.todense() + sparse.weight.value["bias"]
    np.testing.assert_allclose(sparse(x), expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="rows"):
        nn.SparseLinear(mat, in_size=5)

    base = nn.Linear(3, 4)
    lora = nn.LoRA(3, 2, 4, alpha=0.7, A_init=nn.normal(0.5), base_module=base)
    p = lora.weight.value
    expected = 0.7 * x @ p["lora_b"] @ p["lora_a"] + base(x)
    np.testing.assert_allclose(lora(x), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(nn.LoRA(3, 2, 4)(x), jnp.zeros((5, 4)))  # A starts at zero


def test_lru_forward_matches_complex_arithmetic():
    model = build_cell("LRUCell")
    xs = cell_inputs("LRUCell", 3)
    lam = jnp.exp(-jnp.exp(model.nu_log.value) + 1j * jnp.exp(model.theta_log.value))
    gamma = jnp.exp(model.gamma_log.value)
    b = model.B_re.weight.value["weight"] + 1j * model.B_im.weight.value["weight"]
    c = model.C_re.weight.value["weight"] + 1j * model.C_im.weight.value["weight"]
    h = jnp.zeros(4, jnp.complex64)
    for x in xs:
        h = lam * h + gamma * (x @ b)
        np.testing.assert_allclose(model(x), jnp.real(h @ c) + model.D.value * x, atol=1e-5)
    assert bool(jnp.all(jnp.abs(lam) >= 0.4 - 1e-6)) and bool(jnp.all(jnp.abs(lam) <= 0.9 + 1e-6))


def test_minilstm_gates_are_normalised():
    model = build_cell("MiniLSTM")
    x = cell_inputs("MiniLSTM", 1)[0]
    f = jax.nn.sigmoid(model.Wf(x))
    i = jax.nn.sigmoid(model.Wi(x))
    h = model.Wh(x)
    first = model(x)
    np.testing.assert_allclose(first, i / (f + i) * h, rtol=1e-6)
    np.testing.assert_allclose(model(x), f / (f + i) * first + i / (f + i) * h, rtol=1e-6)


# ---------------------------------------------------------------- what the compiler relates


@pytest.mark.parametrize("batch_size", [None, 2])
@pytest.mark.parametrize("name", list(LAYERS))
def test_compiler_relates_every_layer_weight(name, batch_size):
    model = build_layer(name, batch_size)
    graph = etp_viz.compile_etrace_graph(model, layer_inputs(name, 1, batch_size)[0])
    params = _param_paths(model)
    assert {r.weight_path for r in graph.hidden_param_op_relations} == params
    assert graph.weight_status == dict.fromkeys(params, "online")
    claims = graph.gradient_claims("d_rtrl")
    assert claims and all(c.kind == "exact" for c in claims.values()), claims
    assert build_view_model(graph).check_references() == []


@pytest.mark.parametrize("batch_size", [None, 2])
@pytest.mark.parametrize("name", list(CELLS))
def test_compiler_relates_every_cell_weight(name, batch_size):
    model = build_cell(name, batch_size)
    graph = etp_viz.compile_etrace_graph(model, cell_inputs(name, 1, batch_size)[0])
    readouts = READOUTS.get(name, set())
    assert {r.weight_path for r in graph.hidden_param_op_relations} == RELATED[name]
    assert RELATED[name] | readouts == _param_paths(model)
    expected_status = {**dict.fromkeys(RELATED[name], "online"), **dict.fromkeys(readouts, "exact")}
    assert graph.weight_status == expected_status
    assert [len(g.hidden_paths) for g in graph.hidden_groups] == [len(CELLS[name][3])]
    assert build_view_model(graph).check_references() == []


def test_explain_names_the_new_relations(capsys):
    model = build_cell("LRUCell")
    graph = etp_viz.compile_etrace_graph(model, cell_inputs("LRUCell", 1)[0])
    graph.explain()
    out = capsys.readouterr().out
    assert "GRADIENT CLAIMS (d_rtrl)" in out
    for path in ("nu_log", "theta_log", "gamma_log", "B_re.weight", "C_re.weight"):
        assert f"{path}: exact" in out


# ---------------------------------------------------------------- D-RTRL vs BPTT


def _assert_d_rtrl_equals_bptt(model, xs):
    expected = bptt_gradients(model, xs, sequence_loss)
    alg = etp_viz.D_RTRL(model)
    alg.compile_graph(xs[0])
    online = online_gradients(alg, xs)
    assert set(online) == set(expected)
    assert_tree_allclose(online, expected, rtol=RTOL)
    assert any(float(jnp.abs(leaf).max()) > 0 for leaf in jax.tree.leaves(expected))


@pytest.mark.parametrize("batch_size", [None, 2])
@pytest.mark.parametrize("name", list(LAYERS))
def test_layer_d_rtrl_equals_bptt(x64, name, batch_size):
    if batch_size is None and name.startswith("Conv"):
        # the conv primitive always has a batch axis; the learners need y shaped like h
        batch_size = 1
    model = build_layer(name, batch_size)
    _assert_d_rtrl_equals_bptt(model, layer_inputs(name, STEPS, batch_size))


@pytest.mark.parametrize("batch_size", [None, 2])
@pytest.mark.parametrize("name", list(EXACT_CELLS))
def test_elementwise_cell_d_rtrl_equals_bptt(x64, name, batch_size):
    model = build_cell(name, batch_size)
    xs = cell_inputs(name, STEPS, batch_size)
    graph = etp_viz.compile_etrace_graph(model, xs[0])
    claims = graph.gradient_claims("d_rtrl")
    assert all(c.kind == "exact" for c in claims.values()), claims
    _assert_d_rtrl_equals_bptt(model, xs)


@pytest.mark.parametrize("name", list(APPROX_CELLS))
def test_dense_recurrence_cells_claim_approximate_and_verify(x64, name):
    model = build_cell(name, batch_size=2)
    xs = cell_inputs(name, STEPS, batch_size=2)
    graph = etp_viz.compile_etrace_graph(model, xs[0])
    claims = graph.gradient_claims("d_rtrl")
    recurrent = {k: c for k, c in claims.items() if c.online}
    assert {tuple(c.weight_path[:-1]) for c in recurrent.values()} == {
        p[:-1] for p in RELATED[name]
    }
    for key, claim in recurrent.items():
        assert claim.kind == "approximate", (key, claim)
        assert "h→h" in claim.reason or "h → h" in claim.reason
    report = etp_viz.verify(model, xs)
    assert not report.contradictions, report.table()
    assert {row.claim for row in report.rows} == {"approximate"}
    assert all(math.isfinite(row.relative_error) for row in report.rows)
