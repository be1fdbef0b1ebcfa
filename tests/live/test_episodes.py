"""Episode resets and the exact reference: on an episodic task a session puts the state back
at each episode start, ``"bptt"`` is BPTT over each episode (the exact gradient of the
episode's loss, checked against ``jax.grad`` of the unrolled episode) and the fidelity meter
measures it as exact."""

from __future__ import annotations

import copy
import warnings

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
from etp_viz.live.fidelity import aligned_window, reference_text
from etp_viz.live.frame_data import Episodes
from etp_viz.live.session import Session
from tests.oracles import bptt_gradients, relative_error


def lesson_task():
    return etp_viz.tasks.get_task("delayed_recall")  # 11-step episodes


def frozen_session(task, model, **options):
    """A session whose weights never move (SGD at rate 0): its losses are the model's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Session(
            model, task.example_input(), task=task, optimizer="sgd", learning_rate=0.0, **options
        )


def hand_losses(task, model, steps, reset):
    """The losses of ``model`` on the task's stream, its states put back at each episode
    start when ``reset``."""
    initial = {path: s.value for path, s in brainstate.graph.states(model).items()}
    call = brainstate.transform.jit(model)
    losses = []
    for t in range(steps):
        if reset and t % task.n_steps == 0:
            for path, state in brainstate.graph.states(model).items():
                state.value = initial[path]
        x_t, y_t = task.step_data(t)
        losses.append(float(task.loss(call(x_t), y_t)))
    return np.asarray(losses)


def test_each_episode_starts_from_the_initial_state():
    task = lesson_task()
    model = task.suggested_model(hidden_size=6)
    twin = copy.deepcopy(model)
    session = frozen_session(task, model, algorithm="d_rtrl")
    assert session.episodes is not None and session.episodes.length == task.n_steps
    session.step(2 * task.n_steps + 2)
    steps = session.history.num_steps
    expected = hand_losses(task, copy.deepcopy(twin), steps, reset=True)
    np.testing.assert_allclose(session.history.loss, expected, rtol=2e-5, atol=1e-6)
    # without the reset the carried state changes the second episode's losses
    carried = hand_losses(task, copy.deepcopy(twin), steps, reset=False)
    assert not np.allclose(carried[task.n_steps :], expected[task.n_steps :], rtol=1e-4, atol=0)
    stream = frozen_session(task, copy.deepcopy(twin), algorithm="d_rtrl", episode_reset=False)
    assert stream.episodes is None
    stream.step(steps)
    np.testing.assert_allclose(stream.history.loss, carried, rtol=2e-5, atol=1e-6)


def test_bptt_sums_to_the_gradient_of_each_episode(x64):
    """Two episodes of 3 steps: the online gradients of ``BPTT(episode=3)`` summed over an
    episode are ``jax.grad`` of that episode's loss, from the state it started in."""
    with brainstate.random.seed_context(1):
        model = etp_viz.tasks.RecurrentNet(etp_viz.nn.GRUCell(2, 4), etp_viz.nn.Linear(4, 2))
    brainstate.nn.init_all_states(model)
    xs = jnp.asarray(np.random.default_rng(0).normal(size=(6, 2)))
    loss = lambda y: jnp.sum(jnp.sin(y) ** 2)  # noqa: E731
    start = copy.deepcopy(model)
    expected = [bptt_gradients(start, xs[:3], lambda ys: sum(loss(y) for y in ys))]
    for x in xs[:3]:
        start(x)  # the second episode starts where the first one left the state
    expected.append(bptt_gradients(start, xs[3:], lambda ys: sum(loss(y) for y in ys)))
    alg = etp_viz.BPTT(model, episode=3)
    alg.compile_graph(xs[0])
    grad = brainstate.transform.grad(lambda x: loss(alg(x)), alg.param_states)
    for episode in range(2):
        total = None
        for x in xs[3 * episode : 3 * episode + 3]:
            g = grad(x)
            total = g if total is None else jax.tree.map(jnp.add, total, g)
        for path, value in expected[episode].items():
            key = path[0] if len(path) == 1 else path
            got = total[key] if key in total else total[".".join(map(str, path))]
            assert relative_error(got, value) < 1e-10, (episode, path)
    assert {c.kind for c in alg.gradient_claims().values()} == {"exact"}


def test_verify_finds_bptt_exact_on_every_weight(x64):
    task = lesson_task()
    model = task.suggested_model(hidden_size=5)
    xs, ys = task.sample(3, batch_size=task.batch_size)
    xs, ys = jnp.asarray(xs, jnp.float64), jnp.asarray(ys, jnp.float64)
    report = etp_viz.verify(model, xs, ys, algorithm="bptt", loss=task.loss)
    assert not report.contradictions
    assert {row.claim for row in report.rows} == {"exact"}
    assert max(row.relative_error for row in report.rows) < 1e-9


def test_the_meter_reads_bptt_as_exact_and_names_its_reference():
    task = lesson_task()
    model = task.suggested_model(hidden_size=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = Session(
            model, task.example_input(), task=task, algorithm="bptt", fidelity_every=20,
            fidelity_window=11,
        )  # fmt: skip
    assert session.fidelity_window == 11  # a window of one episode: every 22 steps
    session.step(44)
    records = session.history.fidelity
    assert [r["step"] for r in records] == [22, 44]
    assert all(r["cosine"] == pytest.approx(1.0, abs=1e-5) for r in records)
    assert reference_text(task.n_steps, session.fidelity_window).startswith("the exact gradient")


def test_window_alignment_and_reference_words():
    assert aligned_window(20, 50, 11) == (22, 55)
    assert aligned_window(5, 50, 11) == (5, 50)  # shorter than an episode: as asked
    assert reference_text(None, 20) == "BPTT over the last 20 steps"
    assert reference_text(11, 5) == "BPTT over the last 5 steps"


def test_bptt_needs_episodes():
    task = lesson_task()
    model = task.suggested_model(hidden_size=4)
    with pytest.raises(ValueError, match="algorithm='tbptt'"):
        Session(model, task.example_input(), task=task, algorithm="bptt", episode_reset=False)
    with pytest.raises(ValueError, match="episode=11"):
        Session(model, task.example_input(), task=task, algorithm=etp_viz.BPTT(model, episode=5))
    with pytest.raises(ValueError, match="needs episodes"):
        Session(model, task.example_input(), data=lambda t: task.step_data(t), episode_reset=True)


def test_episodes_skip_weights_and_random_keys():
    weight = brainstate.ParamState(jnp.ones(2))
    hidden = brainstate.HiddenState(jnp.ones(2))
    count = brainstate.ShortTermState(jnp.asarray(3, jnp.int32))
    episodes = Episodes(4, [(weight, weight.value), (hidden, jnp.zeros(2)), (count, 0)])
    assert [s for s, _ in episodes.states] == [hidden, count]
    episodes.reset()
    assert hidden.value.tolist() == [0.0, 0.0] and int(count.value) == 0
    assert weight.value.tolist() == [1.0, 1.0]
    # a learner's random key (UORO's, a legacy uint32 key under "key") keeps drawing anew
    influence = brainstate.ShortTermState({"key": jax.random.PRNGKey(0), "m": jnp.zeros(2)})
    start = influence.value
    episodes = Episodes(4, [(influence, start)])
    influence.value = {"key": jax.random.PRNGKey(7), "m": jnp.ones(2)}
    episodes.reset()
    assert influence.value["m"].tolist() == [0.0, 0.0]
    assert influence.value["key"].tolist() == jax.random.PRNGKey(7).tolist()
    influence.value = {"key": jax.random.PRNGKey(7), "m": jnp.ones(2)}
    episodes.reset_where(jnp.asarray(False))
    assert influence.value["m"].tolist() == [1.0, 1.0]
