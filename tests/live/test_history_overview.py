"""The whole-run overview of a history: per bucket mean, min and max, checked against numpy
over the same buckets, however the steps arrive."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from etp_viz.live.history import History, Overview, bucket_stats


def numpy_buckets(values: np.ndarray, width: int) -> tuple[np.ndarray, ...]:
    """The oracle: mean / min / max of the finite values of each ``width``-step bucket."""
    pad = (-values.size) % width
    grid = np.concatenate([values, np.full(pad, np.nan)]).reshape(-1, width)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a bucket of NaN only: NaN
        return np.nanmean(grid, 1), np.nanmin(grid, 1), np.nanmax(grid, 1)


@pytest.mark.parametrize("chunks", [[3000], [1, 7, 500, 1, 2491], [64] * 47])
def test_overview_keeps_mean_min_and_max_per_bucket(chunks):
    rng = np.random.default_rng(0)
    values = rng.normal(size=sum(chunks))
    values[rng.random(values.size) < 0.3] = np.nan  # steps without a target
    values[100:140] = np.nan  # a whole bucket without one
    overview = Overview(buckets=16)
    start = 0
    for size in chunks:
        overview.extend(values[start : start + size])
        start += size
    view = overview.read()
    width = view["width"]
    assert 16 <= view["mean"].size <= 32 and width & (width - 1) == 0
    mean, lo, hi = numpy_buckets(values, width)
    np.testing.assert_allclose(view["mean"], mean, rtol=1e-12)
    np.testing.assert_array_equal(view["min"], lo)
    np.testing.assert_array_equal(view["max"], hi)
    assert (
        view["steps"][0] == 0 and view["steps"][-1] <= values.size - 1 < view["steps"][-1] + width
    )
    # the band holds every value: the extremes of the run survive the downsampling
    assert np.nanmin(view["min"]) == np.nanmin(values)
    assert np.nanmax(view["max"]) == np.nanmax(values)


def test_history_overview_masks_steps_without_a_target_and_starts_at_step_0():
    steps = 1200  # more than the live panels' recent window (500 steps)
    rng = np.random.default_rng(1)
    loss = rng.random(steps)
    labelled = (np.arange(steps) % 4 == 3).astype(float) * 2  # two labelled rows every 4th step
    correct = np.where(labelled > 0, rng.integers(0, 3, steps), 0).astype(float)
    history = History()
    for start in range(0, steps, 100):
        part = slice(start, start + 100)
        history.extend(
            np.arange(steps)[part],
            {
                "loss": loss[part],
                "accuracy/correct": correct[part],
                "accuracy/labelled": labelled[part],
            },
        )
    view = history.overview("loss")
    assert view["steps"][0] == 0
    masked = np.where(labelled > 0, loss, np.nan)
    mean, lo, hi = numpy_buckets(masked, view["width"])
    np.testing.assert_allclose(view["mean"], mean, rtol=1e-12)
    np.testing.assert_array_equal(view["max"], hi)
    accuracy = history.overview("accuracy")
    with np.errstate(invalid="ignore", divide="ignore"):
        per_step = np.where(labelled > 0, correct / labelled, np.nan)
    np.testing.assert_allclose(accuracy["mean"], numpy_buckets(per_step, accuracy["width"])[0])
    with pytest.raises(KeyError, match="No overview of 'trace'"):
        history.overview("trace")
    history.clear()
    with pytest.raises(KeyError):
        history.overview("loss")


def test_bucket_stats_of_sparse_checkpoints():
    steps = np.array([50, 100, 150, 200, 250])
    values = np.array([0.1, np.nan, 0.5, 0.2, 0.9])
    starts, mean, lo, hi = bucket_stats(steps, values, 128)
    assert starts.tolist() == [0, 128]
    np.testing.assert_allclose(mean, [0.1, np.mean([0.5, 0.2, 0.9])])
    assert lo.tolist() == [0.1, 0.2] and hi.tolist() == [0.1, 0.9]


def trace_history(
    steps: int, every: int, sparse: bool, seed: int = 2
) -> tuple[History, np.ndarray]:
    """A history whose trace magnitude is measured every ``every``-th step (NaN between), fed
    in uneven chunks as dense NaN-filled rows or as sparse measured rows (``measured=``)."""
    rng = np.random.default_rng(seed)
    trace = np.where(np.arange(steps) % every == every - 1, rng.random(steps) * 10, np.nan)
    history = History()
    start = 0
    for size in [7, 300, 1, 2000, steps]:
        part = slice(start, min(start + size, steps))
        chunk, at = trace[part], np.flatnonzero(np.isfinite(trace[part]))
        values = {"loss": rng.random(chunk.size), "trace/r0.g0": chunk[at] if sparse else chunk}
        history.extend(np.arange(steps)[part], values, {"trace/r0.g0": at} if sparse else None)
        start = part.stop
        if start >= steps:
            break
    return history, trace


@pytest.mark.parametrize("sparse", [False, True])
def test_trace_overview_is_bounded_and_its_value_at_a_step_is_the_history_s(sparse):
    history, trace = trace_history(5000, every=4, sparse=sparse)
    np.testing.assert_array_equal(history["trace/r0.g0"], trace)
    view = history.overview("trace/r0.g0")
    width = view["width"]
    assert view["mean"].size <= 512 and width > 1 and "trace/r0.g0" in history.overview_names
    # the value at step s: the mean of the measured values of the bucket holding s
    dense = history["trace/r0.g0"]
    for step in [0, 3, 1234, 4095, 4999]:
        bucket = (step - view["steps"][0]) // width
        expected = numpy_buckets(dense, width)[0][bucket]
        np.testing.assert_allclose(view["mean"][bucket], expected, rtol=1e-12)
        assert view["steps"][bucket] <= step < view["steps"][bucket] + width
    assert np.nanmax(view["max"]) == np.nanmax(dense)  # the colour scale's top survives


def test_short_trace_overview_holds_every_measured_value_exactly():
    history, trace = trace_history(400, every=3, sparse=True)
    view = history.overview("trace/r0.g0")
    assert view["width"] == 1 and view["steps"].tolist() == list(range(400))
    measured = np.isfinite(trace)
    np.testing.assert_array_equal(view["mean"][measured], history["trace/r0.g0"][measured])
    assert np.isnan(view["mean"][~measured]).all()  # not measured: the page reads the one before


def test_trace_overviews_are_pushed_bounded_and_padded_for_a_learner_without_traces():
    from etp_viz.explorer.live_panels import push_overviews, trace_names

    with_traces, _ = trace_history(3000, every=2, sparse=False)
    without = History()
    without.extend(np.arange(3000), {"loss": np.zeros(3000)})
    sent = []

    class Page:
        def send(self, content, buffers):
            sent.append((content, np.frombuffer(buffers[0], "<f4").reshape(content["shape"])))

    names = trace_names([with_traces, without])
    assert names == ["trace/r0.g0"]
    push_overviews(Page(), [with_traces], names)
    push_overviews(Page(), [with_traces, without], names)
    (one, rows), (two, both) = sent
    assert one["name"] == "overview/trace/r0.g0" and one["overview"] == "trace/r0.g0"
    assert rows.shape[0] <= 512 and rows.shape[1] == 4 and one["width"] > 1
    view = with_traces.overview("trace/r0.g0")
    np.testing.assert_allclose(rows[:, 1], view["mean"].astype(np.float32))
    assert both.shape == (2, rows.shape[0], 4) and two["width"] == one["width"]
    assert np.isnan(both[1]).all()
