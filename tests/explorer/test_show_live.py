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


def test_every_synchronous_step_is_pushed(live):
    """Rate limiting applies to background runs only: a step has no stop event to flush it."""
    live.max_rate = 1e-3
    live.step(1)
    live.step(1)
    assert live.pushes == 2
    losses = [np.frombuffer(b[0], "<f4") for c, b in live.sent if c["name"] == "loss"]
    assert [len(v) for v in losses] == [1, 2]


def test_static_output_of_a_live_run_carries_its_plots(live):
    live.step(6)
    data, _ = live._repr_mimebundle_()
    page = data["text/html"]
    assert page.count("data:image/png;base64,") >= 1 and "alt='loss'" in page
    assert "application/vnd.jupyter.widget-view+json" in data


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_verify_request_measures_the_session_window_beside_the_claims():
    import brainstate

    from tests.learn import archs

    arch = archs.Arch((archs.Layer(rec="dense"),))
    model = archs.build(arch)

    def data(step):
        x = np.sin(0.3 * step + np.arange(archs.N, dtype=np.float32))
        return x.astype(np.float32), np.zeros(2, np.float32)

    ex = etp_viz.show(model, np.zeros(archs.N, np.float32), data=data, steps_per_frame=4)
    ex.send = lambda content, buffers=None: None
    ex.step(10)
    before = {k: np.asarray(v.value).copy() for k, v in brainstate.graph.states(model).items()}
    reply = ex._answer(
        {"type": "request", "id": 1, "method": "live_verify", "params": {"steps": 6}}
    )
    assert reply["error"] is None, reply
    rows = {r["path"]: r for r in ex.verification["rows"]}
    assert rows["layers.0.Wrec"]["claim"] == "approximate"
    assert rows["Wo"]["claim"] == "exact" and rows["Wo"]["ok"]
    assert reply["result"]["rows"] == len(rows)
    after = {k: np.asarray(v.value) for k, v in brainstate.graph.states(model).items()}
    for key, value in before.items():  # verifying does not move the run
        np.testing.assert_array_equal(after[key], value)
    assert ex.session.step_count == 10
