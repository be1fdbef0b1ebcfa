"""Static matplotlib plots of a history (Agg, no display)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from etp_viz import plot as plots
from etp_viz.live.history import History


@pytest.fixture
def history():
    h = History(meta={"algorithm": "es_d_rtrl", "task": "sine", "relations": {"r0": ["W"]}})
    steps = np.arange(100)
    h.extend(
        steps,
        {
            "loss": np.exp(-steps / 30) + 0.01,
            "trace_x/r0": np.ones(100),
            "trace_f/r0.g0": np.linspace(0, 1, 100),
            "grad_norm/W": np.linspace(1, 0, 100),
            "dhdh/g0": np.random.default_rng(0).normal(size=(100, 8)),
        },
    )
    h.fidelity = [
        {"step": 50, "window": 20, "cosine": 0.9, "rel_error": 0.3},
        {"step": 100, "window": 20, "cosine": 0.95, "rel_error": 0.2},
    ]
    return h


def test_loss_figure_has_smoothing_and_an_optional_log_axis(history):
    fig = plots.loss(history, smooth=10)
    ax = fig.axes[0]
    assert ax.get_yscale() == "linear"
    assert len(ax.lines) == 2
    fig.savefig(__import__("io").BytesIO(), format="png")
    assert plots.loss(history, log=True).axes[0].get_yscale() == "log"


def _masked_history():
    """A masked classification run: labels on every 4th step, loss exactly 0 elsewhere."""
    steps = np.arange(40)
    labelled = (steps % 4 == 3).astype(np.float32)
    loss = np.where(labelled > 0, 0.7 - steps / 100, 0.0)
    correct = labelled * (steps > 20)
    meta = {"episode": 8, "chance_loss": 0.693, "chance_accuracy": 0.5}
    values = {"loss": loss, "accuracy/correct": correct, "accuracy/labelled": labelled}
    return History(steps, values, meta=meta)


def test_masked_loss_is_smoothed_over_labelled_steps_per_episode_with_chance():
    history = _masked_history()
    ax = plots.loss(history).axes[0]
    lines = {line.get_label(): line for line in ax.lines}
    assert set(lines) == {"each step", "mean of 8 steps", "chance 0.693"}
    raw_steps = lines["each step"].get_xdata()
    assert (np.asarray(raw_steps) % 4 == 3).all()  # the zero-loss steps are left out
    smoothed = np.asarray(lines["mean of 8 steps"].get_ydata())
    # the mean of the (two) labelled steps in the last 8: never pulled towards 0
    np.testing.assert_allclose(smoothed[-1], np.mean([0.7 - 35 / 100, 0.7 - 39 / 100]))
    assert np.nanmin(smoothed) > 0.25


def test_accuracy_figure_counts_labelled_steps_and_draws_chance():
    history = _masked_history()
    ax = plots.accuracy(history).axes[0]
    lines = {line.get_label(): line for line in ax.lines}
    assert "chance 0.5" in lines
    mean = np.asarray(lines["mean of 8 steps"].get_ydata())
    assert mean[-1] == 1.0 and mean[15] == 0.0
    with pytest.raises(ValueError, match="classification"):
        plots.accuracy(History(np.arange(3), {"loss": np.ones(3)}))


def test_compare_smooths_every_learner_alike_and_adds_accuracy():
    a, b = _masked_history(), _masked_history()
    fig = plots.compare({"d_rtrl": a, "bptt": b})
    assert len(fig.axes) == 2
    assert fig.axes[0].get_title() == "loss (mean of 8 steps)"
    assert any(line.get_label() == "chance 0.5" for line in fig.axes[1].lines)


def test_loss_marks_failure(history):
    history.failure = {"step": 60, "quantities": ["loss"], "message": "x"}
    labels = [line.get_label() for line in plots.loss(history).axes[0].lines]
    assert "non-finite at step 60" in labels


def test_trace_magnitudes_names_traces_by_weight_with_ids_only_as_gid(history):
    lines = plots.trace_magnitudes(history).axes[0].lines
    assert [line.get_label() for line in lines] == ["W (input part)", "W (hidden part)"]
    assert [line.get_gid() for line in lines] == ["trace_x/r0", "trace_f/r0.g0"]
    legend = [t.get_text() for t in plots.trace_magnitudes(history).axes[0].get_legend().texts]
    assert not any(re.search(r"\br\d|ε", text) for text in legend), legend
    only = plots.trace_magnitudes(history, relations=["r0.g0"]).axes[0].lines
    assert [line.get_gid() for line in only] == ["trace_f/r0.g0"]
    assert len(plots.trace_magnitudes(history, relations=["W"]).axes[0].lines) == 2


def test_trace_labels_tell_apart_groups_and_unnamed_traces():
    keys = [("trace", "r0.g0"), ("trace", "r0.g1"), ("trace", "r1.g0")]
    labels = plots.trace_labels(keys, {"r0": ["rnn.W.weight"]})
    assert labels == ["rnn.W.weight (hidden group 0)", "rnn.W.weight (hidden group 1)", "trace 3"]


def test_jacobian_heatmap_is_diverging_and_trims_outliers(history):
    values = np.random.default_rng(1).normal(size=(50, 6))
    values[10, 2] = 1e6  # an outlier must not set the colour scale
    fig = plots.jacobian_heatmap(values, quantile=0.99)
    image = fig.axes[0].images[0]
    low, high = image.get_clim()
    assert low == -high and high < 10
    assert image.get_cmap().name == "RdBu_r"
    assert plots.jacobian_heatmap(history, "dhdh/g0", last=30).axes[0].images[
        0
    ].get_array().shape == (8, 30)


def test_fidelity_and_gradient_norms(history):
    assert len(plots.fidelity(history).axes[0].lines) == 3
    assert len(plots.gradient_norms(history).axes[0].lines) == 1


def test_missing_data_errors_teach():
    empty = History()
    with pytest.raises(ValueError, match="fidelity_every"):
        plots.fidelity(empty)
    with pytest.raises(ValueError, match="no trace magnitudes"):
        plots.trace_magnitudes(empty)
    with pytest.raises(ValueError, match=r"\(steps, units\) array"):
        plots.jacobian_heatmap(empty)


def test_plots_accept_a_session_like_object(history):
    class Holder:
        pass

    holder = Holder()
    holder.history = history
    assert plots.loss(holder).axes


def test_unmeasured_steps_are_skipped_not_drawn_as_gaps():
    # heavy metrics are measured every record_every steps and NaN in between
    h = History(meta={"algorithm": "d_rtrl", "relations": {"r0": ["W"]}})
    steps = np.arange(64)
    every16 = np.where((steps + 1) % 16 == 0, np.linspace(1, 2, 64), np.nan)
    dhdh = np.full((64, 4), np.nan)
    dhdh[15::16] = 0.5
    h.extend(
        steps,
        {"loss": np.ones(64), "trace/r0.g0": every16, "grad_norm/W": every16, "dhdh/g0": dhdh},
    )
    (trace_line,) = plots.trace_magnitudes(h).axes[0].lines
    np.testing.assert_array_equal(trace_line.get_xdata(), [15, 31, 47, 63])
    (grad_line,) = plots.gradient_norms(h).axes[0].lines
    assert np.isfinite(grad_line.get_ydata()).all() and len(grad_line.get_ydata()) == 4
    image = plots.jacobian_heatmap(h, "dhdh/g0").axes[0].images[0]
    assert image.get_array().shape == (4, 4) and np.isfinite(image.get_array()).all()


def test_heatmap_columns_are_the_measured_steps_labelled_with_their_numbers():
    # 'auto' record_every may change the spacing mid-run: columns must still be the measured
    # steps (one each, in order), labelled with the step numbers, not a linear step axis
    h = History(meta={"algorithm": "d_rtrl"})
    measured = [3, 7, 40, 41, 200]
    df = np.full((256, 2), np.nan)
    df[measured] = np.arange(10.0).reshape(5, 2)
    h.extend(np.arange(256), {"loss": np.ones(256), "df/r0.g0": df})
    ax = plots.jacobian_heatmap(h).axes[0]
    image = ax.images[0]
    np.testing.assert_array_equal(image.get_array(), df[measured].T)
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(s) for s in measured]
    assert ax.get_xlabel() == "measured step"
    steps, rows = h.measured("df/r0.g0", 2)
    assert steps.tolist() == [41, 200] and rows.shape == (2, 2)


def test_figures_display_as_png_without_pyplot(history):
    """A notebook shows the figure (and stores it: GitHub, nbviewer) with no inline backend."""
    png = plots.loss(history)._repr_png_()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000
