"""An exported lesson page in headless Chromium, opened from file:// with the network cut: no
console error and no outside request, the selector switches the recorded run (graph and
panels redrawn from the other run's state), an exercise marks a wrong and a right answer."""

from __future__ import annotations

import pytest

from etp_viz.course import get_lesson
from etp_viz.course.page import MAX_PAGE_BYTES

pytestmark = pytest.mark.browser

#: a lesson page with tiny runs (the real budget is the lesson's; this tests the page)
STEPS = 24


@pytest.fixture(scope="module")
def lesson_page(tmp_path_factory):
    path = tmp_path_factory.mktemp("course") / "lesson.html"
    return get_lesson("missing_relation").export(path, steps=STEPS)


def test_lesson_page_offline_selector_and_exercises(open_page, lesson_page):
    assert lesson_page.stat().st_size < MAX_PAGE_BYTES
    page = open_page(None)  # file:// only; anything else is aborted and counted
    p = page.page
    p.goto(lesson_page.as_uri())
    p.wait_for_selector("[data-run-host] .etp-graph-pane svg g.node", timeout=30000)
    p.wait_for_selector("[data-region=live]:not([hidden])")
    assert "Debugging a missing relation" in p.text_content("h1")
    assert p.locator("[data-live-scrub]").count() == 1  # the scrubber of the recorded run

    # the selector: one option per recorded run; choosing one redraws from its state
    options = p.eval_on_selector_all("[data-run-select] option", "os => os.map(o => o.value)")
    assert options == ["d_rtrl as written", "d_rtrl after lift"]
    assert p.get_attribute("[data-run-host]", "data-shown") == options[0]
    before = (
        p.text_content(".etp-weights, [data-panel=weights]")
        if p.locator(".etp-weights, [data-panel=weights]").count()
        else None
    )
    p.select_option("[data-run-select]", options[1])
    p.wait_for_selector(f'[data-run-host] [data-run="{options[1]}"] .etp-graph-pane svg g.node')
    assert p.get_attribute("[data-run-host]", "data-shown") == options[1]
    assert p.locator("[data-run-host] > div").count() == 1  # the old run is gone
    if before is not None:  # the lifted run's weights panel names its new relations
        assert p.text_content(".etp-weights, [data-panel=weights]") != before

    # exercise 2: a wrong answer is marked wrong, the right one right
    form = "form[data-exercise='2']"
    p.check(f"{form} [data-question=before] input[value=exact]")
    p.check(f"{form} [data-question=after] input[value=exact]")
    p.click(f"{form} [data-check]")
    assert p.get_attribute(f"{form} [data-verdict]", "data-result") == "wrong"
    assert p.get_attribute(f"{form} [data-question=before] [data-mark]", "data-result") == "wrong"
    assert p.get_attribute(f"{form} [data-question=after] [data-mark]", "data-result") == "right"
    p.check(f"{form} [data-question=before] input[value=none]")
    p.click(f"{form} [data-check]")
    assert p.get_attribute(f"{form} [data-verdict]", "data-result") == "right"
    assert "correct" in p.text_content(f"{form} [data-verdict]")

    assert page.errors == [], page.errors
    assert page.aborted == [], f"network requests from an offline page: {page.aborted}"
