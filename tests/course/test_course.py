"""The course: its lessons, their exercises graded in Python and hashed for a page, the order
of each notebook (no answer before the prediction), the page's text (no remote image)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from etp_viz.course import get_lesson, lessons
from etp_viz.course.exercises import digest, normalize
from etp_viz.course.page import (
    PAGE_WINDOW,
    lesson_body,
    page_history,
    page_state,
    render_markdown,
)
from etp_viz.live.history import History


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


# -- what a page stores of each run (page_history), drawn by the page's own JS -------------

#: the front end's readers of a saved history (js/src/live/series.js), run under node: the
#: series each panel draws, the whole-run overviews (loss, accuracy, the scrubber's traces)
#: and the step count the status line shows
DRAWN_JS = """
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
const { seriesFromHistory, staticOverviews } = await import(pathToFileURL(process.argv[1]));
const plain = (m) => Object.fromEntries([...m].map(([k, v]) => [k, { ...v, data: [...v.data] }]));
const whole = new Set(["loss", "accuracy", "traces"]);
const drawn = JSON.parse(readFileSync(0, "utf8")).map(([history, specs]) => ({
  series: plain(seriesFromHistory(history, specs)),
  overviews: plain(staticOverviews(history, specs, whole)),
  steps: history.steps.length,
}));
process.stdout.write(JSON.stringify(drawn));
"""
SERIES_JS = Path(__file__).resolve().parents[2] / "js" / "src" / "live" / "series.js"


def drawn_by_the_page(pairs: list[tuple[dict, list]]) -> list[dict]:
    """What the page's JS draws from each ``(history, panel specs)``."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    done = subprocess.run(
        ["node", "--input-type=module", "-e", DRAWN_JS, str(SERIES_JS)],
        input=json.dumps(pairs),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(done.stdout)


def assert_drawn_alike(full, kept, where=""):
    """The same series and overviews; numbers equal at float32 precision (the page's; the
    overviews' bucket means are taken over float32 values, a rounding apart)."""
    if isinstance(full, dict):
        assert full.keys() == kept.keys(), where
        for key in full:
            assert_drawn_alike(full[key], kept[key], f"{where}/{key}")
    elif isinstance(full, list):
        full, kept = np.array(full, float), np.array(kept, float)
        assert full.shape == kept.shape, where
        scale = np.nanmax(np.abs(full), initial=0)  # a bucket mean near 0 of mixed signs
        np.testing.assert_allclose(kept, full, rtol=3e-7, atol=3e-7 * scale, equal_nan=True,
                                   err_msg=where)  # fmt: skip
    else:
        assert full == kept, where


def long_history(steps: int, every: int = 2, units: int = 6) -> History:
    """A recorded run longer than the page's window: the loss and accuracy every step, a
    trace, a heatmap (more than PAGE_WINDOW measured rows) and a scalar every ``every``-th
    step, and two activity series (one with a 2-D row per step)."""
    rng = np.random.default_rng(0)
    measured = np.arange(steps) % every == 0
    sparse = lambda shape: np.where(measured.reshape(-1, *[1] * len(shape)),  # noqa: E731
                                    rng.normal(size=(steps, *shape)), np.nan)  # fmt: skip
    history = History(meta={"algorithm": "d_rtrl"})
    history.extend(np.arange(steps), {
        "loss": rng.random(steps),
        "accuracy/correct": rng.integers(0, 4, steps).astype(float),
        "accuracy/labelled": np.full(steps, 4.0),
        "trace/r0.g0": sparse(()), "grad_norm/w": sparse(()), "df/r0.g0": sparse((units,)),
        "activity/hidden": rng.normal(size=(steps, units)),
        "activity/synapse": rng.normal(size=(steps, 3, units)),
    })  # fmt: skip
    return history


PANELS = [
    {"name": "loss", "kind": "line", "episode": 30},
    {"name": "accuracy", "kind": "line", "episode": 30},
    {"name": "trace/r0.g0", "kind": "line", "episode": None},
    {"name": "df/r0.g0", "kind": "heatmap", "episode": None},
    {"name": "activity/hidden", "kind": "activity", "episode": 30},
    {"name": "activity/synapse", "kind": "activity", "episode": 30},
]


@pytest.mark.parametrize("steps", [1517, 45])
def test_the_page_draws_the_same_run_from_what_it_stores(steps):
    """Every panel's series, the whole-run overviews and the step count, read by the page's
    own JS from the stored history, equal those of the whole history; and it is smaller."""
    full = long_history(steps).to_json()
    kept = page_history(full, PANELS)
    assert len(kept["metrics"]["df/r0.g0"]) == steps  # a heatmap's rows keep their steps
    assert len(kept["metrics"]["grad_norm/w"]) == min(steps, PAGE_WINDOW)
    whole, stored = drawn_by_the_page([(full, PANELS), (kept, PANELS)])
    assert {"loss", "accuracy", "trace/r0.g0", "df/r0.g0", "activity/synapse"} <= set(
        whole["series"]
    )
    assert {"loss", "accuracy", "trace/r0.g0"} <= set(whole["overviews"])
    assert_drawn_alike(whole, stored)
    if steps > PAGE_WINDOW:
        assert len(whole["series"]["df/r0.g0"]["steps"]) == PAGE_WINDOW  # the window was cut
        assert len(json.dumps(kept)) < len(json.dumps(full)) / 4


def test_a_page_grows_by_a_bounded_number_of_bytes_per_recorded_step():
    """A lesson's runs recorded a few steps, their recording repeated to 1,000 and 3,000
    steps: the page stores at most BYTES_PER_STEP bytes per step and run more (the whole
    histories grow by ~460: every unmeasured heatmap row a list of nulls, every activity row
    kept, 17 digits a number). At the lessons' budgets (up to 8,000 steps x 3 runs) that
    keeps a page far below MAX_PAGE_BYTES; bench/course_pages.py measures the real pages."""
    lesson = get_lesson("missing_relation")
    runs = lesson.runs(20)
    sizes = {}
    for total in (1000, 3000):
        size = 0
        for explorer in runs.values():
            history, done = explorer.session.history, explorer.session.history.num_steps
            block = {**history.metrics}
            block |= {name: history.activity(name)[1] for name in history.activity_names}
            block = {name: rows[:20] for name, rows in block.items()}
            while done < total:
                history.extend(np.arange(done, done + 20), block)
                done += 20
            state = explorer.frontend_state()
            stored = json.dumps(page_state(state)["live_history"], separators=(",", ":"))
            size += len(stored)
        sizes[total] = size
    per_step = (sizes[3000] - sizes[1000]) / 2000 / len(runs)
    assert 0 < per_step <= BYTES_PER_STEP


#: bytes a lesson page grows by per recorded step and run (measured 2026-11-29 on
#: missing_relation's runs: 52; the whole histories: 456)
BYTES_PER_STEP = 120
