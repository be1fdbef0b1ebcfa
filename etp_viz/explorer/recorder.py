"""On-device ring buffers for per-step metrics of a live session.

The session's jitted step writes one row per step into fixed-size device arrays (one buffer per
metric, shape ``(capacity, *metric_shape)``). Nothing leaves the device during a step; the host
pulls the whole ring **once per UI frame** with :meth:`Recorder.drain`, which returns only the
rows written since the previous drain. The ring also carries the non-finite guard: the first
step whose metrics contain NaN/inf sets ``halted``, records which metrics went bad, and every
later write in the same frame is masked out, so the recorded history stops right before the
failure and stays intact.

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
from typing import Any

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
        Metric name → array of shape ``(n, *metric_shape)``.
    failure : dict or None
        ``{"step": int, "quantities": [metric names]}`` when a step went non-finite.
    lost : int
        Rows overwritten before they could be drained (0 unless the ring was too small).
    """

    steps: np.ndarray
    values: dict[str, np.ndarray]
    failure: dict[str, Any] | None
    lost: int = 0


class Recorder:
    """Bounded on-device ring buffers, written inside a jitted step.

    Parameters
    ----------
    spec : dict[str, tuple[int, ...]]
        Metric name → per-step shape (``()`` for scalars). Order is kept.
    capacity : int
        Rows kept on device; the host must drain at least this often (the session does).
    dtype : dtype
        Storage type of every buffer (float32: what the front end reads).
    """

    def __init__(
        self, spec: dict[str, tuple[int, ...]], capacity: int = 1024, dtype=jnp.float32
    ) -> None:
        if capacity < 1:
            raise ValueError(f"Recorder capacity must be >= 1, got {capacity}.")
        self.spec = {name: tuple(int(d) for d in shape) for name, shape in spec.items()}
        self.names = list(self.spec)
        self.capacity = int(capacity)
        self.dtype = dtype
        self._drained = 0

    def init(self) -> dict[str, Any]:
        """A fresh ring (device arrays): buffers, write count, halt flag and failure record."""
        buffers = {
            name: jnp.zeros((self.capacity, *shape), self.dtype)
            for name, shape in self.spec.items()
        }
        self._drained = 0
        return {
            "buffers": buffers,
            "count": jnp.zeros((), jnp.int32),
            "halted": jnp.zeros((), jnp.bool_),
            "bad_step": jnp.full((), -1, jnp.int32),
            "bad_mask": jnp.zeros((len(self.names),), jnp.bool_),
        }

    def write(self, ring: dict[str, Any], metrics: dict[str, jax.Array]) -> dict[str, Any]:
        """Append one row (traceable; call inside the jitted step).

        A row containing a non-finite value is not written; it halts the ring instead (the
        session then pauses and reports ``failure``). Writes after a halt are ignored.
        """
        missing = [n for n in self.names if n not in metrics]
        if missing:
            raise KeyError(f"Recorder.write is missing metrics {missing}; expected {self.names}.")
        finite = jnp.stack([jnp.all(jnp.isfinite(metrics[n])) for n in self.names])
        row_ok = jnp.all(finite)
        write_ok = row_ok & ~ring["halted"]
        slot = ring["count"] % self.capacity
        buffers = {}
        for name in self.names:
            buffer = ring["buffers"][name]
            value = jnp.asarray(metrics[name], self.dtype).reshape(self.spec[name])
            value = jnp.where(write_ok, value, buffer[slot])
            buffers[name] = jax.lax.dynamic_update_index_in_dim(buffer, value, slot, 0)
        newly_bad = ~row_ok & ~ring["halted"]
        return {
            "buffers": buffers,
            "count": ring["count"] + write_ok.astype(jnp.int32),
            "halted": ring["halted"] | ~row_ok,
            "bad_step": jnp.where(newly_bad, ring["count"], ring["bad_step"]),
            "bad_mask": jnp.where(newly_bad, ~finite, ring["bad_mask"]),
        }

    def drain(self, ring: dict[str, Any], step_offset: int = 0) -> DrainedRows:
        """Pull the ring to the host (one transfer) and return the rows not drained before.

        ``step_offset`` is added to the ring-local row indices (the session's step at the last
        ring reset), so ``DrainedRows.steps`` are global step numbers.
        """
        host = jax.device_get(ring)
        count = int(host["count"])
        first = max(self._drained, count - self.capacity)
        lost = first - self._drained
        rows = np.arange(first, count)
        slots = rows % self.capacity
        values = {name: np.asarray(host["buffers"][name])[slots] for name in self.names}
        self._drained = count
        failure = None
        if bool(host["halted"]):
            bad = [n for n, b in zip(self.names, np.asarray(host["bad_mask"])) if b]
            failure = {"step": int(host["bad_step"]) + step_offset, "quantities": bad}
        return DrainedRows(rows + step_offset, values, failure, lost)
