"""The lessons' networks and recorded runs: what each notebook builds and each page replays.

Every ``*_runs(steps)`` returns ``{label: explorer}``, one live explorer per learner or knob
value (built headless, :func:`etp_viz.explorer.live_explorer.build_explorer`), each trained
``steps`` steps on the lesson's task from the same weights and data. The notebooks build the
same networks from here, so the page and the notebook show one run.

Examples
--------
>>> net = leaky_input_net(hidden=4, batch_size=2)
>>> sorted(p for p in ("rnn.w_in", "rnn.decay_logit") if p)  # its two cell weights
['rnn.decay_logit', 'rnn.w_in']
"""

from __future__ import annotations

import functools
from typing import Any

import brainstate
import jax
import jax.numpy as jnp

from etp_viz import nn
from etp_viz import tasks as tasks_
from etp_viz.explorer.live_explorer import build_explorer

__all__ = [
    "DECAYS",
    "EPROP_RUNS",
    "EPROP_STEPS",
    "MEMORY_FIDELITY_EVERY",
    "MEMORY_HIDDEN",
    "MEMORY_RUNS",
    "MEMORY_STEPS",
    "RELATION_RUNS",
    "RELATION_STEPS",
    "LeakyInputCell",
    "eprop_runs",
    "fall_behind_runs",
    "leaky_input_net",
    "memory_runs",
    "relation_runs",
    "relation_task",
]

#: lesson 2: the evidence task's recipe budget
EPROP_STEPS = 8000
EPROP_RUNS = ("bptt", "eprop (symmetric)", "eprop (random feedback)")
#: lesson 3: a GRU small enough for exact RTRL on a laptop
MEMORY_HIDDEN = 16
MEMORY_STEPS = 512
DECAYS = (0.0, 0.5, 0.9)
MEMORY_FIDELITY_EVERY = 50
MEMORY_RUNS = ("rtrl", "d_rtrl", *(f"es_d_rtrl (decay {d})" for d in DECAYS))
#: lesson 4
RELATION_STEPS = 1500
RELATION_RUNS = ("d_rtrl as written", "d_rtrl after lift")


def _explorer(
    model: Any, task: Any, algorithm: Any, steps: int, budget: int | None = None, **options: Any
) -> Any:
    """A live explorer of ``model`` on ``task`` trained ``steps`` steps. ``budget``: where the
    lesson ends when it is not the task recipe's own (lessons 3 and 4 stop earlier), so the
    page says "step N of <the lesson's budget>" and shows the lesson's summary there."""
    explorer = build_explorer(model, task.example_input(), task=task, algorithm=algorithm,
                              **options)  # fmt: skip
    if budget is not None:
        explorer.runner.budget = int(budget)
    explorer.step(steps)
    return explorer


def fall_behind_runs(steps: int, seed: int = 0) -> dict[str, Any]:
    """Lesson 1: BPTT and D-RTRL on delayed recall (notebook 07's compare run, one by one);
    ``seed`` draws the task's data and the network's weights."""
    task = tasks_.get_task("delayed_recall", seed=seed)
    return {
        name: _explorer(task.suggested_model(), task, name, steps) for name in ("bptt", "d_rtrl")
    }


def eprop_learners() -> dict[str, Any]:
    """Lesson 2's learners by label: BPTT, e-prop with symmetric and with random feedback."""
    from etp_viz.learn.etp.eprop import EProp

    return dict(zip(EPROP_RUNS, ("bptt", "eprop", functools.partial(EProp, feedback="random"))))


def eprop_runs(steps: int, seed: int = 0) -> dict[str, Any]:
    """Lesson 2: the evidence task's ALIF network under each of :func:`eprop_learners`."""
    task = tasks_.get_task("evidence_accumulation", seed=seed)
    return {
        label: _explorer(task.suggested_model(), task, learner, steps)
        for label, learner in eprop_learners().items()
    }


def memory_runs(steps: int, seed: int = 0) -> dict[str, Any]:
    """Lesson 3: RTRL, D-RTRL and ES-D-RTRL at each of :data:`DECAYS` on delayed recall with
    :data:`MEMORY_HIDDEN` GRU units, each measuring its gradient's fidelity to BPTT every
    :data:`MEMORY_FIDELITY_EVERY` steps (the cosine the lesson's claim is about)."""
    task = tasks_.get_task("delayed_recall", seed=seed)
    every = {"fidelity_every": MEMORY_FIDELITY_EVERY}
    runs = {
        name: _explorer(
            task.suggested_model(hidden_size=MEMORY_HIDDEN),
            task,
            name,
            steps,
            MEMORY_STEPS,
            **every,
        )  # fmt: skip
        for name in ("rtrl", "d_rtrl")
    }
    for decay, label in zip(DECAYS, MEMORY_RUNS[2:]):
        model = task.suggested_model(hidden_size=MEMORY_HIDDEN)
        runs[label] = _explorer(model, task, "es_d_rtrl", steps, MEMORY_STEPS, decay=decay, **every)
    return runs


class LeakyInputCell(brainstate.nn.Module):
    """A leaky rate cell whose input weight is used with a plain ``x @ W`` (no ETP op):
    ``h = a * h + (1 - a) * tanh(x @ w_in)``, ``a = sigmoid(decay_logit)`` per unit.

    Its recurrence is element-wise, so D-RTRL would be exact on ``w_in``, if the compiler
    could relate it to ``h``: the plain product hides it (lesson 4)."""

    def __init__(self, n_in: int, n_hidden: int) -> None:
        super().__init__()
        self.n_hidden = n_hidden
        scale = 1.0 / jnp.sqrt(n_in)
        self.w_in = brainstate.ParamState(brainstate.random.normal(size=(n_in, n_hidden)) * scale)
        self.decay_logit = brainstate.ParamState(jnp.zeros(n_hidden))  # a = 0.5: a short memory

    def init_state(self, batch_size: int | None = None, **kwargs: Any) -> None:
        shape = (self.n_hidden,) if batch_size is None else (batch_size, self.n_hidden)
        self.h = brainstate.HiddenState(jnp.zeros(shape))

    def update(self, x: jax.Array) -> jax.Array:
        a = jax.nn.sigmoid(self.decay_logit.value)
        self.h.value = a * self.h.value + (1.0 - a) * jnp.tanh(x @ self.w_in.value)
        return self.h.value


def relation_task(seed: int = 0) -> Any:
    """Lesson 4's task: a leaky integral of noise, 2 channels (``leaky_integrator``)."""
    return tasks_.get_task("leaky_integrator", seed=seed)


def leaky_input_net(hidden: int = 8, batch_size: int | None = None, seed: int = 0) -> Any:
    """Lesson 4's network: :class:`LeakyInputCell` and a linear readout, states initialised."""
    task = relation_task()
    batch = task.batch_size if batch_size is None else batch_size
    with brainstate.random.seed_context(seed):
        net = tasks_.RecurrentNet(LeakyInputCell(task.input_size, hidden),
                                  nn.Linear(hidden, task.output_size))  # fmt: skip
    return brainstate.nn.init_all_states(net, batch_size=batch)


def relation_runs(steps: int, seed: int = 0) -> dict[str, Any]:
    """Lesson 4: D-RTRL on :func:`leaky_input_net` as written and with ``lift=True``."""
    task = relation_task(seed)
    return {
        label: _explorer(
            leaky_input_net(seed=seed), task, "d_rtrl", steps, RELATION_STEPS, lift=lift
        )
        for label, lift in zip(RELATION_RUNS, (False, True))
    }
