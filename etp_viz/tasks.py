r"""Teaching tasks, generated on the fly (no downloads), deterministic from a seed.

Each task is a small dataclass with ``name``, ``input_size``, ``output_size``, ``n_steps`` and:

- ``sample(key, batch_size=None) -> (xs, ys)``: one episode, ``xs`` of shape
  ``[T, (B,) input_size]`` and ``ys`` of shape ``[T, (B,) output_size]``;
- ``loss(y_pred, y_target)``: MSE for regression, masked cross-entropy for decisions (zero on
  steps without a target, so it is usable one step at a time);
- ``step_data(t) -> (x_t, y_t)``: the ``t``-th step of an endless stream of episodes (episode
  ``t // n_steps`` drawn from ``(seed, episode)``), the function-of-step interface a live
  session steps through;
- ``example_input()``: a zero input of the per-step shape (to compile a model on);
- ``suggested_model()``: a ``brainstate`` module built from :mod:`etp_viz.nn`, states
  initialised for ``batch_size``; ``spiking=True`` gives a recurrent LIF/ALIF network with a
  leaky readout, ``spiking=False`` a rate RNN.

Only numpy and JAX are used (no widget stack), so the engine and the tests can use the tasks.

Examples
--------
>>> from etp_viz.tasks import get_task
>>> task = get_task("sine", seed=0)
>>> xs, ys = task.sample(0)
>>> xs.shape, ys.shape
((100, 20), (100, 1))
>>> x0, y0 = task.step_data(0)
>>> model = task.suggested_model()
>>> model(x0).shape
(1,)
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, ClassVar

import brainstate
import jax
import jax.numpy as jnp
import numpy as np

from . import nn

__all__ = [
    "TASKS",
    "DelayedRecall",
    "EvidenceAccumulation",
    "LeakyIntegrator",
    "RecurrentNet",
    "SineRegression",
    "Task",
    "get_task",
    "masked_cross_entropy",
    "mean_squared_error",
]


def mean_squared_error(y_pred: jax.Array, y_target: jax.Array) -> jax.Array:
    """Mean of ``(y_pred - y_target)²`` over every axis."""
    return jnp.mean((y_pred - y_target) ** 2)


def masked_cross_entropy(logits: jax.Array, y_target: jax.Array) -> jax.Array:
    """Cross-entropy of softmax(``logits``) against one-hot ``y_target``, per labelled row.

    Rows whose target is all zeros (no decision asked at that step) contribute nothing; the
    sum is divided by the number of labelled rows (at least 1), so a step without any label
    has loss exactly 0 and gradient 0.
    """
    per_row = -jnp.sum(y_target * jax.nn.log_softmax(logits, axis=-1), axis=-1)
    labelled = jnp.sum(y_target, axis=-1)
    return jnp.sum(per_row) / jnp.maximum(jnp.sum(labelled), 1.0)


def _rng(key: Any) -> np.random.Generator:
    """A numpy generator from an int, a tuple of ints or a JAX PRNG key."""
    if isinstance(key, (int, np.integer)):
        return np.random.default_rng([int(key)])
    if isinstance(key, tuple):
        return np.random.default_rng([int(k) for k in key])
    key = jnp.asarray(key) if not hasattr(key, "dtype") else key
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return np.random.default_rng(np.asarray(key, np.uint32).ravel().tolist())


class RecurrentNet(brainstate.nn.Module):
    """``readout(rnn(x))``: a recurrent layer (rate cell or spiking layer) and a readout.

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp
    >>> from etp_viz import nn
    >>> net = RecurrentNet(nn.GRUCell(3, 8), nn.Linear(8, 2))
    >>> _ = brainstate.nn.init_all_states(net)
    >>> net(jnp.ones(3)).shape
    (2,)
    """

    def __init__(self, rnn: brainstate.nn.Module, readout: brainstate.nn.Module) -> None:
        super().__init__()
        self.rnn = rnn
        self.readout = readout

    def update(self, x: jax.Array) -> jax.Array:
        """One step: the readout of the recurrent layer's output."""
        return self.readout(self.rnn(x))


@dataclasses.dataclass
class Task:
    """Base class of the teaching tasks.

    Subclasses are dataclasses that provide ``input_size``, ``output_size`` and ``n_steps``
    (as fields or properties) and ``_episode(rng, batch) -> (xs, ys)`` as numpy arrays of
    shapes ``[T, batch, input_size]`` and ``[T, batch, output_size]``.

    Parameters
    ----------
    seed : int
        Seeds the task's fixed structure, the stream of :meth:`step_data` and the weights of
        :meth:`suggested_model`.
    batch_size : int or None
        Batch used by :meth:`step_data`, :meth:`example_input` and :meth:`suggested_model`
        (``None``: unbatched).
    """

    name: ClassVar[str] = "task"
    #: Whether :meth:`suggested_model` builds a spiking network by default.
    spiking_by_default: ClassVar[bool] = False
    #: Spiking model uses adaptive (ALIF, two-state) neurons: memory over longer delays.
    adaptive_neurons: ClassVar[bool] = False
    #: Rate cell of the non-spiking suggested model.
    rate_cell: ClassVar[type] = nn.GRUCell

    seed: int = 0
    batch_size: int | None = None

    def __post_init__(self) -> None:
        if self.batch_size is not None and int(self.batch_size) < 1:
            raise ValueError(f"{type(self).__name__}: batch_size must be None or >= 1.")
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.type in ("int", int) and field.name != "seed" and int(value) < 1:
                raise ValueError(f"{type(self).__name__}: {field.name} must be >= 1, got {value}.")

    def _episode(self, rng: np.random.Generator, batch: int) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def loss(self, y_pred: jax.Array, y_target: jax.Array) -> jax.Array:
        """The task's loss (MSE unless a subclass says otherwise)."""
        return mean_squared_error(y_pred, y_target)

    def sample(self, key: Any = None, batch_size: int | None = None) -> tuple[jax.Array, ...]:
        """One episode ``(xs [T, (B,) in], ys [T, (B,) out])``, deterministic in ``key``.

        ``key`` is an int, a tuple of ints or a JAX PRNG key (default: the task's seed).
        """
        xs, ys = self.sample_numpy(key, batch_size)
        return jnp.asarray(xs), jnp.asarray(ys)

    def sample_numpy(
        self, key: Any = None, batch_size: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`sample` as host numpy arrays (same values; no device round trip). A live
        session gathers its frames from these."""
        rng = _rng(self.seed if key is None else key)
        xs, ys = self._episode(rng, 1 if batch_size is None else int(batch_size))
        if batch_size is None:
            xs, ys = xs[:, 0], ys[:, 0]
        dtype = np.dtype(nn.default_float_dtype())
        return np.asarray(xs, dtype), np.asarray(ys, dtype)

    def step_data(self, t: int) -> tuple[jax.Array, jax.Array]:
        """``(x_t, y_t)`` of step ``t`` of the endless stream (episode ``t // n_steps``).

        Episodes follow each other without a state reset, as in online learning on a stream;
        episode ``e`` is ``sample((seed, e), batch_size)``.
        """
        episode, within = divmod(int(t), self.n_steps)
        xs, ys = self._cached_episode(episode)
        return xs[within], ys[within]

    def _cached_episode(self, episode: int) -> tuple[jax.Array, jax.Array]:
        cache = self.__dict__.setdefault("_episode_cache", {})
        key = (episode, dataclasses.astuple(self), nn.default_float_dtype())
        if key not in cache:
            cache.clear()
            cache[key] = self.sample((self.seed, episode), self.batch_size)
        return cache[key]

    def example_input(self) -> jax.Array:
        """A zero input of the per-step shape ``[(B,) input_size]``."""
        lead = () if self.batch_size is None else (self.batch_size,)
        return jnp.zeros((*lead, self.input_size), nn.default_float_dtype())

    def suggested_model(
        self, hidden_size: int = 32, spiking: bool | None = None
    ) -> brainstate.nn.Module:
        """A model for this task from :mod:`etp_viz.nn`, states initialised for ``batch_size``.

        ``spiking=True``: a recurrent LIF layer (ALIF for memory tasks) and a
        :class:`~etp_viz.nn.LeakyRateReadout`; ``spiking=False``: ``rate_cell`` and a
        :class:`~etp_viz.nn.Linear` readout. Weights are drawn from the task's seed.
        """
        spiking = self.spiking_by_default if spiking is None else spiking
        with brainstate.random.seed_context(self.seed):
            model = self._spiking_model(hidden_size) if spiking else self._rate_model(hidden_size)
        return brainstate.nn.init_all_states(model, batch_size=self.batch_size)

    def _rate_model(self, hidden: int) -> brainstate.nn.Module:
        cell = self.rate_cell(self.input_size, hidden)
        return RecurrentNet(cell, nn.Linear(hidden, self.output_size))

    def _spiking_model(self, hidden: int) -> brainstate.nn.Module:
        # R = 1 / (1 - alpha) makes V integrate as V <- alpha V + I (e-prop's convention);
        # the gains give sparse but non-silent firing on every task's input statistics.
        tau_mem = 20.0
        common = {"tau_mem": tau_mem, "recurrent": True, "R": 1.0 / (1.0 - math.exp(-1 / tau_mem))}
        if self.adaptive_neurons:
            w_init = functools.partial(nn.xavier_normal, gain=2.0)
            layer = nn.ALIF(self.input_size, hidden, tau_a=200.0, beta=0.5, w_init=w_init, **common)
        else:
            w_init = functools.partial(nn.xavier_normal, gain=1.5)
            layer = nn.LIF(self.input_size, hidden, w_init=w_init, **common)
        return RecurrentNet(layer, nn.LeakyRateReadout(hidden, self.output_size, tau=10.0))


@dataclasses.dataclass
class SineRegression(Task):
    """Fit a sum of sines from frozen Poisson spike input (the e-prop tutorial classic).

    The input is a fixed random spike pattern (``input_size`` channels firing with
    probability ``rate`` per step, drawn once from the seed); the target is a fixed sum of
    ``n_components`` sines with periods ``n_steps / k``. The network must map the frozen
    noise to the curve. MSE loss. Suggested model: recurrent LIF + leaky readout.

    Examples
    --------
    >>> xs, ys = SineRegression(n_steps=50).sample(1, batch_size=2)
    >>> xs.shape, ys.shape
    ((50, 2, 20), (50, 2, 1))
    """

    name: ClassVar[str] = "sine"
    spiking_by_default: ClassVar[bool] = True
    output_size: ClassVar[int] = 1

    input_size: int = 20
    n_steps: int = 100
    n_components: int = 3
    rate: float = 0.05
    #: If False, the input spikes are redrawn for every episode instead of frozen.
    frozen: bool = True

    def target_curve(self) -> np.ndarray:
        """The fixed target ``[T]``: a sum of sines with amplitudes and phases from the seed."""
        rng = _rng((self.seed, 1_000_003))
        t = np.arange(self.n_steps)
        periods = self.n_steps / np.arange(1, self.n_components + 1)
        amplitudes = rng.uniform(0.5, 2.0, self.n_components)
        phases = rng.uniform(0.0, 2 * math.pi, self.n_components)
        waves = amplitudes[:, None] * np.sin(2 * math.pi * t / periods[:, None] + phases[:, None])
        return waves.sum(0) / self.n_components

    def _episode(self, rng: np.random.Generator, batch: int) -> tuple[np.ndarray, np.ndarray]:
        pattern_rng = _rng((self.seed, 1_000_033)) if self.frozen else rng
        draws = pattern_rng.random((self.n_steps, 1 if self.frozen else batch, self.input_size))
        xs = np.broadcast_to(draws < self.rate, (self.n_steps, batch, self.input_size))
        ys = np.broadcast_to(self.target_curve()[:, None, None], (self.n_steps, batch, 1))
        return xs.astype(np.float32), ys.astype(np.float32)


@dataclasses.dataclass
class DelayedRecall(Task):
    """Copy task: see ``seq_len`` symbols, wait ``delay`` steps, then recall them in order.

    Inputs: ``n_symbols`` one-hot channels (the sequence, one symbol per step) and one recall
    cue channel, on during the ``seq_len`` recall steps. Targets: the one-hot symbol at each
    recall step, zeros elsewhere. Masked cross-entropy (no loss outside the recall window).
    Suggested model: GRU + linear readout (``spiking=True``: ALIF + leaky readout).

    Examples
    --------
    >>> task = DelayedRecall(n_symbols=3, seq_len=2, delay=4)
    >>> task.n_steps, task.input_size, task.output_size
    (8, 4, 3)
    """

    name: ClassVar[str] = "delayed_recall"
    adaptive_neurons: ClassVar[bool] = True

    n_symbols: int = 4
    seq_len: int = 3
    delay: int = 5

    @property
    def input_size(self) -> int:
        return self.n_symbols + 1

    @property
    def output_size(self) -> int:
        return self.n_symbols

    @property
    def n_steps(self) -> int:
        return 2 * self.seq_len + self.delay

    def loss(self, y_pred: jax.Array, y_target: jax.Array) -> jax.Array:
        """Cross-entropy over the recall steps (:func:`masked_cross_entropy`)."""
        return masked_cross_entropy(y_pred, y_target)

    def _episode(self, rng: np.random.Generator, batch: int) -> tuple[np.ndarray, np.ndarray]:
        symbols = rng.integers(0, self.n_symbols, (self.seq_len, batch))
        xs = np.zeros((self.n_steps, batch, self.input_size), np.float32)
        ys = np.zeros((self.n_steps, batch, self.output_size), np.float32)
        recall_start = self.seq_len + self.delay
        steps, samples = np.meshgrid(np.arange(self.seq_len), np.arange(batch), indexing="ij")
        xs[steps, samples, symbols] = 1.0
        xs[recall_start:, :, self.n_symbols] = 1.0
        ys[recall_start + steps, samples, symbols] = 1.0
        return xs, ys


@dataclasses.dataclass
class EvidenceAccumulation(Task):
    """Count left/right cues, wait, then report the majority side (e-prop's evidence task).

    Four populations of ``channels_per_group`` Poisson input channels: left cues, right cues,
    the decision cue and background noise. ``n_cues`` (odd) cues, each ``cue_steps`` long and
    followed by ``gap_steps`` of silence, each on a random side; after ``delay`` steps the
    decision cue is on for ``decision_steps`` steps, during which the target is the one-hot
    majority side (0 = left, 1 = right). Masked cross-entropy. Suggested model: recurrent
    ALIF (two hidden states per neuron) + leaky readout.

    Examples
    --------
    >>> task = EvidenceAccumulation()
    >>> task.input_size, task.output_size
    (16, 2)
    """

    name: ClassVar[str] = "evidence_accumulation"
    spiking_by_default: ClassVar[bool] = True
    adaptive_neurons: ClassVar[bool] = True
    output_size: ClassVar[int] = 2

    n_cues: int = 7
    cue_steps: int = 4
    gap_steps: int = 3
    delay: int = 10
    decision_steps: int = 8
    channels_per_group: int = 4
    rate_on: float = 0.4
    rate_noise: float = 0.05

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n_cues % 2 == 0:
            raise ValueError(
                f"EvidenceAccumulation needs an odd n_cues (no ties), got {self.n_cues}."
            )

    @property
    def input_size(self) -> int:
        return 4 * self.channels_per_group

    @property
    def n_steps(self) -> int:
        return self.n_cues * (self.cue_steps + self.gap_steps) + self.delay + self.decision_steps

    def loss(self, y_pred: jax.Array, y_target: jax.Array) -> jax.Array:
        """Cross-entropy over the decision steps (:func:`masked_cross_entropy`)."""
        return masked_cross_entropy(y_pred, y_target)

    def _episode(self, rng: np.random.Generator, batch: int) -> tuple[np.ndarray, np.ndarray]:
        k, period = self.channels_per_group, self.cue_steps + self.gap_steps
        sides = rng.integers(0, 2, (self.n_cues, batch))
        rates = np.zeros((self.n_steps, batch, 4), np.float64)
        for cue in range(self.n_cues):
            start = cue * period
            rates[start : start + self.cue_steps, np.arange(batch), sides[cue]] = self.rate_on
        decision_start = self.n_steps - self.decision_steps
        rates[decision_start:, :, 2] = self.rate_on
        rates[:, :, 3] = self.rate_noise
        per_channel = np.repeat(rates, k, axis=-1)
        xs = (rng.random(per_channel.shape) < per_channel).astype(np.float32)
        majority = (sides.sum(0) * 2 > self.n_cues).astype(int)
        ys = np.zeros((self.n_steps, batch, 2), np.float32)
        ys[decision_start:, np.arange(batch), majority] = 1.0
        return xs, ys


@dataclasses.dataclass
class LeakyIntegrator(Task):
    r"""Track a leaky integral of white noise: :math:`y_t = \lambda y_{t-1} + (1-\lambda) u_t`.

    ``λ = exp(-1/tau)`` per channel, ``u_t ~ N(0, noise_std²)``, ``y_{-1} = 0``; output size
    equals input size. MSE loss. Its recurrence is element-wise, so the suggested
    :class:`~etp_viz.nn.MiniGRU` (diagonal hidden Jacobian) can represent it exactly and
    D-RTRL is exact on it.

    Examples
    --------
    >>> xs, ys = LeakyIntegrator(input_size=1, tau=2.0).sample(0)
    >>> xs.shape
    (100, 1)
    """

    name: ClassVar[str] = "leaky_integrator"
    rate_cell: ClassVar[type] = nn.MiniGRU

    input_size: int = 2
    n_steps: int = 100
    tau: float = 10.0
    noise_std: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.tau <= 0:
            raise ValueError(f"LeakyIntegrator needs tau > 0, got {self.tau}.")

    @property
    def output_size(self) -> int:
        return self.input_size

    def _episode(self, rng: np.random.Generator, batch: int) -> tuple[np.ndarray, np.ndarray]:
        decay = math.exp(-1.0 / self.tau)
        xs = rng.normal(0.0, self.noise_std, (self.n_steps, batch, self.input_size))
        ys = np.zeros_like(xs)
        y = np.zeros((batch, self.input_size))
        for t in range(self.n_steps):
            y = decay * y + (1.0 - decay) * xs[t]
            ys[t] = y
        return xs.astype(np.float32), ys.astype(np.float32)


#: Teaching tasks by name.
TASKS: dict[str, type[Task]] = {
    cls.name: cls for cls in (DelayedRecall, SineRegression, EvidenceAccumulation, LeakyIntegrator)
}
_ALIASES = {
    "copy": "delayed_recall",
    "sine_regression": "sine",
    "evidence": "evidence_accumulation",
}


def get_task(name: str, **options: Any) -> Task:
    """Build the task called ``name`` (see :data:`TASKS`) with ``options`` as its fields.

    Examples
    --------
    >>> get_task("copy", seq_len=2).n_steps
    9
    """
    key = _ALIASES.get(name.lower().replace("-", "_"), name.lower().replace("-", "_"))
    if key not in TASKS:
        raise ValueError(
            f"Unknown task {name!r}. Valid names: {sorted(TASKS)} (aliases: {sorted(_ALIASES)})."
        )
    cls = TASKS[key]
    valid = [field.name for field in dataclasses.fields(cls)]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise TypeError(f"{cls.__name__} got unknown options {unknown}; valid options: {valid}.")
    return cls(**options)
