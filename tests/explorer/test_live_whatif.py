""" "What if…" in the live explorer, without a browser: the offers follow the session's learner
(and its knobs), the ``what_if`` request runs on copies of the model at the paused step (the
run is not changed and goes on), and a running session answers "pause first" in the result
panel instead of copying a model that moves."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest

import etp_viz
from etp_viz.explorer.live_explorer import LiveExplorer, build_explorer
from tests.live.models import OneStepLearner
from tests.test_whatif import N_IN, Leaky, _net

X = jax.random.normal(jax.random.PRNGKey(1), (N_IN,))


def data(t):
    x = np.asarray(jax.random.normal(jax.random.PRNGKey(t), (N_IN,)))
    return x, np.full(2, np.sin(t / 5), np.float32)


def live_of(model, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the plain `@` warning: the subject here
        explorer = build_explorer(model, X, data=data, steps_per_frame=4, **options)
    explorer.sent = []
    explorer.send = lambda content, buffers=None: explorer.sent.append(content)
    return explorer


def ask(explorer, weight, change, request_id=1):
    return explorer._answer(
        {"type": "request", "id": request_id, "method": "what_if",
         "params": {"weight": weight, "change": change}}
    )  # fmt: skip


def ids(explorer, weight):
    return [offer["id"] for offer in explorer.what_if_changes.get(weight, [])]


@pytest.fixture(scope="module")
def live():
    explorer = live_of(_net(Leaky(plain=True)))
    explorer.step(5)
    return explorer


def test_a_paused_run_offers_what_if_and_runs_it_on_a_copy_of_the_model_at_its_step(live):
    assert isinstance(live, LiveExplorer)
    assert ids(live, "cell.W") == ["lift", "exact"]
    assert live.frontend_state()["what_if_changes"] == live.what_if_changes
    states = {k: np.asarray(s.value) for k, s in live.session.model.states().items()}
    reply = ask(live, "cell.W", "lift", request_id=3)
    assert reply["id"] == 3 and reply["error"] is None
    result = live.what_if
    assert reply["result"] == result and result["error"] == ""
    assert result["diff"]["relations"] == {"added": [["cell.W", ["cell.h"]]], "removed": []}
    claims = [(r["leaf"], r["before"], r["after"]) for r in result["diff"]["claims"]]
    assert claims == [("cell.W", "none", "exact")]
    assert result["graphs_html"].count('class="etp-whatif-side"') == 2
    # the run is not changed, and goes on from where it was
    after = {k: np.asarray(s.value) for k, s in live.session.model.states().items()}
    assert all(np.array_equal(states[k], after[k]) for k in states)
    live.step(3)
    assert live.session.step_count == 8 and live.error == ""


def test_a_running_session_answers_pause_first_in_the_result_panel(live):
    live.run(None)
    try:
        result = ask(live, "cell.W", "exact")["result"]
    finally:
        live.pause()
    assert "Pause the run first" in result["error"] and live.what_if == result
    assert live.error == ""


def test_the_offers_and_the_options_are_the_session_learners(monkeypatch):
    explorer = live_of(_net(Leaky(plain=True)), algorithm="es_d_rtrl", decay=0.5)
    # ES-D-RTRL approximates cell.V (D-RTRL learns it exactly): exact RTRL is offered there
    assert ids(explorer, "cell.V") == ["exact"] and ids(explorer, "cell.W") == ["lift", "exact"]
    assert "instead of es_d_rtrl" in explorer.what_if_changes["cell.V"][0]["title"]
    seen = {}

    def record(model, *args, **kwargs):
        seen.update(kwargs)
        raise ValueError("recorded")

    monkeypatch.setattr(etp_viz.whatif, "what_if", record)
    result = ask(explorer, "cell.V", "exact")["result"]
    assert result["error"] == "ValueError: recorded"  # shown in the panel, the widget lives on
    assert seen["learner"] == "es_d_rtrl" and seen["options"] == {"decay": 0.5}
    assert seen["change"] == {"learner": "rtrl"}


def test_a_learner_the_registry_does_not_know_is_offered_nothing():
    model = _net(Leaky(plain=True))
    explorer = live_of(model, algorithm=OneStepLearner(model))
    assert explorer.what_if_changes == {}
