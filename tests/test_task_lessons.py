"""Each teaching task's lesson with its default recipe (``bench/tasks.py`` records the full
table over 3 seeds and every listed learner): BPTT and D-RTRL lower the loss by the
recorded factor, with margin, in a fixed number of steps (the full budget on sine and on the
lesson task), and the lesson task keeps its BPTT-vs-D-RTRL gap at its budget.

Slow: each run compiles one session (a few seconds) and trains for 5-20 s on CPU. The
bounds in ``EXPECTED`` are the drops measured at these step counts (seed 0, listed beside
them) lowered by a margin, at a full budget never below issue 28's targets (50 % for the
exact reference, 30 % for an online learner); a run is deterministic for a given seed and
jax version, so a failure means the recipe, the task or a learner changed.
"""

from __future__ import annotations

import functools
import warnings

import brainstate
import numpy as np
import pytest

from etp_viz.live import History, Session, episode_scores, loss_gap
from etp_viz.tasks import get_task

pytestmark = pytest.mark.slow

FRAME = 100

#: (task, learner) -> (steps, least relative drop of the labelled loss, first vs last 10 %).
#: ``bptt`` is the registry's exact reference (BPTT over each episode, the session resetting
#: the state at each episode start). Each bound is the drop measured at that step count on
#: seed 0 (3.11 / jax 0.10.2, CPU) lowered by a margin of at least 0.1; at a full budget never
#: below issue 28's target (50 % for an exact learner, 30 % for an online one):
#:
#: - sine, full budget (Adam 1e-2, one update per episode; ``bench/results/
#:   tasks-2026-11-27.json``): BPTT 0.917 (seeds 1, 2: 0.957, 0.962), D-RTRL 0.597 (0.654,
#:   0.767);
#: - leaky integrator, 1,500 of 3,000 steps: BPTT 0.987, D-RTRL 0.964;
#: - delayed recall, full budget (Adam 1e-2, batch 32, one update per episode; the JSON):
#:   BPTT 0.948 (0.941, 0.949), D-RTRL 0.657 (0.649, 0.636);
#: - evidence accumulation, full budget (Adam 2e-3 since issue 42; at 3e-3 D-RTRL's loss on
#:   seed 0 climbed back above chance, 0.43 at step ~1,000, 0.78 at 4,000):
#:   BPTT 0.630 (seeds 1, 2: 0.685, 0.539), D-RTRL 0.405 (0.735, 0.763).
EXPECTED = {
    ("sine", "bptt"): (10_000, 0.8),
    ("sine", "d_rtrl"): (10_000, 0.45),
    ("leaky_integrator", "bptt"): (1500, 0.85),
    ("leaky_integrator", "d_rtrl"): (1500, 0.85),
    ("delayed_recall", "bptt"): (4000, 0.8),
    ("delayed_recall", "d_rtrl"): (4000, 0.5),
    ("evidence_accumulation", "bptt"): (8000, 0.5),
    ("evidence_accumulation", "d_rtrl"): (8000, 0.3),
}
#: the lesson task: D-RTRL's final loss is at least this many times BPTT's at the budget
#: (measured 7.5x on seed 0; 6.5x and 8.0x on seeds 1 and 2, ``bench/tasks.py``)
LESSON_GAP = ("delayed_recall", 3.0)


def history(task_name: str, algorithm: str, steps: int, seed: int = 0) -> History:
    """The history of a run with the task's recipe, run once per process: the tests of one
    run share it (``test_lesson_task_keeps_its_gap`` reads the two delayed-recall runs of
    ``test_default_recipe_lowers_the_loss``), however the seed is passed."""
    return _run(task_name, algorithm, steps, seed)


@functools.cache  # keyed by the arguments as passed: `history` passes all four
def _run(task_name: str, algorithm: str, steps: int, seed: int) -> History:
    task = get_task(task_name, seed=seed)
    brainstate.random.seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the readout's non-temporal-parameter notice
        session = Session(
            task.suggested_model(),
            task.example_input(),
            task=task,
            algorithm=algorithm,
            steps_per_frame=FRAME,
            record_every=FRAME,
        )
    for _ in range(steps // FRAME):
        session.step(FRAME)
    assert not session.halted, session.history.failure
    return session.history


def labelled_loss(task_name: str, algorithm: str, steps: int, seed: int = 0) -> np.ndarray:
    """The per-step loss of a run with the task's recipe, on the steps that have a target."""
    task = get_task(task_name, seed=seed)
    loss = np.asarray(history(task_name, algorithm, steps, seed).loss, np.float64)
    if not task.is_classification:
        return loss
    _, ys = task.sample_numpy((seed, 0), task.batch_size)
    has_target = np.abs(ys).reshape(task.n_steps, -1).sum(-1) > 0
    return loss[np.resize(has_target, len(loss))]


def first_and_final(loss: np.ndarray) -> tuple[float, float]:
    tenth = max(len(loss) // 10, 1)
    return float(loss[:tenth].mean()), float(loss[-tenth:].mean())


@pytest.mark.parametrize(("task_name", "algorithm"), sorted(EXPECTED))
def test_default_recipe_lowers_the_loss(task_name, algorithm):
    steps, least_drop = EXPECTED[task_name, algorithm]
    first, final = first_and_final(labelled_loss(task_name, algorithm, steps))
    drop = 1 - final / first
    assert drop >= least_drop, (
        f"{task_name}/{algorithm}: loss {first:.3f} -> {final:.3f} ({100 * drop:.0f} % lower) in "
        f"{steps} steps; the recipe should lower it by at least {100 * least_drop:.0f} %"
    )


#: issue 42: after the first ``SETTLE`` of a run no ``BUCKET``-step mean of the labelled loss
#: is above chance (``bench/tasks.py`` checks every listed learner over 3 seeds)
BUCKET, SETTLE = 400, 0.1


@pytest.mark.parametrize(("task_name", "algorithm"), sorted(EXPECTED))
def test_no_bucket_climbs_back_above_chance(task_name, algorithm):
    """The run of ``test_default_recipe_lowers_the_loss`` (cached), bucketed by steps as
    ``bench/tasks.py`` does: a lesson whose loss climbs back above chance after it learned
    (evidence accumulation's D-RTRL at Adam 3e-3: 0.71-0.78 vs 0.69 from step 1,600 to
    5,200) teaches the wrong thing."""
    task = get_task(task_name)
    steps = EXPECTED[task_name, algorithm][0]
    loss = np.asarray(history(task_name, algorithm, steps).loss, np.float64)
    _, ys = task.sample_numpy((0, 0), task.batch_size)
    labelled = np.ones(steps, bool)
    if task.is_classification:
        labelled = np.resize(np.abs(ys).reshape(task.n_steps, -1).sum(-1) > 0, steps)
    starts = range(int(SETTLE * steps + BUCKET - 1) // BUCKET * BUCKET, steps - BUCKET + 1, BUCKET)
    means = {s: loss[s : s + BUCKET][labelled[s : s + BUCKET]].mean() for s in starts}
    above = {s: round(float(m), 3) for s, m in means.items() if m > task.chance_loss}
    assert not above, f"{task_name}/{algorithm}: above chance {task.chance_loss:.3f} at {above}"


def test_lesson_task_keeps_its_gap():
    task_name, gap = LESSON_GAP
    steps = EXPECTED[task_name, "bptt"][0]
    # the lesson's gap as the explorer's summary, the guide and notebook 07 compute it
    scores = {a: episode_scores(history(task_name, a, steps)) for a in ("bptt", "d_rtrl")}
    ratio = loss_gap(scores, "bptt")["d_rtrl"]
    assert ratio is not None and ratio >= gap, (
        f"{task_name}: D-RTRL's final loss {scores['d_rtrl']['loss']:.3f} should be >= {gap}x "
        f"BPTT's {scores['bptt']['loss']:.3f} (it is {ratio}x)"
    )


def test_evidence_recipe_runs_its_budget_on_d_rtrl_over_one_stream():
    """Issue 28's regression: under its recipe then (Adam 3e-3, batch 16, ALIF 32) D-RTRL on
    evidence accumulation halted at step ~3,100 ("non-finite value in: trace/r0.g0"): the
    differentiated ALIF reset made neurons' self-Jacobians larger than 1 and the trace,
    carried across the stream, overflowed. Run here on one continuing stream
    (``episode_reset=False``: the traces are never reset, the case that overflowed; the
    session's episode resets would bound them to one episode). Every (task, learner) pair's
    full budget, with the session's defaults, is measured by ``bench/tasks.py`` (recorded
    in ``bench/results/tasks-*.json``), not here: the matrix takes many CPU minutes."""
    task = get_task("evidence_accumulation")
    steps = task.recipe().steps
    brainstate.random.seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = Session(
            task.suggested_model(),
            task.example_input(),
            task=task,
            algorithm="d_rtrl",
            steps_per_frame=500,
            record_every=500,
            episode_reset=False,
        )
    # a frame at a time: one compiled frame (one `step(8000)` cuts the run into frames of
    # 4096, 2048, ... steps, a program each, ~2 s of compiling apiece)
    assert steps % 500 == 0
    for _ in range(steps // 500):
        session.step(500)
        if session.halted:  # (a halted session refuses further steps)
            break
    assert not session.halted, session.history.failure
    assert session.history.num_steps == steps
    assert np.isfinite(session.history.loss).all()
    traces = [n for n in session.history.names if n.startswith("trace/")]
    assert traces and all(np.isfinite(session.history.measured(n)[1]).all() for n in traces)
