"""The fidelity meter against BPTT, with the real etp_viz.learn algorithms."""

from __future__ import annotations

import warnings

import brainstate
import numpy as np
import pytest

from etp_viz.live.fidelity import compare_gradients
from etp_viz.live.session import Session
from tests.live.models import etp_sine


def make(algorithm, **options):
    brainstate.random.seed(0)
    model, x0, data = etp_sine(num_hidden=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Session(model, x0, algorithm=algorithm, data=data, **options)


@pytest.mark.parametrize("algorithm", ["d_rtrl", "es_d_rtrl"])
def test_window_of_one_step_is_exact(algorithm):
    # With traces zeroed at the window start, one online step is the exact gradient.
    session = make(algorithm, fidelity_every=5, fidelity_window=1)
    weights = {k: np.asarray(s.value["weight"]) for k, s in session.params.items()}
    session.step(10)
    assert [f["step"] for f in session.history.fidelity] == [5, 10]
    for record in session.history.fidelity:
        assert record["cosine"] == pytest.approx(1.0, abs=1e-5)
        assert record["rel_error"] == pytest.approx(0.0, abs=1e-4)
    assert not np.allclose(
        np.asarray(session.params["rnn.W.weight"].value["weight"]), weights["rnn.W.weight"]
    )


def test_measuring_does_not_change_the_run():
    with_meter = make("d_rtrl", fidelity_every=4, fidelity_window=3)
    without = make("d_rtrl")
    with_meter.step(12)
    without.step(12)
    np.testing.assert_allclose(with_meter.history.loss, without.history.loss, rtol=1e-5)
    readout = with_meter.history.fidelity[-1]["per_param"]["out.weight"]
    assert readout["cosine"] > 0.99  # the readout's gradient is exact whatever the window


def test_compare_gradients_handles_zero_online_gradient():
    result = compare_gradients({"w": np.zeros(3)}, {"w": np.ones(3)})
    assert result["cosine"] == 0.0 and result["rel_error"] == pytest.approx(1.0)
