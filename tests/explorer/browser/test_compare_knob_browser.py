"""Compare mode's knob sliders in headless Chromium, driven by a real Python comparison.

The bridge page of ``test_live_browser`` forwards the page's requests to a real
:class:`~etp_viz.explorer.compare.CompareExplorer`. Checked: one slider per knob some learner
takes (ES-D-RTRL's decay here), releasing it rebuilds that learner in Python
(``Comparison.set_knob``) while the other goes on untouched, the slider is disabled while a
run goes on, and a refused value is shown as an error with the slider back at Python's value.
"""

from __future__ import annotations

import warnings

import pytest

import etp_viz
from etp_viz import tasks

from .test_live_browser import assert_clean, bridged, wait_status  # noqa: F401

pytestmark = pytest.mark.browser

SLIDER = "input[data-live-knob=decay]"
#: the page's copy of live_status.knobs
KNOBS = "window.etpEl.etpExplorer.live.status.knobs"


def knob_explorer():
    task = tasks.get_task("sine")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return etp_viz.show(
            task.suggested_model(hidden_size=6),
            task.example_input(),
            task=task,
            algorithm=["es_d_rtrl", "d_rtrl"],
            decay=0.9,
            fidelity_every=0,
            steps_per_frame=4,
        )


def release(page, value):
    """Drag the decay slider to ``value`` and let go (the input and change events)."""
    page.page.eval_on_selector(
        SLIDER,
        """(el, v) => { el.value = String(v); el.dispatchEvent(new Event('input'));
          el.dispatchEvent(new Event('change')); }""",
        value,
    )


def test_moving_the_decay_slider_rebuilds_the_learner_in_python(bridged):  # noqa: F811
    explorer = knob_explorer()
    page, _ = bridged(explorer)
    p = page.page
    p.wait_for_selector(SLIDER)
    # one slider: decay (d_rtrl takes no knob), at Python's value
    assert p.eval_on_selector_all(
        "[data-live-knob]", "els => els.map(e => e.dataset.liveKnob)"
    ) == ["decay"]
    assert p.text_content("[data-live-knob-value=decay]") == "0.90"
    assert "es_d_rtrl: 0.9" in p.get_attribute("[data-live-knobs] label", "title")
    p.click("button[data-live-action=step]")
    wait_status(page, "step 1 ")
    d_rtrl = explorer.comparison.sessions["d_rtrl"].algorithm

    release(page, 0.5)
    p.wait_for_function(f"{KNOBS} && {KNOBS}[0].value === 0.5")
    learner = explorer.comparison.sessions["es_d_rtrl"].algorithm
    assert (learner.alpha_x, learner.alpha_f) == (0.5, 0.5)
    assert explorer.comparison.sessions["d_rtrl"].algorithm is d_rtrl  # untouched
    p.wait_for_function(
        "document.querySelector('[data-live-knob-value=decay]').textContent === '0.50'"
    )
    assert not p.is_disabled(SLIDER)
    # both go on in lockstep from there
    p.click("button[data-live-action=step]")
    wait_status(page, "step 2 ")
    assert [s.step_count for s in explorer.comparison.sessions.values()] == [2, 2]

    # a run disables the slider; Pause enables it again
    p.click("button[data-live-action=run]")
    p.wait_for_function(f"document.querySelector('{SLIDER}').disabled", timeout=60000)
    p.click("button[data-live-action=pause]")
    wait_status(page, "paused")
    p.wait_for_function(f"!document.querySelector('{SLIDER}').disabled", timeout=60000)

    # a value Python refuses: the error is shown, the slider returns to Python's value
    p.evaluate("window.etpEl.etpExplorer.live.knobSliders.move('decay', 1.0)")
    p.wait_for_selector(".etp-error:not([hidden])")
    assert "decay" in p.text_content(".etp-error") and "[0, 1)" in p.text_content(".etp-error")
    p.wait_for_function(f"!document.querySelector('{SLIDER}').disabled")
    assert p.eval_on_selector(SLIDER, "el => Number(el.value)") == 0.5
    assert explorer.comparison.sessions["es_d_rtrl"].algorithm.alpha_x == 0.5
    assert_clean(page)
