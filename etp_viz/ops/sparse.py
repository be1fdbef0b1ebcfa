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

import math
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._common import (
    contract_trace,
    per_sample_weight_trace,
    register_batched_pair,
    reject_states,
)
from ._registry import ETP_AUX_INVARS_FNS, sum_to_shape
from ._units import attach_unit, bias_mantissa, split_unit
from .dense import bind_dense_family, dense_trainable_invars

__all__ = [
    "FixedFanIn",
    "OperandPattern",
    "SparsePattern",
    "etp_sp_mm_p",
    "etp_sp_mv_p",
    "event_driven_product",
    "sparse_matmul",
]


class IndexMaps:
    """The index maps every sparse rule is written with, from ``rows`` / ``cols`` arrays (numpy
    constants in :class:`SparsePattern`, traced operands in :meth:`OperandPattern.bind`);
    :class:`FixedFanIn` has the same methods, computed in-program."""

    rows: Any
    cols: Any
    shape: tuple[int, int]

    def gather_inputs(self, x: jax.Array) -> jax.Array:
        """``x[..., r_k]``: one input per stored weight, ``(..., nnz)``."""
        return x[..., self.rows]

    def gather_outputs(self, g: jax.Array) -> jax.Array:
        """``g[..., c_k]``: one output-side value per stored weight, ``(..., nnz)``."""
        return g[..., self.cols]

    def sum_to_outputs(self, contributions: jax.Array) -> jax.Array:
        """``y_o = Σ_{k: c_k = o} contributions_k``, ``(..., O)``."""
        y = jnp.zeros((*contributions.shape[:-1], self.shape[1]), contributions.dtype)
        return y.at[..., self.cols].add(contributions)

    def product(self, x: jax.Array, data: jax.Array) -> jax.Array:
        """``y_o = Σ_{k: c_k = o} x[..., r_k] data_k``."""
        return self.sum_to_outputs(self.gather_inputs(x) * data)

    def correlate(self, x: jax.Array, signal: jax.Array, lead: int) -> jax.Array:
        """``Σ_lead x[..., r_k] * signal[..., c_k]`` -> ``(nnz,)``."""
        return self.contract(self.gather_inputs(x), signal, lead)

    def contract(self, per_weight: jax.Array, signal: jax.Array, lead: int) -> jax.Array:
        """``Σ_lead per_weight[..., k] * signal[..., c_k]`` -> ``(nnz,)``."""
        return contract_trace(per_weight, self.gather_outputs(signal), lead, 0)


class SparsePattern(IndexMaps):
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
        """Pattern of a saiunit ``CSR`` / ``CSC`` / ``COO`` matrix (or a SparsePattern); traced
        indices raise ``jax.errors.TracerArrayConversionError``."""
        if isinstance(mat, SparsePattern):
            return mat
        kind = type(mat).__name__
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


class OperandPattern:
    """The static param of a pattern whose indices are operands: shape and ``nnz`` only.

    >>> import jax.numpy as jnp
    >>> p = OperandPattern((3, 2), 2)
    >>> p.bind(jnp.array([0, 2]), jnp.array([1, 1])).product(jnp.ones(3), jnp.ones(2)).tolist()
    [0.0, 2.0]
    """

    def __init__(self, shape: tuple[int, int], nnz: int):
        self.shape, self.nnz = (int(shape[0]), int(shape[1])), int(nnz)

    def bind(self, rows: Any, cols: Any) -> IndexMaps:
        """The index maps of this pattern with the given (traced) ``rows`` and ``cols``."""
        maps = IndexMaps()
        maps.rows, maps.cols, maps.shape = rows, cols, self.shape
        return maps

    def __eq__(self, other: object) -> bool:
        same = isinstance(other, OperandPattern) and other.shape == self.shape
        return same and other.nnz == self.nnz

    def __hash__(self) -> int:
        return hash((OperandPattern, self.shape, self.nnz))

    def __repr__(self) -> str:
        return f"OperandPattern(shape={self.shape}, nnz={self.nnz})"


def traced_index_operands(mat: Any) -> tuple[jax.Array, jax.Array]:
    """``(rows, cols)`` int32 of a saiunit ``CSR`` / ``CSC`` / ``COO`` whose indices are traced
    (a CSR's rows are expanded from ``indptr`` in-program: ``nnz`` is static)."""
    kind = type(mat).__name__
    if kind in ("CSR", "CSC"):
        indptr, indices = jnp.asarray(mat.indptr), jnp.asarray(mat.indices, jnp.int32)
        lines = jnp.arange(indptr.shape[0] - 1, dtype=jnp.int32)
        expanded = jnp.repeat(lines, jnp.diff(indptr), total_repeat_length=indices.shape[0])
        return (expanded, indices) if kind == "CSR" else (indices, expanded)
    return jnp.asarray(mat.row, jnp.int32), jnp.asarray(mat.col, jnp.int32)


#: largest ``n`` whose index arithmetic stays in uint32 (see :meth:`FixedFanIn._mulmod`)
MAX_PROCEDURAL_SIZE = 1 << 21


class FixedFanIn:
    r"""A square ``(n, n)`` random pattern with exactly ``fan_in`` inputs and ``fan_in`` outputs
    per neuron, whose indices are computed inside the program instead of stored.

    With a random relabelling :math:`\pi(i) = a\,i \bmod n` (``a`` coprime to ``n``) and
    ``fan_in`` distinct random shifts :math:`c_k \in [1, n)`, synapse ``k`` of neuron ``o``
    comes from

    .. math:: \mathrm{pre}_k(o) = \pi^{-1}\big((\pi(o) + c_k) \bmod n\big),
       \qquad \mathrm{post}_k(i) = \pi^{-1}\big((\pi(i) - c_k) \bmod n\big),

    so each presynaptic neuron reaches exactly ``fan_in`` targets, with no self-connection and
    no repeated pair. In label space (:math:`u = \pi(o)`) synapse ``k`` is a cyclic shift by
    :math:`c_k`, so weights are stored ``weight_data[k * n + π(o)]`` and every product is the
    ``fan_in`` shifted windows of one n-sized relabelling, reduced over ``k`` (no scatter;
    ``to_rows_cols`` lists the synapses in that order). Only ``a``, its inverse and the shifts
    are in the program: its size does not grow with ``n``. Equality and hash are by value.
    ``n`` must be below ``2**21`` (the index arithmetic is uint32).

    Examples
    --------
    >>> p = FixedFanIn(6, fan_in=2, seed=0)
    >>> p.shape, p.nnz
    ((6, 6), 12)
    >>> rows, cols = p.to_rows_cols()
    >>> sorted(np.bincount(rows).tolist()) == [2] * 6  # fan-out 2 as well
    True
    """

    def __init__(self, n: int, fan_in: int, seed: int = 0):
        n, fan_in = int(n), int(fan_in)
        if not 1 <= fan_in < n or n >= MAX_PROCEDURAL_SIZE:
            raise ValueError(
                f"FixedFanIn: n={n}, fan_in={fan_in}; needs 1 <= fan_in < n < {MAX_PROCEDURAL_SIZE}"
                ". Example: FixedFanIn(10_000, fan_in=100, seed=0)."
            )
        rng = np.random.default_rng(seed)
        multiplier = int(rng.integers(1, n))
        while math.gcd(multiplier, n) != 1:
            multiplier = int(rng.integers(1, n))
        self.n, self.fan_in, self.seed = n, fan_in, int(seed)
        self.multiplier, self.inverse = multiplier, pow(multiplier, -1, n)
        self.shifts = tuple(int(c) for c in rng.choice(n - 1, size=fan_in, replace=False) + 1)
        self._key = (n, fan_in, multiplier, self.shifts)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    @property
    def nnz(self) -> int:
        return self.n * self.fan_in

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FixedFanIn) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"FixedFanIn(n={self.n}, fan_in={self.fan_in}, seed={self.seed})"

    def _mulmod(self, x: jax.Array, a: int) -> jax.Array:
        """``x * a mod n`` for uint32 ``x, a < n < 2**21`` without an integer division.

        The quotient is estimated in float32 (``x * (a / n)``, off by less than 1 for these
        sizes), the remainder is taken in wrapping uint32 arithmetic (exact modulo ``2**32``,
        and the true value lies in ``(-n, 2n)``), then corrected by one conditional add or
        subtract. Integer ``%`` costs ~10x more on CPUs and GPUs.
        """
        n = self.n
        quotient = jnp.floor(x.astype(jnp.float32) * np.float32(a / n)).astype(jnp.uint32)
        wrapped = x * np.uint32(a) - quotient * np.uint32(n)
        rem = jax.lax.bitcast_convert_type(wrapped, jnp.int32)
        rem = jnp.where(rem < 0, rem + n, rem)
        return jnp.where(rem >= n, rem - n, rem).astype(jnp.uint32)

    def _shifted(self, neurons: jax.Array, sign: int) -> jax.Array:
        """``π⁻¹(π(i) + sign·c_k)`` for every ``k``: ``(*neurons.shape, fan_in)`` int32."""
        n = self.n
        offsets = np.asarray([c if sign > 0 else n - c for c in self.shifts], np.uint32)
        label = self._mulmod(jnp.asarray(neurons).astype(jnp.uint32), self.multiplier)
        moved = label[..., None] + jnp.asarray(offsets)
        moved = jnp.where(moved >= n, moved - np.uint32(n), moved)
        return self._mulmod(moved, self.inverse).astype(jnp.int32)

    def presynaptic(self) -> jax.Array:
        """``pre_k(o)`` for every neuron ``o``: ``(n, fan_in)`` int32, computed in-program."""
        return self._shifted(jax.lax.iota(jnp.uint32, self.n), +1)

    def postsynaptic(self, neurons: jax.Array) -> jax.Array:
        """``post_k(i)`` of the given presynaptic neurons: ``(*neurons.shape, fan_in)``."""
        return self._shifted(neurons, -1)

    def _relabel(self, values: jax.Array, multiplier: int) -> jax.Array:
        """``values[..., (u * multiplier) mod n]`` for every ``u``: one n-sized gather."""
        labels = self._mulmod(jax.lax.iota(jnp.uint32, self.n), multiplier).astype(jnp.int32)
        return values[..., labels]

    def to_labels(self, values: jax.Array) -> jax.Array:
        """Neuron-indexed ``(..., n)`` -> label-indexed: ``out[u] = values[π⁻¹(u)]``."""
        return self._relabel(values, self.inverse)

    def from_labels(self, values: jax.Array) -> jax.Array:
        """Label-indexed ``(..., n)`` -> neuron-indexed: ``out[o] = values[π(o)]``."""
        return self._relabel(values, self.multiplier)

    def _shifted_inputs(self, x: jax.Array) -> list:
        """``[x_π[(u + c_k) mod n] for u]`` per ``k``: contiguous slices of ``[x_π, x_π]``."""
        labelled = self.to_labels(x)
        doubled = jnp.concatenate([labelled, labelled], axis=-1)
        return [doubled[..., c : c + self.n] for c in self.shifts]

    def to_rows_cols(self) -> tuple[np.ndarray, np.ndarray]:
        """The pattern as numpy ``(rows, cols)`` in weight order (input, output index)."""
        n, labels = self.n, np.arange(self.n, dtype=np.int64)
        cols = labels * self.inverse % n
        rows = [(labels + c) % n * self.inverse % n for c in self.shifts]
        return np.concatenate(rows).astype(np.int32), np.tile(cols, self.fan_in).astype(np.int32)

    def to_sparse_pattern(self) -> SparsePattern:
        """The same pattern stored (a :class:`SparsePattern`, e.g. to compare or export)."""
        return SparsePattern(*self.to_rows_cols(), self.shape)

    def _doubled_labels(self, x: jax.Array) -> jax.Array:
        labelled = self.to_labels(x)
        return jnp.concatenate([labelled, labelled], axis=-1)

    def _windows(self, x: jax.Array) -> jax.Array:
        """``x_π[..., (u + c_k) mod n]`` for every ``k`` and ``u``, ``(..., fan_in, n)``: one
        gather of ``[x_π, x_π]`` at in-program indices ``c_k + u`` (no loop over ``fan_in``)."""
        starts = jnp.asarray(self.shifts, jnp.int32)[:, None]
        return self._doubled_labels(x)[..., starts + jax.lax.iota(jnp.int32, self.n)]

    def product(self, x: jax.Array, data: jax.Array) -> jax.Array:
        """``y_o = Σ_k x[pre_k(o)] w[k, π(o)]`` in label order, then one n-sized gather: the
        shifted windows times the weights reduced over ``k`` in one pass (``"gather"``), or
        ``fan_in`` contiguous multiply-adds (``"loop"``; :func:`fan_in_strategy`)."""
        weights = data.reshape(self.fan_in, self.n)
        if fan_in_strategy() == "gather":
            return self.from_labels(jnp.sum(self._windows(x) * weights, axis=-2))
        doubled = self._doubled_labels(x)

        def add_synapse(k: Any, total: jax.Array) -> jax.Array:
            return total + self._window(doubled, k) * weights[k]

        total = jnp.zeros((*x.shape[:-1], self.n), jnp.result_type(x, data))
        return self.from_labels(jax.lax.fori_loop(0, self.fan_in, add_synapse, total))

    def correlate(self, x: jax.Array, signal: jax.Array, lead: int) -> jax.Array:
        """``Σ_lead x[..., pre_k(o)] signal[..., o]`` in weight order, ``(nnz,)`` (one pass, or
        a row per ``k``: :meth:`product`)."""
        if fan_in_strategy() == "gather":
            windows = self._windows(x)
            return contract_trace(windows, self.to_labels(signal), lead, 1).reshape(self.nnz)
        doubled = self._doubled_labels(x).reshape(-1, 2 * self.n)
        labelled = self.to_labels(signal).reshape(-1, self.n)
        rows = jax.lax.map(lambda k: jnp.sum(self._window(doubled, k) * labelled, axis=0),
                           jnp.arange(self.fan_in))  # fmt: skip
        return rows.reshape(self.nnz)

    def _window(self, doubled: jax.Array, k: Any) -> jax.Array:
        """``x_π[..., (u + c_k) mod n]`` for every ``u`` (a slice of ``[x_π, x_π]``)."""
        start = jnp.asarray(self.shifts, jnp.int32)[k]
        return jax.lax.dynamic_slice_in_dim(doubled, start, self.n, axis=doubled.ndim - 1)

    def gather_inputs(self, x: jax.Array) -> jax.Array:
        return jnp.concatenate(self._shifted_inputs(x), axis=-1)

    def gather_outputs(self, g: jax.Array) -> jax.Array:
        labelled = self.to_labels(jnp.asarray(g))
        wide = jnp.broadcast_to(labelled[..., None, :], (*labelled.shape[:-1], self.fan_in, self.n))
        return wide.reshape(*labelled.shape[:-1], self.nnz)

    def sum_to_outputs(self, contributions: jax.Array) -> jax.Array:
        lead = contributions.shape[:-1]
        return self.from_labels(contributions.reshape(*lead, self.fan_in, self.n).sum(-2))

    def contract(self, per_weight: jax.Array, signal: jax.Array, lead: int) -> jax.Array:
        grid = per_weight.reshape(*per_weight.shape[:lead], self.fan_in, self.n)
        return contract_trace(grid, self.to_labels(signal), lead, 1).reshape(self.nnz)


FAN_IN_STRATEGY: str | None = None  # FixedFanIn's sum over its fan-in; None: by backend


def fan_in_strategy() -> str:
    """``"loop"`` on CPU (XLA:CPU does not fuse the gather: 0.8 vs 3.6 ms per ES-D-RTRL step at
    n = 1k), ``"gather"`` elsewhere (one kernel, not ``fan_in`` launches), unless
    :data:`FAN_IN_STRATEGY` names one; read when a step is traced."""
    if FAN_IN_STRATEGY is not None:
        return FAN_IN_STRATEGY
    return "loop" if jax.default_backend() == "cpu" else "gather"


def event_driven_product(x: jax.Array, data: jax.Array, pattern: Any, max_active: int):
    r"""``x @ sparse(data)`` reading only the weights of the inputs that are non-zero.

    Per sample, the indices of at most ``max_active`` non-zero inputs (``jnp.nonzero`` with a
    static size) select their ``fan_in`` outgoing synapses, ``O(B · max_active · fan_in)`` work
    and weight reads; a step with more non-zero inputs than that in any sample falls back to
    the dense-input product (``lax.cond``), so the result is always the same product. Inputs
    are multiplied in, so graded (non-binary) events are exact too. Derivatives are those of
    the dense-input product (``jax.custom_jvp``), so surrogate gradients flow to ``x``.
    Needs a :class:`FixedFanIn` pattern (its fan-out is known in-program).
    """
    if not isinstance(pattern, FixedFanIn):
        raise TypeError(
            f"event_driven_product needs a FixedFanIn pattern, got {pattern!r}: a stored "
            "SparsePattern has no in-program fan-out. Use etp_viz.ops.sparse.FixedFanIn(n, fan_in)."
        )
    return _event_product(x, data, pattern, int(max_active))


@partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def _event_product(x, data, pattern, max_active):
    flat = x.reshape(-1, pattern.n)
    active = flat != 0
    back = np.asarray([pattern.n - c for c in pattern.shifts], np.uint32)
    lanes = jnp.arange(pattern.fan_in, dtype=jnp.int32)

    def events(_):  # scatter each active input's fan_in synapses
        def one(row, mask):
            (ids,) = jnp.nonzero(mask, size=max_active, fill_value=0)
            valid = jnp.arange(max_active) < jnp.sum(mask)
            label = pattern._mulmod(ids.astype(jnp.uint32), pattern.multiplier)
            moved = label[:, None] + jnp.asarray(back, jnp.uint32)  # (M, K): π(post_k(i))
            targets = jnp.where(moved >= pattern.n, moved - pattern.n, moved).astype(jnp.int32)
            slots = targets + lanes * pattern.n
            values = data[slots] * jnp.where(valid, row[ids], 0)[:, None]
            return pattern.from_labels(jnp.zeros(pattern.n, values.dtype).at[targets].add(values))

        return jax.vmap(one)(flat, active)

    fits = jnp.max(jnp.sum(active, axis=-1)) <= max_active
    y = jax.lax.cond(fits, events, lambda _: pattern.product(flat, data), None)
    return y.reshape(*x.shape[:-1], pattern.n)


@_event_product.defjvp
def _event_product_jvp(pattern, max_active, primals, tangents):
    (x, data), (dx, ddata) = primals, tangents
    y = _event_product(x, data, pattern, max_active)
    return y, pattern.product(dx, data) + pattern.product(x, ddata)


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
