"""On-device recording of per-step metrics of a live session, and its host hand-over.

Every metric is flattened into its own columns of ONE packed row (:attr:`Recorder.columns`),
so a step's recording is one concatenation. Two ways to use it:

- **the live session** (``init(rows=False)``: the ring is bookkeeping only, i.e. write count,
  halt flag and failure record). Each jitted frame keeps its own record on the device: the
  fast frame the loss of every step plus the packed rows of its measured steps
  (:meth:`Recorder.pack_sparse`), the step-checked replay a row per step (:meth:`Recorder.pack`,
  built with :meth:`Recorder.check_row` in its scan body). Its size is bounded by the frame
  length (``capacity`` at most). Nothing leaves the device during a frame; the host pulls
  each frame's record **once per UI frame** with :meth:`Recorder.drain`, which keeps it
  sparse (``DrainedRows.measured``; :meth:`DrainedRows.dense` gives a row per step, NaN where
  not measured).
- **a plain ring** (``init()``): a ``(capacity, width)`` device buffer written with
  :meth:`Recorder.write` / :meth:`Recorder.write_rows` inside a jitted step and drained
  from the ring.

The non-finite guard: the first step whose measured metrics (or extra checks, e.g. the weights
after the update) contain NaN/inf sets ``halted``, records which columns went bad (mapped back
to metric names on the host), and every later row is not written, so the recorded history
stops right before the failure and stays intact. Columns not measured on a step hold NaN and
are not checked.

Examples
--------
>>> import jax.numpy as jnp
>>> rec = Recorder({"loss": (), "grad_norm/W": ()}, capacity=4)
>>> ring = rec.init()
>>> ring = rec.write(ring, {"loss": jnp.float32(0.5), "grad_norm/W": jnp.float32(1.0)})
>>> rows = rec.drain(ring)
>>> rows.values["loss"].tolist(), rows.steps.tolist(), rows.failure
([0.5], [0], None)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["DrainedRows", "Recorder"]


@dataclass(frozen=True)
class DrainedRows:
    """Rows pulled from the ring by one :meth:`Recorder.drain`.

    Attributes
    ----------
    steps : numpy.ndarray
        Global step index of each row, shape ``(n,)``.
    values : dict[str, numpy.ndarray]
        Metric name → array of shape ``(n, *metric_shape)``, NaN where not measured; for a
        metric listed in ``measured``, only the measured rows (``(m, *metric_shape)``).
    failure : dict or None
        ``{"step": int, "quantities": [metric names]}`` when a step went non-finite.
    lost : int
        Rows overwritten before they could be drained (0 unless the ring was too small).
    suspect : bool
        A drained frame reported a non-finite value without locating it (see
        :meth:`Recorder.pack`): no rows are returned and nothing is counted as drained.
    """

    steps: np.ndarray
    values: dict[str, np.ndarray]
    failure: dict[str, Any] | None
    lost: int = 0
    suspect: bool = False
    #: Metric name → row indices (into ``steps``) that its ``values`` hold, for metrics the
    #: frames measured on some steps only (None: every metric is dense).
    measured: dict[str, np.ndarray] | None = None

    def dense(self, name: str) -> np.ndarray:
        """One metric as ``(n, *metric_shape)`` rows, NaN where not measured."""
        values = self.values[name]
        if self.measured is None or name not in self.measured:
            return values
        out = np.full((self.steps.shape[0], *values.shape[1:]), np.nan, values.dtype)
        out[self.measured[name]] = values
        return out


def _status_vector(status: dict[str, Any], suspect: Any) -> jax.Array:
    """``[count, halted, bad_step, suspect, *bad_cols]`` as one int32 vector (traceable)."""
    head = [status["count"], status["halted"].astype(jnp.int32), status["bad_step"]]
    head.append(jnp.asarray(suspect, jnp.int32))
    return jnp.concatenate([jnp.stack(head), status["bad_cols"].astype(jnp.int32)])


class Recorder:
    """Packed metric rows on the device (a ring, or per-frame records), drained to the host.

    Parameters
    ----------
    spec : dict[str, tuple[int, ...]]
        Metric name → per-step shape (``()`` for scalars). Order is kept.
    capacity : int
        Rows of the ring (``init()``): drain at least this often. The live session, whose
        ring has no rows, uses it as the most steps one frame records.
    dtype : dtype
        Storage type of every buffer (float32: what the front end reads).
    """

    def __init__(
        self,
        spec: dict[str, tuple[int, ...]],
        capacity: int = 1024,
        dtype=jnp.float32,
        checks: tuple[str, ...] = (),
        dense: tuple[str, ...] = ("loss",),
    ) -> None:
        if capacity < 1:
            raise ValueError(f"Recorder capacity must be >= 1, got {capacity}.")
        self.spec = {name: tuple(int(d) for d in shape) for name, shape in spec.items()}
        self.names = list(self.spec)
        self.capacity = int(capacity)
        self.dtype = dtype
        self._drained = 0
        #: Device outputs of the frames dispatched since the last drain (see :meth:`pack`).
        self.pending: list[tuple] = []
        self.sizes = {n: int(np.prod(self.spec[n], dtype=np.int64)) for n in self.names}
        #: Metric name → its ``[start, stop)`` columns in the packed row.
        self.columns: dict[str, tuple[int, int]] = {}
        for name in self.names:
            start = sum(b - a for a, b in self.columns.values())
            self.columns[name] = (start, start + self.sizes[name])
        self.width = sum(self.sizes.values())
        #: Names of the extra finiteness checks (not recorded, e.g. ``weight/W``): their flags
        #: follow the row's columns in the failure record.
        self.checks = list(checks)
        #: Metrics recorded on every step (the loss, accuracy counts, activity rows): the
        #: leading columns of the row, handed over densely by :meth:`pack_sparse`.
        self.dense = [n for n in self.names if n in set(dense)]
        if self.names[: len(self.dense)] != self.dense:
            raise ValueError(f"Dense metrics {self.dense} must lead the spec {self.names}.")
        self.dense_width = self.columns[self.dense[-1]][1] if self.dense else 0

    def heavy_mask(self) -> np.ndarray:
        """``(width,)`` bool: the columns measured on some steps only (not :attr:`dense`)."""
        mask = np.ones((self.width,), bool)
        mask[: self.dense_width] = False
        return mask

    def init(self, rows: bool = True, start: int = 0) -> dict[str, Any]:
        """A fresh ring (device arrays): ONE packed ``(capacity, width)`` buffer, write count,
        halt flag and failure record (which columns went non-finite). ``rows=False``: the
        bookkeeping only, for a caller whose frames hand their rows over in their own
        :meth:`pack` / :meth:`pack_sparse` outputs (the live session). ``start``: rows
        already written elsewhere (a session that goes on with a new learner counts on)."""
        self._drained = int(start)
        self.pending = []
        buffer = {"rows": jnp.zeros((self.capacity, self.width), self.dtype)} if rows else {}
        return {
            **buffer,
            "count": jnp.full((), int(start), jnp.int32),
            "halted": jnp.zeros((), jnp.bool_),
            "bad_step": jnp.full((), -1, jnp.int32),
            "bad_cols": jnp.zeros((self.width + len(self.checks),), jnp.bool_),
        }

    def status_of(self, ring: dict[str, Any]) -> dict[str, Any]:
        """The ring's small bookkeeping (count, halt flag, failure record): a scan carry."""
        return {k: ring[k] for k in ("count", "halted", "bad_step", "bad_cols")}

    def pack_row(self, metrics: dict[str, jax.Array]) -> jax.Array:
        """The metrics as one ``(width,)`` vector in column order (traceable: one concat)."""
        missing = [n for n in self.names if n not in metrics]
        if missing:
            raise KeyError(f"Recorder.write is missing metrics {missing}; expected {self.names}.")
        parts = [jnp.asarray(metrics[n], self.dtype).reshape(-1) for n in self.names]
        for name, part in zip(self.names, parts):
            if part.shape[0] != self.sizes[name]:
                raise ValueError(
                    f"Metric {name!r} has {part.shape[0]} values; the spec says "
                    f"{self.spec[name]} ({self.sizes[name]} values)."
                )
        return jnp.concatenate(parts) if parts else jnp.zeros((0,), self.dtype)

    def check_row(
        self,
        status: dict[str, Any],
        metrics: Any,
        measured: Any = None,
        checks_ok: Any = None,
    ) -> tuple:
        """One step's packed row, its write flag and the updated status (traceable; the scan
        body). ``metrics``: a dict (packed here) or an already packed ``(width,)`` row.

        A row containing a non-finite value is not written; it halts the ring instead (the
        session then pauses and reports ``failure``). Rows after a halt are not written.
        ``measured`` (``(width,)`` bool, optional): columns holding a measurement this step;
        the others hold NaN meaning "not measured" and are not checked. ``checks_ok``
        (``(len(checks),)`` bool, optional): results of the extra checks (all True = fine).
        """
        row = self.pack_row(metrics) if isinstance(metrics, dict) else metrics
        finite = jnp.isfinite(row)
        if measured is not None:
            finite = finite | ~measured
        if self.checks:
            finite = jnp.concatenate([finite, jnp.asarray(checks_ok, jnp.bool_).reshape(-1)])
        row_ok = jnp.all(finite)
        write_ok = row_ok & ~status["halted"]
        newly_bad = ~row_ok & ~status["halted"]
        status = {
            "count": status["count"] + write_ok.astype(jnp.int32),
            "halted": status["halted"] | ~row_ok,
            "bad_step": jnp.where(newly_bad, status["count"], status["bad_step"]),
            "bad_cols": jnp.where(newly_bad, ~finite, status["bad_cols"]),
        }
        return status, row, write_ok

    def write_rows(
        self, ring: dict[str, Any], status: dict[str, Any], rows: jax.Array, written: jax.Array
    ) -> dict[str, Any]:
        """Scatter a block of packed rows (``(n, width)``, ``n <= capacity``) into the ring
        once, after the frame's scan; rows whose ``written`` flag is False are dropped."""
        offsets = jnp.cumsum(written.astype(jnp.int32)) - 1
        slots = jnp.where(written, (ring["count"] + offsets) % self.capacity, self.capacity)
        return {"rows": ring["rows"].at[slots].set(rows, mode="drop"), **status}

    def write(self, ring: dict[str, Any], metrics: dict[str, jax.Array]) -> dict[str, Any]:
        """Append one row (traceable); see :meth:`check_row` for the non-finite guard."""
        status, row, written = self.check_row(self.status_of(ring), metrics)
        return self.write_rows(ring, status, row[None], written[None])

    def pack(
        self, status: dict[str, Any], rows: jax.Array, written: jax.Array, suspect: Any = False
    ) -> tuple:
        """A frame's rows as ONE float32 matrix ``(n, 1 + width)`` (first column: written)
        plus the status as one int32 vector: what the host transfers (traceable).
        ``suspect``: the frame saw a non-finite value it did not locate (the session's fast
        frame); :meth:`drain` then returns no rows and ``DrainedRows.suspect``."""
        matrix = jnp.concatenate([written.astype(self.dtype)[:, None], rows], axis=1)
        return matrix, _status_vector(status, suspect)

    def pack_sparse(
        self,
        status: dict[str, Any],
        losses: jax.Array,
        measured: jax.Array,
        positions: Any,
        suspect: Any = False,
    ) -> tuple:
        """A frame whose heavy metrics were measured on some steps only, for the host: the
        dense columns of every step (``(n, dense_width)``, or the ``(n,)`` losses when the
        loss is the only dense metric), the ``(m, width)`` rows of the measured steps and
        their positions in the frame (``(m,)``), plus :meth:`pack`'s status vector.
        Nothing of size ``n x width`` is built on the device; :meth:`drain` expands it (NaN:
        "not measured"). Every row is written (a fast frame does not halt part-way)."""
        where = jnp.asarray(positions, jnp.int32)
        status_vec = _status_vector(status, suspect)
        return losses.astype(self.dtype), measured.astype(self.dtype), where, status_vec

    def _sparse_rows(self, packs: list[tuple]) -> tuple:
        """:meth:`pack_sparse` outputs as ``(n, values, measured)``: the loss dense, the
        other metrics at their measured rows only (no ``steps x metrics`` array on the host
        either)."""
        at, done = [], 0
        for pack in packs:
            at.append(pack[2].astype(np.int64) + done)
            done += pack[0].shape[0]
        values = self.unpack(np.concatenate([pack[1] for pack in packs]))
        dense = np.concatenate([pack[0].reshape(pack[0].shape[0], -1) for pack in packs])
        for name in self.dense:
            start, stop = self.columns[name]
            values[name] = dense[:, start:stop].reshape(-1, *self.spec[name])
        where = np.concatenate(at)
        return done, values, {name: where for name in self.names if name not in self.dense}

    def _written_rows(self, pack: tuple) -> np.ndarray:
        """The ``(n, width)`` written rows of one transferred :meth:`pack` or
        :meth:`pack_sparse` output (the sparse one expanded: NaN where not measured)."""
        if len(pack) == 2:  # pack(): dense, first column = written
            matrix = pack[0]
            return matrix[matrix[:, 0] > 0.5, 1:]
        dense, measured, positions, _ = pack  # mixed with dense packs: expanded
        matrix = np.full((dense.shape[0], self.width), np.nan, np.float32)
        matrix[positions] = measured
        matrix[:, : self.dense_width] = dense.reshape(dense.shape[0], -1)
        return matrix

    def unpack(self, matrix: np.ndarray) -> dict[str, np.ndarray]:
        """Host side: ``(n, width)`` packed rows → metric name → ``(n, *shape)`` (views)."""
        return {
            name: matrix[:, start:stop].reshape(-1, *self.spec[name])
            for name, (start, stop) in self.columns.items()
        }

    def bad_names(self, bad_cols: np.ndarray) -> list[str]:
        """The metrics owning the non-finite columns of a failure record."""
        bad_cols = np.asarray(bad_cols, bool)
        names = [n for n, (a, b) in self.columns.items() if bad_cols[a:b].any()]
        return names + [n for n, bad in zip(self.checks, bad_cols[self.width :]) if bad]

    @property
    def written(self) -> int:
        """Rows written since :meth:`init`, as of the last drain (the session's step count)."""
        return self._drained

    def drain(self, ring: dict[str, Any], step_offset: int = 0) -> DrainedRows:
        """Pull the new rows to the host (one transfer) and return them.

        With frames noted in :attr:`pending` (their :meth:`pack` / :meth:`pack_sparse`
        outputs), those are transferred together; otherwise the ring is (a ring made with
        ``init(rows=False)`` has nothing to give). ``step_offset`` is added to the
        ring-local row indices, so ``DrainedRows.steps`` are global step numbers.
        """
        if self.pending:
            packs = [_trimmed(pack) for pack in jax.device_get(self.pending)]
            if any(int(pack[-1][3]) for pack in packs):
                # a fast frame saw a non-finite value: nothing is kept, the caller replays
                self.pending = []
                empty = np.zeros((0, self.width), np.float32)
                return DrainedRows(np.zeros((0,), np.int64), self.unpack(empty), None, 0, True)
            status = packs[-1][-1]
            count, halted, bad_step = (int(v) for v in status[:3])
            bad_cols, lost, measured = status[4:], 0, None
            if all(len(pack) == 4 for pack in packs):  # fast frames: stay sparse
                n, values, measured = self._sparse_rows(packs)
            else:
                matrices = [self._written_rows(pack) for pack in packs]
                matrix = matrices[0] if len(matrices) == 1 else np.concatenate(matrices)
                n, values = matrix.shape[0], self.unpack(matrix)
            rows = np.arange(self._drained, self._drained + n)
        elif "rows" not in ring:  # no buffer and no frame noted (none ran): nothing new
            empty = np.zeros((0, self.width), np.float32)
            return DrainedRows(np.zeros((0,), np.int64), self.unpack(empty), None)
        else:
            host = jax.device_get(ring)
            count = int(host["count"])
            first = max(self._drained, count - self.capacity)
            lost = first - self._drained
            rows = np.arange(first, count)
            values = self.unpack(np.asarray(host["rows"])[rows % self.capacity])
            halted, bad_step, bad_cols = host["halted"], host["bad_step"], host["bad_cols"]
            measured = None
        self._drained = count
        self.pending = []
        failure = None
        if bool(halted):
            failure = {"step": int(bad_step) + step_offset, "quantities": self.bad_names(bad_cols)}
        return DrainedRows(rows + step_offset, values, failure, lost, False, measured)


class PaddedPack(NamedTuple):
    """A fast frame's :meth:`Recorder.pack_sparse` output at the length its arrays were padded
    to, with how many ``steps`` ran and how many rows were ``measured``: :meth:`Recorder.drain`
    cuts it on the host, after the transfer (a cut on the device would be one more small
    program per new length)."""

    packed: tuple
    steps: int
    measured: int


def _trimmed(pack: Any) -> tuple:
    """A transferred pack, a :class:`PaddedPack` cut to its steps and measured rows."""
    if not isinstance(pack, PaddedPack):
        return pack
    losses, measured, positions, status = pack.packed
    m = pack.measured
    return losses[: pack.steps], measured[:m], positions[:m], status
