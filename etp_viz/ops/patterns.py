r"""Sparsity patterns of the sparse ETP primitives and their index maps: stored
(:class:`SparsePattern`, indices as program constants), traced (:class:`OperandPattern`,
indices as operands) and procedural (:class:`FixedFanIn`, indices computed in-program), with
:class:`FixedFanIn`'s fan-in strategies (:func:`fan_in_strategy`) and the event-driven product.

Every :class:`FixedFanIn` product is the ``fan_in`` shifted windows of one n-sized relabelling
of the input, reduced over the fan-in; :data:`FAN_IN_STRATEGY` says how: ``"loop"``
(``fan_in`` contiguous multiply-adds, fastest on CPU) or ``"gather"`` (one gather, fused by
XLA into the pass that consumes it: the accelerators' default).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._common import contract_trace

__all__ = [
    "FAN_IN_STRATEGY",
    "FixedFanIn",
    "IndexMaps",
    "MAX_PROCEDURAL_SIZE",
    "OperandPattern",
    "SparsePattern",
    "event_driven_product",
    "fan_in_strategy",
    "traced_index_operands",
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
        """``x[..., r_k]`` for every synapse, ``(..., nnz)``: the gather's windows (a view XLA
        fuses into the trace update that reads it) or, with the loop, ``fan_in`` slices
        concatenated (a ``(B, nnz)`` copy: 2 x 320 MB per D-RTRL step at 100k neurons)."""
        if fan_in_strategy() == "gather":
            return self._windows(x).reshape(*x.shape[:-1], self.nnz)
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
    n = 1k), ``"gather"`` elsewhere (one kernel, not ``fan_in`` launches: 0.13 vs 1.88 ms per
    ES-D-RTRL step at n = 10k on an H200), unless :data:`FAN_IN_STRATEGY` names one
    (``"loop"`` or ``"gather"``); read when a step is traced. A batch-minor variant of the
    gather (each weight read once per step, not once per sample) measured 1.05-1.11x slower
    there at 100k-1M neurons and was not kept (``bench/README.md``)."""
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
