"""``etp_viz.show`` with a live run: the explorer widget bound to a :class:`Session`.

``show(model, x)`` alone returns the static explorer. With ``task=`` or ``data=`` it returns a
:class:`LiveExplorer`: the same widget plus ``step``/``run``/``pause``/``reset``/``history``,
whose live panels (``live_panels`` trait) receive float32 buffers at most ``max_rate`` times a
second (custom messages ``{"type": "live", "name", "shape", "dtype"}``, see ``widget.py``).
The front end can drive the session with requests ``live_step`` / ``live_run`` /
``live_pause`` / ``live_reset`` / ``live_set`` (answered with ``{"id", "result", "error"}``);
failures and user-code errors are shown through the ``error`` trait.

With a task, Run stops at the session's budget (the task recipe's ``task.recipe().steps``,
set by the :class:`Session` itself: the lesson ends there) and ``live_status["lesson"]``
carries the session's lesson summary (:meth:`Session.lesson
<etp_viz.live.runner.Runner.lesson>`: final scores against chance, the gap to the exact
reference, the dropped terms); ``run(past_budget=True)`` (the page's Continue button) goes on
past it. ``live_status["compiling"]`` names the learner compiling before its first frame. The
loss and accuracy panels get the whole run too (``overview/<name>`` messages: per bucket the
first step, mean, min and max; :meth:`~etp_viz.live.history.History.overview`), and so does
each trace magnitude (``overview/trace/…``, at most twice a second during a run): the page's
scrubber replays the graph's trace colouring and the panels at any past step.

Examples
--------
>>> import etp_viz
>>> task = etp_viz.tasks.get_task("sine")
>>> ex = etp_viz.show(task.suggested_model(), task.example_input(), task=task)
>>> _ = ex.step(20)
>>> len(ex.history.loss)
20
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from etp_viz.learn.knobs import knobs_of, learner_options
from etp_viz.learn.registry import DecayingTraces, canonical_name, graph_claim_names, name_of
from etp_viz.live.fidelity import VERIFY_STEPS, set_decay, verify_session
from etp_viz.live.lesson import LessonSummary
from etp_viz.live.session import SESSION_OPTIONS, Session
from etp_viz.view.plain import dropped_terms
from etp_viz.view.weights import with_learner_claims

from .headless import require_widget_packages
from .running import RunningExplorer
from .widget import Explorer, split_display_options

__all__ = ["LiveExplorer", "show"]

#: Points of each series sent to the front end (the recent window).
LIVE_WINDOW = 500


class LiveExplorer(RunningExplorer):
    """The explorer widget with a live online-learning :class:`Session` attached.

    ``live_status`` (synced) tells the front end the step, whether a run is going, the device,
    the algorithm, the ES-D-RTRL decay, ``steps_per_frame`` and which series are sent
    (``record``: None for all).

    The inspector offers "What if…" (:mod:`~etp_viz.explorer.whatif_offers`) for the session's
    learner, with its knobs; a what-if runs on copies of the model as it is at the step the
    run is paused at (:meth:`run_what_if`), the run is not changed.
    """

    #: a paused run's inspector offers "What if…" (a running one answers "pause first")
    offers_what_if = True

    def __init__(self, graph: Any, session: Session, *, max_rate: float = 20.0, **options):
        super().__init__(graph, **options)
        self.session = session
        self.record: set[str] | None = None
        label = str(session.history.meta.get("algorithm", "learner"))
        self._attach_runner(session, {label: session}, max_rate)
        self._requests["live_verify"] = lambda p: self._verify_request(
            int(p.get("steps", VERIFY_STEPS))
        )
        session.observe(self._on_session_event)
        self._update_status()
        self._offer_what_ifs()  # the session's learner's; again when the claims change
        self.observe(lambda _change: self._offer_what_ifs(), names=["view_model"])

    # -- the Python API (delegates) --------------------------------------------------------
    def step(self, n: int = 1) -> Any:
        """``n`` synchronous steps (see :meth:`Session.step`)."""
        if self.session.history.num_steps == 0:  # the first step compiles: say so first
            self.watch.on_event("started")
            self._update_status()
        return self.session.step(n)

    def lesson(self) -> LessonSummary:
        """The lesson summary of the run so far: the final loss and accuracy (episode
        averages) against chance, and the weights this learner does not learn exactly with
        the terms it drops: the session's :meth:`~etp_viz.live.runner.Runner.lesson`."""
        weights = (self.view_model or {}).get("weights") or []
        return self.session.lesson(dropped=dropped_terms(weights))

    @property
    def history(self) -> Any:
        return self.session.history

    def save_history(self, path: str) -> None:
        self.session.save_history(path)

    def verify(self, xs: Any = None, ys: Any = None, *, steps: int = 0, **options: Any) -> Any:
        """Measure each weight's online gradient against BPTT and show it beside its claim:
        :func:`etp_viz.live.fidelity.verify_session` (without ``xs``: on the session's own
        data, the last whole episode or the last ``steps`` steps). The run is not changed."""
        report = verify_session(self.session, xs, ys, steps=steps or VERIFY_STEPS, **options)
        self.verification = report.to_json()
        return report

    def run_what_if(self, weight: str, change: str) -> dict[str, Any]:
        """Run the "What if…" change ``change`` of ``weight`` (an id of ``what_if_changes``)
        with :func:`etp_viz.what_if` for the session's learner and its knobs, on copies of the
        model at the current step; the result (the ``what_if`` trait, returned) shows the diff
        and both graphs. While a run goes on it is a result whose ``error`` says to pause."""
        from .whatif_offers import run_offer

        if self.session.running:
            self.what_if = {
                "weight": str(weight),
                "id": str(change),
                "error": "Pause the run first: a what-if copies the model at the current "
                "step, which a running session keeps changing.",
            }
            return self.what_if
        learner = self.session.algorithm
        with self.session.lock:  # no run starts while the model is copied
            self.what_if = run_offer(
                self.graph,
                self.what_if_changes,
                str(weight),
                str(change),
                name_of(learner) or "",
                options=knobs_of(learner),
            )
        return self.what_if

    def _offer_what_ifs(self) -> None:
        """The "What if…" offers of the view's weights for the session's learner; none for a
        learner the registry does not know (:func:`etp_viz.what_if` builds learners by name)."""
        from .whatif_offers import offered_changes

        weights = (self.view_model or {}).get("weights") or []
        name = name_of(self.session.algorithm)
        offers: dict[str, list[dict]] = {}
        if self.graph is not None and weights and name is not None:
            try:
                offers = offered_changes(self.graph, weights, name)
            except Exception:  # noqa: BLE001 - an optional control must never break the page
                offers = {}
        self.what_if_changes = offers
        self._requests["what_if"] = lambda p: self.run_what_if(p.get("weight"), p.get("change"))

    def _verify_request(self, steps: int) -> dict[str, Any]:
        report = self.verify(steps=steps)
        return {
            "contradictions": len(report.contradictions),
            "unverified": len(report.unverified),
            "rows": len(report.rows),
            "verdict": report.verdict(),
        }

    def static_images(self) -> list[tuple[str, str]]:
        """The loss and trace plots of the run so far as base64 PNGs (the static output)."""
        history = self.session.history
        if history.num_steps == 0:
            return []
        import base64
        import io

        from etp_viz import plot

        images = []
        figures = (
            ("loss", plot.loss),
            ("accuracy", plot.accuracy),
            ("trace magnitudes", plot.trace_magnitudes),
        )
        for name, draw in figures:
            try:
                fig = draw(history)
            except Exception:  # noqa: BLE001 - a missing series leaves its plot out
                continue
            buffer = io.BytesIO()
            fig.savefig(buffer, format="png", dpi=72)
            images.append((name, base64.b64encode(buffer.getvalue()).decode("ascii")))
        return images

    def frontend_state(self) -> dict[str, Any]:
        """The synced state plus the recorded history (what a saved HTML embeds)."""
        return super().frontend_state() | {
            "live_history": self.session.history.to_json(),
            "live_status": dict(self.live_status),
        }

    # -- session → front end ---------------------------------------------------------------
    def _panel_specs(self) -> list[dict[str, Any]]:
        from .live_panels import panel_specs

        return panel_specs(self.session)

    def _on_session_event(self, session: Session, event: str) -> None:
        now = time.monotonic()
        changed = self.watch.on_event(event)
        if event == "started":
            self._in_run = True
        elif event != "frame":
            self._in_run = False
        rate_limited = now - self._last_push < 1.0 / self.max_rate
        if event == "frame" and self._in_run and rate_limited and not changed:
            # inside run(): at most max_rate pushes a second, the last frame pushed on stop.
            # A step() has no stop event to flush a skipped frame: every one is pushed.
            return
        self._last_push = now
        self.push_history()
        self._update_status(running=event in ("started", "frame") and session.running)
        message = session.error or (session.history.failure or {}).get("message") or ""
        if message or event == "reset":
            self.error = message

    def push_history(self) -> None:
        """Send the recent window of every live series to the front end."""
        history = self.session.history
        if history.num_steps == 0:
            return
        from .live_panels import panel_values, push_overviews, trace_names

        for spec in self.live_panels:
            if self.record is not None and spec["name"] not in self.record | {"loss"}:
                continue
            # heatmaps: measured steps only; lines: the last rows only (no dense copy of a
            # long run); activity: the last episode (see live_panels.panel_values)
            pushed = panel_values(history, spec, LIVE_WINDOW)
            if pushed is not None:
                values, meta = pushed
                self.push_live(spec["name"], np.asarray(values[-LIVE_WINDOW:], np.float32), **meta)
        names = [p["name"] for p in self.live_panels if p["name"] in ("loss", "accuracy")]
        if self.trace_overviews.due(self.session.running):  # the scrubber's graph colours
            names += trace_names([history])
        push_overviews(self, [history], names)  # the whole run, downsampled
        self.pushes += 1

    def _update_status(self, running: bool | None = None) -> None:
        session = self.session
        self.live_status = {
            "step": int(session.step_count),
            "running": session.running if running is None else running,
            "halted": session.halted,
            "device": session.history.meta.get("device", ""),
            "algorithm": session.history.meta.get("algorithm", ""),
            "learner_options": learner_options(session.algorithm),  # read now: a decay moves
            "decay": (
                session.algorithm.alpha_x if isinstance(session.algorithm, DecayingTraces) else None
            ),
            "steps_per_frame": session.steps_per_frame,
            "record": None if self.record is None else sorted(self.record),
            **self.watch.status(),
        }

    def _request_set(self, params: dict) -> dict[str, Any]:
        """``live_set``: ``steps_per_frame``; ``decay`` (ES-D-RTRL: both trace decays, the
        next frame recompiles); ``record``: the series to send (None: all; the device ring
        keeps recording every series, so a selection costs no recompilation)."""
        unknown = sorted(set(params) - {"steps_per_frame", "decay", "record"})
        if unknown:
            raise TypeError(f"live_set got {unknown}; valid: decay, record, steps_per_frame")
        if "steps_per_frame" in params:
            self.session.steps_per_frame = max(1, int(params["steps_per_frame"]))
        if "decay" in params:
            set_decay(self.session, params["decay"])
        if "record" in params:
            record = params["record"]
            names = {p["name"] for p in self.live_panels}
            if record is not None and not set(record) <= names:
                raise ValueError(f"unknown series {sorted(set(record) - names)}; known: {names}")
            self.record = None if record is None else set(record)
            self.push_history()
        self._update_status()
        return {
            "steps_per_frame": self.session.steps_per_frame,
            "decay": self.live_status["decay"],
            "record": self.live_status["record"],
        }


def show(model: Any, *example_inputs: Any, **options: Any) -> Explorer:
    """Compile ``model`` and return the explorer; with ``task=``/``data=``, a live one.

    Parameters
    ----------
    model : brainstate.nn.Module
    *example_inputs : array
        One step's input(s).
    **options
        Explorer display options (see ``Explorer``) and live-session options
        (:data:`~etp_viz.live.session.SESSION_OPTIONS`: ``algorithm``, ``task``, ``data``,
        ``loss``, ``optimizer``, ``learning_rate``, ``update``, ``decay``, ``steps_per_frame``,
        …). ``optimizer``, ``learning_rate``, ``update`` and ``bptt_window`` left at None take
        the task's recipe (``task.recipe()``: chosen so that the task visibly learns).
        A list ``algorithm=["d_rtrl", "eprop", "snap2", "bptt"]`` opens compare mode
        (:class:`~etp_viz.explorer.compare.CompareExplorer`): the algorithms in lockstep on
        copies of the model, overlaid loss and fidelity, each algorithm's claim per weight.
        ``lift=True``: plain ops on weights (``x @ W``, ``W * h``) are lifted into ETP ops
        (:mod:`etp_viz.compiler.lift`): the graph shown and the learner (one, by name) use it.

    Raises ``ImportError`` naming ``pip install "etp-viz[explorer]"`` when the widget packages
    are missing (:func:`build_explorer` builds the same explorer headless, for a saved page).
    """
    require_widget_packages()
    return build_explorer(model, *example_inputs, **options)


def build_explorer(model: Any, *example_inputs: Any, **options: Any) -> Explorer:
    """:func:`show` without the widget packages' check: with the core dependencies only, a
    headless explorer whose ``save_html`` writes the offline page (what the demo uses)."""
    live = {k: options.pop(k) for k in list(options) if k in SESSION_OPTIONS}
    max_rate = options.pop("max_rate", 20.0)
    lift = bool(options.pop("lift", False))
    try:
        split_display_options({k: v for k, v in options.items() if k != "expanded"})
    except (TypeError, ValueError) as error:
        raise type(error)(f"{error}\nLive-session options: {sorted(SESSION_OPTIONS)}.") from None
    if live.get("task") is None and live.get("data") is None:
        if isinstance(live.get("algorithm"), str):  # a static view: whose claims to show
            options["algorithm"] = canonical_name(live.pop("algorithm"))
        if live:
            raise TypeError(
                f"Options {sorted(live)} need a live run: add `task=` (e.g. "
                "etp_viz.tasks.SineRegression()) or `data=lambda t: (x_t, y_t)`."
            )
        from etp_viz.compiler import compile_etrace_graph

        graph = compile_etrace_graph(model, *example_inputs, lift=lift)
        return Explorer(graph, **options)
    if len(example_inputs) != 1:
        raise TypeError("A live session takes exactly one example input `x` (one step).")
    if isinstance(live.get("algorithm"), list | tuple):
        if lift:
            raise TypeError("lift=True applies to one learner; compare mode runs each as written")
        return _compare(model, example_inputs[0], live, options, max_rate)
    if lift:  # the learner, by name, built with lift=True (a built one is used as is)
        live["algorithm"] = lifted_learner(model, live.get("algorithm"), live)
    session = Session(model, example_inputs[0], **live)  # its budget: the task's lesson
    graph = session.algorithm.graph
    if graph is None:
        from etp_viz.compiler import compile_etrace_graph

        graph = compile_etrace_graph(model, *example_inputs)
    name = str(session.history.meta.get("algorithm", ""))
    options.setdefault("algorithm", name if name in graph_claim_names() else None)  # its claims
    explorer = LiveExplorer(graph, session, max_rate=max_rate, **options)
    if options["algorithm"] is None and explorer.view_model:  # a learner stating its own claims
        explorer.view_model = with_learner_claims(explorer.view_model, session.algorithm)
    return explorer


def lifted_learner(model: Any, algorithm: Any, live: dict) -> Any:
    """The learner ``algorithm`` names, built with ``lift=True`` and the session's ``decay`` /
    ``mesh`` (an ETP learner; another name is a TypeError naming the ones that lift)."""
    from etp_viz.learn.registry import DEFAULT_LEARNER, build_learner

    if algorithm is not None and not isinstance(algorithm, str):
        return algorithm  # a built learner or a factory: lift is its own option
    defaults = {k: live[k] for k in ("decay", "mesh") if live.get(k) is not None}
    return build_learner(model, algorithm or DEFAULT_LEARNER, {"lift": True}, **defaults)


def _compare(model: Any, x: Any, live: dict, options: dict, max_rate: float) -> Explorer:
    """Compare mode: a :class:`Comparison` of ``live["algorithm"]`` and its explorer."""
    from etp_viz.compiler import compile_etrace_graph
    from etp_viz.live.compare import Comparison

    from .compare import CompareExplorer

    if live.get("mesh") is not None:
        raise ValueError(
            "mesh= is for one algorithm; compare mode runs every algorithm on one device."
        )
    live.pop("mesh", None)
    comparison = Comparison(model, x, live.pop("algorithm"), **live)  # budget: the lesson's
    first = next(iter(comparison.sessions.values()))
    graph = first.algorithm.graph or compile_etrace_graph(first.model, x)
    return CompareExplorer(graph, comparison, max_rate=max_rate, **options)
