"""Where a live session gets its data, loss, optimizer and algorithm from (option plumbing),
and the one function that assembles a session from its options (:func:`assemble_session`).

Everything here turns a user's option into one small callable, and wraps user code so that an
exception in it becomes a :class:`UserCodeError` naming the function and the step.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, runtime_checkable

import brainstate
import jax.numpy as jnp

from etp_viz.learn.registry import OnlineLearner, canonical_name, learner_names, resolve
from etp_viz.tasks.base import UPDATE_MODES, Task

from .probe import Probe
from .recorder import Recorder

__all__ = [
    "LIVE_ALGORITHMS",
    "DataSource",
    "RECIPE_OPTIONS",
    "SessionParts",
    "UserCodeError",
    "apply_recipe",
    "assemble_session",
    "build_algorithm",
    "check_options",
    "frame_option",
    "session_options",
    "build_optimizer",
    "optimizer_name",
    "optimizer_from_options",
    "live_algorithm_name",
    "resolve_loss",
]

#: Every name a live session (and compare mode) builds (the registry's names; ``"snap<n>"``
#: for any n >= 1; ``"bptt"`` is BPTT over each whole episode (the exact reference), ``"tbptt"``
#: truncated BPTT over ``bptt_window`` steps).
LIVE_ALGORITHMS = learner_names()


class UserCodeError(RuntimeError):
    """An exception raised inside a user's data or loss function; the session stays usable.

    Attributes
    ----------
    where : str
        ``"data"`` or ``"loss"``.
    step : int
        The step being computed.
    """

    def __init__(self, where: str, step: int, cause: BaseException) -> None:
        self.where = where
        self.step = step
        fix = {
            "data": "fix the data function/iterable and call `session.set_data(...)`",
            "loss": "fix the loss and call `session.set_loss(new_loss)`",
        }[where]
        super().__init__(
            f"The {where} function raised {type(cause).__name__} at step {step}: {cause}\n"
            f"Nothing from this step was applied; the session is paused and usable. To go on, "
            f"{fix}, then step again."
        )


def _is_pair(value: Any) -> bool:
    try:
        return len(value) == 2
    except TypeError:
        return False


class DataSource:
    """Gives ``(x_t, y_t)`` for step ``t`` from a task, a function of the step, or an iterable.

    Examples
    --------
    >>> source = DataSource(lambda t: (t, 2 * t))
    >>> source(3)
    (3, 6)
    >>> source = DataSource([(1, 2), (3, 4)])
    >>> source(0), source(1)
    ((1, 2), (3, 4))
    """

    def __init__(self, data: Any) -> None:
        self.data = data
        self.kind = self._kind_of(data)
        self._iterator: Iterator[Any] | None = None
        self._next_step = 0

    @staticmethod
    def _kind_of(data: Any) -> str:
        if isinstance(data, Task):
            return "task"
        if callable(data):
            return "function"
        if isinstance(data, Iterable):
            return "iterable"
        raise TypeError(
            "`data` must be a teaching task (etp_viz.tasks.*), a function `t -> (x_t, y_t)` or "
            f"an iterable of `(x_t, y_t)` pairs; got {type(data).__name__}.\n"
            "Example: show(model, x, data=lambda t: (xs[t % len(xs)], ys[t % len(ys)]))"
        )

    def restart(self) -> None:
        """Go back to step 0 (an iterator that cannot be restarted keeps going)."""
        self._iterator = None
        self._next_step = 0

    def __call__(self, step: int) -> tuple[Any, Any]:
        try:
            if self.kind == "task":
                pair = self.data.step_data(step)
            elif self.kind == "function":
                pair = self.data(step)
            else:
                pair = self._from_iterable(step)
            x_t, y_t = pair
        except StopIteration as error:
            raise UserCodeError("data", step, RuntimeError("the data iterable is exhausted")) from (
                error
            )
        except Exception as error:  # noqa: BLE001 - any user failure is reported, not fatal
            raise UserCodeError("data", step, error) from error
        return x_t, y_t

    def many(self, start: int, n: int) -> tuple[list[tuple[Any, Any]], UserCodeError | None]:
        """The pairs of steps ``start..start+n-1`` and the error that stopped them early (None
        when all ``n`` came). A plain function is called in one tight loop (no per-step
        wrapper): the per-step host cost is the user's function itself."""
        pairs: list[tuple[Any, Any]] = []
        if self.kind != "function":
            for t in range(start, start + n):
                try:
                    pairs.append(self(t))
                except UserCodeError as failure:
                    return pairs, failure
            return pairs, None
        fn, t = self.data, start
        try:
            for t in range(start, start + n):  # noqa: B007 - `t` names the failing step
                pairs.append(fn(t))
        except Exception as error:  # noqa: BLE001 - any user failure is reported, not fatal
            return pairs, UserCodeError("data", t, error)
        try:  # every step gave a pair? (checked in C; the slow scan only to name a bad one)
            all_pairs = set(map(len, pairs)) <= {2}
        except TypeError:
            all_pairs = False
        if not all_pairs:
            bad = next(k for k, pair in enumerate(pairs) if not _is_pair(pair))
            try:
                self(start + bad)  # raises the error a single call gives
            except UserCodeError as failure:
                return pairs[:bad], failure
        return pairs, None

    def _from_iterable(self, step: int) -> Any:
        if self._iterator is None:
            self._iterator = iter(self.data)
            self._next_step = 0
        iterator = self._iterator
        while self._next_step < step:  # after a reset of a one-shot iterator: skip ahead
            next(iterator)
            self._next_step += 1
        self._next_step += 1
        return next(iterator)


def mse_loss(output: Any, target: Any) -> Any:
    """Mean squared error between the model output and the target (the default loss)."""
    return jnp.mean((jnp.asarray(output) - jnp.asarray(target)) ** 2)


def checked_task(task: Any) -> Task | None:
    """``task`` when it is a teaching task (:class:`~etp_viz.tasks.Task`) or None; anything
    else is a TypeError saying what to give instead."""
    if task is None or isinstance(task, Task):
        return task
    raise TypeError(
        f"`task` must be a teaching task (an etp_viz.tasks.Task, e.g. "
        f"etp_viz.tasks.get_task('sine')), got {type(task).__name__}; give your own data "
        "as `data=lambda t: (x_t, y_t)` or an iterable of pairs."
    )


def resolve_loss(loss: Callable | None, task: Task | None) -> Callable:
    """The user's loss, else the task's ``loss``, else MSE; checked to take two arguments."""
    if loss is None and task is not None:
        loss = task.loss
    if loss is None:
        return mse_loss
    if not callable(loss):
        raise TypeError(f"`loss` must be a function `(output, target) -> scalar`, got {loss!r}.")
    try:
        inspect.signature(loss).bind(None, None)
    except TypeError as error:
        raise TypeError(
            f"`loss` must accept two arguments `(output, target)`: {error}. "
            "Example: loss=lambda out, y: jnp.mean((out - y) ** 2)"
        ) from None
    except ValueError:  # builtins without a signature
        pass
    return loss


#: Session options a task's recipe fills in when the user leaves them at ``None``, and their
#: values without a recipe (``data=`` or a task without one).
RECIPE_OPTIONS: dict[str, Any] = {
    "optimizer": "sgd",
    "learning_rate": 1e-2,
    "update": "step",
    "bptt_window": 20,
}


def apply_recipe(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with every :data:`RECIPE_OPTIONS` key left at ``None`` taken from the task's
    :meth:`~etp_viz.tasks.Task.recipe` (no task or no recipe: SGD, 1e-2, per step, window 20).

    An option the user names replaces that option only: ``optimizer="sgd"`` on an Adam 3e-3
    recipe is SGD at 3e-3, ``optimizer="adam"`` on it changes nothing. An optimizer name is
    folded to optax's spelling (``"Adam"`` → ``"adam"``). An optax transformation carries its
    own learning rate, so ``learning_rate`` does not apply to it (giving both is an error).

    >>> apply_recipe({"optimizer": None, "learning_rate": None, "update": None,
    ...               "bptt_window": None, "task": None})["optimizer"]
    'sgd'
    """
    task = checked_task(options.get("task"))
    defaults = dict(RECIPE_OPTIONS)
    if task is not None:
        recipe = dataclasses.asdict(task.recipe())
        defaults = {key: recipe[key] for key in RECIPE_OPTIONS}
    optimizer = options.get("optimizer")
    if optimizer is not None and not isinstance(optimizer, str):
        if options.get("learning_rate") is not None:
            raise ValueError(
                f"learning_rate={options['learning_rate']!r} applies to an optimizer given by "
                "name; the optax transformation given as `optimizer` has its own. Give one: "
                "optimizer=optax.adam(1e-3), or optimizer='adam', learning_rate=1e-3."
            )
        defaults["learning_rate"] = None
    resolved = dict(options)
    if isinstance(optimizer, str):
        resolved["optimizer"] = optimizer_name(optimizer)
    for key, value in defaults.items():
        if resolved.get(key) is None:
            resolved[key] = value
    if resolved["update"] not in UPDATE_MODES:
        raise ValueError(
            f"Unknown update={resolved['update']!r}. Valid values: {list(UPDATE_MODES)} "
            "('step': apply the online gradient after every step; 'episode': sum it over the "
            "task's episode and apply it once, on the episode's last step)."
        )
    return resolved


def optimizer_name(name: str) -> str:
    """optax's spelling of an optimizer name (case folded: ``'Adam'`` → ``'adam'``); an
    unknown one is a ValueError.

    >>> optimizer_name("AdamW")
    'adamw'
    """
    import optax

    for candidate in (name, name.strip().lower()):
        if callable(getattr(optax, candidate, None)) and not candidate.startswith("_"):
            return candidate
    raise ValueError(
        f"optax has no optimizer {name!r}; give an optax name (e.g. 'sgd', 'adam', 'adamw', "
        "'rmsprop') or an optax transformation (optimizer=optax.adam(1e-3))."
    )


@runtime_checkable
class Optimizer(Protocol):
    """What a session needs of an optimizer: optax's ``init`` / ``update`` pair (an optax
    ``GradientTransformation``, or an object with both, like ``optax.MultiSteps``)."""

    def init(self, params: Any) -> Any: ...

    def update(self, updates: Any, state: Any, params: Any = None) -> Any: ...


def build_optimizer(
    optimizer: Any,
    learning_rate: float | None,
    update: str = "step",
    episode_steps: int | None = None,
) -> Any:
    """An optax ``GradientTransformation``: the user's, or one by name (``'sgd'``, ``'adam'``;
    None: ``optax.sgd``).

    ``update="episode"`` wraps it in ``optax.MultiSteps(every_k_schedule=episode_steps,
    use_grad_mean=False)``: the online gradients of an episode's steps are summed (the
    gradient of the episode's total loss, as e-prop and BPTT over an episode compute it) and
    the inner optimizer applies that sum once, on the episode's last step; the other steps
    change nothing. A session counts steps from 0 = the first step of episode 0 (a reset
    starts the count again), so every applied update covers exactly one episode.
    """
    import optax

    if optimizer is None:
        transform = optax.sgd(learning_rate)
    elif isinstance(optimizer, str):
        transform = getattr(optax, optimizer_name(optimizer))(learning_rate)
    elif isinstance(optimizer, Optimizer):
        transform = optimizer
    else:
        raise TypeError(
            "`optimizer` must be an optax GradientTransformation (e.g. optax.adam(1e-3)) or the "
            f"name of one ('sgd', 'adam'); got {optimizer!r}."
        )
    if update == "step":
        return transform
    if update != "episode":
        raise ValueError(f"Unknown update={update!r}. Valid values: {list(UPDATE_MODES)}.")
    if episode_steps is None:
        raise ValueError(
            "update='episode' needs an episode length: give `task=` (its n_steps is the "
            "episode), or use update='step' with `data=`."
        )
    multi = optax.MultiSteps(transform, every_k_schedule=int(episode_steps), use_grad_mean=False)
    return multi.gradient_transformation()


def optimizer_from_options(options: dict[str, Any]) -> Any:
    """:func:`build_optimizer` from a session's options (after :func:`apply_recipe`): the
    episode of ``update="episode"`` is the task's ``n_steps``."""
    task = checked_task(options.get("task"))
    episode_steps = task.n_steps if task is not None else None
    return build_optimizer(
        options["optimizer"], options["learning_rate"], options["update"], episode_steps
    )


def live_algorithm_name(algorithm: str) -> str:
    """The canonical learner name (``'SnAp-2'`` → ``'snap2'``, ``'ostl'`` →
    ``'ostl_recurrent'``; :func:`etp_viz.learn.registry.canonical_name`); an unknown one is a
    ValueError naming the valid ones.

    >>> live_algorithm_name("SnAp-3"), live_algorithm_name("TBPTT")
    ('snap3', 'tbptt')
    """
    return canonical_name(algorithm)


def build_algorithm(
    model: Any,
    algorithm: Any,
    decay: Any,
    mesh: Any = None,
    window: int = 20,
    episode: int | None = None,
) -> OnlineLearner:
    """A session's learner: :func:`etp_viz.learn.registry.resolve` with the session's settings
    (``'d_rtrl'`` → ``D_RTRL(model)``, ``'es_d_rtrl'`` → ``ES_D_RTRL(model, decay)``, ``'snap2'``
    → ``SnAp(model, n=2)``, ``'bptt'`` → ``BPTT(model, episode)``, ``'tbptt'`` →
    ``TruncatedBPTT(model, window)``; a class, a factory or a built learner likewise)."""
    return resolve(
        model,
        algorithm,
        where="algorithm",
        decay=decay,
        mesh=mesh,
        window=window,
        episode=episode,
    )


def check_options(options: dict[str, Any], valid: dict[str, Any], where: str) -> None:
    """Reject unknown keywords, listing the valid ones (shared with ``show``)."""
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise TypeError(
            f"{where}() got unknown option(s) {unknown}. Valid options: {sorted(valid)}."
        )


def frame_option(value: int | str, name: str) -> int | str:
    """``'auto'`` or a positive int, else a ValueError naming the option.

    >>> frame_option("auto", "record_every"), frame_option(8, "record_every")
    ('auto', 8)
    """
    if value == "auto":
        return value
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1 or isinstance(value, bool) or number != value:
        raise ValueError(
            f"`{name}` must be 'auto' or a positive integer, got {value!r}. Example: "
            f"Session(model, x, task=task, {name}=64)."
        )
    return number


def session_options(options: dict[str, Any], valid: dict[str, Any], where: str) -> dict[str, Any]:
    """A session's (or a comparison's) options, checked and complete: an unknown keyword is a
    TypeError listing ``valid`` (the options with their defaults), the task's recipe fills
    what is left at None (:func:`apply_recipe`), the frame options are ``'auto'`` or positive
    and exactly one of ``task`` / ``data`` is given."""
    check_options(options, valid, where)
    opts = apply_recipe({**valid, **options})
    for name in ("steps_per_frame", "record_every"):
        frame_option(opts[name], name)
    if opts["task"] is not None and opts["data"] is not None:
        raise ValueError("Give either `task` or `data`, not both.")
    if opts["task"] is None and opts["data"] is None:
        raise ValueError(
            "A live session needs data: `task=etp_viz.tasks.SineRegression()` or "
            "`data=lambda t: (x_t, y_t)`."
        )
    return opts


@dataclasses.dataclass(frozen=True)
class SessionParts:
    """What a live session runs, assembled by :func:`assemble_session` from its checked
    ``options``: the data source, the loss, the optimizer, the learner (compiled), the probe
    (what a step measures) and the recorder (the on-device buffers of a frame)."""

    options: dict[str, Any]
    data: DataSource
    loss: Callable
    optimizer: Any
    algorithm: OnlineLearner
    probe: Probe
    recorder: Recorder


def assemble_session(model: Any, x: Any, options: dict[str, Any]) -> SessionParts:
    """The parts of a session of ``model`` on example input ``x`` (one step), from options
    checked by :func:`session_options`: each part is built from the options and the parts
    before it, and none holds the session. The model's states are initialised when it has
    none. :class:`~etp_viz.live.session.Session` and compare mode's sessions are built on it.
    """
    task = checked_task(options["task"])
    data = DataSource(options["data"] if options["data"] is not None else task)
    loss = resolve_loss(options["loss"], task)
    optimizer = optimizer_from_options(options)
    if not any(True for _ in model.states(brainstate.HiddenState).values()):
        brainstate.nn.init_all_states(model)
    algorithm = build_algorithm(
        model,
        options["algorithm"],
        options["decay"],
        options["mesh"],
        int(options["bptt_window"]),
        episode=task.n_steps if task is not None else None,
    )
    algorithm.compile_graph(x)
    probe = Probe(algorithm, model, task=task)
    frame = options["steps_per_frame"]
    capacity = max(int(options["capacity"]), 1 if frame == "auto" else int(frame))
    spec, dense = probe.spec(), tuple(probe.dense_spec())
    recorder = Recorder(spec, capacity=capacity, checks=tuple(probe.checks()), dense=dense)
    return SessionParts(options, data, loss, optimizer, algorithm, probe, recorder)
