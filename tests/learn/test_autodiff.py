"""Jacobian products through reverse-only rules (:mod:`etp_viz.learn.autodiff`): the reverse
route equals forward mode where both exist, and works through a ``jax.custom_vjp``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from etp_viz.learn.autodiff import jacobian, push_forward


def _smooth(theta, h):
    return jnp.tanh(h @ theta["W"] + theta["b"]) * jnp.sin(h)


@jax.custom_vjp
def _spike(v):
    return (v >= 0).astype(v.dtype)


_spike.defvjp(lambda v: (_spike(v), v), lambda v, g: (g / (1.0 + 2.0 * jnp.abs(v)) ** 2,))


@jax.custom_jvp
def _spike_jvp(v):
    return (v >= 0).astype(v.dtype)


_spike_jvp.defjvp(lambda p, t: (_spike_jvp(p[0]), t[0] / (1.0 + 2.0 * jnp.abs(p[0])) ** 2))


@pytest.fixture
def point(x64):
    rng = np.random.default_rng(0)
    theta = {
        "W": jnp.asarray(rng.standard_normal((3, 3))),
        "b": jnp.asarray(rng.standard_normal(3)),
    }
    return theta, jnp.asarray(rng.standard_normal(3)), jnp.asarray(rng.standard_normal(3))


def test_the_reverse_route_equals_forward_mode(point):
    theta, h, v = point
    forward = push_forward(_smooth, (theta, h), (jax.tree.map(jnp.ones_like, theta), v))
    reverse = push_forward(
        _smooth, (theta, h), (jax.tree.map(jnp.ones_like, theta), v), reverse=True
    )
    np.testing.assert_allclose(reverse[0], forward[0])
    np.testing.assert_allclose(reverse[1], forward[1], rtol=1e-12)
    step = lambda x: _smooth(theta, x)  # noqa: E731
    np.testing.assert_allclose(jacobian(step, h, reverse=True), jax.jacfwd(step)(h), rtol=1e-12)


def test_a_custom_vjp_takes_the_reverse_route_to_the_custom_jvp_twins_values(point):
    theta, h, v = point
    by_vjp = lambda x: 0.8 * x + _spike(x @ theta["W"])  # noqa: E731
    by_jvp = lambda x: 0.8 * x + _spike_jvp(x @ theta["W"])  # noqa: E731
    with pytest.raises(TypeError, match="custom_vjp"):
        jax.jvp(by_vjp, (h,), (v,))
    expected = jax.jvp(by_jvp, (h,), (v,))[1]
    np.testing.assert_allclose(push_forward(by_vjp, (h,), (v,), reverse=True)[1], expected)
    np.testing.assert_allclose(jacobian(by_vjp, h, reverse=True), jax.jacfwd(by_jvp)(h))
