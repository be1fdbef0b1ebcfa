r"""Sparse ETP primitives ``etp_sp_mm`` / ``etp_sp_mv`` and :func:`sparse_matmul`.

Forward: :math:`y_{\cdot,o} = \sum_{k:\,c_k = o} x_{\cdot,r_k}\, w_k (+ b_o)` where the static
pattern lists for each non-zero :math:`k` its row :math:`r_k` (input index) and column
:math:`c_k` (output index), and the trainable ``weight_data`` holds the ``nnz`` values in the
pattern's order. The pattern is a static param (:class:`SparsePattern`: hashable, compared by
value), built from a saiunit ``CSR`` / ``CSC`` / ``COO`` matrix.

Trace (one state slice), through the pattern's column index:
:math:`\epsilon_{b,k} = \partial h_{b,c_k}/\partial w_k`, layout ``(B, nnz)`` / ``(nnz,)``;
``yw_to_w``: :math:`\epsilon_{b,k} g_{b,c_k}`; ``xy_to_etrace``: :math:`x_{b,r_k} g_{b,c_k}`;
``xy_to_dw``: :math:`\sum_b x_{b,r_k} g_{b,c_k}`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._common import (
    contract_trace,
    per_sample_weight_trace,
    register_batched_pair,
    reject_states,
    vjp_weights,
)
from ._registry import sum_to_shape
from ._units import attach_unit, bias_mantissa, split_unit
from .dense import bind_dense_family, dense_trainable_invars

__all__ = ["SparsePattern", "etp_sp_mm_p", "etp_sp_mv_p", "sparse_matmul"]


class SparsePattern:
    """A static, hashable sparsity pattern of an ``(I, O)`` matrix (rows = inputs).

    Equality and hash are by value, so equal patterns share compiled code.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from saiunit import sparse as ss
    >>> p = SparsePattern.from_matrix(ss.CSR.fromdense(jnp.eye(3)))
    >>> p.nnz, p == SparsePattern.from_matrix(ss.CSR.fromdense(jnp.eye(3)))
    (3, True)
    """

    def __init__(self, rows: Any, cols: Any, shape: tuple[int, int]):
        self.rows = np.asarray(rows, dtype=np.int32)
        self.cols = np.asarray(cols, dtype=np.int32)
        self.shape = (int(shape[0]), int(shape[1]))
        self.rows.setflags(write=False)
        self.cols.setflags(write=False)
        self._key = (self.shape, self.rows.tobytes(), self.cols.tobytes())

    @property
    def nnz(self) -> int:
        """Number of stored entries."""
        return int(self.rows.shape[0])

    @classmethod
    def from_matrix(cls, mat: Any) -> SparsePattern:
        """Pattern of a saiunit ``CSR`` / ``CSC`` / ``COO`` matrix (or a SparsePattern)."""
        if isinstance(mat, SparsePattern):
            return mat
        kind = type(mat).__name__
        try:
            if kind == "CSR":
                indptr = np.asarray(mat.indptr)
                rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
                return cls(rows, np.asarray(mat.indices), mat.shape)
            if kind == "CSC":
                indptr = np.asarray(mat.indptr)
                cols = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
                return cls(np.asarray(mat.indices), cols, mat.shape)
            if hasattr(mat, "row") and hasattr(mat, "col"):
                return cls(np.asarray(mat.row), np.asarray(mat.col), mat.shape)
        except jax.errors.TracerArrayConversionError as err:
            raise TypeError(
                "etp_viz.sparse_matmul: the sparsity pattern (indices) of `sparse_mat` is being "
                "traced; it must be static. Close over the sparse matrix instead of passing it "
                "as an argument of jit/vmap/grad."
            ) from err
        raise TypeError(
            f"etp_viz.sparse_matmul: sparse_mat of type {kind} is not supported; pass a "
            "saiunit.sparse CSR, CSC or COO matrix, e.g. `saiunit.sparse.CSR.fromdense(w)`."
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SparsePattern) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"SparsePattern(shape={self.shape}, nnz={self.nnz})"


def _sparse_impl(x, data, *maybe_bias, sparse_mat: SparsePattern, has_bias=False):
    contributions = x[..., sparse_mat.rows] * data
    y = jnp.zeros((*x.shape[:-1], sparse_mat.shape[1]), contributions.dtype)
    y = y.at[..., sparse_mat.cols].add(contributions)
    return y + maybe_bias[0] if has_bias else y


def sparse_yw_to_w(hidden_dim, trace: dict, *, sparse_mat: SparsePattern, **params) -> dict:
    """``trace[..., k] * g[..., c_k]``; bias trace ``* g``."""
    out = {"weight": trace["weight"] * hidden_dim[..., sparse_mat.cols]}
    if "bias" in trace:
        out["bias"] = trace["bias"] * hidden_dim
    return out


def sparse_xy_to_dw(
    x, hidden_dim, weights: dict, *, sparse_mat: SparsePattern, has_bias=False
) -> dict:
    """Fused VJP w.r.t. ``{weight (nnz,), bias}`` with cotangent ``g``."""

    def fwd(w):
        extra = [w["bias"]] if has_bias else []
        return _sparse_impl(x, w["weight"], *extra, sparse_mat=sparse_mat, has_bias=has_bias)

    return vjp_weights(fwd, weights, hidden_dim)


def sparse_xy_to_etrace(
    x, hidden_dim, weights: dict, *, sparse_mat: SparsePattern, has_bias=False
) -> dict:
    """Unreduced trace ``x[..., r_k] * g[..., c_k]`` and ``g`` for the bias."""
    out = {"weight": x[..., sparse_mat.rows] * hidden_dim[..., sparse_mat.cols]}
    if has_bias:
        out["bias"] = jnp.asarray(hidden_dim)
    return out


def sparse_etrace_to_dw(
    trace: dict, dl_dh, weights: dict, *, sparse_mat: SparsePattern, has_bias=False
) -> dict:
    """``Σ_b trace[b, k] * g[b, c_k]`` (and ``Σ_b`` of the bias term) via ``contract_trace``."""
    eps = trace["weight"]
    lead = eps.ndim - 1
    if jnp.shape(dl_dh)[:-1] != eps.shape[:lead]:  # h broadcast from y: element-wise, reduce
        weighted = sparse_yw_to_w(dl_dh, trace, sparse_mat=sparse_mat)
        return {k: sum_to_shape(v, jnp.shape(weights[k])) for k, v in weighted.items()}
    out = {"weight": contract_trace(eps, dl_dh[..., sparse_mat.cols], lead, 0)}
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


def sparse_matmul(x: Any, weight_data: Any, *, sparse_mat: Any, bias: Any = None) -> Any:
    r"""ETP-marked :math:`y = x\, \mathrm{sparse}(w) (+ b)` with a static pattern.

    Parameters
    ----------
    x : array or Quantity, ``(I,)`` or ``(..., I)``
    weight_data : array or Quantity, ``(nnz,)`` -- the trainable non-zero values
    sparse_mat : saiunit ``CSR`` / ``CSC`` / ``COO`` of shape ``(I, O)`` (only its pattern is used)
    bias : array or Quantity, ``(O,)``, optional

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from saiunit import sparse as ss
    >>> m = ss.CSR.fromdense(jnp.eye(3) * 2.0)
    >>> sparse_matmul(jnp.ones((2, 3)), m.data, sparse_mat=m).tolist()
    [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]
    """
    reject_states(
        "etp_viz.sparse_matmul",
        "etp_viz.sparse_matmul(x, self.W.value, sparse_mat=pattern)",
        x=x,
        weight_data=weight_data,
        bias=bias,
    )
    pattern = SparsePattern.from_matrix(sparse_mat)
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
    params = {"sparse_mat": pattern, "has_bias": b_m is not None}
    y = bind_dense_family(etp_sp_mv_p, etp_sp_mm_p, x_m, operands, params)
    return attach_unit(y, out_unit)
