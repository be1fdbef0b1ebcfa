"""Each teaching task's lesson, measured: loss (and accuracy) vs steps and seconds per learner.

    python bench/tasks.py                          # every task x learner, recipe defaults
    python bench/tasks.py --task delayed_recall --algorithms bptt d_rtrl --seeds 0 1 2
    python bench/tasks.py --table bench/results/tasks-<date>.json
    python bench/tasks.py --merge a.json b.json --out bench/results/tasks-<date>.json

Per task and learner, one headless :class:`etp_viz.live.Session` built exactly as a user gets
it: ``task = get_task(name, seed=seed)`` (the recipe's batch),
``Session(task.suggested_model(), task.example_input(), task=task, algorithm=name)`` (the
recipe's optimizer, learning rate, update mode, network and BPTT window), run for the
recipe's step budget in frames of ``FRAME`` steps (one compile; heavy metrics measured once
per frame). The loss of a step counts only where the step has a target (the recall and
decision steps of the classification tasks); "first" and "final" are its mean over the first
and the last 10 % of the run's labelled steps, "drop" their relative change. A classification
task's accuracy is measured after the run on ``EVAL_EPISODES`` fresh episodes with the
trained network (chance beside it). Seconds: the wall-clock of the frames after the first
(compile excluded), reported as steps/s; the machine is shared, so the step count to a
target is the primary number and the seconds are that count over the measured steps/s.
RTRL runs only where its influence matrix is small (``RTRL_MAX_SIZE`` parameters x batch).
The lesson task (delayed recall) runs BPTT and D-RTRL on three seeds.

Writes ``bench/results/tasks-<date>.json`` (machine, versions, date, seeds).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
FRAME = 100
EVAL_EPISODES = 8
CURVE_POINTS = 20
#: RTRL runs where parameters x batch (its influence matrix is hidden units x that) stay below
RTRL_MAX_SIZE = 20_000
#: the lesson task runs BPTT and D-RTRL on these seeds (its gap is a claim over seeds)
LESSON = ("delayed_recall", ("bptt", "d_rtrl"), (0, 1, 2))
ALGORITHMS = ("bptt", "rtrl", "d_rtrl", "es_d_rtrl", "eprop")
TASK_NAMES = ("sine", "leaky_integrator", "delayed_recall", "evidence_accumulation")


def labelled_steps(task, steps: int) -> np.ndarray:
    """Which of the stream's first ``steps`` steps carry a target (every step for regression)."""
    if not task.is_classification:
        return np.ones(steps, bool)
    _, ys = task.sample_numpy((task.seed, 0), task.batch_size)
    per_step = np.abs(ys).reshape(task.n_steps, -1).sum(-1) > 0
    return np.resize(per_step, steps)


def evaluate_accuracy(task, model, episodes: int = EVAL_EPISODES) -> float | None:
    """Accuracy of the trained ``model`` on ``episodes`` fresh episodes (None: regression)."""
    if not task.is_classification:
        return None
    import brainstate

    @brainstate.transform.jit
    def forward(x):
        return model(x)

    correct = labelled = 0
    for episode in range(episodes):
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
    task = etp_viz.tasks.get_task(task_name, seed=seed, **task_options)
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
    started = time.perf_counter()
    for _ in range(steps // FRAME):
        before = time.perf_counter()
        session.step(FRAME)
        frame_seconds.append(time.perf_counter() - before)
        if session.halted:
            break
    wall = time.perf_counter() - started
    loss = np.asarray(session.history.loss, np.float64)
    mask = labelled_steps(task, len(loss))
    return {
        "task": task_name,
        "algorithm": algorithm,
        "seed": seed,
        "steps": int(len(loss)),
        "options": {k: session.options[k] for k in ("optimizer", "learning_rate", "update")}
        | {"bptt_window": session.options["bptt_window"], **options},
        "task_options": task_options,
        "model_options": model_options,
        "batch_size": task.batch_size,
        "chance_loss": task.chance_loss,
        "chance_accuracy": task.chance_accuracy,
        "halted": bool(session.halted),
        "compile_seconds": frame_seconds[0] if frame_seconds else None,
        "steps_per_second": FRAME / float(np.median(frame_seconds[1:]))
        if len(frame_seconds) > 1
        else None,
        "wall_seconds": wall,
        **summarize(loss, mask),
        "accuracy": evaluate_accuracy(task, model),
    }


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
    """A markdown table of the mean over seeds per task and learner."""
    lines = [
        "| task | learner | seeds | steps | loss first → final (chance) | change "
        "| accuracy (chance) | steps/s | s for the run |",
        "|---|---|---|---|---|---|---|---|---|",
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
        lines.append(
            f"| {task} | {algorithm} | {len(runs)} | {runs[0]['steps']} "
            f"| {first:.3f} → {final:.3f} ({runs[0]['chance_loss']:.3f}) | {-100 * drop:+.0f} % "
            f"| {acc} | {rate:.0f} | {runs[0]['steps'] / rate:.0f} |"
        )
    return "\n".join(lines)


def lesson_table(rows: list) -> str:
    """The user guide's table: one row per task, one column per learner (mean over seeds):
    final loss (drop), and accuracy for a classification task."""
    names = {"bptt": "BPTT", "rtrl": "RTRL", "d_rtrl": "D-RTRL", "es_d_rtrl": "ES-D-RTRL"}
    names["eprop"] = "e-prop"
    lines = [
        "| task | chance | steps | " + " | ".join(names.values()) + " |",
        "|---|---|---|" + "---|" * len(names),
    ]
    for task in dict.fromkeys(r["task"] for r in rows):
        runs = [r for r in rows if r["task"] == task]
        chance = f"{runs[0]['chance_loss']:.3f}"
        if runs[0]["chance_accuracy"] is not None:
            chance += f" / {100 * runs[0]['chance_accuracy']:.0f} %"
        cells = []
        for algorithm in names:
            mine = [r for r in runs if r["algorithm"] == algorithm]
            if not mine:
                cells.append("–")
                continue
            first = np.mean([r["first_loss"] for r in mine])
            final = np.mean([r["final_loss"] for r in mine])
            cell = f"{final:.3f} ({100 * (final / first - 1):+.0f} %)"
            if mine[0]["accuracy"] is not None:
                cell += f", {100 * np.mean([r['accuracy'] for r in mine]):.0f} %"
            cells.append(cell + (f" [{len(mine)} seeds]" if len(mine) > 1 else ""))
        lines.append(f"| {task} | {chance} | {runs[0]['steps']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def machine() -> dict:
    import jax

    import etp_viz  # noqa: F401 - its version quirks loaded

    versions = {"python": platform.python_version(), "jax": jax.__version__}
    for name in ("brainstate", "optax"):
        versions[name] = __import__(name).__version__
    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "device": str(jax.devices()[0]),
        "versions": versions,
        "load": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", nargs="*", default=list(TASK_NAMES))
    parser.add_argument("--algorithms", nargs="*", default=list(ALGORITHMS))
    parser.add_argument("--seeds", nargs="*", type=int, default=[0])
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--table", help="print the table of a results file and exit")
    parser.add_argument("--merge", nargs="*", help="join the rows of these results files")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.table:
        rows = json.loads(Path(args.table).read_text())["rows"]
        print(table(rows), lesson_table(rows), sep="\n\n")
        return
    if args.merge:
        parts = [json.loads(Path(p).read_text()) for p in args.merge]
        record = {**parts[0], "rows": [row for part in parts for row in part["rows"]]}
        record["machine"]["load"] = [part["machine"]["load"] for part in parts]
        Path(args.out).write_text(json.dumps(record, indent=1))
        print(table(record["rows"]))
        return
    warnings.simplefilter("ignore")
    import etp_viz

    rows = []
    for task_name in args.task:
        task = etp_viz.tasks.get_task(task_name)
        for algorithm in args.algorithms:
            if algorithm == "rtrl" and influence_size(task) > RTRL_MAX_SIZE:
                print(f"skip rtrl on {task_name}: influence matrix too large", file=sys.stderr)
                continue
            seeds = args.seeds
            if task_name == LESSON[0] and algorithm in LESSON[1]:
                seeds = sorted(set(seeds) | set(LESSON[2]))
            for seed in seeds:
                rows.append(run(task_name, algorithm, seed, args.steps))
                print(
                    json.dumps(
                        {
                            k: rows[-1][k]
                            for k in (
                                "task",
                                "algorithm",
                                "seed",
                                "first_loss",
                                "final_loss",
                                "drop",
                                "accuracy",
                                "steps_per_second",
                            )
                        }
                    ),
                    file=sys.stderr,
                    flush=True,
                )
    record = {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "seeds": args.seeds,
        "frame": FRAME,
        "rows": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    out = Path(args.out) if args.out else RESULTS / f"tasks-{record['date']}.json"
    out.write_text(json.dumps(record, indent=1))
    print(table(rows))
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
