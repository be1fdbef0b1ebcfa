r"""Sweeps: one learner's knob over a list of values (and seeds), in one call, as a tidy table.

A learner's fidelity depends on its knobs -- ES-D-RTRL's ``decay``, SnAp's ``n``, truncated
BPTT's ``window``, e-prop's ``kappa_filter_decay`` -- and a course sweeps them.
:func:`sweep` runs, per seed, one :class:`~etp_viz.live.Comparison` (compare mode's engine:
every value of the knob in lockstep on its own copy of one model and one data stream), then
verifies each trained learner against BPTT with
:func:`~etp_viz.live.fidelity.verify_session` (:func:`etp_viz.verify` on the run's last
episode, the explorer's **Verify**). Nothing here computes a gradient, a fidelity, a loss
average, a byte count or a step time: they are verify's, the lesson's
(:func:`~etp_viz.live.episode_scores`) and compare mode's (``Comparison.costs``), so a sweep
prints the numbers a hand-written loop over those functions prints.

Examples
--------
>>> import etp_viz
>>> task = etp_viz.tasks.get_task("leaky_integrator", n_steps=20, batch_size=2)
>>> table = etp_viz.sweep(None, task, "es_d_rtrl", decay=[0.5, 0.9], steps=40)  # doctest: +SKIP
>>> table                                  # doctest: +SKIP
>>> table.plot()                           # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
from collections.abc import Sequence
from typing import Any

import brainstate
import numpy as np

from etp_viz.learn.registry import LEARNERS, LearnerSpec, name_of, resolve, spec_of

__all__ = ["ROUND", "SWEEP_TRAINING_OPTIONS", "SweepTable", "sweep"]

#: The training options a sweep passes on to each run (compare mode's, one value for all);
#: unset ones come from the task's recipe.
SWEEP_TRAINING_OPTIONS = ("optimizer", "learning_rate", "update", "loss", "episode_reset")

#: Steps per lockstep round (compare mode's first round size), or the largest power of two
#: below it that divides ``steps``: every round then has one length, compiled once in the
#: first round (not timed), so the median step time of the others holds no compilation.
ROUND = 16

#: The columns of :meth:`SweepTable.__repr__` and their widths.
_COLUMNS = (
    ("value", 10),
    ("seed", 5),
    ("weight", 0),
    ("claim", 12),
    ("cosine", 9),
    ("rel.err", 9),
    ("final loss", 11),
    ("state", 10),
    ("ms/step", 8),
)


@dataclasses.dataclass
class SweepTable:
    """What :func:`sweep` measured: one row per (knob value, seed, weight leaf).

    Attributes
    ----------
    learner : str
        The registry's name of the learner swept (``"es_d_rtrl"``, ``"snap"``, ...).
    knob : str
        The option swept (``"decay"``, ``"n"``, ``"window"``, ...).
    values : list
        The knob's values, in the order run (JSON-able: a pair is a list).
    seeds : list of int
    steps : int
        Training steps of every run.
    task : str
        The task's name.
    rows : list of dict
        JSON-able, one per (value, seed, weight leaf): ``learner`` (the built learner's name,
        e.g. ``"snap2"``), ``knob``, ``value``, ``seed``, ``weight`` (the leaf's path),
        ``claim`` (exact / approximate / none), ``cosine`` and ``relative_error`` (the online
        gradient vs BPTT on the run's last episode, as :func:`etp_viz.verify` reports them;
        None where not finite), ``verified`` (False where BPTT's gradient is zero there),
        ``contradiction``, ``final_loss`` and ``final_accuracy``
        (:func:`~etp_viz.live.episode_scores`: the loss per scored step over the run's last
        episodes), ``state_bytes`` (the learner's own state), ``ms_per_step`` (compare mode's
        median step time; None for a run of one round), ``steps`` and ``halted``.
    """

    learner: str
    knob: str
    values: list
    seeds: list
    steps: int
    task: str
    rows: list = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Every field, JSON-able (``json.dumps(table.to_json())``)."""
        return dataclasses.asdict(self)

    def to_pandas(self) -> Any:
        """The rows as a ``pandas.DataFrame`` (pandas is optional: an ImportError otherwise)."""
        try:
            import pandas
        except ImportError:
            raise ImportError(
                "SweepTable.to_pandas() needs pandas, which is not installed: "
                "`pip install pandas`. Without it the rows are plain dicts: table.rows."
            ) from None
        return pandas.DataFrame(self.rows)

    def plot(self, *, metric: str = "cosine") -> Any:
        """A matplotlib figure (:func:`etp_viz.plot.sweep`): ``metric`` (``"cosine"`` or
        ``"relative_error"``) of every weight against the knob's value, and the final loss."""
        from etp_viz import plot

        return plot.sweep(self, metric=metric)

    def table(self) -> str:
        """A plain-text table, one line per row."""
        width = max([len("weight"), *(len(row["weight"]) for row in self.rows)])
        widths = [w or width for _, w in _COLUMNS]
        head = f"sweep: {self.learner} {self.knob}={self.values} on {self.task}, "
        head += f"{self.steps} steps, seeds {self.seeds} (fidelity vs BPTT on the last episode)"
        lines = [head, "  ".join(f"{name:<{w}}" for (name, _), w in zip(_COLUMNS, widths))]
        for row in self.rows:
            cells = (
                json.dumps(row["value"]),
                str(row["seed"]),
                row["weight"],
                row["claim"],
                _number(row["cosine"], ".6f"),
                _number(row["relative_error"], ".2e"),
                _number(row["final_loss"], ".4g"),
                _bytes(row["state_bytes"]),
                _number(row["ms_per_step"], ".3g"),
            )
            line = "  ".join(f"{cell:<{w}}" for cell, w in zip(cells, widths)).rstrip()
            if not row["verified"]:
                line += "  (not verified: BPTT's gradient is 0 here)"
            if row["halted"]:
                line += "  (halted: non-finite)"
            lines.append(line)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.table()


def sweep(
    model: Any,
    task: Any,
    learner: str,
    *,
    seeds: Sequence[int] | None = None,
    steps: int | None = None,
    options: dict[str, Any] | None = None,
    training: dict[str, Any] | None = None,
    **knob: Sequence[Any],
) -> SweepTable:
    """Train ``learner`` on ``task`` for each value of one knob (and each seed); measure each.

    Parameters
    ----------
    model : brainstate.nn.Module, callable or None
        The network. A module: every run starts from a copy of it (it is never stepped), so
        the seeds vary the task's data only. A callable ``seed -> module``: a fresh network
        per seed (its states initialised for the task's batch), e.g.
        ``lambda seed: my_net(seed)``. None: the task's :meth:`~etp_viz.tasks.Task.
        suggested_model` of each seed's task (weights drawn from the seed).
    task : etp_viz.tasks.Task or str
        The data, the loss and the recipe (optimizer, learning rate, update mode) of every
        run; a name is :func:`etp_viz.tasks.get_task`'s.
    learner : str
        A registered name (:mod:`etp_viz.learn.registry`, any alias). For SnAp, ``"snap"``
        (or ``"snap<n>"``: the order in the name gives way to the knob ``n``).
    seeds : sequence of int, optional
        Each seed is one run per value: the task with that ``seed`` (its data stream; its
        recipe kept) and, for a ``model`` that is None or a callable, the network's weights.
        Default: the task's own seed.
    steps : int, optional
        Training steps of every run. Default: the task's recipe budget (minutes on the
        teaching tasks; pass a few hundred for a quick sweep).
    options : dict, optional
        The learner's other options, fixed for every run (e.g. ``{"feedback": "random"}``
        while sweeping e-prop's ``kappa_filter_decay``).
    training : dict, optional
        Training options of every run (:data:`SWEEP_TRAINING_OPTIONS`: ``optimizer``,
        ``learning_rate``, ``update``, ``loss``, ``episode_reset``); unset ones come from the
        task's recipe.
    **knob
        Exactly one: the option swept and its values, e.g. ``decay=[0.5, 0.9, 0.99]``
        (``es_d_rtrl``), ``n=[1, 2]`` (``snap``), ``window=[5, 10, 20]`` (``tbptt``),
        ``kappa_filter_decay=[0.0, 0.9]`` (``eprop``). The learner's options are its
        registry entry's (``etp_viz.learn.registry.spec_of(name).options``).

    Returns
    -------
    SweepTable
        ``rows`` (one per value, seed and weight leaf: fidelity vs BPTT, final loss, learner
        state bytes, ms per step), ``to_pandas()``, ``plot()``, a text ``repr``.

    Notes
    -----
    Per seed, the values run in lockstep (:class:`~etp_viz.live.Comparison`, the fidelity
    meter off) in rounds of :data:`ROUND` steps (fewer where that does not divide
    ``steps``: the largest power of two that does; pass a multiple of 16); ``ms_per_step``
    is compare mode's median over the rounds after the first (which compiles), host work
    included. After ``steps`` steps each trained learner is verified against BPTT by
    :func:`~etp_viz.live.fidelity.verify_session` (on an episodic task the last whole
    episode, from the state every episode starts in; else the last 32 steps).

    Examples
    --------
    >>> import etp_viz
    >>> task = etp_viz.tasks.get_task("leaky_integrator", n_steps=20, batch_size=2)
    >>> table = etp_viz.sweep(None, task, "es_d_rtrl", decay=[0.5, 0.9], steps=40)  # doctest: +SKIP
    >>> table.rows[0]["cosine"], table.rows[0]["final_loss"]  # doctest: +SKIP
    >>> etp_viz.sweep(None, task, "snap", n=[1, 2], seeds=[0, 1], steps=40)  # doctest: +SKIP
    """
    spec = _learner_spec(learner)
    name, values = _knob(spec, knob)
    fixed = _fixed_options(spec, name, options)
    run_options = _training(training)
    task = _task(task)
    seed_list = [task.seed] if seeds is None else _seeds(seeds)
    steps = _steps(task, steps)
    rows: list[dict[str, Any]] = []
    for seed in seed_list:
        rows += _run_seed(
            model, _reseeded(task, seed), seed, spec, name, values, fixed, steps, run_options
        )
    return SweepTable(
        learner=spec.name,
        knob=name,
        values=[_plain(v) for v in values],
        seeds=seed_list,
        steps=steps,
        task=str(task.name),
        rows=rows,
    )


# -- one seed: a comparison of the values, then verify each --------------------------------


def _run_seed(
    model: Any,
    task: Any,
    seed: int,
    spec: LearnerSpec,
    knob: str,
    values: list[Any],
    fixed: dict[str, Any],
    steps: int,
    training: dict[str, Any],
) -> list[dict[str, Any]]:
    from etp_viz.live import Comparison, episode_scores
    from etp_viz.live.fidelity import verify_session

    network = _network(model, task, seed)
    factories = [functools.partial(_build_learner, spec, knob, value, fixed) for value in values]
    comparison = Comparison(
        network,
        task.example_input(),
        factories,
        task=task,
        fidelity_every=0,
        steps_per_frame=math.gcd(steps, ROUND),
        **training,
    )
    comparison.step(steps)
    costs = comparison.costs()
    rows = []
    for value, label in zip(values, comparison.labels):
        session = comparison.sessions[label]
        report = verify_session(session, algorithm=session.algorithm)
        scores = episode_scores(session.history)
        run = {
            "learner": name_of(session.algorithm) or spec.name,
            "knob": knob,
            "value": _plain(value),
            "seed": seed,
        }
        for leaf in report.rows:
            measured = leaf.to_json()
            rows.append(
                {
                    **run,
                    "weight": leaf.path,
                    "claim": leaf.claim,
                    "cosine": measured["cosine"],
                    "relative_error": measured["relative_error"],
                    "verified": leaf.verified,
                    "contradiction": leaf.contradiction,
                    "final_loss": scores["loss"],
                    "final_accuracy": scores["accuracy"],
                    "state_bytes": int(costs[label]["state_bytes"]),
                    "ms_per_step": costs[label]["ms_per_step"],
                    "steps": int(session.step_count),
                    "halted": bool(session.halted),
                }
            )
    return rows


def _build_learner(
    spec: LearnerSpec, knob: str, value: Any, fixed: dict[str, Any], model: Any
) -> Any:
    """The learner of one value: the registry's factory, through the one resolver (which
    checks it against the learner contract)."""
    try:
        return resolve(model, spec.factory, {**fixed, knob: value}, where="sweep")
    except (TypeError, ValueError) as error:
        raise type(error)(f"sweep: {spec.name} with {knob}={value!r}: {error}") from error


def _network(model: Any, task: Any, seed: int) -> Any:
    if model is None:
        return task.suggested_model()
    if isinstance(model, brainstate.nn.Module):
        return model  # compare mode copies it for every value
    if callable(model):
        network = model(seed)
        if not isinstance(network, brainstate.nn.Module):
            raise TypeError(
                f"sweep: model({seed}) returned {type(network).__name__}, not a "
                "brainstate.nn.Module; pass a function seed -> module, a module or None."
            )
        return network
    raise TypeError(
        "sweep: model must be a brainstate.nn.Module (copied for every run), a function "
        f"seed -> module (a fresh network per seed) or None (the task's suggested model); "
        f"got {model!r}."
    )


# -- checking the arguments ----------------------------------------------------------------


def _learner_spec(learner: Any) -> LearnerSpec:
    if not isinstance(learner, str):
        raise TypeError(
            f"sweep takes the learner by its registered name (one of {sorted(LEARNERS)}), "
            f"so that the knob can be checked against its options; got {learner!r}."
        )
    try:
        return spec_of(learner)
    except ValueError:
        family = LEARNERS.get(learner.strip().lower())  # a family without its order: SnAp
        if family is None:
            raise
        return family


def _knob(spec: LearnerSpec, knob: dict[str, Any]) -> tuple[str, list[Any]]:
    valid = list(spec.options) or "no options"
    if len(knob) != 1:
        given = f"got {sorted(knob)}" if knob else "got none"
        raise TypeError(
            f"sweep needs exactly one knob of {spec.name!r} and its values ({given}); "
            f"{spec.name!r} takes {valid}. Example: decay=[0.5, 0.9, 0.99] for ES-D-RTRL; "
            "fix the learner's other options with options={...}."
        )
    ((name, values),) = knob.items()
    if name not in spec.options:
        takers = [s.name for s in LEARNERS.values() if name in s.options]
        if not takers:
            every = sorted({option for s in LEARNERS.values() for option in s.options})
            close = difflib.get_close_matches(name, spec.options, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise TypeError(
                f"sweep: unknown knob {name!r} for {spec.name!r}; no learner takes it.{hint} "
                f"{spec.name!r} takes {valid} (the learners' knobs: {every})."
            )
        raise TypeError(
            f"sweep: {spec.name!r} does not take {name!r} (that is an option of {takers}); "
            f"{spec.name!r} takes {valid}."
        )
    if isinstance(values, str | bytes | dict) or not isinstance(values, Sequence | np.ndarray):
        raise TypeError(
            f"sweep: {name}= takes a list of values for {spec.name!r}, got {values!r}; "
            f"e.g. {name}=[{values!r}]."
        )
    values = list(values)
    if not values:
        raise ValueError(
            f"sweep: {name}= is empty: give {spec.name!r} at least one value of {name!r}."
        )
    return name, values


def _fixed_options(spec: LearnerSpec, knob: str, options: Any) -> dict[str, Any]:
    fixed = dict(options or {})
    if knob in fixed:
        raise TypeError(
            f"sweep: {knob!r} is the knob swept; remove it from options= (its values are "
            f"{knob}=[...])."
        )
    unknown = sorted(set(fixed) - set(spec.options))
    if unknown:
        raise TypeError(
            f"sweep: {spec.name!r} got unknown option(s) {unknown} in options=; it takes "
            f"{list(spec.options) or 'none'}."
        )
    return fixed


def _training(training: Any) -> dict[str, Any]:
    options = dict(training or {})
    unknown = sorted(set(options) - set(SWEEP_TRAINING_OPTIONS))
    if unknown:
        raise TypeError(
            f"sweep: unknown training option(s) {unknown}; valid: {list(SWEEP_TRAINING_OPTIONS)}."
        )
    return options


def _task(task: Any) -> Any:
    from etp_viz.tasks import Task, get_task

    if isinstance(task, str):
        return get_task(task)
    if not isinstance(task, Task):
        raise TypeError(
            f"sweep: task must be a teaching task (etp_viz.tasks.get_task(name)) or its name, "
            f"got {task!r}."
        )
    return task


def _seeds(seeds: Any) -> list[int]:
    if isinstance(seeds, int | np.integer):
        seeds = [seeds]
    seed_list = [int(seed) for seed in seeds]
    if not seed_list:
        raise ValueError("sweep: seeds= is empty; give at least one seed, e.g. seeds=[0, 1].")
    return seed_list


def _steps(task: Any, steps: Any) -> int:
    steps = task.recipe().steps if steps is None else steps
    if int(steps) < 1:
        raise ValueError(f"sweep: steps must be a positive number of steps, got {steps!r}.")
    return int(steps)


def _reseeded(task: Any, seed: int) -> Any:
    """``task`` with ``seed`` (its data stream and suggested weights) and the same recipe."""
    if seed == task.seed:
        return task
    recipe = dataclasses.asdict(task.recipe())
    recipe.pop("batch_size")  # the batch is the task's own field (kept by replace)
    return dataclasses.replace(task, seed=seed).with_recipe(**recipe)


# -- small formatting helpers --------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A knob's value as JSON (a pair as a list, numpy numbers as Python ones; else repr)."""
    if isinstance(value, np.generic | np.ndarray):
        value = value.tolist()
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)
    return value


def _number(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _bytes(n: int) -> str:
    from etp_viz.live.compare import format_bytes

    return format_bytes(n)
