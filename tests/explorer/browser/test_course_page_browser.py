"""Every lesson's exported page in headless Chromium, opened from file:// with the network cut:
no console error and no outside request, the lesson's title as the heading, the selector
lists the recorded runs and switches between them (graph and panels redrawn from the chosen
run's state), and each exercise marks a wrong and a right answer, both derived from the
lesson's own questions (etp_viz/course/lessons.py: the answers live there)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from etp_viz.course import get_lesson, lessons
from etp_viz.course.exercises import Question, normalize
from etp_viz.course.page import MAX_PAGE_BYTES

pytestmark = pytest.mark.browser

#: each lesson's page with tiny runs (the real budget is the lesson's; this tests the page):
#: 8 steps each, 5-30 s an export on a busy 2-core machine (lesson 3's five runs, exact RTRL among
#: them, the longest), most of it compiling
STEPS = 8


@pytest.fixture(scope="module", params=[lesson.name for lesson in lessons()])
def lesson_page(request, tmp_path_factory) -> tuple[Any, Path]:
    """(lesson, its exported page), once per lesson for the tests of this module."""
    lesson = get_lesson(request.param)
    path = tmp_path_factory.mktemp("course") / f"{lesson.name}.html"
    return lesson, lesson.export(path, steps=STEPS)


def open_lesson(open_page, path: Path):
    """The page from file:// (anything else is aborted and counted), its first run drawn."""
    page = open_page(None)
    page.page.goto(path.as_uri())
    page.page.wait_for_selector("[data-run-host] .etp-graph-pane svg g.node", timeout=30000)
    page.page.wait_for_selector("[data-region=live]:not([hidden])")
    return page


def assert_clean(page) -> None:
    assert page.errors == [], page.errors
    assert page.aborted == [], f"network requests from an offline page: {page.aborted}"


def test_lesson_page_opens_offline(open_page, lesson_page):
    lesson, path = lesson_page
    assert path.stat().st_size < MAX_PAGE_BYTES
    page = open_lesson(open_page, path)
    p = page.page
    assert p.locator("h1").count() == 1
    assert lesson.title in p.text_content("h1"), (lesson.title, p.text_content("h1"))
    assert p.locator("[data-live-scrub]").count() == 1  # the scrubber of the recorded run
    assert f"step {STEPS} " in p.text_content("[data-live-status]")
    forms = p.eval_on_selector_all("form[data-exercise]", "fs => fs.map(f => f.dataset.exercise)")
    assert forms == [str(e.number) for e in lesson.exercises]
    assert_clean(page)


#: the parts of a run's state that differ from run to run: its graph, history and status
RUN_KEYS = ["view_shell", "live_history", "live_status", "live_panels"]
#: JS: each recorded run's state in the page's data, as text (its RUN_KEYS)
RECORDED = """(keys) => { const runs = JSON.parse(document.getElementById('etp-runs').textContent);
  return Object.fromEntries(Object.entries(runs)
    .map(([label, state]) => [label, JSON.stringify(keys.map((k) => state[k]))])); }"""
#: JS: the mounted run: its label, the host's children, the mounted model's state as text
SHOWN = """(keys) => { const host = document.querySelector('[data-run-host]');
  return { shown: host.dataset.shown, children: host.children.length,
    el: window.etpEl.dataset.run,
    state: JSON.stringify(keys.map((k) => window.etpModel.get(k))) }; }"""


def test_selector_redraws_each_recorded_run(open_page, lesson_page):
    """One option per recorded run, in the lesson's order; choosing one mounts it alone (one
    child of the run host, a graph drawn in it), from its own recorded state. Lesson 4: the
    lifted run's weights panel differs."""
    lesson, path = lesson_page
    page = open_lesson(open_page, path)
    p = page.page
    options = p.eval_on_selector_all("[data-run-select] option", "os => os.map(o => o.value)")
    assert options == list(lesson.recorded)
    recorded = p.evaluate(RECORDED, RUN_KEYS)
    assert list(recorded) == options
    # the runs differ (lesson 2's two e-prop runs are alike at this step count: no decision
    # step yet, so no learning signal, and the same graph), so a switch is seen
    assert len(set(recorded.values())) >= 2, options

    def assert_shown(label):
        shown = p.evaluate(SHOWN, RUN_KEYS)
        assert (shown["shown"], shown["children"], shown["el"]) == (label, 1, label), shown
        assert shown["state"] == recorded[label], f"{label}: another run's state is drawn"

    assert_shown(options[0])
    weights = ".etp-weights, [data-panel=weights]"
    before = p.text_content(weights) if p.locator(weights).count() else None
    for label in [*options[1:], options[0]]:
        p.select_option("[data-run-select]", label)
        p.wait_for_selector(f'[data-run-host] [data-run="{label}"] .etp-graph-pane svg g.node')
        p.wait_for_selector("[data-region=live]:not([hidden])")
        assert_shown(label)
        assert p.locator("[data-run-host] .etp-graph-pane").count() == 1  # the old run is gone
        if lesson.name == "missing_relation" and label == "d_rtrl after lift":
            # the lifted run's weights panel names its new relations
            assert before is not None and p.text_content(weights) != before
    assert_clean(page)


def right_values(question: Question) -> set[str]:
    """The values (the inputs' ``value``) that answer ``question``."""
    if question.kind == "multi":
        return {normalize(a) for a in question.answer}
    return {normalize(question.answer)}


def wrong_values(question: Question) -> set[str]:
    """A wrong answer to ``question``: another option (``choice``), the answer's set with its
    first option toggled (``multi``: a different set)."""
    values = [normalize(o) for o in question.options]
    right = right_values(question)
    if question.kind == "multi":
        return right ^ {values[0]}
    return {next(v for v in values if v not in right)}


def answer(p, form: str, question: Question, chosen: set[str]) -> None:
    """Tick exactly ``chosen`` among ``question``'s inputs in ``form``."""
    for value in (normalize(o) for o in question.options):
        box = f'{form} [data-question="{question.key}"] input[value={json.dumps(value)}]'
        if question.kind == "multi":
            p.set_checked(box, value in chosen)
        elif value in chosen:
            p.check(box)


def mark(p, form: str, question: Question) -> str | None:
    return p.get_attribute(f'{form} [data-question="{question.key}"] [data-mark]', "data-result")


def test_each_exercise_marks_a_wrong_and_the_right_answer(open_page, lesson_page):
    """Each exercise, its first question answered wrong and the others right: the verdict and
    that question's mark say wrong, the others' right; the first answered right too: correct."""
    lesson, path = lesson_page
    page = open_lesson(open_page, path)
    p = page.page
    for exercise in lesson.exercises:
        form = f"form[data-exercise='{exercise.number}']"
        first, *rest = exercise.questions
        assert wrong_values(first) != right_values(first)
        answer(p, form, first, wrong_values(first))
        for question in rest:
            answer(p, form, question, right_values(question))
        p.click(f"{form} [data-check]")
        assert p.get_attribute(f"{form} [data-verdict]", "data-result") == "wrong", exercise
        assert mark(p, form, first) == "wrong", (exercise.number, first.key)
        assert [mark(p, form, q) for q in rest] == ["right"] * len(rest), exercise.number
        answer(p, form, first, right_values(first))
        p.click(f"{form} [data-check]")
        assert p.get_attribute(f"{form} [data-verdict]", "data-result") == "right", exercise
        assert "correct" in p.text_content(f"{form} [data-verdict]")
        assert [mark(p, form, q) for q in exercise.questions] == ["right"] * len(exercise.questions)
    assert_clean(page)
