"""What the live and the compare explorers share: a widget driving a :class:`~etp_viz.live.
runner.Runner` (a session or a comparison) -- the synced ``live_status``, the push pacing, the
Step / Run / Pause / Reset / Set requests and the Python API that delegates to the runner."""

from __future__ import annotations

from typing import Any

from .headless import traitlets
from .widget import Explorer

__all__ = ["RunningExplorer"]


class RunningExplorer(Explorer):
    """Base of :class:`~etp_viz.explorer.live_explorer.LiveExplorer` and
    :class:`~etp_viz.explorer.compare.CompareExplorer`: ``runner`` runs; each subclass defines
    what a status, a panel, a setting and a lesson are (``_update_status``, ``_panel_specs``,
    ``_request_set``, ``lesson``), which :meth:`_attach_runner` wires to the page."""

    live_status = traitlets.Dict().tag(sync=True)
    #: no "What if…" by default (compare mode's several models); the live explorer offers it
    #: on a paused run (a running model would change under the what-if's copy)
    offers_what_if = False

    def _attach_runner(self, runner: Any, runs: dict[str, Any], max_rate: float) -> None:
        """Wire ``runner`` (whose sessions are ``runs``, by label) to the page: pacing, the
        panels, the compile / budget watch and the run requests."""
        from .live_panels import RunWatch, TraceOverviewClock

        self.runner = runner
        self.max_rate = float(max_rate)
        self._last_push = 0.0
        self._in_run = False
        self.pushes = 0
        #: when the whole-run trace overviews go out with a push
        self.trace_overviews = TraceOverviewClock()
        self.live_panels = self._panel_specs()
        self.watch = RunWatch(runner, runs, self.lesson, self._update_status)
        self._requests.update(
            {
                "live_step": lambda p: self._call(self.step, int(p.get("n", 1))),
                "live_run": lambda p: self._call(
                    self.run, p.get("n_steps"), past_budget=bool(p.get("past_budget"))
                ),
                "live_pause": lambda p: self._call(self.pause),
                "live_reset": lambda p: self._call(self.reset),
                "live_set": self._request_set,
            }
        )

    # -- the Python API (delegates) --------------------------------------------------------
    def step(self, n: int = 1) -> Any:
        """``n`` synchronous steps (see :meth:`etp_viz.live.runner.Runner.step`)."""
        return self.runner.step(n)

    def run(
        self, n_steps: int | None = None, background: bool = True, *, past_budget: bool = False
    ) -> Any:
        """Run in a background thread; Pause acts before the next step.

        With a task, ``run()`` stops at the lesson's end (the recipe's step budget,
        ``runner.budget``) and the page shows the lesson summary (``lesson()``); at the
        budget it does nothing. ``run(past_budget=True)`` continues past it until paused.
        """
        self.runner.run(n_steps, background=background, past_budget=past_budget)
        return self

    def pause(self) -> None:
        self.runner.pause()

    def reset(self) -> None:
        self.runner.reset()

    def wait(self, timeout: float | None = None) -> None:
        self.runner.wait(timeout)

    def _call(self, method: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            method(*args, **kwargs)
        finally:
            self._update_status()
        return {"step": self.runner.step_count, "running": self.runner.running}
