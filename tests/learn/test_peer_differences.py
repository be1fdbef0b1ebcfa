"""Where etp_viz and braintrace 0.2.8 compute different things, the referee says which is right.

Each test pins etp_viz against BPTT (``tests.oracles.bptt_gradients``) or against a recursion
written out here in plain JAX from the ES-D-RTRL update equations; no braintrace is needed.
``tests/ops/test_braintrace_models.py`` shows braintrace's own number on the same models (where
braintrace is installed), and ``docs/semantics.md`` ("Where we differ from braintrace") the
measured errors.

* A weight processed before the ETP primitive (``matmul(x, W * mask)``, ``matmul(x, 2 * W)``):
  the gradient is pulled back to the ``ParamState``, so masked-out entries get exactly 0.
  braintrace 0.2.8 returns the gradient w.r.t. the processed operand.
* ES-D-RTRL on a leaky layer whose hidden state has more than one axis per sample (a conv's
  ``(L, C)``, a grouped layer's ``(G, O)``) with a learnable per-channel leak: etp_viz follows
  the recursion; braintrace 0.2.8's ``ES_D_RTRL`` raises a ``ValueError`` on the leak.
"""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
from tests.learn.helpers import online_gradients
from tests.oracles import bptt_gradients, relative_error

BATCH, STEPS, ALPHA = 4, 6, 0.9
#: fixed masks: every entry whose flat index is a multiple of 3 is masked out
DENSE_MASK = (np.arange(24).reshape(3, 8) % 3 != 0).astype(np.float64)
GROUPED_MASK = (np.arange(24).reshape(2, 3, 4) % 3 != 0).astype(np.float64)


@pytest.fixture
def f64():
    """float64 parameters and inputs (brainstate's precision switches jax x64 too)."""
    with brainstate.environ.context(precision=64):
        yield


def _loss(ys):
    return jnp.sum(ys**2)


class ProcessedLeaky(brainstate.nn.Module):
    """``v = a * v + x @ process(W)`` with a fixed leak ``a``: element-wise recurrence, so D-RTRL
    is exact (equals BPTT). ``kind``: ``mask`` (dense ``W * mask``), ``grouped_mask``
    (``grouped_matmul`` of ``W * mask``) or ``scale`` (dense ``2 * W``). ``ops``: the library
    whose ``matmul`` / ``grouped_matmul`` it binds (etp_viz, or braintrace for the peer test)."""

    def __init__(self, kind, ops=etp_viz):
        super().__init__()
        self.kind, self.ops = kind, ops
        shape = (2, 3, 4) if kind == "grouped_mask" else (3, 8)
        self.shape = (2, 4) if kind == "grouped_mask" else (8,)
        self.W = brainstate.ParamState(brainstate.random.normal(size=shape) / 2)
        self.a = jax.nn.sigmoid(jnp.linspace(-1.0, 1.0, shape[-1]))

    def init_state(self, batch_size=None, **kwargs):
        self.v = brainstate.HiddenState(jnp.zeros((batch_size, *self.shape)))

    def update(self, x):
        w = self.W.value
        if self.kind == "grouped_mask":
            y = self.ops.grouped_matmul(x, w * GROUPED_MASK)
        elif self.kind == "mask":
            y = self.ops.matmul(x, w * DENSE_MASK)
        else:
            y = self.ops.matmul(x, 2.0 * w)
        self.v.value = self.a * self.v.value + y
        return jnp.tanh(self.v.value)


INPUT_SHAPES = {"mask": (3,), "scale": (3,), "grouped_mask": (2, 3)}


def _make(factory):
    brainstate.random.seed(0)
    model = factory()
    brainstate.nn.init_all_states(model, batch_size=BATCH)
    return model


def _inputs(shape):
    return jax.random.normal(jax.random.PRNGKey(1), (STEPS, BATCH, *shape))


def _online(algorithm, model, xs):
    alg = algorithm(model)
    alg.compile_graph(xs[0])
    return online_gradients(alg, xs, loss=_loss)


ALGORITHMS = {"D_RTRL": etp_viz.D_RTRL, "ES_D_RTRL": lambda m: etp_viz.ES_D_RTRL(m, ALPHA)}


@pytest.mark.parametrize("kind", ["mask", "grouped_mask"])
@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_masked_weight_gradient_is_zero_off_the_mask(f64, kind, algorithm):
    """BPTT gives the masked-out entries exactly 0; so does etp_viz (D-RTRL: equal to BPTT).
    braintrace 0.2.8 gives them the gradient of the masked operand (relative error 0.37 / 0.39 vs
    BPTT on this model under D-RTRL)."""
    mask = GROUPED_MASK if kind == "grouped_mask" else DENSE_MASK
    xs = _inputs(INPUT_SHAPES[kind])
    exact = bptt_gradients(_make(lambda: ProcessedLeaky(kind)), xs, _loss)[("W",)]
    got = _online(ALGORITHMS[algorithm], _make(lambda: ProcessedLeaky(kind)), xs)[("W",)]
    assert float(jnp.max(jnp.abs(exact * (1 - mask)))) == 0.0
    assert float(jnp.max(jnp.abs(got * (1 - mask)))) == 0.0
    assert float(jnp.max(jnp.abs(got * mask))) > 0.0
    if algorithm == "D_RTRL":
        assert relative_error(got, exact) <= 1e-10


def test_processed_weight_gradient_is_pulled_back_to_the_param_state(f64):
    """``matmul(x, 2 * W)``: the gradient w.r.t. ``W`` is twice that w.r.t. the operand. etp_viz
    equals BPTT; braintrace 0.2.8 returns the operand's gradient (half of BPTT's)."""
    xs = _inputs((3,))
    exact = bptt_gradients(_make(lambda: ProcessedLeaky("scale")), xs, _loss)[("W",)]
    got = _online(etp_viz.D_RTRL, _make(lambda: ProcessedLeaky("scale")), xs)[("W",)]
    assert relative_error(got, exact) <= 1e-10


# -- ES-D-RTRL on leaky layers with a multi-axis hidden state -------------------------------


class LeakyLayer(brainstate.nn.Module):
    """``v = sigmoid(d) * v + layer(x)``, ``y = tanh(v)``, with ``d`` a learnable per-channel
    leak (shape ``(C,)``) broadcast over the hidden state ``(B, *spatial, C)``."""

    def __init__(self, layer, shape):
        super().__init__()
        self.layer, self.shape = layer, shape
        self.decay = brainstate.ParamState(jnp.linspace(-1.0, 1.0, shape[-1]))

    def init_state(self, batch_size=None, **kwargs):
        self.v = brainstate.HiddenState(jnp.zeros((batch_size, *self.shape)))

    def update(self, x):
        leak = etp_viz.element_wise(self.decay.value, jax.nn.sigmoid)
        self.v.value = leak * self.v.value + self.layer(x)
        return jnp.tanh(self.v.value)


def conv1d_same(x, kernel):
    """The conv of ``etp_viz.nn.Conv1d`` / ``braintrace.nn.Conv1d`` (NWC, WIO, SAME), plain JAX."""
    return jax.lax.conv_general_dilated(
        x, kernel, (1,), "SAME", dimension_numbers=("NWC", "WIO", "NWC")
    )


def grouped_product(x, weight):
    """``y[b, g, o] = sum_i x[b, g, i] W[g, i, o]``, plain JAX."""
    return jnp.einsum("bgi,gio->bgo", x, weight)


def es_d_rtrl_reference(layer_fn, weight, decay, xs, alpha=ALPHA):
    """ES-D-RTRL of ``LeakyLayer`` written out from its update equations (Wang et al.).

    Per weight, ``eps_x = alpha eps_x + x`` (the layer's input) and, on the hidden state's
    shape, ``eps_f = alpha D eps_f + (1 - alpha) D_f`` with ``D = sigmoid(d)``; ``D_f = 1`` for
    the layer, ``D_f = v^{t-1}`` for the leak. The gradient adds, per step t (from 1),
    ``signal = eps_f / (1 - alpha**t) * dL/dv`` pulled back through the layer at ``eps_x``
    (kernel) or summed over the batch and spatial axes times ``sigmoid'(d)`` (leak).
    Returns ``(grad_weight, grad_decay)``.
    """
    leak = jax.nn.sigmoid(decay)
    v = jnp.zeros(layer_fn(xs[0], weight).shape)
    eps_x, eps_w, eps_d = jnp.zeros_like(xs[0]), jnp.zeros_like(v), jnp.zeros_like(v)
    grad_w, grad_d = jnp.zeros_like(weight), jnp.zeros_like(decay)
    for t, x in enumerate(xs, start=1):
        v_prev, v = v, leak * v + layer_fn(x, weight)
        eps_x = alpha * eps_x + x
        eps_w = alpha * leak * eps_w + (1 - alpha)
        eps_d = alpha * leak * eps_d + (1 - alpha) * v_prev
        y = jnp.tanh(v)
        dl_dv = 2 * y * (1 - y**2)
        correction = 1 - alpha**t
        _, pull_back = jax.vjp(layer_fn, eps_x, weight)
        grad_w = grad_w + pull_back(eps_w / correction * dl_dv)[1]
        per_channel = jnp.sum(eps_d / correction * dl_dv, axis=tuple(range(v.ndim - 1)))
        grad_d = grad_d + leak * (1 - leak) * per_channel
    return grad_w, grad_d


LEAKY_LAYERS = {
    "conv": (lambda: etp_viz.nn.Conv1d((6, 3), 4, 3, padding="SAME"), (6, 4), (6, 3), conv1d_same),
    "grouped": (
        lambda: etp_viz.nn.GroupedLinear(3, 4, num_groups=2, b_init=None),
        (2, 4),
        (2, 3),
        grouped_product,
    ),
}


@pytest.mark.parametrize("name", sorted(LEAKY_LAYERS))
def test_es_d_rtrl_on_a_leaky_multi_axis_layer_follows_its_recursion(f64, name):
    """Conv ``(B, L, C)`` and grouped ``(B, G, O)`` hidden states with a ``(C,)`` leak: etp_viz
    keeps the leak's df trace on the hidden state's shape and follows the recursion (kernel and
    leak). braintrace 0.2.8's ``ES_D_RTRL`` raises ``ValueError`` on the leak's relation."""
    layer, shape, in_shape, layer_fn = LEAKY_LAYERS[name]
    xs = _inputs(in_shape)
    model = _make(lambda: LeakyLayer(layer(), shape))
    weight, decay = model.layer.weight.value["weight"], model.decay.value
    want_w, want_d = es_d_rtrl_reference(layer_fn, weight, decay, xs)
    got = _online(ALGORITHMS["ES_D_RTRL"], model, xs)
    assert relative_error(got[("layer", "weight")]["weight"], want_w) <= 1e-10
    assert relative_error(got[("decay",)], want_d) <= 1e-10
    # the case can tell: ES-D-RTRL is not BPTT here, and dropping the leak's df trace is wrong
    exact = bptt_gradients(_make(lambda: LeakyLayer(layer(), shape)), xs, _loss)
    assert relative_error(got[("decay",)], exact[("decay",)]) > 1e-2
