"""The Session owns the lesson: with a task, ``run()`` stops at the recipe's step budget in a
headless session and in compare mode alike, and ``lesson()`` is the one summary of the run."""

from __future__ import annotations

import time

import numpy as np
import pytest

from etp_viz import tasks
from etp_viz.live import Comparison, Session
from etp_viz.live.lesson import episode_scores, lesson_budget, lesson_summary
from tests.live.models import OneStepLearner, TinyRNN, sine_data

BUDGET = 24


def short_sine():
    """The sine task with a lesson of :data:`BUDGET` steps (seconds, not minutes)."""
    return tasks.get_task("sine").with_recipe(steps=BUDGET)


def session_of(task, **options):
    model = TinyRNN(n_in=task.input_size)
    return Session(
        model,
        task.example_input(),
        task=task,
        algorithm=OneStepLearner(model),
        steps_per_frame=8,
        **options,
    )


def test_a_session_with_a_task_runs_to_the_recipes_budget_and_stops():
    task = short_sine()
    session = session_of(task)
    assert session.budget == lesson_budget(task) == BUDGET
    assert session.run(background=False) is session  # returns: the lesson ended
    assert session.step_count == BUDGET and session.budget_reached
    session.run(background=False)  # at the budget: nothing runs
    assert session.step_count == BUDGET
    session.run(8, background=False)  # an explicit number of steps is honoured
    assert session.step_count == BUDGET + 8
    session.reset()
    session.run()  # in the background too
    session.wait(120)
    assert session.step_count == BUDGET and not session.running


def test_continuing_past_the_budget_is_explicit_and_no_task_means_no_budget():
    session = session_of(short_sine())
    session.step(BUDGET)
    session.run(past_budget=True)
    deadline = time.monotonic() + 120
    while session.step_count <= BUDGET + 16 and time.monotonic() < deadline:
        time.sleep(0.02)
    session.pause()
    assert session.step_count > BUDGET + 16 and not session.running
    model = TinyRNN()
    free = Session(model, np.zeros(2, np.float32), algorithm=OneStepLearner(model), data=sine_data)
    assert free.budget is None


def test_the_sessions_lesson_is_the_summary_of_its_history():
    task = short_sine()
    session = session_of(task)
    session.run(background=False)
    summary = session.lesson()
    label = session.history.meta["algorithm"]
    same = lesson_summary({label: session.history}, budget=BUDGET)
    assert summary.to_json() == same.to_json()
    assert summary.ended and summary.step == BUDGET and summary.budget == BUDGET
    (row,) = summary.learners
    assert row["label"] == label
    assert row["loss"] == pytest.approx(episode_scores(session.history)["loss"])
    assert summary.chance_loss == pytest.approx(task.chance_loss)
    assert summary.text().startswith(f"Lesson ended at step {BUDGET} ")
    # one learner's dropped terms, as the page gives them (keyed ""), are named by its label
    terms = [{"weight": "W", "claim": "approximate", "terms": ["drops it"], "detail": ""}]
    assert session.lesson(dropped={"": terms}).dropped == {label: terms}


def test_compare_mode_runs_every_learner_to_the_budget_against_the_reference():
    task = short_sine()
    model = TinyRNN(n_in=task.input_size)
    comparison = Comparison(
        model,
        task.example_input(),
        ["bptt", OneStepLearner],
        task=task,
        fidelity_every=0,
        steps_per_frame=8,
    )
    assert comparison.budget == BUDGET
    comparison.run(background=False)
    assert {s.step_count for s in comparison.sessions.values()} == {BUDGET}
    comparison.run(background=False)  # at the budget: nothing runs
    assert comparison.step_count == BUDGET
    summary = comparison.lesson()
    assert summary.ended and summary.reference == "bptt"
    ratios = {row["label"]: row["ratio"] for row in summary.learners}
    losses = {k: episode_scores(h)["loss"] for k, h in comparison.histories.items()}
    assert ratios["bptt"] == 1.0
    assert ratios["onesteplearner"] == pytest.approx(losses["onesteplearner"] / losses["bptt"])
