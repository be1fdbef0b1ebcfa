"""Step / run / pause / reset, written once for a :class:`~etp_viz.live.session.Session` and a
:class:`~etp_viz.live.compare.Comparison`.

A :class:`Runner` owns the lock, the pause flag, the background thread and the listeners; a
subclass says only how to advance (:meth:`Runner._advance_now` for :meth:`~Runner.step`,
:meth:`Runner._advance_until_paused` for :meth:`~Runner.run`), how to go back to its start
(:meth:`Runner._restore`), whether it is halted and what the halt says.

>>> class Counter(Runner[int]):
...     def __init__(self):
...         super().__init__()
...         self.count = 0
...     halted = False  # never stops on a non-finite value
...     def _advance_now(self, n):
...         self.count += n
...     def _advance_until_paused(self, n_steps):
...         self.count += n_steps or 0
...     def _restore(self):
...         self.count = 0
...     def _halted_message(self):
...         return ""
...     def _result(self):
...         return self.count
>>> counter = Counter()
>>> counter.step(3), counter.run(2, background=False).count
(3, 5)
>>> counter.reset(); counter.count
0

Pacing (:class:`Pacer`): how long a live session's frames are and how often they measure,
from measured frame times.

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

import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, Self, TypeVar

from .history import History
from .lesson import LessonSummary, lesson_summary
from .sources import UserCodeError, frame_option

__all__ = [
    "AUTO_FIRST_FRAME",
    "FRAME_SECONDS",
    "MIN_RECORD_EVERY",
    "RECORD_SECONDS",
    "Pacer",
    "Runner",
    "frame_option",
]

#: What :meth:`Runner.step` returns (a session's History, a comparison's histories).
ResultT = TypeVar("ResultT")


class Runner(Generic[ResultT]):
    """The run / pause / reset machinery shared by a session and a comparison (module
    docstring). Listeners get ``(runner, event)`` with ``event`` one of ``'frame'``,
    ``'paused'``, ``'reset'``, ``'error'``, ``'failure'``, ``'started'``."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._pause_requested = threading.Event()
        self._thread: threading.Thread | None = None
        self._listeners: list[Callable[[Self, str], None]] = []
        #: The last error of user code (data or loss) or of a background run; None when clear.
        self.error: str | None = None
        #: The step at which :meth:`run` without ``n_steps`` stops: a session or comparison
        #: with a task sets it to the recipe's budget (``task.recipe().steps``,
        #: :func:`~etp_viz.live.lesson.lesson_budget`), where its lesson ends; None (no
        #: task): it runs until paused. The page, compare mode and a script read this one.
        self.budget: int | None = None

    # -- what a subclass says --------------------------------------------------------------
    @property
    def halted(self) -> bool:
        """True when the runner stopped on a non-finite value (:meth:`reset` clears it)."""
        raise NotImplementedError

    def _advance_now(self, n: int) -> None:
        """Advance ``n`` steps for :meth:`step` (the lock is held)."""
        raise NotImplementedError

    def _advance_until_paused(self, n_steps: int | None) -> None:
        """Advance ``n_steps`` steps (None: until paused) for :meth:`run` (the lock is held)."""
        raise NotImplementedError

    def _restore(self) -> None:
        """Back to the initial weights and states, records cleared (the lock is held)."""
        raise NotImplementedError

    def _halted_message(self) -> str:
        """What :meth:`step` and :meth:`run` raise when :attr:`halted`."""
        raise NotImplementedError

    def _result(self) -> ResultT:
        """What :meth:`step` returns."""
        raise NotImplementedError

    def _lesson_runs(self) -> dict[str, History]:
        """The histories a lesson summary scores, by learner label."""
        raise NotImplementedError

    def _lesson_reference(self) -> str | None:
        """The label the gap is measured against when :meth:`lesson` is given none."""
        return None

    # -- shared ----------------------------------------------------------------------------
    @property
    def lock(self) -> threading.RLock:
        """The lock held while stepping: hold it to change what a running step reads."""
        return self._lock

    @property
    def running(self) -> bool:
        """True while a background :meth:`run` is going."""
        return self._thread is not None and self._thread.is_alive()

    def observe(self, callback: Callable[[Self, str], None]) -> None:
        """Call ``callback(runner, event)`` after each frame or round (``event``: ``'frame'``,
        ``'paused'``, ``'reset'``, ``'error'``, ``'failure'``, ``'started'``)."""
        self._listeners.append(callback)

    def _notify(self: Self, event: str) -> None:
        for callback in list(self._listeners):
            callback(self, event)

    def _check_not_halted(self) -> None:
        if self.halted:
            raise RuntimeError(self._halted_message())

    def step(self, n: int = 1) -> ResultT:
        """Run ``n`` steps now (synchronously); returns what was recorded.

        Raises :class:`~etp_viz.live.sources.UserCodeError` when the data or loss function
        fails (stored in :attr:`error`; the runner stays usable) and :class:`RuntimeError`
        when a background run is going or the runner is halted on a non-finite value.
        """
        if self.running:
            raise RuntimeError("A background run is going; call `pause()` first.")
        self._check_not_halted()
        with self._lock:
            self._pause_requested.clear()
            try:
                self._advance_now(int(n))
            except UserCodeError as error:
                self.error = str(error)
                self._notify("error")
                raise
            self._notify("failure" if self.halted else "frame")
        return self._result()

    @property
    def position(self) -> int:
        """The step reached (``step_count`` of a session or a comparison)."""
        raise NotImplementedError

    def lesson(
        self,
        *,
        reference: str | None = None,
        dropped: dict[str, list[dict[str, Any]]] | None = None,
    ) -> LessonSummary:
        """The lesson summary of the run so far (:func:`~etp_viz.live.lesson.lesson_summary`):
        each learner's final loss and accuracy (episode averages) against chance, the gap to
        the exact reference, the :attr:`budget`. The page shows this object, a saved page
        carries its JSON and a notebook prints it: one summary everywhere.

        ``reference``: the label of the exact reference (default: a comparison's ``bptt``
        when it runs one; the compare page passes the learner claimed exact on every weight).
        ``dropped``: per learner the weights it does not learn exactly, in plain words (the
        page's :func:`etp_viz.view.plain.dropped_terms`; one learner's may be keyed ``""``).
        """
        runs = self._lesson_runs()
        dropped = dict(dropped or {})
        if len(runs) == 1 and "" in dropped:  # one learner's terms, keyed by its label
            dropped[next(iter(runs))] = dropped.pop("")
        return lesson_summary(
            runs,
            budget=self.budget,
            reference=reference if reference is not None else self._lesson_reference(),
            dropped=dropped,
        )

    @property
    def budget_reached(self) -> bool:
        """True once a :attr:`budget` is set and the run has reached it (the lesson ended)."""
        return self.budget is not None and self.position >= self.budget

    def run(
        self, n_steps: int | None = None, background: bool = True, *, past_budget: bool = False
    ) -> Self:
        """Run ``n_steps`` steps (None: until :meth:`pause`), frame by frame.

        With a :attr:`budget` (a task's lesson), ``n_steps=None`` runs up to the budget and
        stops there; at the budget it does nothing. ``past_budget=True`` goes on past it
        (until paused): continuing a lesson is an explicit choice.

        With ``background=True`` (default) the loop runs in a daemon thread and this returns
        at once; the kernel stays free to handle Pause. Errors end the run and are stored in
        :attr:`error` (a non-finite value: :attr:`halted`).
        """
        if self.running:
            raise RuntimeError("Already running; call `pause()` first.")
        self._check_not_halted()
        if n_steps is None and self.budget is not None and not past_budget:
            n_steps = self.budget - self.position
            if n_steps <= 0:  # the lesson ended: nothing to run, the summary is refreshed
                self._notify("paused")
                return self
        self._pause_requested.clear()
        if not background:
            self._run_loop(n_steps)
            return self
        self._thread = threading.Thread(target=self._run_loop, args=(n_steps,), daemon=True)
        self._thread.start()
        return self

    def _run_loop(self, n_steps: int | None) -> None:
        self._notify("started")
        event = "paused"
        with self._lock:
            try:
                self._advance_until_paused(n_steps)
            except UserCodeError as error:
                self.error, event = str(error), "error"
            except Exception as error:  # noqa: BLE001 - a background failure must be visible
                self.error, event = f"{type(error).__name__}: {error}", "error"
        self._notify("failure" if self.halted else event)

    def pause(self, timeout: float | None = 30.0) -> None:
        """Stop a run before its next frame and wait until the current one is synced."""
        self._pause_requested.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def wait(self, timeout: float | None = None) -> None:
        """Block until a background run finishes (useful in scripts and tests)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def reset(self) -> None:
        """Pause, then restore the initial weights and states; records and errors cleared."""
        self.pause()
        with self._lock:
            self._restore()
            self.error = None
        self._notify("reset")


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


def _power_of_two_below(value: float) -> int:
    """The largest power of two ``<= value`` (1 for anything below 2)."""
    return 1 << max(int(value).bit_length() - 1, 0)


#: The longest piece one fast-frame call runs; a longer chunk is cut into pieces of it.
MAX_PIECE = 8192


def padded_length(n: int) -> int:
    """The length a fast frame of ``n`` steps is compiled for: the next power of two (one
    program serves every chunk from half of it up).

    >>> [padded_length(n) for n in (1, 5, 16, 17, 33)]
    [1, 8, 16, 32, 64]
    """
    return 1 << max(int(n) - 1, 0).bit_length()


class FramePieces:
    """How a session cuts a chunk of ``n`` steps into fast-frame calls, and which padded
    lengths those calls compile.

    Every padded length is a program XLA compiles (a second or more on CPU). The fast frame
    runs a traced number of steps (:meth:`~etp_viz.live.frame_step.FrameSteps.fast_frame`), so
    one program, compiled for a power of two, runs every chunk from half of it up to it: a
    chunk is one call, padded to :func:`padded_length` of its steps
    (pieces of :data:`MAX_PIECE` when longer). A run whose frames the fidelity meter cuts at
    17, 22 and 33 steps beside 16-step frames compiles 16, 32 and 64 (it compiled 16, 33, 4, 2
    and 1 when each length was a scan of its own, every program holding up to two copies of
    the training step where it now holds one).

    >>> pieces = FramePieces()
    >>> pieces.cut((False, 32), 100), pieces.cut((False, 32), 97), pieces.cut((False, 32), 5)
    ([(100, 128)], [(97, 128)], [(5, 8)])
    >>> pieces.programs
    2
    """

    def __init__(self, limit: int | None = None) -> None:
        self.limit = MAX_PIECE if limit is None else max(1, int(limit))
        self._compiled: set[tuple[Any, int]] = set()

    def cut(self, key: Any, n: int) -> list[tuple[int, int]]:
        """``[(steps, padded length)]``, in order, of the calls that run ``n`` steps of the
        frame ``key``; each padded length is counted in :attr:`programs`."""
        pieces = []
        while n > 0:
            size = min(n, self.limit)
            pieces.append((size, min(padded_length(size), self.limit)))
            n -= size
        self._compiled.update((key, padded) for _, padded in pieces)
        return pieces

    @property
    def programs(self) -> int:
        """How many (frame, padded length) programs the cuts so far have asked for."""
        return len(self._compiled)

    def clear(self) -> None:
        """Forget every length (the frames are rebuilt)."""
        self._compiled.clear()


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
