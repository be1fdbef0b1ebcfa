"""The course: self-paced lessons, each a notebook in the form of notebook 07 (predict, run,
read the graph, exercises graded with hidden solutions) and an offline page.

A :class:`Lesson` names its notebook, what it claims (true at its step budget: the notebook
asserts it on its own run; lesson 2 was measured over seeds 0-2, see the CHANGELOG), its
budget and compute, its exercises (:mod:`etp_viz.course.exercises`: the answers live here,
not in the notebook) and the runs its page records (one explorer per learner or knob value, built by
``lesson.runs(steps)``). :meth:`Lesson.export` writes the page (:mod:`etp_viz.course.page`).

Examples
--------
>>> from etp_viz.course import lessons
>>> [lesson.name for lesson in lessons()]
['fall_behind', 'eprop_spiking', 'memory_exactness', 'missing_relation']
>>> lessons()[0].notebook
'notebooks/07-why-online-learners-fall-behind.ipynb'
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import brainstate

from . import models
from .exercises import Exercise, Question

__all__ = ["LESSONS", "Lesson", "get_lesson", "lessons"]

ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class Lesson:
    """One lesson of the course.

    Attributes
    ----------
    name, title : str
    notebook : str
        The notebook, relative to the repository root.
    claim : str
        What the lesson shows, true at its budget (stated at the lesson's end, never before
        the prediction).
    budget : int
        Training steps of each run (the task recipe's budget, or the lesson's own).
    compute : str
        The notebook's compute on a 2-core laptop, measured.
    exercises : tuple of Exercise
    recorded : tuple of str
        The labels of the runs the page records (``runs(steps)`` builds them).
    """

    name: str
    title: str
    notebook: str
    claim: str
    budget: int
    compute: str
    exercises: tuple[Exercise, ...]
    recorded: tuple[str, ...]
    build_runs: Callable[..., Mapping[str, Any]] = dataclasses.field(repr=False)

    @property
    def notebook_path(self) -> Path:
        return ROOT / self.notebook

    def exercise(self, number: int) -> Exercise:
        """Exercise ``number`` (1-based, as the notebook numbers them)."""
        for exercise in self.exercises:
            if exercise.number == number:
                return exercise
        raise KeyError(f"{self.name} has exercises {[e.number for e in self.exercises]}")

    def check(self, number: int, answer: Any) -> None:
        """Grade exercise ``number`` (what the notebook's check cells call)."""
        self.exercise(number).check(answer)

    def runs(self, steps: int | None = None, *, seed: int = 0) -> dict[str, Any]:
        """One explorer per recorded run, each trained ``steps`` steps (default: the budget)
        on the lesson's task drawn from ``seed`` (its data and the network's weights)."""
        brainstate.random.seed(seed)  # what a learner draws itself (e-prop's random feedback)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            steps = self.budget if steps is None else int(steps)
            runs = dict(self.build_runs(steps, seed=seed))
        if list(runs) != list(self.recorded):
            raise RuntimeError(f"{self.name}: runs {list(runs)} != {list(self.recorded)}")
        return runs

    def evidence(self, steps: int | None = None, *, seed: int = 0) -> Any:
        """Whether the lesson's claim holds on its runs (:meth:`runs`) at ``steps`` (default:
        the budget) for ``seed``: an :class:`~etp_viz.course.evidence.Evidence`, one clause
        per sentence of the claim with its numbers (``bench/course.py`` records seeds 0-2).

        >>> print(etp_viz.course.get_lesson(4).evidence())  # doctest: +SKIP
        missing_relation (seed 0, 1500 steps): holds ...
        """
        from .evidence import judge

        steps = self.budget if steps is None else int(steps)
        return judge(self, self.runs(steps, seed=seed), steps=steps, seed=seed)

    def export(self, path: str | Path, *, steps: int | None = None) -> Path:
        """Write the lesson as one self-contained offline page (no kernel, no install, no
        outside request); see :func:`etp_viz.course.page.export_lesson`.

        >>> etp_viz.course.get_lesson("fall_behind").export("lesson1.html")  # doctest: +SKIP
        """
        from .page import export_lesson

        return export_lesson(self, path, steps=steps)


def _choice(key: str, prompt: str, options: tuple, answer: Any, note: str = "") -> Question:
    return Question(key, prompt, tuple(map(str, options)), str(answer), "choice", note)


def _multi(key: str, prompt: str, options: tuple, answer: set, note: str = "") -> Question:
    return Question(key, prompt, options, frozenset(answer), "multi", note)


GRU_WEIGHTS = ("readout.weight", "rnn.Wz.weight", "rnn.Wr.weight", "rnn.Wh.weight")
RATE_CELLS = ("GRUCell", "LSTMCell", "MGUCell", "MiniGRU", "ValinaRNNCell")

FALL_BEHIND = Lesson(
    name="fall_behind",
    title="Why online learners fall behind",
    notebook="notebooks/07-why-online-learners-fall-behind.ipynb",
    claim=(
        "On delayed recall BPTT learns to recall the sequence while D-RTRL falls behind (its "
        "final loss 3x BPTT's or more, still below chance): its trace keeps each unit's own "
        "recurrence and drops the cross-unit terms, drawn dashed on the graph."
    ),
    budget=4000,
    compute="about 1.5 minutes",
    exercises=(
        Exercise(
            1,
            "prediction = {",
            (
                _choice(
                    "winner",
                    "Which learner reaches the lower final loss?",
                    ("bptt", "d_rtrl"),
                    "bptt",
                ),
                _choice(
                    "d_rtrl_beats_chance",
                    "Does D-RTRL end below the chance loss?",
                    (True, False),
                    True,
                ),
            ),
            "Your prediction",
        ),
        Exercise(
            2,
            "answer_2 = {",
            (
                _multi(
                    "approximate",
                    "Which weights does D-RTRL learn only approximately?",
                    GRU_WEIGHTS,
                    {"rnn.Wz.weight", "rnn.Wh.weight"},
                ),
                _multi(
                    "none",
                    "Which weights does D-RTRL not learn online at all (none)?",
                    GRU_WEIGHTS,
                    {"rnn.Wr.weight"},
                ),
            ),
            "Which weights explain the gap?",
        ),
        Exercise(
            3,
            "CELL = None",
            (
                _choice(
                    "cell", "On which rate cell is every D-RTRL claim exact?", RATE_CELLS, "MiniGRU"
                ),
            ),
            "A model where D-RTRL is exact",
        ),
    ),
    recorded=("bptt", "d_rtrl"),
    build_runs=models.fall_behind_runs,
)

EPROP_SPIKING = Lesson(
    name="eprop_spiking",
    title="Spiking networks and e-prop: symmetric against random feedback",
    notebook="notebooks/08-spiking-networks-and-eprop.ipynb",
    claim=(
        "On evidence accumulation a recurrent ALIF network learns to count cues with e-prop: "
        "with symmetric feedback and with fixed random feedback (which never reads the readout "
        "weights) both end far above chance accuracy (50 %), random feedback within 10 points "
        "of symmetric or above it."
    ),
    budget=models.EPROP_STEPS,
    compute="about 1 minute",
    exercises=(
        Exercise(
            1,
            "prediction = {",
            (
                _choice(
                    "random_beats_chance",
                    "Does e-prop with random feedback end above chance accuracy?",
                    (True, False),
                    True,
                ),
                _choice(
                    "random_vs_symmetric",
                    "Where does random feedback end, against symmetric feedback's accuracy?",
                    ("far below", "close or above"),
                    "close or above",
                    "The learning signal need not be exact: a fixed random projection of "
                    "the output error, with the eligibility traces, still assigns credit.",
                ),
            ),
            "Your prediction",
        ),
        Exercise(
            2,
            "answer_2 = {",
            (
                _choice(
                    "replaced",
                    "What does random feedback replace in e-prop's weight update?",
                    (
                        "the eligibility traces",
                        "the readout weights carrying the error back",
                        "the surrogate derivative of the spike",
                    ),
                    "the readout weights carrying the error back",
                ),
            ),
            "What random feedback changes",
        ),
        Exercise(
            3,
            "answer_3 = {",
            (
                _choice(
                    "same_as",
                    "Symmetric e-prop's traces are which learner's?",
                    ("rtrl", "d_rtrl", "es_d_rtrl", "bptt"),
                    "d_rtrl",
                ),
                _choice(
                    "kind",
                    "The claim e-prop makes for the recurrent layer's weight rnn.W.weight",
                    ("exact", "approximate", "none"),
                    "approximate",
                ),
            ),
            "Read it off the graph",
        ),
    ),
    recorded=models.EPROP_RUNS,
    build_runs=models.eprop_runs,
)

MEMORY_EXACTNESS = Lesson(
    name="memory_exactness",
    title="Memory against exactness: RTRL, D-RTRL and ES-D-RTRL's decay",
    notebook="notebooks/09-memory-against-exactness.ipynb",
    claim=(
        "On delayed recall with 16 GRU units, exact RTRL carries its influence matrix (over 20x "
        "D-RTRL's learner state, and slower per step), D-RTRL one trace per weight, ES-D-RTRL "
        "less still; only RTRL's gradient is BPTT's (cosine 1), and ES-D-RTRL pays for its "
        "smaller state: at every decay tried, its gradient points further from BPTT than "
        "D-RTRL's."
    ),
    budget=models.MEMORY_STEPS,
    compute="about 3 minutes",
    exercises=(
        Exercise(
            1,
            "prediction = {",
            (
                _choice(
                    "most_memory",
                    "Which learner carries the most state?",
                    ("rtrl", "d_rtrl", "es_d_rtrl"),
                    "rtrl",
                ),
                _choice(
                    "least_memory",
                    "Which learner carries the least state?",
                    ("rtrl", "d_rtrl", "es_d_rtrl"),
                    "es_d_rtrl",
                ),
            ),
            "Your prediction",
        ),
        Exercise(
            2,
            "answer_2 = {",
            (
                _choice(
                    "exact",
                    "Whose online gradient is BPTT's (cosine 1)?",
                    ("rtrl", "d_rtrl", "es_d_rtrl"),
                    "rtrl",
                ),
                _choice(
                    "es_reaches_d_rtrl",
                    "Does ES-D-RTRL, at any decay, point as close to BPTT as D-RTRL?",
                    (True, False),
                    False,
                ),
            ),
            "Read the numbers",
        ),
    ),
    recorded=models.MEMORY_RUNS,
    build_runs=models.memory_runs,
)

MISSING_RELATION = Lesson(
    name="missing_relation",
    title="Debugging a missing relation, fixed through what-if",
    notebook="notebooks/10-debugging-a-missing-relation.ipynb",
    claim=(
        "A leaky network whose input weight is used with a plain `x @ W` has no relation for "
        "it: D-RTRL's claim is none and its gradient 0, so only the readout learns. What-if "
        "`lift` turns the product into an ETP op: the claim becomes exact and the same "
        "learner, on the same data, ends with a lower loss."
    ),
    budget=models.RELATION_STEPS,
    compute="about 1 minute",
    exercises=(
        Exercise(
            1,
            "prediction = {",
            (
                _choice(
                    "loss_below_chance",
                    "As written, does D-RTRL's final loss still end below chance?",
                    (True, False),
                    True,
                ),
                _choice(
                    "fix",
                    "Which change lets it learn rnn.w_in online?",
                    ("lift", "a larger learning rate", "a longer budget"),
                    "lift",
                ),
            ),
            "Your prediction",
        ),
        Exercise(
            2,
            "answer_2 = {",
            (
                _choice(
                    "before",
                    "rnn.w_in's D-RTRL claim as written",
                    ("exact", "approximate", "none"),
                    "none",
                ),
                _choice(
                    "after",
                    "rnn.w_in's D-RTRL claim after lift",
                    ("exact", "approximate", "none"),
                    "exact",
                    "Its recurrence is element-wise, so the lifted trace drops nothing.",
                ),
            ),
            "Read the what-if",
        ),
    ),
    recorded=models.RELATION_RUNS,
    build_runs=models.relation_runs,
)

LESSONS: tuple[Lesson, ...] = (FALL_BEHIND, EPROP_SPIKING, MEMORY_EXACTNESS, MISSING_RELATION)


def lessons() -> list[Lesson]:
    """The course's lessons, in order."""
    return list(LESSONS)


def get_lesson(name: str) -> Lesson:
    """The lesson called ``name`` (or numbered ``name``, 1-based)."""
    for number, lesson in enumerate(LESSONS, 1):
        if name in (lesson.name, str(number), number):
            return lesson
    raise KeyError(f"No lesson {name!r}; the lessons: {[lesson.name for lesson in LESSONS]}")
