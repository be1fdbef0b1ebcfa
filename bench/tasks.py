"""Each teaching task's lesson, measured: loss (and accuracy) vs steps and seconds per learner.

    python bench/tasks.py                          # every task x the learners it lists
    python bench/tasks.py --task delayed_recall --algorithms bptt d_rtrl --seeds 0 1 2
    python bench/tasks.py --seeds 0 1 2 --check    # exit 1 if a run misses its target
    python bench/tasks.py --table bench/results/tasks-<date>.json
    python bench/tasks.py --merge a.json b.json --out bench/results/tasks-<date>.json

The learners of a task are the ones it lists (``task.learners``: registry names, resolved by
:func:`etp_viz.learn.registry.canonical_name`, so a renamed learner follows the registry);
``--algorithms`` replaces them. Each run has a **target** (issue 28): a learner whose
gradient the compiled graph claims exact on every weight of the task's model
(``graph.verdicts(learner)``, e.g. BPTT over the episode, RTRL, D-RTRL on the leaky
integrator's diagonal recurrence) must lower the labelled loss by at least
``EXACT_DROP`` (first vs last 10 % of the steps) or reach ``EXACT_ACCURACY``; any other
learner by ``ONLINE_DROP``; every run must finish its budget with finite values and within
``SECONDS`` of wall clock (compile included), and (issue 42) after the first ``SETTLE`` (10 %)
of the steps no ``BUCKET``-step (400) mean of the labelled loss may be above chance
(``stability``; the third table printed, ``bucket_loss`` / ``worst_bucket_loss`` / ``stable``
per row).

Per task and learner, one headless :class:`etp_viz.live.Session` built exactly as a user gets
it: ``task = get_task(name, seed=seed)`` (the recipe's batch),
``Session(task.suggested_model(), task.example_input(), task=task, algorithm=name)`` (the
recipe's optimizer, learning rate, update mode, network and BPTT window), run for the
recipe's step budget in frames of ``FRAME`` steps (one compile; heavy metrics measured once
per frame). The loss of a step counts only where the step has a target (the recall and
decision steps of the classification tasks); "first" and "final" are its mean over the first
and the last 10 % of the run's labelled steps, "drop" their relative change. A classification
task's accuracy is measured after the run on ``EVAL_EPISODES`` fresh episodes with the
trained network (chance beside it). Seconds: ``wall_seconds`` is the whole run (building the
session, compiling, every frame); ``steps_per_second`` the median frame after the first
(compile excluded). The machine is shared (other processes inflate the wall clock; the
load average is recorded), so the step count to a target is the primary number.
RTRL runs only where its influence matrix is small (``RTRL_MAX_SIZE`` parameters x batch).
The lesson task (delayed recall) runs BPTT and D-RTRL on three seeds.

Writes ``bench/results/tasks-<date>.json`` (machine, versions, date, seeds).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from _machine import machine

RESULTS = Path(__file__).resolve().parent / "results"
FRAME = 100
EVAL_EPISODES = 8
CURVE_POINTS = 20
#: RTRL runs where parameters x batch (its influence matrix is hidden units x that) stay below
RTRL_MAX_SIZE = 20_000
#: the lesson task runs BPTT and D-RTRL on these seeds (its gap is a claim over seeds)
LESSON = ("delayed_recall", ("bptt", "d_rtrl"), (0, 1, 2))
TASK_NAMES = ("sine", "leaky_integrator", "delayed_recall", "evidence_accumulation")
#: targets (issue 28): an exact learner's least loss drop or accuracy, any other's drop
EXACT_DROP, EXACT_ACCURACY, ONLINE_DROP = 0.5, 0.9, 0.3
#: the most wall-clock seconds a run may take on a 2-core CPU, compile included
SECONDS = 60.0
#: stability (issue 42): after the first ``SETTLE`` of the steps, no bucket of ``BUCKET``
#: steps may have a mean labelled loss above chance
BUCKET, SETTLE = 400, 0.1


def task_learners(task) -> tuple[str, ...]:
    """The learners ``task`` lists, by their registry names."""
    from etp_viz.learn.registry import canonical_name

    return tuple(dict.fromkeys(canonical_name(name) for name in task.learners))


def claims_exact(session) -> bool | None:
    """Whether the compiled graph claims the session's learner exact on every weight (None
    when the learner states no claims)."""
    from etp_viz.compiler import compile_etrace_graph

    graph = getattr(session.algorithm, "graph", None)
    try:
        if graph is None:
            graph = compile_etrace_graph(session.model, session.example_input)
        verdicts = graph.verdicts(session.algorithm)
    except Exception:  # noqa: BLE001 - a learner without claims: no exactness target
        return None
    return bool(verdicts) and all(v.claim == "exact" for v in verdicts.values())


def target(row: dict) -> dict:
    """The run's target and whether it is met: finite to the end of the budget, within
    ``SECONDS``, and the exact / online loss drop (or, exact on a decision, the accuracy)."""
    exact = bool(row["exact"])
    drop, accuracy = row["drop"] or 0.0, row["accuracy"]
    if exact:
        learned = drop >= EXACT_DROP or (accuracy is not None and accuracy >= EXACT_ACCURACY)
        wanted = f">= {100 * EXACT_DROP:.0f} % drop or >= {100 * EXACT_ACCURACY:.0f} % accuracy"
    else:
        learned = drop >= ONLINE_DROP
        wanted = f">= {100 * ONLINE_DROP:.0f} % drop"
    finished = not row["halted"] and row["steps"] >= row["budget"]
    in_time = row["wall_seconds"] <= SECONDS
    stable = row.get("stable", True) is not False
    return {
        "target": ("exact: " if exact else "online: ") + wanted + ", no bucket above chance",
        "learned": bool(learned),
        "finished": bool(finished),
        "in_time": bool(in_time),
        "stable": bool(stable),
        "met": bool(learned and finished and in_time and stable),
    }


def stability(loss: np.ndarray, mask: np.ndarray, chance: float) -> dict:
    """The mean labelled loss of every ``BUCKET`` steps, and whether each one after the first
    ``SETTLE`` of the run stays at or below ``chance`` (a run whose loss climbs back above
    chance after it has learned teaches the wrong thing)."""
    starts = list(range(0, len(loss) - BUCKET + 1, BUCKET))
    means = [
        float(loss[s : s + BUCKET][mask[s : s + BUCKET]].mean())
        if mask[s : s + BUCKET].any()
        else None
        for s in starts
    ]
    settled = [m for s, m in zip(starts, means) if s >= SETTLE * len(loss) and m is not None]
    worst = max(settled) if settled else None
    return {
        "bucket_loss": means,
        "worst_bucket_loss": worst,
        "stable": worst is None or worst <= chance,
    }


def labelled_steps(task, steps: int) -> np.ndarray:
    """Which of the stream's first ``steps`` steps carry a target (every step for regression)."""
    if not task.is_classification:
        return np.ones(steps, bool)
    _, ys = task.sample_numpy((task.seed, 0), task.batch_size)
    per_step = np.abs(ys).reshape(task.n_steps, -1).sum(-1) > 0
    return np.resize(per_step, steps)


def evaluate_accuracy(task, model, episodes: int = EVAL_EPISODES) -> float | None:
    """Accuracy of the trained ``model`` on ``episodes`` fresh episodes (None: regression),
    each started from the reset state on an episodic task (as the session trained it)."""
    if not task.is_classification:
        return None
    import brainstate

    @brainstate.transform.jit
    def forward(x):
        return model(x)

    correct = labelled = 0
    for episode in range(episodes):
        if getattr(task, "episodic", False):
            brainstate.nn.reset_all_states(model, batch_size=task.batch_size)
        xs, ys = task.sample((task.seed, 10_000_000 + episode), task.batch_size)
        for t in range(task.n_steps):
            hits, count = task.accuracy(forward(xs[t]), ys[t])
            correct, labelled = correct + int(hits), labelled + int(count)
    return correct / max(labelled, 1)


def influence_size(task) -> int:
    """Parameters x batch of the task's suggested model (RTRL's influence matrix is hidden
    units x this)."""
    import brainstate
    import jax

    params = task.suggested_model().states(brainstate.ParamState)
    count = sum(
        int(np.size(leaf)) for leaf in jax.tree.leaves({k: s.value for k, s in params.items()})
    )
    return count * (task.batch_size or 1)


def run(task_name: str, algorithm: str, seed: int = 0, steps: int | None = None, **options):
    """One run of ``algorithm`` on the task with its recipe (``options`` override the
    session's, e.g. ``learning_rate``; ``task_options`` the task's fields)."""
    import brainstate

    import etp_viz
    from etp_viz.live import Session

    task_options = dict(options.pop("task_options", {}) or {})
    model_options = dict(options.pop("model_options", {}) or {})
    recipe_changes = dict(options.pop("recipe", {}) or {})
    started = time.perf_counter()
    task = etp_viz.tasks.get_task(task_name, seed=seed, **task_options)
    if recipe_changes:
        task = task.with_recipe(**recipe_changes)
    steps = int(steps or task.recipe().steps)
    steps -= steps % FRAME
    brainstate.random.seed(seed)
    model = task.suggested_model(**model_options)
    session = Session(
        model,
        task.example_input(),
        task=task,
        algorithm=algorithm,
        steps_per_frame=FRAME,
        record_every=FRAME,
        **options,
    )
    frame_seconds = []
    for _ in range(steps // FRAME):
        before = time.perf_counter()
        session.step(FRAME)
        frame_seconds.append(time.perf_counter() - before)
        if session.halted:
            break
    wall = time.perf_counter() - started
    loss = np.asarray(session.history.loss, np.float64)
    mask = labelled_steps(task, len(loss))
    failure = session.history.failure
    row = {
        "task": task_name,
        "algorithm": algorithm,
        "learner": type(session.algorithm).__name__,
        "seed": seed,
        "budget": steps,
        "steps": int(len(loss)),
        "recipe": dataclasses.asdict(task.recipe()),
        "options": {k: session.options[k] for k in ("optimizer", "learning_rate", "update")}
        | {"bptt_window": session.options["bptt_window"], **options},
        "episode_reset": getattr(session, "episodes", None) is not None,
        "task_options": task_options,
        "model_options": model_options,
        "batch_size": task.batch_size,
        "chance_loss": task.chance_loss,
        "chance_accuracy": task.chance_accuracy,
        "halted": bool(session.halted),
        "failure": failure.get("message") if isinstance(failure, dict) else failure,
        "nonfinite_loss_steps": int(np.sum(~np.isfinite(loss))),
        "exact": claims_exact(session),
        "compile_seconds": frame_seconds[0] if frame_seconds else None,
        "steps_per_second": FRAME / float(np.median(frame_seconds[1:]))
        if len(frame_seconds) > 1
        else None,
        "wall_seconds": wall,
        "load": os.getloadavg(),
        **summarize(loss, mask),
        **stability(loss, mask, task.chance_loss),
        "accuracy": evaluate_accuracy(task, model),
        # the lesson's numbers: episode averages over the last 20 episodes, as the explorer's
        # lesson summary and notebook 07 compute them (etp_viz.live.episode_scores)
        "lesson_loss": etp_viz.live.episode_scores(session.history)["loss"],
        "lesson_accuracy": etp_viz.live.episode_scores(session.history)["accuracy"],
    }
    return row | target(row)


def summarize(loss: np.ndarray, mask: np.ndarray) -> dict:
    """First / final loss (mean of the first / last 10 % of labelled steps), the drop, and
    the labelled loss averaged over ``CURVE_POINTS`` equal blocks of steps."""
    labelled = loss[mask[: len(loss)]]
    tenth = max(len(labelled) // 10, 1)
    first, final = float(labelled[:tenth].mean()), float(labelled[-tenth:].mean())
    blocks = np.array_split(np.arange(len(loss)), CURVE_POINTS)
    curve = [float(loss[b][mask[b]].mean()) if mask[b].any() else None for b in blocks]
    return {
        "first_loss": first,
        "final_loss": final,
        "drop": 1.0 - final / first if first > 0 else None,
        "curve_steps": [int(b[-1] + 1) for b in blocks],
        "curve_loss": curve,
    }


def table(rows: list) -> str:
    """A markdown table of the mean over seeds per task and learner, with the target."""
    lines = [
        "| task | learner | seeds | steps | loss first → final (chance) | change "
        "| accuracy (chance) | target | met | steps/s | s (wall, compile incl.) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["task"], r["algorithm"]), []).append(r)
    for (task, algorithm), runs in groups.items():
        first = np.mean([r["first_loss"] for r in runs])
        final = np.mean([r["final_loss"] for r in runs])
        drop = 1 - final / first
        accs = [r["accuracy"] for r in runs if r["accuracy"] is not None]
        acc = (
            "–"
            if not accs
            else f"{100 * np.mean(accs):.0f} % ({100 * runs[0]['chance_accuracy']:.0f} %)"
        )
        rates = [r["steps_per_second"] for r in runs if r["steps_per_second"]]
        rate = np.median(rates) if rates else float("nan")
        met = sum(bool(r.get("met")) for r in runs)
        misses = sorted(
            {
                why
                for r in runs
                for why, ok in (
                    ("halted", r.get("finished", True)),
                    ("slow", r.get("in_time", True)),
                    ("learned too little", r.get("learned", True)),
                    ("above chance", r.get("stable", True)),
                )
                if not ok
            }
        )
        wall = max(r["wall_seconds"] for r in runs)
        lines.append(
            f"| {task} | {algorithm} | {len(runs)} | {runs[0]['steps']} "
            f"| {first:.3f} → {final:.3f} ({runs[0]['chance_loss']:.3f}) | {-100 * drop:+.0f} % "
            f"| {acc} | {runs[0].get('target', '')} | {met}/{len(runs)}"
            f"{' (' + ', '.join(misses) + ')' if misses else ''} | {rate:.0f} | {wall:.0f} |"
        )
    return "\n".join(lines)


def stability_table(rows: list) -> str:
    """Per task and learner: the worst ``BUCKET``-step mean loss after the first ``SETTLE``
    of the steps, per seed, against chance (the issue 42 criterion)."""
    lines = [
        f"| task | learner | chance | worst {BUCKET}-step loss after {SETTLE:.0%}, per seed "
        "| stable |",
        "|---|---|---|---|---|",
    ]
    groups: dict = {}
    for r in rows:
        if r.get("worst_bucket_loss") is not None:
            groups.setdefault((r["task"], r["algorithm"]), []).append(r)
    for (task, algorithm), runs in groups.items():
        worst = ", ".join(f"{r['worst_bucket_loss']:.3f} (seed {r['seed']})" for r in runs)
        stable = sum(bool(r["stable"]) for r in runs)
        lines.append(
            f"| {task} | {algorithm} | {runs[0]['chance_loss']:.3f} | {worst} "
            f"| {stable}/{len(runs)} |"
        )
    return "\n".join(lines)


def lesson_table(rows: list) -> str:
    """The user guide's table: one row per task, one column per learner (mean over seeds):
    final loss (drop), and accuracy for a classification task."""
    learners = list(dict.fromkeys(r["algorithm"] for r in rows))
    lines = [
        "| task | chance | steps | " + " | ".join(learners) + " |",
        "|---|---|---|" + "---|" * len(learners),
    ]
    for task in dict.fromkeys(r["task"] for r in rows):
        runs = [r for r in rows if r["task"] == task]
        chance = f"{runs[0]['chance_loss']:.3f}"
        if runs[0]["chance_accuracy"] is not None:
            chance += f" / {100 * runs[0]['chance_accuracy']:.0f} %"
        cells = []
        for algorithm in learners:
            mine = [r for r in runs if r["algorithm"] == algorithm]
            if not mine:
                cells.append("–")
                continue
            first = np.mean([r["first_loss"] for r in mine])
            final = np.mean([r["final_loss"] for r in mine])
            cell = f"{final:.3f} ({100 * (final / first - 1):+.0f} %)"
            if mine[0]["accuracy"] is not None:
                cell += f", {100 * np.mean([r['accuracy'] for r in mine]):.0f} %"
            if not all(r.get("met", True) for r in mine):
                cell += " ✗"
            cells.append(cell + (f" [{len(mine)} seeds]" if len(mine) > 1 else ""))
        lines.append(f"| {task} | {chance} | {runs[0]['steps']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def lesson_gaps(rows: list) -> dict[int, float | None]:
    """Per seed of the lesson task, D-RTRL's final loss over the exact reference's
    (``etp_viz.live.loss_gap`` of the rows' ``lesson_loss``): the gap the guide and
    notebook 07 print."""
    from etp_viz.live import loss_gap

    task_name, (reference, learner), _ = LESSON
    gaps: dict[int, float | None] = {}
    for seed in sorted({r["seed"] for r in rows if r["task"] == task_name}):
        scores = {
            r["algorithm"]: {"loss": r.get("lesson_loss")}
            for r in rows
            if r["task"] == task_name and r["seed"] == seed
        }
        if reference in scores and learner in scores:
            gaps[seed] = loss_gap(scores, reference)[learner]
    return gaps


def parse_changes(pairs: list[str]) -> dict:
    """``["learning_rate=1e-3", "steps=4000"]`` -> ``{"learning_rate": 0.001, "steps": 4000}``."""
    changes = {}
    for pair in pairs:
        key, _, text = pair.partition("=")
        changes[key] = json.loads(text) if text not in ("", "None") else None
    return changes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", nargs="*", default=list(TASK_NAMES))
    parser.add_argument(
        "--algorithms", nargs="*", default=None, help="default: the learners each task lists"
    )
    parser.add_argument("--seeds", nargs="*", type=int, default=[0])
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument(
        "--recipe", nargs="*", default=[], help="recipe changes, e.g. learning_rate=1e-3"
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if a run misses")
    parser.add_argument("--table", help="print the table of a results file and exit")
    parser.add_argument("--merge", nargs="*", help="join the rows of these results files")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.table:
        rows = json.loads(Path(args.table).read_text())["rows"]
        print(table(rows), lesson_table(rows), stability_table(rows), sep="\n\n")
        return 0
    if args.merge:
        parts = [json.loads(Path(p).read_text()) for p in args.merge]
        record = {**parts[0], "rows": [row for part in parts for row in part["rows"]]}
        record["machine"]["load"] = [part["machine"]["load"] for part in parts]
        Path(args.out).write_text(json.dumps(record, indent=1))
        print(table(record["rows"]))
        return 0
    warnings.simplefilter("ignore")
    import etp_viz

    changes = parse_changes(args.recipe)
    record = {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "seeds": args.seeds,
        "frame": FRAME,
        "recipe_changes": changes,
        "rows": [],
    }
    RESULTS.mkdir(exist_ok=True)
    out = Path(args.out) if args.out else RESULTS / f"tasks-{record['date']}.json"
    rows = record["rows"]
    for task_name in args.task:
        task = etp_viz.tasks.get_task(task_name)
        for algorithm in args.algorithms or task_learners(task):
            if algorithm == "rtrl" and influence_size(task) > RTRL_MAX_SIZE:
                print(f"skip rtrl on {task_name}: influence matrix too large", file=sys.stderr)
                continue
            seeds = args.seeds
            if task_name == LESSON[0] and algorithm in LESSON[1]:
                seeds = sorted(set(seeds) | set(LESSON[2]))
            for seed in seeds:
                rows.append(run(task_name, algorithm, seed, args.steps, recipe=changes))
                keys = ("task", "algorithm", "seed", "steps", "drop", "accuracy", "target")
                keys += ("worst_bucket_loss", "met", "wall_seconds", "steps_per_second", "failure")
                print(json.dumps({k: rows[-1][k] for k in keys}), file=sys.stderr, flush=True)
                out.write_text(json.dumps(record, indent=1))  # partial results survive
    record["machine"]["load_after"] = os.getloadavg()
    record["lesson_gap"] = lesson_gaps(rows)
    out.write_text(json.dumps(record, indent=1))
    print(f"lesson gap (D-RTRL / BPTT final loss, per seed): {record['lesson_gap']}")
    print(table(rows), lesson_table(rows), stability_table(rows), sep="\n\n")
    print(f"wrote {out}", file=sys.stderr)
    missed = [f"{r['task']}/{r['algorithm']}/seed {r['seed']}" for r in rows if not r["met"]]
    if missed:
        print(f"missed their target: {missed}", file=sys.stderr)
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
