"""Task recipes and metadata: what a session takes from a task's recipe, what the user's
options override, per-episode updates against a hand-accumulated BPTT gradient, chance
levels and accuracy against numpy."""

from __future__ import annotations

import dataclasses
import math
import warnings

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from etp_viz import tasks
from etp_viz.live import Session
from etp_viz.live.sources import apply_recipe, build_optimizer
from etp_viz.tasks import TASKS, Recipe, get_task
from tests.oracles import bptt_gradients


def _tiny_leaky(**options):
    return tasks.LeakyIntegrator(input_size=1, n_steps=4, tau=2.0, **options)


def _session(task, hidden=3, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the readout's non-temporal-parameter notice
        return Session(
            task.suggested_model(hidden_size=hidden), task.example_input(), task=task, **options
        )


def _params(model):
    states = model.states(brainstate.ParamState)
    return {path: jax.tree.map(np.asarray, state.value) for path, state in states.items()}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_task_has_a_recipe_lesson_and_chance_level(name):
    task = get_task(name)
    recipe = task.recipe()
    assert isinstance(recipe, Recipe) and recipe.update in tasks.UPDATE_MODES
    assert task.batch_size == recipe.batch_size  # get_task applies the recipe's batch
    assert type(task)().batch_size is None  # the class itself stays unbatched
    assert 1 <= len([s for s in task.lesson.split(". ") if s]) <= 3
    assert task.chance_loss > 0
    if task.is_classification:
        assert task.chance_loss == pytest.approx(math.log(task.output_size))
        assert task.chance_accuracy == pytest.approx(1 / task.output_size)
    else:
        assert task.chance_accuracy is None


@pytest.mark.parametrize("name", ["sine", "leaky_integrator"])
def test_regression_chance_loss_is_the_best_constants_mse(name):
    """The closed forms against the MSE of the best constant on sampled episodes."""
    task = get_task(name, batch_size=None)
    _, ys = task.sample_numpy((0, 1), 2048)
    best_constant = ys.astype(np.float64).mean(axis=(0, 1))
    empirical = float(np.mean((ys - best_constant) ** 2))
    assert task.chance_loss == pytest.approx(empirical, rel=0.05)


def test_suggested_model_follows_the_recipe():
    task = get_task("delayed_recall")
    model = task.suggested_model()
    assert model.readout._in_size[-1] == task.recipe().hidden_size
    assert type(get_task("sine").suggested_model().rnn).__name__ == "LIF"
    assert task.suggested_model(hidden_size=5).readout._in_size[-1] == 5


def test_accuracy_counts_labelled_rows_and_is_jittable():
    task = tasks.DelayedRecall(n_symbols=3)
    logits = jnp.array([[2.0, 0.0, 0.0], [0.0, 0.0, 1.0], [5.0, 0.0, 0.0], [0.0, 3.0, 0.0]])
    target = jnp.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 0], [0, 1.0, 0]])
    correct, labelled = jax.jit(task.accuracy)(logits, target)
    hits = (np.argmax(logits, -1) == np.argmax(target, -1)) & (np.asarray(target).sum(-1) > 0)
    assert (int(correct), int(labelled)) == (int(hits.sum()), 3)
    correct, labelled = tasks.SineRegression().accuracy(jnp.ones(1), jnp.zeros(1))
    assert (int(correct), int(labelled)) == (0, 0)


def test_session_takes_the_recipe():
    task = get_task("delayed_recall", n_symbols=3, seq_len=2)
    recipe = task.recipe()
    session = _session(task)
    for key in ("optimizer", "learning_rate", "update", "bptt_window"):
        assert session.options[key] == getattr(recipe, key)
    adam_moments = optax.tree_utils.tree_get_all_with_path(session.opt_state, "mu")
    assert bool(adam_moments) == (recipe.optimizer == "adam")


RECIPE_KEYS = ("optimizer", "learning_rate", "update", "bptt_window")


def _resolved(task, **named):
    resolved = apply_recipe({**dict.fromkeys(RECIPE_KEYS), "task": task, **named})
    return {key: resolved[key] for key in RECIPE_KEYS}


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("optimizer", "adam"),  # the recipe's own optimizer: nothing changes (issue 28)
        ("optimizer", "sgd"),
        ("learning_rate", 0.5),
        ("update", "episode"),
        ("update", "step"),
        ("bptt_window", 7),
    ],
)
@pytest.mark.parametrize("name", ["sine", "delayed_recall"])
def test_a_named_option_replaces_only_itself(name, option, value):
    task = get_task(name)
    recipe = task.recipe()
    expected = {key: getattr(recipe, key) for key in RECIPE_KEYS} | {option: value}
    assert _resolved(task, **{option: value}) == expected


def test_without_a_task_the_defaults_apply():
    assert _resolved(None) == {
        "optimizer": "sgd",
        "learning_rate": 1e-2,
        "update": "step",
        "bptt_window": 20,
    }
    assert _resolved(None, optimizer="adam")["learning_rate"] == 1e-2


def _effective_learning_rate(optimizer):
    """The size of the first update of a unit gradient: the learning rate for SGD and, up to
    Adam's epsilon, for Adam (its first step is lr * g / |g|)."""
    params = {"w": jnp.zeros(3)}
    updates, _ = optimizer.update({"w": jnp.ones(3)}, optimizer.init(params), params)
    return float(-updates["w"][0])


@pytest.mark.parametrize("optimizer", ["adam", "Adam", "sgd"])
def test_session_trains_at_the_recipes_learning_rate_under_a_named_optimizer(optimizer):
    """Issue 28: ``optimizer="adam"`` on the sine recipe (Adam 1e-3) trained at 1e-2."""
    # a recipe rate other than the no-task default 1e-2 (else a fallback to it would go
    # unnoticed), applied per step (so the first update shows it)
    task = get_task("delayed_recall", n_symbols=2, seq_len=1, delay=1, batch_size=2)
    task = task.with_recipe(learning_rate=3e-3, update="step")
    rate = task.recipe().learning_rate
    assert rate != 1e-2
    session = _session(task, optimizer=optimizer)
    assert session.options["optimizer"] == optimizer.lower()
    assert session.options["learning_rate"] == rate
    assert _effective_learning_rate(session.optimizer) == pytest.approx(rate, rel=1e-4)
    adam_moments = optax.tree_utils.tree_get_all_with_path(session.opt_state, "mu")
    assert bool(adam_moments) == (optimizer.lower() == "adam")


def test_an_optax_transformation_brings_its_own_learning_rate():
    task = get_task("sine")
    transform = optax.sgd(0.25)
    assert _resolved(task, optimizer=transform)["learning_rate"] is None
    assert _effective_learning_rate(build_optimizer(transform, None)) == pytest.approx(0.25)
    with pytest.raises(ValueError, match=r"learning_rate=0\.1 applies to an optimizer given by"):
        apply_recipe(
            {
                **dict.fromkeys(RECIPE_KEYS),
                "task": task,
                "optimizer": transform,
                "learning_rate": 0.1,
            }
        )
    with pytest.raises(ValueError, match=r"optax has no optimizer 'adamm'"):
        _resolved(task, optimizer="adamm")


def test_a_changed_batch_keeps_the_rest_of_the_recipe():
    default = get_task("delayed_recall")
    for task in (get_task("delayed_recall", batch_size=2), default.with_recipe(batch_size=2)):
        assert task.batch_size == 2 and task.example_input().shape[0] == 2
        assert _resolved(task) == _resolved(default)
        changed = dataclasses.replace(default.recipe(), batch_size=task.recipe().batch_size)
        assert task.recipe() == changed


@pytest.mark.parametrize(
    ("field", "value"), [("steps", 123), ("hidden_size", 5), ("learning_rate", 0.5)]
)
def test_with_recipe_changes_one_field(field, value):
    from etp_viz.live.lesson import lesson_budget

    task = get_task("sine")
    changed = task.with_recipe(**{field: value})
    assert changed.recipe() == dataclasses.replace(task.recipe(), **{field: value})
    assert changed.batch_size == task.batch_size and changed == task  # same task fields
    assert task.recipe().steps == 10_000  # the original is untouched
    assert lesson_budget(changed) == (123 if field == "steps" else task.recipe().steps)
    if field == "hidden_size":
        assert changed.suggested_model().readout._in_size[-1] == 5
    # changes accumulate, and a session takes the changed recipe
    other = "step" if task.recipe().update == "episode" else "episode"
    twice = changed.with_recipe(update=other)
    assert twice.recipe().update == other and getattr(twice.recipe(), field) == value
    assert _resolved(changed)["learning_rate"] == changed.recipe().learning_rate


def test_with_recipe_rejects_unknown_fields_and_bad_values():
    task = get_task("sine")
    with pytest.raises(TypeError, match=r"unknown recipe fields \['lr'\]; valid fields"):
        task.with_recipe(lr=0.1)
    with pytest.raises(ValueError, match="Recipe.update must be one of"):
        task.with_recipe(update="weekly")


def test_bad_update_names_the_valid_ones():
    task = _tiny_leaky()
    with pytest.raises(ValueError, match=r"update='weekly'.*\['step', 'episode'\]"):
        _session(task, update="weekly")
    with pytest.raises(ValueError, match=r"update='episode' needs an episode length"):
        build_optimizer("sgd", 0.1, "episode", None)


def test_episode_update_applies_the_summed_episode_gradient_once():
    """RTRL is exact, so the online gradient summed over the first episode is BPTT's gradient
    of the episode's summed loss; SGD applies it once, on the episode's last step."""
    task, lr = _tiny_leaky(), 0.5
    session = _session(task, algorithm="rtrl", optimizer="sgd", learning_rate=lr, update="episode")
    xs, ys = task.sample((task.seed, 0))
    expected = bptt_gradients(
        session.model,
        xs,
        lambda out: sum(task.loss(out[t], ys[t]) for t in range(task.n_steps)),
    )
    start = _params(session.model)
    session.step(task.n_steps - 1)
    jax.tree.map(np.testing.assert_array_equal, _params(session.model), start)
    session.step(1)
    after = _params(session.model)
    for path, grad in expected.items():
        got = jax.tree.map(lambda a, b: (a - b) / lr, start[path], after[path])
        jax.tree.map(lambda g, e: np.testing.assert_allclose(g, e, rtol=2e-4, atol=1e-6), got, grad)
    # the second episode changes nothing before its own last step, then applies once
    session.step(task.n_steps - 1)
    jax.tree.map(np.testing.assert_array_equal, _params(session.model), after)
    session.step(1)
    assert any(
        not np.array_equal(a, b)
        for a, b in zip(jax.tree.leaves(_params(session.model)), jax.tree.leaves(after))
    )


def test_reset_realigns_episode_updates():
    task = _tiny_leaky()
    session = _session(task, optimizer="sgd", learning_rate=0.5, update="episode")
    start = _params(session.model)
    session.step(2)
    session.reset()
    session.step(task.n_steps - 1)  # after the reset the episode starts again at step 0
    jax.tree.map(np.testing.assert_array_equal, _params(session.model), start)


def test_step_updates_change_the_weights_every_step():
    task = _tiny_leaky()
    session = _session(task, optimizer="sgd", learning_rate=0.5, update="step")
    start = _params(session.model)
    session.step(1)
    assert any(
        not np.array_equal(a, b)
        for a, b in zip(jax.tree.leaves(_params(session.model)), jax.tree.leaves(start))
    )


def test_compare_mode_gives_every_learner_the_recipe():
    from etp_viz.live import Comparison

    task = _tiny_leaky(batch_size=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        comparison = Comparison(
            task.suggested_model(hidden_size=3),
            task.example_input(),
            ["d_rtrl", "bptt"],
            task=task,
            update="episode",
            fidelity_every=0,
        )
    recipe = task.recipe()
    expected = (recipe.optimizer, recipe.learning_rate, "episode", recipe.bptt_window)
    for options in [comparison.options, *(s.options for s in comparison.sessions.values())]:
        keys = ("optimizer", "learning_rate", "update", "bptt_window")
        assert tuple(options[k] for k in keys) == expected
