"""Two runs of one learner with different options are told apart (issue: lesson 2's two e-prop
runs both read ``algorithm: 'eprop'``): the run's record (``history.meta``) and the live status
carry the learner's options that are not at their defaults, read through the registry
(``etp_viz.learn.knobs.learner_options``); ``meta["algorithm"]`` stays the registry's name."""

from __future__ import annotations

import warnings

import brainstate
import pytest

import etp_viz
from etp_viz.explorer.live_explorer import LiveExplorer
from etp_viz.learn.knobs import learner_options
from etp_viz.learn.registry import LEARNERS
from etp_viz.live.history import load_history
from etp_viz.live.session import Session
from tests.live.models import OneStepLearner, TinyRNN, etp_sine


def _session(algorithm, **options) -> Session:
    """A session on the small ETP sine RNN; ``algorithm`` is a name or ``model -> learner``."""
    brainstate.random.seed(0)
    model, x0, data = etp_sine()
    learner = algorithm(model) if callable(algorithm) else algorithm
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Session(model, x0, algorithm=learner, data=data, steps_per_frame=4, **options)


@pytest.fixture(scope="module")
def random_feedback():
    return _session(lambda model: etp_viz.EProp(model, feedback="random"))


def test_options_not_at_their_defaults_are_read_off_a_built_learner():
    model, _, _ = etp_sine()
    assert learner_options(etp_viz.EProp(model, feedback="random")) == {"feedback": "random"}
    assert learner_options(etp_viz.EProp(model)) == {}
    assert learner_options(etp_viz.EProp(model, kappa_filter_decay=0.5)) == {
        "kappa_filter_decay": 0.5
    }
    assert learner_options(etp_viz.ES_D_RTRL(model, 0.5)) == {"decay": 0.5}
    assert learner_options(etp_viz.ES_D_RTRL(model, (0.5, 0.7))) == {"decay": [0.5, 0.7]}
    assert learner_options(etp_viz.ES_D_RTRL(model)) == {}
    assert learner_options(etp_viz.TruncatedBPTT(model, window=8)) == {"window": 8}
    assert learner_options(etp_viz.D_RTRL(model)) == {}
    assert learner_options(OneStepLearner(TinyRNN())) == {}  # a user's own learner: none


def test_a_learner_built_by_name_is_at_the_registry_factorys_defaults():
    """``'snap1'`` is SnAp's registry default (n=1) although the class's is n=2."""
    model, _, _ = etp_sine()
    built = {name: LEARNERS[name].factory(model) for name in ("snap", "tbptt", "es_d_rtrl")}
    assert {name: learner_options(learner) for name, learner in built.items()} == {
        "snap": {},
        "tbptt": {},
        "es_d_rtrl": {},
    }


def test_the_record_tells_random_feedback_from_symmetric(random_feedback, tmp_path):
    symmetric = _session(lambda model: etp_viz.EProp(model))
    meta = random_feedback.history.meta
    assert meta["algorithm"] == symmetric.history.meta["algorithm"] == "eprop"  # registry name
    assert meta["learner_options"] == {"feedback": "random"}
    assert symmetric.history.meta["learner_options"] == {}
    random_feedback.step(2)
    random_feedback.save_history(tmp_path / "run.npz")
    assert load_history(tmp_path / "run.npz").meta["learner_options"] == {"feedback": "random"}
    assert random_feedback.history.to_json()["meta"]["learner_options"] == {"feedback": "random"}


def test_options_given_by_name_are_in_the_record():
    session = _session("es_d_rtrl", decay=0.5)
    assert session.history.meta["algorithm"] == "es_d_rtrl"
    assert session.history.meta["learner_options"] == {"decay": 0.5}


def test_the_live_status_shows_them_and_follows_a_moved_decay(random_feedback):
    explorer = LiveExplorer(random_feedback.algorithm.graph, random_feedback)
    assert explorer.live_status["algorithm"] == "eprop"
    assert explorer.live_status["learner_options"] == {"feedback": "random"}
    session = _session("es_d_rtrl", decay=0.5)
    explorer = LiveExplorer(session.algorithm.graph, session)
    assert explorer.live_status["learner_options"] == {"decay": 0.5}
    reply = explorer._answer(
        {"type": "request", "id": 1, "method": "live_set", "params": {"decay": 0.7}}
    )
    assert reply["error"] is None, reply
    assert explorer.live_status["learner_options"] == {"decay": 0.7}
