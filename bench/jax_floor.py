"""The jax floor: ES-D-RTRL's stacked harness on the lowest and the newest supported stacks.

The issue's "stacked cliff": ``vs_braintrace_models``' ``stacked`` harness (``for_loop`` of
per-step gradients, summed after) on a tanh RNN (n=256, T=100, batch 16, CPU) took 88-250 ms
on jax 0.10.2 / brainstate 0.5.4 and 16-45 ms on jax 0.12 / brainstate 0.6. The optimised HLO is
the same on both; the time is jaxlib 0.10's XLA:CPU running the final ``jnp.sum(g, 0)`` over
the (100, 288, 256) stacked gradients in a YNNPACK fusion (``etp_viz._compat``). This script
times the harnesses in each venv with etp_viz's workaround on (the default) and off
(``ETP_VIZ_XLA_FLAGS=keep``), in alternating processes, ``--rounds`` times, keeps the minimum,
and times the bare reduction too::

    .venv/bin/python bench/jax_floor.py --rounds 3      # -> bench/results/jax_floor-<date>.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENVS = {
    "jax0.10": ROOT / ".venv" / "bin" / "python",
    "jax0.12": ROOT / ".venv312" / "bin" / "python",
}
GROUP = {
    "lib": "etp_viz",
    "cell": "rnn",
    "n": 256,
    "T": 100,
    "repeats": 5,
    "jobs": [["es_d_rtrl", "stacked"], ["es_d_rtrl", "summed"], ["es_d_rtrl", "online"]],
}
REDUCE = """
import json, time, jax, jax.numpy as jnp
import etp_viz
g = jnp.ones((100, 288, 256), jnp.float32)
f = jax.jit(lambda g: jnp.sum(g, 0))
jax.block_until_ready(f(g))
best = 1e9
for _ in range(9):
    t = time.perf_counter(); jax.block_until_ready(f(g)); best = min(best, time.perf_counter() - t)
print(json.dumps({"reduce_100x288x256_s": best, "jax": jax.__version__,
                  "workaround": etp_viz.XLA_CPU_REDUCTIONS}))
"""


def run_one(python: Path, workaround: bool) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    env.pop("XLA_FLAGS", None)
    if not workaround:
        env["ETP_VIZ_XLA_FLAGS"] = "keep"
    cmd = [str(python), str(HERE / "vs_braintrace.py"), "--one", json.dumps(GROUP)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True, timeout=900)
    records = json.loads(out.stdout.strip().splitlines()[-1])
    reduce = subprocess.run(
        [str(python), "-c", REDUCE], capture_output=True, text=True, env=env, check=True
    )
    extra = json.loads(reduce.stdout.strip().splitlines()[-1])
    times = {f"{r['algorithm']}/{r['harness']}": r.get("time_s") for r in records}
    return {**times, **extra}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    rows: dict[str, list[dict]] = {}
    for _ in range(args.rounds):
        for name, python in VENVS.items():
            for workaround in (True, False):
                key = f"{name} workaround={'on' if workaround else 'off'}"
                rows.setdefault(key, []).append(run_one(python, workaround))
                print(key, rows[key][-1], flush=True)
    best = {
        key: {k: min(r[k] for r in runs) for k in runs[0] if isinstance(runs[0][k], float)}
        | {k: runs[0][k] for k in ("jax", "workaround")}
        for key, runs in rows.items()
    }
    result = {
        "date": datetime.date.today().isoformat(),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "loadavg": os.getloadavg(),
        "rounds": rows,
        "best_s": best,
    }
    out = Path(args.out or HERE / "results" / f"jax_floor-{result['date']}.json")
    out.write_text(json.dumps(result, indent=1))
    for key, values in best.items():
        print(key, {k: round(v * 1e3, 1) for k, v in values.items() if isinstance(v, float)})
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
