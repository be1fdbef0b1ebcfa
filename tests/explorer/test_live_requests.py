"""``live_set`` requests from the front end: validation errors are clear and change nothing."""

from __future__ import annotations

import warnings

import brainstate
import pytest

from etp_viz.explorer.live_explorer import LiveExplorer
from etp_viz.live.session import Session
from tests.live.models import etp_sine


def live_explorer(algorithm: str, **options) -> LiveExplorer:
    """A LiveExplorer on the small ETP sine RNN with the given etp_viz.learn algorithm."""
    brainstate.random.seed(0)
    model, x0, data = etp_sine()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = Session(model, x0, algorithm=algorithm, data=data, steps_per_frame=4, **options)
    explorer = LiveExplorer(session.algorithm.graph, session)
    explorer.sent = []
    explorer.send = lambda content, buffers=None: explorer.sent.append((content, buffers))
    return explorer


@pytest.fixture(scope="module")
def d_rtrl():
    return live_explorer("d_rtrl")


@pytest.fixture(scope="module")
def es_d_rtrl():
    return live_explorer("es_d_rtrl", decay=0.9)


def live_set(explorer: LiveExplorer, request_id: int, **params) -> dict:
    return explorer._answer(
        {"type": "request", "id": request_id, "method": "live_set", "params": params}
    )


def test_unknown_keys_are_listed_with_the_valid_ones(d_rtrl):
    before = dict(d_rtrl.live_status)
    reply = live_set(d_rtrl, 1, speed=3, colour="red")
    assert reply["id"] == 1 and reply["result"] is None
    assert reply["error"].startswith("TypeError: live_set got ['colour', 'speed']")
    assert "valid: decay, record, steps_per_frame" in reply["error"]
    assert "colour" in d_rtrl.error and "speed" in d_rtrl.error
    assert d_rtrl.live_status == before  # nothing applied


def test_unknown_key_next_to_a_valid_one_applies_neither(d_rtrl):
    spf = d_rtrl.session.steps_per_frame
    reply = live_set(d_rtrl, 2, steps_per_frame=spf + 7, bogus=1)
    assert reply["error"].startswith("TypeError: live_set got ['bogus']")
    assert d_rtrl.session.steps_per_frame == spf


def test_decay_on_a_d_rtrl_session_is_a_clear_error(d_rtrl):
    algorithm = d_rtrl.session.algorithm
    assert not hasattr(algorithm, "alpha_x")
    reply = live_set(d_rtrl, 3, decay=0.5)
    assert reply["result"] is None
    assert reply["error"] == (
        "ValueError: `decay` applies to ES-D-RTRL only (algorithm='es_d_rtrl')."
    )
    assert "ES-D-RTRL only" in d_rtrl.error
    assert not hasattr(algorithm, "alpha_x")
    assert d_rtrl.live_status["decay"] is None


def test_unknown_record_series_lists_the_known_ones(d_rtrl):
    reply = live_set(d_rtrl, 4, record=["loss", "no/such"])
    assert reply["error"].startswith("ValueError: unknown series ['no/such']; known:")
    assert "'loss'" in reply["error"]
    assert d_rtrl.record is None


def test_a_bad_decay_value_on_es_d_rtrl_keeps_the_old_decay(es_d_rtrl):
    algorithm = es_d_rtrl.session.algorithm
    before = (algorithm.alpha_x, algorithm.alpha_f)
    reply = live_set(es_d_rtrl, 5, decay=1.5)
    assert reply["error"].startswith("ValueError:") and "1.5" in reply["error"]
    assert (algorithm.alpha_x, algorithm.alpha_f) == before


def test_a_valid_live_set_still_answers(es_d_rtrl):
    reply = live_set(es_d_rtrl, 6, decay=0.5, steps_per_frame=3)
    assert reply["error"] is None
    assert reply["result"]["decay"] == pytest.approx(0.5)
    assert reply["result"]["steps_per_frame"] == 3
    assert es_d_rtrl.live_status["decay"] == pytest.approx(0.5)
