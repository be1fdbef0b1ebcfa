r"""The gradient-fidelity meter: how close is the online gradient to BPTT right now?

Every ``K`` steps the session replays the last ``W`` steps twice from the hidden state the
window started in, with the *current* weights and no weight update:

* online: traces zeroed at the window start, the algorithm stepped ``W`` times, its online
  gradients summed: :math:`g_{on} = \sum_t \nabla^{on}_\theta L^t`;
* BPTT: :math:`g_{bptt} = \nabla_\theta \sum_t L^t` through the unrolled window
  (``brainstate.transform.for_loop`` under ``brainstate.transform.grad``).

On an episodic task (the session resets the state at each episode start, see
:class:`~etp_viz.live.frame_data.Episodes`) both replays reset where the run did: the online
one puts the states back at each episode start inside the window, and BPTT's sum is taken over
the window's pieces between episode starts, each from its own start state. BPTT is then the
exact gradient of the window's loss as the run defines it, so the exact reference learner
(``"bptt"``, BPTT over each episode) measures a cosine of 1.

It records :math:`\cos(g_{on}, g_{bptt})` and :math:`\|g_{on} - g_{bptt}\| / \|g_{bptt}\|`,
overall and per parameter. For an exact algorithm on its exact model class (D-RTRL with an
element-wise recurrence) the cosine is 1 up to rounding. All states are restored afterwards,
so measuring does not change the run. The meter reads a :class:`MeterContext` (the learner,
the model, its weights, the loss and every state to restore), not the session.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, cast

import brainstate
import jax
import jax.numpy as jnp
import numpy as np

from etp_viz.learn.registry import DecayingTraces, OnlineLearner, graph_claim_names, spec_of

from .frame_data import gather_frame

__all__ = ["FidelityMeter", "MeterContext", "aligned_window", "compare_gradients", "reference_text"]


def aligned_window(window: int, every: int, episode: int | None) -> tuple[int, int]:
    """``(window, every)`` of a meter. With episodes of ``episode`` steps and a window of at
    least one episode, both are rounded up to whole episodes, so every window starts at an
    episode start and its BPTT is the exact gradient of whole episodes; a shorter window (or
    no episodes) is kept as asked (its BPTT starts from the state at the window's start).

    >>> aligned_window(20, 50, 11), aligned_window(20, 50, 100), aligned_window(20, 50, None)
    ((22, 55), (20, 50), (20, 50))
    """
    if episode is None or episode < 1 or window < episode:
        return int(window), int(every)
    return -(-int(window) // episode) * episode, -(-int(every) // episode) * episode


def reference_text(episode: int | None, window: int) -> str:
    """What the meter's BPTT gradient is, in plain words (panel titles, tooltips, summaries).

    >>> reference_text(11, 22)
    'the exact gradient (BPTT over the last 2 episodes)'
    >>> reference_text(100, 20)
    'BPTT over the last 20 steps'
    """
    if episode and window >= episode and window % episode == 0:
        count = int(window) // int(episode)
        return f"the exact gradient (BPTT over the last {count} episode{'s' * (count > 1)})"
    return f"BPTT over the last {int(window)} steps"


@dataclasses.dataclass(frozen=True)
class MeterContext:
    """What the fidelity meter reads: the session's parts, not the session
    (:meth:`etp_viz.live.session.Session.meter_context`).

    Attributes
    ----------
    algorithm
        The online learner (its traces are zeroed at a window's start).
    model
        The network, called in the BPTT replay; its states are a window's start states.
    params
        The weights both gradients are taken for, ``{path: ParamState}``.
    loss_fn
        ``(output, target) -> scalar``, the session's loss.
    states
        Every state of the model and the learner (saved before a measurement, put back
        after it).
    episodes
        The session's episode resets (:class:`~etp_viz.live.frame_data.Episodes`), or None.
    """

    algorithm: OnlineLearner
    model: brainstate.nn.Module
    params: Mapping[str, brainstate.ParamState]
    loss_fn: Callable[[Any, Any], Any]
    states: Callable[[], list[brainstate.State]]
    episodes: Any = None


def compare_gradients(online: dict, reference: dict) -> dict[str, Any]:
    """Cosine and relative error, overall and per parameter (host floats).

    Where the reference gradient is zero (a window whose loss is masked out) the cosine is
    undefined: None, not 0 (which would read as "orthogonal"), and averages skip it.

    >>> import numpy as np
    >>> r = compare_gradients({"w": np.array([1.0, 0.0])}, {"w": np.array([2.0, 0.0])})
    >>> round(r["cosine"], 6), round(r["rel_error"], 6)
    (1.0, 0.5)
    >>> compare_gradients({"w": np.zeros(2)}, {"w": np.zeros(2)})["cosine"] is None
    True
    """

    def flat(tree: Any) -> np.ndarray:
        leaves = [np.ravel(np.asarray(leaf, np.float64)) for leaf in jax.tree.leaves(tree)]
        return np.concatenate(leaves) if leaves else np.zeros(0)

    def scores(a: np.ndarray, b: np.ndarray) -> dict[str, float | None]:
        norm_a, norm_b = np.linalg.norm(a), np.linalg.norm(b)
        if norm_b == 0:  # nothing to learn in this window (a masked loss): no direction
            return {"cosine": None, "rel_error": None if norm_a == 0 else float(norm_a)}
        cosine = float(a @ b / (norm_a * norm_b)) if norm_a > 0 else 0.0
        return {"cosine": cosine, "rel_error": float(np.linalg.norm(a - b) / norm_b)}

    per_param = {name: scores(flat(online[name]), flat(reference[name])) for name in reference}
    overall = scores(flat(online), flat(reference))
    return {**overall, "per_param": per_param}


class FidelityMeter:
    """Keeps the last window of inputs and the model states at window starts; measures on
    request, every ``every`` steps over the last ``window``. The session splits a frame's scan
    at window starts and checkpoints (see :meth:`next_stop`), the only places where the states
    are on hand."""

    def __init__(self, context: MeterContext, window: int, every: int) -> None:
        if window < 1:
            raise ValueError(f"fidelity_window must be >= 1, got {window}.")
        self.context = context
        self.window = int(window)
        self.every = int(every)
        self.recent: deque[tuple[Any, Any]] = deque(maxlen=self.window)
        self.snapshots: dict[int, list[Any]] = {}
        self._online_grad: Callable[[Any, Any], Any] | None = None
        self._bptt_grad: Callable[[Any, Any], Any] | None = None
        #: wall seconds spent measuring (compare mode subtracts it from the step time)
        self.seconds = 0.0

    @property
    def model_states(self) -> list[brainstate.State]:
        """The model's states now (a ``reset_state`` may have built new State objects)."""
        # no filter: one dict of states (a tuple of them only with several filters)
        states = cast("Mapping[Any, brainstate.State]", self.context.model.states())
        return list(states.values())

    def clear(self) -> None:
        self.recent.clear()
        self.snapshots.clear()

    def rebind(self, context: MeterContext) -> None:
        """Read ``context`` from now on (a new loss): the replays compile again."""
        self.context = context
        self._online_grad = self._bptt_grad = None

    # -- where a frame must stop -----------------------------------------------------------
    def _window_start(self, step: int) -> bool:
        return step >= 0 and (step + self.window) % self.every == 0

    def next_stop(self, frame_start: int, position: int, data: Any) -> int:
        """Where the current chunk of a frame ends: the frame's end, a window start (states
        are snapshotted there: references, no transfer) or a checkpoint. Also remembers the
        pairs the chunk will run (the window's data)."""
        step = frame_start + position
        if self._window_start(step):
            self.snapshots[step] = [s.value for s in self.model_states]
        stop = data.num_steps
        for candidate in range(position + 1, data.num_steps):
            global_step = frame_start + candidate
            if global_step % self.every == 0 or self._window_start(global_step):
                stop = candidate
                break
        for index in range(position, stop):
            self.recent.append(data.pair(index))
        return stop

    def due(self, step_count: int) -> bool:
        """A checkpoint whose window start was snapshotted (not before ``window`` steps)."""
        ready = step_count % self.every == 0 and (step_count - self.window) in self.snapshots
        return ready and len(self.recent) == self.window

    # -- measuring -------------------------------------------------------------------------
    def _build(self) -> tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]:
        context = self.context
        algorithm, model, params, loss_fn = (
            context.algorithm,
            context.model,
            context.params,
            context.loss_fn,
        )

        def online_loss(x_t: Any, y_t: Any) -> Any:
            return jnp.asarray(loss_fn(algorithm(x_t), y_t)).reshape(())

        def bptt_loss(xs: Any, ys: Any) -> Any:
            losses = brainstate.transform.for_loop(
                lambda x_t, y_t: jnp.asarray(loss_fn(model(x_t), y_t)).reshape(()), xs, ys
            )
            return jnp.sum(losses)

        online = brainstate.transform.jit(brainstate.transform.grad(online_loss, params))
        bptt = brainstate.transform.jit(brainstate.transform.grad(bptt_loss, params))
        return online, bptt

    def measure(self, step: int) -> dict[str, Any]:
        """Replay the window both ways; the result (the session appends it to its history's
        ``fidelity``)."""
        began = time.perf_counter()
        try:
            return self._measure(step)
        finally:
            self.seconds += time.perf_counter() - began

    def _measure(self, step: int) -> dict[str, Any]:
        if self._online_grad is None or self._bptt_grad is None:
            self._online_grad, self._bptt_grad = self._build()
        saved = [(state, state.value) for state in self.context.states()]
        start = self.snapshots.pop(int(step) - self.window)
        for old in [s for s in self.snapshots if s < int(step) - self.window]:
            del self.snapshots[old]
        xs = [x for x, _ in self.recent]
        ys = [y for _, y in self.recent]
        first = int(step) - self.window
        episodes = self.context.episodes
        starts = [episodes is not None and episodes.is_start(first + i) for i in range(len(xs))]
        try:
            self._enter_window(start)
            online: Any = None
            for x_t, y_t, fresh in zip(xs, ys, starts):
                if fresh:
                    episodes.reset()
                grads = self._online_grad(x_t, y_t)
                online = grads if online is None else jax.tree.map(jnp.add, online, grads)
            # BPTT over each piece of the window between episode starts (independent pieces
            # when the state is reset there: their gradients add up)
            cuts = [i for i, fresh in enumerate(starts) if fresh and i > 0]
            reference: Any = None
            for lo, hi in zip([0, *cuts], [*cuts, len(xs)]):
                if lo == 0:
                    self._enter_window(start)
                if starts[lo]:
                    episodes.reset()
                stacked_x = jax.tree.map(lambda *a: jnp.stack(a), *xs[lo:hi])
                stacked_y = jax.tree.map(lambda *a: jnp.stack(a), *ys[lo:hi])
                piece = self._bptt_grad(stacked_x, stacked_y)
                reference = piece if reference is None else jax.tree.map(jnp.add, reference, piece)
        finally:
            for state, value in saved:
                state.value = value
        return {"step": int(step), "window": self.window, **compare_gradients(online, reference)}

    def _enter_window(self, start_values: list[Any]) -> None:
        algorithm = self.context.algorithm
        # zero the traces only: the model's states are overwritten just below, and a model
        # reset could build new State objects the session's compiled frames do not read
        algorithm.reset_traces()
        for state, value in zip(self.model_states, start_values):
            state.value = value


# -- verifying a session's own window (the Verify action; headless) ----------------------------

#: Steps of a session's data that a verify without inputs replays (online vs BPTT).
VERIFY_STEPS = 32


def episode_window(session: Any, start: int, steps: int) -> tuple[Any, Any]:
    """Stacked ``(xs, ys)`` of steps ``start .. start + steps - 1`` of a session's data."""
    data = gather_frame(session.data, start, steps)
    if data.error is not None:
        raise data.error
    return data.xs, data.ys


def session_window(session: Any, steps: int) -> tuple[Any, Any]:
    """Stacked ``(xs, ys)`` of the last ``steps`` steps of a session's data stream (its first
    steps before the run got that far): a task or a function of the step can be re-read."""
    if session.data.kind == "iterable":
        raise ValueError(
            "Verify re-reads the session's data, and an iterable cannot be re-read: pass the "
            "data as a function of the step (data=lambda t: (xs[t], ys[t])) or a task, or call "
            "verify(xs, ys) with arrays."
        )
    if steps < 1:
        raise ValueError(f"steps must be a positive number of steps, got {steps}")
    return episode_window(session, max(int(session.step_count) - steps, 0), steps)


def verify_session(
    session: Any, xs: Any = None, ys: Any = None, *, steps: int = VERIFY_STEPS, **options: Any
) -> Any:
    """:func:`etp_viz.verify` of a session's learner, by default on the session's own data.

    Without ``xs``: the last ``steps`` steps of the stream (the first ones before the run has
    gone that far), from the current weights and hidden states, with the session's loss; on an
    episodic task the last whole episode (the first one before the run finished one), from the
    state every episode starts in, which is what the run's gradient is about. The learner is
    the session's: by name with the session's decay where the graph derives its claims,
    else the session's own instance (its states restored afterwards). The run is not changed.

    >>> report = verify_session(session)  # doctest: +SKIP
    >>> report.verdict()                  # doctest: +SKIP
    """
    from etp_viz.learn import verify

    model = session.model
    if "algorithm" not in options:  # a learner given explicitly takes no session decay
        options["algorithm"] = _verify_learner(session, options)
    if xs is not None:
        return verify(model, xs, ys, **options)
    if session.running:
        raise RuntimeError("Pause the run before verifying (the weights are moving).")
    options.setdefault("loss", session.loss_fn)
    episodes = session.episodes
    if episodes is None:
        return verify(model, *session_window(session, steps), **options)
    start = max(session.step_count // episodes.length - 1, 0) * episodes.length
    window = episode_window(session, start, episodes.length)
    saved = [(state, state.value) for state, _ in episodes.states]
    episodes.reset()  # the episode's start state
    try:
        return verify(model, *window, **options)
    finally:
        for state, value in saved:
            state.value = value


def _verify_learner(session: Any, options: dict[str, Any]) -> Any:
    """The learner a session's verify uses: its registry name where the graph derives its
    claims (with the session's decays), else the session's own instance."""
    name = str(session.history.meta.get("algorithm", ""))
    learner = session.algorithm
    if name not in graph_claim_names():  # 'snap2', 'bptt', a user's learner: the instance
        return learner
    if "decay" in spec_of(name).options and isinstance(learner, DecayingTraces):
        options.setdefault("decay", (learner.alpha_x, learner.alpha_f))
    return name


def set_decay(session: Any, decay: Any) -> None:
    """Change a paused session's ES-D-RTRL trace decays (``decay`` as ``ES_D_RTRL``'s
    ``decay_or_rank``); the next frame recompiles (the decays are constants of it)."""
    from etp_viz.learn.etp.trace_math import resolve_decay

    learner = session.algorithm
    if not isinstance(learner, DecayingTraces):
        raise ValueError("`decay` applies to ES-D-RTRL only (algorithm='es_d_rtrl').")
    alphas = resolve_decay(decay)
    if session.running:
        raise RuntimeError("Pause the run before changing the decay.")
    with session.recompiling():  # the decay is a constant of the compiled frame
        learner.alpha_x, learner.alpha_f = alphas
