r"""Chosen entries of a sparse Jacobian from a few JVPs or VJPs: the compressed Jacobian.

The classic technique of sparse Jacobians (Curtis, Powell & Reid 1974; Coleman & Moré 1983;
Griewank & Walther, "Evaluating Derivatives", ch. 8): of :math:`J = \partial f/\partial x`
only the entries :math:`N` are *needed*, and the entries :math:`R \supseteq` every non-zero
are known from the program (:func:`.sparsity.jacobian_sparsity`). Columns :math:`k, k'` may
share one JVP, seeded with :math:`e_k + e_{k'}`, when no needed entry of one meets a
structural entry of the other (no row :math:`i` with :math:`N_{ik} R_{ik'}` or
:math:`N_{ik'} R_{ik}`): row :math:`i` of :math:`J(e_k + e_{k'})` is then :math:`J_{ik}`
wherever :math:`(i, k)` is needed. A *colouring* of the columns under that conflict gives
``count`` JVPs instead of one per column (forward mode); colouring the rows the same way gives
VJPs (reverse mode). :class:`SparseJacobian` colours both ways and keeps the fewer
evaluations; a SnAp-1 learner on a recurrent LIF layer of 128 units at batch 8 gets its
``(1024, 128·(in + 129))`` entries of :math:`J_\theta` from 8 VJPs (one per batch element).

Colouring is greedy over *classes* of identical lines (same needed and structural rows: the
columns of one weight column in a layer, the rows of one unit across the batch), largest class
first, each class taking the first colours none of its conflicting classes holds. Above
:data:`MAX_CLASSES` classes every line gets its own colour (no compression, still exact).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .patterns import bool_matmul, line_classes

__all__ = ["CHUNK_ENTRIES", "MAX_CLASSES", "Linearised", "SparseJacobian", "colour_lines"]

#: above this many classes of identical lines the colouring is skipped (one colour a line)
MAX_CLASSES = 2048
#: the most entries of one batch of JVP / VJP results (a ``lax.map`` runs the batches in turn,
#: so the compressed Jacobian's temporaries stay near its own size)
CHUNK_ENTRIES = 1 << 20


def colour_lines(needed: np.ndarray, reach: np.ndarray) -> tuple[np.ndarray, int]:
    """``(colour per line, number of colours)`` for the lines (columns) of ``(length, lines)``
    boolean arrays: two lines share a colour only when neither's needed entries meet the
    other's structural ones. A line none of whose needed entries is structural gets ``-1``
    (nothing to evaluate: those entries are zero).

    >>> needed = reach = np.array([[1, 0, 1], [0, 1, 1]], bool)
    >>> colour_lines(needed, reach)
    (array([0, 0, 1]), 2)
    """
    colour = np.full(needed.shape[1], -1, np.int64)
    lines = np.flatnonzero((needed & reach).any(axis=0))
    if not lines.size:
        return colour, 0
    keys = np.concatenate(
        [np.packbits(needed[:, lines], axis=0), np.packbits(reach[:, lines], axis=0)]
    ).T
    first, inverse = line_classes(keys)
    sizes = np.bincount(inverse)
    if len(first) > MAX_CLASSES:
        colour[lines] = np.arange(lines.size)
        return colour, int(lines.size)
    meets = bool_matmul(needed[:, lines[first]].T, reach[:, lines[first]])
    conflict = meets | meets.T
    slots: list[np.ndarray] = [np.zeros(0, np.int64)] * len(first)
    count = 0
    for g in np.argsort(-sizes, kind="stable"):
        taken = np.zeros(count + sizes[g], bool)
        held = [slots[h] for h in np.flatnonzero(conflict[g])]
        if held:
            taken[np.concatenate(held)] = True
        slots[g] = np.flatnonzero(~taken)[: sizes[g]]
        count = max(count, int(slots[g][-1]) + 1)
    # the members of class g, in line order, take slots[g] in order
    colour[lines[np.argsort(inverse, kind="stable")]] = np.concatenate(slots)
    return colour, count


class Linearised:
    """``f`` at ``x``, linearised once however many plans use it: :meth:`pushforward`
    (``v -> J v``) and :meth:`pullback` (``u -> uᵀ J``). Ask for them outside any
    ``lax.map`` (a linearisation traced inside one would leak its tracers to the next)."""

    def __init__(self, fn: Any, x: Any):
        self.fn, self.x = fn, x
        self._push: Any = None
        self._pull: Any = None
        self._out: Any = None

    def pushforward(self) -> Any:
        if self._push is None:
            self._out, self._push = jax.linearize(self.fn, self.x)
        return self._push

    def pullback(self) -> Any:
        if self._pull is None:
            self._out, pull = jax.vjp(self.fn, self.x)
            self._pull = lambda u: pull(u)[0]
        return self._pull

    def output_dtype(self) -> Any:
        if self._out is None:
            self._out = jax.eval_shape(self.fn, self.x)
        return self._out.dtype


class SparseJacobian:
    """How to get the ``needed`` entries of the block ``J[rows][:, cols]`` of
    :math:`J = \\partial f/\\partial x` (``f``: ``num_in`` values to ``num_out``) from a few
    JVPs or VJPs (see the module docstring).

    Parameters
    ----------
    needed, reach : np.ndarray
        ``(len(rows), len(cols))`` booleans: the entries wanted, and where the block can be
        non-zero.
    rows, cols : np.ndarray
        The block's rows (outputs of ``f``) and columns (inputs).
    num_out, num_in : int
        ``f``'s output and input sizes.
    forward, reverse : bool
        Which modes the function allows (a ``while_loop`` has no reverse mode, a
        ``custom_vjp`` no forward mode); the one with fewer evaluations is taken.
    """

    def __init__(
        self,
        needed: np.ndarray,
        reach: np.ndarray,
        rows: np.ndarray,
        cols: np.ndarray,
        num_out: int,
        num_in: int,
        forward: bool = True,
        reverse: bool = True,
    ):
        columns = colour_lines(needed, reach) if forward else None
        by_rows = colour_lines(needed.T, reach.T) if reverse else None
        self.forward = by_rows is None or (columns is not None and columns[1] <= by_rows[1])
        chosen = columns if self.forward else by_rows
        assert chosen is not None, "a Jacobian needs a forward or a reverse mode"
        colour, self.count = chosen
        seeded, size = (cols, num_in) if self.forward else (rows, num_out)
        self.seed_colour = np.full(size, -1, np.int32)
        self.seed_colour[seeded] = colour
        self.take = np.asarray(rows if self.forward else cols, np.int32)
        start = int(self.take[0]) if self.take.size else 0
        #: the kept outputs are a range: sliced, and XLA drops what computes the others (the
        #: other weights' gradients of a VJP)
        self.sliced = bool(np.array_equal(self.take, np.arange(start, start + self.take.size)))
        # one evaluation's seed and kept result
        width = size + (self.take.size if self.sliced else num_out + num_in - size)
        self.chunk = max(1, min(self.count, CHUNK_ENTRIES // width))
        self.chunks = -(-self.count // self.chunk)
        zero = self.chunks * self.chunk  # the zero row of the compressed matrix
        #: per line of the block (and one padding line), its row of the compressed matrix
        self.line_row = np.append(np.where(colour < 0, zero, colour), zero).astype(np.int32)

    def compressed(self, linear: Linearised) -> Any:
        """The compressed Jacobian, one zero row and one zero column appended: row ``c``
        holds ``J`` applied to colour ``c``'s seed (forward: ``J`` times the sum of the
        colour's columns, at ``rows``; reverse: the sum of its rows, at ``cols``)."""
        if self.count == 0:
            dtype = linear.output_dtype() if self.forward else linear.x.dtype
            return jnp.zeros((1, self.take.size + 1), dtype)
        if self.forward:
            apply, dtype = linear.pushforward(), linear.x.dtype
        else:
            apply, dtype = linear.pullback(), linear.output_dtype()
        seed_colour, take = jnp.asarray(self.seed_colour), self.take
        if self.sliced:

            def select(out: Any) -> Any:
                return jax.lax.slice_in_dim(out, int(take[0]), int(take[0]) + take.size, axis=1)
        else:

            def select(out: Any) -> Any:
                return out[:, jnp.asarray(take)]

        def batch(first: Any) -> Any:
            colours = first + jnp.arange(self.chunk, dtype=jnp.int32)
            seeds = (seed_colour[None, :] == colours[:, None]).astype(dtype)
            return select(jax.vmap(apply)(seeds))

        if self.chunks == 1:
            out = batch(0)
        else:
            firsts = jnp.arange(self.chunks, dtype=jnp.int32) * self.chunk
            out = jax.lax.map(batch, firsts).reshape(self.chunks * self.chunk, -1)
        return jnp.pad(out, ((0, 1), (0, 1)))

    def entries(self, compressed: Any, row: np.ndarray, col: np.ndarray) -> Any:
        """``J[rows[row[t, a]], cols[col[t, b]]]``, ``(tiles, r, c)``, for local indices
        ``row`` ``(tiles, r)`` and ``col`` ``(tiles, c)`` (``len(rows)`` / ``len(cols)``: a
        padding entry, zero)."""
        line_row = self.line_row
        if self.forward:
            return compressed[jnp.asarray(line_row[col])[:, None, :], jnp.asarray(row)[:, :, None]]
        if col.shape[1] * 2 < compressed.shape[1] or (col != col[:1]).any():
            return compressed[jnp.asarray(line_row[row])[:, :, None], jnp.asarray(col)[:, None, :]]
        # every tile reads most of the same columns: whole rows, then the columns once
        whole = compressed[jnp.asarray(line_row[row])]
        if np.array_equal(col[0], np.arange(col.shape[1])):
            return whole[:, :, : col.shape[1]]
        return jnp.take(whole, jnp.asarray(col[0]), axis=2)
