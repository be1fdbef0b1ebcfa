"""The live panels of one session (Python side): weight names in titles, axis titles,
tooltips, chance levels, constants explained, activity pushes of the last episode."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from etp_viz import tasks
from etp_viz.explorer.live_explorer import build_explorer
from etp_viz.explorer.live_panels import _episode_window, panel_specs, panel_values


@pytest.fixture(scope="module")
def explorer():
    task = tasks.get_task("sine")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex = build_explorer(task.suggested_model(hidden_size=8), task.example_input(), task=task)
        sent = []
        ex.send = lambda content, buffers=None: sent.append((content, buffers))
        ex.sent = sent
        ex.step(130)
    return ex


def test_titles_name_weights_and_every_panel_has_axis_titles_and_a_tooltip(explorer):
    specs = {p["name"]: p for p in explorer.live_panels}
    assert specs["trace/r0.g0"]["title"] == "‖ε‖ rnn.W.weight → rnn.V"
    assert specs["dhdh/g1"]["title"] == "dh/dh readout.r"
    assert specs["df/r1.g1"]["title"] == "dh/dy readout.W.weight → readout.r"
    for spec in explorer.live_panels:
        assert spec["tooltip"] and spec["x_label"] and spec["y_label"], spec["name"]
        assert "r0" not in spec["title"] and "g0" not in spec["title"]


def test_the_loss_panel_has_a_chance_line_and_smoothing(explorer):
    loss = explorer.live_panels[0]
    task = explorer.session.options["task"]
    assert loss["name"] == "loss" and loss["smooth"] and loss["episode"] == task.n_steps
    assert loss["chance"] == pytest.approx(task.chance_loss)


def test_constant_panels_know_where_their_value_comes_from(explorer):
    specs = {p["name"]: p for p in explorer.live_panels}
    steps, values = explorer.history.measured("dhdh/g1")
    value = float(values[-1, 0])
    assert np.allclose(values, value)  # the readout's leak: constant over units and steps
    texts = [
        c["text"]
        for c in specs["dhdh/g1"]["constants"]
        if math.isclose(c["value"], value, rel_tol=1e-5)
    ]
    tau = explorer.session.options["task"].recipe().readout_tau  # the readout the task built
    assert value == pytest.approx(math.exp(-1.0 / tau), rel=1e-5)
    assert texts and "exp(−Δt/τ)" in texts[0] and f"τ = {tau:g}" in texts[0]


def test_activity_pushes_the_last_complete_episode(explorer):
    last = {c["name"]: (c, b) for c, b in explorer.sent}
    content, buffers = last["activity/spikes"]
    assert content["steps"] == list(range(0, 100)) and content["shape"] == [100, 8]
    content, _ = last["activity/synapse"]
    assert content["shape"] == [100, 3, 8]
    synapse = next(p for p in explorer.live_panels if p["name"] == "activity/synapse")
    assert synapse["weight"] == "rnn.W.weight" and "rnn.W.weight[0, j]" in synapse["title"]


def test_episode_window_before_and_after_a_complete_episode():
    steps = np.arange(5, 37)
    assert _episode_window(steps, 10) == slice(15, 25)  # steps 20..29
    assert _episode_window(np.arange(0, 7), 10) == slice(0, 7)  # none complete yet


def test_a_classification_task_gets_accuracy_with_chance_and_a_masked_loss():
    task = tasks.get_task("delayed_recall", seq_len=1, delay=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex = build_explorer(task.suggested_model(hidden_size=4), task.example_input(), task=task)
        ex.send = lambda content, buffers=None: None
        ex.step(9)
    specs = {p["name"]: p for p in panel_specs(ex.session)}
    assert specs["accuracy"]["chance"] == pytest.approx(1 / task.output_size)
    assert specs["loss"]["masked"] and "target" in specs["loss"]["tooltip"]
    loss, _ = panel_values(ex.history, specs["loss"], 500)
    labelled = ex.history["accuracy/labelled"] > 0
    assert np.isnan(loss[~labelled]).all()
    np.testing.assert_allclose(loss[labelled], ex.history.loss[labelled])
