"""The live explorer: show() with data, pushes to the front end (no kernel), requests."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import etp_viz
from tests.live.models import OneStepLearner, TinyRNN, sine_data


@pytest.fixture
def live():
    model = TinyRNN()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the plain-jnp test model has no ETP relations
        ex = etp_viz.show(
            model,
            np.zeros(2, np.float32),
            algorithm=OneStepLearner(model),
            data=sine_data,
            steps_per_frame=5,
        )
    ex.sent = []
    ex.send = lambda content, buffers=None: ex.sent.append((content, buffers))
    return ex


def test_show_with_data_returns_live_explorer_with_panels(live):
    assert type(live).__name__ == "LiveExplorer"
    assert [p["name"] for p in live.live_panels] == ["loss", "trace/input_trace"]


def test_step_pushes_float32_buffers(live):
    live.step(12)
    content, buffers = live.sent[0]
    assert content["type"] == "live" and content["name"] == "loss" and content["shape"] == [12]
    values = np.frombuffer(buffers[0], "<f4")
    np.testing.assert_allclose(values, live.history.loss, rtol=1e-6)


def test_pushes_are_rate_limited(live):
    live.max_rate = 1e-3  # at most one push per ~15 minutes
    live.run(60, background=False)
    assert live.pushes <= 2  # the first frame, then only the stop


def test_requests_drive_the_session(live):
    reply = live._answer({"type": "request", "id": 7, "method": "live_step", "params": {"n": 3}})
    assert reply == {
        "type": "response",
        "id": 7,
        "result": {"step": 3, "running": False},
        "error": None,
    }
    live._answer({"type": "request", "id": 8, "method": "live_reset", "params": {}})
    assert live.history.num_steps == 0


def test_failure_is_shown_in_the_error_trait(live):
    def bad(t):
        raise OSError("disk gone")

    live.session.set_data(bad)
    reply = live._answer({"type": "request", "id": 9, "method": "live_step", "params": {}})
    assert "disk gone" in reply["error"]
    assert "data function raised OSError" in live.error
    live.session.set_data(sine_data)
    live.step(1)


def test_saved_state_embeds_history(live):
    live.step(4)
    assert live.frontend_state()["live_history"]["steps"] == [0, 1, 2, 3]


def test_unknown_option_lists_explorer_and_session_options():
    with pytest.raises(TypeError, match=r"(?s)bogus.*Live-session options.*learning_rate"):
        etp_viz.show(TinyRNN(), np.zeros(2, np.float32), data=sine_data, bogus=1)


def test_session_options_without_data_teach():
    with pytest.raises(TypeError, match="need a live run"):
        etp_viz.show(TinyRNN(), np.zeros(2, np.float32), learning_rate=0.1)


def test_heatmap_pushes_carry_the_measured_steps_only():
    """dh/dy and dh/dh panels get one row per measured step, with its step number (no
    all-NaN "not measured" rows that the page would draw as grey columns)."""
    task = etp_viz.tasks.get_task("sine")
    ex = etp_viz.show(
        task.suggested_model(),
        task.example_input(),
        task=task,
        steps_per_frame=16,
        record_every=4,
    )
    ex.sent = []
    ex.send = lambda content, buffers=None: ex.sent.append((content, buffers))
    ex.step(32)
    heatmaps = [(c, b) for c, b in ex.sent if c["name"].split("/")[0] in ("df", "dhdh")]
    assert heatmaps, [c["name"] for c, _ in ex.sent]
    for content, buffers in heatmaps:
        rows = np.frombuffer(buffers[0], "<f4").reshape(content["shape"])
        assert content["steps"] == [3, 7, 11, 15, 19, 23, 27, 31]
        assert rows.shape[0] == len(content["steps"])
        assert not np.isnan(rows).all(axis=1).any()
