"""The structured record of a live session: per-step metrics, fidelity checkpoints, failures.

Metric names are ``"<kind>"`` or ``"<kind>/<what>"``:

===================  ==========================================================  ==========
kind                 meaning                                                     shape
===================  ==========================================================  ==========
``loss``             the step's loss                                             ``()``
``trace``            ‖ε‖ of one relation's eligibility trace (D-RTRL)            ``()``
``trace_x``          ‖ε_x‖, input-side trace of a relation (ES-D-RTRL)           ``()``
``trace_f``          ‖ε_f‖, output-side trace of a relation (ES-D-RTRL)          ``()``
``df``               dh/dy of a relation: first units of the (batch-mean) slice  ``(k,)``
``dhdh``             dh/dh diagonal of a hidden group: first units               ``(k,)``
``grad_norm``        ‖online gradient‖ of a parameter                            ``()``
``update_norm``      ‖weight change‖ applied by the optimizer                    ``()``
``accuracy``         ``correct`` / ``labelled``: rows classified right / with a   ``()``
                     target this step (classification tasks; every step)
``activity``         a few units of batch element 0, every step, the last         ``(k,)``
                     :data:`ACTIVITY_KEEP` steps only (:meth:`History.activity`):
                     ``hidden`` (membrane potential / hidden value), ``spikes``,
                     ``output`` / ``target`` (the readout), ``synapse`` (one
                     synapse's trace, its unit's learning signal, its gradient)
===================  ==========================================================  ==========

``loss`` is measured every step. The others are measured on every ``record_every``-th step of
each frame (and on each frame's last step); in between their rows are NaN, meaning "not
measured" (``np.isfinite`` selects the measured rows). The step before a failure is never
NaN for a non-finite reason: a non-finite value halts the run instead of being recorded.
Only measured rows are stored (a long run of a fast model keeps the loss of every step and
its heavy metrics every ``record_every`` steps, not a NaN-filled copy); reading
:attr:`History.metrics` or ``history[name]`` builds the dense arrays, :meth:`History.recent`
the last rows only.

Examples
--------
>>> import numpy as np
>>> h = History(meta={"algorithm": "d_rtrl"})
>>> h.extend(np.arange(3), {"loss": np.array([3.0, 2.0, 1.0])})
>>> h.loss.tolist(), h.num_steps
([3.0, 2.0, 1.0], 3)
"""

from __future__ import annotations

import io
import json
import os
from typing import Any

import numpy as np

from etp_viz.tasks.base import Task

from .overview import OVERVIEW_BUCKETS, Overview, bucket_stats

__all__ = [
    "LESSON_EPISODES",
    "episode_scores",
    "summary_text",
    "ACTIVITY_KEEP",
    "OVERVIEW_BUCKETS",
    "History",
    "Overview",
    "bucket_stats",
    "load_history",
    "task_levels",
]

#: Episodes a final score averages over (:func:`episode_scores`; notebook 07's too).
LESSON_EPISODES = 20
#: Steps a final score averages over on data without episodes.
STEPS_WITHOUT_EPISODES = 100

_META_KEY = "__meta__"
#: Metric kinds whose whole run is kept as an overview besides the loss and the accuracy.
TRACE_KINDS = ("trace", "trace_x", "trace_f")
#: Most recent steps of the activity rows kept (``activity/*``: recorded every step, shown
#: as the last episode or two; older rows are dropped).
ACTIVITY_KEEP = 2048


def task_levels(task: Task | None) -> dict[str, Any]:
    """What a plot of a run on ``task`` needs besides the numbers (``History.meta``):
    ``episode`` (steps per episode: the smoothing window), ``chance_loss`` and
    ``chance_accuracy`` (the levels of a guess that ignores the input), those it has."""
    out: dict[str, Any] = {}
    if task is None:
        return out
    steps = task.n_steps
    if isinstance(steps, int) and steps > 1:
        out["episode"] = steps
    levels = {
        "chance_loss": lambda: task.chance_loss,
        "chance_accuracy": lambda: task.chance_accuracy,
    }
    for name, level in levels.items():
        try:
            value = level()
        except Exception:  # noqa: BLE001 - a task that cannot say: no chance line
            value = None
        if isinstance(value, int | float) and np.isfinite(value):
            out[name] = float(value)
    return out


class _Grow:
    """A growable array: rows appended in amortised O(rows) (the buffer doubles when full)."""

    def __init__(self, shape: tuple[int, ...], dtype: Any) -> None:
        self.buffer = np.zeros((0, *shape), dtype)
        self.size = 0

    def append(self, rows: np.ndarray) -> None:
        end = self.size + rows.shape[0]
        if end > self.buffer.shape[0]:
            size = max(end, 2 * self.size, 64)
            bigger = np.zeros((size, *self.buffer.shape[1:]), self.buffer.dtype)
            bigger[: self.size] = self.buffer[: self.size]
            self.buffer = bigger
        self.buffer[self.size : end] = rows
        self.size = end

    @property
    def view(self) -> np.ndarray:
        """The filled rows (a view: later appends do not change it)."""
        return self.buffer[: self.size]


class _Column:
    """One metric's measured rows: their row numbers in the history and their values. A row
    that is NaN throughout ("not measured") is not stored, so a metric measured every 128th
    step costs 1/128 of its dense size."""

    def __init__(self, shape: tuple[int, ...], dtype: Any) -> None:
        self.rows = _Grow((), np.int64)
        self.values = _Grow(shape, dtype)
        self.every_row = True  # rows == 0..size-1: the dense array is a view

    def append_rows(self, rows: np.ndarray, values: np.ndarray) -> None:
        """Measured rows at known row numbers (ascending, after every stored row)."""
        self.every_row = False
        self.rows.append(np.asarray(rows, np.int64))
        self.values.append(np.asarray(values))

    def append(self, first_row: int, values: np.ndarray) -> None:
        """Rows ``first_row..`` of a dense block; rows that are NaN throughout are skipped."""
        values = np.asarray(values)
        if np.issubdtype(values.dtype, np.floating) and values.size:
            flat = values.reshape(values.shape[0], -1)
            keep = ~np.all(np.isnan(flat), axis=1)
        else:
            keep = np.ones((values.shape[0],), bool)
        complete = bool(keep.all())
        self.every_row = self.every_row and complete and self.rows.size == first_row
        rows = first_row + (np.arange(values.shape[0]) if complete else np.flatnonzero(keep))
        self.rows.append(rows.astype(np.int64))
        self.values.append(values if complete else values[keep])

    def dense(self, total: int, start: int = 0) -> np.ndarray:
        """Rows ``start..total-1`` with NaN where not measured (rows appended past ``total``
        by a concurrent :meth:`History.extend` are left out)."""
        values = self.values.view
        if self.every_row and values.shape[0] >= total:
            return values[start:total]
        out = np.full((total - start, *values.shape[1:]), np.nan, values.dtype)
        rows = self.rows.view
        first, last = np.searchsorted(rows, [start, total])
        out[rows[first:last] - start] = values[first:last]
        return out


class History:
    """Everything a session recorded, on the host, as numpy arrays.

    Parameters
    ----------
    (each is also an attribute of the same name)

    steps : numpy.ndarray
        Global step numbers, shape ``(T,)``.
    metrics : dict[str, numpy.ndarray]
        Metric name → ``(T, *shape)`` array (see the module docstring for names), NaN where
        not measured. Stored sparsely (only measured rows): reading ``metrics`` builds the
        dense arrays; :meth:`recent` reads the last rows only.
    fidelity : list[dict]
        One entry per fidelity checkpoint: ``{"step", "window", "cosine", "rel_error",
        "per_param": {path: {"cosine", "rel_error"}}}``.
    failure : dict or None
        ``{"step", "quantities", "message"}`` of the step that went non-finite.
    meta : dict
        JSON-able description (algorithm, task, model, device, relation and group names).
    """

    def __init__(
        self,
        steps: np.ndarray | None = None,
        metrics: dict[str, np.ndarray] | None = None,
        fidelity: list[dict[str, Any]] | None = None,
        failure: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.fidelity = list(fidelity or [])
        self.failure = failure
        self.meta = dict(meta or {})
        self._clear_steps()
        if steps is not None:
            self.extend(steps, metrics or {})

    # -- reading ---------------------------------------------------------------------------
    @property
    def num_steps(self) -> int:
        """Number of recorded steps."""
        return self._steps.size

    @property
    def steps(self) -> np.ndarray:
        """Global step numbers, shape ``(T,)``."""
        return self._steps.view

    @property
    def names(self) -> list[str]:
        """The recorded metric names (``"loss"``, ``"trace/…"``, ``"df/…"``, …)."""
        return list(self._columns)

    @property
    def metrics(self) -> dict[str, np.ndarray]:
        """Metric name → dense ``(T, *shape)`` array (NaN: not measured)."""
        return {name: self[name] for name in self._columns}

    @property
    def loss(self) -> np.ndarray:
        """Per-step loss, shape ``(T,)`` (empty before the first step)."""
        if "loss" not in self._columns:
            return np.zeros((0,), np.float32)
        return self["loss"]

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            column = self._columns[name]
        except KeyError:
            raise KeyError(
                f"No metric {name!r} in this history. Recorded metrics: {sorted(self._columns)}"
            ) from None
        return column.dense(self.num_steps)

    def __contains__(self, name: str) -> bool:
        return name in self._columns

    def recent(self, name: str, n: int) -> np.ndarray:
        """The last ``n`` rows of one metric (dense, NaN where not measured), without
        building the whole array: what a live view reads every frame.

        >>> h = History()
        >>> h.extend(np.arange(4), {"g": np.array([np.nan, 1.0, np.nan, 2.0])})
        >>> h.recent("g", 3).tolist()
        [1.0, nan, 2.0]
        """
        total = self.num_steps
        return self._columns[name].dense(total, max(total - int(n), 0))

    def measured(self, name: str, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, rows)`` of the measured steps of one metric only (the last ``n`` of them),
        straight from the sparse store: what a heatmap of measured data draws, one column
        per measured step, labelled with its step number.

        >>> h = History()
        >>> h.extend(np.arange(6), {"g": np.array([np.nan, 1.0, np.nan, 2.0, np.nan, 3.0])})
        >>> steps, rows = h.measured("g", 2)
        >>> steps.tolist(), rows.tolist()
        ([3, 5], [2.0, 3.0])
        """
        if name not in self._columns:
            raise KeyError(
                f"No metric {name!r} in this history. Recorded metrics: {sorted(self._columns)}"
            )
        column, total = self._columns[name], self.num_steps
        rows = column.rows.view
        stop = int(np.searchsorted(rows, total))  # rows a concurrent extend added are left out
        start = 0 if n is None else max(stop - int(n), 0)
        return self.steps[rows[start:stop]], column.values.view[start:stop]

    def kind(self, kind: str) -> dict[str, np.ndarray]:
        """All metrics of one kind, keyed by what they describe.

        >>> h = History()
        >>> h.extend(np.arange(1), {"trace/W": np.ones(1), "trace/U": np.zeros(1)})
        >>> sorted(h.kind("trace"))
        ['U', 'W']
        """
        prefix = kind + "/"
        return {n[len(prefix) :]: self[n] for n in self._columns if n.startswith(prefix)}

    # -- writing ---------------------------------------------------------------------------
    def extend(
        self,
        steps: np.ndarray,
        values: dict[str, np.ndarray],
        measured: dict[str, np.ndarray] | None = None,
    ) -> None:
        """Append rows (what :meth:`Recorder.drain` returned): amortised O(rows), and a
        metric's rows that are NaN throughout are not stored (see :attr:`metrics`). A metric
        seen for the first time reads NaN on earlier steps. ``measured``: metric name → the
        row indices (into ``steps``) that its ``values`` hold (``DrainedRows.measured``)."""
        steps = np.asarray(steps, np.int64).reshape(-1)
        if steps.size == 0:
            return
        total = self.num_steps
        activity = {n: v for n, v in values.items() if n.startswith("activity/")}
        if activity:
            self._extend_activity(steps, activity)
        for name, rows in values.items():
            if name in activity:
                continue
            rows = np.asarray(rows)
            at = None if measured is None else measured.get(name)
            if at is None and rows.shape[0] != steps.size:
                raise ValueError(
                    f"History.extend: metric {name!r} has {rows.shape[0]} rows for "
                    f"{steps.size} steps."
                )
            if name not in self._columns:
                self._columns[name] = _Column(rows.shape[1:], rows.dtype)
            if at is None:
                self._columns[name].append(total, rows)
            else:
                self._columns[name].append_rows(total + np.asarray(at), rows)
        self._extend_overviews(int(steps[0]), values)
        self._extend_trace_overviews(int(steps[0]), steps.size, values, measured)
        self._steps.append(steps)

    def _extend_overviews(self, first_step: int, values: dict[str, np.ndarray]) -> None:
        """Feed the whole-run overviews (:meth:`overview`): the loss (NaN on steps without a
        target when the run counts labelled rows) and the accuracy."""
        if "loss" not in values:
            return
        loss = np.asarray(values["loss"], np.float64).reshape(-1)
        series = {"loss": loss}
        labelled = values.get("accuracy/labelled")
        if labelled is not None:
            labelled = np.asarray(labelled, np.float64).reshape(-1)
            correct = np.asarray(values["accuracy/correct"], np.float64).reshape(-1)
            with np.errstate(invalid="ignore", divide="ignore"):
                series["accuracy"] = np.where(labelled > 0, correct / labelled, np.nan)
            series["loss"] = np.where(labelled > 0, loss, np.nan)
        for name, rows in series.items():
            if name not in self._overviews:
                self._overviews[name] = Overview(first_step=first_step)
            self._overviews[name].extend(rows)

    def _extend_trace_overviews(
        self,
        first_step: int,
        count: int,
        values: dict[str, np.ndarray],
        measured: dict[str, np.ndarray] | None,
    ) -> None:
        """Feed the whole-run overviews of the trace magnitudes (``trace/…``, ``trace_x/…``,
        ``trace_f/…``: what the page's scrubber replays on the graph), NaN on the steps
        where they were not measured."""
        for name, rows in values.items():
            if name.partition("/")[0] not in TRACE_KINDS:
                continue
            rows = np.asarray(rows, np.float64).reshape(-1)
            at = None if measured is None else measured.get(name)
            if at is not None:
                dense = np.full((count,), np.nan)
                dense[np.asarray(at, np.int64)] = rows
                rows = dense
            if name not in self._overviews:  # buckets aligned with the loss's: NaN before
                start = int(self._steps.view[0]) if self._steps.size else first_step
                self._overviews[name] = Overview(first_step=start)
            overview = self._overviews[name]
            if overview.first_step + overview.size < first_step:  # steps it was not recorded
                overview.extend(
                    np.full((first_step - overview.first_step - overview.size,), np.nan)
                )
            overview.extend(rows)

    @property
    def overview_names(self) -> list[str]:
        """The series with a whole-run overview (:meth:`overview`)."""
        return list(self._overviews)

    def overview(self, name: str) -> dict[str, Any]:
        """The whole run of ``"loss"``, ``"accuracy"`` or a trace magnitude (``"trace/r0.g0"``,
        ``"trace_x/…"``, ``"trace_f/…"``; NaN where not measured) downsampled (:class:`Overview`):
        ``{"steps", "mean", "min", "max", "width"}``, one entry per bucket of ``width`` steps
        from the first recorded step (at most ``2 * OVERVIEW_BUCKETS`` buckets). A masked
        loss counts the steps with a target only.

        >>> h = History()
        >>> h.extend(np.arange(3), {"loss": np.array([3.0, 2.0, 1.0])})
        >>> h.overview("loss")["steps"].tolist(), h.overview("loss")["max"].tolist()
        ([0, 1, 2], [3.0, 2.0, 1.0])
        """
        if name not in self._overviews:
            raise KeyError(
                f"No overview of {name!r}; this history has: {sorted(self._overviews)} "
                "(the loss always, the accuracy on a classification task, each recorded "
                "trace magnitude)."
            )
        return self._overviews[name].read()

    def _clear_steps(self) -> None:
        """Forget every recorded step and metric (fidelity, failure and meta are kept)."""
        self._steps = _Grow((), np.int64)
        self._columns: dict[str, _Column] = {}
        self._activity_steps = np.zeros((0,), np.int64)
        self._activity: dict[str, np.ndarray] = {}
        self._overviews: dict[str, Overview] = {}

    def _extend_activity(self, steps: np.ndarray, values: dict[str, np.ndarray]) -> None:
        """Append activity rows, keeping the last :data:`ACTIVITY_KEEP` steps."""
        keep = ACTIVITY_KEEP
        self._activity_steps = np.concatenate([self._activity_steps, steps])[-keep:]
        for name, rows in values.items():
            old = self._activity.get(name)
            rows = np.asarray(rows)
            joined = rows if old is None else np.concatenate([old, rows])
            self._activity[name] = joined[-keep:]

    @property
    def activity_names(self) -> list[str]:
        """The activity series recorded (``activity/hidden``, ``activity/spikes``, …)."""
        return list(self._activity)

    def activity(self, name: str, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, rows)`` of one activity series: the last ``n`` of the kept steps.

        >>> h = History()
        >>> h.extend(np.arange(3), {"loss": np.zeros(3), "activity/hidden": np.eye(3)})
        >>> steps, rows = h.activity("activity/hidden", 2)
        >>> steps.tolist(), rows.shape, "activity/hidden" in h.names
        ([1, 2], (2, 3), False)
        """
        if name not in self._activity:
            raise KeyError(f"No activity {name!r}; recorded: {sorted(self._activity)}")
        rows = self._activity[name]
        steps = self._activity_steps[-rows.shape[0] :] if rows.shape[0] else rows[:0, 0]
        start = 0 if n is None else max(rows.shape[0] - int(n), 0)
        return steps[start:], rows[start:]

    def clear(self) -> None:
        """Forget every recorded step (meta is kept)."""
        self._clear_steps()
        self.fidelity = []
        self.failure = None

    def __repr__(self) -> str:
        return (
            f"History(steps={self.num_steps}, metrics={sorted(self._columns)}, "
            f"fidelity={len(self.fidelity)}, failure={self.failure is not None})"
        )

    # -- saving ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (lists of floats; non-finite values become None)."""

        def clean(array: np.ndarray) -> Any:
            as_object = np.asarray(array, np.float64).astype(object)
            as_object[~np.isfinite(np.asarray(array, np.float64))] = None
            return as_object.tolist()

        activity = {
            "steps": self._activity_steps.tolist(),
            "values": {name: clean(rows) for name, rows in self._activity.items()},
        }
        return {
            "steps": self.steps.tolist(),
            "metrics": {name: clean(values) for name, values in self.metrics.items()},
            "fidelity": self.fidelity,
            "failure": self.failure,
            "meta": self.meta,
            "activity": activity,
        }

    def save(self, path: str | os.PathLike) -> None:
        """Write an ``.npz`` file (arrays + a JSON header); read it back with
        :func:`load_history`."""
        header = {"fidelity": self.fidelity, "failure": self.failure, "meta": self.meta}
        arrays: dict[str, Any] = {f"m:{name}": values for name, values in self.metrics.items()}
        arrays.update({f"a:{name}": rows for name, rows in self._activity.items()})
        arrays["activity_steps"] = self._activity_steps
        arrays["steps"] = self.steps
        arrays[_META_KEY] = np.array(json.dumps(header))
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        with open(path, "wb") as handle:
            handle.write(buffer.getvalue())


def load_history(path: str | os.PathLike) -> History:
    """Read a history written by :meth:`History.save` / ``Session.save_history``.

    Examples
    --------
    >>> import tempfile, os
    >>> h = History(meta={"task": "sine"})
    >>> h.extend(np.arange(2), {"loss": np.array([1.0, 0.5])})
    >>> path = os.path.join(tempfile.mkdtemp(), "run.npz")
    >>> h.save(path)
    >>> load_history(path).loss.tolist()
    [1.0, 0.5]
    """
    with np.load(path, allow_pickle=False) as data:
        if _META_KEY not in data.files:
            raise ValueError(
                f"{os.fspath(path)!r} is not an etp_viz history (no {_META_KEY} entry); "
                "write one with `session.save_history(path)`."
            )
        header = json.loads(str(data[_META_KEY]))
        metrics = {name[2:]: data[name] for name in data.files if name.startswith("m:")}
        history = History(
            steps=data["steps"],
            metrics=metrics,
            fidelity=header.get("fidelity", []),
            failure=header.get("failure"),
            meta=header.get("meta", {}),
        )
        activity = {name[2:]: data[name] for name in data.files if name.startswith("a:")}
        if activity and "activity_steps" in data.files:
            history._extend_activity(data["activity_steps"], activity)
        return history


def episode_scores(history: History, episodes: int = LESSON_EPISODES) -> dict[str, Any]:
    """The final loss and accuracy of a run: averages over its last ``episodes`` whole
    episodes (``history.meta["episode"]`` steps each; the last 100 steps without episodes;
    every step before one episode is complete).

    The loss is per scored step: on a classification task a step's recorded loss is the mean
    over its labelled rows (0 without a target), so it is weighted by the rows labelled. The
    accuracy is ``correct / labelled`` summed over the steps (None for regression).

    Returns ``{"loss", "accuracy", "start", "end"}`` (``start..end - 1``: the rows averaged).
    """
    total = history.num_steps
    episode = int(history.meta.get("episode") or 0)
    if episode > 1:
        end = total // episode * episode or total
        start = max(end - int(episodes) * episode, 0)
    else:
        end, start = total, max(total - STEPS_WITHOUT_EPISODES, 0)
    out: dict[str, Any] = {"loss": None, "accuracy": None, "start": start, "end": end}
    if end <= start:
        return out
    loss = np.asarray(history.loss[start:end], np.float64)
    if "accuracy/labelled" in history:
        labelled = np.asarray(history["accuracy/labelled"][start:end], np.float64)
        correct = np.asarray(history["accuracy/correct"][start:end], np.float64)
        rows = float(labelled.sum())
        if rows > 0:
            out["loss"] = float((loss * labelled).sum()) / rows
            out["accuracy"] = float(correct.sum()) / rows
        return out
    finite = loss[np.isfinite(loss)]
    out["loss"] = float(finite.mean()) if finite.size else None
    return out


def summary_text(history: History, error: str | None = None) -> str:
    """A run's summary in a few lines: learner, task and steps, the final loss (an episode
    average, :func:`final_loss_text`), the last fidelity check, a failure, ``error``."""
    meta = history.meta
    lines = [f"{meta.get('algorithm')} on {meta.get('task')}: {history.num_steps} steps"]
    if history.num_steps:
        lines.append(final_loss_text(history))
    if history.fidelity:
        last = history.fidelity[-1]
        if last["cosine"] is None:
            lines.append(f"fidelity at step {last['step']}: no gradient in the window")
        else:
            lines.append(
                f"fidelity at step {last['step']}: cosine {last['cosine']:.3f}, "
                f"relative error {last['rel_error']:.3f}"
            )
    if history.failure:
        lines.append(history.failure["message"])
    if error:
        lines.append(error)
    return "\n".join(lines)


def final_loss_text(history: History) -> str:
    """The final loss: an episode average over the last episodes, per scored step
    (:func:`episode_scores`, the number the lesson summary shows), with the task's chance
    level beside it."""
    score = episode_scores(history)
    loss, start, end = score["loss"], score["start"], score["end"]
    value = "–" if loss is None else f"{loss:.4g}"
    line = f"final loss {value} (mean over steps {start}..{end - 1}"
    chance = history.meta.get("chance_loss")
    return line + (f"; chance {chance:.4g})" if chance is not None else ")")
