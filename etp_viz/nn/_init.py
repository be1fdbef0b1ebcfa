"""Small parameter initializers and activation lookup shared by the ``etp_viz.nn`` layers.

We keep our own initializers instead of ``brainstate.init`` / ``brainstate.nn.init``: those
moved to ``braintools`` across brainstate versions. Randomness is drawn from
``brainstate.random`` so ``brainstate.random.seed(n)`` makes model construction reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import brainstate
import jax
import jax.numpy as jnp
import numpy as np

#: An initializer: a callable ``shape -> array``, a concrete array, or ``None`` (no parameter).
Initializer = Callable[[tuple[int, ...]], jax.Array] | jax.Array | np.ndarray | float | None


def default_float_dtype() -> jnp.dtype:
    """The floating dtype JAX uses right now (float64 under ``jax_enable_x64``).

    >>> default_float_dtype() in (jnp.float32, jnp.float64)
    True
    """
    return jnp.dtype(jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)


def xavier_normal(shape: tuple[int, ...], gain: float = 1.0) -> jax.Array:
    """Glorot/Xavier normal initializer: ``N(0, gain² · 2 / (fan_in + fan_out))``.

    Examples
    --------
    >>> xavier_normal((3, 4)).shape
    (3, 4)
    """
    fan_in = shape[-2] if len(shape) >= 2 else shape[-1]
    fan_out = shape[-1]
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    return jnp.asarray(brainstate.random.normal(size=shape) * std, default_float_dtype())


def normal(std: float = 1.0, mean: float = 0.0) -> Callable[[tuple[int, ...]], jax.Array]:
    """Normal initializer ``N(mean, std²)``."""

    def init(shape: tuple[int, ...]) -> jax.Array:
        values = brainstate.random.normal(size=shape) * std + mean
        return jnp.asarray(values, default_float_dtype())

    return init


def constant(value: float) -> Callable[[tuple[int, ...]], jax.Array]:
    """Initializer filling every entry with ``value``."""

    def init(shape: tuple[int, ...]) -> jax.Array:
        return jnp.full(shape, value, default_float_dtype())

    return init


def zeros(shape: tuple[int, ...]) -> jax.Array:
    """Zero initializer (usable directly as ``b_init=zeros``)."""
    return jnp.zeros(shape, default_float_dtype())


def make_param(init: Initializer, shape: Sequence[int], what: str = "parameter") -> Any:
    """Materialize ``init`` at ``shape``; ``None`` stays ``None`` (the parameter is absent)."""
    shape = tuple(int(s) for s in shape)
    if init is None:
        return None
    if callable(init):
        value = init(shape)
    elif np.ndim(init) == 0:
        value = jnp.full(shape, init, default_float_dtype())
    else:
        value = jnp.asarray(init, default_float_dtype())
    if tuple(value.shape) != shape:
        raise ValueError(
            f"The initializer for {what} returned shape {tuple(value.shape)}, expected {shape}. "
            f"Pass a callable `shape -> array` or an array of shape {shape}."
        )
    return value


def state_zeros(num_units: int | Sequence[int], batch_size: int | None = None) -> jax.Array:
    """Zeros of shape ``(num_units,)`` or ``(batch_size, num_units)`` for a hidden state."""
    units = (num_units,) if isinstance(num_units, int) else tuple(num_units)
    shape = units if batch_size is None else (int(batch_size), *units)
    return jnp.zeros(shape, default_float_dtype())


ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "tanh": jnp.tanh,
    "sigmoid": jax.nn.sigmoid,
    "relu": jax.nn.relu,
    "gelu": jax.nn.gelu,
    "softplus": jax.nn.softplus,
    "leaky_relu": jax.nn.leaky_relu,
    "elu": jax.nn.elu,
    "silu": jax.nn.silu,
    "identity": lambda x: x,
}


def get_activation(activation: str | Callable[[jax.Array], jax.Array]) -> Callable:
    """Resolve an activation given by name (``'tanh'``) or as a callable."""
    if callable(activation):
        return activation
    if isinstance(activation, str) and activation in ACTIVATIONS:
        return ACTIVATIONS[activation]
    raise ValueError(
        f"Unknown activation {activation!r}. Valid names: {sorted(ACTIVATIONS)}; "
        f"or pass a callable, e.g. activation=jnp.tanh."
    )
