"""Jacobian products that work through every differentiation rule a model may carry.

``jax.jvp`` cannot pass a ``jax.custom_vjp`` (a surrogate spike written the way most spiking
libraries write it); ``jax.vjp`` cannot pass a ``while_loop``. The learners take a forward-mode
product where forward mode is cheaper (the eligibility traces' all-ones ``D_f``, RTRL's
``J_h v``) and fall back to reverse over reverse where the step holds a ``custom_vjp``: the
pull-back ``u -> Jᵀu`` is linear, so its own VJP at any point is ``v -> J v``. Both wings use
this module; which mode a step needs is decided once from its jaxpr
(:func:`etp_viz.compiler._jaxpr.binds`). :class:`StepJacobians` are the influence learners'
lazy products of one step, :func:`output_vjp` the pull-back of its outputs (forward-mode
Jacobians under a ``while_loop``).

Examples
--------
>>> import jax.numpy as jnp
>>> push_forward(jnp.sin, (jnp.zeros(2),), (jnp.ones(2),), reverse=True)[1].tolist()
[1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.tree_util import tree_leaves as leaves

__all__ = ["StepJacobians", "jacobian", "output_vjp", "push_forward"]


def push_forward(
    fn: Callable, primals: Sequence[Any], tangents: Sequence[Any], reverse: bool = False
) -> tuple[Any, Any]:
    """``(fn(*primals), J · tangents)``: ``jax.jvp``, or with ``reverse`` the transpose of the
    VJP (two reverse passes; for a function that binds a ``jax.custom_vjp``).

    Parameters
    ----------
    fn : callable
        A function of the ``primals`` (pytrees of arrays) to a pytree of arrays.
    primals, tangents : sequence
        The point and the direction, one tangent per primal, of the primals' structure.
    reverse : bool
        Take the product by reverse over reverse instead of forward mode.
    """
    primals, tangents = tuple(primals), tuple(tangents)
    if not reverse:
        return jax.jvp(fn, primals, tangents)
    out, pull = jax.vjp(fn, *primals)
    zeros = jax.tree.map(jnp.zeros_like, out)
    # pull is linear in its cotangent: its VJP (at zeros, any point would do) is J
    (product,) = jax.vjp(pull, zeros)[1](tangents)
    return out, product


def jacobian(fn: Callable, x: Any, reverse: bool = False) -> Any:
    """The dense Jacobian of ``fn`` at ``x``: ``jax.jacfwd``, or ``jax.jacrev`` with
    ``reverse`` (a ``custom_vjp`` in ``fn``)."""
    return (jax.jacrev if reverse else jax.jacfwd)(fn)(x)


def output_vjp(fn: Any, *primals: Any, forward: bool = False) -> Any:
    """``cotangent -> (∂/∂primal)ᵀ cotangent`` of the step's outputs ``fn(*primals)``:
    reverse mode, or with ``forward`` (a step with a ``while_loop``, which has no reverse
    mode) the dense forward-mode Jacobians (small models)."""
    if not forward:
        return jax.vjp(fn, *primals)[1]
    jacobians = [jax.jacfwd(fn, argnums=i)(*primals) for i in range(len(primals))]
    zeros = [jnp.zeros_like(p) for p in primals]
    return jax.tree_util.Partial(_pull_forward, jacobians, zeros)


def _pull_forward(jacobians: list, zeros: list, cotangent: Any) -> tuple:
    """``(∂/∂primal)ᵀ cotangent`` from dense forward-mode Jacobians (see
    :func:`output_vjp`)."""
    cot = leaves(cotangent)
    return tuple(
        sum((jnp.tensordot(c, j, axes=jnp.ndim(c)) for c, j in zip(cot, leaves(jac))), zero)
        for zero, jac in zip(zeros, jacobians)
    )


class StepJacobians:
    """Lazy Jacobian products of ``h^t = f(θ, h^{t-1})`` at one point. ``forward_only``: the
    step has no reverse mode (a ``while_loop``); ``reverse_only``: no forward mode (a
    ``jax.custom_vjp``)."""

    def __init__(
        self,
        fn: Any,
        theta: Any,
        hidden: Any,
        forward_only: bool = False,
        reverse_only: bool = False,
    ):
        self.fn, self.theta, self.hidden = fn, theta, hidden
        self.forward_only, self.reverse_only = forward_only, reverse_only

    def jvp_h(self, v: Any) -> Any:
        step = lambda h: self.fn(self.theta, h)  # noqa: E731
        return push_forward(step, (self.hidden,), (v,), reverse=self.reverse_only)[1]

    def vjp_theta(self, u: Any) -> Any:
        return jax.vjp(lambda t: self.fn(t, self.hidden), self.theta)[1](u)[0]

    def jac_h(self) -> Any:
        step = lambda h: self.fn(self.theta, h)  # noqa: E731
        return jacobian(step, self.hidden, reverse=self.reverse_only)

    def jac_theta(self) -> Any:
        """``∂h^t/∂θ``, ``(n, p)``: by reverse mode, one pull-back per hidden value, where there
        are fewer hidden values than parameters (forward mode pushes ``p`` tangents through the
        step: its temporaries are the step's intermediates times ``p``, 12 GB for a GRU of 128
        units at batch 8 against 0.7 GB by reverse mode); forward mode otherwise."""
        fn = lambda t: self.fn(t, self.hidden)  # noqa: E731
        fewer_rows = self.hidden.shape[0] < self.theta.shape[0]
        if self.reverse_only or not self.forward_only and fewer_rows:
            return jax.jacrev(fn)(self.theta)
        return jax.jacfwd(fn)(self.theta)
