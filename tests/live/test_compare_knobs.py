"""Compare mode's knobs: ``Comparison.set_knob`` rebuilds the learners that take a knob at the
current step, in lockstep with the others (no widget).

The oracle of a moved knob is a fresh :class:`Comparison` built with the new value from a copy
of the learner's model taken at the move (the same weights and hidden states; the learner's own
state starts afresh in both) on the same data shifted to that step; the learners without the
knob are checked against a run that never moved it. Both are the same computation, so they
agree exactly (float64 under ``x64``).
"""

from __future__ import annotations

import copy
import functools
import warnings

import brainstate
import jax
import numpy as np
import pytest

import etp_viz
from etp_viz.live.compare import Comparison
from tests.live.models import etp_sine, sine_data

#: steps before the knob moves, and after
BEFORE, AFTER = 6, 6


def model64(num_hidden):
    """The small ETP sine RNN with every state in float64 (call under ``x64``)."""
    model, _, _ = etp_sine(num_hidden)
    for state in model.states().values():
        state.value = jax.tree.map(lambda a: np.asarray(a, np.float64), state.value)
    return model


def data64(t):
    x, y = sine_data(t)
    return np.asarray(x, np.float64), np.asarray(y, np.float64)


def shifted(start):
    return lambda t: data64(t + start)


def comparison(model, algorithms, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Comparison(model, np.zeros(2), algorithms, **{"data": data64, **options})


def states_of(model):
    return {k: np.asarray(jax.tree.leaves(s.value)[0]) for k, s in model.states().items()}


def params_of(model):
    return {
        k: np.asarray(jax.tree.leaves(s.value)[0])
        for k, s in model.states(brainstate.ParamState).items()
    }


def assert_same_run(moved, fresh):
    """``moved``'s steps after the move are ``fresh``'s steps from 0: loss and weights."""
    np.testing.assert_array_equal(moved.history.loss[BEFORE:], fresh.history.loss)
    for path, value in params_of(fresh.model).items():
        np.testing.assert_array_equal(params_of(moved.model)[path], value, err_msg=str(path))


def test_a_moved_decay_steps_like_a_fresh_learner_and_the_others_go_on_untouched(x64):
    model = model64(5)
    cmp = comparison(model, ["es_d_rtrl", "tbptt", "d_rtrl"], decay=0.9, bptt_window=4)
    cmp.step(BEFORE)
    assert cmp.knobs() == {"decay": {"es_d_rtrl": 0.9}, "window": {"tbptt": 4}}
    moved = cmp.sessions["es_d_rtrl"]
    kept_loss = moved.history.loss.copy()
    at_move = copy.deepcopy(moved.model)
    states = states_of(moved.model)
    assert cmp.set_knob(decay=0.5) == {"decay": {"es_d_rtrl": 0.5}, "window": {"tbptt": 4}}
    # the weights and hidden states are not touched by the rebuild; the history is kept
    after = states_of(moved.model)
    assert all(np.array_equal(states[k], after[k]) for k in states)
    np.testing.assert_array_equal(moved.history.loss, kept_loss)
    assert moved.algorithm.alpha_x == moved.algorithm.alpha_f == 0.5
    cmp.step(AFTER)
    assert [s.step_count for s in cmp.sessions.values()] == [BEFORE + AFTER] * 3
    assert moved.history.steps.tolist() == list(range(BEFORE + AFTER))  # steps count on

    fresh = comparison(at_move, ["es_d_rtrl"], decay=0.5, data=shifted(BEFORE))
    fresh.step(AFTER)
    assert_same_run(moved, fresh.sessions["es_d_rtrl"])
    # the learners without the knob: as if it had never moved
    never = comparison(model, ["tbptt", "d_rtrl"], decay=0.9, bptt_window=4)
    never.step(BEFORE + AFTER)
    for label in ("tbptt", "d_rtrl"):
        np.testing.assert_array_equal(
            cmp.sessions[label].history.loss, never.sessions[label].history.loss
        )
        same = params_of(never.sessions[label].model)
        assert all(np.array_equal(params_of(cmp.sessions[label].model)[k], same[k]) for k in same)
    # the cost table and rows say the new value
    assert [row["knobs"] for row in cmp.rows()] == [{"decay": 0.5}, {"window": 4}, {}]


def test_integer_knobs_a_new_trace_layout_and_learners_given_as_classes_or_partials(x64):
    """SnAp's n (by name), truncated BPTT's window (a partial), e-prop's kappa (its class:
    kappa > 0 adds filtered traces, so the recorder's columns change); a lambda's knob cannot
    move, so it is not offered."""
    model = model64(4)
    algorithms = [
        "snap1",
        functools.partial(etp_viz.TruncatedBPTT, window=3),
        etp_viz.EProp,
        lambda m: etp_viz.SnAp(m, n=2),
    ]
    cmp = comparison(model, algorithms)
    cmp.step(BEFORE)
    labels = cmp.labels
    assert cmp.knobs() == {
        "window": {labels[1]: 3},
        "kappa_filter_decay": {labels[2]: 0.0},
        "n": {labels[0]: 1},
    }
    copies = {label: copy.deepcopy(cmp.sessions[label].model) for label in labels}
    cmp.set_knob(n=2, window=5, kappa_filter_decay=0.5)
    cmp.step(AFTER)
    assert all(v.dtype == np.float64 for v in params_of(cmp.sessions[labels[0]].model).values())
    assert {s.step_count for s in cmp.sessions.values()} == {BEFORE + AFTER}
    oracles = {
        labels[0]: "snap2",
        labels[1]: functools.partial(etp_viz.TruncatedBPTT, window=5),
        labels[2]: functools.partial(etp_viz.EProp, kappa_filter_decay=0.5),
    }
    for label, algorithm in oracles.items():
        fresh = comparison(copies[label], [algorithm], data=shifted(BEFORE))
        fresh.step(AFTER)
        assert_same_run(cmp.sessions[label], next(iter(fresh.sessions.values())))
    # the filtered traces are recorded from the move on (NaN before it)
    history = cmp.sessions[labels[2]].history
    kappa = [name for name in history.names if name.endswith(".kappa")]
    assert kappa and np.isnan(history[kappa[0]][:BEFORE]).all()
    assert cmp.sessions[labels[0]].history.meta["algorithm"] == "snap2"
    # the lambda's SnAp did not move (the same weights as a run of it alone)
    alone = comparison(model, [algorithms[3]])
    alone.step(BEFORE + AFTER)
    np.testing.assert_array_equal(
        cmp.sessions[labels[3]].history.loss, alone.sessions[labels[3]].history.loss
    )


@pytest.fixture(scope="module")
def small():
    model, _, _ = etp_sine(3)
    cmp = comparison(model, ["tbptt", "d_rtrl"], bptt_window=4, steps_per_frame=2)
    cmp.step(2)
    return cmp, model


@pytest.mark.parametrize(
    ("knobs", "error", "match"),
    [
        ({}, TypeError, r"set_knob takes knob=value.*knobs: \['window'\]"),
        ({"windw": 3}, TypeError, r"unknown knob 'windw'. Did you mean 'window'\?"),
        ({"decay": 0.5}, ValueError, r"no learner of this comparison \(tbptt, d_rtrl\) takes"),
        ({"window": 0}, ValueError, r"window: .* takes an integer >= 1, got 0"),
        ({"window": 2.5}, ValueError, r"takes an integer >= 1, got 2.5"),
        ({"window": "5"}, TypeError, r"takes an integer >= 1, got '5'"),
        ({"window": 5, "n": 2}, ValueError, r"takes 'n'"),  # one bad knob: none moves
    ],
)
def test_a_refused_knob_says_why_and_changes_nothing(small, knobs, error, match):
    cmp, _ = small
    learner = cmp.sessions["tbptt"].algorithm
    with pytest.raises(error, match=match):
        cmp.set_knob(**knobs)
    assert cmp.sessions["tbptt"].algorithm is learner
    assert cmp.knobs() == {"window": {"tbptt": 4}}


def test_out_of_range_floats_are_refused():
    from etp_viz.learn.knobs import KNOBS

    for value in (1.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match=r"decay: .* takes a number in \[0, 1\)"):
            KNOBS["decay"].check(value)
    assert KNOBS["decay"].check(0) == 0.0 and isinstance(KNOBS["n"].check(3.0), int)


def test_a_running_comparison_refuses_a_knob_and_reset_keeps_the_moved_one(small):
    cmp, model = small
    events = []
    cmp.observe(lambda _runner, event: events.append(event))
    cmp.run(None)
    try:
        with pytest.raises(RuntimeError, match="pause the comparison first"):
            cmp.set_knob(window=2)
    finally:
        cmp.pause()
    assert not cmp.running
    cmp.set_knob(window=2)
    assert events[-1] == "knob"
    cmp.reset()
    assert cmp.step_count == 0 and cmp.knobs() == {"window": {"tbptt": 2}}
    first = params_of(model)  # the comparison's copies start from the user's model again
    for session in cmp.sessions.values():
        now = params_of(session.model)
        assert all(np.array_equal(now[k], first[k]) for k in first)
    cmp.step(2)
    assert [s.step_count for s in cmp.sessions.values()] == [2, 2]
