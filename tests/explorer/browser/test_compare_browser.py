"""Compare mode in headless Chromium, driven by a real Python :class:`Comparison`.

The bridge page of ``test_live_browser`` forwards the page's requests (Step, Run, Pause,
Reset) to a real :class:`~etp_viz.explorer.compare.CompareExplorer`; its float32 buffers and
trait changes are replayed into the page. Checked: one line per algorithm in the loss and
fidelity panels with Python's numbers, the cost table (step, ms per step, memory per
algorithm), every algorithm's claim on each weight row, Step/Run/Pause/Reset acting on all, and
a saved page (no kernel) drawing the recorded comparison.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import etp_viz
from etp_viz import tasks

from .test_live_browser import assert_clean, bridged, canvas_image, wait_status  # noqa: F401

pytestmark = pytest.mark.browser

ALGORITHMS = ["d_rtrl", "eprop", "snap1", "bptt"]
SERIES = "(name) => { const s = window.etpEl.etpExplorer.live.series.get(name); "
SERIES += "return s ? [Array.from(s.data), s.shape] : null; }"


def compare_explorer():
    task = tasks.get_task("sine")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return etp_viz.show(
            task.suggested_model(hidden_size=8),
            task.example_input(),
            task=task,
            algorithm=ALGORITHMS,
            fidelity_every=4,
            fidelity_window=2,
            steps_per_frame=4,
        )


def lines_drawn(page, name):
    return page.page.evaluate(
        '(n) => document.querySelector(`canvas[data-live="${n}"]`).dataset.lines', name
    )


def test_compare_mode_steps_runs_and_shows_every_algorithm(bridged):  # noqa: F811
    explorer = compare_explorer()
    page, _ = bridged(explorer)
    p = page.page
    # the cost table: one row per algorithm; no Verify / decay / record in compare mode
    p.wait_for_selector("[data-live-compare] tr[data-compare-row]")
    rows = p.eval_on_selector_all("[data-compare-row]", "els => els.map(e => e.dataset.compareRow)")
    assert rows == ALGORITHMS
    assert not p.is_visible("button[data-live-action=verify]")
    assert "compare: d_rtrl, eprop, snap1, bptt" in p.text_content("[data-live-status]")

    for n in range(1, 5):
        p.click("button[data-live-action=step]")
        wait_status(page, f"step {n} ")
    p.wait_for_function(
        "(() => { const s = window.etpEl.etpExplorer.live.series.get('cosine'); "
        "return s && s.shape[1] >= 1; })()"
    )
    data, shape = p.evaluate(SERIES, "loss")
    assert shape == [4, 4, 2]
    page_loss = np.asarray(data, np.float64).reshape(shape)
    for i, label in enumerate(ALGORITHMS):
        np.testing.assert_allclose(page_loss[i, :, 1], explorer.histories[label].loss, rtol=1e-6)
    assert lines_drawn(page, "loss") == "4" and lines_drawn(page, "cosine") == "4"
    _, pixels = canvas_image(page, "loss")
    assert pixels > 200
    # every session moved in lockstep
    assert {s.step_count for s in explorer.comparison.sessions.values()} == {4}

    # each weight row carries every algorithm's claim; the selected weight explains them
    chips = p.eval_on_selector_all(
        "[data-weight] [data-algorithm-claim]", "els => els.map(e => e.dataset.algorithmClaim)"
    )
    weights = explorer.view_model["weights"]
    assert len(chips) == len(ALGORITHMS) * len(weights)
    expected = [f"{c['algorithm']}:{c['claim']}" for w in weights for c in w["claims"]]
    assert sorted(chips) == sorted(expected)
    p.click(f"[data-weight='{weights[0]['path']}']")
    p.wait_for_selector("[data-claims-detail] .etp-claim")
    assert p.eval_on_selector_all("[data-claims-detail] .etp-claim", "els => els.length") == 4

    # Run does not block; Pause stops every algorithm at the same step; the table has times
    p.click("button[data-live-action=run]")
    p.wait_for_function(
        "window.etpEl.etpExplorer.live.series.get('loss').shape[1] >= 16", timeout=90000
    )
    p.click("button[data-live-action=pause]")
    wait_status(page, "paused")
    counts = {s.step_count for s in explorer.comparison.sessions.values()}
    assert len(counts) == 1 and not explorer.comparison.running
    wait_status(page, f"step {counts.pop()} ")
    times = p.eval_on_selector_all("[data-compare-ms]", "els => els.map(e => e.textContent)")
    assert len(times) == 4 and all(t != "–" and float(t) > 0 for t in times), times

    # Reset: every algorithm back to step 0, panels cleared
    p.click("button[data-live-action=reset]")
    wait_status(page, "step 0 ")
    assert all(h.num_steps == 0 for h in explorer.histories.values())
    assert_clean(page)


def test_a_saved_comparison_draws_without_a_kernel(harness):
    explorer = compare_explorer()
    explorer.step(8)
    page = harness(explorer, "compare_saved")
    p = page.page
    p.wait_for_selector("canvas[data-live=loss][data-lines='4']", timeout=30000)
    assert p.is_visible("[data-live-note]")  # "recorded run", controls disabled
    assert p.is_disabled("button[data-live-action=step]")
    rows = p.eval_on_selector_all("[data-compare-row]", "els => els.map(e => e.dataset.compareRow)")
    assert rows == ALGORITHMS
    assert "step 8" in p.text_content("[data-live-status]")
    assert lines_drawn(page, "cosine") == "4"
    assert page.errors == [] and page.aborted == []


def test_compare_mode_shows_every_name_which_learner_is_exact_and_why_the_gap(harness):
    task = tasks.get_task("delayed_recall", seq_len=1, delay=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        explorer = etp_viz.show(
            task.suggested_model(hidden_size=6),
            task.example_input(),
            task=task,
            algorithm=["d_rtrl", "eprop", "rtrl", "bptt"],
            fidelity_every=5,
            fidelity_window=3,
        )
        explorer.step(30)
    page = harness(explorer, "compare_teach")
    p = page.page
    p.set_viewport_size({"width": 1400, "height": 1000})
    p.wait_for_selector("canvas[data-live=loss][data-lines='4']", timeout=30000)
    # every weight's full name is visible: not clipped by the claim chips or the row height
    names = p.eval_on_selector_all(
        "[data-weight] [data-weight-name]",
        """els => els.map((e) => { const r = e.getBoundingClientRect();
          const row = e.closest('[data-weight]').getBoundingClientRect();
          const line = e.parentElement;
          return [e.textContent, r.right <= row.right + 0.5 && r.bottom <= row.bottom + 0.5,
                  line.scrollWidth <= line.clientWidth]; })""",
    )
    weights = [w["path"] for w in explorer.view_model["weights"]]
    assert sorted(n for n, _, _ in names) == sorted(weights)
    assert all(inside and fits for _, inside, fits in names), names
    # the fidelity panel says which learner is exact; the loss panel is smoothed with chance
    title = p.text_content("[data-live-panel=cosine] [data-live-title]")
    assert "exact: rtrl, bptt" in title  # BPTT over each episode is the exact reference
    titles = p.eval_on_selector_all("[data-live-title]", "els => els.map(e => e.textContent)")
    assert not any("no learner" in t for t in titles), titles
    assert p.get_attribute("canvas[data-live=loss]", "data-smoothed") is None  # compare: lines
    chance = explorer.live_panels[0]["chance"]
    assert chance == pytest.approx(task.chance_loss)
    # the weights panel points to the dropped term that explains the gap
    gap = next(w for w in explorer.view_model["weights"] if w.get("gap") and w["dropped_nodes"])
    p.click(f"[data-weight='{gap['path']}']")
    p.wait_for_selector(f"[data-gap='{gap['path']}']")
    text = p.text_content(f"[data-gap='{gap['path']}']")
    assert "Why the learners differ" in text and "drop" in text and "exact: rtrl, bptt" in text
    p.screenshot(path="/tmp/etp_viz_screenshots/compare_teaching.png", full_page=True)
    assert page.errors == [] and page.aborted == []
