r"""The influence matrix kept on a sparsity pattern, stored as dense tiles (SnAp-n, OSTL).

A patterned learner keeps :math:`M = \partial h/\partial\theta` only on a boolean ``(n, p)``
pattern :math:`P` and updates :math:`M' = P \odot (J_h M + J_\theta)`. Kept as a dense
``(n, p)`` array masked each step (:class:`~.algorithms.RTRL`'s storage), SnAp-1 on a GRU of 128
units at batch 8 holds RTRL's 222 MB and multiplies the whole ``J_h`` into it. Here only the
pattern's entries are stored:

* a **tile** is a set of rows :math:`S` and the columns :math:`C` whose pattern, inside one
  connected component :math:`B` of :math:`J_h`'s pattern (a batch element, with every layer of
  it), is exactly :math:`S`: the value block :math:`M[S, C]` is dense;
* :math:`J_h` has no entry between components and column :math:`k \in C` of :math:`M` is zero
  in :math:`B` outside :math:`S`, so the update of a tile needs only its own block:
  :math:`M'[S, C] = J_h[S, S]\,M[S, C] + J_\theta[S, C]`, a batched matrix product;
* tiles of one shape are stacked into one ``(tiles, |S|, |C|)`` array (shapes are few: the
  columns of one weight column in a layer share their rows, the batch elements their shapes;
  past :data:`MAX_GROUPS` shapes they are padded to powers of two).

The Jacobians are never dense: the entries of :math:`J_h[S, S]` and of :math:`J_\theta` on the
tiles come from compressed Jacobians (:mod:`.colouring`), a few JVPs or VJPs of the step.
SnAp-1 on a GRU of 128 units at batch 8 (16 inputs) stores 19.3 M of RTRL's 57.0 M entries
(the reset gate's weights reach every unit of their batch element in one step, the update
and candidate weights one unit) and its :math:`J_\theta` entries take 8 VJPs for the update
and candidate weights' tiles (one per batch element), 1024 for the reset gate's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np

from .colouring import Linearised, SparseJacobian
from .patterns import hidden_components, line_classes

__all__ = [
    "MAX_GROUPS",
    "TileGroup",
    "TiledInfluence",
    "find_tiles",
    "group_tiles",
    "stored_entries",
]

#: the most tile shapes kept apart; past it shapes are padded to powers of two
MAX_GROUPS = 8

Tile = tuple[np.ndarray, np.ndarray]


def find_tiles(pattern: np.ndarray, reach_h: np.ndarray) -> list[Tile]:
    """``[(rows, cols)]``: per component of :math:`J_h`, the columns grouped by their kept
    rows there (see the module docstring); every entry of ``pattern`` is in one tile."""
    component = hidden_components(reach_h)
    tiles: list[Tile] = []
    for c in range(int(component.max(initial=-1)) + 1):
        rows = np.flatnonzero(component == c)
        block = pattern[rows]
        used = np.flatnonzero(block.any(axis=0))
        if not used.size:
            continue
        first, inverse = line_classes(np.packbits(block[:, used], axis=0).T)
        order = np.argsort(inverse, kind="stable")
        bounds = np.cumsum([0, *np.bincount(inverse)])
        for g, line in enumerate(first):
            kept = block[:, used[line]]
            tiles.append((rows[kept], used[order[bounds[g] : bounds[g + 1]]]))
    return tiles


def group_tiles(tiles: list[Tile]) -> list[list[Tile]]:
    """The tiles by shape; past :data:`MAX_GROUPS` shapes, by shape rounded up to powers
    of two."""
    groups: dict[tuple[int, int], list[Tile]] = {}
    for tile in tiles:
        groups.setdefault((tile[0].size, tile[1].size), []).append(tile)
    if len(groups) > MAX_GROUPS:
        rounded: dict[tuple[int, int], list[Tile]] = {}
        for (r, c), members in groups.items():
            key = (1 << (r - 1).bit_length(), 1 << (c - 1).bit_length())
            rounded.setdefault(key, []).extend(members)
        groups = rounded
    return list(groups.values())


def padded(lines: list[np.ndarray], fill: int) -> np.ndarray:
    """``(len(lines), longest)`` int32, each line padded with ``fill``."""
    width = max(line.size for line in lines)
    out = np.full((len(lines), width), fill, np.int32)
    for i, line in enumerate(lines):
        out[i, : line.size] = line
    return out


def stored_entries(groups: list[list[Tile]]) -> int:
    """Entries the tiles of ``groups`` hold, padding included."""
    return sum(len(g) * max(t[0].size for t in g) * max(t[1].size for t in g) for g in groups)


@dataclasses.dataclass
class TileGroup:
    """The tiles of one shape: ``rows`` ``(tiles, r)`` (``n``: padding), ``cols``
    ``(tiles, c)`` (``p``: padding), their local indices into the plans' blocks, and the plan
    of their :math:`J_\\theta` entries."""

    rows: np.ndarray
    cols: np.ndarray
    h_local: np.ndarray
    theta_rows: np.ndarray
    theta_cols: np.ndarray
    jac_theta: SparseJacobian

    @property
    def shape(self) -> tuple[int, int, int]:
        return (*self.rows.shape, self.cols.shape[1])


class TiledInfluence:
    """The influence on a pattern, stored as tiles (see the module docstring).

    Parameters
    ----------
    groups : list of list of (rows, cols)
        :func:`group_tiles` of :func:`find_tiles`.
    reach_h, reach_theta : np.ndarray
        The step's structural patterns of :math:`J_h` ``(n, n)`` and :math:`J_\\theta`
        ``(n, p)``.
    forward, reverse : bool
        The differentiation modes the step allows.
    """

    def __init__(
        self,
        groups: list[list[Tile]],
        reach_h: np.ndarray,
        reach_theta: np.ndarray,
        forward: bool = True,
        reverse: bool = True,
    ):
        self.num_hidden, self.num_params = reach_theta.shape
        n = self.num_hidden
        tiles = [t for g in groups for t in g]
        rows_h = np.unique(np.concatenate([t[0] for t in tiles])) if tiles else np.zeros(0, int)
        local_h = _local_index(rows_h, n)
        needed_h = np.zeros((rows_h.size, rows_h.size), bool)
        for rows, _ in tiles:
            needed_h[np.ix_(local_h[rows], local_h[rows])] = True
        self.jac_h = SparseJacobian(
            needed_h, reach_h[np.ix_(rows_h, rows_h)], rows_h, rows_h, n, n, forward, reverse
        )
        self.groups = [self._group(g, local_h, reach_theta, forward, reverse) for g in groups]

    def _group(
        self, tiles: list[Tile], local_h: np.ndarray, reach_theta: np.ndarray, *modes: bool
    ) -> TileGroup:
        n, p = self.num_hidden, self.num_params
        rows, cols = padded([t[0] for t in tiles], n), padded([t[1] for t in tiles], p)
        block_rows = np.unique(rows[rows < n])
        block_cols = np.unique(cols[cols < p])
        local_rows = _local_index(block_rows, n)
        local_cols = _local_index(block_cols, p)
        needed = np.zeros((block_rows.size, block_cols.size), bool)
        for r, c in tiles:
            needed[np.ix_(local_rows[r], local_cols[c])] = True
        jac = SparseJacobian(
            needed,
            reach_theta[np.ix_(block_rows, block_cols)],
            block_rows,
            block_cols,
            n,
            p,
            *modes,
        )
        return TileGroup(rows, cols, local_h[rows], local_rows[rows], local_cols[cols], jac)

    @property
    def stored_entries(self) -> int:
        """Entries the tiles hold (padding included): the influence's size."""
        return sum(int(np.prod(g.shape)) for g in self.groups)

    def zeros(self, dtype: Any) -> tuple:
        """The influence at rest: one zero ``(tiles, r, c)`` array per shape."""
        return tuple(jnp.zeros(g.shape, dtype) for g in self.groups)

    def update(self, values: tuple, jac: Any) -> tuple:
        """:math:`M'[S, C] = J_h[S, S] M[S, C] + J_\\theta[S, C]` on every tile; ``jac``
        holds the step ``fn(θ, h)`` and the point (``jac.fn``, ``jac.theta``,
        ``jac.hidden``)."""
        on_h = Linearised(lambda h: jac.fn(jac.theta, h), jac.hidden)
        on_theta = Linearised(lambda t: jac.fn(t, jac.hidden), jac.theta)
        compressed_h = self.jac_h.compressed(on_h)
        new = []
        for group, value in zip(self.groups, values):
            j_h = self.jac_h.entries(compressed_h, group.h_local, group.h_local)
            compressed = group.jac_theta.compressed(on_theta)
            j_theta = group.jac_theta.entries(compressed, group.theta_rows, group.theta_cols)
            if value.shape[1] == 1:  # one row a tile: a scalar per tile
                carried = j_h * value
            else:
                carried = jnp.einsum("tab,tbc->tac", j_h, value)
            new.append((carried + j_theta).astype(value.dtype))
        return tuple(new)

    def contract(self, signal: Any, values: tuple) -> Any:
        """``signal @ M``, ``(p,)``, for a ``(n,)`` learning signal."""
        dtype = jnp.result_type(signal, *values)
        if not self.groups:
            return jnp.zeros(self.num_params, dtype)
        padded_signal = jnp.append(signal, jnp.zeros(1, signal.dtype))
        parts = [
            jnp.einsum("ta,tac->tc", padded_signal[jnp.asarray(g.rows)], v).ravel()
            for g, v in zip(self.groups, values)
        ]
        cols = np.concatenate([g.cols.ravel() for g in self.groups])
        grad = (
            jnp.zeros(self.num_params + 1, dtype)
            .at[jnp.asarray(cols)]
            .add(jnp.concatenate(parts).astype(dtype))
        )
        return grad[: self.num_params]

    def dense(self, values: tuple) -> Any:
        """The ``(n, p)`` influence the tiles hold (zero off the pattern): for tests."""
        dtype = values[0].dtype if values else jnp.float32
        out = jnp.zeros((self.num_hidden + 1, self.num_params + 1), dtype)
        for g, v in zip(self.groups, values):
            rows, cols = jnp.asarray(g.rows), jnp.asarray(g.cols)
            out = out.at[rows[:, :, None], cols[:, None, :]].add(v)
        return out[: self.num_hidden, : self.num_params]


def _local_index(lines: np.ndarray, size: int) -> np.ndarray:
    """``(size + 1,)``: each of ``size`` indices' position in ``lines`` (``len(lines)``
    where absent, and for the padding index ``size``)."""
    local = np.full(size + 1, lines.size, np.int32)
    local[lines] = np.arange(lines.size, dtype=np.int32)
    return local
