"""Every-step recording of accuracy and activity: checked against a recount and an explicit
step loop, not against numbers the recorder made."""

from __future__ import annotations

import copy
import warnings

import brainstate
import jax.numpy as jnp
import numpy as np
import pytest

from etp_viz import tasks
from etp_viz.live.history import ACTIVITY_KEEP, History, load_history
from etp_viz.live.probe import ACTIVITY_UNITS
from etp_viz.live.session import Session

STEPS = 40


def _frozen_session(task, model, algorithm="d_rtrl", **options):
    """A session whose weights do not move (SGD with rate 0): its outputs and states are
    those of the model stepped by hand."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Session(
            model,
            task.example_input(),
            task=task,
            algorithm=algorithm,
            optimizer="sgd",
            learning_rate=0.0,
            steps_per_frame=16,
            **options,
        )


def _explicit_loop(task, model, steps):
    """Outputs, membrane potentials and spikes of ``model`` stepped one step at a time, its
    states put back at each episode start (as a session does on an episodic task)."""
    initial = {path: s.value for path, s in brainstate.graph.states(model).items()}
    outputs, potentials, spikes = [], [], []
    for t in range(steps):
        if t % task.n_steps == 0:
            for path, state in brainstate.graph.states(model).items():
                state.value = initial[path]
        x, _ = task.step_data(t)
        outputs.append(np.asarray(model(x)))
        potentials.append(np.asarray(model.rnn.V.value))
        spikes.append(np.asarray(model.rnn.spike()))
    return np.stack(outputs), np.stack(potentials), np.stack(spikes)


@pytest.fixture(scope="module")
def evidence_run():
    task = tasks.get_task(
        "evidence_accumulation",
        batch_size=2,
        n_cues=1,
        cue_steps=2,
        gap_steps=1,
        delay=2,
        decision_steps=3,
    )  # 8-step episodes: the 40 steps hold 15 decision steps
    model = task.suggested_model(hidden_size=12)
    reference = copy.deepcopy(model)
    session = _frozen_session(task, model)
    session.step(STEPS)
    return task, session, _explicit_loop(task, reference, STEPS)


def test_accuracy_is_a_recount_of_the_steps_outputs(evidence_run):
    task, session, (outputs, _, _) = evidence_run
    targets = np.stack([np.asarray(task.step_data(t)[1]) for t in range(STEPS)])
    labelled = targets.sum(-1) > 0
    correct = (outputs.argmax(-1) == targets.argmax(-1)) & labelled
    history = session.history
    np.testing.assert_array_equal(history["accuracy/labelled"], labelled.sum(-1))
    np.testing.assert_array_equal(history["accuracy/correct"], correct.sum(-1))
    assert labelled.any(), "the window must hold decision steps"


def test_activity_rows_are_the_states_of_an_explicit_step_loop(evidence_run):
    _, session, (outputs, potentials, spikes) = evidence_run
    history = session.history
    units = min(ACTIVITY_UNITS, potentials.shape[-1])
    steps, hidden = history.activity("activity/hidden")
    assert steps.tolist() == list(range(STEPS))
    np.testing.assert_allclose(hidden, potentials[:, 0, :units], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(history.activity("activity/spikes")[1], spikes[:, 0, :units])
    probabilities = np.asarray(jax_softmax(outputs[:, 0]))
    np.testing.assert_allclose(
        history.activity("activity/output")[1], probabilities, rtol=1e-5, atol=1e-6
    )
    assert "activity/hidden" not in history.names  # kept in its own bounded store


def jax_softmax(x):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.fixture(scope="module")
def sine_run():
    """A learning D-RTRL run of the sine task's LIF network (no batch), 60 steps: the two
    synapse tests read it (one run, one compile), neither steps it."""
    task = tasks.get_task("sine")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = Session(
            task.suggested_model(hidden_size=8),
            task.example_input(),
            task=task,
            algorithm="d_rtrl",
            learning_rate=1e-3,
        )
    session.step(60)
    return session


def test_one_synapses_trace_is_the_learners_trace_entry(sine_run):
    session = sine_run
    synapse = session.probe.activity["synapse"]
    assert synapse["name"] == "rnn.W.weight" and synapse["i"] == 0
    algorithm = session.algorithm
    trace = algorithm.get_etrace_of(synapse["path"])[synapse["key"]][synapse["leaf"]]
    _, rows = session.history.activity("activity/synapse")
    assert rows.shape == (60, 3, 8)
    np.testing.assert_allclose(rows[-1, 0], np.asarray(trace)[0, :8, 0], rtol=1e-6)


def test_the_learning_signal_times_the_trace_is_the_gradient_for_one_state_neurons(sine_run):
    """A LIF unit has one hidden state and the run has no batch: every synapse into unit j
    gets g_ij = L_j ε_ij, so the recorded (ε, L, g) multiply out (checked against the
    gradient the learner computed, recorded in the same row)."""
    _, rows = sine_run.history.activity("activity/synapse")
    trace, signal, grad = rows[:, 0], rows[:, 1], rows[:, 2]
    np.testing.assert_allclose(signal * trace, grad, rtol=1e-3, atol=1e-6)
    assert np.abs(grad).max() > 0


def test_a_rate_model_records_its_hidden_state_and_no_spikes():
    task = tasks.get_task("delayed_recall")
    model = task.suggested_model(hidden_size=6)
    reference = copy.deepcopy(model)
    session = _frozen_session(task, model)
    session.step(12)
    expected = []
    initial = {path: s.value for path, s in brainstate.graph.states(reference).items()}
    for t in range(12):
        if t % task.n_steps == 0:  # the session starts each episode from the initial state
            for path, state in brainstate.graph.states(reference).items():
                state.value = initial[path]
        reference(task.step_data(t)[0])
        expected.append(np.asarray(reference.rnn.h.value).reshape(-1, 6)[0])
    assert "activity/spikes" not in session.history.activity_names
    np.testing.assert_allclose(
        session.history.activity("activity/hidden")[1], np.stack(expected), rtol=1e-5, atol=1e-6
    )


def test_activity_is_bounded_saved_and_loaded(tmp_path):
    history = History()
    rows = np.arange(ACTIVITY_KEEP + 10, dtype=np.float32)[:, None]
    history.extend(np.arange(rows.shape[0]), {"loss": rows[:, 0], "activity/hidden": rows})
    steps, kept = history.activity("activity/hidden")
    assert kept.shape[0] == ACTIVITY_KEEP and steps[0] == 10 and kept[0, 0] == 10
    assert history.to_json()["activity"]["steps"][0] == 10
    history.save(tmp_path / "run.npz")
    loaded = load_history(tmp_path / "run.npz")
    np.testing.assert_array_equal(loaded.activity("activity/hidden")[1], kept)


def test_a_custom_loss_without_a_task_records_no_accuracy():
    model = tasks.get_task("sine").suggested_model(hidden_size=4)
    brainstate.nn.init_all_states(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = Session(
            model, jnp.zeros(20), data=lambda t: (jnp.ones(20) * (t % 2), jnp.zeros(1))
        )
    session.step(3)
    assert "accuracy/correct" not in session.history
    assert "activity/output" not in session.history.activity_names
