"""Failure behaviour: NaN/inf halts with the step and quantity; user errors keep it usable."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from etp_viz.live.session import Session, UserCodeError
from tests.live.models import OneStepLearner, TinyRNN, sine_data


def make_session(data=sine_data, **options):
    model = TinyRNN()
    return Session(
        model, np.zeros(2, np.float32), algorithm=OneStepLearner(model), data=data, **options
    )


def data_with_inf_at(bad_step):
    def data(t):
        x, y = sine_data(t)
        return (x * np.inf if t == bad_step else x), y

    return data


@pytest.mark.parametrize("background", [False, True])
def test_non_finite_step_halts_and_names_step_and_quantities(background, tmp_path):
    session = make_session(data=data_with_inf_at(13), steps_per_frame=5)
    w_before = None
    if background:
        session.run(40)
        session.wait(30)
    else:
        session.step(40)
    failure = session.history.failure
    assert failure["step"] == 13
    assert "loss" in failure["quantities"] and "grad_norm/W" in failure["quantities"]
    assert "Step 13" in failure["message"]
    assert session.halted
    # the history before the failure is intact and finite, and saveable
    assert session.history.steps.tolist() == list(range(13))
    assert np.all(np.isfinite(session.history.loss))
    for state in session.params.values():
        assert np.all(np.isfinite(np.asarray(state.value["weight"])))
    session.save_history(tmp_path / "h.npz")
    del w_before
    with pytest.raises(RuntimeError, match="non-finite"):
        session.step()
    session.reset()
    assert not session.halted


def test_huge_learning_rate_diverges_into_a_halt():
    session = make_session(learning_rate=1e30)
    session.step(30)
    assert session.halted
    assert session.history.num_steps == session.history.failure["step"]


def test_loss_exception_is_reported_and_session_stays_usable():
    session = make_session()
    session.step(3)

    def broken(out, y):
        raise ZeroDivisionError("my bug")

    session.set_loss(broken)
    with pytest.raises(UserCodeError, match=r"loss function raised ZeroDivisionError at step 3"):
        session.step(2)
    assert "my bug" in session.error
    assert session.history.num_steps == 3
    session.set_loss(lambda out, y: jnp.mean((out - y) ** 2))
    assert session.error is None
    session.step(2)
    assert session.history.num_steps == 5


def test_data_exception_in_background_run_is_stored():
    def flaky(t):
        if t == 7:
            raise KeyError("sample 7 missing")
        return sine_data(t)

    session = make_session(data=flaky, steps_per_frame=3)
    events = []
    session.observe(lambda s, event: events.append(event))
    session.run(20)
    session.wait(30)
    assert "data function raised KeyError at step 7" in session.error
    assert events[-1] == "error"
    assert session.history.num_steps == 7  # the steps before are recorded
    session.set_data(sine_data)
    session.step(2)
    assert session.history.num_steps == 9
