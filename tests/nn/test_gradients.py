"""Gradients through each layer equal those of an independent plain-jnp reference (float64)."""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from etp_viz import nn

NUM_IN, NUM_OUT, STEPS = 3, 4, 4
RTOL, ATOL = 1e-10, 1e-12  # float64


def _affine(p, x):
    y = x @ p["weight"]
    return y + p["bias"] if "bias" in p else y


def _cat(x, h):
    return jnp.concatenate([x, h], axis=-1)


def _ref_spike(v, alpha=4.0):
    """Heaviside forward, α σ(αv)(1 - σ(αv)) backward: straight-through, written independently."""
    soft = jax.nn.sigmoid(alpha * v)
    return (v > 0).astype(v.dtype) + soft - jax.lax.stop_gradient(soft)


def ref_valina(m, p, s, x):
    h = jnp.tanh(_affine(p["W"], _cat(x, s["h"])))
    return h, {"h": h}


def ref_gru(m, p, s, x):
    h = s["h"]
    z = jax.nn.sigmoid(_affine(p["Wz"], _cat(x, h)))
    r = jax.nn.sigmoid(_affine(p["Wr"], _cat(x, h)))
    cand = jnp.tanh(_affine(p["Wh"], _cat(x, r * h)))
    h = (1 - z) * h + z * cand
    return h, {"h": h}


def ref_mgu(m, p, s, x):
    h = s["h"]
    f = jax.nn.sigmoid(_affine(p["Wf"], _cat(x, h)))
    cand = jnp.tanh(_affine(p["Wh"], _cat(x, f * h)))
    h = (1 - f) * h + f * cand
    return h, {"h": h}


def ref_lstm(m, p, s, x):
    xh = _cat(x, s["h"])
    i = jax.nn.sigmoid(_affine(p["Wi"], xh))
    g = jnp.tanh(_affine(p["Wg"], xh))
    f = jax.nn.sigmoid(_affine(p["Wf"], xh) + 1.0)
    o = jax.nn.sigmoid(_affine(p["Wo"], xh))
    c = f * s["c"] + i * g
    h = o * jnp.tanh(c)
    return h, {"h": h, "c": c}


def ref_minigru(m, p, s, x):
    z = jax.nn.sigmoid(_affine(p["Wz"], x))
    h = (1 - z) * s["h"] + z * _affine(p["Wh"], x)
    return h, {"h": h}


def ref_readout(m, p, s, x):
    alpha = np.exp(-m.dt / m.tau)
    r = alpha * s["r"] + (1 - alpha) * _affine(p["W"], x)
    return r, {"r": r}


def ref_lif(m, p, s, x):
    alpha = np.exp(-m.dt / m.tau_mem)
    z_prev = _ref_spike(s["V"] - 1.0)
    v = alpha * (s["V"] - z_prev) + (1 - alpha) * _affine(p["W"], _cat(x, z_prev))
    return _ref_spike(v - 1.0), {"V": v}


def ref_alif(m, p, s, x):
    alpha, rho = np.exp(-m.dt / m.tau_mem), np.exp(-m.dt / m.tau_a)
    threshold = 1.0 + m.beta * s["a"]
    z_prev = _ref_spike(s["V"] - threshold)
    v = alpha * (s["V"] - threshold * z_prev) + (1 - alpha) * _affine(p["W"], x)
    a = rho * s["a"] + z_prev
    return _ref_spike(v - (1.0 + m.beta * a)), {"V": v, "a": a}


CASES = [
    (nn.ValinaRNNCell, {}, ref_valina),
    (nn.GRUCell, {}, ref_gru),
    (nn.MGUCell, {}, ref_mgu),
    (nn.LSTMCell, {}, ref_lstm),
    (nn.MiniGRU, {}, ref_minigru),
    (nn.LeakyRateReadout, {"b_init": nn.zeros}, ref_readout),
    (nn.LIF, {"recurrent": True, "tau_mem": 4.0}, ref_lif),
    (nn.ALIF, {"tau_mem": 4.0, "tau_a": 20.0, "beta": 0.5}, ref_alif),
]


def nested_params(model):
    """ParamState values keyed by their attribute path with the trailing 'weight' dropped."""
    out = {}
    for path, state in model.states(brainstate.ParamState).items():
        out[path[0] if len(path) == 2 else path] = state.value
    return out


@pytest.mark.parametrize("batch_size", [None, 2])
@pytest.mark.parametrize("cls, kwargs, reference", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_grad_matches_plain_jnp(x64, cls, kwargs, reference, batch_size):
    brainstate.random.seed(3)
    model = cls(NUM_IN, NUM_OUT, **kwargs)
    brainstate.nn.init_all_states(model, batch_size=batch_size)
    lead = () if batch_size is None else (batch_size,)
    xs = 3.0 * jax.random.normal(jax.random.PRNGKey(0), (STEPS, *lead, NUM_IN), jnp.float64)
    targets = jax.random.normal(jax.random.PRNGKey(1), (STEPS, *lead, NUM_OUT), jnp.float64)
    names = [path[-1] for path in model.states(brainstate.HiddenState).keys()]
    init_states = {name: jnp.zeros((*lead, NUM_OUT), jnp.float64) for name in names}

    def model_loss():
        return sum(jnp.sum((model(x) - y) ** 2) for x, y in zip(xs, targets))

    def reference_loss(params):
        states, total = init_states, 0.0
        for x, y in zip(xs, targets):
            out, states = reference(model, params, states, x)
            total = total + jnp.sum((out - y) ** 2)
        return total

    param_states = model.states(brainstate.ParamState)
    grads = brainstate.transform.grad(model_loss, grad_states=param_states)()
    expected = jax.grad(reference_loss)(nested_params(model))
    assert set(grads) == set(param_states)
    for path, grad in grads.items():
        key = path[0] if len(path) == 2 else path
        for leaf in grad:
            assert grad[leaf].dtype == jnp.float64
            np.testing.assert_allclose(grad[leaf], expected[key][leaf], rtol=RTOL, atol=ATOL)
    assert any(float(jnp.abs(g).max()) > 0 for g in jax.tree.leaves(grads))
