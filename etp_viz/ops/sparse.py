r"""Sparse ETP primitives ``etp_sp_mm`` / ``etp_sp_mv`` and :func:`sparse_matmul`.

Forward: :math:`y_{\cdot,o} = \sum_{k:\,c_k = o} x_{\cdot,r_k}\, w_k (+ b_o)` where the static
pattern lists for each non-zero :math:`k` its row :math:`r_k` (input index) and column
:math:`c_k` (output index), and the trainable ``weight_data`` holds the ``nnz`` values in the
pattern's order. A pattern with concrete indices is a static param (:class:`SparsePattern`:
hashable, compared by value; its indices are constants of the compiled program). A pattern
whose indices are traced (the matrix is held in a ``brainstate.State``) has its ``rows`` and
``cols`` bound as non-trainable int32 operands after the weights (:class:`OperandPattern` is the
static param, ``etp_viz.ops.get_aux_invars`` names them); the learners pass their values to
every rule as ``rows=`` / ``cols=``, so the program's size does not grow with ``nnz``.

Trace (one state slice), through the pattern's column index:
:math:`\epsilon_{b,k} = \partial h_{b,c_k}/\partial w_k`, layout ``(B, nnz)`` / ``(nnz,)``;
``yw_to_w``: :math:`\epsilon_{b,k} g_{b,c_k}`; ``xy_to_etrace``: :math:`x_{b,r_k} g_{b,c_k}`;
``xy_to_dw``: :math:`\sum_b x_{b,r_k} g_{b,c_k}`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ._common import (
    attach_unit,
    bias_mantissa,
    contract_trace,
    per_sample_weight_trace,
    register_batched_pair,
    reject_states,
    split_unit,
)
from ._registry import ETP_AUX_INVARS_FNS, sum_to_shape
from .dense import bind_dense_family, dense_trainable_invars
from .patterns import MAX_PROCEDURAL_SIZE as MAX_PROCEDURAL_SIZE
from .patterns import FixedFanIn, OperandPattern, SparsePattern, traced_index_operands
from .patterns import event_driven_product as event_driven_product
from .patterns import fan_in_strategy as fan_in_strategy

__all__ = [
    "FixedFanIn",
    "OperandPattern",
    "SparsePattern",
    "etp_sp_mm_p",
    "etp_sp_mv_p",
    "event_driven_product",
    "sparse_matmul",
]


def _maps(sparse_mat, rows=None, cols=None):
    """The index maps of the static param, with the index operands where it has them."""
    return sparse_mat.bind(rows, cols) if isinstance(sparse_mat, OperandPattern) else sparse_mat


def sparse_aux_invars(params: dict) -> dict[str, int]:
    """``{'rows': i, 'cols': i + 1}`` after the weight (and bias) for an :class:`OperandPattern`."""
    if not isinstance(params.get("sparse_mat"), OperandPattern):
        return {}
    first = 3 if params.get("has_bias", False) else 2
    return {"rows": first, "cols": first + 1}


def _sparse_impl(x, data, *rest, sparse_mat, has_bias=False, max_active=None):
    maps = _maps(sparse_mat, *rest[int(has_bias) :])
    if max_active is None:
        y = maps.product(x, data)
    else:
        y = event_driven_product(x, data, maps, max_active)
    return y + rest[0] if has_bias else y


def sparse_yw_to_w(hidden_dim, trace: dict, *, sparse_mat, rows=None, cols=None, **params) -> dict:
    """``trace[..., k] * g[..., c_k]``; bias trace ``* g``."""
    maps = _maps(sparse_mat, rows, cols)
    out = {"weight": trace["weight"] * maps.gather_outputs(hidden_dim)}
    if "bias" in trace:
        out["bias"] = trace["bias"] * hidden_dim
    return out


def sparse_xy_to_dw(
    x, hidden_dim, weights: dict, *, sparse_mat, has_bias=False, rows=None, cols=None, **_
) -> dict:
    """``Σ_b x[b, r_k] g[b, c_k]`` (the VJP w.r.t. the weight, written out so that the event
    path's forward is not re-run) and ``Σ_b g`` for the bias."""
    g = jnp.asarray(hidden_dim, dtype=jnp.result_type(x, weights["weight"]))
    lead = g.ndim - 1
    out = {"weight": _maps(sparse_mat, rows, cols).correlate(x, g, lead)}
    if has_bias:
        out["bias"] = sum_to_shape(g, jnp.shape(weights["bias"]))
    return {k: v.astype(jnp.result_type(weights[k])) for k, v in out.items()}


def sparse_xy_to_etrace(
    x, hidden_dim, weights: dict, *, sparse_mat, has_bias=False, rows=None, cols=None, **_
) -> dict:
    """Unreduced trace ``x[..., r_k] * g[..., c_k]`` and ``g`` for the bias."""
    maps = _maps(sparse_mat, rows, cols)
    out = {"weight": maps.gather_inputs(x) * maps.gather_outputs(hidden_dim)}
    if has_bias:
        out["bias"] = jnp.asarray(hidden_dim)
    return out


def sparse_etrace_to_dw(
    trace: dict, dl_dh, weights: dict, *, sparse_mat, rows=None, cols=None, **_
) -> dict:
    """``Σ_b trace[b, k] * g[b, c_k]`` (and ``Σ_b`` of the bias term) via ``contract_trace``."""
    eps = trace["weight"]
    lead = eps.ndim - 1
    if jnp.shape(dl_dh)[:-1] != eps.shape[:lead]:  # h broadcast from y: element-wise, reduce
        weighted = sparse_yw_to_w(dl_dh, trace, sparse_mat=sparse_mat, rows=rows, cols=cols)
        return {k: sum_to_shape(v, jnp.shape(weights[k])) for k, v in weighted.items()}
    out = {"weight": _maps(sparse_mat, rows, cols).contract(eps, dl_dh, lead)}
    if "bias" in trace:
        out["bias"] = contract_trace(trace["bias"], dl_dh, lead, 0)
    return out


etp_sp_mm_p, etp_sp_mv_p = register_batched_pair(
    "etp_sp_mm",
    "etp_sp_mv",
    impl=_sparse_impl,
    yw_to_w=sparse_yw_to_w,
    xy_to_dw=sparse_xy_to_dw,
    init_drtrl=per_sample_weight_trace,
    trainable_invars_fn=dense_trainable_invars,
    xy_to_etrace=sparse_xy_to_etrace,
    etrace_to_dw=sparse_etrace_to_dw,
)
ETP_AUX_INVARS_FNS[etp_sp_mm_p] = ETP_AUX_INVARS_FNS[etp_sp_mv_p] = sparse_aux_invars


def sparse_matmul(
    x: Any,
    weight_data: Any,
    *,
    sparse_mat: Any,
    bias: Any = None,
    max_active: int | None = None,
) -> Any:
    r"""ETP-marked :math:`y = x\, \mathrm{sparse}(w) (+ b)` with a static pattern.

    Parameters
    ----------
    x : array or Quantity, ``(I,)`` or ``(..., I)``
    weight_data : array or Quantity, ``(nnz,)`` -- the trainable non-zero values
    sparse_mat : saiunit ``CSR`` / ``CSC`` / ``COO`` of shape ``(I, O)`` (only its pattern is
        used) or a :class:`FixedFanIn` (indices computed in-program). Concrete indices are
        constants of the compiled program (its size and compile time grow with ``nnz``);
        traced ones, e.g. read from a ``brainstate.State``, are operands of the primitive
        (``rows`` / ``cols``, not trained), so the program is the same size at any ``nnz``
    bias : array or Quantity, ``(O,)``, optional
    max_active : int, optional
        Event-driven forward (:func:`event_driven_product`, ``FixedFanIn`` only): read only the
        weights of at most ``max_active`` non-zero inputs per sample, e.g. spikes. Same
        values and derivatives as the default dense-input product; same ETP rules.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from saiunit import sparse as ss
    >>> m = ss.CSR.fromdense(jnp.eye(3) * 2.0)
    >>> sparse_matmul(jnp.ones((2, 3)), m.data, sparse_mat=m).tolist()
    [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]
    >>> p = FixedFanIn(5, fan_in=2)
    >>> sparse_matmul(jnp.ones(5), jnp.ones(p.nnz), sparse_mat=p, max_active=2).tolist()
    [2.0, 2.0, 2.0, 2.0, 2.0]
    """
    example = "etp_viz.sparse_matmul(x, self.W.value, sparse_mat=pattern)"
    reject_states("etp_viz.sparse_matmul", example, x=x, weight_data=weight_data, bias=bias)
    procedural = isinstance(sparse_mat, FixedFanIn)
    pattern, index_operands = _static_pattern(sparse_mat)
    if max_active is not None and not procedural:
        raise ValueError(
            "etp_viz.sparse_matmul: max_active (the event-driven forward) needs a FixedFanIn "
            "pattern, e.g. sparse_mat=etp_viz.ops.sparse.FixedFanIn(n, fan_in=100)."
        )
    x_m, x_unit = split_unit(x)
    w_m, w_unit = split_unit(weight_data)
    x_m, w_m = jnp.asarray(x_m), jnp.asarray(w_m)
    out_unit = x_unit * w_unit
    n_in, n_out = pattern.shape
    if x_m.ndim < 1 or x_m.shape[-1] != n_in or w_m.shape != (pattern.nnz,):
        raise ValueError(
            f"etp_viz.sparse_matmul: x has shape {x_m.shape}, weight_data {w_m.shape} and the "
            f"pattern is {pattern.shape} with nnz={pattern.nnz}; expected x (..., {n_in}) and "
            f"weight_data ({pattern.nnz},). Fix: pass `weight_data=sparse_mat.data`."
        )
    b_m = bias_mantissa("etp_viz.sparse_matmul", bias, out_unit)
    if b_m is not None and tuple(jnp.shape(b_m)) != (n_out,):
        raise ValueError(
            f"etp_viz.sparse_matmul: bias has shape {tuple(jnp.shape(b_m))}, expected ({n_out},) "
            f"for a pattern of shape {pattern.shape}. Fix: pass a 1-D bias with one entry per "
            "output column."
        )
    operands = [w_m] if b_m is None else [w_m, jnp.asarray(b_m)]
    operands += index_operands
    params = {"sparse_mat": pattern, "has_bias": b_m is not None}
    if max_active is not None:
        params["max_active"] = int(max_active)
    y = bind_dense_family(etp_sp_mv_p, etp_sp_mm_p, x_m, operands, params)
    return attach_unit(y, out_unit)


def _static_pattern(sparse_mat: Any) -> tuple[Any, list]:
    """The primitive's static ``sparse_mat`` param and its index operands (traced indices)."""
    if isinstance(sparse_mat, FixedFanIn):
        return sparse_mat, []
    try:
        return SparsePattern.from_matrix(sparse_mat), []
    except jax.errors.TracerArrayConversionError:
        rows, cols = traced_index_operands(sparse_mat)
        return OperandPattern(sparse_mat.shape, rows.shape[0]), [rows, cols]
