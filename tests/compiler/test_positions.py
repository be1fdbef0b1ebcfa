"""The structural proof that a ``y -> h`` tail's all-ones JVP vanishes
(:func:`etp_viz.compiler._positions.ones_tangent_vanishes`): a proof when it says so, on the
tails a top-level ``cond`` leaves after if-conversion too (issue 29: a LayerNorm after a
``cond`` was claimed approximate at an identically zero online gradient)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from etp_viz.compiler._jaxpr import build_jaxpr, eval_jaxpr
from etp_viz.compiler._positions import ones_tangent_vanishes
from etp_viz.learn.autodiff import push_forward


def _ln(v):
    c = v - v.mean(-1, keepdims=True)
    return c / jnp.sqrt((c**2).mean(-1, keepdims=True) + 1e-5)


@jax.custom_vjp
def _spike(v):
    return (v >= 0).astype(v.dtype)


_spike.defvjp(lambda v: (_spike(v), v), lambda v, g: (g / (1.0 + 2.0 * jnp.abs(v)) ** 2,))


def _tail(fn, *const_examples):
    """``fn(*consts, y)`` as an open jaxpr whose constvars are the consts and whose one invar
    is ``y`` (a relation's tail), with the consts' avals."""
    y = jnp.zeros(4)
    closed = jax.make_jaxpr(fn)(*const_examples, y)
    jaxpr = closed.jaxpr
    count = len(const_examples)
    tail = build_jaxpr(jaxpr.invars[:count], jaxpr.invars[count:], jaxpr.outvars, jaxpr.eqns)
    assert not closed.consts
    return tail, [v.aval for v in jaxpr.invars[:count]], jaxpr.invars[count].aval


def _vanishes_numerically(fn, *consts) -> bool:
    """The all-ones JVP at random points, for every predicate value: identically zero?"""
    rng = np.random.default_rng(0)
    for _ in range(3):
        y = jnp.asarray(rng.standard_normal(4))
        step = lambda v: fn(*consts, v)  # noqa: E731
        tangent = push_forward(step, (y,), (jnp.ones(4),), reverse=True)[1]  # custom_vjp too
        if float(jnp.abs(tangent).max()) > 1e-9:
            return False
    return True


P, B, MASK = np.int32(1), np.ones(4), np.array([True, False, True, False])
#: (name, tail(*consts, y), consts, vanishes): each also checked numerically
CASES = [
    ("layer norm", lambda y: _ln(y), (), True),
    # what if-conversion makes of `cond(p, lambda: -0.5 * y, lambda: b)` before a norm
    (
        "layer norm after a cond",
        lambda p, b, y: _ln(jax.lax.select_n(p, -0.5 * y, b)),
        (P, B),
        True,
    ),
    ("the same, y in both branches", lambda p, y: _ln(jax.lax.select_n(p, y, y)), (P,), True),
    # a custom_vjp's tangent map (custom_lin) of a vanishing tangent vanishes
    ("a custom_vjp spike after a norm", lambda y: _spike(_ln(y)), (), True),
    ("a custom_vjp spike", lambda y: _spike(y), (), False),
    # a per-position mask is no scalar gate: the tangent is not uniform, the norm keeps it
    (
        "layer norm after a per-position select",
        lambda m, b, y: _ln(jnp.where(m, y, b)),
        (MASK, B),
        False,
    ),
    ("a cond without a norm", lambda p, b, y: jax.lax.select_n(p, y, b) * 2.0, (P, B), False),
    # the gated part vanishes, the ungated one does not
    (
        "a gated norm plus y",
        lambda p, b, y: _ln(jax.lax.select_n(p, y, b)) + y,
        (P, B),
        False,
    ),
]


@pytest.mark.parametrize(("name", "fn", "consts", "vanishes"), CASES, ids=[c[0] for c in CASES])
def test_ones_tangent_vanishes_only_where_it_does(x64, name, fn, consts, vanishes):
    consts = tuple(jnp.asarray(c) for c in consts)  # float64 under the fixture
    tail, const_avals, y_aval = _tail(fn, *consts)
    # the tail evaluates as the function does
    y = jnp.linspace(-1.0, 1.0, 4)
    np.testing.assert_allclose(eval_jaxpr(tail, list(consts), y)[0], fn(*consts, y))
    scalar_predicate = bool(consts) and not consts[0].shape
    points = [(jnp.int32(p), *consts[1:]) for p in (0, 1)] if scalar_predicate else [consts]
    assert all(_vanishes_numerically(fn, *values) for values in points) == vanishes, name
    assert ones_tangent_vanishes(tail, const_avals, y_aval) == vanishes, name
