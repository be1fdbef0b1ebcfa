"""Gather one UI frame's data on the host before the frame's single jitted call.

A frame runs ``n`` steps inside one ``scan``; its inputs are the ``n`` pairs ``(x_t, y_t)``
stacked on a leading time axis. User functions are called here, in Python, one step at a time,
so an exception in one of them names its step and the steps before it still run.

Teaching tasks get a fast path: their documented stream is "episode ``e`` is
``task.sample((task.seed, e), task.batch_size)``", so a frame is a slice of cached numpy
episodes (no per-step device dispatch).

Episode resets travel with a frame's data too (:class:`Episodes`: which steps start an episode,
and what is put back there). On an episodic teaching task (:attr:`etp_viz.tasks.Task.episodic`)
every episode is an independent trial: at its first step (``t % n_steps == 0``) the network's
hidden states and the learner's own state (traces, influence, windows) go back to the values
they had when the session was built. An episode's loss is then a function of the weights alone,
so BPTT over the episode (``algorithm="bptt"``) is its exact gradient, the reference the other
learners are measured against. The weights, the optimizer and random keys are never reset.

The frames do it on the device (:meth:`Episodes.reset_where`, each step's flag travelling
with its target); the fidelity meter's replays on the host (:meth:`Episodes.reset`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import brainstate
import jax
import jax.numpy as jnp
import numpy as np

from etp_viz.tasks.base import Task

from .sources import DataSource, UserCodeError

__all__ = [
    "Episodes",
    "FrameData",
    "check_reference_episodes",
    "gather_frame",
    "resettable",
    "stack_pairs",
]


class FrameData:
    """The stacked inputs of up to ``n`` steps, and the user error that cut them short."""

    def __init__(self, xs: Any, ys: Any, num_steps: int, error: UserCodeError | None) -> None:
        self.xs = xs
        self.ys = ys
        self.num_steps = num_steps
        self.error = error

    def slice(self, start: int, stop: int) -> tuple[Any, Any]:
        """The pairs of steps ``start..stop-1`` of this frame (still stacked)."""
        return (
            jax.tree.map(lambda a: a[start:stop], self.xs),
            jax.tree.map(lambda a: a[start:stop], self.ys),
        )

    def split(self, n: int) -> tuple[FrameData, FrameData | None]:
        """The first ``n`` steps and the rest (None when nothing is left); the user error
        (which happened after the last gathered step) goes with the rest."""
        if n >= self.num_steps:
            return self, None
        head = FrameData(*self.slice(0, n), n, None)
        tail = FrameData(*self.slice(n, self.num_steps), self.num_steps - n, self.error)
        return head, tail

    @staticmethod
    def join(parts: list[FrameData]) -> FrameData:
        """Consecutive frames' data as one (the last part's user error goes with it)."""
        error = parts[-1].error
        parts = [part for part in parts if part.num_steps]
        if len(parts) <= 1:
            only = parts[0] if parts else FrameData(None, None, 0, None)
            return FrameData(only.xs, only.ys, only.num_steps, error)

        def concat(*leaves: Any) -> Any:
            if any(isinstance(leaf, jax.Array) for leaf in leaves):
                return jnp.concatenate([jnp.asarray(leaf) for leaf in leaves])
            return np.concatenate(leaves)

        xs = jax.tree.map(concat, *[part.xs for part in parts])
        ys = jax.tree.map(concat, *[part.ys for part in parts])
        return FrameData(xs, ys, sum(part.num_steps for part in parts), error)

    def pair(self, index: int) -> tuple[Any, Any]:
        """One step's ``(x_t, y_t)`` (for the fidelity meter's window)."""
        return jax.tree.map(lambda a: a[index], self.xs), jax.tree.map(lambda a: a[index], self.ys)


def _stack_arrays(arrays: list[np.ndarray]) -> np.ndarray:
    """``np.stack`` of numpy arrays, through one ``concatenate`` when every array has the first
    one's shape (the usual stream; a few times faster than ``np.stack``'s per-array checks).
    ``concatenate`` already requires equal trailing dimensions and promotes dtypes like
    ``np.stack``; the leading lengths are compared in C (``map(len, ...)``)."""
    first = arrays[0]
    if first.ndim:
        try:
            joined = np.concatenate(arrays)
        except ValueError:
            joined = None  # unequal shapes: np.stack raises numpy's own error
        if joined is not None:
            lengths = np.fromiter(map(len, arrays), np.intp, len(arrays))
            if np.all(lengths == first.shape[0]):
                return joined.reshape(len(arrays), *first.shape)
    return np.stack(arrays)


def stack_pairs(pairs: list[tuple[Any, Any]]) -> tuple[Any, Any]:
    """Stack ``[(x_t, y_t)]`` on a new leading axis (numpy unless a leaf is a jax array)."""
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    if set(map(type, xs)) == {np.ndarray} and set(map(type, ys)) == {np.ndarray}:
        return _stack_arrays(xs), _stack_arrays(ys)  # the common case: no pytree walk per step

    def stack(*leaves: Any) -> Any:
        if any(isinstance(leaf, jax.Array) for leaf in leaves):
            return jnp.stack([jnp.asarray(leaf) for leaf in leaves])
        return np.stack([np.asarray(leaf) for leaf in leaves])

    xs = jax.tree.map(stack, *xs)
    ys = jax.tree.map(stack, *ys)
    return xs, ys


def _task_frame(task: Task, start: int, n: int) -> tuple[Any, Any] | None:
    """Steps ``start..start+n-1`` of a teaching task's stream, from cached numpy episodes
    (``task.sample_numpy`` unless a subclass overrides ``sample`` below it: no device round
    trip per episode)."""
    length = task.n_steps
    if not isinstance(length, int):
        return None
    mro = type(task).__mro__
    below = mro[: next(i for i, c in enumerate(mro) if "sample_numpy" in vars(c))]
    overridden = any("sample" in vars(c) for c in below)  # a subclass's own episodes
    sample: Callable[..., tuple] = task.sample if overridden else task.sample_numpy
    cache = task.__dict__.setdefault("_etp_viz_frame_cache", {})
    first = start // length
    for old in [e for e in cache if e < first or e > first + n // length + 1]:
        del cache[old]  # the stream moves forward (a reset restarts it at episode 0)
    xs, ys = [], []
    t = start
    while t < start + n:
        episode, within = divmod(t, length)
        if episode not in cache:
            sampled = sample((task.seed, episode), task.batch_size)
            cache[episode] = tuple(np.asarray(a) for a in sampled)
        take = min(length - within, start + n - t)
        xs.append(cache[episode][0][within : within + take])
        ys.append(cache[episode][1][within : within + take])
        t += take
    return np.concatenate(xs), np.concatenate(ys)


def gather_frame(source: DataSource, start: int, n: int) -> FrameData:
    """The data of steps ``start..start+n-1``; stops at the first failing user call."""
    if source.kind == "task":
        try:
            fast = _task_frame(source.data, start, n)
        except Exception as error:  # noqa: BLE001 - reported like any data failure
            return FrameData(None, None, 0, UserCodeError("data", start, error))
        if fast is not None:
            return FrameData(fast[0], fast[1], n, None)
    pairs, failure = source.many(start, n)
    if not pairs:
        return FrameData(None, None, 0, failure)
    xs, ys = stack_pairs(pairs)
    return FrameData(xs, ys, len(pairs), failure)


def resettable(state: Any, value: Any) -> Any:
    """Which leaves of ``state``'s ``value`` an episode start puts back: a tree of bools like
    ``value``, or None when none is. Never a weight, a ``RandomState`` or a random key (a
    typed PRNG key, or a legacy ``uint32`` key stored under an entry named ``key``, like
    UORO's): a new episode gets new noise. Only numeric and boolean leaves.

    >>> import brainstate, jax, jax.numpy as jnp
    >>> resettable(brainstate.HiddenState(jnp.zeros(3)), jnp.zeros(3))
    True
    >>> resettable(brainstate.ParamState(jnp.zeros(3)), jnp.zeros(3)) is None
    True
    >>> resettable(brainstate.ShortTermState(0), {"key": jax.random.PRNGKey(0), "m": jnp.ones(2)})
    {'key': False, 'm': True}
    """
    if isinstance(state, brainstate.ParamState):
        return None
    if isinstance(state, brainstate.random.RandomState):
        return None

    def leaf_mask(path: tuple, leaf: Any) -> bool:
        dtype = leaf.dtype if isinstance(leaf, jax.Array | np.ndarray) else np.asarray(leaf).dtype
        if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
            return False
        last = path[-1] if path else None
        named_key = isinstance(last, jax.tree_util.DictKey) and str(last.key) == "key"
        if named_key and jnp.issubdtype(dtype, jnp.unsignedinteger):
            return False
        return bool(jnp.issubdtype(dtype, jnp.number) or jnp.issubdtype(dtype, jnp.bool_))

    mask = jax.tree_util.tree_map_with_path(leaf_mask, value)
    return mask if any(jax.tree.leaves(mask)) else None


class Episodes:
    """The episodes of a session: their length and the states an episode start puts back.

    Parameters
    ----------
    length : int
        Steps per episode (the task's ``n_steps``).
    states : iterable of (State, value)
        Each state with the value it had when the session was built; the weights, random
        keys and non-numeric leaves are left out (:func:`resettable`).

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp
    >>> h = brainstate.HiddenState(jnp.zeros(2))
    >>> episodes = Episodes(3, [(h, h.value)])
    >>> episodes.starts(2, 5).tolist()
    [False, True, False, False, True]
    >>> h.value = jnp.ones(2); episodes.reset(); h.value.tolist()
    [0.0, 0.0]
    """

    def __init__(self, length: int, states: Iterable[tuple[Any, Any]]) -> None:
        if int(length) < 1:
            raise ValueError(f"an episode has at least one step, got {length}")
        self.length = int(length)
        kept = [(state, value, resettable(state, value)) for state, value in states]
        #: ``(state, its start value, which leaves are reset)`` of every state reset
        self.resets = [(state, value, mask) for state, value, mask in kept if mask is not None]
        #: the states an episode start writes
        self.states = [(state, value) for state, value, _ in self.resets]

    @classmethod
    def of(
        cls, task: Task | None, reset: bool | None, states: Iterable[tuple[Any, Any]]
    ) -> Episodes | None:
        """A session's episodes: ``reset`` (None: the task's ``episodic``), else None.

        A reset asked for without a task is a ValueError (there are no episodes)."""
        if reset is None:
            reset = task is not None and task.episodic
        if not reset:
            return None
        if task is None:
            raise ValueError(
                "episode_reset=True needs episodes: give a teaching task (task=...), whose "
                "n_steps is the episode length, or leave episode_reset at None."
            )
        return cls(int(task.n_steps), states)

    def starts(self, first_step: int, n_steps: int) -> np.ndarray:
        """``(n_steps,)`` bool: which of the steps ``first_step, first_step + 1, ...`` start
        an episode."""
        steps = np.arange(int(first_step), int(first_step) + int(n_steps))
        return steps % self.length == 0

    def is_start(self, step: int) -> bool:
        """Whether step ``step`` starts an episode."""
        return int(step) % self.length == 0

    def reset_where(self, start: Any) -> None:
        """Inside a traced step: every reset leaf back to its start where ``start`` (a traced
        bool scalar) is true, unchanged elsewhere."""

        def pick(first: Any, now: Any, reset: bool) -> Any:
            if not reset:
                return now
            return jnp.where(start, jnp.asarray(first, jnp.result_type(now)), now)

        for state, value, mask in self.resets:
            state.value = jax.tree.map(pick, value, state.value, mask)

    def reset(self) -> None:
        """On the host: every reset leaf back to its start."""
        for state, value, mask in self.resets:
            state.value = jax.tree.map(
                lambda first, now, reset: first if reset else now, value, state.value, mask
            )


def check_reference_episodes(episode: int, episodes: Episodes | None) -> None:
    """Refuse BPTT over episodes of ``episode`` steps where a session has no episode resets
    (``episodes`` None) or resets at another length: it would not be the exact gradient it is
    claimed to be.

    >>> check_reference_episodes(11, Episodes(11, []))
    >>> check_reference_episodes(11, None)
    Traceback (most recent call last):
    ...
    ValueError: algorithm='bptt' (BPTT over each episode, the exact reference) needs episodes ...
    """
    if episodes is None:
        raise ValueError(
            "algorithm='bptt' (BPTT over each episode, the exact reference) needs episodes "
            "that start from a reset state: give an episodic task (task=..., episode_reset "
            "left at None or True). On a stream use truncated BPTT, algorithm='tbptt' "
            "(bptt_window=W)."
        )
    if int(episode) != episodes.length:
        raise ValueError(
            f"This BPTT learner's episode is {episode} steps but the task's episodes are "
            f"{episodes.length}: build it with etp_viz.BPTT(model, episode={episodes.length}) "
            "or pass algorithm='bptt'."
        )
