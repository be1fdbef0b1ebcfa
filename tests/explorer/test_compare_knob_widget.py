"""Compare mode's knob sliders, Python side: ``live_status["knobs"]``, the ``live_set`` request
that moves a knob (:meth:`Comparison.set_knob`), the claims that follow, and refusals answered
as errors (the widget lives on)."""

from __future__ import annotations

import warnings

import pytest

import etp_viz
from etp_viz.explorer.compare import CompareExplorer
from tests.live.models import etp_sine, sine_data


@pytest.fixture(scope="module")
def explorer():
    model, x0, _ = etp_sine(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex = etp_viz.show(model, x0, data=sine_data, algorithm=["snap1", "d_rtrl"])
        ex.step(2)
    ex.send = lambda content, buffers=None: None
    return ex


def live_set(explorer, request_id, **params):
    return explorer._answer(
        {"type": "request", "id": request_id, "method": "live_set", "params": params}
    )


def snap_claims(explorer):
    return {
        weight["path"]: (claim["claim"], claim["reason"])
        for weight in explorer.view_model["weights"]
        for claim in weight["claims"]
        if claim["algorithm"] == "snap1"
    }


def test_a_slider_per_knob_some_learner_takes(explorer):
    assert isinstance(explorer, CompareExplorer)
    (slider,) = explorer.live_status["knobs"]
    assert slider["name"] == "n" and slider["values"] == {"snap1": 1}
    assert (slider["value"], slider["min"], slider["step"], slider["integer"]) == (1, 1, 1, True)
    assert slider["max"] >= 2 and "SnAp" in slider["summary"]


def test_moving_a_knob_rebuilds_the_learner_and_its_claims_follow(explorer):
    # SnAp-1 drops the two-step coupling of the recurrent weight; SnAp-2 keeps it: exact
    claim, reason = snap_claims(explorer)["rnn.W.weight"]
    assert claim == "approximate" and "SnAp-1" in reason
    assert "snap1" not in explorer.exact_learners
    reply = live_set(explorer, 1, n=2)
    assert reply["error"] == "" or reply["error"] is None, reply["error"]
    assert reply["result"]["knobs"] == {"n": {"snap1": 2}}
    assert explorer.live_status["knobs"][0]["value"] == 2
    assert explorer.comparison.sessions["snap1"].algorithm.n == 2
    assert snap_claims(explorer)["rnn.W.weight"] == ("exact", "")
    assert "snap1" in explorer.exact_learners
    (recurrent,) = [w for w in explorer.view_model["weights"] if w["path"] == "rnn.W.weight"]
    assert "exact: snap1" in recurrent["gap"]  # the gap now names it the exact one
    rows = {row["algorithm"]: row for row in explorer.live_status["compare"]}
    assert rows["snap1"]["knobs"] == {"n": 2} and rows["d_rtrl"]["knobs"] == {}
    explorer.step(2)  # both go on, in lockstep
    assert [r["step"] for r in explorer.live_status["compare"]] == [4, 4]


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"n": 0}, "ValueError: set_knob: n: SnAp's order n"),
        (
            {"decay": 0.5},
            "TypeError: live_set got ['decay']; compare mode takes: steps_per_frame, n",
        ),
        ({"bogus": 1}, "TypeError: live_set got ['bogus']; compare mode takes: steps_per_frame, n"),
        ({"n": 2.5, "steps_per_frame": 3}, "ValueError: set_knob: n: SnAp's order n"),
    ],
)
def test_a_refused_value_is_answered_as_an_error_and_changes_nothing(explorer, params, error):
    learner = explorer.comparison.sessions["snap1"].algorithm
    round_size = explorer.comparison.steps_per_round
    reply = live_set(explorer, 7, **params)
    assert reply["result"] is None and reply["error"].startswith(error), reply["error"]
    assert explorer.comparison.sessions["snap1"].algorithm is learner
    assert explorer.comparison.steps_per_round == round_size  # nothing of it applied
    assert error.split(": ", 1)[1][:20] in explorer.error
