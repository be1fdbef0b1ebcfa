"""Compare mode: several online learners in lockstep on copies of one model.

``etp_viz.show(model, x, task=..., algorithm=["d_rtrl", "eprop", "snap2", "bptt"])`` runs a
:class:`Comparison`: one :class:`~etp_viz.live.session.Session` per algorithm, each on its own
deep copy of ``model`` taken *before* any step (so all start from the same weights and hidden
states), all reading the same data stream and the same loss. Step/Run/Pause act on all of them:
a round steps every session by the same number of steps, one after the other, so after each
round every session is at the same step (lockstep). ``"bptt"`` is truncated BPTT over
``bptt_window`` steps (:class:`etp_viz.TruncatedBPTT`), the reference line.

Per algorithm it measures what a course compares: the loss, the gradient fidelity against BPTT
(every ``fidelity_every`` steps over ``fidelity_window`` steps; on by default here), the wall
time per step (frames that compiled and the fidelity replays are not counted) and the memory
of the learner's own state (traces, influence matrix or window buffers, in bytes; the model's
own states are the same for all).

With a task, :meth:`~Comparison.run` stops at the recipe's step budget (:attr:`~Comparison.budget`,
as a session's) and :meth:`~Comparison.lesson` scores every learner against the exact reference.

While paused, :meth:`Comparison.set_knob` moves a learner knob (ES-D-RTRL's ``decay``,
truncated BPTT's ``window``, e-prop's ``kappa_filter_decay``, SnAp's ``n``): every learner
that takes it is rebuilt at the current step, the others are untouched.

>>> import etp_viz
>>> task = etp_viz.tasks.get_task("sine")
>>> cmp = Comparison(task.suggested_model(), task.example_input(), task=task,
...                  algorithms=["d_rtrl", "eprop"], fidelity_every=0)
>>> _ = cmp.step(8)
>>> [s.step_count for s in cmp.sessions.values()]
[8, 8]
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import inspect
import statistics
import time
import types
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import brainstate
import numpy as np

from etp_viz.learn.knobs import KNOBS, knobs_of
from etp_viz.learn.registry import (
    LEARNERS,
    REFERENCE_LEARNER,
    learner_bytes,
    resolve,
    spec_of,
    unbuilt_learner,
)

from .history import History
from .lesson import lesson_budget
from .runner import Runner
from .session import SESSION_OPTIONS, Session
from .sources import DataSource, assemble_session, live_algorithm_name, session_options

__all__ = ["COMPARE_OPTIONS", "Comparison", "KnobRecipe", "SharedStream", "learner_state_bytes"]

#: Options of :class:`Comparison` (and of ``show(..., algorithm=[...])``) with defaults: the
#: session options (one value for every algorithm), fidelity on by default.
COMPARE_OPTIONS: dict[str, Any] = {
    **{k: v for k, v in SESSION_OPTIONS.items() if k not in ("algorithm", "mesh")},
    "fidelity_every": 50,
}
#: A round (every algorithm stepped once) of an ``'auto'`` run lasts about this long.
ROUND_SECONDS = 0.1
#: The most steps per round of an 'auto' run.
MAX_ROUND = 1024
#: Per-step times kept per algorithm (the median is shown).
TIMING_WINDOW = 32


class SharedStream:
    """A one-pass iterable read by several sessions: ``t -> (x_t, y_t)`` over a cache of the
    items not yet read by every reader (``release(t)`` drops what all readers passed).

    >>> stream = SharedStream(iter([(0, 0), (1, 1), (2, 4)]))
    >>> stream(1), stream(0), stream(2)
    ((1, 1), (0, 0), (2, 4))
    """

    def __init__(self, data: Iterable) -> None:
        self.data = data
        self.restart()

    def restart(self) -> None:
        self._iterator = iter(self.data)
        self._cache: dict[int, Any] = {}
        self._next = 0

    def __call__(self, t: int) -> Any:
        while self._next <= t:
            self._cache[self._next] = next(self._iterator)
            self._next += 1
        if t not in self._cache:
            raise IndexError(f"step {t} of a one-pass iterable was already released")
        return self._cache[t]

    def release(self, before: int) -> None:
        for t in [t for t in self._cache if t < before]:
            del self._cache[t]


def learner_state_bytes(algorithm: Any, model: Any) -> int:
    """Bytes of the states an online learner keeps beside its model's own (traces, the
    influence matrix, a window buffer): :func:`etp_viz.learn.registry.learner_bytes`."""
    return sum(learner_bytes(algorithm).values())


@dataclasses.dataclass(frozen=True)
class KnobRecipe:
    """How compare mode rebuilds one learner with a knob moved:
    ``factory(model, **options, **{spelling[knob]: value})`` through the registry's
    :func:`~etp_viz.learn.registry.resolve`. ``spelling``: the knobs that can move, by the
    factory's parameter names (a factory whose parameters do not name a knob, such as
    ``lambda m: etp_viz.SnAp(m, n=3)``, cannot have it moved)."""

    factory: Callable[..., Any]
    options: dict[str, Any]
    spelling: dict[str, str]

    @classmethod
    def of(cls, algorithm: Any, learner: Any) -> KnobRecipe:
        """The recipe of ``learner``, built from ``algorithm`` (a registered name: the
        registry's factory with the learner's knob values; a class or a factory: itself)."""
        takes = knobs_of(learner)
        if isinstance(algorithm, str):
            return cls(spec_of(algorithm).factory, dict(takes), {k: k for k in takes})
        parameters = _parameters(algorithm)
        spelling = {}
        for knob in takes:
            named = [p for p in KNOBS[knob].parameters if p in parameters]
            if named:
                spelling[knob] = named[0]
        return cls(algorithm, {}, spelling)

    def build(self, model: Any, change: dict[str, Any]) -> Any:
        """The learner of ``model`` with the knobs of ``change`` at their new values."""
        return resolve(model, self.factory, self._options(change), where="set_knob")

    def moved(self, change: dict[str, Any]) -> KnobRecipe:
        """This recipe with ``change`` kept (the next move starts from it)."""
        return dataclasses.replace(self, options=self._options(change))

    def _options(self, change: dict[str, Any]) -> dict[str, Any]:
        return {**self.options, **{self.spelling[k]: v for k, v in change.items()}}


def _parameters(factory: Any) -> set[str]:
    """The keyword parameters a factory takes (a class: its ``__init__``'s, as brainstate's
    metaclass hides them; a partial binding positional arguments: none, to be safe)."""
    if isinstance(factory, functools.partial):
        return set() if factory.args else _parameters(factory.func)
    target = _constructor(factory) if isinstance(factory, type) else factory
    try:
        return set(inspect.signature(target).parameters)
    except (TypeError, ValueError):  # a callable without a signature: nothing moves
        return set()


def _constructor(cls: type[Any]) -> Any:
    return cls.__init__


def _label(algorithm: Any) -> str:
    if isinstance(algorithm, str):
        return live_algorithm_name(algorithm)
    target = algorithm.func if isinstance(algorithm, functools.partial) else algorithm
    named = isinstance(target, type | types.FunctionType | types.MethodType)
    name = target.__name__ if named else type(algorithm).__name__
    return "custom" if name == "<lambda>" else str(name).lower()


def _check_algorithms(algorithms: Any) -> list[Any]:
    if isinstance(algorithms, str) or not isinstance(algorithms, list | tuple):
        raise TypeError(
            "Compare mode takes a list of algorithms, e.g. algorithm=['d_rtrl', 'eprop', "
            f"'snap2', 'bptt']; got {algorithms!r}."
        )
    if not algorithms:
        raise ValueError("Compare mode needs at least one algorithm, e.g. ['d_rtrl', 'bptt'].")
    why = "compare mode builds each learner on its own copy of the model"
    for algorithm in algorithms:
        unbuilt_learner(algorithm, "Compare mode", why)
    return list(algorithms)


class Comparison(Runner[dict[str, History]]):
    """Several online learners run in lockstep from the same initial model (module docstring).

    Parameters
    ----------
    model : brainstate.nn.Module
        Copied once per algorithm (``copy.deepcopy``) after its states are initialised; the
        original is not stepped.
    x : array
        An example input of one step.
    algorithms : list
        Live names (``'d_rtrl'``, ``'es_d_rtrl'``, ``'eprop'``, ``'rtrl'``, ``'snap<n>'``,
        ``'uoro'``, ``'ostl_recurrent'``, ``'ostl_feedforward'``, ``'bptt'``) or factories
        ``model -> learner`` (a class such as ``etp_viz.SnAp``, a ``functools.partial``, a
        lambda). Labels are the names (a factory: its ``__name__``), numbered when repeated.
    **options
        :data:`COMPARE_OPTIONS`: ``task`` or ``data``, ``loss``, ``optimizer``,
        ``learning_rate``, ``decay``, ``bptt_window``, ``steps_per_frame`` (steps per round;
        'auto': a round lasts about :data:`ROUND_SECONDS`), ``fidelity_every`` (default 50),
        ``fidelity_window``, ... — one value for every algorithm.
    """

    def __init__(self, model: Any, x: Any, algorithms: Any, **options: Any) -> None:
        super().__init__()
        # checked once, the task's recipe filled in once: one value for every algorithm
        opts = session_options(options, COMPARE_OPTIONS, "Comparison")
        algorithms = _check_algorithms(algorithms)
        if not any(True for _ in model.states(brainstate.HiddenState).values()):
            brainstate.nn.init_all_states(model)
        self.model = model
        self.example_input = x
        self.options = opts
        self.budget = lesson_budget(opts["task"])  # run() stops where the task's lesson ends
        spf = opts["steps_per_frame"]
        self.auto_round = spf == "auto"
        self.steps_per_round = 16 if self.auto_round else max(1, int(spf))
        self.stream: SharedStream | None = None
        if opts["data"] is not None and DataSource(opts["data"]).kind == "iterable":
            self.stream = SharedStream(opts["data"])
            opts = {**opts, "data": self.stream}
        session_opts = {k: opts.get(k, default) for k, default in SESSION_OPTIONS.items()}
        session_opts["steps_per_frame"] = "auto"  # frames inside a session's step(n)
        self._session_options = session_opts
        labels = [_label(a) for a in algorithms]
        self.sessions: dict[str, Session] = {}
        self._recipes: dict[str, KnobRecipe] = {}
        for label, algorithm in zip(labels, algorithms):
            seen = sum(1 for k in self.sessions if k.split("#")[0] == label)
            if seen:  # a repeated algorithm: d_rtrl, d_rtrl#2, ...
                label = f"{label}#{seen + 1}"
            clone = copy.deepcopy(model)
            learner = algorithm if isinstance(algorithm, str) else algorithm(clone)
            try:
                parts = assemble_session(clone, x, {**session_opts, "algorithm": learner})
                self.sessions[label] = Session(clone, x, parts=parts)
            except Exception as error:
                raise type(error)(f"compare mode, algorithm {label!r}: {error}") from error
            self._recipes[label] = KnobRecipe.of(algorithm, parts.algorithm)
        self.labels = list(self.sessions)
        self._times: dict[str, deque[float]] = {k: deque(maxlen=TIMING_WINDOW) for k in self.labels}
        self.state_bytes = {
            k: learner_state_bytes(s.algorithm, s.model) for k, s in self.sessions.items()
        }

    # -- state ---------------------------------------------------------------------------
    @property
    def step_count(self) -> int:
        """The step every running session has reached (the slowest, after a failure)."""
        counts = [s.step_count for s in self.sessions.values() if not s.halted]
        return min(counts) if counts else max(s.step_count for s in self.sessions.values())

    @property
    def position(self) -> int:
        return int(self.step_count)

    @property
    def halted(self) -> bool:
        """True when every session is halted on a non-finite value."""
        return all(s.halted for s in self.sessions.values())

    @property
    def histories(self) -> dict[str, History]:
        """``{label: History}``."""
        return {k: s.history for k, s in self.sessions.items()}

    # -- user code -----------------------------------------------------------------------
    def set_loss(self, loss: Callable) -> None:
        """Replace every algorithm's loss (after a :class:`UserCodeError`) and clear the error."""
        for session in self.sessions.values():
            session.set_loss(loss)
        self.error = None

    def set_data(self, data: Any) -> None:
        """Replace the data stream of every algorithm (a one-pass iterable is shared); the
        step counters go on."""
        self.stream = None
        if DataSource(data).kind == "iterable":
            self.stream = data = SharedStream(data)
        for session in self.sessions.values():
            session.set_data(data)
        self.error = None

    # -- knobs ---------------------------------------------------------------------------
    def knobs(self) -> dict[str, dict[str, Any]]:
        """``{knob: {label: value}}``: each knob (:data:`~etp_viz.learn.knobs.KNOBS`) that some
        learner here takes, with its value on each such learner (a learner given as a factory
        whose parameters do not name the knob is left out: its knob cannot move)."""
        found: dict[str, dict[str, Any]] = {}
        for label, session in self.sessions.items():
            movable = self._recipes[label].spelling
            for name, value in knobs_of(session.algorithm).items():
                if name in movable:
                    found.setdefault(name, {})[label] = value
        return {name: found[name] for name in KNOBS if name in found}

    def set_knob(self, **knobs: Any) -> dict[str, dict[str, Any]]:
        """Move learners' knobs while paused: ``comparison.set_knob(decay=0.5)``.

        Every learner that takes a knob (ES-D-RTRL's ``decay``, truncated BPTT's ``window``,
        e-prop's ``kappa_filter_decay``, SnAp's ``n``: :meth:`knobs`) is rebuilt with the new
        value on its own model at the current step, and its next frame compiles again: its
        weights, hidden states, optimizer state and history go on, its own state (traces,
        influence matrix, window) starts afresh. The other learners are untouched and all stay
        in lockstep. :meth:`reset` goes back to the first weights with the knobs as set. Labels
        keep the names the learners were given (``snap2`` moved to ``n=3`` is still
        ``snap2``); :meth:`knobs` and :meth:`rows` say the values. Listeners get ``'knob'``.

        Raises RuntimeError while running, TypeError for an unknown knob (or a value that is
        not a number), ValueError for a knob no learner here takes or a value out of its
        range; nothing changes then. Returns :meth:`knobs`.
        """
        if self.running:
            raise RuntimeError(
                "set_knob: pause the comparison first (comparison.pause()); a knob rebuilds "
                "its learners between two rounds."
            )
        offered = self.knobs()
        if not knobs:
            raise TypeError(
                "set_knob takes knob=value, e.g. set_knob(decay=0.5); this comparison's "
                f"knobs: {list(offered) or 'none'}."
            )
        values = {name: self._checked_knob(name, value, offered) for name, value in knobs.items()}
        with self.lock:  # every learner is built before any session changes
            rebuilt = {}
            for label, session in self.sessions.items():
                change = {k: v for k, v in values.items() if label in offered[k]}
                if change:
                    rebuilt[label] = self._rebuilt(label, session, change)
            for label, (parts, recipe) in rebuilt.items():
                session = self.sessions[label]
                session.replace_learner(parts)
                self._recipes[label] = recipe
                self.state_bytes[label] = learner_state_bytes(parts.algorithm, session.model)
                self._times[label].clear()
        self._notify("knob")
        return self.knobs()

    def _checked_knob(self, name: str, value: Any, offered: dict[str, Any]) -> Any:
        knob = KNOBS.get(name)
        if knob is None:
            close = difflib.get_close_matches(name, list(KNOBS), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise TypeError(
                f"set_knob: unknown knob {name!r}.{hint} The knobs: {list(KNOBS)}; this "
                f"comparison's: {list(offered) or 'none'}."
            )
        if name not in offered:
            takers = [spec.name for spec in LEARNERS.values() if name in spec.options]
            raise ValueError(
                f"set_knob: no learner of this comparison ({', '.join(self.labels)}) takes "
                f"{name!r}: it is an option of {takers}, given by name, class or "
                f"functools.partial. This comparison's knobs: {list(offered) or 'none'}."
            )
        try:
            return knob.check(value)
        except (TypeError, ValueError) as error:
            raise type(error)(f"set_knob: {error}") from None

    def _rebuilt(
        self, label: str, session: Session, change: dict[str, Any]
    ) -> tuple[Any, KnobRecipe]:
        """The parts of ``session`` with its learner rebuilt with ``change``, and the recipe
        that keeps it (nothing of the session changes here)."""
        recipe = self._recipes[label]
        options = {**self._session_options, "data": session.data.data}
        try:
            learner = recipe.build(session.model, change)
            options["algorithm"] = learner
            parts = assemble_session(session.model, self.example_input, options)
        except Exception as error:
            raise type(error)(f"set_knob: algorithm {label!r} with {change}: {error}") from error
        return parts, recipe.moved(change)

    # -- stepping ------------------------------------------------------------------------
    def _advance(self, session: Session, label: str, n: int) -> tuple[bool, float]:
        """Step one session ``n`` steps and time it (not when a frame compiled; the fidelity
        replays subtracted). Returns (compiled a frame, seconds spent measuring fidelity)."""
        frames, measured = session.compiled_frames, session.fidelity_seconds
        began = time.perf_counter()
        session.step(n)
        seconds = time.perf_counter() - began
        fidelity = session.fidelity_seconds - measured
        compiled = session.compiled_frames != frames
        if not compiled and n > 0:
            self._times[label].append(max(seconds - fidelity, 0.0) / n)
        return compiled, fidelity

    def _round(self, n: int) -> tuple[bool, float]:
        """Every session that is not halted to step ``target = max step + n`` (lockstep; a
        session left behind by an error catches up first). Returns (a frame compiled,
        seconds spent measuring fidelity)."""
        active = {k: s for k, s in self.sessions.items() if not s.halted}
        compiled, fidelity = False, 0.0
        if not active:
            return compiled, fidelity
        target = max(s.step_count for s in active.values()) + n
        for label, session in active.items():
            todo = target - session.step_count
            if todo > 0:
                did_compile, seconds = self._advance(session, label, todo)
                compiled, fidelity = compiled or did_compile, fidelity + seconds
        if self.stream is not None:
            self.stream.release(min(s.step_count for s in active.values()))
        return compiled, fidelity

    # -- what step / run / reset do (the rest is Runner's: module docstring) ---------------
    def _advance_now(self, n: int) -> None:
        """``n`` steps of every algorithm in rounds of :attr:`steps_per_round` (every
        algorithm at the same step after each). A session halted on a non-finite value stays
        where it failed (the others go on); an error in the data or loss (shared by all) is
        raised as :class:`UserCodeError`."""
        done = 0
        while done < n:  # rounds of steps_per_round: the repeats are timed
            size = min(self.steps_per_round, n - done)
            self._round(size)
            done += size
        self.error = None

    def _advance_until_paused(self, n_steps: int | None) -> None:
        """Rounds until paused (or ``n_steps`` steps); 'auto' rounds adapt their size."""
        done = 0
        while not self._pause_requested.is_set() and not self.halted:
            size = self.steps_per_round
            if n_steps is not None:
                size = min(size, n_steps - done)
                if size <= 0:
                    break
            began = time.perf_counter()
            compiled, fidelity = self._round(size)
            done += size
            if not compiled and size == self.steps_per_round:
                self._adapt(size, time.perf_counter() - began - fidelity)
            self._notify("frame")

    def _result(self) -> dict[str, History]:
        return self.histories

    def _lesson_runs(self) -> dict[str, History]:
        return self.histories

    def _lesson_reference(self) -> str | None:
        return REFERENCE_LEARNER if REFERENCE_LEARNER in self.sessions else None

    def _adapt(self, size: int, seconds: float) -> None:
        """'auto' rounds: towards the power of two of steps that makes a round last about
        :data:`ROUND_SECONDS`, one factor of two per round (each new size compiles once)."""
        if not self.auto_round or seconds <= 0:
            return
        best = size * ROUND_SECONDS / seconds
        if best >= 2 * size:
            self.steps_per_round = min(size * 2, MAX_ROUND)
        elif best < size / 2:
            self.steps_per_round = max(size // 2, 1)

    def _restore(self) -> None:
        """Every session back to the shared initial weights and states; histories cleared."""
        if self.stream is not None:
            self.stream.restart()
        for session in self.sessions.values():
            session.reset()
        for times in self._times.values():
            times.clear()

    def _halted_message(self) -> str:
        messages = [(s.history.failure or {}).get("message", "") for s in self.sessions.values()]
        return "Every algorithm is halted; reset() to start again.\n" + messages[0]

    # -- what is compared ----------------------------------------------------------------
    def costs(self) -> dict[str, dict[str, Any]]:
        """Per algorithm: ``ms_per_step`` (median of the timed rounds; None before one),
        ``state_bytes`` (the learner's own state)."""
        return {
            k: {
                "ms_per_step": 1e3 * statistics.median(t) if (t := self._times[k]) else None,
                "state_bytes": self.state_bytes[k],
            }
            for k in self.labels
        }

    def rows(self, last: int = 50) -> list[dict[str, Any]]:
        """One row per algorithm: step, mean loss of the ``last`` steps, mean fidelity of its
        checkpoints (cosine and relative error; windows without gradient skipped), cost,
        halted, failure message, its knobs (``{knob: value}``)."""
        out = []
        costs = self.costs()
        for label, session in self.sessions.items():
            history = session.history
            loss = np.asarray(history.loss[-last:], np.float64) if history.num_steps else None
            fidelity = [f for f in history.fidelity if f.get("cosine") is not None]
            out.append(
                {
                    "algorithm": label,
                    "step": int(session.step_count),
                    "loss": float(np.nanmean(loss)) if loss is not None and loss.size else None,
                    "cosine": _mean([f["cosine"] for f in fidelity]),
                    "rel_error": _mean([f["rel_error"] for f in fidelity]),
                    **costs[label],
                    "halted": session.halted,
                    "failure": (history.failure or {}).get("message"),
                    "knobs": knobs_of(session.algorithm),
                }
            )
        return out

    def table(self, last: int = 50) -> str:
        """The rows as an aligned text table (what a notebook prints)."""
        header = f"{'algorithm':<18}{'step':>7}{'loss':>11}{'cosine':>8}{'rel.err':>9}"
        header += f"{'ms/step':>9}{'state':>11}"
        lines = [header]
        for row in self.rows(last):
            lines.append(
                f"{row['algorithm']:<18}{row['step']:>7}{_fmt(row['loss'], '.4g'):>11}"
                f"{_fmt(row['cosine'], '.3f'):>8}{_fmt(row['rel_error'], '.3f'):>9}"
                f"{_fmt(row['ms_per_step'], '.3g'):>9}{format_bytes(row['state_bytes']):>11}"
                + ("  halted" if row["halted"] else "")
            )
        return "\n".join(lines)

    def __repr__(self) -> str:
        state = "running" if self.running else "paused"
        return f"<Comparison {self.labels} step={self.step_count} {state}>"


def _mean(values: list) -> float | None:
    return float(np.mean(values)) if values else None


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_bytes(n: int) -> str:
    """``1536`` → ``'1.5 KiB'``.

    >>> format_bytes(512), format_bytes(3 * 2**20)
    ('512 B', '3.0 MiB')
    """
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"  # pragma: no cover
