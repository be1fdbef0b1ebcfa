"""The course: its lessons, their exercises graded in Python and hashed for a page, the order
of each notebook (no answer before the prediction), the page's text (no remote image)."""

from __future__ import annotations

import json

import pytest

from etp_viz.course import get_lesson, lessons
from etp_viz.course.exercises import digest, normalize
from etp_viz.course.page import lesson_body, render_markdown


def test_four_lessons_each_with_a_notebook_claim_and_budget():
    course = lessons()
    assert len(course) >= 4
    for lesson in course:
        assert lesson.notebook_path.is_file(), lesson.notebook
        assert lesson.claim and lesson.budget > 0 and lesson.exercises and lesson.recorded
        assert get_lesson(lesson.name) is lesson


@pytest.mark.parametrize("lesson", lessons(), ids=lambda lesson: lesson.name)
def test_each_solution_passes_and_a_wrong_answer_says_why(lesson, capsys):
    for exercise in lesson.exercises:
        exercise.check(exercise.solution())
        assert f"Exercise {exercise.number}: correct" in capsys.readouterr().out
        exercise.check(None)
        assert "not answered yet" in capsys.readouterr().out
        question = exercise.questions[0]
        wrong = next(o for o in question.options if normalize(o) != normalize(question.answer))
        wrong = {wrong} if question.kind == "multi" else wrong
        with pytest.raises(AssertionError, match=question.key):
            exercise.check({**exercise.solution(), question.key: wrong})
        with pytest.raises(AssertionError, match="not one of the options"):
            unknown = {"no such option"} if question.kind == "multi" else "no such option"
            exercise.check({**exercise.solution(), question.key: unknown})


@pytest.mark.parametrize("lesson", lessons(), ids=lambda lesson: lesson.name)
def test_the_page_holds_hashes_not_answers(lesson):
    for exercise in lesson.exercises:
        page = exercise.to_page(lesson.name)
        for q, shown in zip(exercise.questions, page["questions"]):
            assert "answer" not in shown
            assert shown["digest"] == digest(shown["salt"], q.answer)


@pytest.mark.parametrize("lesson", lessons(), ids=lambda lesson: lesson.name)
def test_no_answer_before_the_prediction(lesson):
    """Nothing before the prediction cell states the lesson's claim, in a cell's source or
    stored output; every exercise's answer cell is in the notebook, after its grader."""
    notebook = json.loads(lesson.notebook_path.read_text())
    sources = ["".join(c["source"]) for c in notebook["cells"]]
    prediction = next(i for i, s in enumerate(sources) if "prediction = {" in s)
    shown = sources[:prediction] + [
        "".join(o.get("text", ""))
        for c in notebook["cells"][:prediction]
        for o in c.get("outputs", [])
    ]
    for text in shown:
        assert lesson.claim[:40] not in " ".join(text.split()) and "LESSON.claim" not in text
    for exercise in lesson.exercises:
        assert any(exercise.marker in s for s in sources[prediction:]), exercise.marker


def test_the_page_text_requests_nothing_and_replaces_answer_cells():
    lesson = get_lesson("fall_behind")
    body = lesson_body(lesson, [e.to_page(lesson.name) for e in lesson.exercises])
    assert "https://mybinder.org/badge_logo.svg" not in body and '<img src="http' not in body
    assert body.count('<form class="exercise"') == len(lesson.exercises)
    assert "_SOLUTIONS" not in body  # the hidden grader cell is left out
    assert body.index("data-run-select") > body.index('data-exercise="1"')
    assert render_markdown("**a** `b`") == "<p><strong>a</strong> <code>b</code></p>"
