"""The lesson in headless Chromium, driven by a real Python session (the bridge page of
``test_live_browser``): the compiling status before the first frame, Run stopping at the
recipe's budget with the summary in the page, Continue as an explicit button, the whole-run
loss panel from step 0, and a graph colour scale that stays fixed across frames."""

from __future__ import annotations

import dataclasses
import warnings

import pytest

import etp_viz
from etp_viz import tasks

from .test_live_browser import assert_clean, bridged, wait_status  # noqa: F401 - fixture

pytestmark = pytest.mark.browser

SINE = type(tasks.get_task("sine"))


@dataclasses.dataclass
class ShortSine(SINE):
    """The sine task with a lesson of 48 steps."""

    def recipe(self):
        return dataclasses.replace(super().recipe(), steps=48)


STATUS_LOG = """() => { window.etpStatusLog = [];
  const el = document.querySelector('[data-live-status]');
  new MutationObserver(() => window.etpStatusLog.push(el.textContent))
    .observe(el, {childList: true, characterData: true, subtree: true}); }"""


#: Each relation's current ‖ε‖ on the page (the root of the sum of squares of the latest value
#: of its trace series), as the graph colouring reads it.
CURRENT_MAGNITUDES = """(() => { const out = {};
  for (const [name, s] of window.etpEl.etpExplorer.live.series) {
    const m = /^trace(?:_x|_f)?\\/(r\\d+)/.exec(name);
    if (!m || !s.data.length) continue;
    const v = s.data[s.data.length - 1];
    if (Number.isFinite(v)) out[m[1]] = (out[m[1]] || 0) + v * v;
  }
  for (const k in out) out[k] = Math.sqrt(out[k]);
  return out; })()"""


def test_run_compiles_visibly_stops_at_the_budget_and_shows_the_lesson(bridged):  # noqa: F811
    task = ShortSine()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        explorer = etp_viz.show(
            task.suggested_model(hidden_size=4), task.example_input(), task=task, steps_per_frame=8
        )
    page, _ = bridged(explorer)
    p = page.page
    assert "step 0 of 48" in p.text_content("[data-live-status]")
    assert p.get_attribute("button[data-live-action=run]", "title").startswith("run to the lesson")
    p.evaluate(STATUS_LOG)
    p.click("button[data-live-action=run]")
    wait_status(page, "paused", timeout=120000)
    assert explorer.session.step_count == 48
    log = p.evaluate("window.etpStatusLog")
    compiling = next(i for i, text in enumerate(log) if "compiling" in text)
    assert "compiling d_rtrl …" in log[compiling] and log[compiling].startswith("step 0 ")
    assert all(text.startswith("step 0 ") for text in log[:compiling])

    # the lesson summary, computed in Python, drawn in the page
    p.wait_for_selector("[data-live-lesson]:not([hidden])")
    text = p.text_content("[data-live-lesson]")
    assert "The lesson ended at step 48" in text and "final loss" in text and "chance" in text
    assert p.is_visible("[data-lesson-learner=d_rtrl]")
    weight = p.get_attribute("[data-lesson-weight]", "data-lesson-weight")
    p.click("[data-lesson-weight]")
    p.wait_for_function(
        "(w) => { const s = window.etpModel.get('selected'); return s && s.id === w; }", arg=weight
    )
    # continuing is an explicit choice: Run is off, Continue is offered
    assert p.is_disabled("button[data-live-action=run]")
    assert p.is_visible("button[data-live-action=continue]")

    # the loss panel shows the whole run from step 0; the recent window in detail below
    loss = p.evaluate(
        "(() => { const c = document.querySelector('canvas[data-live=loss]');"
        " return [c.dataset.overview, c.dataset.firstStep, c.dataset.lastStep]; })()"
    )
    assert loss == ["true", "0", "47"]
    assert p.is_visible("canvas[data-live-detail=loss]")

    # the graph's trace colours: a scale from 0 to the run's largest ‖ε‖, printed, fixed
    top = float(p.get_attribute("[data-live-legend]", "data-max"))
    current = p.evaluate(CURRENT_MAGNITUDES)
    positions = p.evaluate(
        "[...document.querySelectorAll('[data-trace-position]')]"
        ".map((e) => +e.dataset.tracePosition)"
    )
    assert top >= max(current.values()) > 0
    assert max(positions) == pytest.approx(max(current.values()) / top, abs=2e-3)

    p.click("button[data-live-action=continue]")
    p.wait_for_function(
        f"() => {explorer.session.budget} < window.etpEl.etpExplorer.live.status.step"
    )
    p.click("button[data-live-action=pause]")
    wait_status(page, "paused")
    assert explorer.session.step_count > 48
    # frames after the budget never shrink the scale (it only grows)
    assert float(p.get_attribute("[data-live-legend]", "data-max")) >= top
    assert "past the lesson's end" in p.text_content("[data-live-lesson]")
    assert_clean(page)
