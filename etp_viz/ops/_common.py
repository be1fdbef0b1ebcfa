"""Helpers shared by the built-in primitive families: avals, the counterpart batching rule."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import brainstate
import jax
import jax.numpy as jnp

from .._compat import Primitive
from ._registry import fallback_batching


def reject_states(op: str, example: str, **arguments: Any) -> None:
    """Raise a TypeError when an argument is a brainstate ``State`` instead of its value.

    ``jnp.asarray(ParamState)`` would otherwise fail deep inside JAX ("Cannot determine dtype" /
    "dtype object is not a valid JAX array type") without naming the op or the argument.
    """
    for name, value in arguments.items():
        if isinstance(value, brainstate.State):
            raise TypeError(
                f"{op}: argument `{name}` is a brainstate {type(value).__name__}, not an array. "
                "ETP ops take the state's current value (the compiler traces that value back "
                f"to its state). Fix: pass `.value`, e.g. `{example}`."
            )


def shape_dtype(var: Any) -> tuple[tuple[int, ...], Any]:
    """``(shape, dtype)`` of a jaxpr Var (``.aval``), a ShapeDtypeStruct or an array."""
    aval = getattr(var, "aval", var)
    return tuple(aval.shape), aval.dtype


def zeros_trace(shape: tuple[int, ...], num_hidden_state: int, dtype: Any) -> jax.Array:
    """A zero trace with a trailing state axis ``S``."""
    return jnp.zeros((*shape, num_hidden_state), dtype=dtype)


def init_pp_output_shaped(x_var, y_var, weight_vars, num_hidden_state: int, **params) -> jax.Array:
    """ES-D-RTRL df trace for every family: ``(*y.shape, S)``."""
    shape, dtype = shape_dtype(y_var)
    return zeros_trace(shape, num_hidden_state, dtype)


def vjp_weights(fwd: Callable[[dict], jax.Array], weights: dict, cotangent: jax.Array) -> dict:
    """One fused VJP of ``fwd`` w.r.t. every trainable array in ``weights``."""
    y, pullback = jax.vjp(fwd, dict(weights))
    return pullback(jnp.asarray(cotangent, dtype=y.dtype))[0]


def counterpart_batcher(source: Primitive, target: Primitive, impl: Callable) -> Callable:
    """Batching rule keeping an ETP marker when only ``x`` (invar 0) is batched.

    ``source`` unbatched (``mv``-like): bind ``target`` (its ``mm`` counterpart) with the vmapped
    axis as the batch axis. ``source is target`` (already batched): fold the vmapped axis into
    the batch axis, bind, and unfold. Anything else (a weight batched) falls back to
    ``vmap(impl)`` with a loud warning.
    """

    def rule(args, dims, **params):
        if any(d is not None for d in dims[1:]):
            return fallback_batching(source, impl, args, dims, **params)
        x = jnp.moveaxis(args[0], dims[0], 0)
        if source is not target:
            return target.bind(x, *args[1:], **params), 0
        lead = x.shape[:-1]
        y = target.bind(x.reshape(-1, x.shape[-1]), *args[1:], **params)
        return y.reshape(*lead, y.shape[-1]), 0

    return rule
