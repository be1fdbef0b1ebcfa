r"""Dense ETP primitives ``etp_mm`` (batched) / ``etp_mv`` (unbatched) and :func:`matmul`.

Forward: :math:`y = x W (+ b)` with ``x`` of shape ``(B, I)`` (mm) or ``(I,)`` (mv),
``W`` of shape ``(I, O)`` and ``b`` of shape ``(O,)``.

For an element-wise dependence of the hidden state on ``y`` (:math:`g = \partial h/\partial y`,
one state slice), the D-RTRL trace of ``W`` is
:math:`\epsilon_{b,i,o} = \partial h_{b,o} / \partial W_{i,o}` and of ``b`` is
:math:`\epsilon_{b,o} = \partial h_{b,o}/\partial b_o`:

* ``xy_to_etrace``: :math:`\epsilon^W_{b,i,o} = x_{b,i} g_{b,o}`,
  :math:`\epsilon^b_{b,o} = g_{b,o}`;
* ``yw_to_w``: :math:`\epsilon_{b,i,o} \leftarrow \epsilon_{b,i,o}\, g_{b,o}`
  (``expand_dims(g, -2)``);
* ``xy_to_dw``: :math:`\sum_b x_{b,i} g_{b,o}` and :math:`\sum_b g_{b,o}` (the VJP);
* ``etrace_to_dw``: :math:`\partial L/\partial W_{i,o} = \sum_b \epsilon_{b,i,o}\,
  \partial L/\partial h_{b,o}` (``_common.contract_trace``: no element-wise product reduced
  over ``b``).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from ._common import (
    attach_unit,
    bias_mantissa,
    contract_trace,
    per_sample_weight_trace,
    register_batched_pair,
    reject_states,
    split_unit,
    vjp_weights,
)
from ._registry import sum_to_shape

__all__ = ["etp_mm_p", "etp_mv_p", "matmul"]


def _dense_impl(x, weight, *maybe_bias, has_bias=False):
    y = x @ weight
    return y + maybe_bias[0] if has_bias else y


def dense_trainable_invars(params: dict) -> dict[str, int]:
    """``{'weight': 1}`` plus ``'bias': 2`` when ``has_bias``."""
    return {"weight": 1, "bias": 2} if params.get("has_bias", False) else {"weight": 1}


def dense_yw_to_w(hidden_dim, trace: dict, **params) -> dict:
    """Multiply each trace slice by ``g`` along the output axis (no reduction)."""
    out = {"weight": trace["weight"] * jnp.expand_dims(hidden_dim, -2)}
    if "bias" in trace:
        out["bias"] = trace["bias"] * hidden_dim
    return out


def dense_xy_to_dw(x, hidden_dim, weights: dict, *, has_bias=False) -> dict:
    """VJP of ``x @ W (+ b)`` w.r.t. ``{weight, bias}`` with cotangent ``g``."""

    def fwd(w):
        return _dense_impl(x, w["weight"], *([w["bias"]] if has_bias else []), has_bias=has_bias)

    return vjp_weights(fwd, weights, hidden_dim)


def dense_xy_to_etrace(x, hidden_dim, weights: dict, *, has_bias=False) -> dict:
    """Unreduced instantaneous trace ``x ⊗ g`` (and ``g`` for the bias)."""
    dtype = jnp.result_type(x, hidden_dim)
    out = {"weight": (jnp.expand_dims(x, -1) * jnp.expand_dims(hidden_dim, -2)).astype(dtype)}
    if has_bias:
        out["bias"] = hidden_dim
    return out


def dense_etrace_to_dw(trace: dict, dl_dh, weights: dict, *, has_bias=False) -> dict:
    """``einsum('bio,bo->io')`` via :func:`contract_trace` (mv: ``'io,o->io'``); bias ``Σ_b``."""
    eps = trace["weight"]
    lead = eps.ndim - 2
    if jnp.shape(dl_dh) != (*eps.shape[:lead], eps.shape[-1]):  # h broadcast from y: generic
        return _broadcast_etrace_to_dw(trace, dl_dh, weights)
    out = {"weight": contract_trace(eps, dl_dh, lead, 1)}
    if "bias" in trace:
        out["bias"] = contract_trace(trace["bias"], dl_dh, lead, 0)
    return out


def _broadcast_etrace_to_dw(trace: dict, dl_dh, weights: dict) -> dict:
    weighted = dense_yw_to_w(dl_dh, trace)
    return {k: sum_to_shape(v, jnp.shape(weights[k])) for k, v in weighted.items()}


etp_mm_p, etp_mv_p = register_batched_pair(
    "etp_mm",
    "etp_mv",
    impl=_dense_impl,
    yw_to_w=dense_yw_to_w,
    xy_to_dw=dense_xy_to_dw,
    init_drtrl=per_sample_weight_trace,
    trainable_invars_fn=dense_trainable_invars,
    xy_to_etrace=dense_xy_to_etrace,
    etrace_to_dw=dense_etrace_to_dw,
)


def check_matmul_shapes(op: str, x_shape, w_shape, bias_shape, example: str) -> None:
    """Raise a ValueError naming ``op``, the shapes and the fix."""
    if len(x_shape) < 1 or len(w_shape) != 2 or x_shape[-1] != w_shape[0]:
        raise ValueError(
            f"{op}: x has shape {tuple(x_shape)} and the weight {tuple(w_shape)}; expected "
            f"x (..., I) and weight (I, O) with matching I. Example: {example}"
        )
    if bias_shape is not None and tuple(bias_shape) != (w_shape[1],):
        raise ValueError(
            f"{op}: bias has shape {tuple(bias_shape)}, expected ({w_shape[1]},) = (O,) for a "
            f"weight of shape {tuple(w_shape)}. Fix: pass a 1-D bias with one entry per output."
        )


def bind_dense_family(mv_p, mm_p, x, operands: list, params: dict):
    """Dispatch on ``x.ndim``: 1 -> unbatched prim, 2 -> batched, >2 -> flatten leading axes."""
    if x.ndim == 1:
        return mv_p.bind(x, *operands, **params)
    lead = x.shape[:-1]
    y = mm_p.bind(x.reshape(-1, x.shape[-1]), *operands, **params)
    return y if x.ndim == 2 else y.reshape(*lead, y.shape[-1])


def matmul(x: Any, weight: Any, bias: Any = None) -> Any:
    r"""ETP-marked dense product :math:`y = x W (+ b)`.

    ``x.ndim == 1`` binds ``etp_mv``; ``x.ndim == 2`` binds ``etp_mm``; more leading axes are
    flattened into one batch axis for ``etp_mm`` and restored on the output. saiunit
    quantities are accepted (the bias must have the unit dimension of ``x * weight``).

    Parameters
    ----------
    x : array or Quantity, shape ``(I,)`` or ``(..., I)``
    weight : array or Quantity, shape ``(I, O)``
    bias : array or Quantity, shape ``(O,)``, optional

    Returns
    -------
    array or Quantity, shape ``(O,)`` or ``(..., O)``

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> matmul(jnp.ones((4, 3)), jnp.ones((3, 5)), bias=jnp.zeros(5)).shape
    (4, 5)
    """
    reject_states(
        "etp_viz.matmul",
        "etp_viz.matmul(x, self.W.value, self.b.value)",
        x=x,
        weight=weight,
        bias=bias,
    )
    x_m, x_unit = split_unit(x)
    w_m, w_unit = split_unit(weight)
    x_m, w_m = jnp.asarray(x_m), jnp.asarray(w_m)
    out_unit = x_unit * w_unit
    b_m = bias_mantissa("etp_viz.matmul", bias, out_unit)
    check_matmul_shapes(
        "etp_viz.matmul",
        x_m.shape,
        w_m.shape,
        None if b_m is None else jnp.shape(b_m),
        "matmul(jnp.ones((B, 3)), jnp.ones((3, 5)), bias=jnp.zeros(5))",
    )
    operands = [w_m] if b_m is None else [w_m, jnp.asarray(b_m)]
    y = bind_dense_family(etp_mv_p, etp_mm_p, x_m, operands, {"has_bias": b_m is not None})
    return attach_unit(y, out_unit)
