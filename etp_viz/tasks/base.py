"""The base of the teaching tasks: losses, the suggested network, :class:`Recipe` and
:class:`Task` (data stream, loss, chance level, accuracy, lesson, recipe)."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import TYPE_CHECKING, Any, ClassVar

import brainstate
import jax
import jax.numpy as jnp
import numpy as np

from etp_viz import nn

__all__ = [
    "UPDATE_MODES",
    "Recipe",
    "RecurrentNet",
    "Task",
    "masked_cross_entropy",
    "mean_squared_error",
]

#: How a recipe (and a live session's ``update=`` option) applies the online gradient:
#: ``"step"`` after every step, ``"episode"`` once per episode (the sum over its steps).
UPDATE_MODES = ("step", "episode")


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


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How to train a task so that it visibly learns: chosen by measurement (``bench/tasks.py``).

    A live session (``etp_viz.live.Session(model, x, task=task)``, ``show(..., task=task)``,
    compare mode, ``python -m etp_viz demo``) uses the task's recipe for every option the user
    leaves at ``None`` (``optimizer``, ``learning_rate``, ``update``, ``bptt_window``);
    :func:`~etp_viz.tasks.get_task` builds the task with the recipe's ``batch_size`` and
    :meth:`Task.suggested_model` the network with its ``hidden_size`` and ``spiking``. An
    option the user names replaces that option only (``optimizer="sgd"`` on an Adam 3e-3
    recipe trains SGD at 3e-3); :meth:`Task.with_recipe` changes recipe fields (the budget,
    the batch, the network) and keeps the others.

    Attributes
    ----------
    optimizer : str
        An optax optimizer by name (``"adam"``, ``"sgd"``, ...).
    learning_rate : float
    batch_size : int or None
        Episodes learned in parallel (``None``: unbatched; a frozen-input task gains nothing
        from a batch).
    hidden_size : int
        Units of the suggested network.
    spiking : bool
        Spiking (LIF/ALIF + leaky readout) or rate (GRU / MiniGRU + linear readout) network.
    update : ``"step"`` or ``"episode"``
        Apply the online gradient after every step, or once per episode (summed over its
        steps, applied on its last step; e-prop's experiments do this).
    steps : int
        A step budget in which the exact learners show the lesson (fits in ~60 s on a 2-core
        CPU with the suggested network).
    bptt_window : int
        Window of truncated BPTT (``algorithm="bptt"``): it covers the task's memory span.
    readout_tau : float
        Time constant (steps) of the spiking network's leaky readout: its memory, which every
        online learner's gradient leaves out for the recurrent weights ("the effect on
        readout.r's future states"); the longer it is, the more they miss.

    Examples
    --------
    >>> Recipe(optimizer="adam", learning_rate=1e-2).update
    'step'
    """

    optimizer: str = "sgd"
    learning_rate: float = 1e-2
    batch_size: int | None = None
    hidden_size: int = 32
    spiking: bool = False
    update: str = "step"
    steps: int = 2000
    bptt_window: int = 20
    readout_tau: float = 10.0

    def __post_init__(self) -> None:
        if self.update not in UPDATE_MODES:
            raise ValueError(f"Recipe.update must be one of {UPDATE_MODES}, got {self.update!r}.")
        if self.batch_size is not None and int(self.batch_size) < 1:
            raise ValueError(f"Recipe.batch_size must be None or >= 1, got {self.batch_size}.")


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
    (as fields or properties), ``_episode(rng, batch) -> (xs, ys)`` as numpy arrays of
    shapes ``[T, batch, input_size]`` and ``[T, batch, output_size]``, a :attr:`lesson`, a
    :attr:`chance_loss` and a :meth:`recipe`.

    Parameters
    ----------
    seed : int
        Seeds the task's fixed structure, the stream of :meth:`step_data` and the weights of
        :meth:`suggested_model`.
    batch_size : int or None
        Batch used by :meth:`step_data`, :meth:`example_input` and :meth:`suggested_model`
        (``None``: unbatched). The class default is ``None``;
        :func:`~etp_viz.tasks.get_task` fills in the recipe's batch.
    """

    name: ClassVar[str] = "task"
    #: Whether :meth:`suggested_model` builds a spiking network by default.
    spiking_by_default: ClassVar[bool] = False
    #: Spiking model uses adaptive (ALIF, two-state) neurons: memory over longer delays.
    adaptive_neurons: ClassVar[bool] = False
    #: Rate cell of the non-spiking suggested model.
    rate_cell: ClassVar[type] = nn.GRUCell
    #: True for a task scored by :meth:`accuracy` (one-hot targets, cross-entropy loss).
    is_classification: ClassVar[bool] = False
    #: What a student should see on this task (plain words; the explorer shows it).
    lesson: ClassVar[str] = ""
    #: The learners the lesson compares (registry names, :mod:`etp_viz.learn.registry`):
    #: ``bench/tasks.py`` runs each for the recipe's budget, the user guide's tasks table
    #: lists them and the slow tests hold them to it.
    learners: ClassVar[tuple[str, ...]] = ("bptt", "d_rtrl", "es_d_rtrl", "eprop")
    #: Episodes are independent trials: a live session puts the network's hidden state and
    #: the learner's own state back to their start at each episode's first step, so the loss
    #: of an episode is a function of the weights alone and full BPTT over the episode
    #: (``algorithm="bptt"``) is its exact gradient. False: one continuing stream.
    episodic: ClassVar[bool] = True

    seed: int = 0
    batch_size: int | None = None

    if TYPE_CHECKING:  # every subclass provides these (a field, a class constant or a property)

        @property
        def input_size(self) -> int: ...

        @property
        def output_size(self) -> int: ...

        @property
        def n_steps(self) -> int: ...

    def __post_init__(self) -> None:
        if self.batch_size is not None and int(self.batch_size) < 1:
            raise ValueError(f"{type(self).__name__}: batch_size must be None or >= 1.")
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.type in ("int", int) and field.name != "seed" and int(value) < 1:
                raise ValueError(f"{type(self).__name__}: {field.name} must be >= 1, got {value}.")

    def _episode(self, rng: np.random.Generator, batch: int) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def default_recipe(self) -> Recipe:
        """The task's own recipe, measured in ``bench/tasks.py`` (subclasses override it)."""
        return Recipe(spiking=self.spiking_by_default)

    def recipe(self) -> Recipe:
        """The training recipe that makes this task learn (see :class:`Recipe`): the
        :meth:`default_recipe` with the changes of :meth:`with_recipe`, if any."""
        recipe = self.default_recipe()
        changes = self.__dict__.get("_recipe_changes")
        return dataclasses.replace(recipe, **changes) if changes else recipe

    def with_recipe(self, **changes: Any) -> Task:
        """A copy of this task whose :meth:`recipe` has ``changes`` and keeps every other field.

        A changed ``batch_size`` is also the copy's batch (as :func:`~etp_viz.tasks.get_task`
        builds a task with its recipe's batch); a changed ``steps`` is the lesson's budget
        (Run stops there), ``hidden_size`` / ``spiking`` the :meth:`suggested_model`'s.

        Examples
        --------
        >>> from etp_viz.tasks import get_task
        >>> task = get_task("sine").with_recipe(steps=500)
        >>> task.recipe().steps, task.recipe().optimizer, task.recipe().learning_rate
        (500, 'adam', 0.01)
        """
        valid = [field.name for field in dataclasses.fields(Recipe)]
        unknown = sorted(set(changes) - set(valid))
        if unknown:
            raise TypeError(
                f"{type(self).__name__}.with_recipe() got unknown recipe fields {unknown}; "
                f"valid fields: {valid}. Example: task.with_recipe(learning_rate=1e-3)."
            )
        merged = {**self.__dict__.get("_recipe_changes", {}), **changes}
        dataclasses.replace(self.default_recipe(), **merged)  # validates the new recipe
        batch = changes["batch_size"] if "batch_size" in changes else self.batch_size
        copy = dataclasses.replace(self, batch_size=batch)
        copy.__dict__["_recipe_changes"] = merged
        return copy

    def loss(self, y_pred: jax.Array, y_target: jax.Array) -> jax.Array:
        """The task's loss (MSE unless a subclass says otherwise)."""
        return mean_squared_error(y_pred, y_target)

    @property
    def chance_loss(self) -> float:
        """The loss per labelled step of a predictor that ignores the input.

        Classification: ``log(output_size)`` (uniform over the classes). Regression: the
        best constant prediction's MSE, the target's variance about its mean over the
        episode's steps (and the batch), estimated here from 64 episodes; subclasses with a
        closed form override it.
        """
        if self.is_classification:
            return math.log(self.output_size)
        _, ys = self.sample_numpy((self.seed, 7_777_777), 64)
        return float(np.mean(np.var(ys.astype(np.float64), axis=(0, 1))))

    @property
    def chance_accuracy(self) -> float | None:
        """The accuracy of guessing uniformly (``1 / output_size``); None for regression."""
        return 1.0 / self.output_size if self.is_classification else None

    def accuracy(self, y_pred: jax.Array, y_target: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(number correct, number labelled)`` (int32 scalars) over one step's labelled rows.

        A row is labelled when its one-hot target is not all zeros; it is correct when the
        arg-max of ``y_pred`` is the target class. Jittable. Regression tasks return
        ``(0, 0)``: accuracy is ``correct / labelled`` summed over steps, undefined there.
        """
        if not self.is_classification:
            zero = jnp.zeros((), jnp.int32)
            return zero, zero
        labelled = jnp.sum(y_target, axis=-1) > 0
        hit = jnp.argmax(y_pred, axis=-1) == jnp.argmax(y_target, axis=-1)
        return jnp.sum(hit & labelled, dtype=jnp.int32), jnp.sum(labelled, dtype=jnp.int32)

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

        Episode ``e`` is ``sample((seed, e), batch_size)``; on an :attr:`episodic` task a live
        session resets the network's state at each episode start (steps ``t`` with
        ``t % n_steps == 0``).
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
        self, hidden_size: int | None = None, spiking: bool | None = None
    ) -> brainstate.nn.Module:
        """A model for this task from :mod:`etp_viz.nn`, states initialised for ``batch_size``.

        ``hidden_size`` and ``spiking`` default to the :meth:`recipe`'s. ``spiking=True``: a
        recurrent LIF layer (ALIF for memory tasks) and a :class:`~etp_viz.nn.LeakyRateReadout`;
        ``spiking=False``: ``rate_cell`` and a :class:`~etp_viz.nn.Linear` readout. Weights
        are drawn from the task's seed.
        """
        recipe = self.recipe()
        hidden = recipe.hidden_size if hidden_size is None else int(hidden_size)
        spiking = recipe.spiking if spiking is None else spiking
        with brainstate.random.seed_context(self.seed):
            model = (
                self._spiking_model(hidden, recipe.readout_tau)
                if spiking
                else self._rate_model(hidden)
            )
        return brainstate.nn.init_all_states(model, batch_size=self.batch_size)

    def _rate_model(self, hidden: int) -> brainstate.nn.Module:
        cell = self.rate_cell(self.input_size, hidden)
        return RecurrentNet(cell, nn.Linear(hidden, self.output_size))

    def _spiking_model(self, hidden: int, readout_tau: float = 10.0) -> brainstate.nn.Module:
        # R = 1 / (1 - alpha) makes V integrate as V <- alpha V + I (e-prop's convention);
        # the gains give sparse but non-silent firing on every task's input statistics.
        # ALIF's soft reset subtracts the adaptive threshold A = v_th + beta a; differentiated,
        # it gives each neuron the self-Jacobian alpha (1 - A psi / v_th), whose size exceeds 1
        # near threshold once A > 2 v_th: the traces that carry it across the stream grow
        # without bound (the evidence task's D-RTRL trace overflowed at step ~3,100). e-prop
        # leaves the reset out of the derivative (Bellec et al. 2020, dv/dv = alpha), so does
        # the suggested ALIF (detach_reset); LIF's A = v_th keeps alpha (1 - psi) in [0, alpha].
        tau_mem = 20.0
        common = {"tau_mem": tau_mem, "recurrent": True, "R": 1.0 / (1.0 - math.exp(-1 / tau_mem))}
        if self.adaptive_neurons:
            w_init = functools.partial(nn.xavier_normal, gain=2.0)
            layer = nn.ALIF(
                self.input_size,
                hidden,
                tau_a=200.0,
                beta=0.5,
                w_init=w_init,
                detach_reset=True,
                **common,
            )
        else:
            w_init = functools.partial(nn.xavier_normal, gain=1.5)
            layer = nn.LIF(self.input_size, hidden, w_init=w_init, **common)
        readout = nn.LeakyRateReadout(hidden, self.output_size, tau=float(readout_tau))
        return RecurrentNet(layer, readout)
