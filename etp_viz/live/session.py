"""A live online-learning session: step an algorithm, record what moves, stay interruptible.

``Session`` is the engine behind ``etp_viz.show(model, x, task=...)``'s Step/Run/Pause/Reset
buttons, and it works on its own (no browser, no kernel):

>>> import etp_viz
>>> task = etp_viz.tasks.get_task("leaky_integrator")
>>> session = Session(task.suggested_model(), task.example_input(), task=task)
>>> _ = session.step(10)                  # ten online steps, synchronously
>>> len(session.history.loss)             # structured record (numpy)
10
>>> _ = session.run(100)                  # background thread; returns at once
>>> session.pause()                       # honoured between frames
>>> session.save_history("run.npz")       # doctest: +SKIP

One UI frame (``steps_per_frame`` steps) = one jitted call: a ``scan`` over the frame's stacked
data whose body is the forward + trace update, the online gradient, the optax update and the
recording, kept on the device (the loss of every step, the rows of the measured steps). The
frame's data is gathered on the host first (user functions run there, step by step). After
the call the frame's record is pulled to the host in one transfer, appended to
:attr:`Session.history`, and listeners (the widget) are told. A frame is split only at
fidelity checkpoints.

Recording cost: the loss is recorded every step, the heavy metrics (trace norms, df / dh-dh,
gradient and weight-change norms) on every ``record_every``-th step of a frame and its last
(NaN in the history: "not measured"): a frame scans blocks of ``record_every - 1`` plain steps
and one measured step (:mod:`~etp_viz.live.frame_step`). ``'auto'`` frame lengths and measuring
intervals follow the measured step time (:class:`~etp_viz.live.runner.Pacer`). The frame and
the fidelity meter read small typed contexts (:meth:`Session.frame_context`,
:meth:`Session.meter_context`); step / run / pause / reset and :meth:`~Runner.lesson` are
:class:`~etp_viz.live.runner.Runner`'s, shared with compare mode. With a task, :meth:`run`
stops at the recipe's step budget (:attr:`budget`), where the task's lesson ends.

Failures: a frame checks, after its scan, the loss of every step, every measured value,
parameter and hidden state. If one is NaN/inf, the frame is replayed from its start states
with every step checked (one ``all(isfinite)`` per array), which pauses the session at the
failing step and names what went non-finite (:attr:`History.failure`: ``loss``,
``weight/<path>``, ``hidden/<path>``, the heavy metrics). A non-finite trace is caught through
the weights it updates (or on a measured step). The weights keep their last finite values and
the history before the failure is intact. An exception in the user's data or loss function is
stored in :attr:`Session.error`, raised as :class:`UserCodeError` from :meth:`step`, and the
session stays usable (fix it with :meth:`set_loss` / :meth:`set_data`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import brainstate
import jax

from etp_viz.compiler.graph import ETraceGraph
from etp_viz.learn.etp.base import describe_mesh
from etp_viz.learn.influence.tbptt import BPTT
from etp_viz.learn.knobs import learner_options
from etp_viz.learn.registry import DEFAULT_LEARNER, OnlineLearner, name_of

from .fidelity import FidelityMeter, MeterContext, aligned_window
from .frame_data import Episodes, FrameData, check_reference_episodes, gather_frame
from .frame_step import (
    Flight,
    FrameContext,
    build_frame,
    pad_steps,
    replay_pieces,
    restore_states,
    snapshot_states,
    steps_of,
    trim_pack,
)
from .history import History, load_history, summary_text, task_levels
from .lesson import lesson_budget
from .runner import FRAME_SECONDS, FramePieces, Pacer, Runner
from .sources import (
    DataSource,
    SessionParts,
    UserCodeError,
    assemble_session,
    checked_task,
    resolve_loss,
    session_options,
)

__all__ = ["FRAME_SECONDS", "SESSION_OPTIONS", "Session", "UserCodeError", "load_history"]

#: Keyword options of :class:`Session` (and of ``show`` for a live run), with defaults.
SESSION_OPTIONS: dict[str, Any] = {
    "algorithm": DEFAULT_LEARNER,
    "task": None,
    "data": None,
    "loss": None,
    "optimizer": None,
    "learning_rate": None,
    "update": None,
    "decay": 0.9,
    "steps_per_frame": "auto",
    "capacity": 8192,
    "record_every": "auto",
    "fidelity_every": 0,
    "fidelity_window": 20,
    "mesh": None,
    "bptt_window": None,
    "episode_reset": None,
}


class Session(Runner[History]):
    """Online learning of ``model`` on a data stream, with on-device recording.

    Parameters
    ----------
    model : brainstate.nn.Module
        The network (states initialised, or initialised here with ``init_all_states``).
    x : array
        An example input of one step (used to compile the ETrace graph).
    algorithm : str or algorithm instance
        The online learner by name (:data:`~etp_viz.live.sources.LIVE_ALGORITHMS`:
        ``'d_rtrl'``, ``'es_d_rtrl'``, ``'eprop'``, ``'rtrl'``, ``'snap<n>'``, ``'uoro'``,
        ``'ostl_recurrent'``, ``'ostl_feedforward'``, ``'bptt'``) or an instance for options,
        e.g. ``etp_viz.EProp(model, kappa_filter_decay=0.9)``.
    task : teaching task, optional
        ``etp_viz.tasks.*``: gives the data (``step_data(t)``), the loss and the
        :attr:`budget` (its recipe's ``steps``: :meth:`run` stops there; ``run(past_budget=True)``
        goes on, ``session.budget = None`` drops it).
    data : callable or iterable, optional
        ``t -> (x_t, y_t)`` or an iterable of pairs (instead of ``task``).
    loss : callable, optional
        ``(output, target) -> scalar``; default: the task's loss, else MSE.
    optimizer, learning_rate, update : optional
        None: the task's :meth:`~etp_viz.tasks.Task.recipe` (else ``'sgd'``, 1e-2, ``'step'``;
        :func:`~etp_viz.live.sources.apply_recipe`). ``optimizer``: an optax transformation or
        its name; ``update='episode'`` sums the online gradient over each of the task's
        episodes and applies it once (:func:`~etp_viz.live.sources.build_optimizer`).
    decay : float, int or pair
        ES-D-RTRL's ``decay_or_rank``.
    steps_per_frame : int or 'auto'
        Steps between two host syncs (one transfer of the frame's record). ``'auto'``
        (default): from 16 to the power of two whose frame lasts about :data:`FRAME_SECONDS`
        (at most ``capacity``), so the per-frame host work is paid once per ~50 ms.
    capacity : int
        Most steps a frame records on the device before its one host transfer (the bound of
        'auto' frames and of :meth:`step`'s; the loss per step, ~``capacity / record_every`` rows).
    record_every : int or 'auto'
        Heavy metrics (trace norms, df / dh-dh, gradient and weight-change norms) are measured
        on every ``record_every``-th step of a frame (positions ``record_every - 1``,
        ``2 record_every - 1``, ...), on each frame's last step and on a failing step; NaN
        elsewhere. 1 measures every step. ``'auto'`` (default): every 32nd step until a step
        is timed, then about every 2 ms of compute and at least every 32nd step (a power of
        two; every 256th on a ~7 µs step, where a measured step costs several plain ones).
        With power-of-two frames these are the global steps ``t`` with
        ``(t + 1) % record_every == 0`` for a run started at 0 (and each frame's last step).
    fidelity_every, fidelity_window : int
        Every K steps (0: never) compare the online gradient with BPTT over the last window.
    bptt_window : int, optional
        The window of truncated BPTT, ``algorithm='tbptt'`` (:class:`etp_viz.TruncatedBPTT`);
        None: the recipe's. ``algorithm='bptt'`` is full BPTT over each of the task's episodes
        (:class:`etp_viz.BPTT`, the exact reference).
    episode_reset : bool, optional
        Put every hidden state and the learner's own state (traces, windows) back to their
        start at each episode's first step (steps ``t`` with ``t % task.n_steps == 0``), so an
        episode's loss depends on the weights alone and ``'bptt'`` is its exact gradient.
        None (default): the task's :attr:`~etp_viz.tasks.Task.episodic` (True for the
        teaching tasks); without a task there are no episodes.
    mesh : jax.sharding.Mesh, optional
        Split the batch over the mesh's ``"batch"`` axis (states and traces sharded, weights
        replicated; :mod:`etp_viz.learn.etp.base`); the status line names the devices.
    parts : SessionParts, optional
        Instead of the options: a session already assembled from them
        (:func:`~etp_viz.live.sources.assemble_session`; compare mode builds its sessions so).
    """

    def __init__(
        self, model: Any, x: Any, *, parts: SessionParts | None = None, **options: Any
    ) -> None:
        if parts is None:  # ``parts``: assembled by compare mode (one options check for all)
            opts = session_options(options, SESSION_OPTIONS, "Session")
            parts = assemble_session(model, x, opts)
        elif options:
            raise TypeError(f"Session(parts=...) takes no other option, got {sorted(options)}")
        super().__init__()
        opts = self.options = parts.options
        self.model = model
        self.example_input = x
        self.data, self.loss_fn, self.optimizer = parts.data, parts.loss, parts.optimizer
        self.algorithm: OnlineLearner = parts.algorithm
        self.probe, self.recorder = parts.probe, parts.recorder
        self.params = self.probe.param_states
        self._pacer = Pacer(opts["steps_per_frame"], opts["record_every"], self.recorder.capacity)
        task = checked_task(opts["task"])
        self.budget = lesson_budget(task)  # run() stops where the task's lesson ends
        self._states_cache: list[brainstate.State] | None = None
        self._initial_values = {id(s): (s, s.value) for s in self._all_states()}
        #: the episode resets (None: one continuing stream)
        self.episodes = Episodes.of(task, opts["episode_reset"], self._initial_values.values())
        if isinstance(self.algorithm, BPTT):  # the exact reference needs the task's episodes
            check_reference_episodes(self.algorithm.episode, self.episodes)
        #: compiled frames by (careful, record_every)
        self._frames: dict[tuple[bool, int], Callable[..., Any]] = {}
        self._lengths = FramePieces()  # the padded lengths each fast frame is compiled for
        #: frames dispatched and not landed yet, oldest first
        self._flights: deque[Flight] = deque()
        #: ``(first step, FrameData)`` gathered ahead while the device ran the previous frame
        self._prefetched: tuple[int, FrameData] | None = None
        self._chunk_start = 0
        self._history = History(meta=self._meta())
        self._fidelity: FidelityMeter | None = None
        if int(opts["fidelity_every"]) > 0:
            window, every = aligned_window(
                int(opts["fidelity_window"]),
                int(opts["fidelity_every"]),
                self.episodes.length if self.episodes is not None else None,
            )
            self._fidelity = FidelityMeter(self.meter_context(), window, every)
        self._reset_counters()

    # -- state -----------------------------------------------------------------------------
    def _all_states(self) -> list[brainstate.State]:
        """Every state of the model and the algorithm (walked once: frames snapshot them)."""
        if self._states_cache is not None:
            return self._states_cache
        states: dict[int, brainstate.State] = {}
        for owner in (self.model, self.algorithm):
            try:
                for state in brainstate.graph.states(owner).values():
                    states[id(state)] = state
            except Exception:  # noqa: BLE001 - an instance without brainstate states
                continue
        self._states_cache = list(states.values())
        return self._states_cache

    def _reset_counters(self) -> None:
        self.step_count = 0
        self.ring = self.recorder.init(rows=False)  # frames hand their rows over themselves
        param_values = {name: state.value for name, state in self.params.items()}
        self.opt_state = self.optimizer.init(param_values)

    def _meta(self) -> dict[str, Any]:
        graph = self.algorithm.graph  # an influence learner's StepGraph (ETP refused) has none
        etp_relations = graph.hidden_param_op_relations if isinstance(graph, ETraceGraph) else ()
        return {
            # the registry's canonical name ('D-RTRL' -> 'd_rtrl'); a user's own learner: its class
            "algorithm": name_of(self.algorithm) or type(self.algorithm).__name__,
            "learner_options": learner_options(self.algorithm),  # {"feedback": "random"}
            "task": type(self.data.data).__name__ if self.data.kind == "task" else self.data.kind,
            "model": type(self.model).__name__,
            "device": describe_mesh(self.algorithm.mesh),
            "params": list(self.params),
            "traces": list(self.probe.trace_states),
            "unavailable": list(self.probe.unavailable),
            "relations": dict(self.probe.relation_names),
            "num_relations": len(etp_relations),
            "steps_per_frame": "auto" if self._pacer.auto_frames else self.steps_per_frame,
            "record_every": "auto" if self._pacer.auto_every else self.record_every,
            **task_levels(checked_task(self.options["task"])),
        }

    @property
    def steps_per_frame(self) -> int:
        """Steps per UI frame (one jitted call, one host sync). Setting it turns 'auto' off."""
        return self._pacer.steps_per_frame

    @steps_per_frame.setter
    def steps_per_frame(self, value: int) -> None:
        self._pacer.steps_per_frame = max(1, int(value))
        self._pacer.auto_frames = False

    @property
    def record_every(self) -> int:
        """Steps between two measurements of the heavy metrics in a frame (see the class
        docstring). Setting it turns 'auto' off; the next frame compiles once for it."""
        return self._pacer.record_every

    @record_every.setter
    def record_every(self, value: int) -> None:
        self._pacer.record_every = max(1, int(value))
        self._pacer.auto_every = False

    @property
    def position(self) -> int:
        return int(self.step_count)

    @property
    def halted(self) -> bool:
        """True after a non-finite step (see ``history.failure``); :meth:`reset` clears it."""
        return self._history.failure is not None

    @property
    def history(self) -> History:
        """Everything recorded so far (landed frames appended, measured rows kept: History)."""
        return self._history

    @property
    def compiled_frames(self) -> int:
        """Frame programs compiled so far (compare mode does not time a step that compiled)."""
        return len(self._frames) + self._lengths.programs

    @property
    def fidelity_window(self) -> int | None:
        """Steps of the fidelity meter's window (whole episodes on an episodic task) or None."""
        return self._fidelity.window if self._fidelity is not None else None

    @property
    def fidelity_seconds(self) -> float:
        """Wall seconds spent measuring fidelity so far (0 when the meter is off)."""
        return self._fidelity.seconds if self._fidelity is not None else 0.0

    # -- the typed contexts of the frame and the fidelity meter ----------------------------
    def frame_context(self) -> FrameContext:
        """What a jitted frame reads (:func:`~etp_viz.live.frame_step.build_frame`)."""
        return FrameContext(
            algorithm=self.algorithm,
            params=self.params,
            probe=self.probe,
            recorder=self.recorder,
            optimizer=self.optimizer,
            loss_fn=self.loss_fn,
            chunk_start=lambda: self._chunk_start,
            record_every=self.record_every,
            episode_reset=self.episodes.reset_where if self.episodes is not None else None,
        )

    def meter_context(self) -> MeterContext:
        """What the fidelity meter reads (:class:`~etp_viz.live.fidelity.FidelityMeter`)."""
        return MeterContext(
            algorithm=self.algorithm,
            model=self.model,
            params=self.params,
            loss_fn=self.loss_fn,
            states=self._all_states,
            episodes=self.episodes,
        )

    # -- user code -------------------------------------------------------------------------
    def set_loss(self, loss: Callable) -> None:
        """Replace the loss (recompiles the step on the next call) and clear the error."""
        with self.recompiling():
            self.loss_fn = resolve_loss(loss, None)
            if self._fidelity is not None:
                self._fidelity.rebind(self.meter_context())
            self.error = None

    def set_data(self, data: Any) -> None:
        """Replace the data source (the step counter goes on) and clear the error."""
        with self._lock:
            self.data = DataSource(data)
            self._prefetched = None
            self.error = None

    def replace_learner(self, parts: SessionParts) -> None:
        """Go on from this step with the learner, probe and recorder of ``parts`` (built on
        this model: another knob value, compare mode's ``set_knob``). Weights, hidden states,
        optimizer state, data and history go on; the learner's state starts afresh; the
        frames compile again; :meth:`reset` goes back to the first weights, with it."""
        if parts.algorithm.model is not self.model or self.running:
            raise RuntimeError("replace_learner: pause first; build it on this session's model")
        with self.recompiling():
            model_states = {id(s) for s in brainstate.graph.states(self.model).values()}
            first = {k: v for k, v in self._initial_values.items() if k in model_states}
            self.algorithm, self.probe, self.recorder = parts.algorithm, parts.probe, parts.recorder
            self.params = self.probe.param_states
            self.ring = self.recorder.init(rows=False, start=self.step_count)
            self._states_cache = None
            fresh = {id(s): (s, s.value) for s in self._all_states()}
            self._initial_values = {k: first.get(k, value) for k, value in fresh.items()}
            task, reset = checked_task(self.options["task"]), self.options["episode_reset"]
            self.episodes = Episodes.of(task, reset, self._initial_values.values())
            if self._fidelity is not None:
                self._fidelity.rebind(self.meter_context())
            self._history.meta.update(self._meta())

    # -- the jitted frame ------------------------------------------------------------------
    @contextmanager
    def recompiling(self) -> Iterator[None]:
        """Hold the session's lock while changing what the compiled frames read as a constant
        (the loss, an ES-D-RTRL decay); the frames compile again on the next step.

        >>> with session.recompiling():             # doctest: +SKIP
        ...     session.algorithm.alpha_x, session.algorithm.alpha_f = 0.8, 0.8
        """
        with self._lock:
            try:
                yield
            finally:
                self._frames.clear()
                self._lengths.clear()

    def compiled_frame(self, careful: bool, every: int) -> Callable[..., Any]:
        """The jitted frame (fast or step-checked) measuring every ``every``-th step."""
        key = (careful, every)
        if key not in self._frames:
            self._frames[key] = build_frame(self.frame_context(), careful=careful, every=every)
        return self._frames[key]

    def _run_chunk(self, flight: Flight, xs: Any, ys: Any, n: int, first_step: int) -> None:
        """Dispatch ``n`` stacked steps: a fast-frame call per :class:`FramePieces` piece."""
        frame = self.compiled_frame(False, flight.every)
        done = 0
        for size, padded in self._lengths.cut((False, flight.every), n):
            part = (steps_of(t, done, done + size) for t in (xs, ys))  # past 8192 steps
            part_x, part_y = (xs, ys) if size == n else part
            packed = self._dispatch(frame, part_x, part_y, first_step + done, padded)
            flight.packs.append(trim_pack(packed, size, flight.every))
            flight.chunks.append((part_x, part_y, first_step + done))
            done += size

    def _dispatch(self, frame: Callable, xs: Any, ys: Any, first: int, padded: int = 0) -> Any:
        """``frame`` on the steps from ``first``: padded, with their count (fast) or not."""
        self._chunk_start = first
        n = jax.tree.leaves(xs)[0].shape[0]
        if self.episodes is not None:  # each step's target travels with its episode flag
            ys = (ys, self.episodes.starts(first, n))
        args = (pad_steps(xs, padded), pad_steps(ys, padded), n) if padded else (xs, ys)
        self.ring, self.opt_state, packed = frame(self.ring, self.opt_state, *args)
        return packed

    def _frame_data(self, start: int, n_steps: int) -> FrameData:
        """The data of steps ``start..``: what was prefetched for ``start`` (up to ``n_steps``;
        the rest stays prefetched), else gathered now."""
        prefetched, self._prefetched = self._prefetched, None
        if prefetched is None or prefetched[0] != start:
            return gather_frame(self.data, start, n_steps)
        data, rest = prefetched[1].split(n_steps)
        if rest is not None:
            self._prefetched = (start + data.num_steps, rest)
        return data

    def _launch(self, start: int, n_steps: int, next_steps: int) -> int:
        """Dispatch up to ``n_steps`` steps from ``start`` without waiting for them (a flight),
        then gather the next ``next_steps`` steps' data while the device computes (JAX
        dispatch is asynchronous), so host-side data work overlaps the computation. Returns
        the steps dispatched.

        The flight keeps the states it started from (references, no copies) to replay it
        step-checked if it turns out to have gone non-finite. A failing data call lets the
        steps before it be dispatched, then is raised (the flight is in ``self._flights``).
        With the fidelity meter on, the frame is split at its checkpoints and landed there.
        """
        data = self._frame_data(start, n_steps)
        position = 0
        while position < data.num_steps and not self.halted:
            stop = data.num_steps
            if self._fidelity is not None:
                stop = self._fidelity.next_stop(start, position, data)
            whole = position == 0 and stop == data.num_steps
            xs, ys = (data.xs, data.ys) if whole else data.slice(position, stop)
            saved = (snapshot_states(self._all_states()), self.ring, self.opt_state)
            data_part = FrameData(xs, ys, stop - position, None)
            flight = Flight(start + position, saved, data_part, self.record_every)
            self._flights.append(flight)
            self._run_chunk(flight, xs, ys, stop - position, start + position)
            position = stop
            if self._fidelity is not None and self._fidelity.due(start + position):
                self._land_all()
                if not self.halted:
                    self._history.fidelity.append(self._fidelity.measure(start + position))
        if data.error is not None:
            raise data.error
        if next_steps > 0 and self._prefetched is None and not self._pause_requested.is_set():
            following = start + data.num_steps
            self._prefetched = (following, gather_frame(self.data, following, next_steps))
        return position

    def _land(self) -> int:
        """Wait for the oldest flight, pull its rows (one transfer) into the history; returns
        its steps. A suspect flight (a non-finite value somewhere) is replayed step-checked
        from its start states, and the flights after it are dropped (their data, and what was
        gathered after them, is kept for the next frames: an iterable loses nothing)."""
        flight = self._flights.popleft()
        self.recorder.pending = flight.packs
        rows = self.recorder.drain(self.ring)
        if rows.suspect:
            if self._flights:
                later, self._flights = self._flights, deque()
                parts = [f.data for f in later]
                ahead = self._prefetched
                if ahead is not None and ahead[0] == later[-1].start + later[-1].data.num_steps:
                    parts.append(ahead[1])
                self._prefetched = (later[0].start, FrameData.join(parts))
            saved, self.ring, self.opt_state = flight.snapshot
            restore_states(saved)
            careful = self.compiled_frame(True, flight.every)
            self.recorder.pending = [
                self._dispatch(careful, xs, ys, first)
                for xs, ys, first in replay_pieces(flight.chunks)
            ]
            rows = self.recorder.drain(self.ring)
        before = self.step_count
        self._history.extend(rows.steps, rows.values, rows.measured)
        self.step_count = self.recorder.written
        if rows.failure is not None and self._history.failure is None:
            names = ", ".join(rows.failure["quantities"])
            self._history.failure = {
                **rows.failure,
                "message": (
                    f"Step {rows.failure['step']} produced a non-finite value in: {names}. The "
                    "run was paused; weights keep their last finite values and the history "
                    "before this step is intact (save it with `save_history`). Lower the "
                    "learning rate or check the inputs, then `reset()`."
                ),
            }
            self._pause_requested.set()
        return self.step_count - before

    def _land_all(self) -> None:
        try:
            while self._flights:
                self._land()
        except BaseException:
            self._flights.clear()  # a failed transfer: nothing of those frames is kept
            raise

    def _run_frames(self, n_steps: int | None, frame_size: Callable[[], int]) -> None:
        """Run ``n_steps`` steps (None: until paused) in frames of ``frame_size()`` steps.

        Two frames are in flight: frame k+1 is dispatched before frame k is landed, so the
        per-frame host work (dispatch, the transfer, the history, the listeners) overlaps the
        device instead of leaving it idle. With the fidelity meter on, every frame is landed
        before the next (the meter replays windows from the session's current state).
        """
        depth = 1 if self._fidelity is not None else 2
        first = self.step_count
        started = time.perf_counter()
        try:
            while not self._pause_requested.is_set():
                # steps landed or in flight (a replay drops the flights after it: recounted)
                start = self.step_count + sum(f.data.num_steps for f in self._flights)
                launched = start - first
                if n_steps is not None and launched >= n_steps:
                    break
                todo = following = frame_size()
                if n_steps is not None:
                    todo = min(todo, n_steps - launched)
                    following = min(following, n_steps - launched - todo)
                dispatched = self._launch(start, todo, following)
                if dispatched == 0:
                    break
                while len(self._flights) >= depth:
                    size = self._flights[0].data.num_steps
                    finished = self._land()
                    now = time.perf_counter()
                    self._adapt_frame_size(finished if finished == size else 0, now - started)
                    started = now
                    self._notify("frame")
                    if self.halted:
                        return
        except UserCodeError as error:
            self.error = str(error)
            self._pause_requested.set()
            raise
        finally:
            self._land_all()

    # -- what step / run / reset do (the rest is Runner's) ---------------------------------
    def _advance_now(self, n: int) -> None:
        self._run_frames(n, lambda: self.recorder.capacity)

    def _advance_until_paused(self, n_steps: int | None) -> None:
        self._run_frames(n_steps, lambda: self.steps_per_frame)

    def _result(self) -> History:
        return self.history

    def _lesson_runs(self) -> dict[str, History]:
        return {str(self.history.meta["algorithm"]): self.history}

    def _halted_message(self) -> str:
        return str((self.history.failure or {}).get("message", ""))

    def _adapt_frame_size(self, steps: int, seconds: float) -> None:
        self._pacer.observe(steps, seconds)  # 'auto' frames and measuring (runner.Pacer)

    def _restore(self) -> None:
        """The initial weights, hidden states and traces; history and meter cleared."""
        for state, value in self._initial_values.values():
            state.value = value
        self._reset_counters()
        self.data.restart()
        self._prefetched = None
        self._history.clear()
        if self._fidelity is not None:
            self._fidelity.clear()

    def save_history(self, path: str) -> None:
        """Write :attr:`history` to ``path`` (``.npz``); read it with ``load_history``."""
        self.history.save(path)

    load_history = staticmethod(load_history)

    def summary(self) -> str:
        """A few lines: steps, final loss (an episode average), failure, last fidelity
        (:func:`~etp_viz.live.history.summary_text`); the lesson's score: :meth:`lesson`."""
        return summary_text(self.history, self.error)

    def __repr__(self) -> str:
        state = "running" if self.running else ("halted" if self.halted else "paused")
        return f"<Session {self.history.meta['algorithm']} step={self.step_count} {state}>"
