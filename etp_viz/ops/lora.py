r"""LoRA ETP primitives ``etp_lora_mm`` / ``etp_lora_mv`` and :func:`lora_matmul`.

Forward: :math:`y = \alpha\, x B A (+ b)`, ``B`` of shape ``(I, R)``, ``A`` of shape
``(R, O)``; trainable keys ``lora_b`` (invar 1), ``lora_a`` (invar 2), ``bias`` (invar 3).

The D-RTRL trace is kept for the *effective* weight :math:`W = \alpha B A` (key
``'effective_weight'``, layout ``(B, I, O)`` like ``etp_mm``), because the recursion
:math:`\epsilon^t = D^t \epsilon^{t-1} + g^t \otimes x^t` is linear in a weight that is the same
at every step only for ``W`` itself; a trace for ``B`` alone would need ``A`` inside the
recursion. The factor gradients are recovered at contraction time: with
:math:`G = \sum_b \epsilon_{b} \odot \partial L/\partial h_b` (shape ``(I, O)``),

.. math:: \partial L/\partial B = \alpha\, G A^\top,
   \qquad \partial L/\partial A = \alpha\, B^\top G.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from ._common import (
    attach_unit,
    bias_mantissa,
    contract_trace,
    register_batched_pair,
    reject_states,
    shape_dtype,
    split_unit,
    vjp_weights,
    zeros_trace,
)
from .dense import bind_dense_family

__all__ = ["etp_lora_mm_p", "etp_lora_mv_p", "lora_matmul"]

EFFECTIVE_WEIGHT = "effective_weight"


def _lora_impl(x, lora_b, lora_a, *maybe_bias, alpha=1.0, has_bias=False):
    y = alpha * ((x @ lora_b) @ lora_a)
    return y + maybe_bias[0] if has_bias else y


def lora_trainable_invars(params: dict) -> dict[str, int]:
    """``{'lora_b': 1, 'lora_a': 2}`` plus ``'bias': 3`` when ``has_bias``."""
    out = {"lora_b": 1, "lora_a": 2}
    if params.get("has_bias", False):
        out["bias"] = 3
    return out


def lora_yw_to_w(hidden_dim, trace: dict, **params) -> dict:
    """Every trace times ``g``: effective weight along the output axis, bias element-wise."""
    out = {EFFECTIVE_WEIGHT: trace[EFFECTIVE_WEIGHT] * jnp.expand_dims(hidden_dim, -2)}
    if "bias" in trace:
        out["bias"] = trace["bias"] * hidden_dim
    return out


def lora_xy_to_dw(x, hidden_dim, weights: dict, *, alpha=1.0, has_bias=False) -> dict:
    """One fused VJP w.r.t. ``{lora_b, lora_a, bias}`` with cotangent ``g``."""

    def fwd(w):
        extra = [w["bias"]] if has_bias else []
        return _lora_impl(x, w["lora_b"], w["lora_a"], *extra, alpha=alpha, has_bias=has_bias)

    return vjp_weights(fwd, weights, hidden_dim)


def lora_xy_to_etrace(x, hidden_dim, weights: dict, *, alpha=1.0, has_bias=False) -> dict:
    """Effective-weight trace ``x ⊗ g`` (unreduced) and ``g`` for the bias."""
    out = {EFFECTIVE_WEIGHT: jnp.expand_dims(x, -1) * jnp.expand_dims(hidden_dim, -2)}
    if has_bias:
        out["bias"] = jnp.asarray(hidden_dim)
    return out


def lora_etrace_to_dw(trace: dict, dl_dh, weights: dict, *, alpha=1.0, has_bias=False) -> dict:
    r""":math:`G = \sum_b \epsilon \odot \partial L/\partial h` (``contract_trace``);
    ``dB = αGAᵀ``, ``dA = αBᵀG``."""
    effective = trace[EFFECTIVE_WEIGHT]
    lead = effective.ndim - 2
    if jnp.shape(dl_dh) != (*effective.shape[:lead], effective.shape[-1]):
        weighted = lora_yw_to_w(dl_dh, trace)  # h broadcast from y: element-wise, then reduce
        grad_w = jnp.sum(weighted[EFFECTIVE_WEIGHT], axis=tuple(range(lead)))
        grad_b = weighted.get("bias")
        grad_b = None if grad_b is None else jnp.sum(grad_b, axis=tuple(range(grad_b.ndim - 1)))
    else:
        grad_w = contract_trace(effective, dl_dh, lead, 1)
        grad_b = contract_trace(trace["bias"], dl_dh, lead, 0) if "bias" in trace else None
    out = {
        "lora_b": alpha * grad_w @ weights["lora_a"].T,
        "lora_a": alpha * weights["lora_b"].T @ grad_w,
    }
    if has_bias:
        out["bias"] = grad_b
    return out


def lora_init_drtrl(x_var, y_var, weight_vars: dict, num_hidden_state: int, **params) -> dict:
    """Effective-weight trace ``(*batch, I, O, S)``; bias trace ``(*batch, O, S)``."""
    x_shape, _ = shape_dtype(x_var)
    y_shape, dtype = shape_dtype(y_var)
    batch = x_shape[:-1]
    out = {
        EFFECTIVE_WEIGHT: zeros_trace((*batch, x_shape[-1], y_shape[-1]), num_hidden_state, dtype)
    }
    if "bias" in weight_vars:
        out["bias"] = zeros_trace(y_shape, num_hidden_state, dtype)
    return out


etp_lora_mm_p, etp_lora_mv_p = register_batched_pair(
    "etp_lora_mm",
    "etp_lora_mv",
    impl=_lora_impl,
    yw_to_w=lora_yw_to_w,
    xy_to_dw=lora_xy_to_dw,
    init_drtrl=lora_init_drtrl,
    trainable_invars_fn=lora_trainable_invars,
    xy_to_etrace=lora_xy_to_etrace,
    etrace_to_dw=lora_etrace_to_dw,
)


def lora_matmul(x: Any, B: Any, A: Any, *, alpha: float = 1.0, bias: Any = None) -> Any:
    r"""ETP-marked low-rank product :math:`y = \alpha\, x B A (+ b)`.

    Parameters
    ----------
    x : array or Quantity, ``(I,)`` or ``(..., I)``
    B : array or Quantity, ``(I, R)``
    A : array or Quantity, ``(R, O)``
    alpha : float
        Static scale.
    bias : array or Quantity, ``(O,)``, optional

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> lora_matmul(jnp.ones((8, 4)), jnp.ones((4, 2)), jnp.ones((2, 3)), alpha=0.5)[0].tolist()
    [4.0, 4.0, 4.0]
    """
    reject_states(
        "etp_viz.lora_matmul",
        "etp_viz.lora_matmul(x, self.B.value, self.A.value)",
        x=x,
        B=B,
        A=A,
        bias=bias,
    )
    x_m, x_unit = split_unit(x)
    b_mat, b_unit = split_unit(B)
    a_mat, a_unit = split_unit(A)
    x_m, b_mat, a_mat = jnp.asarray(x_m), jnp.asarray(b_mat), jnp.asarray(a_mat)
    out_unit = x_unit * b_unit * a_unit
    if (
        x_m.ndim < 1
        or b_mat.ndim != 2
        or a_mat.ndim != 2
        or x_m.shape[-1] != b_mat.shape[0]
        or b_mat.shape[1] != a_mat.shape[0]
    ):
        raise ValueError(
            f"etp_viz.lora_matmul: x {x_m.shape}, B {b_mat.shape}, A {a_mat.shape}; expected "
            "x (..., I), B (I, R), A (R, O). Example: "
            "lora_matmul(jnp.ones((8, 64)), jnp.zeros((64, 4)), jnp.zeros((4, 32)))"
        )
    bias_m = bias_mantissa("etp_viz.lora_matmul", bias, out_unit)
    if bias_m is not None and tuple(jnp.shape(bias_m)) != (a_mat.shape[1],):
        raise ValueError(
            f"etp_viz.lora_matmul: bias has shape {tuple(jnp.shape(bias_m))}, expected "
            f"({a_mat.shape[1]},) = (O,) for A of shape {a_mat.shape}. Fix: pass a 1-D bias "
            "with one entry per output."
        )
    operands = [b_mat, a_mat] + ([] if bias_m is None else [jnp.asarray(bias_m)])
    params = {"alpha": float(alpha), "has_bias": bias_m is not None}
    y = bind_dense_family(etp_lora_mv_p, etp_lora_mm_p, x_m, operands, params)
    return attach_unit(y, out_unit)
