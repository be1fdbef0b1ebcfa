r"""Structural sparsity of a step's Jacobians, read off its jaxpr (sound by construction).

SnAp-n and OSTL keep the influence matrix on the sparsity pattern of
:math:`J_h = \partial h^t/\partial h^{t-1}` and :math:`J_\theta = \partial h^t/\partial\theta`.
A pattern found from numerical Jacobians at sample points misses every entry that is
structurally non-zero but zero at the samples (a spike that never fired, a ReLU that was off);
this module finds it from the program instead.

:func:`jacobian_sparsity` traces the *tangent* of the function (``jax.jvp`` with the tangents
as inputs; custom JVP rules such as surrogate spike derivatives are then part of the program,
and ``stop_gradient`` or comparisons drop out) and propagates, per jaxpr variable, a boolean
dependency array of shape ``(*var.shape, N)``: which of the ``N`` flat tangent inputs each
element may depend on (bit-packed along ``N``). Primal values (parameters, states, the inputs
``x``) carry no dependency. Every rule may over-approximate, none may miss a dependency:

* element-wise primitives (:data:`ELEMENTWISE`): the OR of the operands' rows (scalars and
  size-1 axes broadcast);
* data movement (:data:`MOVES`: reshape, transpose, broadcast, slice, concatenate, pad,
  gather / dynamic_slice, ...): the primitive is bound on integer index arrays to learn which
  operand element each output element reads. Indices known at trace time (constants) are used
  as they are; indices that depend on an input (token ids) are unknown, and an output element
  then reads *every* position along the indexed axes (an embedding's unit ``j`` reads the
  column ``table[:, j]``): the pattern never depends on the example's values;
* scatters (``scatter-add`` ...) with known indices: an output element depends on its
  operand element and on every update element scattered into it;
* reductions (:data:`REDUCTIONS`): the OR over the reduced axes; cumulative ops
  (:data:`CUMULATIVE`): a running OR along the axis;
* ``dot_general``: an output element depends on the OR over the contracting axes of the left
  row and of the right column (a zero factor is not assumed);
* sub-jaxprs (jit, closed_call, remat, custom_jvp/vjp calls) and etp_viz's ETP primitives
  (their ``impl`` traced): recursion; ``cond``: the OR of the branches;
* anything else (``scan``, ``while``, convolutions, ...): every output element
  depends on every element of every operand (:func:`jacobian_sparsity` can report which).

An array that would exceed ``max_entries`` booleans is replaced by a coarser sound answer
(every element depends on the union of its operands' dependencies) with a warning. Past
:data:`MAX_COLUMNS` flat inputs the walk runs per block of columns (a GRU of 128 units has
55,680 parameters: their identity rows alone were over the bound and SnAp-1's pattern full).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from etp_viz import _compat

__all__ = ["MAX_COLUMNS", "MAX_ENTRIES", "MAX_PASSES", "jacobian_sparsity"]

#: the most booleans one dependency array may hold before the analysis coarsens it
MAX_ENTRIES = 200_000_000
#: past ``MAX_COLUMNS`` columns (flat inputs) the analysis runs in passes of at most that many,
#: at most ``MAX_PASSES`` of them (more: one coarse pass, as the size bound makes it)
MAX_COLUMNS, MAX_PASSES = 2048, 256

#: primitives whose output element reads only the same element of each operand (or a scalar)
ELEMENTWISE = frozenset(
    "abs acos acosh add add_any and asin asinh atan atan2 atanh bessel_i0e bessel_i1e cbrt "
    "ceil clamp complex conj convert_element_type copy copy_p cos cosh digamma div eq erf "
    "erf_inv erfc exp exp2 expm1 floor ge gt igamma igammac imag integer_pow is_finite le "
    "lgamma log log1p logistic lt max min mul ne neg nextafter not or polygamma pow "
    "random_gamma_grad real reduce_precision regularized_incomplete_beta rem round rsqrt "
    "select_n shift_left shift_right_arithmetic shift_right_logical sign sin sinh sqrt square "
    "sub tan tanh xor zeta population_count clz".split()
)
#: data movement: each output element is one operand element or a constant
MOVES = frozenset(
    "reshape transpose broadcast_in_dim squeeze expand_dims slice rev concatenate pad split "
    "dynamic_slice dynamic_update_slice gather".split()
)
#: operands of a move that are indices, not data (their values must be known)
_INDEX_OPERANDS = {"dynamic_slice": 1, "dynamic_update_slice": 2, "gather": 1}
#: scatters: ``(operand, indices, updates)`` with a ``ScatterDimensionNumbers``
SCATTERS = frozenset(
    "scatter scatter-add scatter_add scatter-mul scatter_mul scatter-min "
    "scatter_min scatter-max scatter_max scatter_sub scatter-sub".split()
)
#: reductions over ``params['axes']``
REDUCTIONS = frozenset(
    "reduce_sum reduce_max reduce_min reduce_prod reduce_and reduce_or reduce_xor argmax "
    "argmin".split()
)
#: cumulative ops along ``params['axis']`` (``reverse`` honoured)
CUMULATIVE = frozenset("cumsum cumprod cummax cummin cumlogsumexp".split())

#: folded primitives: constants (indices) computed at trace time, up to this many elements
_FOLD_MAX = 100_000

Deps = np.ndarray | None


def jacobian_sparsity(
    fn: Callable[..., Any],
    *args: Any,
    max_entries: int = MAX_ENTRIES,
    fallbacks: set[str] | None = None,
    inputs: Sequence[Any] = (),
) -> tuple[np.ndarray, ...]:
    """Boolean structural sparsity of the Jacobian of ``fn`` w.r.t. each argument.

    Parameters
    ----------
    fn : callable
        ``fn(*args) -> array`` of floating arguments; differentiable with ``jax.jvp``.
    *args : arrays
        Example arguments (only shapes, dtypes and constants folded from them matter).
    max_entries : int
        Size bound of one dependency array (booleans); above it the analysis coarsens.
    fallbacks : set, optional
        Filled with the names of the primitives that used the conservative all-to-all rule.
    inputs : sequence of pytrees, optional
        Passed to ``fn`` after ``args`` (``fn(*args, *inputs)``) with no tangent and *unknown*
        values: indices computed from them (token ids) are not folded, so the pattern holds
        for every value they may take.

    Returns
    -------
    tuple of numpy.ndarray
        One ``(out.size, arg.size)`` boolean array per argument: ``True`` where the
        Jacobian entry may be non-zero. A superset of the non-zeros at every point.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> w, h = jnp.ones((3, 3)), jnp.ones(3)
    >>> reach_w, reach_h = jacobian_sparsity(lambda w, h: jnp.tanh(h @ w) + 0.5 * h, w, h)
    >>> reach_h.astype(int)
    array([[1, 1, 1],
           [1, 1, 1],
           [1, 1, 1]])
    >>> reach_w[0].reshape(3, 3).astype(int)  # unit 0 reads the column W[:, 0]
    array([[1, 0, 0],
           [1, 0, 0],
           [1, 0, 0]])
    >>> jacobian_sparsity(lambda h: jnp.maximum(h, 0.0) * 2.0, h)[0].astype(int)
    array([[1, 0, 0],
           [0, 1, 0],
           [0, 0, 1]])
    """
    args = tuple(jnp.asarray(a) for a in args)
    sizes = [int(a.size) for a in args]
    offsets = np.cumsum([0, *sizes])
    num_columns = int(offsets[-1])

    leaves, treedef = jax.tree.flatten(tuple(inputs))
    nargs = len(args)

    def tangent(*flat):
        primals, tangents = flat[:nargs], flat[nargs : 2 * nargs]
        rest = jax.tree.unflatten(treedef, flat[2 * nargs :])
        return jax.jvp(lambda *p: fn(*p, *rest), tuple(primals), tuple(tangents))[1]

    closed = jax.make_jaxpr(tangent)(*args, *args, *leaves)
    jaxpr, consts = _compat.split_closed_jaxpr(closed)
    out_shape = tuple(jaxpr.outvars[0].aval.shape)
    out_size = math.prod(out_shape)
    rows = np.zeros((out_size, num_columns), bool)
    width = num_columns
    if num_columns > MAX_COLUMNS:  # a few thousand columns a pass (module docstring)
        defined = [v.aval for e in jaxpr.eqns for v in e.outvars]
        largest = max([*sizes, *(a.size for a in defined if isinstance(a, _compat.ShapedArray))])
        width = min(MAX_COLUMNS, max(8, max_entries // max(largest, 1) // 8 * 8))
        width = width if num_columns <= MAX_PASSES * width else num_columns
    for lo in range(0, num_columns, width):
        hi = min(lo + width, num_columns)
        analysis = _Analysis(hi - lo, max_entries)
        in_deps = [None] * nargs + [
            analysis.identity(a.shape, int(off) - lo) for a, off in zip(args, offsets[:-1])
        ]
        in_deps += [None] * len(leaves)
        (out,) = analysis.run(jaxpr, consts, in_deps, [None] * len(in_deps))
        if out is not None:
            packed = np.broadcast_to(out, (*out_shape, analysis.nbytes))
            packed = packed.reshape(out_size, analysis.nbytes)
            bits = np.unpackbits(packed, axis=-1, count=hi - lo, bitorder="little")
            rows[:, lo:hi] = bits.astype(bool)
        if fallbacks is not None:
            fallbacks |= analysis.fallbacks
    return tuple(rows[:, lo:hi] for lo, hi in zip(offsets[:-1], offsets[1:]))


class _Analysis:
    """Dependency propagation through one jaxpr (and, recursively, its sub-jaxprs)."""

    def __init__(self, num_columns: int, max_entries: int):
        self.num_columns = num_columns
        self.nbytes = max((num_columns + 7) // 8, 1)
        self.max_bytes = max(int(max_entries) // 8, 1)
        self.fallbacks: set[str] = set()
        self.coarsened: set[str] = set()

    # -- arrays ------------------------------------------------------------------------
    def identity(self, shape: Sequence[int], offset: int) -> np.ndarray | None:
        """Element ``k`` of an input of ``shape`` depends on column ``offset + k`` (none
        where that is outside ``[0, num_columns)``: a pass over other columns)."""
        size = math.prod(shape)
        column = offset + np.arange(size)
        inside = (column >= 0) & (column < self.num_columns)
        if not inside.any():
            return None
        if size * self.nbytes > self.max_bytes:
            bits = np.zeros(self.nbytes * 8, bool)
            bits[column[inside]] = True
            self._coarsened("an input")
            return np.broadcast_to(np.packbits(bits, bitorder="little"), (*shape, self.nbytes))
        rows, kept = np.zeros((size, self.nbytes), np.uint8), column[inside]
        rows[np.flatnonzero(inside), kept // 8] = (1 << (kept % 8)).astype(np.uint8)
        return rows.reshape(*shape, self.nbytes)

    def union(self, deps: Sequence[Deps]) -> np.ndarray | None:
        """The OR of every element of every operand, ``(nbytes,)``."""
        total = None
        for d in deps:
            if d is None:
                continue
            flat = _or_reduce(d.reshape(-1, self.nbytes), axis=0)
            total = flat if total is None else total | flat
        return total

    def _too_big(self, atoms: Sequence[Any]) -> bool:
        return any(math.prod(a.aval.shape) * self.nbytes > self.max_bytes for a in atoms)

    def _coarsened(self, what: str) -> None:
        if what not in self.coarsened:
            self.coarsened.add(what)
            warnings.warn(
                f"jacobian_sparsity: a dependency array of {what} exceeds the size bound; "
                "its elements are taken to depend on all of its operands' dependencies "
                "(sound, coarser)",
                stacklevel=3,
            )

    def everything(self, eqn: Any, deps: Sequence[Deps]) -> list[Deps]:
        """The conservative rule: every output element depends on every operand element."""
        total = self.union(deps)
        if total is None:
            return [None] * len(eqn.outvars)
        return [np.broadcast_to(total, (*v.aval.shape, self.nbytes)) for v in eqn.outvars]

    # -- the walk ----------------------------------------------------------------------
    def run(
        self, jaxpr: Any, consts: Sequence[Any], in_deps: Sequence[Deps], in_values: Sequence[Any]
    ) -> list[Deps]:
        """Dependencies of ``jaxpr``'s outputs from its inputs' (``None``: none); the known
        values (constants, folded index arrays) are passed to sub-jaxprs."""
        deps: dict[Any, Deps] = {}
        values: dict[Any, Any] = {}
        for var, const in zip(jaxpr.constvars, consts):
            deps[var], values[var] = None, const
        for var, d, v in zip(jaxpr.invars, in_deps, in_values):
            deps[var] = d
            if v is not None:
                values[var] = v

        def read(atom: Any) -> tuple[Deps, Any]:
            if _compat.is_literal(atom):
                return None, atom.val
            return deps.get(atom), values.get(atom)

        last_use = {}  # a dependency array is dropped after its last reader (peak memory)
        for i, eqn in enumerate(jaxpr.eqns):
            for atom in eqn.invars:
                if _compat.is_var(atom):
                    last_use[atom] = i
        for atom in jaxpr.outvars:
            if _compat.is_var(atom):
                last_use[atom] = len(jaxpr.eqns)
        for i, eqn in enumerate(jaxpr.eqns):
            ins = [read(a) for a in eqn.invars]
            in_d = [d for d, _ in ins]
            in_v = [v for _, v in ins]
            out_d: list[Deps]
            if all(d is None for d in in_d):
                out_d = [None] * len(eqn.outvars)
                inner = _compat.call_jaxpr(eqn)
                if inner is not None and any(v is not None for v in in_v):
                    out_v = self._fold_call(inner, in_d, in_v)
                else:
                    out_v = _fold(eqn, in_v)
            else:
                out_v = [None] * len(eqn.outvars)
                dependent = [a for a, d in zip(eqn.invars, in_d) if d is not None]
                if self._too_big(eqn.outvars) or self._too_big(dependent):
                    self._coarsened(f"`{eqn.primitive.name}`")
                    out_d = self.everything(eqn, in_d)
                else:
                    out_d = self.rule(eqn, in_d, in_v)
            for var, d, v in zip(eqn.outvars, out_d, out_v):
                if _compat.is_var(var):
                    deps[var] = d
                    if v is not None:
                        values[var] = v
            for atom in eqn.invars:
                if _compat.is_var(atom) and last_use.get(atom) == i:
                    deps.pop(atom, None)
        return [read(a)[0] for a in jaxpr.outvars]

    def _fold_call(self, inner: tuple[Any, list[Any]], in_d: list, in_v: list) -> list[Any]:
        """Known values out of a call's sub-jaxpr (no dependencies flow through it)."""
        jaxpr, consts = inner
        sub = _Analysis(self.num_columns, 8 * self.max_bytes)
        sub_values: dict[Any, Any] = {}
        for var, const in zip(jaxpr.constvars, consts):
            sub_values[var] = const
        for var, v in zip(jaxpr.invars, in_v):
            if v is not None:
                sub_values[var] = v
        for eqn in jaxpr.eqns:
            vals = [a.val if _compat.is_literal(a) else sub_values.get(a) for a in eqn.invars]
            inner_call = _compat.call_jaxpr(eqn)
            if inner_call is not None:
                outs = sub._fold_call(inner_call, [None] * len(vals), vals)
            else:
                outs = _fold(eqn, vals)
            for var, v in zip(eqn.outvars, outs):
                if v is not None and _compat.is_var(var):
                    sub_values[var] = v
        return [a.val if _compat.is_literal(a) else sub_values.get(a) for a in jaxpr.outvars]

    def rule(self, eqn: Any, deps: list[Deps], values: list[Any]) -> list[Deps]:
        """The output dependencies of one equation with at least one dependent operand."""
        name = eqn.primitive.name
        try:
            if name in ELEMENTWISE:
                return self.elementwise(eqn, deps)
            if name in MOVES:
                return self.move(eqn, deps, values)
            if name in REDUCTIONS:
                return self.reduce(eqn, deps)
            if name in CUMULATIVE:
                return self.cumulative(eqn, deps)
            if name == "dot_general":
                return self.dot_general(eqn, deps)
            if name in SCATTERS:
                return self.scatter(eqn, deps, values)
            if name == "optimization_barrier":
                return list(deps)
            inner = _compat.call_jaxpr(eqn)
            if inner is not None:
                return self.run(inner[0], inner[1], deps, values)
            branches = _compat.cond_branches(eqn)
            if branches is not None:
                return self.cond(eqn, branches, deps, values)
            impl = _etp_impl(eqn)
            if impl is not None:
                return self.run(impl[0], impl[1], deps, values)
        except _NoRule:
            pass
        self.fallbacks.add(name)
        return self.everything(eqn, deps)

    # -- rules -------------------------------------------------------------------------
    def elementwise(self, eqn: Any, deps: list[Deps]) -> list[Deps]:
        shape = tuple(eqn.outvars[0].aval.shape)
        if any(tuple(v.aval.shape) != shape for v in eqn.outvars):
            raise _NoRule
        out = np.zeros((*shape, self.nbytes), np.uint8)
        for atom, d in zip(eqn.invars, deps):
            if d is None:
                continue
            if not _broadcasts(tuple(atom.aval.shape), shape):
                raise _NoRule
            out |= d  # a scalar's (nbytes,) row or a size-1 axis broadcasts
        return [out] * len(eqn.outvars)

    def move(self, eqn: Any, deps: list[Deps], values: list[Any]) -> list[Deps]:
        """Bind the primitive on integer index arrays: which element each output reads."""
        name = eqn.primitive.name
        first_index = _INDEX_OPERANDS.get(name, len(eqn.invars))
        if name == "gather":
            data, indices = range(1), range(1, 2)
        else:
            data, indices = range(first_index), range(first_index, len(eqn.invars))
        if any(values[i] is None for i in indices):
            return self.move_anywhere(eqn, deps, list(indices))
        operands: list[Any] = [None] * len(eqn.invars)
        blocks: list[np.ndarray] = []
        offset = 0
        for i in data:
            shape = tuple(eqn.invars[i].aval.shape)
            size = math.prod(shape)
            operands[i] = np.arange(offset, offset + size, dtype=np.int32).reshape(shape)
            d = deps[i]
            rows = (
                np.zeros((size, self.nbytes), np.uint8)
                if d is None
                else np.broadcast_to(d, (*shape, self.nbytes)).reshape(size, self.nbytes)
            )
            blocks.append(rows)
            offset += size
        for i in indices:
            operands[i] = np.asarray(values[i])
        blocks.append(np.zeros((1, self.nbytes), np.uint8))  # "no source": a constant
        table = np.concatenate(blocks)
        subfuns, params = _compat.eqn_bind_params(eqn)
        if "fill_value" in params:
            params = {**params, "fill_value": -1}  # an out-of-bounds read: no source
        try:
            outs = eqn.primitive.bind(*subfuns, *[jnp.asarray(o) for o in operands], **params)
        except Exception as err:  # noqa: BLE001 - a primitive that refuses integers
            raise _NoRule from err
        outs = outs if eqn.primitive.multiple_results else [outs]
        result: list[Deps] = []
        for var, src in zip(eqn.outvars, outs):
            src = np.asarray(src).reshape(-1).astype(np.int64)
            src = np.where((src >= 0) & (src < offset), src, offset)
            result.append(table[src].reshape(*var.aval.shape, self.nbytes))
        return result

    def move_anywhere(self, eqn: Any, deps: list[Deps], indices: list[int]) -> list[Deps]:
        """A gather / dynamic_slice whose indices depend on an input: each output element may
        read any position along the axes the indices choose (the operand's dependencies are
        OR-ed along them), then the move is bound at index 0."""
        name, shape = eqn.primitive.name, tuple(eqn.invars[0].aval.shape)
        if name == "gather":
            axes = tuple(int(a) for a in eqn.params["dimension_numbers"].start_index_map)
        elif name == "dynamic_slice":
            sizes = eqn.params["slice_sizes"]
            axes = tuple(a for a, (n, k) in enumerate(zip(shape, sizes)) if k < n)
        else:
            raise _NoRule
        d = deps[0]
        if d is not None and axes:
            d = np.broadcast_to(d, (*shape, self.nbytes))
            d = np.broadcast_to(np.bitwise_or.reduce(d, axis=axes, keepdims=True), d.shape)
        zeros = [np.zeros(eqn.invars[i].aval.shape, eqn.invars[i].aval.dtype) for i in indices]
        known: list[Any] = [None] * len(eqn.invars)
        for i, z in zip(indices, zeros):
            known[i] = z
        return self.move(eqn, [d, *deps[1:]], known)

    def scatter(self, eqn: Any, deps: list[Deps], values: list[Any]) -> list[Deps]:
        """Known indices: an output element depends on its operand element and on every
        update element scattered into it. Each update element's target is read off the
        transpose of a scatter-add (a gather) applied to the output positions."""
        operand, indices, updates = eqn.invars[:3]
        if len(eqn.invars) != 3 or values[1] is None:
            raise _NoRule
        out_shape = tuple(operand.aval.shape)
        size = math.prod(out_shape)
        if size >= 2**24:
            raise _NoRule  # positions must be exact in float32

        def add(u):
            return jax.lax.scatter_add(
                jnp.zeros(out_shape, jnp.float32),
                jnp.asarray(values[1]),
                u,
                eqn.params["dimension_numbers"],
                mode=eqn.params.get("mode"),
            )

        try:
            _, pull = jax.vjp(add, jnp.zeros(updates.aval.shape, jnp.float32))
            (target,) = pull(jnp.arange(size, dtype=jnp.float32).reshape(out_shape))
        except Exception as err:  # noqa: BLE001 - dimension numbers it cannot take
            raise _NoRule from err
        out = np.zeros((size, self.nbytes), np.uint8)
        if deps[0] is not None:
            out |= np.broadcast_to(deps[0], (*out_shape, self.nbytes)).reshape(size, -1)
        if deps[2] is not None:
            upd = np.broadcast_to(deps[2], (*updates.aval.shape, self.nbytes))
            target = np.asarray(target).reshape(-1).astype(np.int64)
            np.bitwise_or.at(out, target, upd.reshape(-1, self.nbytes))
        if deps[1] is not None:
            raise _NoRule
        return [out.reshape(*out_shape, self.nbytes)]

    def reduce(self, eqn: Any, deps: list[Deps]) -> list[Deps]:
        if len(deps) != 1:
            raise _NoRule
        axes = tuple(int(a) for a in eqn.params["axes"])
        d = _operand(deps[0])
        out = _or_reduce(d, axis=axes) if axes else d
        return [out] * len(eqn.outvars)

    def cumulative(self, eqn: Any, deps: list[Deps]) -> list[Deps]:
        axis = int(eqn.params["axis"])
        d = _operand(deps[0])
        if eqn.params.get("reverse", False):
            return [np.flip(np.bitwise_or.accumulate(np.flip(d, axis), axis=axis), axis)]
        return [np.bitwise_or.accumulate(d, axis=axis)]

    def dot_general(self, eqn: Any, deps: list[Deps]) -> list[Deps]:
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        parts: list[tuple[np.ndarray, int] | None] = []
        for atom, d, contract, batch in (
            (eqn.invars[0], deps[0], lc, lb),
            (eqn.invars[1], deps[1], rc, rb),
        ):
            ndim = len(atom.aval.shape)
            free = [a for a in range(ndim) if a not in contract and a not in batch]
            if d is None:
                parts.append(None)
                continue
            d = np.broadcast_to(d, (*atom.aval.shape, self.nbytes))
            d = np.transpose(d, (*batch, *free, *contract, ndim))
            d = _or_reduce(d.reshape(*d.shape[: len(batch) + len(free)], -1, self.nbytes), axis=-2)
            parts.append((d, len(free)))
        (a, b) = parts
        nbatch = len(lb)
        out_shape = tuple(eqn.outvars[0].aval.shape)
        out = np.zeros((*out_shape, self.nbytes), np.uint8)
        if a is not None:
            d, nfree = a
            nfree_b = len(out_shape) - nbatch - nfree
            out |= d.reshape(*d.shape[:-1], *([1] * nfree_b), self.nbytes)
        if b is not None:
            d, nfree = b
            nfree_a = len(out_shape) - nbatch - nfree
            out |= d.reshape(*d.shape[:nbatch], *([1] * nfree_a), *d.shape[nbatch:])
        return [out]

    def cond(self, eqn: Any, branches: list, deps: list[Deps], values: list[Any]) -> list[Deps]:
        outs: list[Deps] = [None] * len(eqn.outvars)
        for jaxpr, consts in branches:
            got = self.run(jaxpr, consts, deps[1:], values[1:])
            outs = [_or(o, g, v.aval.shape, self.nbytes) for o, g, v in zip(outs, got, eqn.outvars)]
        if deps[0] is not None:  # the branch index
            outs = [_or(o, deps[0], v.aval.shape, self.nbytes) for o, v in zip(outs, eqn.outvars)]
        return outs


class _NoRule(Exception):
    """The equation is outside its rule's assumptions: use the conservative rule."""


def _operand(d: Deps) -> np.ndarray:
    """The dependencies of a rule's only operand: present, since a rule runs only for an
    equation with some operand depending on the arguments."""
    if d is None:
        raise _NoRule
    return d


def _or_reduce(d: np.ndarray, axis: int | tuple[int, ...]) -> np.ndarray:
    """``np.bitwise_or.reduce(d, axis=axis)``.

    numpy >= 2.5's stubs declare the plain ``out=None, keepdims=False`` overload only for
    Python >= 3.12, so mypy (``python_version = "3.11"``) finds no overload there; numpy
    2.4's stubs (Python 3.11 venv) accept the call, hence ``unused-ignore`` too.
    """
    return np.bitwise_or.reduce(d, axis=axis)  # type: ignore[call-overload, unused-ignore]


def _broadcasts(operand: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """A scalar, or the output's rank with each axis equal or 1 (lax's implicit broadcast)."""
    if not operand:
        return True
    return len(operand) == len(shape) and all(a in (b, 1) for a, b in zip(operand, shape))


def _or(a: Deps, b: Deps, shape: Sequence[int], nbytes: int) -> Deps:
    if a is None or b is None:
        return a if b is None else np.broadcast_to(b, (*shape, nbytes))
    return np.broadcast_to(a, (*shape, nbytes)) | b


def _fold(eqn: Any, values: list[Any]) -> list[Any]:
    """Known (non-float, small) results of an equation whose operands are all known."""
    none = [None] * len(eqn.outvars)
    if any(v is None for v in values) or getattr(eqn, "effects", None):
        return none
    for var in eqn.outvars:
        aval = var.aval
        if not hasattr(aval, "shape") or math.prod(aval.shape) > _FOLD_MAX:
            return none
        if jnp.issubdtype(aval.dtype, jnp.inexact):
            return none
    try:
        subfuns, params = _compat.eqn_bind_params(eqn)
        outs = eqn.primitive.bind(*subfuns, *values, **params)
    except Exception:  # noqa: BLE001 - folding is an optimisation; unknown stays sound
        return none
    outs = outs if eqn.primitive.multiple_results else [outs]
    return [np.asarray(o) for o in outs]


def _etp_impl(eqn: Any) -> tuple[Any, list[Any]] | None:
    """The jaxpr of an ETP primitive's ``impl`` on the equation's operands, else ``None``."""
    from etp_viz.ops._registry import ETP_PRIMITIVES

    if eqn.primitive not in ETP_PRIMITIVES or getattr(eqn.primitive, "impl", None) is None:
        return None
    specs = [jax.ShapeDtypeStruct(a.aval.shape, a.aval.dtype) for a in eqn.invars]
    try:
        closed = jax.make_jaxpr(partial(eqn.primitive.impl, **eqn.params))(*specs)
    except Exception:  # noqa: BLE001 - an impl that cannot be traced: conservative rule
        return None
    jaxpr, consts = _compat.split_closed_jaxpr(closed)
    if len(jaxpr.outvars) != len(eqn.outvars):
        return None
    return jaxpr, consts
