"""The notebooks: each runs on the current interpreter (nbclient), and each is stored executed
so that it reads without a kernel (``make notebooks`` re-executes them; see
``scripts/execute_notebooks.py``)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _tool():
    spec = importlib.util.spec_from_file_location(
        "execute_notebooks", ROOT / "scripts" / "execute_notebooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _tool()


@pytest.fixture(scope="module")
def kernel_name():
    """A kernelspec pointing at this interpreter (so the notebooks see this venv)."""
    pytest.importorskip("ipykernel")
    previous = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = TOOL.kernelspec_dir() + (os.pathsep + previous if previous else "")
    yield TOOL.KERNEL_NAME
    if previous is None:
        os.environ.pop("JUPYTER_PATH", None)
    else:
        os.environ["JUPYTER_PATH"] = previous


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, kernel_name):
    pytest.importorskip("nbclient")
    # 300 s a cell (the scripts default): the lesson cells train for a minute on a laptop and
    # CI runs on a loaded 2-core machine
    notebook = TOOL.execute(path, kernel_name, timeout=300)  # raises on a failing cell
    assert not TOOL.problems(notebook)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_stored_notebook_reads_without_a_kernel(path):
    """Stored executed, from its current cells, with no error; every ``show()`` output
    carries the static fallback (graph, weights and claims) a page without a kernel shows."""
    notebook = json.loads(path.read_text())
    assert not TOOL.problems(notebook), (
        f"{path.name}: {TOOL.problems(notebook)}; run make notebooks"
    )
    widgets = [
        output
        for cell in notebook["cells"]
        for output in cell.get("outputs", [])
        if "application/vnd.jupyter.widget-view+json" in output.get("data", {})
    ]
    for output in widgets:
        assert "etp-viz-static" in "".join(output["data"].get("text/html", "")), path.name


def test_a_stale_notebook_is_caught():
    notebook = json.loads(NOTEBOOKS[0].read_text())
    notebook["metadata"].setdefault("etp_viz", {})["source_sha256"] = TOOL.source_digest(notebook)
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            cell["execution_count"] = cell.get("execution_count") or 1
    assert not [p for p in TOOL.problems(notebook) if "stale" in p]
    notebook["cells"][0]["source"] = ["# edited after execution\n"]
    assert any("stale" in p for p in TOOL.problems(notebook))


# -- notebook 07's graders, from the stored cell source (cheap: no notebook execution) --------

LESSON = ROOT / "notebooks" / "07-why-online-learners-fall-behind.ipynb"


def _cell_sources(notebook: dict) -> list[str]:
    return ["".join(cell["source"]) for cell in notebook["cells"]]


@pytest.fixture(scope="module")
def lesson_graders():
    """The hidden grader cell of notebook 07, run on the lesson task's compiled graph."""
    import warnings

    import brainstate

    import etp_viz
    from etp_viz.live import Session

    source = next(
        s for s in _cell_sources(json.loads(LESSON.read_text())) if "def check_exercise_2(" in s
    )
    task = etp_viz.tasks.get_task("delayed_recall")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = etp_viz.compile_etrace_graph(task.suggested_model(), task.example_input())
    namespace = {"etp_viz": etp_viz, "brainstate": brainstate, "Session": Session}
    namespace.update(task=task, recipe=task.recipe(), graph=graph)
    exec(compile(source, str(LESSON), "exec"), namespace)  # noqa: S102 - our own notebook
    return namespace


def _printed_answer(graph, spell=lambda leaf: leaf):
    """Exercise 2's right answer, each weight spelled from the leaf name the notebook prints."""
    answer: dict = {"approximate": set(), "none": set()}
    for leaf, claim in graph.gradient_claims("d_rtrl").items():
        if claim.kind in answer and not leaf.endswith(".bias"):
            answer[claim.kind].add(spell(leaf))
    assert answer["approximate"] and answer["none"]  # the lesson's GRU has both
    return answer


def test_exercise_2_accepts_the_printed_names_and_short_forms(lesson_graders, capsys):
    check, graph = lesson_graders["check_exercise_2"], lesson_graders["graph"]
    short = {
        "printed": lambda leaf: leaf,  # rnn.Wz.weight.weight, as section 2 prints it
        "weight": lambda leaf: leaf.split(".weight")[0] + ".weight",  # rnn.Wz.weight
        "module": lambda leaf: leaf.split(".weight")[0],  # rnn.Wz
        "bare": lambda leaf: leaf.split(".")[1].lower(),  # wz (any case)
    }
    for name, spell in short.items():
        check(_printed_answer(graph, spell))
        assert "Exercise 2: correct" in capsys.readouterr().out, name
    check({kind: sorted(names) for kind, names in _printed_answer(graph).items()})  # a list
    assert "Exercise 2: correct" in capsys.readouterr().out


def test_exercise_2_rejects_wrong_answers_saying_what_is_wrong(lesson_graders):
    check, graph = lesson_graders["check_exercise_2"], lesson_graders["graph"]
    right = _printed_answer(graph)
    wrong = {**right, "approximate": right["approximate"] | {"readout.weight"}}
    with pytest.raises(
        AssertionError, match=r"not approximate: \['readout.weight'\] \(their claims: \['exact'\]\)"
    ):
        check(wrong)
    with pytest.raises(AssertionError, match=r"claim is 'approximate': 1 missing"):
        check({**right, "approximate": set(sorted(right["approximate"])[1:])})
    with pytest.raises(AssertionError, match=r"no weight called 'Wq'.*readout.weight"):
        check({**right, "none": {"Wq"}})
    with pytest.raises(AssertionError, match=r"'weight' names several weights"):
        check({**right, "none": {"weight"}})
    a_string = {**right, "none": "rnn.Wr.weight"}
    with pytest.raises(
        AssertionError, match=r"is the str 'rnn.Wr.weight': give a set of names, e\.g\."
    ):
        check(a_string)
    with pytest.raises(AssertionError, match=r"Give a dict with two sets"):
        check(["rnn.Wz"])


def test_exercise_1_reads_learner_names_in_any_case(lesson_graders, capsys):
    check = lesson_graders["check_exercise_1"]
    chance = lesson_graders["task"].chance_loss
    results = {"bptt": {"loss": 0.1 * chance}, "d_rtrl": {"loss": 0.5 * chance}}
    for winner in ("bptt", "BPTT", " Bptt "):
        check({"winner": winner, "d_rtrl_beats_chance": True}, results)
        assert "Exercise 1: correct" in capsys.readouterr().out, winner
    with pytest.raises(AssertionError, match=r"You predicted 'd_rtrl', but 'bptt' reached"):
        check({"winner": "D-RTRL", "d_rtrl_beats_chance": True}, results)
    with pytest.raises(AssertionError, match=r"'rtrl' is not one of the learners run"):
        check({"winner": "rtrl", "d_rtrl_beats_chance": True}, results)
    with pytest.raises(AssertionError, match=r"True or False \(no quotes\), not 'yes'"):
        check({"winner": "bptt", "d_rtrl_beats_chance": "yes"}, results)
    with pytest.raises(AssertionError, match=r"does learn something"):
        check({"winner": "bptt", "d_rtrl_beats_chance": False}, results)
    check({"winner": None, "d_rtrl_beats_chance": None}, results)  # the solution passes
    assert "not answered yet" in capsys.readouterr().out


def test_exercise_3_names_a_wrong_type(lesson_graders):
    cell_class = lesson_graders["_cell_class"]
    assert cell_class("minigru") is cell_class(lesson_graders["etp_viz"].nn.MiniGRU)
    with pytest.raises(AssertionError, match=r"Give the cell's class, e\.g\. etp_viz\.nn\.GRUCell"):
        cell_class(42)


def test_exercise_1_answer_is_not_shown_before_the_prediction():
    """Nothing before the prediction cell states who wins: not the task's lesson (it says BPTT
    wins), in a cell's source or in its stored output."""
    import etp_viz

    notebook = json.loads(LESSON.read_text())
    sources = _cell_sources(notebook)
    prediction = next(i for i, s in enumerate(sources) if "prediction = {" in s)
    lesson = etp_viz.tasks.get_task("delayed_recall").lesson
    before = notebook["cells"][:prediction]
    shown = sources[:prediction] + [
        "".join(output.get("text", "")) for cell in before for output in cell.get("outputs", [])
    ]
    for text in shown:
        assert "task.lesson" not in text and lesson[:40] not in " ".join(text.split()), text
    assert any("task.lesson" in s for s in sources[prediction:])  # stated at the end instead
