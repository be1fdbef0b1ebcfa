"""A whole run of a per-step series kept small as it grows: per bucket of steps, the mean, min
and max (:class:`Overview`, fed by :class:`~etp_viz.live.history.History`), and the same for
sparse checkpoints (:func:`bucket_stats`). What the live panels draw of the entire run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["OVERVIEW_BUCKETS", "Overview", "bucket_stats"]

#: A whole-run overview keeps between this many and twice this many buckets (see
#: :class:`Overview`).
OVERVIEW_BUCKETS = 256


def bucket_stats(
    steps: np.ndarray, values: np.ndarray, width: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mean, min and max of ``values`` per bucket of ``width`` steps (bucket ``k`` holds the
    steps ``k * width .. (k + 1) * width - 1``; NaN values skipped): ``(starts, mean, lo, hi)``
    for the buckets that hold a finite value. For sparse series (fidelity checkpoints).

    >>> starts, mean, lo, hi = bucket_stats(np.array([0, 1, 5]), np.array([1.0, 3.0, 7.0]), 4)
    >>> starts.tolist(), mean.tolist(), lo.tolist(), hi.tolist()
    ([0, 4], [2.0, 7.0], [1.0, 7.0], [3.0, 7.0])
    """
    steps = np.asarray(steps, np.int64)
    values = np.asarray(values, np.float64)
    keep = np.isfinite(values)
    steps, values = steps[keep], values[keep]
    if steps.size == 0:
        empty = np.zeros((0,), np.float64)
        return np.zeros((0,), np.int64), empty, empty, empty
    bucket = steps // max(int(width), 1)
    starts, first = np.unique(bucket, return_index=True)
    counts = np.diff(np.append(first, bucket.size))
    order = np.argsort(bucket, kind="stable")
    values = values[order]
    mean = np.add.reduceat(values, first) / counts
    lo, hi = np.minimum.reduceat(values, first), np.maximum.reduceat(values, first)
    return starts * max(int(width), 1), mean, lo, hi


class Overview:
    """A whole run of one per-step series, downsampled as it grows: per bucket of
    :attr:`width` steps, the mean, min and max of its finite values (NaN: "no target this
    step", skipped). The width doubles (neighbouring buckets merged) whenever more than
    ``2 * buckets`` buckets exist, so the run stays between ``buckets`` and ``2 * buckets``
    points however long it gets, and appending is amortised O(new steps).

    >>> o = Overview(buckets=2)
    >>> o.extend(np.array([4.0, 2.0, np.nan, 1.0, 0.0]))
    >>> o.width, o.read()["mean"].tolist(), o.read()["min"].tolist()
    (2, [3.0, 1.0, 0.0], [2.0, 1.0, 0.0])
    """

    def __init__(self, buckets: int = OVERVIEW_BUCKETS, first_step: int = 0) -> None:
        self.buckets = max(int(buckets), 1)
        self.first_step = int(first_step)
        self.width = 1
        self.size = 0  # steps seen
        self._sum = np.zeros((0,), np.float64)
        self._count = np.zeros((0,), np.int64)
        self._lo = np.zeros((0,), np.float64)
        self._hi = np.zeros((0,), np.float64)

    def extend(self, values: np.ndarray) -> None:
        """Append the next steps' values (NaN: skipped)."""
        values = np.asarray(values, np.float64).reshape(-1)
        while values.size:
            if self.size % self.width:  # fill the open last bucket first
                take = min(self.width - self.size % self.width, values.size)
                self._merge_last(values[:take])
            else:
                take = min(values.size, 2 * self.buckets * self.width)
                self._append_buckets(values[:take])
            self.size += take
            values = values[take:]
            while self._sum.size > 2 * self.buckets:
                self._halve()

    def _merge_last(self, part: np.ndarray) -> None:
        finite = part[np.isfinite(part)]
        if finite.size:
            self._sum[-1] += finite.sum()
            self._count[-1] += finite.size
            self._lo[-1] = np.fmin(self._lo[-1], finite.min())
            self._hi[-1] = np.fmax(self._hi[-1], finite.max())

    def _append_buckets(self, part: np.ndarray) -> None:
        pad = (-part.size) % self.width
        grid = np.concatenate([part, np.full((pad,), np.nan)]).reshape(-1, self.width)
        finite = np.isfinite(grid)
        with np.errstate(invalid="ignore"):
            lo = np.where(finite.any(1), np.nanmin(np.where(finite, grid, np.inf), 1), np.nan)
            hi = np.where(finite.any(1), np.nanmax(np.where(finite, grid, -np.inf), 1), np.nan)
        self._sum = np.concatenate([self._sum, np.where(finite, grid, 0.0).sum(1)])
        self._count = np.concatenate([self._count, finite.sum(1)])
        self._lo = np.concatenate([self._lo, lo])
        self._hi = np.concatenate([self._hi, hi])

    def _halve(self) -> None:
        """Merge neighbouring buckets (the width doubles)."""
        if self._sum.size % 2:
            self._sum, self._count = np.append(self._sum, 0.0), np.append(self._count, 0)
            self._lo, self._hi = np.append(self._lo, np.nan), np.append(self._hi, np.nan)
        self._sum = self._sum.reshape(-1, 2).sum(1)
        self._count = self._count.reshape(-1, 2).sum(1)
        self._lo = np.fmin(self._lo[0::2], self._lo[1::2])
        self._hi = np.fmax(self._hi[0::2], self._hi[1::2])
        self.width *= 2

    def read(self) -> dict[str, Any]:
        """``{"steps": first step of each bucket, "mean", "min", "max", "width"}`` (numpy;
        NaN for a bucket without a finite value)."""
        # a run appends from its own thread: read each array once, cut to a common length
        width, total, count, lo, hi = self.width, self._sum, self._count, self._lo, self._hi
        n = min(total.size, count.size, lo.size, hi.size)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(count[:n] > 0, total[:n] / np.maximum(count[:n], 1), np.nan)
        steps = self.first_step + width * np.arange(n, dtype=np.int64)
        return {
            "steps": steps,
            "mean": mean,
            "min": lo[:n].copy(),
            "max": hi[:n].copy(),
            "width": width,
        }
