r"""``etp_elemwise``: an identity marker on a processed weight, and :func:`element_wise`.

``element_wise(w, fn)`` computes ``fn(w)`` *outside* the primitive, so ``fn``'s equations stay
visible in the jaxpr and the compiler can trace the marked value back to its ``ParamState``; the
primitive itself is the identity :math:`y = \tilde w` on the processed weight
:math:`\tilde w = fn(w)`. It is the only gradient-enabled built-in (the compiler may walk through
it on ``y -> h``), has no input ``x`` (``x_invar_index=None``) and one trainable invar
``{'weight': 0}`` (the processed value).

With :math:`g = \partial h/\partial y` (y-shaped), the trace is
:math:`\epsilon = \partial h/\partial \tilde w` (y-shaped):
``xy_to_etrace = xy_to_dw = g``, ``yw_to_w: \epsilon \leftarrow \epsilon \odot g``,
``etrace_to_dw = \epsilon \odot \partial L/\partial h``. The chain rule through ``fn`` is left to
whoever maps :math:`\tilde w` back to ``w`` (the compiler records the path).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp

from .._compat import batching
from ._common import (
    attach_unit,
    init_pp_output_shaped,
    reject_states,
    shape_dtype,
    split_unit,
    zeros_trace,
)
from ._registry import ETPPrimitiveSpec, register_primitive_spec

__all__ = ["etp_elemwise_p", "element_wise"]


def _identity_impl(weight):
    return weight


def elemwise_trainable_invars(params: dict) -> dict[str, int]:
    """The processed weight is invar 0."""
    return {"weight": 0}


def elemwise_yw_to_w(hidden_dim, trace: dict, **params) -> dict:
    """``trace * g``."""
    return {"weight": trace["weight"] * hidden_dim}


def elemwise_xy_to_dw(x, hidden_dim, weights: dict, **params) -> dict:
    """The VJP of the identity: ``g`` (``x`` is ignored; it is ``None``)."""
    weight = weights["weight"]
    return {"weight": jnp.broadcast_to(hidden_dim, jnp.shape(weight)).astype(weight.dtype)}


def elemwise_xy_to_etrace(x, hidden_dim, weights: dict, **params) -> dict:
    """Unreduced trace: ``g`` itself."""
    return {"weight": jnp.asarray(hidden_dim)}


def elemwise_init_drtrl(x_var, y_var, weight_vars: dict, num_hidden_state: int, **params) -> dict:
    """``(*y.shape, S)`` (y has the processed weight's shape)."""
    shape, dtype = shape_dtype(y_var)
    return {"weight": zeros_trace(shape, num_hidden_state, dtype)}


etp_elemwise_p = register_primitive_spec(
    ETPPrimitiveSpec(
        name="etp_elemwise",
        impl=_identity_impl,
        yw_to_w=elemwise_yw_to_w,
        xy_to_dw=elemwise_xy_to_dw,
        init_drtrl=elemwise_init_drtrl,
        init_pp=init_pp_output_shaped,
        trainable_invars_fn=elemwise_trainable_invars,
        x_invar_index=None,
        gradient_enabled=True,
        xy_to_etrace=elemwise_xy_to_etrace,
    )
)


def _elemwise_batcher(args, dims, **params):
    # The identity commutes with vmap: re-bind on the batched value, the marker survives.
    return etp_elemwise_p.bind(args[0], **params), dims[0]


batching.primitive_batchers[etp_elemwise_p] = _elemwise_batcher


def element_wise(weight: Any, fn: Callable[[Any], Any] = lambda w: w) -> Any:
    r"""Mark an element-wise (diagonal) parameter: :math:`y = \mathrm{fn}(w)`.

    ``fn`` runs before the marker, in plain JAX, so the compiler sees its equations.

    Parameters
    ----------
    weight : array or Quantity
    fn : callable, default identity
        Any differentiable JAX function (``jax.nn.sigmoid``, ``jnp.abs`` ...).

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> element_wise(jnp.zeros(3), jax.nn.sigmoid).tolist()
    [0.5, 0.5, 0.5]
    """
    reject_states(
        "etp_viz.element_wise", "etp_viz.element_wise(self.W.value, jax.nn.sigmoid)", weight=weight
    )
    processed = fn(weight)
    mantissa, unit = split_unit(processed)
    return attach_unit(etp_elemwise_p.bind(jnp.asarray(mantissa)), unit)
