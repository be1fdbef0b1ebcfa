r"""Grouped (block-diagonal) ETP primitives ``etp_gmm`` / ``etp_gmv`` and :func:`grouped_matmul`.

Forward: :math:`y_{b,g,o} = \sum_i x_{b,g,i} W_{g,i,o} (+ b_{g,o})` with ``x`` of shape
``(B, G, I)`` (gmm) or ``(G, I)`` (gmv), ``W`` of shape ``(G, I, O)`` (one ``I x O`` block per
group) and ``b`` of shape ``(G, O)``; ``y`` is ``(B, G, O)`` / ``(G, O)``.

Output :math:`(g, o)` depends only on the block entries :math:`W_{g,\cdot,o}`, so the D-RTRL
trace (one state slice) has the weight's own shape per sample,
:math:`\epsilon_{b,g,i,o} = \partial h_{b,g,o}/\partial W_{g,i,o}`, layout ``(B, G, I, O)``
(``(G, I, O)`` for gmv), bias ``(B, G, O)``:

* ``xy_to_etrace``: :math:`x_{b,g,i}\, g_{b,g,o}`; bias :math:`g_{b,g,o}`;
* ``yw_to_w``: :math:`\epsilon_{b,g,i,o}\, g_{b,g,o}` (``expand_dims(g, -2)``, the dense rule);
* ``xy_to_dw``: the VJP, :math:`\sum_b x_{b,g,i} g_{b,g,o}`;
* ``etrace_to_dw``: :math:`\sum_b \epsilon_{b,g,i,o}\, \partial L/\partial h_{b,g,o}`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from .._compat import batching
from ._common import (
    attach_unit,
    bias_mantissa,
    register_batched_pair,
    reject_states,
    shape_dtype,
    split_unit,
    vjp_weights,
    zeros_trace,
)
from ._registry import fallback_batching, sum_to_shape
from .dense import dense_trainable_invars, dense_yw_to_w

__all__ = ["etp_gmm_p", "etp_gmv_p", "grouped_matmul"]

_HIGHEST = jax.lax.Precision.HIGHEST


def _grouped_impl(x, weight, *maybe_bias, has_bias=False):
    y = jnp.einsum("...gi,gio->...go", x, weight)
    return y + maybe_bias[0] if has_bias else y


def grouped_yw_to_w(hidden_dim, trace: dict, **params) -> dict:
    """``trace[..., g, i, o] * g[..., g, o]``; bias trace ``* g``."""
    return dense_yw_to_w(hidden_dim, trace)


def grouped_xy_to_dw(x, hidden_dim, weights: dict, *, has_bias=False) -> dict:
    """Fused VJP w.r.t. ``{weight, bias}`` with cotangent ``g``."""

    def fwd(w):
        extra = [w["bias"]] if has_bias else []
        return _grouped_impl(x, w["weight"], *extra, has_bias=has_bias)

    return vjp_weights(fwd, weights, hidden_dim)


def grouped_xy_to_etrace(x, hidden_dim, weights: dict, *, has_bias=False) -> dict:
    """Unreduced trace ``x[..., g, i] * g[..., g, o]`` and ``g`` for the bias."""
    dtype = jnp.result_type(x, hidden_dim)
    out = {"weight": (jnp.expand_dims(x, -1) * jnp.expand_dims(hidden_dim, -2)).astype(dtype)}
    if has_bias:
        out["bias"] = jnp.asarray(hidden_dim)
    return out


def grouped_etrace_to_dw(trace: dict, dl_dh, weights: dict, *, has_bias=False) -> dict:
    """``einsum('...gio,...go->gio')`` (precision ``HIGHEST``); bias ``Σ_b``."""
    eps = trace["weight"]
    lead = eps.ndim - 3
    if jnp.shape(dl_dh) != (*eps.shape[:lead], eps.shape[-3], eps.shape[-1]):
        weighted = grouped_yw_to_w(dl_dh, trace)  # h broadcast from y: element-wise, reduce
        return {k: sum_to_shape(v, jnp.shape(weights[k])) for k, v in weighted.items()}
    dl_dh = jnp.asarray(dl_dh, eps.dtype)
    out = {"weight": jnp.einsum("...gio,...go->gio", eps, dl_dh, precision=_HIGHEST)}
    if "bias" in trace:
        out["bias"] = sum_to_shape(trace["bias"] * dl_dh, jnp.shape(weights["bias"]))
    return out


def grouped_init_drtrl(x_var, y_var, weight_vars: dict, num_hidden_state: int, **params) -> dict:
    """Weight trace ``(*batch, G, I, O, S)`` (``batch = x.shape[:-2]``); bias ``(*y, S)``."""
    batch = shape_dtype(x_var)[0][:-2]
    y_shape, dtype = shape_dtype(y_var)
    out = {
        "weight": zeros_trace(
            (*batch, *shape_dtype(weight_vars["weight"])[0]), num_hidden_state, dtype
        )
    }
    if "bias" in weight_vars:
        out["bias"] = zeros_trace(y_shape, num_hidden_state, dtype)
    return out


etp_gmm_p, etp_gmv_p = register_batched_pair(
    "etp_gmm",
    "etp_gmv",
    impl=_grouped_impl,
    yw_to_w=grouped_yw_to_w,
    xy_to_dw=grouped_xy_to_dw,
    init_drtrl=grouped_init_drtrl,
    trainable_invars_fn=dense_trainable_invars,
    xy_to_etrace=grouped_xy_to_etrace,
    etrace_to_dw=grouped_etrace_to_dw,
)


def _gmm_batcher(args, dims, **params):
    # x is (B, G, I): fold the vmapped axis into B (the generic rule assumes one feature axis).
    if any(d is not None for d in dims[1:]):
        return fallback_batching(etp_gmm_p, _grouped_impl, args, dims, **params)
    x = jnp.moveaxis(args[0], dims[0], 0)
    y = etp_gmm_p.bind(x.reshape(-1, *x.shape[2:]), *args[1:], **params)
    return y.reshape(*x.shape[:2], *y.shape[1:]), 0


batching.primitive_batchers[etp_gmm_p] = _gmm_batcher


def grouped_matmul(x: Any, weight: Any, bias: Any = None) -> Any:
    r"""ETP-marked grouped (block-diagonal) product
    :math:`y_{\dots,g,o} = \sum_i x_{\dots,g,i} W_{g,i,o} (+ b_{g,o})`.

    ``x.ndim == 2`` binds ``etp_gmv``; ``x.ndim == 3`` binds ``etp_gmm``; more leading axes are
    flattened into one batch axis and restored on the output. saiunit quantities are accepted.

    Parameters
    ----------
    x : array or Quantity, shape ``(G, I)`` or ``(..., G, I)``
    weight : array or Quantity, shape ``(G, I, O)``
    bias : array or Quantity, shape ``(G, O)``, optional

    Returns
    -------
    array or Quantity, shape ``(..., G, O)``

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> grouped_matmul(jnp.ones((4, 2, 3)), jnp.ones((2, 3, 5))).shape
    (4, 2, 5)
    """
    reject_states(
        "etp_viz.grouped_matmul",
        "etp_viz.grouped_matmul(x, self.W.value)",
        x=x,
        weight=weight,
        bias=bias,
    )
    x_m, x_unit = split_unit(x)
    w_m, w_unit = split_unit(weight)
    x_m, w_m = jnp.asarray(x_m), jnp.asarray(w_m)
    out_unit = x_unit * w_unit
    if x_m.ndim < 2 or w_m.ndim != 3 or tuple(x_m.shape[-2:]) != tuple(w_m.shape[:2]):
        raise ValueError(
            f"etp_viz.grouped_matmul: x has shape {x_m.shape} and the weight {w_m.shape}; "
            "expected x (..., G, I) and weight (G, I, O) with matching G and I. Example: "
            "grouped_matmul(jnp.ones((B, 4, 8)), jnp.zeros((4, 8, 16)))"
        )
    b_m = bias_mantissa("etp_viz.grouped_matmul", bias, out_unit)
    expected_bias = (w_m.shape[0], w_m.shape[2])
    if b_m is not None and tuple(jnp.shape(b_m)) != expected_bias:
        raise ValueError(
            f"etp_viz.grouped_matmul: bias has shape {tuple(jnp.shape(b_m))}, expected "
            f"{expected_bias} = (G, O) for a weight of shape {w_m.shape}. Fix: pass one bias "
            "row per group."
        )
    operands = [w_m] if b_m is None else [w_m, jnp.asarray(b_m)]
    params = {"has_bias": b_m is not None}
    if x_m.ndim == 2:
        return attach_unit(etp_gmv_p.bind(x_m, *operands, **params), out_unit)
    lead = x_m.shape[:-2]
    y = etp_gmm_p.bind(x_m.reshape(-1, *x_m.shape[-2:]), *operands, **params)
    return attach_unit(y.reshape(*lead, *y.shape[-2:]), out_unit)
