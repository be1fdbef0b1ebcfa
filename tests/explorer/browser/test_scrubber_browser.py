"""The run as a movie, in headless Chromium: the scrubber of the live region replays the graph's
trace colouring and marks every panel at a past step, driven by a real Python session (the
bridge page of ``test_live_browser``) and in the saved page of the same run (no kernel).

The run is longer than the page's recent window (cut to 100 steps here, to keep the run short),
so an early step is read from the whole-run trace overview (``overview/trace/…``) and a late
one from the recent window."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import etp_viz
from etp_viz import tasks
from etp_viz.explorer import live_explorer

from .test_live_browser import assert_clean, bridged  # noqa: F401 - fixture

pytestmark = pytest.mark.browser

STEPS = 200
#: The recent window sent to the page in this test (500 steps by default).
WINDOW = 100
#: An early step: before the page's recent window; traces are measured every 32nd step and on
#: each frame's last step here, so it shows the last measurement before it.
EARLY = 70
#: (DOM id, colour position, fill) of every graph node coloured by its trace magnitude.
COLOURED = """[...document.querySelectorAll('g.etp-trace-coloured')].map((e) => [e.id,
  +e.dataset.tracePosition, e.querySelector('polygon, ellipse, path').getAttribute('fill')])"""


def relation_magnitudes(history, at) -> dict[str, float]:
    """Each relation's ‖ε‖ (root of the sum of squares of its trace series) from ``at(name)``."""
    sums: dict[str, float] = {}
    for name in history.overview_names:
        match = re.match(r"^trace(?:_x|_f)?/(r\d+)", name)
        if match:
            value = at(name)
            if np.isfinite(value):
                sums[match[1]] = sums.get(match[1], 0.0) + value * value
    return {k: float(np.sqrt(v)) for k, v in sums.items()}


def overview_at(history, name, step) -> float:
    """The whole-run overview at ``step`` (what an early step shows): the mean of the bucket
    holding it, or of the last bucket before it that holds a measurement."""
    view = history.overview(name)
    means = view["mean"][: (step - int(view["steps"][0])) // int(view["width"]) + 1]
    finite = means[np.isfinite(means)]
    return float(finite[-1]) if finite.size else float("nan")


def measured_at(history, name, step) -> float:
    """The value recorded at or nearest before ``step`` (what a step in the recent window shows)."""
    values = history[name][: step + 1]
    finite = values[np.isfinite(values)]
    return float(finite[-1]) if finite.size else float("nan")


def scrub(p, *keys):
    """Press ``keys`` on the focused scrubber; return its readout."""
    p.focus("[data-live-scrub]")
    for key in keys:
        p.keyboard.press(key)
    return p.text_content("[data-live-scrub-readout]")


def check_step(p, step, expected, live):
    """The graph is coloured by ``expected`` (relation ‖ε‖ at ``step``) on the run's fixed
    scale, differently from the live colours; the loss and trace panels carry the cursor."""
    assert p.get_attribute("[data-live-legend]", "data-step") == str(step)
    top = float(p.get_attribute("[data-live-legend]", "data-max"))
    coloured = p.evaluate(COLOURED)
    assert max(pos for _, pos, _ in coloured) == pytest.approx(
        max(expected.values()) / top, abs=2e-3
    )
    assert {i: fill for i, _, fill in coloured} != {i: fill for i, _, fill in live}
    for panel in ("loss", "traces"):
        canvas = f"canvas[data-live={panel}]"
        assert p.get_attribute(canvas, "data-cursor") == str(step)
        assert p.get_attribute(canvas, "data-cursor-x") is not None, panel
        assert p.text_content(f"[data-live-cursor={panel}]").startswith(f"step {step}: ")


def test_scrubber_replays_the_graph_colours_and_marks_the_panels_live_and_saved(
    bridged,  # noqa: F811
    harness,
    monkeypatch,
):
    monkeypatch.setattr(live_explorer, "LIVE_WINDOW", WINDOW)
    task = tasks.get_task("sine")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        explorer = etp_viz.show(
            task.suggested_model(hidden_size=4),
            task.example_input(),
            task=task,
            steps_per_frame=50,
        )
    page, _ = bridged(explorer)
    p = page.page
    explorer.step(STEPS)
    history = explorer.history
    p.wait_for_function(
        f"() => {{ const s = document.querySelector('[data-live-scrub]');"
        f" return s && s.max === '{STEPS - 1}' && s.closest('[hidden]') === null; }}"
    )
    p.wait_for_function("document.querySelectorAll('g.etp-trace-coloured').length > 0")
    label = p.get_attribute("[data-live-scrub]", "aria-label")
    assert label and "replay the run" in label
    assert p.get_attribute("[data-live-scrub]", "data-step") == "live"
    live = p.evaluate(COLOURED)

    # an early step (before the recent window): the whole-run overview's bucket means
    page_size = round((STEPS - 1) / 20)  # Page Up: a twentieth of the run
    keys = ["Home", *["PageUp"] * (EARLY // page_size), *["ArrowRight"] * (EARLY % page_size)]
    assert scrub(p, *keys) == f"step {EARLY} of {STEPS - 1}"
    early = relation_magnitudes(history, lambda n: overview_at(history, n, EARLY))
    check_step(p, EARLY, early, live)
    loss = history.overview("loss")
    bucket = EARLY // int(loss["width"])
    text = p.text_content("[data-live-cursor=loss]")
    assert float(text.split(": ")[1].split(" ")[0]) == pytest.approx(loss["mean"][bucket], rel=6e-3)
    at_early = p.evaluate(COLOURED)

    # a late step (in the recent window): the values as recorded
    assert scrub(p, "End") == f"live · step {STEPS - 1}"
    assert scrub(p, *["ArrowLeft"] * 9) == f"step {STEPS - 10} of {STEPS - 1}"
    late = relation_magnitudes(history, lambda n: measured_at(history, n, STEPS - 10))
    check_step(p, STEPS - 10, late, live)
    # a heatmap that varies (dh/dh of the hidden layer): the column at the step outlined
    varying = [
        n for n in history.names if n.startswith("dhdh/") and np.ptp(history.measured(n)[1]) > 0
    ]
    assert varying
    for name in varying:
        steps = history.measured(name)[0]
        column = int(steps[steps <= STEPS - 10][-1])
        assert p.get_attribute(f"canvas[data-live='{name}']", "data-cursor-x") is not None
        text = p.text_content(f"[data-live-cursor='{name}']")
        assert text == f"step {STEPS - 10}: column of measured step {column}"

    # play runs from here to the end, then follows the run live again
    p.click("button[data-live-action=play]")
    p.wait_for_function(
        "document.querySelector('[data-live-scrub]').dataset.step === 'live'", timeout=10000
    )
    assert p.get_attribute("button[data-live-action=play]", "aria-pressed") == "false"
    assert p.get_attribute("canvas[data-live=loss]", "data-cursor") is None
    assert p.evaluate(COLOURED) == live
    assert_clean(page)

    # the saved page: the same movie from the recorded history, without a kernel
    saved = harness(explorer, "saved_scrub")
    s = saved.page
    s.wait_for_function("document.querySelectorAll('g.etp-trace-coloured').length > 0")
    assert not s.is_disabled("[data-live-scrub]") and s.is_disabled("[data-live-action=step]")
    saved_live = s.evaluate(COLOURED)
    assert scrub(s, *keys) == f"step {EARLY} of {STEPS - 1}"
    check_step(s, EARLY, early, saved_live)
    assert s.evaluate(COLOURED) == at_early  # the same colours as the live page there
    assert saved.errors == [] and saved.aborted == []
