"""Session stepping, history, reset, options, pause/resume (no browser, no kernel)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from etp_viz.live.history import load_history
from etp_viz.live.session import Session
from tests.live.models import OneStepLearner, TinyRNN, sine_data


def make_session(**options):
    model = TinyRNN()
    options.setdefault("algorithm", OneStepLearner(model))
    options.setdefault("data", sine_data)
    return Session(model, np.zeros(2, np.float32), **options)


def test_step_records_one_row_per_step():
    session = make_session(steps_per_frame=4)
    history = session.step(10)
    assert history.num_steps == 10
    assert history.steps.tolist() == list(range(10))
    assert {"loss", "grad_norm/W", "update_norm/V", "trace/input_trace"} <= set(history.metrics)
    assert np.all(np.isfinite(history.loss))
    assert session.step_count == 10


def test_learning_reduces_loss():
    session = make_session(learning_rate=0.1)
    session.step(400)
    loss = session.history.loss
    assert loss[-50:].mean() < loss[:50].mean()


def test_update_norm_matches_weight_change():
    session = make_session(learning_rate=0.05)
    before = np.asarray(session.params["W"].value["weight"])
    session.step(1)
    after = np.asarray(session.params["W"].value["weight"])
    recorded = session.history["update_norm/W"][0]
    np.testing.assert_allclose(recorded, np.linalg.norm(after - before), rtol=1e-5)
    # SGD: the weight change is the learning rate times the gradient
    np.testing.assert_allclose(recorded, 0.05 * session.history["grad_norm/W"][0], rtol=1e-5)


def test_ring_smaller_than_run_loses_nothing():
    session = make_session(capacity=8, steps_per_frame=8)
    session.step(50)
    assert session.history.num_steps == 50
    assert session.history.steps.tolist() == list(range(50))


def test_one_host_transfer_per_frame(monkeypatch):
    session = make_session(steps_per_frame=10)
    calls = []
    original = session.recorder.drain
    monkeypatch.setattr(session.recorder, "drain", lambda ring: calls.append(1) or original(ring))
    session.run(40, background=False)
    assert len(calls) == 4


def test_reset_restores_weights_states_and_reproduces_the_run():
    session = make_session(learning_rate=0.1)
    w0 = np.asarray(session.params["W"].value["weight"])
    session.step(20)
    first = session.history.loss.copy()
    assert not np.allclose(np.asarray(session.params["W"].value["weight"]), w0)
    session.reset()
    assert session.history.num_steps == 0 and session.step_count == 0
    np.testing.assert_array_equal(np.asarray(session.params["W"].value["weight"]), w0)
    np.testing.assert_array_equal(np.asarray(session.model.h.value), 0.0)
    session.step(20)
    np.testing.assert_allclose(session.history.loss, first, rtol=1e-6)


def test_save_and_load_history(tmp_path):
    session = make_session()
    session.step(12)
    path = tmp_path / "run.npz"
    session.save_history(path)
    loaded = load_history(path)
    assert loaded.num_steps == 12
    np.testing.assert_array_equal(loaded.loss, session.history.loss)
    assert loaded.meta["algorithm"] == "OneStepLearner"
    assert Session.load_history(path).num_steps == 12


def test_load_history_rejects_other_files(tmp_path):
    path = tmp_path / "x.npz"
    np.savez(path, a=np.zeros(2))
    with pytest.raises(ValueError, match="not an etp_viz history"):
        load_history(path)


def test_unknown_option_lists_valid_ones():
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['stpes'\].*Valid options"):
        make_session(stpes=3)


@pytest.mark.parametrize("option", ["steps_per_frame", "record_every"])
@pytest.mark.parametrize("value", ["fast", 0, -4, 2.5, True])
def test_bad_frame_options_say_what_is_allowed(option, value):
    with pytest.raises(ValueError, match=rf"`{option}` must be 'auto' or a positive integer"):
        make_session(**{option: value})


def test_bad_algorithm_name_lists_valid_ones():
    with pytest.raises(ValueError, match=r"Unknown algorithm 'bptx'.*d_rtrl.*snap<n>"):
        make_session(algorithm="bptx")


def test_no_data_is_an_error_that_teaches():
    with pytest.raises(ValueError, match="needs data"):
        Session(TinyRNN(), np.zeros(2, np.float32), algorithm=OneStepLearner(TinyRNN()))


def test_iterable_data_and_custom_loss_and_optimizer():
    import optax

    pairs = [sine_data(t) for t in range(30)]
    session = make_session(
        data=pairs,
        loss=lambda out, y: np.float32(2.0) * ((out - y) ** 2).sum(),
        optimizer=optax.adam(1e-2),
    )
    session.step(30)
    assert session.history.num_steps == 30


def test_background_run_and_pause_within_a_frame():
    session = make_session(steps_per_frame=5)
    frames = []
    session.observe(lambda s, event: frames.append((event, s.history.num_steps)))
    session.run(None)
    deadline = time.time() + 20
    while session.history.num_steps < 20 and time.time() < deadline:
        time.sleep(0.01)
    assert session.running
    session.pause()
    assert not session.running
    paused_at = session.history.num_steps
    assert paused_at == session.step_count  # everything dispatched was synced
    time.sleep(0.1)
    assert session.history.num_steps == paused_at  # nothing moves after pause
    assert frames[-1][0] == "paused"
    frame_sizes = [n for event, n in frames if event == "frame"][:-1]  # last one cut by pause
    assert all(n % 5 == 0 for n in frame_sizes)
    session.run(10, background=True)  # resume
    session.wait(20)
    assert session.history.num_steps == paused_at + 10


def test_run_does_not_block_the_caller():
    """run() returns while its first frame is still inside the user's data function (held
    there by an event): no wall clock, and a run() that blocked could not return first."""
    entered, release = threading.Event(), threading.Event()

    def held_data(t):
        if t >= 1:
            entered.set()
            release.wait(10)
        return sine_data(t)

    session = make_session(steps_per_frame=2, data=held_data)
    session.step(1)  # compile first (step 0 is not held)
    session.run(3)
    returned_while_held = not release.is_set() and session.running
    assert entered.wait(20), "the background run never reached the data function"
    release.set()
    session.wait(60)
    assert returned_while_held, "run() waited for its steps instead of returning at once"
    assert session.history.num_steps == 4


def test_step_while_running_is_refused():
    session = make_session()
    session.run(None)
    try:
        with pytest.raises(RuntimeError, match="pause"):
            session.step()
    finally:
        session.pause()


def test_history_grows_in_amortised_buffers_and_stores_measured_rows_only():
    from etp_viz.live.history import History

    history = History()
    history.extend(np.arange(3), {"loss": np.array([3.0, 2.0, 1.0], np.float32)})
    early = history.loss
    buffers = []
    for start in range(3, 3 + 200, 2):  # many small appends: few regrowths
        history.extend(np.arange(start, start + 2), {"loss": np.ones(2, np.float32)})
        buffers.append(id(history._steps.buffer))
    assert history.num_steps == 203 and history.steps.tolist() == list(range(203))
    assert early.tolist() == [3.0, 2.0, 1.0]  # a view handed out earlier is unchanged
    assert len(set(buffers)) <= 3  # doubling: 64 -> 128 -> 256 rows
    # a metric first seen later reads NaN ("not measured") before it; NaN rows are not stored
    grad = np.full(8, np.nan)
    grad[[3, 7]] = [5.0, 6.0]
    history.extend(np.arange(203, 211), {"loss": np.ones(8), "grad_norm/W": grad})
    dense = history["grad_norm/W"]
    assert dense.shape == (211,) and np.flatnonzero(np.isfinite(dense)).tolist() == [206, 210]
    assert history._columns["grad_norm/W"].values.size == 2
    np.testing.assert_array_equal(history.recent("grad_norm/W", 5), dense[-5:])
    np.testing.assert_array_equal(history.recent("loss", 1000), history.loss)
    # a reader between a concurrent extend's column append and its steps append sees only
    # the steps recorded so far
    history._columns["grad_norm/W"].append_rows(np.array([211]), np.array([7.0]))
    history._columns["loss"].append(211, np.array([1.0]))
    assert history["grad_norm/W"].shape == history.loss.shape == (211,)
    np.testing.assert_array_equal(history["grad_norm/W"], dense)
    history.clear()
    assert history.num_steps == 0 and history.metrics == {}
