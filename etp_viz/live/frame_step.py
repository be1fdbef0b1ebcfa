"""The jitted frame of a live session: a loop of (online step, optax update, recorder row).

Two compiled forms of the same frame, chosen by the session:

- **fast** (every frame): a loop over blocks of ``record_every`` steps, each block
  ``record_every - 1`` plain training steps (their rows hold only the loss; the learn hook's
  df / dh-dh record is put back, so XLA drops that summary from them) and one measured step
  (every metric). The number of steps is traced: one program, compiled for a power of two,
  runs every chunk from half of it up, on data padded with zeros it never reads
  (:func:`pad_steps`, :func:`trim_pack`). Nothing is checked per step; once, after the loop,
  every recorded value that was measured, every parameter and every hidden state is tested
  for NaN/inf, and the frame reports ``suspect`` when one is not finite. A plain step costs
  what the bare algorithm step costs.
- **careful** (only to replay a suspect frame): every step checks its loss, the parameters
  after the update and the hidden states, and a failing step halts the ring, keeps the last
  finite weights and is measured in full. The session replays a suspect frame this way from
  the states it had before the frame, so a failure is still reported at its exact step.

The frame reads a :class:`FrameContext` (the learner, its weights, the probe, the recorder,
the optimizer, the loss and where the current chunk starts), not the session.

Both measure the same steps (:func:`frame_schedule`) and return ``(ring, opt_state,
packed)``: ``ring`` is the recorder's bookkeeping only (write count, halt flag, failure record;
the session's ring has no row buffer) and ``packed`` is the frame's single host transfer, its
on-device record. The fast frame hands over :meth:`Recorder.pack_sparse` (the loss of every
step, the rows of the measured steps and the ``suspect`` flag: nothing of size
``steps x metrics`` is built on the device); the careful one :meth:`Recorder.pack` (a dense
row per step, with the failure record).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import optax

from etp_viz.learn.registry import OnlineLearner, StepRecorder

from .probe import Probe
from .recorder import PaddedPack, Recorder
from .sources import UserCodeError

__all__ = [
    "Flight",
    "FrameContext",
    "FrameSteps",
    "build_frame",
    "frame_schedule",
    "pad_steps",
    "replay_pieces",
    "restore_states",
    "snapshot_states",
    "steps_of",
    "trim_pack",
]


def _tree_where(condition: jax.Array, new: Any, old: Any) -> Any:
    return jax.tree.map(lambda a, b: jnp.where(condition, a, b), new, old)


def frame_schedule(length: int, every: int) -> np.ndarray:
    """Steps of a frame whose heavy metrics are measured: every ``every``-th step of the frame
    (positions ``every - 1, 2 every - 1, ...``) and its last step.

    >>> frame_schedule(5, 2).tolist()
    [False, True, False, True, True]
    """
    position = np.arange(length)
    return ((position + 1) % max(int(every), 1) == 0) | (position == length - 1)


def steps_of(tree: Any, start: int, stop: int) -> Any:
    """Steps ``start..stop-1`` of every stacked array of ``tree``."""
    return jax.tree.map(lambda a: a[start:stop], tree)


@dataclasses.dataclass(frozen=True)
class FrameContext:
    """What a jitted frame reads: the session's parts, not the session
    (:meth:`etp_viz.live.session.Session.frame_context`).

    Attributes
    ----------
    algorithm
        The online learner; one call is one forward step with its traces advanced.
    params
        The weights it learns, ``{path: ParamState}`` (updated in place by the frame).
    probe, recorder
        What is measured on a step and how a row of it is recorded on the device.
    optimizer
        The optax transformation applied to each step's online gradient.
    loss_fn
        ``(output, target) -> scalar``, the user's loss.
    chunk_start
        The first step of the chunk being dispatched (read while tracing, to name the step
        of a failing loss).
    record_every
        The measuring interval a frame uses unless it is given another.
    episode_reset
        None, or ``reset(start)``: put the hidden states and the learner's own state back to
        their start where the traced bool ``start`` is true
        (:meth:`etp_viz.live.frame_data.Episodes.reset_where`). With it, each step's target
        arrives as ``(y_t, start_t)``.
    """

    algorithm: OnlineLearner
    params: Mapping[str, brainstate.ParamState]
    probe: Probe
    recorder: Recorder
    optimizer: optax.GradientTransformation
    loss_fn: Callable[[Any, Any], Any]
    chunk_start: Callable[[], int]
    record_every: int
    episode_reset: Callable[[Any], None] | None = None


def build_frame(context: FrameContext, careful: bool, every: int | None = None) -> Callable:
    """The jitted frame ``(ring, opt_state, xs, ys) -> (ring, opt_state, packed)`` of a
    session's :class:`FrameContext`, measuring every ``every``-th step (default: the
    context's ``record_every``): :meth:`FrameSteps.careful_frame` (every step checked, a row
    per step) or :meth:`FrameSteps.fast_frame` (blocks of plain steps, one measured step each).

    Neither donates its arguments: the session keeps a frame's start states (references)
    to replay it if it turns out suspect.
    """
    steps = FrameSteps(context, every)
    return brainstate.transform.jit(steps.careful_frame if careful else steps.fast_frame)


class FrameSteps:
    """The pieces of a session's compiled frame, each a named step of one training loop.

    ``train_step`` is one online step and optimizer update; ``plain_step`` keeps only the
    every-step columns; ``measured_step`` measures every metric; ``fast_frame`` loops over
    blocks of ``every - 1`` plain steps and one measured one; ``careful_step`` /
    ``careful_frame`` check every step and stop at the first failing one.
    """

    def __init__(self, context: FrameContext, every: int | None = None) -> None:
        self.context = context
        self.algorithm, self.params, self.probe = context.algorithm, context.params, context.probe
        self.optimizer, self.recorder = context.optimizer, context.recorder
        self.every = max(1, int(context.record_every if every is None else every))
        self.grad_fn = brainstate.transform.grad(
            self.loss_of, self.params, has_aux=True, return_value=True
        )
        self.heavy_columns = jnp.asarray(self.recorder.heavy_mask())
        self.dense_width = self.recorder.dense_width
        # the learn hook's per-step df / dh-dh summary is only read on measured steps: a plain
        # step puts the previous record back, so XLA drops the summary from the plain steps
        self.record = None
        if self.probe.records_step_data and isinstance(self.algorithm, StepRecorder):
            self.record = self.algorithm.step_data_record

    def loss_of(self, x_t: Any, y_t: Any) -> Any:
        """The user's loss of one step's output, and the output."""
        output = self.algorithm(x_t)
        try:
            value = self.context.loss_fn(output, y_t)
        except Exception as error:  # noqa: BLE001 - reported to the user, not fatal
            # Tracing happens on a chunk's first call: name that chunk's first step.
            raise UserCodeError("loss", self.context.chunk_start(), error) from error
        return jnp.asarray(value).reshape(()), output

    def train_step(self, opt_state: Any, x_t: Any, y_t: Any) -> tuple:
        """One online step and its update: ``((loss, dense row), grads, updates, old weights,
        new weights, new optimizer state)`` (the weights not written yet)."""
        reset = self.context.episode_reset
        if reset is not None:  # an episode's first step starts from the initial states
            y_t, start = y_t
            reset(start)
        grads, loss, output = self.grad_fn(x_t, y_t)
        # the every-step columns (loss, accuracy counts, activity), read after the step
        dense = self.probe.dense_row(loss, output, y_t, grads).astype(self.recorder.dtype)
        params = self.params
        old = {name: state.value for name, state in params.items()}
        updates, new_opt_state = self.optimizer.update(grads, opt_state, old)
        new = {name: jax.tree.map(lambda p, u: p + u, old[name], updates[name]) for name in params}
        return (loss, dense), grads, updates, old, new, new_opt_state

    def plain_step(self, opt_state: Any, inputs: tuple) -> tuple:
        """A step whose record is the dense columns only (the summary record put back)."""
        record = self.record
        kept = record.value if record is not None else None
        (_, dense), _, _, _, new, opt_state = self.train_step(opt_state, *inputs)
        for name, state in self.params.items():
            state.value = new[name]
        if record is not None:
            record.value = kept
        return opt_state, dense

    def measured_step(self, opt_state: Any, x_t: Any, y_t: Any) -> tuple:
        """One step measured in full: ``(opt_state, its dense columns, its (width,) row)``."""
        (loss, dense), grads, updates, _, new, opt_state = self.train_step(opt_state, x_t, y_t)
        for name, state in self.params.items():
            state.value = new[name]
        row = self.probe.row(loss, grads, updates, True, dense).astype(self.recorder.dtype)
        return opt_state, row[: self.dense_width], row

    def fast_frame(self, ring: dict, opt_state: Any, xs: Any, ys: Any, n: Any) -> tuple:
        """The first ``n`` steps of ``xs, ys`` (a traced count: the arrays may be longer, see
        :func:`pad_steps`) in blocks of ``every``: each block's steps but its last plain, its
        last measured (:func:`frame_schedule`). One compiled program runs any ``n`` up to the
        arrays' length, with one plain and one measured step in it. Checks only the losses,
        the measured rows and the final weights (a suspect frame is replayed carefully).

        Returns ``(ring, opt_state, packed)``, ``packed`` as :meth:`Recorder.pack_sparse`
        with every array at the padded length (:func:`trim_pack` notes ``n`` with it; the
        recorder cuts it after the transfer)."""
        every, recorder, width = self.every, self.recorder, self.dense_width
        status = recorder.status_of(ring)
        length = jax.tree.leaves(xs)[0].shape[0]
        n = jnp.asarray(n, jnp.int32)
        blocks = -(-length // every)
        num_blocks = (n + every - 1) // every
        losses = jnp.zeros((length, width), recorder.dtype)
        measured = jnp.zeros((blocks, recorder.width), recorder.dtype)
        positions = jnp.zeros((blocks,), jnp.int32)

        def at(tree: Any, index: Any) -> Any:
            return jax.tree.map(lambda a: jax.lax.dynamic_index_in_dim(a, index, 0, False), tree)

        def plain(carry: tuple) -> tuple:
            index, stop, opt_state, losses = carry
            opt_state, dense = self.plain_step(opt_state, (at(xs, index), at(ys, index)))
            losses = jax.lax.dynamic_update_index_in_dim(losses, dense, index, 0)
            return index + 1, stop, opt_state, losses

        def block(carry: tuple) -> tuple:
            b, opt_state, losses, measured, positions = carry
            last = jnp.minimum((b + 1) * every, n) - 1
            _, _, opt_state, losses = brainstate.transform.while_loop(
                lambda c: c[0] < c[1], plain, (b * every, last, opt_state, losses)
            )
            opt_state, dense, row = self.measured_step(opt_state, at(xs, last), at(ys, last))
            losses = jax.lax.dynamic_update_index_in_dim(losses, dense, last, 0)
            measured = jax.lax.dynamic_update_index_in_dim(measured, row, b, 0)
            positions = jax.lax.dynamic_update_index_in_dim(positions, last, b, 0)
            return b + 1, opt_state, losses, measured, positions

        _, opt_state, losses, measured, positions = brainstate.transform.while_loop(
            lambda c: c[0] < num_blocks, block,
            (jnp.zeros((), jnp.int32), opt_state, losses, measured, positions),
        )  # fmt: skip
        # the only checks of the fast frame: every loss, every measured row, the final state
        ran = (jnp.arange(length) < n)[:, None]
        kept = (jnp.arange(blocks) < num_blocks)[:, None]
        rows_ok = jnp.all(jnp.isfinite(losses) | ~ran) & jnp.all(jnp.isfinite(measured) | ~kept)
        weights = {name: state.value for name, state in self.params.items()}
        suspect = ~(rows_ok & jnp.all(self.probe.check_state(weights)))
        status = {**status, "count": status["count"] + n}
        packed = recorder.pack_sparse(status, losses, measured, positions, suspect)
        return {**ring, **status}, opt_state, packed

    def careful_step(self, carry: tuple, inputs: tuple) -> tuple:
        """One checked step: a failing one is measured in full and halts the run (its
        weights and optimizer state are not written)."""
        status, opt_state = carry
        x_t, y_t, scheduled = inputs
        (loss, dense), grads, updates, old, new, new_opt_state = self.train_step(
            opt_state, x_t, y_t
        )
        checks_ok = self.probe.check_state(new)
        measured = scheduled
        if self.every > 1:  # a failing step is measured in full
            measured = scheduled | ~(jnp.isfinite(loss) & jnp.all(checks_ok))
        row = self.probe.row(loss, grads, updates, measured, dense)
        valid = None if self.every == 1 else ~self.heavy_columns | measured
        status, row, written = self.recorder.check_row(status, row, valid, checks_ok)
        keep = ~status["halted"]
        for name, state in self.params.items():
            state.value = _tree_where(keep, new[name], old[name])
        return (status, _tree_where(keep, new_opt_state, opt_state)), (row, written)

    def careful_frame(self, ring: dict, opt_state: Any, xs: Any, ys: Any) -> tuple:
        """Every step checked (:meth:`careful_step`), a row per step."""
        carry = (self.recorder.status_of(ring), opt_state)
        length = jax.tree.leaves(xs)[0].shape[0]
        scheduled = jnp.asarray(frame_schedule(length, self.every))
        (status, opt_state), (rows, written) = brainstate.transform.scan(
            self.careful_step, carry, (xs, ys, scheduled)
        )
        return {**ring, **status}, opt_state, self.recorder.pack(status, rows, written)


def pad_steps(tree: Any, length: int) -> Any:
    """The stacked steps of ``tree`` followed by zeros up to ``length`` steps (what the fast
    frame never reads: it runs its first ``n`` steps). NumPy arrays are padded on the host."""

    def pad(a: Any) -> Any:
        extra = length - a.shape[0]
        if extra <= 0:
            return a
        xp = np if isinstance(a, np.ndarray) else jnp
        return xp.concatenate([a, xp.zeros((extra, *a.shape[1:]), a.dtype)])

    return jax.tree.map(pad, tree)


def trim_pack(packed: tuple, n: int, every: int) -> Any:
    """A fast frame's :meth:`Recorder.pack_sparse` output noted with its first ``n`` steps and
    their measured rows (the frame ran on arrays padded past ``n``): a
    :class:`~etp_viz.live.recorder.PaddedPack` the recorder cuts after the transfer. A
    step-checked frame's :meth:`Recorder.pack` output is returned as it is."""
    if len(packed) != 4:
        return packed
    return PaddedPack(packed, int(n), -(-int(n) // max(int(every), 1)))


#: Most steps one careful (replay) call runs: its record is dense (a row per step).
REPLAY_STEPS = 1024


def replay_pieces(chunks: list[tuple[Any, Any, int]], limit: int | None = None) -> list:
    """A flight's chunks ``(xs, ys, first step)`` cut into pieces of at most ``limit`` steps
    (default :data:`REPLAY_STEPS`): the careful frame's dense record stays bounded however
    long the frame was.

    >>> import numpy as np
    >>> [(len(x), first) for x, _, first in replay_pieces([(np.zeros(5), np.zeros(5), 10)], 2)]
    [(2, 10), (2, 12), (1, 14)]
    """
    limit = REPLAY_STEPS if limit is None else max(1, int(limit))
    pieces = []
    for xs, ys, first in chunks:
        length = jax.tree.leaves(xs)[0].shape[0]
        for start in range(0, length, limit):
            stop = min(start + limit, length)
            if start == 0 and stop == length:
                pieces.append((xs, ys, first))
            else:
                pieces.append((steps_of(xs, start, stop), steps_of(ys, start, stop), first + start))
    return pieces


def snapshot_states(states: list[Any]) -> list[tuple[Any, Any]]:
    """``[(state, value)]`` of every state a frame may write, plus the global random key
    (JAX arrays are immutable and the frame donates none of them: references suffice)."""
    saved = [(state, state.value) for state in states]
    default_rng = brainstate.random.DEFAULT
    if isinstance(default_rng, brainstate.State) and all(s is not default_rng for s in states):
        saved.append((default_rng, default_rng.value))
    return saved


def restore_states(saved: list[tuple[Any, Any]]) -> None:
    """Put back what :func:`snapshot_states` saved."""
    for state, value in saved:
        state.value = value


class Flight:
    """A dispatched frame: its first step, the states it started from, its data, its
    measuring interval, its chunks ``(xs, ys, first step)`` and their packed device outputs
    (not transferred yet)."""

    def __init__(self, start: int, snapshot: tuple, data: Any, every: int) -> None:
        self.start = start
        self.every = every
        self.snapshot = snapshot
        self.data = data
        self.chunks: list[tuple[Any, Any, int]] = []
        self.packs: list[Any] = []
