"""etp_viz.sweep: one learner's knob over values and seeds, against the hand-written loop
(Session + verify), its errors, its JSON rows and its plot."""

from __future__ import annotations

import io
import json
import sys
import types

import brainstate
import numpy as np
import pytest

import etp_viz
from etp_viz import sweeps
from etp_viz.learn.registry import learner_bytes, spec_of
from etp_viz.live import Session

STEPS = 20  # two episodes of ten steps


def small_task(seed: int = 0):
    return etp_viz.tasks.get_task(
        "leaky_integrator", n_steps=10, batch_size=2, seed=seed
    ).with_recipe(hidden_size=3)


@pytest.fixture(scope="module")
def decay_sweep(x64_module):
    """ES-D-RTRL's decay swept on a module: every run starts from a copy of it."""
    task = small_task()
    model = task.suggested_model()
    before = {k: np.array(s.value) for k, s in model.states(brainstate.ParamState).items()}
    table = etp_viz.sweep(model, task, "es_d_rtrl", decay=[0.5, 0.95], steps=STEPS)
    return task, model, before, table


def hand_loop(task, decay, steps):
    """What a course writes without sweep: a session per value, then verify on the run's last
    episode from the state every episode starts in (the session resets it there)."""
    model = task.suggested_model()  # the task's seed: the weights the sweep's module has
    start = [
        (s, s.value) for s in model.states().values() if not isinstance(s, brainstate.ParamState)
    ]
    learner = etp_viz.ES_D_RTRL(model, decay)
    session = Session(model, task.example_input(), task=task, algorithm=learner)
    session.step(steps)
    episode = steps // task.n_steps - 1
    xs, ys = task.sample((task.seed, episode), task.batch_size)
    for state, value in start:
        state.value = value
    report = etp_viz.verify(model, xs, ys, algorithm=learner, loss=task.loss)
    loss = np.asarray(session.history.loss, np.float64)
    end = steps // task.n_steps * task.n_steps
    final = float(loss[max(end - 20 * task.n_steps, 0) : end].mean())
    return report, final, sum(learner_bytes(learner).values())


# -- the same numbers as the hand-written loop ----------------------------------------------


def test_sweep_gives_the_numbers_of_the_hand_loop(decay_sweep):
    task, _, _, table = decay_sweep
    assert table.learner == "es_d_rtrl" and table.knob == "decay"
    assert table.values == [0.5, 0.95] and table.seeds == [0] and table.steps == STEPS
    for decay in (0.5, 0.95):
        report, final, state_bytes = hand_loop(task, decay, STEPS)
        rows = [r for r in table.rows if r["value"] == decay]
        assert [r["weight"] for r in rows] == [r.path for r in report.rows]
        for row, want in zip(rows, report.rows):
            assert row["claim"] == want.claim
            np.testing.assert_allclose(row["cosine"], want.cosine, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(
                row["relative_error"], want.relative_error, rtol=1e-9, atol=1e-12
            )
            np.testing.assert_allclose(row["final_loss"], final, rtol=1e-9)
            assert row["state_bytes"] == state_bytes
            assert row["learner"] == "es_d_rtrl" and row["seed"] == 0
            assert row["steps"] == STEPS and not row["halted"]


def test_the_decay_changes_the_approximate_weights_only(decay_sweep):
    """A sweep that could not tell its values apart would pass the test above with one run
    copied: the decays' approximate weights must differ, the exact readout must not."""
    _, _, _, table = decay_sweep
    by = {(r["value"], r["weight"]): r for r in table.rows}
    approximate = [w for (v, w), r in by.items() if v == 0.5 and r["claim"] == "approximate"]
    assert approximate
    assert any(abs(by[0.5, w]["cosine"] - by[0.95, w]["cosine"]) > 1e-3 for w in approximate)
    exact = [r for r in table.rows if r["claim"] == "exact"]
    assert exact and all(r["relative_error"] < 1e-7 for r in exact)


def test_a_module_is_copied_never_stepped(decay_sweep):
    _, model, before, _ = decay_sweep
    after = {k: np.array(s.value) for k, s in model.states(brainstate.ParamState).items()}
    assert before.keys() == after.keys()
    assert all(np.array_equal(before[k], after[k]) for k in before)


def test_rows_are_json_and_the_table_reads(decay_sweep):
    _, _, _, table = decay_sweep
    rows = json.loads(json.dumps(table.rows, allow_nan=False))
    assert rows == table.rows and len(rows) == 2 * 6  # two decays x six weight leaves
    assert json.loads(json.dumps(table.to_json()))["knob"] == "decay"
    text = repr(table)
    assert text.startswith("sweep: es_d_rtrl decay=[0.5, 0.95] on leaky_integrator")
    assert "rnn.Wz.weight" in text and len(text.splitlines()) == 2 + len(table.rows)


def test_plot_draws_each_weight_against_the_knob(decay_sweep):
    import matplotlib

    matplotlib.use("Agg")
    _, _, _, table = decay_sweep
    fig = table.plot()
    top, bottom = fig.axes
    assert [t.get_text() for t in top.get_legend().get_texts()] == list(
        dict.fromkeys(r["weight"] for r in table.rows)
    )
    assert bottom.get_xlabel() == "decay" and bottom.get_ylabel() == "final loss"
    fig.savefig(io.BytesIO(), format="png")
    fig = table.plot(metric="relative_error")
    assert "relative error" in fig.axes[0].get_ylabel()
    with pytest.raises(ValueError, match="metric must be 'cosine' or 'relative_error'"):
        table.plot(metric="loss")


def test_plot_places_values_that_are_not_numbers_in_order():
    """A decay pair (or a name) is a category; a weight never verified (None) is left out."""
    rows = [
        {
            "value": value,
            "seed": 0,
            "weight": "w",
            "cosine": cosine,
            "relative_error": 0.1,
            "final_loss": loss,
        }
        for value, cosine, loss in (([0.9, 0.8], 0.5, 1.0), ([0.5, 0.5], None, 2.0))
    ]
    table = sweeps.SweepTable("es_d_rtrl", "decay", [[0.9, 0.8], [0.5, 0.5]], [0], 4, "t", rows)
    top, bottom = table.plot().axes
    assert [t.get_text() for t in bottom.get_xticklabels()] == ["[0.9, 0.8]", "[0.5, 0.5]"]
    points = top.lines[0].get_xydata()
    assert points.tolist() == [[0.0, 0.5]]  # the None cosine is not drawn


def test_to_pandas_needs_pandas(decay_sweep, monkeypatch):
    _, _, _, table = decay_sweep
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(ImportError, match="pip install pandas"):
        table.to_pandas()
    fake = types.ModuleType("pandas")
    fake.DataFrame = lambda rows: ("frame", rows)
    monkeypatch.setitem(sys.modules, "pandas", fake)
    assert table.to_pandas() == ("frame", table.rows)


# -- seeds, a model factory, a window --------------------------------------------------------


def test_window_sweep_over_seeds_with_a_model_factory(x64_module):
    built = []

    def model(seed):
        built.append(seed)
        return small_task(seed).suggested_model()

    task = small_task()
    table = etp_viz.sweep(model, task, "truncated_bptt", window=[1, 10], seeds=[0, 1], steps=16)
    assert built == [0, 1] and table.learner == "tbptt" and table.knob == "window"
    runs = {(r["value"], r["seed"]): r for r in table.rows}
    assert sorted(runs) == [(1, 0), (1, 1), (10, 0), (10, 1)]
    # the window buffer grows with the window; the seeds are other data and other weights
    assert runs[10, 0]["state_bytes"] > runs[1, 0]["state_bytes"]
    assert runs[1, 0]["final_loss"] != runs[1, 1]["final_loss"]
    # a window of the whole episode (10 steps) is BPTT's gradient; one step is not
    assert all(r["relative_error"] < 1e-7 for r in table.rows if r["value"] == 10)
    recurrent = [r for r in table.rows if r["weight"].startswith("rnn.") and r["value"] == 1]
    assert any(r["relative_error"] > 1e-3 for r in recurrent)
    assert all(r["ms_per_step"] is None for r in table.rows)  # one round of 16: none timed


def test_snap_is_swept_by_its_order():
    """``"snap"`` (or ``"snap<n>"``) with ``n=[...]``: the knob gives the order."""
    net = etp_viz.nn.GRUCell(2, 3)
    brainstate.nn.init_all_states(net)
    for name in ("snap", "SnAp-3"):
        spec = sweeps._learner_spec(name)
        assert spec is spec_of("snap1")
        assert [sweeps._build_learner(spec, "n", n, {}, net).n for n in (1, 2)] == [1, 2]


def test_a_seed_is_the_task_with_that_seed_and_its_recipe():
    task = small_task().with_recipe(learning_rate=0.5)
    other = sweeps._reseeded(task, 7)
    assert other.seed == 7 and other.batch_size == task.batch_size == 2
    assert other.recipe() == task.recipe() and other.n_steps == task.n_steps
    assert not np.array_equal(other.step_data(0)[0], task.step_data(0)[0])  # its data stream
    assert sweeps._reseeded(task, task.seed) is task


# -- errors name the learner, the knob and the valid options ---------------------------------


@pytest.mark.parametrize(
    ("learner", "kwargs", "error", "match"),
    [
        ("es_d_rtrl", {}, TypeError, r"exactly one knob of 'es_d_rtrl'.*got none.*\['decay'"),
        (
            "es_d_rtrl",
            {"decay": [0.9], "vjp_method": ["single-step"]},
            TypeError,
            r"exactly one knob.*got \['decay', 'vjp_method'\]",
        ),
        ("snap1", {"decay": [0.9]}, TypeError, r"'snap' does not take 'decay'.*es_d_rtrl.*\['n'\]"),
        ("tbptt", {"rate": [1]}, TypeError, r"unknown knob 'rate' for 'tbptt'.*takes \['window'\]"),
        ("es_d_rtrl", {"decya": [0.9]}, TypeError, r"unknown knob 'decya'.*Did you mean 'decay'\?"),
        ("rtrl", {"n": [1]}, TypeError, r"'rtrl' does not take 'n'.*'rtrl' takes no options"),
        ("es_d_rtrl", {"decay": []}, ValueError, r"decay= is empty.*'es_d_rtrl'"),
        ("es_d_rtrl", {"decay": 0.9}, TypeError, r"decay= takes a list of values.*decay=\[0.9\]"),
        ("no_such", {"decay": [0.9]}, ValueError, r"Unknown algorithm 'no_such'"),
    ],
)
def test_bad_knobs_are_clear_errors(learner, kwargs, error, match):
    with pytest.raises(error, match=match):
        etp_viz.sweep(None, "sine", learner, steps=1, **kwargs)


def test_bad_arguments_are_clear_errors():
    task = small_task()
    with pytest.raises(TypeError, match="registered name"):
        etp_viz.sweep(None, task, etp_viz.SnAp, n=[1])
    with pytest.raises(TypeError, match=r"'n' is the knob swept"):
        etp_viz.sweep(None, task, "snap", n=[1], options={"n": 2})
    with pytest.raises(TypeError, match=r"'eprop' got unknown option\(s\) \['decay'\]"):
        etp_viz.sweep(None, task, "eprop", kappa_filter_decay=[0.5], options={"decay": 0.9})
    with pytest.raises(TypeError, match=r"unknown training option\(s\) \['lr'\]"):
        etp_viz.sweep(None, task, "tbptt", window=[2], training={"lr": 0.1})
    with pytest.raises(ValueError, match="seeds= is empty"):
        etp_viz.sweep(None, task, "tbptt", window=[2], seeds=[])
    with pytest.raises(ValueError, match="steps must be a positive"):
        etp_viz.sweep(None, task, "tbptt", window=[2], steps=0)
    with pytest.raises(TypeError, match="teaching task"):
        etp_viz.sweep(None, object(), "tbptt", window=[2])
    with pytest.raises(TypeError, match=r"model must be a brainstate.nn.Module.*seed -> module"):
        etp_viz.sweep(3, task, "tbptt", window=[2], steps=1)
