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
  leaky readout, ``spiking=False`` a rate RNN;
- what a course reads off a run: ``lesson`` (what a student should see), ``chance_loss``
  (the loss of a predictor that ignores the input), ``is_classification``,
  ``accuracy(y_pred, y_target) -> (correct, labelled)`` and ``chance_accuracy``;
- ``recipe()``: the :class:`Recipe` (optimizer, learning rate, batch, network size, per-step
  or per-episode updates, step budget) chosen by measurement (``bench/tasks.py``) so that the
  task visibly learns within a minute on a laptop CPU. A live session uses it for the options
  the user leaves out, :func:`get_task` builds the task with its batch, and
  ``suggested_model()`` the network with its size.

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
>>> get_task("delayed_recall").batch_size == get_task("delayed_recall").recipe().batch_size
True
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .base import (
    UPDATE_MODES,
    Recipe,
    RecurrentNet,
    Task,
    masked_cross_entropy,
    mean_squared_error,
)
from .decisions import DelayedRecall, EvidenceAccumulation
from .regression import LeakyIntegrator, SineRegression

__all__ = [
    "TASKS",
    "UPDATE_MODES",
    "DelayedRecall",
    "EvidenceAccumulation",
    "LeakyIntegrator",
    "Recipe",
    "RecurrentNet",
    "SineRegression",
    "Task",
    "get_task",
    "masked_cross_entropy",
    "mean_squared_error",
]

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

    ``batch_size`` defaults to the task's :meth:`~Task.recipe` batch (pass
    ``batch_size=None`` for an unbatched stream), so that
    ``show(task.suggested_model(), task.example_input(), task=task)`` trains the way the
    recipe was measured. Building the class directly (``DelayedRecall()``) gives an unbatched
    task.

    Examples
    --------
    >>> get_task("copy", seq_len=2).n_steps
    9
    >>> get_task("copy", batch_size=None).batch_size is None
    True
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
    if "batch_size" in options:
        return cls(**options)
    task = cls(**options)
    return dataclasses.replace(task, batch_size=task.recipe().batch_size)
