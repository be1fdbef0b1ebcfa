"""Stacked cells whose upper layer reads the lower layer's *new* state element-wise.

The lower layer's weights reach the upper layer's state in the same step through that
element-wise path. The learning signal of the lower layer is already the total same-step
``dL/dh1`` (it carries the path through ``h2``), so the lower weights' traces must stop at
``h1``'s new value: a trace that also followed ``h1 -> h2`` counted that path twice (issue 29;
on a generated architecture, a tanh layer read through a gain by a leaky one, the lower
recurrent weight was 1.90 off BPTT where a hand-written D-RTRL is 0.72). Checked against BPTT
at one step (D-RTRL is exact there) and against a hand-written D-RTRL over a sequence
(float64).
"""

from __future__ import annotations

import functools
import warnings

import brainstate
import jax
import jax.numpy as jnp
import pytest

import etp_viz
from etp_viz.nn import sigmoid_spike
from tests.learn.helpers import online_gradients, sequence_loss
from tests.oracles import assert_tree_allclose, bptt_gradients

N, NUM_IN, NUM_OUT, BATCH = 4, 3, 2, 2
ALPHA, V_TH = 0.8, 0.5


def _normal(seed: int, shape: tuple, scale: float = 0.6) -> jax.Array:
    return scale * jax.random.normal(jax.random.PRNGKey(seed), shape)


# -- one step of each cell, as a plain function of its parameters -------------------------
# ``h_w`` is the previous state read by a weight (an ETP product: a boundary of D-RTRL's
# transition), ``h_e`` the previous state read element-wise (D-RTRL's D is d new / d h_e).
def _drive(p: dict, name: str, x: jax.Array) -> jax.Array:
    """The lower layer's dense input ``x @ W``, the upper layer's one-to-one gain ``x * g``."""
    return x @ p["W" + name] if "W" + name in p else x * p["g" + name]


def tanh_cell(p, x, h_w, h_e):
    return jnp.tanh(_drive(p, "in", x) + h_w @ p["U"])


def gru_cell(p, x, h_w, h_e):
    z = jax.nn.sigmoid(_drive(p, "z", x) + h_w @ p["Uz"])
    candidate = jnp.tanh(_drive(p, "h", x) + h_w @ p["Uh"])
    return (1.0 - z) * h_e + z * candidate


def lif_cell(p, v_spike, v_w, v_e):
    """Membrane potential with a soft reset; the layer's output is ``spike(v)``."""
    return ALPHA * (v_e - V_TH * sigmoid_spike(v_e - V_TH)) + _drive(p, "in", v_spike)


def _lif_out(v):
    return sigmoid_spike(v - V_TH)


CELLS = {
    # name: (cell, lower parameter shapes, upper parameter shapes, layer output)
    "tanh": (tanh_cell, {"Win": (NUM_IN, N), "U": (N, N)}, {"gin": (N,), "U": (N, N)}, None),
    "gru": (
        gru_cell,
        {"Wz": (NUM_IN, N), "Wh": (NUM_IN, N), "Uz": (N, N), "Uh": (N, N)},
        {"gz": (N,), "gh": (N,), "Uz": (N, N), "Uh": (N, N)},
        None,
    ),
    "lif": (lif_cell, {"Win": (NUM_IN, N)}, {"gin": (N,)}, _lif_out),
}


class Layer(brainstate.nn.Module):
    """One cell with its parameters as ParamStates, each used by one ETP op."""

    def __init__(self, cell, shapes: dict, out, seed: int):
        super().__init__()
        self.cell, self.out = cell, out
        self.names = tuple(shapes)
        for k, (name, shape) in enumerate(shapes.items()):
            value = _normal(seed + k, shape) + (1.0 if name.startswith("g") else 0.0)
            setattr(self, name, brainstate.ParamState(value))

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.full((batch_size, N), 0.3))

    def params(self) -> dict:
        return {name: getattr(self, name).value for name in self.names}

    def etp_params(self) -> dict:
        """The same values, each through its ETP op (matrices multiply through
        ``etp_viz.matmul``, see :class:`_EtpParams`; gains pass ``element_wise``)."""
        return {
            n: etp_viz.element_wise(v) if n.startswith("g") else v for n, v in self.params().items()
        }

    def update(self, x):
        h = self.h.value
        self.h.value = self.cell(_EtpParams(self.etp_params()), x, h, h)
        return self.h.value if self.out is None else self.out(self.h.value)


class _EtpParams(dict):
    """Parameters whose matrices multiply through ``etp_viz.matmul`` (``x @ p[name]``)."""

    def __getitem__(self, name):
        value = dict.__getitem__(self, name)
        return _EtpMatrix(value) if value.ndim == 2 else value


class _EtpMatrix:
    def __init__(self, value):
        self.value = value

    def __rmatmul__(self, x):
        return etp_viz.matmul(x, self.value)


class Stack(brainstate.nn.Module):
    """``layers.0 -> layers.1 -> Wo``: two layers of a list are two hidden groups."""

    def __init__(self, name: str):
        super().__init__()
        cell, lower, upper, out = CELLS[name]
        self.layers = [Layer(cell, lower, out, seed=10), Layer(cell, upper, out, seed=20)]
        self.Wo = brainstate.ParamState(_normal(30, (N, NUM_OUT)))

    def update(self, x):
        return etp_viz.matmul(self.layers[1](self.layers[0](x)), self.Wo.value)


def _output(layer: Layer, h: jax.Array) -> jax.Array:
    return h if layer.out is None else layer.out(h)


def _step(layer: Layer, params: dict, x: jax.Array, h_prev: jax.Array) -> tuple:
    """``(new state, D, d new / d params)`` of one layer, the previous state fixed."""

    def step(p, h_e):
        return layer.cell(p, x, h_prev, h_e)

    new, diagonal = jax.jvp(functools.partial(step, params), (h_prev,), (jnp.ones_like(h_prev),))
    return new, diagonal, jax.jacfwd(step)(params, h_prev)


def _decay_add(diagonal: jax.Array, trace: jax.Array, immediate: jax.Array) -> jax.Array:
    return (
        diagonal.reshape(diagonal.shape + (1,) * (trace.ndim - diagonal.ndim)) * trace + immediate
    )


def _contract(delta: jax.Array, grad: jax.Array, trace: jax.Array) -> jax.Array:
    return grad + jnp.tensordot(delta, trace, axes=delta.ndim)


def _upper_loss(model: Stack, params: dict, wo: jax.Array, h2: jax.Array) -> jax.Array:
    return sequence_loss(_output(model.layers[1], h2) @ wo)


def _lower_loss(model: Stack, params: dict, h2_prev, wo: jax.Array, h1: jax.Array) -> jax.Array:
    """``L^t`` as a function of the lower layer's new state: through the upper layer."""
    upper = model.layers[1]
    h2 = upper.cell(params, _output(model.layers[0], h1), h2_prev, h2_prev)
    return _upper_loss(model, params, wo, h2)


def hand_drtrl(model: Stack, xs: jax.Array) -> dict:
    r"""D-RTRL written out for a two-layer stack.

    Per layer and parameter: :math:`\epsilon^t = D^t \epsilon^{t-1} + \partial h^t/\partial
    \theta` (the previous state fixed), with :math:`D^t` the derivative of the new state by
    the previous one read element-wise; the gradient adds :math:`\delta^t \cdot \epsilon^t`
    with :math:`\delta^t` the *total* same-step :math:`dL^t/dh^t` (through the upper layer
    for the lower one). The readout's gradient is exact.
    """
    lower, upper = model.layers
    params = (lower.params(), upper.params())
    wo = model.Wo.value

    def step(carry, x):
        hs, traces, grads, grad_wo = carry
        h1, d1, j1 = _step(lower, params[0], x, hs[0])
        h2, d2, j2 = _step(upper, params[1], _output(lower, h1), hs[1])
        deltas = (
            jax.grad(functools.partial(_lower_loss, model, params[1], hs[1], wo))(h1),
            jax.grad(functools.partial(_upper_loss, model, params[1], wo))(h2),
        )
        grad_wo = grad_wo + jax.grad(lambda w: sequence_loss(_output(upper, h2) @ w))(wo)
        traces = tuple(
            jax.tree.map(functools.partial(_decay_add, d), e, j)
            for d, e, j in zip((d1, d2), traces, (j1, j2))
        )
        grads = tuple(
            jax.tree.map(functools.partial(_contract, delta), g, e)
            for delta, g, e in zip(deltas, grads, traces)
        )
        return ((h1, h2), traces, grads, grad_wo), None

    hs = (lower.h.value, upper.h.value)
    # the first step's trace is its immediate term: a zero trace decays to zero
    traces = tuple(
        jax.tree.map(lambda p: jnp.zeros(hs[0].shape + p.shape, p.dtype), p) for p in params
    )
    grads = tuple(jax.tree.map(jnp.zeros_like, p) for p in params)
    carry = (hs, traces, grads, jnp.zeros_like(wo))
    (_, _, grads, grad_wo), _ = jax.jit(lambda c, xs: jax.lax.scan(step, c, xs))(carry, xs)
    out = {("Wo",): grad_wo}
    for k in (0, 1):
        out.update({("layers", k, n): g for n, g in grads[k].items()})
    return out


def _model(name: str) -> Stack:
    model = Stack(name)
    brainstate.nn.init_all_states(model, batch_size=BATCH)
    return model


def _d_rtrl(model: Stack, xs: jax.Array) -> dict:
    alg = etp_viz.D_RTRL(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alg.compile_graph(xs[0])
    return online_gradients(alg, xs)


@pytest.mark.parametrize("name", list(CELLS))
def test_lower_weights_trace_only_their_own_layer(name):
    model = _model(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = etp_viz.compile_etrace_graph(model, jnp.ones((BATCH, NUM_IN)))
    assert len(graph.hidden_groups) == 2
    lower = [r for r in graph.hidden_param_op_relations if r.weight_path[:2] == ("layers", 0)]
    assert lower and all(
        [g.hidden_paths for g in r.hidden_groups] == [[("layers", 0, "h")]] for r in lower
    )
    assert all("twice" not in claim.reason for claim in graph.gradient_claims().values())


@pytest.mark.parametrize("name", list(CELLS))
def test_one_step_equals_bptt_for_every_layer(x64, name):
    model = _model(name)
    xs = jax.random.normal(jax.random.PRNGKey(1), (1, BATCH, NUM_IN))
    expected = bptt_gradients(model, xs, sequence_loss)
    assert_tree_allclose(_d_rtrl(model, xs), expected, rtol=1e-10)


@pytest.mark.parametrize("name", list(CELLS))
def test_a_sequence_equals_hand_written_d_rtrl(x64, name):
    model = _model(name)
    xs = 1.5 * jax.random.normal(jax.random.PRNGKey(2), (5, BATCH, NUM_IN))
    expected = hand_drtrl(model, xs)
    assert_tree_allclose(_d_rtrl(model, xs), expected, rtol=1e-9)


def test_the_oracle_is_bptt_where_d_rtrl_is_exact(x64):
    """The hand recursion itself, over a sequence, on the LIF stack's upper gain and readout
    (their recurrence is element-wise, nothing reads them back: D-RTRL is exact there)."""
    model = _model("lif")
    xs = 1.5 * jax.random.normal(jax.random.PRNGKey(3), (4, BATCH, NUM_IN))
    expected = bptt_gradients(model, xs, sequence_loss)
    hand = hand_drtrl(model, xs)
    exact = (("Wo",), ("layers", 1, "gin"))
    assert_tree_allclose({p: hand[p] for p in exact}, {p: expected[p] for p in exact})
