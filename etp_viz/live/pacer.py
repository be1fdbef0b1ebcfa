"""How long a live session's frames are and how often they measure, from measured frame times.

``steps_per_frame='auto'`` aims a frame at :data:`FRAME_SECONDS` (about 20 UI updates a
second), so the per-frame host work (dispatch, one transfer, the history) is paid ~20 times a
second rather than per step. ``record_every='auto'`` measures the heavy metrics (trace, gradient
and weight-change norms, dh/dy and dh/dh) about every :data:`RECORD_SECONDS` of compute, and
at least every :data:`MIN_RECORD_EVERY` steps: on a model whose whole step takes a few
microseconds, a measured step costs several plain steps (about twenty small reductions), and
one in 32 would be most of the UI's cost; models slower than ~60 µs a step keep every 32nd.

Both are powers of two, so a run compiles a handful of frame shapes at most. The estimate of
a step's time is the fastest of the last few timed frames (a frame that waited on a compile
or on a busy machine only ever looks slower), and a choice changes only when it is off by a
factor of 2 upwards or of 4 downwards, so noisy timings do not make it swing (each new shape
compiles once).
"""

from __future__ import annotations

from collections import deque

__all__ = [
    "AUTO_FIRST_FRAME",
    "FRAME_SECONDS",
    "MIN_RECORD_EVERY",
    "RECORD_SECONDS",
    "Pacer",
    "frame_option",
]

#: The frame duration ``steps_per_frame='auto'`` aims at (seconds): ~20 UI updates a second.
FRAME_SECONDS = 0.05
#: First frame size of ``steps_per_frame='auto'`` (also its lower bound).
AUTO_FIRST_FRAME = 16
#: Compute time between two measured steps that ``record_every='auto'`` aims at (seconds).
RECORD_SECONDS = 2e-3
#: ``record_every='auto'`` measures at least every this many steps (its value before timing).
MIN_RECORD_EVERY = 32
#: Timed frames the step-time estimate looks back on.
WINDOW = 4


def frame_option(value: int | str, name: str) -> int | str:
    """``'auto'`` or a positive int, else a ValueError naming the option.

    >>> frame_option("auto", "record_every"), frame_option(8, "record_every")
    ('auto', 8)
    """
    if value == "auto":
        return value
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1 or isinstance(value, bool) or number != value:
        raise ValueError(
            f"`{name}` must be 'auto' or a positive integer, got {value!r}. Example: "
            f"Session(model, x, task=task, {name}=64)."
        )
    return number


def _power_of_two_below(value: float) -> int:
    """The largest power of two ``<= value`` (1 for anything below 2)."""
    return 1 << max(int(value).bit_length() - 1, 0)


def _settle(current: int, best: int) -> int:
    """``best`` when it is at least twice or at most a quarter of ``current``, else
    ``current`` (hysteresis: timings near a boundary do not flip the choice)."""
    return best if best >= 2 * current or 4 * best <= current else current


class Pacer:
    """The frame length and measuring interval of a session, adapted from frame timings.

    Parameters
    ----------
    steps_per_frame : int or 'auto'
    record_every : int or 'auto'
    capacity : int
        Upper bound of both (the steps one frame records on device).

    Examples
    --------
    >>> pacer = Pacer("auto", "auto", capacity=8192)
    >>> pacer.steps_per_frame, pacer.record_every
    (16, 32)
    >>> pacer.observe(16, 1.0)  # a size's first frame compiles: not timed
    False
    >>> pacer.observe(16, 16 * 8e-6)  # 8 µs a step
    True
    >>> pacer.steps_per_frame, pacer.record_every
    (4096, 128)
    """

    def __init__(self, steps_per_frame: int | str, record_every: int | str, capacity: int) -> None:
        self.capacity = max(1, int(capacity))
        steps_per_frame = frame_option(steps_per_frame, "steps_per_frame")
        record_every = frame_option(record_every, "record_every")
        self.auto_frames = steps_per_frame == "auto"
        self.auto_every = record_every == "auto"
        self.steps_per_frame = AUTO_FIRST_FRAME if self.auto_frames else int(steps_per_frame)
        self.record_every = MIN_RECORD_EVERY if self.auto_every else max(1, int(record_every))
        self._timed: set[int] = set()
        self._step_seconds: deque[float] = deque(maxlen=WINDOW)

    def observe(self, steps: int, seconds: float) -> bool:
        """A frame of ``steps`` steps landed ``seconds`` after the previous one; returns True
        when ``steps_per_frame`` or ``record_every`` changed. Only whole frames of the current
        size count, and a size's first frame (its compilation) is not timed."""
        size = self.steps_per_frame
        if not (self.auto_frames or self.auto_every) or steps != size or steps <= 0:
            return False
        if size not in self._timed:
            self._timed.add(size)
            return False
        self._step_seconds.append(max(seconds, 1e-9) / steps)
        per_step = min(self._step_seconds)
        changed = False
        if self.auto_frames:
            best = _power_of_two_below(FRAME_SECONDS / per_step)
            best = min(max(best, AUTO_FIRST_FRAME), _power_of_two_below(self.capacity))
            new = _settle(size, best)
            if new != size:
                self.steps_per_frame, changed = new, True
                self._step_seconds.clear()  # per-frame costs differ between sizes
        if self.auto_every:
            best = _power_of_two_below(RECORD_SECONDS / per_step)
            best = min(max(best, MIN_RECORD_EVERY), _power_of_two_below(self.capacity))
            new = _settle(self.record_every, best)
            if new != self.record_every:
                self.record_every, changed = new, True
        return changed
