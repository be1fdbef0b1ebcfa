"""Compare mode's engine: several learners in lockstep on copies of one model (no widget)."""

from __future__ import annotations

import copy
import functools
import time
import warnings

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
from etp_viz import tasks
from etp_viz.live.compare import Comparison, SharedStream, learner_state_bytes
from etp_viz.live.session import Session
from tests.live.models import OneStepLearner, TinyRNN, sine_data

ALGORITHMS = ["d_rtrl", "eprop", "snap2", "rtrl", "bptt"]


def small_task():
    return tasks.get_task("sine")


def small_model(task, spiking=None):
    return task.suggested_model(hidden_size=8, spiking=spiking)


def params_of(model):
    return {
        k: np.asarray(jax.tree.leaves(s.value)[0])
        for k, s in model.states(brainstate.ParamState).items()
    }


@pytest.fixture(scope="module")
def stepped():
    """One comparison of five learners, 24 lockstep steps, fidelity every 8 over 4 steps."""
    task = small_task()
    model = small_model(task)
    before = params_of(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        comparison = Comparison(
            model,
            task.example_input(),
            ALGORITHMS,
            task=task,
            fidelity_every=8,
            fidelity_window=4,
            bptt_window=6,
            update="step",  # the weights move within the 24 steps (sine's recipe: per episode)
        )
        comparison.step(10)
        comparison.step(14)
    return comparison, model, before


def test_every_algorithm_starts_from_the_same_model_and_stays_in_lockstep(stepped):
    comparison, model, before = stepped
    assert comparison.labels == ALGORITHMS
    assert [s.step_count for s in comparison.sessions.values()] == [24] * 5
    assert comparison.step_count == 24
    # the user's model is copied, never stepped
    after = params_of(model)
    assert all(np.array_equal(before[k], after[k]) for k in before)
    # every copy is its own model, and the learners moved their weights apart
    models = [s.model for s in comparison.sessions.values()]
    assert len({id(m) for m in models}) == 5 and all(m is not model for m in models)
    first = [params_of(m) for m in models]
    assert any(not np.array_equal(first[0][k], first[3][k]) for k in before)
    # the same data stream: step t's loss at t=0 is the same for all (same weights, same x)
    losses0 = [s.history.loss[0] for s in comparison.sessions.values()]
    np.testing.assert_allclose(losses0, losses0[0], rtol=1e-6)


def test_exact_learners_read_as_exact_on_the_fidelity_meter(stepped):
    """Oracle wiring: RTRL, and truncated BPTT whose window covers the fidelity window, are
    BPTT over the meter's window (cosine 1, relative error ~ float32 rounding)."""
    comparison, _, _ = stepped
    for label in ("rtrl", "bptt"):
        fidelity = comparison.sessions[label].history.fidelity
        assert [f["step"] for f in fidelity] == [8, 16, 24]
        for record in fidelity:
            assert record["cosine"] == pytest.approx(1.0, abs=1e-5), label
            assert record["rel_error"] < 2e-3, label


def test_claimed_exact_weights_are_exact_on_the_meter(stepped):
    """Every weight an algorithm claims exact has the BPTT gradient on the fidelity meter."""
    comparison, _, _ = stepped
    from etp_viz.view.weights import claims_by_weight

    for label, session in comparison.sessions.items():
        algorithm = session.algorithm
        claims = claims_by_weight(algorithm.graph.gradient_claims(algorithm))
        per_param = session.history.fidelity[-1]["per_param"]
        for path, (kind, _) in claims.items():
            if kind == "exact" and per_param[path]["cosine"] is not None:
                assert per_param[path]["rel_error"] < 2e-3, (label, path, per_param[path])


def test_d_rtrl_in_a_comparison_equals_d_rtrl_alone(stepped):
    comparison, model, _ = stepped
    task = small_task()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = Session(
            copy.deepcopy(model), task.example_input(), algorithm="d_rtrl", task=task, update="step"
        )
        alone.step(24)
    np.testing.assert_allclose(
        comparison.sessions["d_rtrl"].history.loss, alone.history.loss, rtol=1e-5, atol=1e-7
    )


def test_rows_table_and_costs(stepped):
    comparison, _, _ = stepped
    rows = {r["algorithm"]: r for r in comparison.rows()}
    assert set(rows) == set(ALGORITHMS)
    for row in rows.values():
        assert row["step"] == 24 and np.isfinite(row["loss"]) and not row["halted"]
        assert row["ms_per_step"] is None or row["ms_per_step"] > 0
    # the learner's own memory: RTRL keeps n x p, D-RTRL one trace per weight, BPTT a window
    assert rows["rtrl"]["state_bytes"] > rows["d_rtrl"]["state_bytes"] > 0
    assert rows["bptt"]["state_bytes"] > 0
    table = comparison.table()
    assert all(label in table for label in ALGORITHMS) and "ms/step" in table
    assert "Comparison" in repr(comparison)


def test_step_times_are_measured_after_compilation():
    task = small_task()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        comparison = Comparison(
            small_model(task),
            task.example_input(),
            ["d_rtrl", "es_d_rtrl"],
            task=task,
            fidelity_every=0,
        )
        for _ in range(3):
            comparison.step(4)  # the first compiles, the next two are timed
    costs = comparison.costs()
    assert all(c["ms_per_step"] is not None and c["ms_per_step"] > 0 for c in costs.values())
    assert costs["es_d_rtrl"]["state_bytes"] < costs["d_rtrl"]["state_bytes"]


def test_reset_restores_every_learner_and_replays_identically():
    task = small_task()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        comparison = Comparison(
            small_model(task),
            task.example_input(),
            ["snap1", "uoro", "bptt"],
            task=task,
            fidelity_every=0,
            bptt_window=3,
        )
        comparison.step(12)
        first = {k: h.loss.copy() for k, h in comparison.histories.items()}
        comparison.reset()
        assert all(h.num_steps == 0 for h in comparison.histories.values())
        assert comparison.step_count == 0
        comparison.step(12)
    for label, loss in first.items():  # influence matrices and window buffers were reset too
        np.testing.assert_allclose(comparison.histories[label].loss, loss, rtol=1e-6)


def test_run_and_pause_keep_lockstep():
    task = small_task()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        comparison = Comparison(
            small_model(task),
            task.example_input(),
            ["d_rtrl", "eprop"],
            task=task,
            fidelity_every=0,
            steps_per_frame=4,
        )
        events = []
        comparison.observe(lambda c, event: events.append(event))
        comparison.run()
        deadline = time.monotonic() + 60
        while comparison.step_count < 8 and time.monotonic() < deadline:
            time.sleep(0.05)
        comparison.pause()
    assert not comparison.running
    counts = {s.step_count for s in comparison.sessions.values()}
    assert len(counts) == 1 and counts.pop() % 4 == 0
    assert events[0] == "started" and events[-1] == "paused" and "frame" in events
    with pytest.raises(RuntimeError, match="pause"):
        comparison.run()
        comparison.run()
    comparison.pause()


class Exploding(OneStepLearner):
    """OneStepLearner whose output turns NaN from its 6th step on."""

    def compile_graph(self, x):
        super().compile_graph(x)
        self.count = brainstate.ShortTermState(jnp.zeros((), jnp.int32))

    def update(self, x):
        self.count.value = self.count.value + 1
        out = super().update(x)
        return jnp.where(self.count.value > 5, jnp.nan, 1.0) * out


def test_a_halted_learner_does_not_stop_the_others():
    comparison = Comparison(
        TinyRNN(),
        np.zeros(2, np.float32),
        [OneStepLearner, Exploding],
        data=sine_data,
        fidelity_every=0,
    )
    comparison.step(10)
    sessions = comparison.sessions
    assert sessions["exploding"].halted and sessions["exploding"].step_count == 5
    assert sessions["onesteplearner"].step_count == 10
    assert not comparison.halted and comparison.step_count == 10
    comparison.step(3)
    assert sessions["onesteplearner"].step_count == 13
    rows = {r["algorithm"]: r for r in comparison.rows()}
    assert rows["exploding"]["halted"] and "non-finite" in rows["exploding"]["failure"]


def test_a_one_pass_iterable_is_read_once_and_shared():
    pairs = (sine_data(t) for t in range(100))
    comparison = Comparison(
        TinyRNN(),
        np.zeros(2, np.float32),
        [OneStepLearner, OneStepLearner],
        data=pairs,
        fidelity_every=0,
    )
    assert comparison.labels == ["onesteplearner", "onesteplearner#2"]
    comparison.step(9)
    comparison.step(7)
    a, b = (h.loss for h in comparison.histories.values())
    np.testing.assert_array_equal(a, b)
    assert len(a) == 16
    assert len(comparison.stream._cache) <= 16


def test_shared_stream_release_and_restart():
    stream = SharedStream([(0, 0), (1, 1), (2, 2)])
    assert stream(2) == (2, 2)
    stream.release(2)
    with pytest.raises(IndexError, match="released"):
        stream(0)
    stream.restart()
    assert stream(0) == (0, 0)


def test_factories_partials_and_names():
    task = small_task()
    model = small_model(task)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        comparison = Comparison(
            model,
            task.example_input(),
            [functools.partial(etp_viz.SnAp, n=1), lambda m: etp_viz.EProp(m), "SnAp-3", "ostl"],
            task=task,
            fidelity_every=0,
        )
    assert comparison.labels == ["snap", "custom", "snap3", "ostl_recurrent"]
    assert comparison.sessions["snap"].algorithm.n == 1
    assert comparison.sessions["snap3"].algorithm.n == 3


@pytest.mark.parametrize(
    ("algorithms", "error", "match"),
    [
        ("d_rtrl", TypeError, "list of algorithms"),
        ([], ValueError, "at least one"),
        (["d_rtrl", "nope"], ValueError, "Valid names"),
        ([3], TypeError, "neither an algorithm name"),
    ],
)
def test_bad_algorithm_lists_are_named(algorithms, error, match):
    with pytest.raises(error, match=match):
        Comparison(TinyRNN(), np.zeros(2, np.float32), algorithms, data=sine_data)


def test_a_built_instance_is_refused_with_the_fix():
    model = TinyRNN()
    with pytest.raises(TypeError, match="functools.partial"):
        Comparison(model, np.zeros(2, np.float32), [OneStepLearner(model)], data=sine_data)


def test_unknown_option_lists_the_valid_ones():
    with pytest.raises(TypeError, match="fidelity_every"):
        Comparison(TinyRNN(), np.zeros(2, np.float32), ["rtrl"], data=sine_data, nope=1)


def test_learner_state_bytes_counts_the_learner_only():
    model = TinyRNN()
    learner = OneStepLearner(model)
    learner.compile_graph(np.zeros(2, np.float32))
    assert learner_state_bytes(learner, model) == 2 * 4  # the input trace, not the weights


def test_an_error_in_the_loss_is_raised_and_set_loss_resumes_in_lockstep():
    from etp_viz.live.sources import UserCodeError

    def broken(output, target):
        raise ValueError("bad loss")

    comparison = Comparison(
        TinyRNN(),
        np.zeros(2, np.float32),
        [OneStepLearner, OneStepLearner],
        data=sine_data,
        fidelity_every=0,
        loss=broken,
    )
    with pytest.raises(UserCodeError, match="bad loss"):
        comparison.step(4)
    assert "bad loss" in comparison.error
    comparison.set_loss(lambda out, y: jnp.mean((out - y) ** 2))
    assert comparison.error is None
    comparison.step(4)
    assert [s.step_count for s in comparison.sessions.values()] == [4, 4]
    comparison.set_data([sine_data(t) for t in range(4, 20)])
    comparison.step(2)
    assert [s.step_count for s in comparison.sessions.values()] == [6, 6]
