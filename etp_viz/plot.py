"""Static matplotlib figures of a session's history (``etp_viz.plot``): docs, papers, nbviewer.

Every function takes a :class:`~etp_viz.live.history.History` (or the session itself) and
returns a ``matplotlib.figure.Figure`` built without ``pyplot`` (no global state, safe in
threads and headless runs). Heatmaps use a diverging colour map centred on zero and clip
outliers to a quantile so one spike does not wash out the picture.

Examples
--------
>>> import numpy as np
>>> from etp_viz.live.history import History
>>> h = History()
>>> h.extend(np.arange(50), {"loss": np.linspace(1, 0.1, 50), "trace/r0.g0": np.ones(50)})
>>> fig = loss(h, smooth=5)
>>> fig.axes[0].get_ylabel()
'loss'

The loss and accuracy figures teach: a smoothed curve (the trailing mean over one episode of
the task, ``History.meta["episode"]``, else 20 steps) over the faint per-step one, the chance
level dashed (``meta["chance_loss"]`` / ``meta["chance_accuracy"]``), and, for a masked
classification task, only the steps with a target (its loss is exactly 0 on the others).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "accuracy",
    "compare",
    "fidelity",
    "gradient_norms",
    "jacobian_heatmap",
    "loss",
    "sweep",
    "trace_labels",
    "trace_magnitudes",
]

DIVERGING_CMAP = "RdBu_r"


def _history(obj: Any) -> Any:
    return getattr(obj, "history", obj)


def _figure(nrows: int = 1, figsize: tuple[float, float] = (6.0, 3.2)) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    class DisplayedFigure(Figure):
        """A Figure that displays itself as a PNG in a notebook without pyplot's inline
        backend (and so in a stored notebook read on GitHub or nbviewer)."""

        def _repr_png_(self) -> bytes:
            import io

            buffer = io.BytesIO()
            self.savefig(buffer, format="png", dpi=80)
            return buffer.getvalue()

    fig = DisplayedFigure(figsize=figsize, layout="constrained")
    axes = fig.subplots(nrows, 1, squeeze=False)[:, 0]
    return fig, axes


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average (the first points average what exists so far).

    >>> moving_average(np.array([1.0, 3.0, 5.0]), 2).tolist()
    [1.0, 2.0, 4.0]
    """
    values = np.asarray(values, np.float64)
    if window <= 1 or values.size == 0:
        return values
    cumulative = np.cumsum(np.insert(values, 0, 0.0))
    ends = np.arange(1, values.size + 1)
    starts = np.maximum(ends - window, 0)
    return (cumulative[ends] - cumulative[starts]) / (ends - starts)


def window_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over ``window`` steps, NaN values skipped (NaN where the window holds
    none); the front end's ``windowMean`` (js/src/live/series.js).

    >>> window_mean(np.array([1.0, np.nan, 3.0, 5.0]), 2).tolist()
    [1.0, 1.0, 3.0, 4.0]
    """
    values = np.asarray(values, np.float64)
    if window <= 1 or values.size == 0:
        return values
    finite = np.isfinite(values)
    sums = np.cumsum(np.insert(np.where(finite, values, 0.0), 0, 0.0))
    counts = np.cumsum(np.insert(finite.astype(np.int64), 0, 0))
    ends = np.arange(1, values.size + 1)
    starts = np.maximum(ends - window, 0)
    count = counts[ends] - counts[starts]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, (sums[ends] - sums[starts]) / np.maximum(count, 1), np.nan)


def labelled_loss(history: Any) -> np.ndarray:
    """The per-step loss, NaN on steps without a target when the run recorded the labelled
    counts (a masked loss is exactly 0 there)."""
    values = np.asarray(history.loss, np.float64)
    if "accuracy/labelled" in history:
        values = np.where(np.asarray(history["accuracy/labelled"]) > 0, values, np.nan)
    return values


def accuracy_per_step(history: Any) -> np.ndarray:
    """``correct / labelled`` of each step (NaN where nothing was labelled)."""
    correct = np.asarray(history["accuracy/correct"], np.float64)
    labelled = np.asarray(history["accuracy/labelled"], np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(labelled > 0, correct / labelled, np.nan)


def _window(history: Any, smooth: int | None) -> int:
    if smooth is not None:
        return int(smooth)
    episode = history.meta.get("episode")
    return int(episode) if isinstance(episode, int) and episode > 1 else 20


def _chance(ax: Any, value: Any) -> None:
    if isinstance(value, int | float) and np.isfinite(value):
        ax.axhline(value, color="grey", ls="--", lw=1, label=f"chance {value:.3g}")


def trim_outliers(values: np.ndarray, quantile: float = 0.99) -> float:
    """Symmetric colour limit: the ``quantile`` of ``|values|`` (ignoring non-finite values).

    >>> trim_outliers(np.array([0.1, -0.2, 100.0]), quantile=0.5)
    0.2
    """
    finite = np.abs(np.asarray(values, np.float64))
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return 1.0
    limit = float(np.quantile(finite, quantile))
    return limit if limit > 0 else float(finite.max() or 1.0)


def _measured(steps: Any, values: Any) -> tuple[np.ndarray, np.ndarray]:
    """Only the steps where a metric was measured: heavy metrics are recorded every
    ``record_every`` steps and are NaN ("not measured") in between, so lines join the measured
    points instead of breaking at every gap."""
    steps, values = np.asarray(steps), np.asarray(values, np.float64)
    keep = np.isfinite(values)
    return steps[keep], values[keep]


def _require(mapping: dict, what: str, hint: str) -> None:
    if not mapping:
        raise ValueError(f"This history has no {what}. {hint}")


def loss(history: Any, *, smooth: int | None = None, log: bool = False, ax: Any = None) -> Any:
    """Loss per step (faint) and its trailing mean (thick), with the chance level dashed.

    Parameters
    ----------
    history : History or Session
    smooth : int, optional
        Window of the mean in steps (1: none); default one episode of the task
        (``meta["episode"]``), else 20. Steps without a target (a masked task) are left out.
    log : bool
        Log-scaled y axis.
    ax : matplotlib Axes, optional
        Draw into it instead of a new figure.
    """
    history = _history(history)
    fig, axes = (ax.figure, [ax]) if ax is not None else _figure()
    steps, values = history.steps, labelled_loss(history)
    window = _window(history, smooth)
    shown = np.isfinite(values)
    axes[0].plot(steps[shown], values[shown], lw=0.6, alpha=0.35, color="C0", label="each step")
    if window > 1:
        axes[0].plot(
            steps, window_mean(values, window), lw=2.0, color="C0", label=f"mean of {window} steps"
        )
    _chance(axes[0], history.meta.get("chance_loss"))
    finite = values[np.isfinite(values)]
    if log and finite.size and np.all(finite > 0):
        axes[0].set_yscale("log")
    _mark_failure(axes[0], history)
    masked = "accuracy/labelled" in history
    axes[0].set(
        xlabel="step",
        ylabel="loss" + (" (steps with a target)" if masked else ""),
        title=_title(history, "loss"),
    )
    axes[0].legend(loc="upper right", fontsize="small")
    return fig


def accuracy(history: Any, *, smooth: int | None = None, ax: Any = None) -> Any:
    """Accuracy of a classification task (correct / labelled per step, faint) and its
    trailing mean over ``smooth`` steps (default: one episode), chance dashed."""
    history = _history(history)
    _require(
        {"a": 1} if "accuracy/correct" in history else {},
        "accuracy",
        "Accuracy is recorded for classification tasks (task.is_classification).",
    )
    fig, axes = (ax.figure, [ax]) if ax is not None else _figure()
    steps, values = history.steps, accuracy_per_step(history)
    window = _window(history, smooth)
    shown = np.isfinite(values)
    axes[0].plot(steps[shown], values[shown], ".", ms=2, alpha=0.3, color="C2", label="each step")
    axes[0].plot(
        steps, window_mean(values, window), lw=2.0, color="C2", label=f"mean of {window} steps"
    )
    _chance(axes[0], history.meta.get("chance_accuracy"))
    axes[0].set_ylim(-0.02, 1.02)
    axes[0].set(xlabel="step", ylabel="accuracy", title=_title(history, "accuracy"))
    axes[0].legend(loc="lower right", fontsize="small")
    return fig


def trace_magnitudes(
    history: Any, *, relations: list[str] | None = None, log: bool = True, ax: Any = None
) -> Any:
    """Eligibility-trace norms over time, one line per weight (‖ε‖, or for ES-D-RTRL its
    input part ‖ε_x‖ dashed and its hidden part ‖ε_f‖ solid).

    Lines are named by weight (``rnn.Wz.weight``), never by the learner's internal trace id
    (``r0.g0``): that id is the line's ``gid`` (kept in an SVG export, for debugging).
    ``relations`` picks lines by weight name or by trace id (``"rnn.W.weight"``,
    ``"r0.g0"``, ``"r1"``).

    >>> import numpy as np
    >>> from etp_viz.live.history import History
    >>> h = History(meta={"relations": {"r0": ["rnn.W.weight"]}})
    >>> h.extend(np.arange(3), {"trace/r0.g0": np.ones(3)})
    >>> [(line.get_label(), line.get_gid()) for line in trace_magnitudes(h).axes[0].lines]
    [('rnn.W.weight', 'trace/r0.g0')]
    """
    history = _history(history)
    names = history.meta.get("relations", {})
    series = {}
    for kind, style in (("trace", "-"), ("trace_x", "--"), ("trace_f", "-")):
        for trace_id, values in history.kind(kind).items():
            weights = names.get(trace_id.split(".")[0], [])
            wanted = {trace_id, trace_id.split(".")[0], *weights}
            if relations is None or wanted & set(relations):
                series[(kind, trace_id)] = (values, style)
    _require(
        series,
        "trace magnitudes",
        "Record with an etp_viz.learn algorithm "
        "(D_RTRL / ES_D_RTRL); see history.meta['unavailable'].",
    )
    fig, axes = (ax.figure, [ax]) if ax is not None else _figure()
    labels = trace_labels(list(series), names)
    for index, ((kind, trace_id), (values, style)) in enumerate(series.items()):
        steps, measured = _measured(history.steps, values)
        (line,) = axes[0].plot(
            steps, measured, style, lw=1.2, color=f"C{index % 10}", label=labels[index]
        )
        line.set_gid(f"{kind}/{trace_id}")
    if log:
        axes[0].set_yscale("symlog", linthresh=1e-6)
    axes[0].set(xlabel="step", ylabel="‖trace‖", title=_title(history, "trace magnitudes"))
    axes[0].legend(loc="best", fontsize="x-small")
    return fig


#: what each recorded trace kind is, in words (ES-D-RTRL splits a trace in two parts)
_TRACE_PARTS = {"trace": "", "trace_x": "input part", "trace_f": "hidden part"}


def trace_labels(keys: list[tuple[str, str]], names: dict[str, list[str]]) -> list[str]:
    """A legend label per ``(kind, trace id)``: the weights' names, the part of an ES-D-RTRL
    trace, and, where one weight has traces for several hidden groups, which group (its
    index, as the explorer's groups panel numbers them); a trace whose weights were not
    recorded is "trace <n>".

    >>> trace_labels([("trace_x", "r0"), ("trace_f", "r0.g1")], {"r0": ["rnn.W.weight"]})
    ['rnn.W.weight (input part)', 'rnn.W.weight (hidden part)']
    >>> trace_labels([("trace", "r0.g0"), ("trace", "r0.g1")], {"r0": ["rnn.W"]})
    ['rnn.W (hidden group 0)', 'rnn.W (hidden group 1)']
    """
    labels = []
    for index, (kind, trace_id) in enumerate(keys):
        weights = names.get(trace_id.split(".")[0], [])
        label = ", ".join(weights) or f"trace {index + 1}"
        notes = [_TRACE_PARTS.get(kind, "")]
        same = [t for k, t in keys if k == kind and t.split(".")[0] == trace_id.split(".")[0]]
        group = next((p[1:] for p in trace_id.split(".")[1:] if p[:1] == "g"), None)
        if len(same) > 1 and group is not None and group.isdigit():
            notes.append(f"hidden group {int(group)}")
        notes = [n for n in notes if n]
        labels.append(label + (f" ({', '.join(notes)})" if notes else ""))
    return labels


def jacobian_heatmap(
    history: Any,
    name: str | None = None,
    *,
    last: int = 200,
    quantile: float = 0.99,
    ax: Any = None,
) -> Any:
    """Units × measured steps heatmap of a per-unit quantity (dh/dy ``df/…``, dh/dh
    ``dhdh/…``) or of any ``(T, units)`` array, on a diverging colour map with outliers clipped.

    Heavy metrics are measured every ``record_every`` steps: the heatmap draws the measured
    steps only, one column each, and labels the columns with their step numbers (no "not
    measured" gaps, and the spacing of the measurements may change during a run).

    Parameters
    ----------
    history : History, Session or numpy.ndarray
        An array is drawn as is (rows = steps; rows that are NaN throughout are skipped).
    name : str, optional
        Metric name, e.g. ``"dhdh/g0"``; default: the first per-unit metric found.
    last : int
        Only the most recent ``last`` measured steps.
    quantile : float
        Colour limits are ± this quantile of |values| (outlier trimming).

    Examples
    --------
    >>> import numpy as np
    >>> from etp_viz.plot import jacobian_heatmap
    >>> values = np.full((10, 3), np.nan); values[[3, 7, 9]] = 1.0
    >>> fig = jacobian_heatmap(values)
    >>> [t.get_text() for t in fig.axes[0].get_xticklabels()]
    ['3', '7', '9']
    """
    if isinstance(history, np.ndarray):
        values, steps, title = history, np.arange(history.shape[0]), name or "values"
        values = np.asarray(values, np.float64).reshape(values.shape[0], -1)
        measured = ~np.isnan(values).all(axis=1)
        values, steps = values[measured][-last:], steps[measured][-last:]
    else:
        history = _history(history)
        if name is None:  # the first per-unit metric
            name = next((k for k in history.names if history.measured(k, 1)[1].ndim == 2), None)
        _require(
            [name] if name else [],
            "per-unit (dh/dy, dh/dh) records",
            f"Unavailable with this algorithm: {history.meta.get('unavailable', [])}. "
            "Pass a (steps, units) array instead: jacobian_heatmap(array).",
        )
        steps, values = history.measured(name, last)
        values, title = (
            np.asarray(values, np.float64).reshape(len(steps), -1),
            _title(history, name),
        )
    limit = trim_outliers(values, quantile)
    fig, axes = (ax.figure, [ax]) if ax is not None else _figure()
    image = axes[0].imshow(
        values.T,
        aspect="auto",
        cmap=DIVERGING_CMAP,
        vmin=-limit,
        vmax=limit,
        interpolation="nearest",
        origin="lower",
    )
    ticks = _column_ticks(len(steps))
    axes[0].set_xticks(ticks, [str(int(steps[i])) for i in ticks])
    fig.colorbar(image, ax=axes[0], label=f"clipped at ±{limit:.3g} (q={quantile})")
    axes[0].set(xlabel="measured step", ylabel="unit", title=title)
    return fig


def _column_ticks(columns: int, most: int = 6) -> list[int]:
    """Column indices to label: all of a few columns, else ``most`` evenly spread ones."""
    if columns <= most:
        return list(range(columns))
    return sorted({round(i * (columns - 1) / (most - 1)) for i in range(most)})


def fidelity(history: Any, *, ax: Any = None) -> Any:
    """Gradient fidelity checkpoints: cosine similarity and relative error vs BPTT."""
    history = _history(history)
    _require(
        history.fidelity,
        "fidelity checkpoints",
        "Create the session with fidelity_every=K (e.g. 50) to measure them.",
    )
    steps = [f["step"] for f in history.fidelity]
    fig, axes = (ax.figure, [ax]) if ax is not None else _figure()
    # None (a window without gradient: undefined) is drawn as a gap
    cosine = np.array([f["cosine"] for f in history.fidelity], dtype=float)
    rel_error = np.array([f["rel_error"] for f in history.fidelity], dtype=float)
    axes[0].plot(steps, cosine, "o-", color="C2", label="cosine")
    axes[0].plot(steps, rel_error, "s--", color="C3", label="relative error")
    axes[0].axhline(1.0, color="grey", lw=0.5)
    axes[0].set(xlabel="step", ylabel="vs BPTT", title=_title(history, "gradient fidelity"))
    axes[0].legend(loc="best", fontsize="small")
    return fig


def gradient_norms(history: Any, *, log: bool = True, ax: Any = None) -> Any:
    """Online gradient norm per parameter over time."""
    history = _history(history)
    norms = history.kind("grad_norm")
    _require(norms, "gradient norms", "Step the session first.")
    fig, axes = (ax.figure, [ax]) if ax is not None else _figure()
    for index, (name, values) in enumerate(norms.items()):
        steps, measured = _measured(history.steps, values)
        axes[0].plot(steps, measured, lw=1.0, color=f"C{index % 10}", label=name)
    if log:
        axes[0].set_yscale("symlog", linthresh=1e-8)
    axes[0].set(xlabel="step", ylabel="‖∇‖", title=_title(history, "gradient norms"))
    axes[0].legend(loc="best", fontsize="x-small")
    return fig


def _title(history: Any, what: str) -> str:
    meta = history.meta
    parts = [meta.get("algorithm"), meta.get("task")]
    return f"{what} — {' / '.join(str(p) for p in parts if p)}" if any(parts) else what


def _mark_failure(ax: Any, history: Any) -> None:
    if history.failure:
        ax.axvline(
            history.failure["step"],
            color="red",
            lw=1,
            ls=":",
            label=f"non-finite at step {history.failure['step']}",
        )


def compare(histories: dict[str, Any], *, smooth: int | None = None, log: bool = False) -> Any:
    """Compare mode's histories (``{algorithm: History}``) overlaid: the loss (trailing mean
    over ``smooth`` steps, default one episode, the raw loss faint, chance dashed), the
    accuracy of a classification task, and the fidelity cosine when it was measured.

    >>> fig = compare({"d_rtrl": session.history, "bptt": other.history})  # doctest: +SKIP
    """
    histories = {
        label: _history(h) for label, h in getattr(histories, "histories", histories).items()
    }
    _require(
        {k: h for k, h in histories.items() if h.num_steps}, "steps", "Step the comparison first."
    )
    measured = any(h.fidelity for h in histories.values())
    classes = all("accuracy/correct" in h for h in histories.values())
    rows = 1 + int(classes) + int(measured)
    fig, axes = _figure(rows, (6.0, 2.8 * rows + 0.4))
    first = next(iter(histories.values()))
    window = _window(first, smooth)
    fidelity_ax = axes[1 + int(classes)] if measured else None
    for k, (label, history) in enumerate(histories.items()):
        colour = f"C{k % 10}"
        values = labelled_loss(history)
        shown = np.isfinite(values)
        axes[0].plot(history.steps[shown], values[shown], color=colour, lw=0.5, alpha=0.2)
        axes[0].plot(history.steps, window_mean(values, window), color=colour, lw=2, label=label)
        if classes:
            mean = window_mean(accuracy_per_step(history), window)
            axes[1].plot(history.steps, mean, color=colour, lw=2, label=label)
        if fidelity_ax is not None and history.fidelity:
            steps = [f["step"] for f in history.fidelity]
            cosine = np.array([f["cosine"] for f in history.fidelity], dtype=float)
            fidelity_ax.plot(steps, cosine, "o-", color=colour, ms=3, label=label)
    _chance(axes[0], first.meta.get("chance_loss"))
    if log:
        axes[0].set_yscale("log")
    axes[0].set(xlabel="step", ylabel="loss", title=f"loss (mean of {window} steps)")
    axes[0].legend(loc="best", fontsize="small")
    if classes:
        _chance(axes[1], first.meta.get("chance_accuracy"))
        axes[1].set_ylim(-0.02, 1.02)
        axes[1].set(xlabel="step", ylabel="accuracy", title=f"accuracy (mean of {window} steps)")
    if fidelity_ax is not None:
        fidelity_ax.set(xlabel="step", ylabel="cosine", title="gradient fidelity vs BPTT")
        fidelity_ax.set_ylim(-0.1, 1.05)
    return fig


def sweep(table: Any, *, metric: str = "cosine") -> Any:
    """A knob sweep (:func:`etp_viz.sweep`'s table): each weight's fidelity ``metric``
    (``"cosine"`` or ``"relative_error"`` vs BPTT) against the knob's value, the mean over
    the seeds drawn (each seed a faint point), and below it the final loss of each value.
    Numbers are placed on a numeric axis, anything else (a decay pair, a name) in order.

    >>> fig = sweep(etp_viz.sweep(None, task, "snap", n=[1, 2], steps=50))  # doctest: +SKIP
    """
    if metric not in ("cosine", "relative_error"):
        raise ValueError(f"metric must be 'cosine' or 'relative_error', got {metric!r}.")
    rows = list(table.rows)
    _require(rows, "rows", "Run the sweep with at least one value and seed.")
    labels = [str(v) for v in table.values]
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in table.values)
    positions = [float(v) for v in table.values] if numeric else list(range(len(labels)))
    where = dict(zip(labels, positions))
    fig, axes = _figure(2, (6.0, 6.0))
    weights = list(dict.fromkeys(row["weight"] for row in rows))
    for k, weight in enumerate(weights):
        colour = f"C{k % 10}"
        mine = [r for r in rows if r["weight"] == weight and r[metric] is not None]
        xs = [where[str(r["value"])] for r in mine]
        axes[0].plot(xs, [r[metric] for r in mine], "o", color=colour, alpha=0.3, ms=4)
        means = _means_by_value(mine, metric, labels)
        axes[0].plot(positions, means, "-", color=colour, lw=1.5, label=weight)
    runs = {(str(r["value"]), r["seed"]): r["final_loss"] for r in rows}
    points = [(where[v], loss) for (v, _), loss in runs.items() if loss is not None]
    if points:
        axes[1].plot(*zip(*points), "o", color="C0", alpha=0.4, ms=4)
    per_value = [
        [loss for (v, _), loss in runs.items() if v == label and loss is not None]
        for label in labels
    ]
    axes[1].plot(positions, [np.mean(x) if x else np.nan for x in per_value], "-", color="C0")
    if metric == "cosine":
        axes[0].axhline(1.0, color="grey", lw=0.5)
    for ax in axes:
        ax.set_xticks(positions, labels)
    what = "cosine" if metric == "cosine" else "relative error"
    axes[0].set(ylabel=f"{what} vs BPTT", title=f"{table.learner}: fidelity per weight")
    axes[0].legend(loc="best", fontsize="x-small")
    axes[1].set(xlabel=table.knob, ylabel="final loss", title=f"final loss on {table.task}")
    return fig


def _means_by_value(rows: list, metric: str, labels: list[str]) -> list[float]:
    out = []
    for label in labels:
        values = [r[metric] for r in rows if str(r["value"]) == label]
        out.append(float(np.mean(values)) if values else np.nan)
    return out
