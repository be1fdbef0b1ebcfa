"""A lesson's exercises: questions with hidden answers, graded in a notebook and in a page.

An :class:`Exercise` is a numbered group of :class:`Question`\\ s, each a choice among named
options (``kind="choice"``: one of them; ``kind="multi"``: a set of them). The answers live
here, in the package, never in a notebook cell or a page: a notebook calls
:meth:`Exercise.check` (``None`` answers: "not answered yet", after checking silently that the
hidden solution passes), and an exported page carries only each answer's :func:`digest`, which
its script recomputes from the student's choice (the same FNV-1a hash in Python and in
JavaScript, salted by the lesson and the question), so a right and a wrong answer are marked
with no kernel.

Examples
--------
>>> q = Question("winner", "Which learner reaches the lower loss?", ("bptt", "d_rtrl"), "bptt")
>>> ex = Exercise(1, "prediction = {", (q,))
>>> ex.check({"winner": " BPTT "})
Exercise 1: correct.
>>> ex.check({"winner": "d_rtrl"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
AssertionError: Exercise 1, 'winner': 'd_rtrl' is not the answer. Which learner ...
>>> ex.check({"winner": None})
Exercise 1: not answered yet (fill in the answer above and run this cell again).
>>> digest("lesson/winner", "bptt") == digest("lesson/winner", "BPTT")
True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

__all__ = ["Exercise", "Question", "digest", "normalize"]

KINDS = ("choice", "multi")


def normalize(value: Any) -> str:
    """One spelling per answer: lower case, no surrounding space, ``-``/space read as ``_``;
    a set (``multi``) as its sorted members joined by ``,``; True/False as ``true``/``false``.

    >>> normalize(" D-RTRL "), normalize({"Wz", "rnn.wh"}), normalize(True)
    ('d_rtrl', 'rnn.wh,wz', 'true')
    """
    if isinstance(value, set | frozenset | list | tuple):
        return ",".join(sorted(normalize(v) for v in value))
    return str(value).strip().lower().replace("-", "_").replace(" ", "_")


def digest(salt: str, value: Any) -> str:
    """The FNV-1a (32-bit) hash of ``salt|normalize(value)`` in UTF-8, as 8 hex digits: what a
    page stores instead of the answer (its script computes the same from the choice).

    >>> digest("a", "b")
    '294c7dd6'
    """
    h = 0x811C9DC5
    for byte in f"{salt}|{normalize(value)}".encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return f"{h:08x}"


@dataclasses.dataclass(frozen=True)
class Question:
    """One question: ``key`` (the answer dict's key), ``prompt``, ``options`` (the values a
    student may give, as the page offers them), ``answer`` (hidden; a set for ``multi``),
    ``kind`` and ``explanation`` (printed once it is answered right)."""

    key: str
    prompt: str
    options: tuple[str, ...]
    answer: Any
    kind: str = "choice"
    explanation: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Question kind {self.kind!r}: one of {KINDS}")
        known = {normalize(o) for o in self.options}
        answers = self.answer if self.kind == "multi" else {self.answer}
        missing = {normalize(a) for a in answers} - known
        if missing:
            raise ValueError(f"Question {self.key!r}: answer {sorted(missing)} not an option")

    def grade(self, value: Any, exercise: int) -> None:
        """Raise an AssertionError that says what is wrong, or return."""
        where = f"Exercise {exercise}, {self.key!r}"
        known = {normalize(o): o for o in self.options}
        given = value if self.kind == "multi" else [value]
        if self.kind == "multi":
            assert isinstance(value, set | frozenset | list | tuple), (
                f"{where}: give a set of options, e.g. {{{self.options[0]!r}}} (set() for none), "
                f"not the {type(value).__name__} {value!r}."
            )
        for item in given:
            assert normalize(item) in known, (
                f"{where}: {item!r} is not one of the options {list(self.options)}."
            )
        assert normalize(value) == normalize(self.answer), (
            f"{where}: {value!r} is not the answer. {self.prompt}"
        )


@dataclasses.dataclass(frozen=True)
class Exercise:
    """A numbered exercise: its questions, and ``marker``, a string found in the notebook
    cell where the student writes the answer (an exported page puts the form there)."""

    number: int
    marker: str
    questions: tuple[Question, ...]
    title: str = ""

    def solution(self) -> dict[str, Any]:
        """The hidden solution, as an answer dict."""
        return {q.key: q.answer for q in self.questions}

    def check(self, answer: Mapping[str, Any] | None) -> None:
        """Grade ``answer`` (``{key: value}``); print "correct" or raise an AssertionError that
        helps. ``None`` (or any value None): not answered yet."""
        if answer is None or (isinstance(answer, Mapping) and None in answer.values()):
            self.grade(self.solution())  # the hidden solution passes its own check, silently
            print(
                f"Exercise {self.number}: not answered yet (fill in the answer above and run "
                "this cell again)."
            )
            return
        self.grade(answer)
        notes = " ".join(q.explanation for q in self.questions if q.explanation)
        print(f"Exercise {self.number}: correct." + (f" {notes}" if notes else ""))

    def grade(self, answer: Any) -> None:
        """Raise an AssertionError naming the first wrong part of ``answer``, or return."""
        keys = [q.key for q in self.questions]
        assert isinstance(answer, Mapping), (
            f"Give exercise {self.number}'s answer as a dict with the keys {keys}, not a "
            f"{type(answer).__name__}."
        )
        unknown = sorted(set(answer) - set(keys))
        assert not unknown, f"Exercise {self.number}: unknown keys {unknown}; the keys are {keys}."
        for question in self.questions:
            assert question.key in answer, f"Exercise {self.number}: {question.key!r} is missing."
            question.grade(answer[question.key], self.number)

    def to_page(self, salt: str) -> dict[str, Any]:
        """What an exported page holds: the prompts and options, each answer only hashed."""
        return {
            "number": self.number,
            "title": self.title,
            "questions": [
                {
                    "key": q.key,
                    "prompt": q.prompt,
                    "kind": q.kind,
                    "options": list(q.options),
                    "values": [normalize(o) for o in q.options],
                    "salt": f"{salt}/{self.number}/{q.key}",
                    "digest": digest(f"{salt}/{self.number}/{q.key}", q.answer),
                    "explanation": q.explanation,
                }
                for q in self.questions
            ],
        }
