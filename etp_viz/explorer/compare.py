"""Compare mode of the explorer: ``show(model, x, task=..., algorithm=[...])``.

A :class:`CompareExplorer` is the graph explorer bound to a
:class:`~etp_viz.live.compare.Comparison` (one session per algorithm, lockstep, same initial
weights and data). Its live panels overlay one line per algorithm (``kind: "compare"``, the
``labels`` of the spec name them): the loss, and with the fidelity meter on, the cosine and the
relative error of each online gradient against BPTT. Each panel's message carries a
``[k, m, 2]`` float32 array: for algorithm ``i``, ``m`` rows of ``(step, value)``, NaN-padded.
``live_status["compare"]`` holds one row per algorithm (step, mean loss, fidelity, ms per
step, learner-state bytes, halted) for the cost table; each weight of the view model gets
``claims``: ``[{"algorithm", "claim", "reason"}]``, one per algorithm. Step/Run/Pause/Reset
act on every algorithm (requests ``live_step`` / ``live_run`` / ``live_pause`` /
``live_reset`` / ``live_set``, as for one session).

Knobs: ``live_status["knobs"]`` lists each knob some learner here takes (ES-D-RTRL's
``decay``, truncated BPTT's ``window``, e-prop's ``kappa_filter_decay``, SnAp's ``n``:
:meth:`Comparison.knobs <etp_viz.live.compare.Comparison.knobs>`) with its slider's range; the
page draws a slider per knob (disabled while running) whose ``live_set {decay: 0.5}`` rebuilds
those learners at the current step (:meth:`CompareExplorer.set_knob`); the claims follow.

>>> import etp_viz
>>> task = etp_viz.tasks.get_task("sine")
>>> ex = etp_viz.show(task.suggested_model(), task.example_input(), task=task,
...                   algorithm=["d_rtrl", "eprop"], fidelity_every=0)
>>> _ = ex.step(4)
>>> [row["step"] for row in ex.live_status["compare"]]
[4, 4]
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from etp_viz.live.compare import Comparison
from etp_viz.live.fidelity import reference_text

from .running import RunningExplorer

__all__ = ["CompareExplorer"]

#: Points of each algorithm's loss sent to the front end (the recent window).
COMPARE_WINDOW = 500


class CompareExplorer(RunningExplorer):
    """The explorer with a :class:`Comparison` attached (see the module docstring)."""

    def __init__(self, graph: Any, comparison: Comparison, *, max_rate: float = 20.0, **options):
        options.setdefault("algorithm", None)  # one claim per algorithm instead (below)
        super().__init__(graph, **options)
        self.comparison = comparison
        self.exact_learners: list[str] = []
        self.view_model = self._with_claims(self.view_model)
        # compiling status, lesson budget and summary over every learner's session
        self._attach_runner(comparison, comparison.sessions, max_rate)
        comparison.observe(self._on_event)
        self._update_status()

    # -- the Python API (delegates) --------------------------------------------------------
    def lesson(self) -> Any:
        """The lesson summary: each learner's final scores against chance, its loss as a
        multiple of the exact reference's and the terms it drops
        (the comparison's :meth:`~etp_viz.live.runner.Runner.lesson`)."""
        from etp_viz.live.lesson import reference_learner
        from etp_viz.view.plain import dropped_terms

        return self.comparison.lesson(
            reference=reference_learner(self.exact_learners),
            dropped=dropped_terms((self.view_model or {}).get("weights") or []),
        )

    @property
    def histories(self) -> dict[str, Any]:
        return self.comparison.histories

    def table(self, last: int = 50) -> str:
        return self.comparison.table(last)

    def set_knob(self, **knobs: Any) -> dict[str, dict[str, Any]]:
        """Move learners' knobs while paused, e.g. ``ex.set_knob(decay=0.5)``
        (:meth:`Comparison.set_knob <etp_viz.live.compare.Comparison.set_knob>`: the learners
        that take it are rebuilt at the current step); the claims and the status follow."""
        return self.comparison.set_knob(**knobs)

    def verify(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "Compare mode measures every algorithm's fidelity live (the cosine and relative "
            "error panels); verify one algorithm with etp_viz.verify(model, xs, ys, "
            "algorithm=...)."
        )

    def static_images(self) -> list[tuple[str, str]]:
        """The overlaid loss (and fidelity) plots as base64 PNGs (the static output)."""
        if all(h.num_steps == 0 for h in self.histories.values()):
            return []
        import base64
        import io

        from etp_viz import plot

        buffer = io.BytesIO()
        plot.compare(self.histories).savefig(buffer, format="png", dpi=72)
        return [("compare", base64.b64encode(buffer.getvalue()).decode("ascii"))]

    def frontend_state(self) -> dict[str, Any]:
        """The synced state and each algorithm's recorded history (what a saved HTML
        embeds: a page without a kernel draws the recorded run)."""
        histories = {k: h.to_json() for k, h in self.histories.items()}
        return super().frontend_state() | {
            "live_history": {"compare": histories, "meta": {"algorithm": "compare"}},
            "live_status": dict(self.live_status),
        }

    def _panel_specs(self) -> list[dict[str, Any]]:
        """Overlaid loss (smoothed, raw faint, chance), accuracy of a classification task,
        and the fidelity panels, whose titles name the learners claimed exact."""
        from .live_panels import TOOLTIPS, chance_levels, episode_length

        comparison = self.comparison
        labels = list(comparison.labels)
        first = next(iter(comparison.sessions.values()))
        chance = chance_levels(comparison.options.get("task"))
        masked = first.probe.classification
        loss = {
            "name": "loss",
            "kind": "compare",
            "title": "loss" + (" (steps with a target)" if masked else ""),
            "labels": labels,
            "tooltip": TOOLTIPS["loss"] + (TOOLTIPS["loss_masked"] if masked else ""),
            "x_label": "step",
            "y_label": "loss",
            "smooth": True,
            "episode": episode_length(comparison.options.get("task")),
        }
        panels = [{**loss, "chance": chance["loss"]} if "loss" in chance else loss]
        if "accuracy/correct" in first.recorder.spec:
            accuracy = {
                "name": "accuracy",
                "kind": "compare",
                "title": "accuracy",
                "labels": labels,
                "tooltip": TOOLTIPS["accuracy"],
                "x_label": "step",
                "y_label": "accuracy",
                "smooth": True,
                "episode": episode_length(comparison.options.get("task")),
            }
            if "accuracy" in chance:
                accuracy["chance"] = chance["accuracy"]
            panels.append(accuracy)
        if int(comparison.options["fidelity_every"]) > 0:
            window = int(comparison.options["fidelity_window"])
            exact = self.exact_learners
            episode = first.episodes.length if first.episodes is not None else None
            against = reference_text(episode, first.fidelity_window or window)
            note = (
                f" · exact: {', '.join(exact)}"
                if exact
                else " · no learner here is exact on every weight"
            )
            tooltip = (
                TOOLTIPS["fidelity"]
                + f" Measured against {against}."
                + (
                    f" Claimed exact on every weight: {', '.join(exact)} (their cosine stays at 1)."
                    if exact
                    else ""
                )
            )
            for name, what in (("cosine", "cosine"), ("rel_error", "relative error")):
                panels.append(
                    {
                        "name": name,
                        "kind": "compare",
                        "title": f"fidelity: {what} to {against}{note}",
                        "labels": labels,
                        "exact": exact,
                        "tooltip": tooltip,
                        "x_label": "step",
                        "y_label": "cosine" if name == "cosine" else "rel. error",
                    }
                )
        return panels

    # -- claims ------------------------------------------------------------------------------
    def _with_claims(self, vm: dict | None) -> dict | None:
        """Each weight of the view model with one claim per algorithm."""
        if not vm:
            return vm
        from etp_viz.view.weights import claims_by_weight

        per_algorithm, dropped = {}, {}
        for label, session in self.comparison.sessions.items():
            algorithm = session.algorithm
            graph = algorithm.graph
            try:
                raw = graph.gradient_claims(algorithm)
                per_algorithm[label] = claims_by_weight(raw)
                dropped[label] = _dropped_by_weight(raw)
            except Exception as error:  # noqa: BLE001 - a learner that states no claims
                per_algorithm[label] = {"": ("unknown", f"{type(error).__name__}: {error}")}
        weights = []
        for weight in vm.get("weights") or []:
            weight = {k: v for k, v in weight.items() if k not in _GAP_KEYS}  # a knob moved
            claims = []
            for label, table in per_algorithm.items():
                kind, reason = table.get(weight["path"], table.get("", ("none", "")))
                claims.append({"algorithm": label, "claim": kind, "reason": reason})
            weights.append({**weight, "claims": claims, **_gap(weight, claims, dropped, vm)})
        learned = [w for w in weights if w.get("status") != "not_learned"]
        self.exact_learners = [
            label
            for label in per_algorithm
            if learned
            and all(
                c["claim"] == "exact"
                for w in learned
                for c in w["claims"]
                if c["algorithm"] == label
            )
        ]
        return {**vm, "weights": weights}

    # -- comparison → front end ------------------------------------------------------------
    def _on_event(self, _comparison: Comparison, event: str) -> None:
        if event == "knob":  # a learner rebuilt: its claims (SnAp's n) and the exact ones
            self.view_model = self._with_claims(self.view_model)
            self.live_panels = self._panel_specs()
        now = time.monotonic()
        changed = self.watch.on_event(event)
        if event == "started":
            self._in_run = True
        elif event != "frame":
            self._in_run = False
        rate_limited = now - self._last_push < 1.0 / self.max_rate
        if event == "frame" and self._in_run and rate_limited and not changed:
            return
        self._last_push = now
        self.push_history()
        self._update_status(running=event in ("started", "frame") and self.comparison.running)
        failures = [
            f"{label}: {s.history.failure['message']}"
            for label, s in self.comparison.sessions.items()
            if s.history.failure
        ]
        message = self.comparison.error or "\n".join(failures)
        if message or event == "reset":
            self.error = message

    def push_history(self) -> None:
        """Send every algorithm's recent loss and its fidelity checkpoints."""
        histories = self.histories
        if all(h.num_steps == 0 for h in histories.values()):
            return
        from .live_panels import (
            accuracy_series,
            fidelity_rows,
            masked_loss,
            push_overviews,
            trace_names,
        )

        series: dict[str, list[np.ndarray]] = {p["name"]: [] for p in self.live_panels}
        for history in histories.values():
            steps = np.asarray(history.steps[-COMPARE_WINDOW:], np.float64)
            # a masked task's loss is NaN on steps without a target (smoothed over the others)
            loss = np.asarray(masked_loss(history, COMPARE_WINDOW), np.float64)
            series["loss"].append(np.stack([steps[-len(loss) :], loss], axis=1))
            if "accuracy" in series:
                accuracy = np.asarray(accuracy_series(history, COMPARE_WINDOW), np.float64)
                series["accuracy"].append(np.stack([steps[-len(accuracy) :], accuracy], axis=1))
            for name in ("cosine", "rel_error"):  # the whole run (bucket means when long)
                if name in series:
                    series[name].append(fidelity_rows(history, name, COMPARE_WINDOW))
        for name, arrays in series.items():
            self.push_live(name, _pad(arrays), step=int(self.comparison.step_count))
        names = [p["name"] for p in self.live_panels if p["name"] in ("loss", "accuracy")]
        if self.trace_overviews.due(self.comparison.running):  # the graph's trace colours
            names += trace_names(list(histories.values()))
        push_overviews(self, list(histories.values()), names)
        self.pushes += 1

    def _update_status(self, running: bool | None = None) -> None:
        comparison = self.comparison
        first = next(iter(comparison.sessions.values()))
        rows = [{k: _jsonable(v) for k, v in row.items()} for row in comparison.rows()]
        self.live_status = {
            "step": int(comparison.step_count),
            "running": comparison.running if running is None else running,
            "halted": comparison.halted,
            "device": first.history.meta.get("device", ""),
            "algorithm": "compare: " + ", ".join(comparison.labels),
            "decay": None,
            "steps_per_frame": comparison.steps_per_round,
            "record": None,
            "compare": rows,
            "knobs": _knob_sliders(comparison.knobs()),
            **self.watch.status(),
        }

    def _request_set(self, params: dict) -> dict[str, Any]:
        """``live_set``: ``steps_per_frame`` (steps per lockstep round) and the knobs some
        learner here takes (``decay``, ``window``, ...: :meth:`set_knob`; the answer says
        their values). A refused value is the answer's error."""
        offered = self.comparison.knobs()
        knobs = {k: v for k, v in params.items() if k in offered}
        unknown = sorted(set(params) - {"steps_per_frame", *knobs})
        if unknown:
            valid = ", ".join(["steps_per_frame", *offered])
            raise TypeError(
                f"live_set got {unknown}; compare mode takes: {valid} (the knobs of the "
                f"learners here: {list(offered) or 'none'})"
            )
        if knobs:
            self.set_knob(**knobs)
        if "steps_per_frame" in params:
            self.comparison.steps_per_round = max(1, int(params["steps_per_frame"]))
            self.comparison.auto_round = False
        self._update_status()
        answer: dict[str, Any] = {"steps_per_frame": self.comparison.steps_per_round}
        return answer | ({"knobs": self.comparison.knobs()} if knobs else {})


#: what :func:`_gap` adds to a weight (recomputed when a knob moves)
_GAP_KEYS = ("gap", "dropped_nodes", "dropped_edges")


def _knob_sliders(knobs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The page's sliders: per knob its ``name``, ``summary``, ``values`` (``{label: value}``),
    ``value`` (the first learner's; a decay pair's ``alpha_x``), ``min`` / ``max`` / ``step``
    (a value beyond the slider widens it) and ``integer``."""
    from etp_viz.learn.knobs import KNOBS

    sliders = []
    for name, values in knobs.items():
        knob = KNOBS[name]
        low, high, step = knob.slider
        numbers = [float(v[0] if isinstance(v, tuple | list) else v) for v in values.values()]
        sliders.append(
            {
                "name": name,
                "summary": knob.summary,
                "values": values,
                "value": numbers[0],
                "min": low,
                "max": max(high, *numbers),
                "step": step,
                "integer": knob.integer,
            }
        )
    return sliders


def _dropped_by_weight(claims: Any) -> dict[str, list[int]]:
    """``{ParamState path: equation indices of the Jacobian terms its claims drop}``."""
    from etp_viz.view.weights import path_text

    out: dict[str, list[int]] = {}
    for key, claim in claims.items():
        owner = path_text(claim.weight_path) if claim.weight_path else key
        out.setdefault(owner, []).extend(int(i) for i in claim.dropped or ())
    return out


def _gap(weight: dict, claims: list[dict], dropped: dict, vm: dict) -> dict[str, Any]:
    """Why the learners differ on one weight: ``claims`` (each with a plain ``summary`` and
    the compiler's ``detail``, shown on hover), ``gap`` (a plain sentence naming the
    approximate learners, the terms they drop and the exact ones) and, from the first
    approximate learner, the ``dropped_nodes`` / ``dropped_edges`` the graph draws dashed."""
    from etp_viz.view.plain import plain_claim, plain_reason, term_clauses, view_names

    names = view_names(vm.get("weights") or [])
    extra: dict[str, Any] = {
        "claims": [{**c, **plain_claim(c["claim"], c["reason"], names)} for c in claims]
    }
    approximate = [c for c in claims if c["claim"] == "approximate"]
    if not approximate:
        return extra

    def drops(claim: dict) -> list[str]:  # every term kind the compiler drops, in words
        return term_clauses(claim["reason"] or "", names)

    droppers = [c for c in approximate if drops(c)]
    sentences = []
    if droppers:
        terms = list(dict.fromkeys(t for c in droppers for t in drops(c)))
        who = ", ".join(c["algorithm"] for c in droppers)
        verb = "drops" if len(droppers) == 1 else "drop"
        sentences.append(f"{who} {verb} part of the gradient: {'; '.join(terms)}")
    for c in approximate:
        if c not in droppers:
            why = plain_reason(c["reason"], names).summary.rstrip(".") or "no reason given"
            sentences.append(f"{c['algorithm']} is approximate ({why})")
    for c in claims:
        if c["claim"] == "none":
            sentences.append(f"{c['algorithm']} does not learn it online")
    exact = [c["algorithm"] for c in claims if c["claim"] == "exact"]
    if exact:
        sentences.append(f"exact: {', '.join(exact)}; the gap between them comes from this")
    text = ". ".join(sentences) + "."
    if droppers:
        approximate = droppers
    node_ids = {n["id"] for n in vm.get("nodes") or []}
    first = approximate[0]["algorithm"]
    nodes = [f"e{i}" for i in sorted(set(dropped.get(first, {}).get(weight["path"], [])))]
    nodes = [n for n in nodes if n in node_ids][:12]
    edges = [e["id"] for e in vm.get("edges") or [] if e.get("target") in set(nodes)]
    extra["gap"] = text
    if nodes:
        extra.update({"dropped_nodes": nodes, "dropped_edges": edges})
    return extra


def _pad(arrays: list[np.ndarray]) -> np.ndarray:
    """``[k, m, 2]`` from ``k`` arrays of ``(rows_i, 2)``: NaN rows at the front."""
    m = max((a.shape[0] for a in arrays), default=0)
    out = np.full((len(arrays), m, 2), np.nan, np.float32)
    for i, array in enumerate(arrays):
        if array.shape[0]:
            out[i, m - array.shape[0] :] = array
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value
