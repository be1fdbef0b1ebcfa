"""One sweep per knob: ES-D-RTRL's decay, SnAp's order n, truncated BPTT's window.

    python bench/sweeps.py                     # ~2-4 min on 2 shared cores; writes bench/results/
    python bench/sweeps.py --seeds 0 1 2 --steps 640
    python bench/sweeps.py --table bench/results/sweeps-<date>.json

Each sweep is one :func:`etp_viz.sweep` call on the lesson's task (delayed recall: three
symbols, a delay of five steps, 11-step episodes) made small: batch 8, a GRU of 16 units, the
recipe's Adam 1e-2 with one update per episode, ``--steps`` steps per run (a multiple of 16:
every lockstep round has one length). Per value and seed it records, per weight leaf, the
online gradient's cosine and relative error against BPTT on the run's last episode
(:func:`etp_viz.verify`, from the episode's start state, with the trained weights), the final
loss (the lesson's episode average), the learner's state bytes and compare mode's median
ms/step (host work included; the machine is shared, the load average is recorded). The
summary table averages the verified weight leaves of each run (the readout's, exact for
every learner, among them) and gives the worst, with how many leaves the learner claims
approximate for that value.

Writes ``bench/results/sweeps-<date>.json`` (machine, versions, date, seeds, every row).
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
#: learner -> the knob swept and its values
SWEEPS = {
    "es_d_rtrl": ("decay", [0.5, 0.9, 0.99]),
    "snap": ("n", [1, 2, 3]),
    "tbptt": ("window", [1, 4, 11]),
}


def small_task(seed: int = 0):
    import etp_viz

    task = etp_viz.tasks.get_task("delayed_recall", batch_size=8, seed=seed)
    return task.with_recipe(hidden_size=16)


def summary(sweep: dict) -> list[dict]:
    """Per value of a sweep (``SweepTable.to_json()``): the weights' mean and worst cosine and
    mean relative error (over weights and seeds; the verified ones), how many weights the
    learner claims approximate, the final loss (mean over seeds), state bytes and ms/step."""
    out = []
    for value in sweep["values"]:
        rows = [r for r in sweep["rows"] if r["value"] == value]
        measured = [r for r in rows if r["verified"] and r["cosine"] is not None]
        runs = {r["seed"]: r for r in rows}.values()
        times = [r["ms_per_step"] for r in runs if r["ms_per_step"] is not None]
        losses = [r["final_loss"] for r in runs if r["final_loss"] is not None]
        cosines = [r["cosine"] for r in measured]
        out.append(
            {
                "learner": sweep["learner"],
                "knob": sweep["knob"],
                "value": value,
                "weights": len({r["weight"] for r in rows}),
                "approximate": len({r["weight"] for r in rows if r["claim"] == "approximate"}),
                "mean_cosine": float(np.mean(cosines)) if cosines else None,
                "min_cosine": float(np.min(cosines)) if cosines else None,
                "mean_relative_error": float(np.mean([r["relative_error"] for r in measured]))
                if measured
                else None,
                "final_loss": float(np.mean(losses)) if losses else None,
                "state_bytes": max(r["state_bytes"] for r in runs),
                "ms_per_step": float(np.median(times)) if times else None,
            }
        )
    return out


def table_text(summaries: list[dict]) -> str:
    from etp_viz.live.compare import format_bytes

    def fmt(value, spec):
        return "–" if value is None else format(value, spec)

    lines = [
        "| learner | knob = value | claimed approx. | cosine: mean (worst) | mean rel. error "
        "| final loss | learner state | ms/step |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        lines.append(
            f"| {s['learner']} | {s['knob']} = {s['value']} | {s['approximate']}/{s['weights']} "
            f"| {fmt(s['mean_cosine'], '.3f')} "
            f"({fmt(s['min_cosine'], '.3f')}) | {fmt(s['mean_relative_error'], '.3f')} "
            f"| {fmt(s['final_loss'], '.4f')} | {format_bytes(s['state_bytes'])} "
            f"| {fmt(s['ms_per_step'], '.2f')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", nargs="*", type=int, default=[0])
    parser.add_argument("--steps", type=int, default=320)
    parser.add_argument("--table", help="print the summary of a results file and exit")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.table:
        sweeps = json.loads(Path(args.table).read_text())["sweeps"]
        print(table_text([row for sweep in sweeps for row in summary(sweep)]))
        return 0
    warnings.simplefilter("ignore")
    import etp_viz

    task = small_task()
    record = {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "task": {"name": task.name, "n_steps": task.n_steps, "batch_size": task.batch_size},
        "recipe": dataclasses.asdict(task.recipe()),
        "seeds": args.seeds,
        "steps": args.steps,
        "sweeps": [],
        "summary": [],
    }
    for learner, (knob, values) in SWEEPS.items():
        began = time.perf_counter()
        table = etp_viz.sweep(
            None, task, learner, seeds=args.seeds, steps=args.steps, **{knob: values}
        )
        seconds = time.perf_counter() - began
        print(table, f"({seconds:.0f} s)", sep="\n", flush=True)
        record["sweeps"].append({**table.to_json(), "wall_seconds": seconds})
        record["summary"] += summary(table.to_json())
    record["machine"]["load_after"] = os.getloadavg()
    RESULTS.mkdir(exist_ok=True)
    out = Path(args.out) if args.out else RESULTS / f"sweeps-{record['date']}.json"
    out.write_text(json.dumps(record, indent=1))
    print(table_text(record["summary"]))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
