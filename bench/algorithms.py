"""The online-learning family side by side: final loss, gradient fidelity and cost per step.

    python bench/algorithms.py                 # ~2 min on 2 cores; writes bench/results/

Each row is one headless :class:`etp_viz.live.Session` from the same initial weights (seeded)
on a teaching task (spiking model: recurrent LIF/ALIF + leaky readout, 16 units), SGD
learning rate 0.01, frames of 25 steps, the fidelity meter every 25 steps over a 10-step
window (cosine with BPTT over that window, then averaged over the run's checkpoints). The
loss columns average the first and the last third of the run over the steps that have a
target (the evidence task scores only its decision steps).
"µs/step" times the frames after the first (compiled) one, fidelity checkpoints included, so
it is the cost a live run pays, not the bare algorithm step (see ``train_step.py`` for that).
"""

from __future__ import annotations

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
STEPS = 402
FRAME = 25


def algorithms() -> dict:
    import etp_viz

    return {
        "D-RTRL": "d_rtrl",
        "ES-D-RTRL (0.9)": "es_d_rtrl",
        "e-prop (symmetric)": "eprop",
        "e-prop (random, κ=0.9)": lambda m: etp_viz.EProp(
            m, feedback="random", kappa_filter_decay=0.9
        ),
        "RTRL (exact)": etp_viz.RTRL,
        "SnAp-1": lambda m: etp_viz.SnAp(m, 1),
        "UORO": etp_viz.UORO,
    }


def run(task_name: str, algorithm, steps: int = STEPS) -> dict:
    import brainstate

    import etp_viz
    from etp_viz.live import Session

    task = etp_viz.tasks.get_task(task_name)
    brainstate.random.seed(0)
    model = task.suggested_model(hidden_size=16, spiking=True)
    learner = algorithm(model) if callable(algorithm) else algorithm
    session = Session(
        model,
        task.example_input(),
        algorithm=learner,
        task=task,
        learning_rate=0.01,
        fidelity_every=FRAME,
        fidelity_window=10,
        steps_per_frame=FRAME,
    )
    session.step(FRAME)  # compiles
    start = time.perf_counter()
    session.step(steps - FRAME)
    per_step = (time.perf_counter() - start) / (steps - FRAME)
    loss = np.asarray(session.history.loss, np.float64)
    third = len(loss) // 3
    first, last = loss[:third], loss[-third:]
    # windows without a gradient (a masked loss scores few steps) have cosine 0 by convention
    cosines = [
        f["cosine"]
        for f in session.history.fidelity
        if np.isfinite(f["cosine"]) and (f["cosine"] != 0.0 or f["rel_error"] != 0.0)
    ]
    return {
        # over the steps that have a target (a masked task scores only its decision steps)
        "first_loss": float(first[first > 0].mean()) if (first > 0).any() else 0.0,
        "final_loss": float(last[last > 0].mean()) if (last > 0).any() else 0.0,
        "mean_cosine": float(np.mean(cosines)) if cosines else None,
        "us_per_step": per_step * 1e6,
    }


def table(rows: list) -> str:
    lines = [
        "| task | algorithm | loss (first → last third) | mean fidelity cosine | µs/step |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        cosine = "–" if r["mean_cosine"] is None else f"{r['mean_cosine']:.3f}"
        lines.append(
            f"| {r['task']} | {r['algorithm']} | {r['first_loss']:.4f} → {r['final_loss']:.4f} "
            f"| {cosine} | {r['us_per_step']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    warnings.simplefilter("ignore")
    import jax

    rows = []
    for task in ("sine", "evidence_accumulation"):
        for name, algorithm in algorithms().items():
            rows.append({"task": task, "algorithm": name, **run(task, algorithm)})
            print(json.dumps(rows[-1]), flush=True)
    record = {
        "date": datetime.date.today().isoformat(),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "versions": {"python": platform.python_version(), "jax": jax.__version__},
        "device": str(jax.devices()[0]),
        "steps": STEPS,
        "rows": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"algorithms-{record['date']}.json"
    out.write_text(json.dumps(record, indent=1))
    print(table(rows))
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
