"""The end of a lesson: each learner's final score against chance, the gap to the exact
reference, and the dropped terms that explain it.

A task's recipe has a step budget (``task.recipe().steps``) within which its lesson shows.
The live explorer's Run stops there (:func:`lesson_budget`) and draws a
:class:`LessonSummary` built here, headless, from the recorded histories; notebooks and
docs call the same functions, so the page, the notebook and the guide print one number.

A *final* score is an **episode average** (:func:`episode_scores`): the loss per scored step
and the accuracy over the last ``episodes`` whole episodes, because one step's loss or one
episode's batch can be lucky. The *gap* (:func:`loss_gap`) is a learner's final loss divided
by the exact reference's (``bptt``: the gradient of each episode's loss).

Examples
--------
>>> import numpy as np
>>> from etp_viz.live.history import History
>>> def run(losses):
...     h = History(meta={"episode": 2, "chance_loss": 1.0})
...     h.extend(np.arange(len(losses)), {"loss": np.asarray(losses, float)})
...     return h
>>> runs = {"bptt": run([1.0, 0.8, 0.2, 0.1]), "d_rtrl": run([1.0, 0.9, 0.6, 0.6])}
>>> scores = {k: episode_scores(h, episodes=1) for k, h in runs.items()}
>>> round(scores["bptt"]["loss"], 3), round(loss_gap(scores, "bptt")["d_rtrl"], 3)
(0.15, 4.0)
>>> print(lesson_summary(runs, budget=4, reference="bptt", episodes=1).text())
Lesson ended at step 4 (the lesson's budget of 4 steps).
bptt (exact reference): final loss 0.15 (chance 1)
d_rtrl: final loss 0.6 (chance 1), 4.0x the reference's
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from etp_viz.learn.registry import REFERENCE_LEARNER
from etp_viz.tasks.base import Task

from .history import LESSON_EPISODES, History, episode_scores

__all__ = [
    "LESSON_EPISODES",
    "LessonSummary",
    "episode_scores",
    "lesson_budget",
    "lesson_summary",
    "reference_learner",
    "loss_gap",
]


def lesson_budget(task: Task | None) -> int | None:
    """The step budget of a task's recipe (``task.recipe().steps``); None without a task or
    a recipe (Run then goes on until paused).

    >>> import etp_viz
    >>> lesson_budget(etp_viz.tasks.get_task("delayed_recall")), lesson_budget(None)
    (4000, None)
    """
    if task is None:
        return None
    steps = task.recipe().steps
    return int(steps) if isinstance(steps, int) and steps > 0 else None


def reference_learner(exact: list[str]) -> str | None:
    """The learner a gap is measured against: ``bptt`` (BPTT over each episode, exact by
    construction) when it is among the learners claimed exact on every weight, else the
    first of them; None when none is.

    >>> reference_learner(["rtrl", "bptt"]), reference_learner(["rtrl"]), reference_learner([])
    ('bptt', 'rtrl', None)
    """
    return REFERENCE_LEARNER if REFERENCE_LEARNER in exact else (exact[0] if exact else None)


def loss_gap(scores: Mapping[str, Mapping[str, Any]], reference: str) -> dict[str, float | None]:
    """Each learner's final loss divided by the reference's: THE gap number of the lesson
    (the page, notebook 07 and the guide print this one). None where a loss is missing or
    the reference's is 0.

    >>> loss_gap({"bptt": {"loss": 0.1}, "d_rtrl": {"loss": 0.5}}, "bptt")
    {'bptt': 1.0, 'd_rtrl': 5.0}
    """
    if reference not in scores:
        raise KeyError(f"No reference {reference!r} among the learners {sorted(scores)}.")
    base = scores[reference].get("loss")
    out: dict[str, float | None] = {}
    for label, score in scores.items():
        loss = score.get("loss")
        if loss is None or base is None or not base > 0:
            out[label] = None
        else:
            out[label] = float(loss) / float(base)
    return out


@dataclasses.dataclass
class LessonSummary:
    """What the page shows when a lesson ends (built by :func:`lesson_summary`).

    ``learners``: one dict per learner (``label``, ``loss``, ``accuracy``, ``ratio`` to the
    reference's loss, ``reference``: bool); ``dropped``: :func:`dropped_terms` of the learners
    that are not the reference.
    """

    step: int
    budget: int | None
    episodes: int
    chance_loss: float | None
    chance_accuracy: float | None
    reference: str | None
    learners: list[dict[str, Any]]
    dropped: dict[str, list[dict[str, Any]]]

    @property
    def ended(self) -> bool:
        """True once the run reached its budget."""
        return self.budget is not None and self.step >= self.budget

    def to_json(self) -> dict[str, Any]:
        """The summary as JSON (what ``live_status["lesson"]`` carries), with its text."""
        return {**dataclasses.asdict(self), "ended": self.ended, "text": self.text()}

    def text(self) -> str:
        """The summary in a few plain lines."""
        if self.ended:
            head = f"Lesson ended at step {self.step} (the lesson's budget of {self.budget} steps)."
            if self.step > self.budget:  # type: ignore[operator]
                head = f"Step {self.step}, past the lesson's end at {self.budget} steps."
        else:
            head = f"Step {self.step}" + (
                f" of the lesson's {self.budget}." if self.budget else "."
            )
        lines = [head]
        for row in self.learners:
            name = row["label"] + (" (exact reference)" if row["reference"] else "")
            parts = [_score("final loss", row["loss"], self.chance_loss)]
            if row["accuracy"] is not None:
                parts.append(_score("accuracy", row["accuracy"], self.chance_accuracy, True))
            if row["ratio"] is not None and not row["reference"]:
                parts[-1] += f", {row['ratio']:.1f}x the reference's"
            lines.append(f"{name}: " + "; ".join(parts))
        for learner, weights in self.dropped.items():
            for weight in weights:
                who = f"{learner} " if learner else ""
                lines.append(f"  {who}{weight['weight']}: {'; '.join(weight['terms'])}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


def _score(what: str, value: float | None, chance: float | None, percent: bool = False) -> str:
    def fmt(v: float) -> str:
        return f"{v:.0%}" if percent else f"{v:.3g}"

    text = f"{what} {'–' if value is None else fmt(value)}"
    return text + (f" (chance {fmt(chance)})" if chance is not None else "")


def lesson_summary(
    histories: Mapping[str, History],
    *,
    budget: int | None,
    reference: str | None = None,
    dropped: Mapping[str, list[dict[str, Any]]] | None = None,
    episodes: int = LESSON_EPISODES,
) -> LessonSummary:
    """The :class:`LessonSummary` of one run or a comparison.

    Parameters
    ----------
    histories : mapping
        ``{learner label: History}`` (one entry for a single session).
    budget : int or None
        The recipe's step budget (:func:`lesson_budget`).
    reference : str, optional
        The label of the exact reference (compare mode: the learner claimed exact on every
        weight); the gap is measured against it.
    dropped : mapping, optional
        Per learner, the weights it does not learn exactly and why, in plain words
        (:func:`etp_viz.view.plain.dropped_terms` of the view model's weights); the
        reference's entry is left out.
    episodes : int
        Episodes each final score averages over (:func:`episode_scores`).
    """
    scores = {label: episode_scores(h, episodes) for label, h in histories.items()}
    ratios = loss_gap(scores, reference) if reference in scores else {}
    learners = [
        {
            "label": label,
            "loss": score["loss"],
            "accuracy": score["accuracy"],
            "ratio": ratios.get(label),
            "reference": label == reference,
        }
        for label, score in scores.items()
    ]
    dropped = {k: v for k, v in (dropped or {}).items() if k != reference}
    meta = next(iter(histories.values())).meta if histories else {}
    step = max((h.num_steps for h in histories.values()), default=0)
    return LessonSummary(
        step=int(step),
        budget=budget,
        episodes=int(episodes),
        chance_loss=meta.get("chance_loss"),
        chance_accuracy=meta.get("chance_accuracy"),
        reference=reference,
        learners=learners,
        dropped=dropped,
    )
