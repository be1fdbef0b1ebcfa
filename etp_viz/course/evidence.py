"""Whether a lesson's claim holds on its recorded runs: one judge per lesson, one clause per
sentence of the claim, each with the numbers it was decided on.

The judges read the runs the lesson's page records (:meth:`Lesson.runs`, the same networks
the notebook builds), so what a student sees on the page is what is judged.
``bench/course.py`` runs every lesson at its budget over seeds 0-2 and records each
:class:`Evidence`; the notebooks assert the same claims on their own seed-0 runs.

Examples
--------
>>> clause = Clause("BPTT learns", True, {"loss": 0.04})
>>> Evidence("fall_behind", 0, 4000, (clause,)).holds
True
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

from etp_viz.live import episode_scores, loss_gap
from etp_viz.live.compare import learner_state_bytes

from . import models

__all__ = ["JUDGES", "Clause", "Evidence", "judge", "measure_runs"]

#: lesson 2: "far above chance" (50 %) is this accuracy or more
FAR_ABOVE_CHANCE = 0.75
#: lesson 3: timed steps per round after the runs are judged, and rounds (the minimum counts)
TIMED_STEPS, TIMED_ROUNDS = 16, 3


@dataclasses.dataclass(frozen=True)
class Clause:
    """One sentence of a lesson's claim: whether it held and on which numbers."""

    text: str
    holds: bool
    numbers: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Evidence:
    """A lesson's claim judged on one seed's runs at ``steps``."""

    lesson: str
    seed: int
    steps: int
    clauses: tuple[Clause, ...]

    @property
    def holds(self) -> bool:
        return all(clause.holds for clause in self.clauses)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able (what ``bench/course.py`` records)."""
        return {
            "lesson": self.lesson, "seed": self.seed, "steps": self.steps, "holds": self.holds,
            "clauses": [dataclasses.asdict(c) for c in self.clauses],
        }  # fmt: skip

    def __str__(self) -> str:
        lines = [f"{self.lesson} (seed {self.seed}, {self.steps} steps): "
                 + ("holds" if self.holds else "DOES NOT HOLD")]  # fmt: skip
        for clause in self.clauses:
            numbers = ", ".join(f"{k} {_fmt(v)}" for k, v in clause.numbers.items())
            lines.append(f"  [{'x' if clause.holds else ' '}] {clause.text}: {numbers}")
        return "\n".join(lines)


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _scores(runs: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {label: episode_scores(ex.session.history) for label, ex in runs.items()}


def _task(runs: Mapping[str, Any]) -> Any:
    return next(iter(runs.values())).session.options["task"]


def fall_behind(runs: Mapping[str, Any]) -> list[Clause]:
    """Lesson 1: BPTT learns delayed recall, D-RTRL ends 3x BPTT's loss or more, below chance."""
    task, scores = _task(runs), _scores(runs)
    bptt, d_rtrl = scores["bptt"]["loss"], scores["d_rtrl"]["loss"]
    gap = loss_gap(scores, "bptt")["d_rtrl"]
    chance = float(task.chance_loss)
    return [
        Clause("BPTT learns to recall (final loss below half of chance)",
               bptt < 0.5 * chance, {"bptt_loss": bptt, "chance": chance}),
        Clause("D-RTRL falls behind (final loss 3x BPTT's or more)",
               gap is not None and gap >= 3, {"gap": gap}),
        Clause("D-RTRL still ends below chance", d_rtrl < chance,
               {"d_rtrl_loss": d_rtrl, "chance": chance}),
    ]  # fmt: skip


def eprop_spiking(runs: Mapping[str, Any]) -> list[Clause]:
    """Lesson 2: e-prop with symmetric and with random feedback both far above chance,
    random within 10 points of symmetric or above it."""
    scores = _scores(runs)
    symmetric = scores["eprop (symmetric)"]["accuracy"]
    random = scores["eprop (random feedback)"]["accuracy"]
    return [
        Clause(f"e-prop (symmetric) ends far above chance (accuracy >= {FAR_ABOVE_CHANCE:.0%})",
               symmetric >= FAR_ABOVE_CHANCE, {"accuracy": symmetric}),
        Clause(f"e-prop (random feedback) ends far above chance (>= {FAR_ABOVE_CHANCE:.0%})",
               random >= FAR_ABOVE_CHANCE, {"accuracy": random}),
        Clause("random feedback within 10 points of symmetric or above it",
               random > symmetric - 0.10, {"random": random, "symmetric": symmetric}),
    ]  # fmt: skip


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _cosine(explorer: Any) -> float | None:
    """The gradient's cosine with BPTT, averaged over the run's fidelity checkpoints (what
    the page's cosine panel draws)."""
    history = explorer.session.history.fidelity
    return _mean([f["cosine"] for f in history if f.get("cosine") is not None])


def _ms_per_step(explorer: Any) -> float:
    """The least of :data:`TIMED_ROUNDS` rounds of :data:`TIMED_STEPS` more steps (the run
    is judged before: these steps only time it)."""
    best = float("inf")
    for _ in range(TIMED_ROUNDS):
        start = time.perf_counter()
        explorer.session.step(TIMED_STEPS)
        best = min(best, (time.perf_counter() - start) / TIMED_STEPS)
    return 1e3 * best


def measure_runs(runs: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Lesson 3's numbers per run: ``cosine`` (its gradient's cosine with BPTT, the mean of
    its fidelity checkpoints), ``state_bytes`` (the learner's own state) and ``ms_per_step``
    (:func:`_ms_per_step`: timed after the run, a few steps more).

    >>> numbers = measure_runs(etp_viz.course.get_lesson(3).runs(50))  # doctest: +SKIP
    """
    return {
        label: {
            "cosine": _cosine(ex),
            "state_bytes": learner_state_bytes(ex.session.algorithm, ex.session.model),
            "ms_per_step": _ms_per_step(ex),
        }
        for label, ex in runs.items()
    }


def memory_exactness(runs: Mapping[str, Any]) -> list[Clause]:
    """Lesson 3: RTRL's state over 20x D-RTRL's, ES-D-RTRL's less still; RTRL slower per
    step; only RTRL's gradient is BPTT's (cosine 1); ES-D-RTRL at every decay further from
    BPTT than D-RTRL."""
    numbers = measure_runs(runs)
    state = {label: r["state_bytes"] for label, r in numbers.items()}
    cosine = {label: r["cosine"] or 0.0 for label, r in numbers.items()}
    es = [label for label in runs if label.startswith("es_d_rtrl")]
    return [
        Clause("RTRL carries over 20x D-RTRL's learner state",
               state["rtrl"] > 20 * state["d_rtrl"],
               {"rtrl_bytes": state["rtrl"], "d_rtrl_bytes": state["d_rtrl"]}),
        Clause("ES-D-RTRL carries less than D-RTRL",
               all(state[label] < state["d_rtrl"] for label in es),
               {label: state[label] for label in es}),
        Clause("RTRL is slower per step", numbers["rtrl"]["ms_per_step"]
               > numbers["d_rtrl"]["ms_per_step"],
               {f"{k}_ms": numbers[k]["ms_per_step"] for k in ("rtrl", "d_rtrl")}),
        Clause("only RTRL's gradient is BPTT's (cosine 1)",
               cosine["rtrl"] > 0.999 and all(cosine[k] < 0.999 for k in ("d_rtrl", *es)),
               dict(cosine)),
        Clause("ES-D-RTRL, at every decay, points further from BPTT than D-RTRL",
               all(cosine[label] < cosine["d_rtrl"] for label in es),
               {label: cosine[label] for label in ("d_rtrl", *es)}),
    ]  # fmt: skip


def _claim(explorer: Any, weight: str) -> str | None:
    for card in explorer.view_model["weights"]:
        if card["path"] == weight:
            return card["claim"] or card["status"]
    return None


def missing_relation(runs: Mapping[str, Any]) -> list[Clause]:
    """Lesson 4: as written rnn.w_in is `none` and only the readout learns; lifted it is
    exact and the same learner ends with under half the loss."""
    task, scores = _task(runs), _scores(runs)
    written, lifted = runs[models.RELATION_RUNS[0]], runs[models.RELATION_RUNS[1]]
    before, after = _claim(written, "rnn.w_in"), _claim(lifted, "rnn.w_in")
    loss_written = scores[models.RELATION_RUNS[0]]["loss"]
    loss_lifted = scores[models.RELATION_RUNS[1]]["loss"]
    return [
        Clause("as written, rnn.w_in's D-RTRL claim is none", before == "none",
               {"claim": before}),
        Clause("after lift, it is exact", after == "exact", {"claim": after}),
        Clause("as written, the readout alone still ends below chance",
               loss_written < float(task.chance_loss),
               {"loss": loss_written, "chance": float(task.chance_loss)}),
        Clause("after lift, the same learner ends under half the loss",
               loss_lifted < 0.5 * loss_written,
               {"lifted": loss_lifted, "written": loss_written}),
    ]  # fmt: skip


JUDGES: dict[str, Callable[[Mapping[str, Any]], list[Clause]]] = {
    "fall_behind": fall_behind,
    "eprop_spiking": eprop_spiking,
    "memory_exactness": memory_exactness,
    "missing_relation": missing_relation,
}


def judge(lesson: Any, runs: Mapping[str, Any], *, steps: int, seed: int) -> Evidence:
    """``lesson``'s claim on ``runs`` (``lesson.runs(steps, seed=seed)``)."""
    return Evidence(lesson.name, int(seed), int(steps), tuple(JUDGES[lesson.name](runs)))
