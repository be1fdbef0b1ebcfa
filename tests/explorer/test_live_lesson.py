"""A lesson that ends: Run stops at the task recipe's step budget, the page gets a summary
computed in Python (final scores against chance, the gap to the exact reference), the first
frame is announced as compiling, and the whole run reaches the page downsampled."""

from __future__ import annotations

import dataclasses
import time
import warnings

import numpy as np
import pytest

import etp_viz
from etp_viz import tasks
from etp_viz.live.lesson import episode_scores, lesson_budget
from tests.live.models import OneStepLearner, TinyRNN, sine_data

SINE = type(tasks.get_task("sine"))


@dataclasses.dataclass
class ShortSine(SINE):
    """The sine task with a lesson of ``budget`` steps (seconds, not minutes)."""

    budget: int = 24

    def recipe(self):
        return dataclasses.replace(super().recipe(), steps=self.budget)


def show(task, tiny=False, **options):
    """The explorer of ``task`` (``tiny``: a plain-jnp RNN and a one-step learner, which
    compile in a fraction of the time of the task's network), recording what it sends."""
    model = TinyRNN(n_in=task.input_size) if tiny else task.suggested_model(hidden_size=4)
    if tiny:
        options["algorithm"] = OneStepLearner(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex = etp_viz.show(model, task.example_input(), task=task, **options)
    ex.sent, ex.statuses = [], []
    ex.send = lambda content, buffers=None: ex.sent.append((content, buffers))
    ex.observe(lambda change: ex.statuses.append(dict(change["new"])), names=["live_status"])
    return ex


def oracle_loss(history, episodes=20):
    """The final loss by hand: the mean of the raw losses of the last whole episodes."""
    episode = history.meta["episode"]
    end = history.num_steps // episode * episode or history.num_steps
    return float(np.mean(history.loss[max(end - episodes * episode, 0) : end]))


def test_run_stops_at_the_budget_with_a_summary_and_continuing_is_explicit():
    task = ShortSine(budget=24)
    ex = show(task, tiny=True, steps_per_frame=8)
    assert lesson_budget(task) == 24 == ex.session.budget == ex.live_status["budget"]
    ex.run(background=False)
    assert ex.session.step_count == 24
    lesson = ex.live_status["lesson"]
    assert lesson["ended"] and lesson["budget"] == 24 and lesson["step"] == 24
    (row,) = lesson["learners"]
    assert row["loss"] == pytest.approx(oracle_loss(ex.history), rel=1e-6)
    assert lesson["chance_loss"] == pytest.approx(task.chance_loss)
    assert "Lesson ended at step 24" in lesson["text"] and str(ex.lesson()) == lesson["text"]

    # stepping to the budget ends the lesson too, and a saved page carries its summary
    stepped = show(task, tiny=True, steps_per_frame=8)
    stepped.step(24)
    assert stepped.live_status["lesson"]["text"] == lesson["text"]
    assert stepped.frontend_state()["live_status"]["lesson"]["text"] == lesson["text"]

    ex.run(background=False)  # at the budget: nothing runs
    assert ex.session.step_count == 24
    ex.run(8, background=False)  # an explicit number of steps is honoured
    assert ex.session.step_count == 32
    ex._answer({"type": "request", "id": 1, "method": "live_run", "params": {"past_budget": True}})
    deadline = time.monotonic() + 120
    while ex.session.step_count <= 40 and time.monotonic() < deadline:
        time.sleep(0.05)
    ex.pause()
    assert ex.session.step_count > 40 and not ex.session.running
    assert "past the lesson's end" in ex.live_status["lesson"]["text"]
    ex.reset()
    assert ex.live_status["lesson"] is None


def test_without_a_task_run_is_unbounded_and_the_whole_run_reaches_the_page():
    model = TinyRNN()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex = etp_viz.show(
            model, np.zeros(2, np.float32), algorithm=OneStepLearner(model), data=sine_data
        )
    sent = []
    ex.send = lambda content, buffers=None: sent.append((content, buffers))
    assert ex.session.budget is None and ex.live_status["budget"] is None
    ex.step(1024)  # more than the recent window (500 steps)
    recent = [(c, b) for c, b in sent if c["name"] == "loss"][-1]
    assert recent[0]["shape"] == [500]
    content, buffers = [(c, b) for c, b in sent if c["name"] == "overview/loss"][-1]
    rows = np.frombuffer(buffers[0], "<f4").reshape(content["shape"])
    width = content["width"]
    assert content["overview"] == "loss" and rows.shape[1] == 4 and rows.shape[0] <= 512
    assert rows[0, 0] == 0 and rows[-1, 0] <= 1023 < rows[-1, 0] + width  # from step 0 to now
    loss = ex.history.loss.astype(np.float64)
    first = loss[:width]
    np.testing.assert_allclose(rows[0, 1:], [first.mean(), first.min(), first.max()], rtol=1e-5)


def test_the_first_frame_is_announced_as_compiling():
    ex = show(ShortSine(budget=8), tiny=True, steps_per_frame=8)
    ex.run(background=False)
    first = next(i for i, s in enumerate(ex.statuses) if s["compiling"])
    compiling = ex.statuses[first]["compiling"]
    assert compiling["label"] == "OneStepLearner" and compiling["index"] == 1 == compiling["total"]
    assert all(s["step"] == 0 for s in ex.statuses[: first + 1])  # before the first frame
    assert all(s["compiling"] is None for s in ex.statuses if s["step"] > 0)
    assert ex.statuses[-1]["step"] == 8


def test_compare_mode_compiles_with_a_count_and_measures_the_gap_to_the_exact_reference():
    task = ShortSine(budget=16)
    ex = show(task, algorithm=["rtrl", "d_rtrl"], steps_per_frame=16, fidelity_every=0)
    assert ex.exact_learners[:1] == ["rtrl"]  # exact on every weight: the reference
    ex.run(background=False)
    compiling = [s["compiling"] for s in ex.statuses if s.get("compiling")]
    assert [(c["index"], c["total"], c["label"]) for c in compiling][:2] == [
        (1, 2, "rtrl"),
        (2, 2, "d_rtrl"),
    ]
    lesson = ex.live_status["lesson"]
    assert lesson["ended"] and lesson["reference"] == "rtrl"
    ratios = {row["label"]: row["ratio"] for row in lesson["learners"]}
    scores = {k: episode_scores(h)["loss"] for k, h in ex.histories.items()}
    assert scores["rtrl"] == pytest.approx(oracle_loss(ex.histories["rtrl"]), rel=1e-6)
    assert ratios["rtrl"] == 1.0
    assert ratios["d_rtrl"] == pytest.approx(
        oracle_loss(ex.histories["d_rtrl"]) / oracle_loss(ex.histories["rtrl"]), rel=1e-6
    )
    # D-RTRL on the spiking sine network drops terms: named per weight, in plain words
    assert "rtrl" not in lesson["dropped"] and lesson["dropped"]["d_rtrl"]
    terms = [t for w in lesson["dropped"]["d_rtrl"] for t in w["terms"]]
    assert terms and not any("equation" in t for t in terms), terms
    overview = [(c, b) for c, b in ex.sent if c["name"] == "overview/loss"][-1][0]
    assert overview["shape"][:1] == [2] and overview["shape"][2] == 4


def test_the_page_reads_the_sessions_budget_and_lesson():
    """The budget and the summary are the session's (etp_viz.live), the page only shows them."""
    ex = show(ShortSine(budget=24), tiny=True, steps_per_frame=8)
    ex.session.budget = 16  # moved on the session: the page's Run follows it
    ex.run(background=False)
    assert ex.session.step_count == 16 and ex.live_status["budget"] == 16
    assert ex.live_status["lesson"] == ex.lesson().to_json()
    assert ex.lesson().to_json() == ex.session.lesson(dropped=ex.lesson().dropped).to_json()
