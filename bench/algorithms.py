"""The online-learning family side by side: final loss, gradient fidelity and cost per step.

    python bench/algorithms.py                 # ~5 min on 2 cores; writes bench/results/

Per task, one :class:`etp_viz.live.Comparison` (compare mode's engine, no widget): every
algorithm on its own copy of the same seeded spiking model (recurrent LIF/ALIF + leaky
readout, 16 units), the same data, SGD 0.01, in lockstep rounds of 25 steps, the fidelity
meter every 25 steps over a 10-step window (cosine with BPTT over that window, averaged over
the checkpoints that had a gradient). The loss columns average the first and the last third
of the run over the steps that have a target (the evidence task scores only its decision
steps). "µs/step" is the median over the timed rounds (after each frame size compiled) of a
live session's step, host work included and the fidelity replays excluded; "state" the
bytes of the learner's own state (traces, influence matrix, window buffer).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
import warnings
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
STEPS = 400
FRAME = 25


def algorithms() -> dict:
    import functools

    import etp_viz

    return {
        "D-RTRL": "d_rtrl",
        "ES-D-RTRL (0.9)": "es_d_rtrl",
        "e-prop (symmetric)": "eprop",
        "e-prop (random, κ=0.9)": functools.partial(
            etp_viz.EProp, feedback="random", kappa_filter_decay=0.9
        ),
        "RTRL (exact)": "rtrl",
        "SnAp-1": "snap1",
        "SnAp-2": "snap2",
        "UORO": "uoro",
        "OSTL (recurrent)": "ostl_recurrent",
        "truncated BPTT (10)": "tbptt",
    }


def run(task_name: str, steps: int = STEPS) -> list[dict]:
    import brainstate

    import etp_viz
    from etp_viz.live import Comparison

    task = etp_viz.tasks.get_task(task_name)
    brainstate.random.seed(0)
    model = task.suggested_model(hidden_size=16, spiking=True)
    named = algorithms()
    comparison = Comparison(
        model,
        task.example_input(),
        list(named.values()),
        task=task,
        learning_rate=0.01,
        fidelity_every=FRAME,
        fidelity_window=10,
        bptt_window=10,
        steps_per_frame=FRAME,
    )
    comparison.step(steps)
    rows = []
    for name, row in zip(named, comparison.rows(last=steps)):
        loss = np.asarray(comparison.histories[row["algorithm"]].loss, np.float64)
        third = len(loss) // 3
        first, last = loss[:third], loss[-third:]
        rows.append(
            {
                "task": task_name,
                "algorithm": name,
                "first_loss": float(first[first > 0].mean()) if (first > 0).any() else 0.0,
                "final_loss": float(last[last > 0].mean()) if (last > 0).any() else 0.0,
                "mean_cosine": row["cosine"],
                "us_per_step": None if row["ms_per_step"] is None else 1e3 * row["ms_per_step"],
                "state_bytes": row["state_bytes"],
            }
        )
    return rows


def table(rows: list) -> str:
    lines = [
        "| task | algorithm | loss (first → last third) | mean fidelity cosine | µs/step "
        "| learner state |",
        "|---|---|---|---|---|---|",
    ]
    from etp_viz.live.compare import format_bytes

    for r in rows:
        cosine = "–" if r["mean_cosine"] is None else f"{r['mean_cosine']:.3f}"
        us = "–" if r["us_per_step"] is None else f"{r['us_per_step']:.0f}"
        lines.append(
            f"| {r['task']} | {r['algorithm']} | {r['first_loss']:.4f} → {r['final_loss']:.4f} "
            f"| {cosine} | {us} | {format_bytes(r['state_bytes'])} |"
        )
    return "\n".join(lines)


def main() -> None:
    warnings.simplefilter("ignore")
    import jax

    rows = []
    for task in ("sine", "evidence_accumulation"):
        rows += run(task)
        print(table(rows), flush=True)
    record = {
        "date": datetime.date.today().isoformat(),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "versions": {"python": platform.python_version(), "jax": jax.__version__},
        "device": str(jax.devices()[0]),
        "steps": STEPS,
        "load": os.getloadavg(),
        "rows": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"algorithms-{record['date']}.json"
    out.write_text(json.dumps(record, indent=1))
    print(table(rows))
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
