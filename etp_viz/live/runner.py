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
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, Self, TypeVar

from .sources import UserCodeError

__all__ = ["Runner"]

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

    def run(self, n_steps: int | None = None, background: bool = True) -> Self:
        """Run ``n_steps`` steps (None: until :meth:`pause`), frame by frame.

        With ``background=True`` (default) the loop runs in a daemon thread and this returns
        at once; the kernel stays free to handle Pause. Errors end the run and are stored in
        :attr:`error` (a non-finite value: :attr:`halted`).
        """
        if self.running:
            raise RuntimeError("Already running; call `pause()` first.")
        self._check_not_halted()
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
