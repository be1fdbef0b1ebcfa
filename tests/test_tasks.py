"""Teaching tasks: shapes, determinism, losses, the registry and the suggested models."""

from __future__ import annotations

import subprocess
import sys

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from etp_viz import tasks
from etp_viz.ops._registry import ETP_PRIMITIVES
from etp_viz.tasks import TASKS, get_task

SMALL = {
    "delayed_recall": {"n_symbols": 3, "seq_len": 2, "delay": 3},
    "sine": {"n_steps": 20, "input_size": 8},
    "evidence_accumulation": {"n_cues": 3, "cue_steps": 2, "gap_steps": 1, "delay": 2},
    "leaky_integrator": {"n_steps": 15, "tau": 3.0},
}


def small(name, **kw):
    return get_task(name, **SMALL[name], **kw)


def test_registry_has_the_four_tasks():
    assert set(TASKS) == {"delayed_recall", "sine", "evidence_accumulation", "leaky_integrator"}
    assert isinstance(get_task("copy"), tasks.DelayedRecall)
    assert isinstance(get_task("Sine-Regression"), tasks.SineRegression)


def test_unknown_task_lists_valid_names():
    with pytest.raises(ValueError, match=r"Unknown task 'mnist'.*delayed_recall.*sine"):
        get_task("mnist")


def test_unknown_option_lists_valid_options():
    with pytest.raises(TypeError, match=r"unknown options \['n_step'\]; valid options: .*n_steps"):
        get_task("sine", n_step=3)


@pytest.mark.parametrize("batch_size", [None, 3])
@pytest.mark.parametrize("name", sorted(TASKS))
def test_sample_shapes_and_dtype(name, batch_size):
    task = small(name)
    xs, ys = task.sample(0, batch_size=batch_size)
    lead = (task.n_steps,) if batch_size is None else (task.n_steps, batch_size)
    assert xs.shape == (*lead, task.input_size)
    assert ys.shape == (*lead, task.output_size)
    assert xs.dtype == ys.dtype == jnp.float32
    assert np.all(np.isfinite(np.asarray(xs))) and np.all(np.isfinite(np.asarray(ys)))


@pytest.mark.parametrize("name", sorted(TASKS))
def test_sample_is_deterministic_in_key(name):
    task = small(name)
    first, again = task.sample(7, 4), task.sample(7, 4)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    from_jax_key = task.sample(jax.random.PRNGKey(7), 4)
    np.testing.assert_array_equal(from_jax_key[0], task.sample(jax.random.PRNGKey(7), 4)[0])
    if name != "sine":  # the sine task's input and target are frozen by design
        assert not np.array_equal(first[0], task.sample(8, 4)[0])


def test_sine_unfrozen_input_varies_with_key():
    task = small("sine", frozen=False)
    assert not np.array_equal(task.sample(1, 2)[0], task.sample(2, 2)[0])


@pytest.mark.parametrize("batch_size", [None, 2])
@pytest.mark.parametrize("name", sorted(TASKS))
def test_step_data_streams_episodes(name, batch_size):
    task = small(name, seed=3, batch_size=batch_size)
    T = task.n_steps
    xs0, ys0 = task.sample((3, 0), batch_size)
    xs1, _ = task.sample((3, 1), batch_size)
    for t in (0, T - 1):
        x_t, y_t = task.step_data(t)
        np.testing.assert_array_equal(x_t, xs0[t])
        np.testing.assert_array_equal(y_t, ys0[t])
    np.testing.assert_array_equal(task.step_data(T + 1)[0], xs1[1])
    assert task.example_input().shape == xs0[0].shape
    np.testing.assert_array_equal(
        small(name, seed=3, batch_size=batch_size).step_data(5)[0], task.step_data(5)[0]
    )


def test_delayed_recall_content():
    task = tasks.DelayedRecall(n_symbols=3, seq_len=2, delay=4)
    xs, ys = task.sample(0)
    shown = np.argmax(np.asarray(xs[:2, :3]), -1)
    np.testing.assert_array_equal(np.argmax(np.asarray(ys[6:]), -1), shown)
    assert float(ys[:6].sum()) == 0 and float(xs[2:6].sum()) == 0
    np.testing.assert_array_equal(xs[6:, 3], 1.0)


def test_evidence_accumulation_label_is_majority():
    task = tasks.EvidenceAccumulation(rate_on=1.0, rate_noise=0.0, channels_per_group=1)
    xs, ys = task.sample(5, batch_size=16)
    left, right = np.asarray(xs[..., 0]).sum(0), np.asarray(xs[..., 1]).sum(0)
    label = np.argmax(np.asarray(ys[-1]), -1)
    np.testing.assert_array_equal(label, (right > left).astype(int))
    assert float(ys[: task.n_steps - task.decision_steps].sum()) == 0


def test_evidence_accumulation_rejects_even_cues():
    with pytest.raises(ValueError, match="odd n_cues"):
        tasks.EvidenceAccumulation(n_cues=4)


def test_leaky_integrator_target_follows_recursion():
    task = tasks.LeakyIntegrator(input_size=1, tau=4.0, n_steps=30)
    xs, ys = task.sample(0)
    decay, y = np.exp(-1 / 4.0), 0.0
    for t in range(30):
        y = decay * y + (1 - decay) * float(xs[t, 0])
        np.testing.assert_allclose(float(ys[t, 0]), y, rtol=1e-5, atol=1e-6)


def test_masked_cross_entropy_ignores_unlabelled_rows():
    logits = jnp.array([[2.0, 0.0], [0.0, 5.0]])
    target = jnp.array([[1.0, 0.0], [0.0, 0.0]])
    expected = -jax.nn.log_softmax(logits[0])[0]
    np.testing.assert_allclose(tasks.masked_cross_entropy(logits, target), expected, rtol=1e-6)
    assert float(tasks.masked_cross_entropy(logits, jnp.zeros_like(target))) == 0.0


@pytest.mark.parametrize("spiking", [False, True])
@pytest.mark.parametrize("batch_size", [None, 2])
@pytest.mark.parametrize("name", sorted(TASKS))
def test_suggested_model_runs_steps_and_has_etp_ops(name, batch_size, spiking):
    task = small(name, batch_size=batch_size)
    model = task.suggested_model(hidden_size=8, spiking=spiking)
    outputs = [model(task.step_data(t)[0]) for t in range(3)]
    assert outputs[-1].shape == task.step_data(0)[1].shape
    loss = task.loss(jnp.stack(outputs), jnp.stack([task.step_data(t)[1] for t in range(3)]))
    assert loss.shape == () and np.isfinite(float(loss))
    closed, _ = brainstate.transform.make_jaxpr(lambda x: model(x))(task.example_input())
    assert sum(e.primitive in ETP_PRIMITIVES for e in closed.jaxpr.eqns) >= 2
    assert bool(model.states(brainstate.HiddenState))


def test_suggested_models_include_spiking_by_default():
    assert type(get_task("sine").suggested_model(hidden_size=4).rnn).__name__ == "LIF"
    assert type(get_task("evidence").suggested_model(hidden_size=4).rnn).__name__ == "ALIF"
    assert (
        type(get_task("leaky_integrator").suggested_model(hidden_size=4).rnn).__name__ == "MiniGRU"
    )


def _membrane_self_jacobian(layer, adaptation):
    """dV_t / dV_{t-1} of neuron 0 of ``layer`` (an ALIF without recurrent weights) at its
    threshold, with adaptation ``a`` (threshold A = v_th + beta a)."""
    threshold = layer.V_th + layer.beta * adaptation
    layer.V.value = jnp.full_like(layer.V.value, threshold)
    layer.a.value = jnp.full_like(layer.a.value, adaptation)
    x = jnp.zeros(layer.num_in)

    def step(V0):
        layer.V.value = layer.V.value.at[0].set(V0)
        layer.a.value = jnp.full_like(layer.a.value, adaptation)
        layer(x)
        return layer.V.value[0]

    return float(brainstate.transform.grad(step, argnums=0)(jnp.asarray(threshold)))


@pytest.mark.parametrize("adaptation", [0.0, 4.0, 10.0])
def test_suggested_alif_keeps_the_reset_out_of_the_membrane_jacobian(adaptation):
    """Issue 28's halt: differentiated, the soft reset V - A z gives the self-Jacobian
    alpha (1 - A psi / v_th), larger than 1 in size near threshold once A > 2 v_th, and the
    traces that carry it across a stream overflow. The suggested ALIF detaches the reset
    (e-prop's dv/dv = alpha), so it stays alpha at any adaptation."""
    model = get_task("evidence", batch_size=None).suggested_model(hidden_size=2)
    layer = model.rnn
    assert layer.detach_reset
    layer.W.weight.value = jax.tree.map(jnp.zeros_like, layer.W.weight.value)
    assert _membrane_self_jacobian(layer, adaptation) == pytest.approx(layer.alpha, rel=1e-6)
    layer.detach_reset = False  # the differentiated reset, for contrast
    psi = 1.0  # the sigmoid surrogate's peak, at threshold
    threshold = layer.V_th + layer.beta * adaptation
    undetached = _membrane_self_jacobian(layer, adaptation)
    assert undetached == pytest.approx(layer.alpha * (1 - threshold * psi), rel=1e-5, abs=1e-6)
    assert (abs(undetached) > 1) == (threshold > 2 * layer.V_th + 0.1)


def test_suggested_model_weights_follow_seed():
    def weights(seed):
        model = get_task("copy", seed=seed).suggested_model(hidden_size=4)
        values = {k: s.value for k, s in model.states(brainstate.ParamState).items()}
        return [leaf for leaf in jax.tree.leaves(values) if leaf.ndim == 2]

    np.testing.assert_array_equal(weights(1)[0], weights(1)[0])
    assert not np.array_equal(weights(1)[0], weights(2)[0])


def test_tasks_import_without_the_widget_stack():
    code = (
        "import sys; import etp_viz.tasks as t; t.get_task('sine').sample(0); "
        "print(sorted({'anywidget', 'ipywidgets', 'traitlets'} & set(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("name", sorted(TASKS))
def test_sample_numpy_is_sample_on_the_host(name):
    task = get_task(name)
    for batch in (None, 3):
        xs, ys = task.sample_numpy((task.seed, 2), batch)
        ref = task.sample((task.seed, 2), batch)
        assert type(xs) is np.ndarray and type(ys) is np.ndarray
        np.testing.assert_array_equal(xs, np.asarray(ref[0]))
        np.testing.assert_array_equal(ys, np.asarray(ref[1]))
