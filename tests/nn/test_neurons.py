"""Spike functions and spiking-neuron dynamics."""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from etp_viz import nn

XS = jnp.linspace(-2.5, 2.5, 41)


@pytest.mark.parametrize("alpha", [1.0, 4.0, 10.0])
def test_sigmoid_surrogate_derivative_matches_formula(x64, alpha):
    xs = jnp.asarray(XS, jnp.float64)
    grads = jax.vmap(jax.grad(lambda v: nn.sigmoid_spike(v, alpha)))(xs)
    s = 1.0 / (1.0 + np.exp(-alpha * np.asarray(xs)))
    np.testing.assert_allclose(grads, alpha * s * (1 - s), rtol=1e-12)
    np.testing.assert_array_equal(nn.sigmoid_spike(xs, alpha), (np.asarray(xs) > 0).astype(float))


@pytest.mark.parametrize("gamma, width", [(0.3, 1.0), (1.0, 0.5)])
def test_triangle_surrogate_derivative_matches_formula(x64, gamma, width):
    xs = jnp.asarray(XS, jnp.float64)
    grads = jax.vmap(jax.grad(lambda v: nn.triangle_spike(v, gamma, width)))(xs)
    expected = gamma / width * np.maximum(0.0, 1.0 - np.abs(np.asarray(xs)) / width)
    np.testing.assert_allclose(grads, expected, rtol=1e-12, atol=1e-15)


def test_lif_spike_derivative_wrt_potential(x64):
    lif = nn.LIF(2, 3, V_th=2.0)
    brainstate.nn.init_all_states(lif)
    vs = jnp.array([1.0, 2.5, 1.9], jnp.float64)
    grads = jax.grad(lambda v: jnp.sum(lif.spike(v)))(vs)
    np.testing.assert_allclose(grads, nn.sigmoid_surrogate_grad((vs - 2.0) / 2.0) / 2.0, rtol=1e-12)


def test_lif_integrates_fires_and_soft_resets():
    lif = nn.LIF(1, 1, tau_mem=5.0, w_init=jnp.ones((1, 1)))
    brainstate.nn.init_all_states(lif)
    alpha = np.exp(-1 / 5.0)
    spikes, potentials = [], []
    for _ in range(30):
        spikes.append(float(lif(jnp.array([3.0]))[0]))
        potentials.append(float(lif.V.value[0]))
    v, expected_spikes = 0.0, []
    for _ in range(30):
        v = alpha * (v - (v > 1.0)) + (1 - alpha) * 3.0
        expected_spikes.append(float(v > 1.0))
    assert spikes == expected_spikes
    assert 0 < sum(spikes) < 30
    np.testing.assert_allclose(potentials[-1], v, rtol=1e-5)


def test_alif_threshold_adapts():
    alif = nn.ALIF(1, 1, tau_mem=5.0, tau_a=50.0, beta=1.0, w_init=jnp.ones((1, 1)))
    brainstate.nn.init_all_states(alif)
    spikes = [float(alif(jnp.array([4.0]))[0]) for _ in range(60)]
    assert float(alif.a.value[0]) > 0
    assert sum(spikes[:20]) > sum(spikes[40:])


@pytest.mark.parametrize("detach", [False, True])
def test_detach_reset_controls_reset_gradient(x64, detach):
    lif = nn.LIF(1, 1, tau_mem=5.0, detach_reset=detach, w_init=jnp.ones((1, 1)))
    brainstate.nn.init_all_states(lif)
    lif.V.value = jnp.array([1.2], jnp.float64)

    def new_potential(x):
        lif(x)
        return lif.V.value[0]

    grad = brainstate.transform.grad(new_potential, grad_states=lif.V)(jnp.array([0.5]))
    alpha = np.exp(-1 / 5.0)
    surrogate = 0.0 if detach else float(nn.sigmoid_surrogate_grad(jnp.array(0.2)))
    np.testing.assert_allclose(grad, [alpha * (1.0 - surrogate)], rtol=1e-12)
