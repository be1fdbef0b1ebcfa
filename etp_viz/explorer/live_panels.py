"""What the live panels of the explorer show: their specs (titles with weight names, axis
titles, plain-language tooltips, chance levels, constants explained) and the values pushed to
them from a :class:`~etp_viz.live.history.History`.

Used by :class:`~etp_viz.explorer.live_explorer.LiveExplorer` (one session) and
:class:`~etp_viz.explorer.compare.CompareExplorer` (compare mode); drawn by ``js/src/live/``.
The contract is in ``docs/view-model.md`` ("Live session").
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any

import numpy as np

from etp_viz.learn.registry import TraceLearner
from etp_viz.live.compare import Comparison
from etp_viz.live.history import task_levels
from etp_viz.live.probe import module_at, path_name
from etp_viz.tasks.base import Task

__all__ = [
    "TOOLTIPS",
    "RunWatch",
    "chance_levels",
    "fidelity_rows",
    "masked_loss",
    "panel_specs",
    "panel_values",
    "push_overviews",
    "trace_names",
    "TraceOverviewClock",
]

#: Plain-language tooltip of each panel kind (what a student reads on hover).
TOOLTIPS = {
    "loss": (
        "How wrong the network's output is (lower is better). Thick line: the mean over the "
        "last episodes of the task (choose how many above the plot); faint line: the loss of "
        "each step; dashed grey line: chance, the loss of a guess that ignores the input."
    ),
    "loss_masked": (
        " Only steps with a target count (the loss is exactly 0 on the other steps, so they "
        "are left out)."
    ),
    "accuracy": (
        "Share of the labelled steps where the network's most likely class is the right one "
        "(smoothed). Dashed grey line: chance, the accuracy of guessing."
    ),
    "traces": (
        "Size of each weight's eligibility trace ‖ε‖: the running memory of how the weight "
        "has recently moved its hidden state. The online gradient is this trace times the "
        "learning signal. Graph nodes are coloured by the same number."
    ),
    "df": (
        "dh/dy: how strongly this step's new hidden state responds to the weight's output y, "
        "one row per unit, one column per measured step. The trace multiplies it in at "
        "every step."
    ),
    "dhdh": (
        "dh/dh: how much of each unit's previous hidden state carries over into this step "
        "(the diagonal of the hidden-to-hidden Jacobian). Near 1: long memory; near 0: the "
        "unit forgets at once. The trace decays by this factor every step."
    ),
    "fidelity": (
        "How close the online gradient is to the exact one (BPTT over the last steps): "
        "cosine 1 means the same direction, relative error 0 means identical."
    ),
    "activity/layer": (
        "The spiking layer over the last episode: spikes of the first neurons (top, one row "
        "per neuron; click a row to pick its synapse below) and their membrane potentials "
        "(bottom)."
    ),
    "activity/hidden": (
        "The hidden state of the first units over the last episode (one line per unit)."
    ),
    "activity/readout": (
        "The network's output (solid) against its target (dashed) over the last episode; "
        "for a classification, the probability of each class."
    ),
    "activity/synapse": (
        "e-prop's figure 1, live: one synapse's eligibility trace ε (how this synapse could "
        "change its neuron), the neuron's learning signal L (how the loss wants the neuron to "
        "change) and their product L·ε, this synapse's update in the gradient's units, drawn on "
        "one scale with the online gradient g the optimizer received (dashed; it sums the "
        "batch, so it can differ from one sequence's L·ε), over the last episode."
    ),
}


def chance_levels(task: Task | None) -> dict[str, float]:
    """``{"loss": ..., "accuracy": ...}`` from a task's ``chance_loss`` / ``chance_accuracy``
    (the levels it has, :func:`etp_viz.live.history.task_levels`; nothing for custom data)."""
    levels = task_levels(task)
    names = (("loss", "chance_loss"), ("accuracy", "chance_accuracy"))
    return {key: levels[name] for key, name in names if name in levels}


def _trace_groups(algorithm: Any) -> tuple:
    """The hidden groups of a trace learner's execution plan (none for other learners)."""
    if not isinstance(algorithm, TraceLearner):
        return ()
    return tuple(algorithm.graph_executor.plan.groups or ())


def _names(session: Any) -> tuple[dict[str, str], dict[str, str]]:
    """Relation id ``r<i>`` → its weight names, group id ``g<k>`` → its hidden states' names."""
    relations = {r: ", ".join(paths) for r, paths in session.probe.relation_names.items()}
    groups = {}
    for group in _trace_groups(session.algorithm):
        groups[f"g{group.index}"] = ", ".join(path_name(p) for p in group.hidden_paths)
    return relations, groups


def _describe(what: str, relations: dict[str, str], groups: dict[str, str]) -> str:
    """``r0.g0`` → ``rnn.W.weight → rnn.V``; ``g1`` → ``readout.r``; ``g0.s1`` → state 1."""
    parts = what.split(".")
    relation = next((p for p in parts if p.startswith("r") and p in relations), None)
    group = next((p for p in parts if p.startswith("g") and p in groups), None)
    state = next((p[1:] for p in parts if p.startswith("s") and p[1:].isdigit()), None)
    text = relations.get(relation, "") if relation else ""
    if group:
        text = f"{text} → {groups[group]}" if text else groups[group]
    if state:
        text += f" (state {state})"
    return text or what


def _constants(session: Any, what: str, kind: str) -> list[dict[str, Any]]:
    """Values a constant dh/dh or dh/dy panel may show, with where each comes from: the
    decay ``exp(−Δt/τ)`` of a leaky unit (and ``1 − exp(−Δt/τ)``, its input gain)."""
    index = next((int(p[1:]) for p in what.split(".") if p[:1] == "g" and p[1:].isdigit()), None)
    groups = _trace_groups(session.algorithm)
    if index is None or index >= len(groups):
        return []
    out = []
    for path in groups[index].hidden_paths:
        owner = module_at(session.model, path[:-1])
        if owner is None:
            continue
        module = ".".join(map(str, path[:-1]))
        dt = float(getattr(owner, "dt", 1.0) or 1.0)
        for attr, tau_attr, symbol in (
            ("decay", "tau", "τ"),
            ("alpha", "tau_mem", "τ_mem"),
            ("rho", "tau_a", "τ_a"),
        ):
            value, tau = getattr(owner, attr, None), getattr(owner, tau_attr, None)
            if not isinstance(value, float) or tau is None:
                continue
            where = f"Δt = {dt:g}, {symbol} = {float(tau):g} ({module})"
            if kind == "dhdh":
                out.append({"value": value, "text": f"exp(−Δt/{symbol}), {where}"})
                continue
            out.append({"value": 1.0 - value, "text": f"1 − exp(−Δt/{symbol}), {where}"})
            gain = getattr(owner, "R", None)
            if isinstance(gain, float) and attr == "alpha":
                text = f"R·(1 − exp(−Δt/{symbol})) with R = {gain:.3g}, {where}"
                out.append({"value": gain * (1.0 - value), "text": text})
    unique: dict[str, dict[str, Any]] = {}
    for entry in out:
        unique.setdefault(entry["text"], entry)
    return list(unique.values())


def episode_length(task: Task | None) -> int | None:
    """Steps of one episode of a task (None: no episodes, e.g. custom data)."""
    steps = task.n_steps if task is not None else None
    return int(steps) if isinstance(steps, int) and steps > 1 else None


def panel_specs(session: Any) -> list[dict[str, Any]]:
    """The live panels of one session (``live_panels``): loss (with chance), accuracy (a
    classification task), trace magnitudes, dh/dy and dh/dh heatmaps, fidelity and the
    activity views, titled with weight names."""
    task = session.options.get("task")
    chance = chance_levels(task)
    relations, groups = _names(session)
    masked = session.probe.classification
    loss = {
        "name": "loss",
        "kind": "line",
        "title": "loss" + (" (steps with a target)" if masked else ""),
        "tooltip": TOOLTIPS["loss"] + (TOOLTIPS["loss_masked"] if masked else ""),
        "x_label": "step",
        "y_label": "loss",
        "smooth": True,
        "masked": masked,
        "episode": episode_length(task),
    }
    if "loss" in chance:
        loss["chance"] = chance["loss"]
    panels = [loss]
    if "accuracy/correct" in session.recorder.spec:
        accuracy = {
            "name": "accuracy",
            "kind": "line",
            "title": "accuracy",
            "tooltip": TOOLTIPS["accuracy"],
            "x_label": "step",
            "y_label": "accuracy",
            "smooth": True,
            "y_range": [0, 1],
            "episode": episode_length(task),
        }
        if "accuracy" in chance:
            accuracy["chance"] = chance["accuracy"]
        panels.append(accuracy)
    for name in session.recorder.names:
        kind, _, what = name.partition("/")
        if kind in ("trace", "trace_x", "trace_f"):
            suffix = {"trace_x": " (ε_x)", "trace_f": " (ε_f)"}.get(kind, "")
            label = _describe(what, relations, groups) + suffix
            panels.append(
                {
                    "name": name,
                    "kind": "line",
                    "title": f"‖ε‖ {label}",
                    "label": label,
                    "tooltip": TOOLTIPS["traces"],
                    "x_label": "step",
                    "y_label": "‖ε‖",
                }
            )
    for name, shape in session.recorder.spec.items():
        kind, _, what = name.partition("/")
        if kind in ("df", "dhdh") and shape:
            label = _describe(what, relations, groups)
            symbol = "dh/dy" if kind == "df" else "dh/dh"
            panels.append(
                {
                    "name": name,
                    "kind": "heatmap",
                    "title": f"{symbol} {label}",
                    "symbol": symbol,
                    "tooltip": TOOLTIPS[kind],
                    "x_label": "measured step",
                    "y_label": "unit",
                    "constants": _constants(session, what, kind),
                }
            )
    if session.fidelity_window is not None:  # the fidelity meter is on
        panels.append(
            {
                "name": "fidelity",
                "kind": "fidelity",
                "title": "gradient fidelity vs BPTT (cosine, rel. error)",
                "tooltip": TOOLTIPS["fidelity"],
                "x_label": "step",
                "y_label": "vs BPTT",
            }
        )
    panels += _activity_specs(session)
    return panels


def _activity_specs(session: Any) -> list[dict[str, Any]]:
    spec = session.recorder.spec
    task = session.options.get("task")
    episode = (task.n_steps if task is not None else 0) or 100
    plan = session.probe.activity
    out = []
    hidden = plan.get("hidden") or ""
    spiking = "activity/spikes" in spec
    if task is None and not spiking:  # custom data and a rate model: no views (still recorded)
        return out
    base = {"kind": "activity", "episode": episode, "x_label": "step of the episode"}
    if "activity/hidden" in spec:
        layer = hidden.rsplit(".", 1)[0]
        title = (
            f"spiking layer {layer}: spikes and membrane potential {hidden}"
            if spiking
            else f"hidden state {hidden}"
        )
        key = "activity/layer" if spiking else "activity/hidden"
        for name in ("activity/spikes", "activity/hidden"):
            if name in spec:
                out.append(
                    {
                        **base,
                        "name": name,
                        "panel": "activity/layer",
                        "title": title,
                        "tooltip": TOOLTIPS[key],
                        "y_label": "unit",
                    }
                )
    if "activity/output" in spec:
        classes = bool(plan.get("softmax"))
        for name in ("activity/output", "activity/target"):
            out.append(
                {
                    **base,
                    "name": name,
                    "panel": "activity/readout",
                    "title": "readout vs target" + (" (class probabilities)" if classes else ""),
                    "tooltip": TOOLTIPS["activity/readout"],
                    "y_label": "probability" if classes else "output",
                }
            )
    synapse = plan.get("synapse")
    if synapse is not None:
        out.append(
            {
                **base,
                "name": "activity/synapse",
                "panel": "activity/synapse",
                "title": f"synapse {synapse['name']}[{synapse['i']}, j]: trace × learning "
                "signal = update",
                "weight": synapse["name"],
                "input": synapse["i"],
                "tooltip": TOOLTIPS["activity/synapse"],
                "y_label": "value",
            }
        )
    return out


def masked_loss(history: Any, n: int) -> np.ndarray:
    """The last ``n`` losses, NaN on steps without a target (a classification task's masked
    loss is exactly 0 there: a smoothed curve over them would sink towards 0)."""
    loss = np.asarray(history.recent("loss", n), np.float32)
    if "accuracy/labelled" in history:
        labelled = np.asarray(history.recent("accuracy/labelled", n))
        loss = np.where(labelled > 0, loss, np.nan).astype(np.float32)
    return loss


def accuracy_series(history: Any, n: int) -> np.ndarray:
    """The last ``n`` steps' accuracy (correct / labelled), NaN on steps without a target."""
    correct = np.asarray(history.recent("accuracy/correct", n), np.float64)
    labelled = np.asarray(history.recent("accuracy/labelled", n), np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(labelled > 0, correct / labelled, np.nan).astype(np.float32)


def _episode_window(steps: np.ndarray, episode: int) -> slice:
    """The rows of the last complete episode (the current one before any is complete)."""
    if steps.size == 0:
        return slice(0, 0)
    last = int(steps[-1]) + 1
    end = (last // episode) * episode
    start = end - episode
    if start < int(steps[0]) or end <= start:
        start, end = max(int(steps[0]), last - episode), last
    lo, hi = np.searchsorted(steps, [start, end])
    return slice(int(lo), int(hi))


def panel_values(history: Any, spec: dict[str, Any], window: int) -> tuple[Any, dict] | None:
    """``(values, meta)`` to push for one panel spec (None: nothing recorded yet)."""
    name, kind = spec["name"], spec["kind"]
    meta: dict[str, Any] = {"step": int(history.steps[-1])}
    if kind == "activity":
        if name not in history.activity_names:
            return None
        steps, rows = history.activity(name)
        part = _episode_window(steps, int(spec.get("episode", 100)))
        meta["steps"] = [int(s) for s in steps[part]]
        return np.asarray(rows[part], np.float32), meta
    if name == "loss":
        return masked_loss(history, window), meta
    if name == "accuracy":
        return accuracy_series(history, window), meta
    if kind == "heatmap" and name in history:
        steps, values = history.measured(name, window)
        meta["steps"] = [int(s) for s in steps]
        return values, meta
    if name == "fidelity":
        if not history.fidelity:
            return None
        rows = [[f["step"], f["cosine"], f["rel_error"]] for f in history.fidelity]
        array = np.asarray(rows, np.float64)  # None (no gradient in the window) -> NaN
        if array.shape[0] > window:  # the whole run: means of neighbouring checkpoints
            with np.errstate(invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a bucket of NaN only
                parts = np.array_split(array, window)
                array = np.stack([[p[0, 0], *np.nanmean(p[:, 1:], 0)] for p in parts])
        return array, meta
    if name in history:
        return history.recent(name, window), meta
    return None


def overview_rows(history: Any, name: str) -> np.ndarray | None:
    """The whole run of ``"loss"`` or ``"accuracy"`` as ``(m, 4)`` float32 rows ``(first step
    of the bucket, mean, min, max)`` (:meth:`History.overview`; None before a step)."""
    if history.num_steps == 0:
        return None
    try:
        view = history.overview(name)
    except KeyError:
        return None
    return np.stack([view["steps"], view["mean"], view["min"], view["max"]], 1).astype(np.float32)


#: Seconds between two pushes of the whole-run trace overviews during a run (they change
#: little from frame to frame; every push when not running).
TRACE_OVERVIEW_EVERY = 0.5


class TraceOverviewClock:
    """When an explorer sends the whole-run trace overviews: with every push when not
    running, at most every :data:`TRACE_OVERVIEW_EVERY` seconds during a run."""

    def __init__(self) -> None:
        self.last_sent = -math.inf

    def due(self, running: bool) -> bool:
        """Whether this push sends them (and note the time when it does)."""
        now = time.monotonic()
        if running and now - self.last_sent < TRACE_OVERVIEW_EVERY:
            return False
        self.last_sent = now
        return True


def trace_names(histories: list[Any]) -> list[str]:
    """The trace-magnitude series with a whole-run overview in any of ``histories`` (in the
    order first recorded): what the page's scrubber replays on the graph."""
    from etp_viz.live.history import TRACE_KINDS

    names: dict[str, None] = {}
    for history in histories:
        for name in history.overview_names:
            if name.partition("/")[0] in TRACE_KINDS:
                names.setdefault(name, None)
    return list(names)


def push_overviews(explorer: Any, histories: list[Any], names: list[str]) -> None:
    """Send ``overview/<name>`` for each of ``names`` (whole-run loss / accuracy / trace
    magnitudes): ``(m, 4)`` rows for one history, ``(k, m, 4)`` NaN-padded at the end for
    ``k`` (compare mode; NaN throughout for a learner without that series). The message is a
    live message (``push_live``'s layout) whose ``overview`` names the series (the panel of
    loss and accuracy) it belongs to; ``width``: steps per bucket."""
    for name in names:
        rows = [overview_rows(h, name) for h in histories]
        if all(r is None for r in rows):
            continue
        if len(histories) == 1:
            data = rows[0]
        else:
            m = max(r.shape[0] for r in rows if r is not None)
            data = np.full((len(rows), m, 4), np.nan, np.float32)
            for i, r in enumerate(rows):
                if r is not None:
                    data[i, : r.shape[0]] = r
        width = max(int(h.overview(name)["width"]) for h in histories if name in h.overview_names)
        array = np.ascontiguousarray(data, dtype="<f4")
        content = {"type": "live", "name": f"overview/{name}", "shape": list(array.shape)}
        content.update({"dtype": "float32", "width": width, "overview": name})
        explorer.send(content, buffers=[array.tobytes()])


def fidelity_rows(history: Any, name: str, most: int) -> np.ndarray:
    """``(m, 2)`` rows ``(step, value)`` of the fidelity checkpoints of a whole run (``name``:
    ``"cosine"`` or ``"rel_error"``), bucket means when there are more than ``most``."""
    from etp_viz.live.history import bucket_stats

    rows = [[f["step"], np.nan if f[name] is None else f[name]] for f in history.fidelity]
    array = np.asarray(rows, np.float64).reshape(-1, 2)
    if array.shape[0] <= most:
        return array
    last = int(array[-1, 0]) + 1
    width = 1 << max(int(np.ceil(np.log2(last / most))), 0)
    starts, mean, _, _ = bucket_stats(array[:, 0].astype(np.int64), array[:, 1], width)
    return np.stack([starts.astype(np.float64), mean], 1)


class RunWatch:
    """What the status line says besides the step: the compilation in progress (which learner,
    how far a comparison is, since when), the lesson's budget and, once reached, its summary.

    ``runner``: the session or comparison; ``sessions``: ``{label: Session}`` (the runner
    itself for one session); ``summary``: a function returning the current
    :class:`~etp_viz.live.lesson.LessonSummary`; ``on_change``: called when the compile
    status moves between frames (a comparison's learners compile one after the other).
    """

    def __init__(self, runner: Any, sessions: dict[str, Any], summary: Any, on_change: Any):
        self.runner = runner
        self.sessions = sessions
        self.summary = summary
        self.on_change = on_change
        self._pending: list[str] = []
        self._total = 0
        self._since = 0.0
        self._why = ""
        self._sizes: set[int] = set()
        self.lesson: dict[str, Any] | None = None
        for label, session in sessions.items():
            if session is not runner:
                session.observe(lambda _s, event, label=label: self._on_learner(label, event))

    def start(self, labels: list[str], why: str = "") -> None:
        """The learners ``labels`` compile (in this order) before their next frame."""
        self._pending, self._total, self._why = list(labels), len(labels), why
        self._since = time.monotonic()

    def _on_learner(self, label: str, event: str) -> None:
        if event == "frame" and self._pending and self._pending[0] == label:
            self._pending.pop(0)
            self._since = time.monotonic()
            self.on_change()

    def on_event(self, event: str) -> bool:
        """The runner's event; True when the status changed (push it even if rate-limited)."""
        before = bool(self._pending)
        if event == "started":
            fresh = [k for k, s in self.sessions.items() if s.history.num_steps == 0]
            if fresh:
                self.start(fresh)
        elif event == "frame":
            self._pending = []
            comparing = isinstance(self.runner, Comparison) and len(self.sessions) > 1
            size = self.runner.steps_per_round if comparing else None
            if isinstance(size, int):
                new = size not in self._sizes
                self._sizes.add(size)
                if new and self.runner.running and len(self._sizes) > 1:
                    self.start(list(self.sessions), f"rounds of {size} steps")
        else:  # paused, reset, error, failure
            self._pending = []
        if event == "reset":
            self.lesson, self._sizes = None, set()
        elif event != "started" and self.runner.budget_reached:
            # on a frame only once (a step() that reaches the budget ends with a frame; a run
            # past it does not recompute the summary every frame)
            if event != "frame" or self.lesson is None:
                self.lesson = self.summary().to_json()
        return before != bool(self._pending) or event != "frame"

    def compiling(self) -> dict[str, Any] | None:
        """``{"label", "index", "total", "elapsed", "why"}`` of the learner compiling now."""
        if not self._pending:
            return None
        return {
            "label": self._pending[0],
            "index": self._total - len(self._pending) + 1,
            "total": self._total,
            "elapsed": round(time.monotonic() - self._since, 1),
            "why": self._why,
        }

    def status(self) -> dict[str, Any]:
        """The keys this adds to ``live_status``: ``compiling``, ``budget``, ``lesson``."""
        return {"compiling": self.compiling(), "budget": self.runner.budget, "lesson": self.lesson}
