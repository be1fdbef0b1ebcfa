"""Compile time of a user-written CSR LIF learned by ES-D-RTRL, at growing n (issue 43).

The model is ``bench/sparse_kernels.CSRLIFNet`` (``etp_viz.sparse_matmul`` on a saiunit CSR
whose indices are a ``brainstate.State``; fan-in 100, batch 8, 32 inputs, a ``Linear``
readout), the harness ``bench/gpu.py``'s ``sgd_harness`` (a jitted ``for_loop`` of online
gradients and SGD over 10 steps), as the ``etp_viz-csr`` rows of ``gpu.py`` build them. Per n,
in a fresh process each: seconds to trace + lower (``fn.lower``) and to compile
(``.compile()``), the lowered StableHLO's and the optimised HLO's sizes, and how many of their
constants hold data (more than 64 elements, not a splat). Target: 20k and 200k neurons within 1.5x.

    .venv312/bin/python bench/csr_compile.py                      # n = 20k, 200k, 3 rounds
    .venv312/bin/python bench/csr_compile.py --sizes 2000,20000,200000 --rounds 3
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
_LOWERED_CONSTANT = re.compile(r"stablehlo\.constant dense<(.).*?> : tensor<((?:\d+x)*)[a-z]\w*>")
_OPTIMISED_CONSTANT = re.compile(r"= \w+\[([\d,]*)\]\S* constant\(\{")
#: a constant of more elements than this is data baked into the program
MAX_CONSTANT_ELEMENTS = 64


def data_constants(text: str) -> int:
    """How many constants of ``text`` (StableHLO or optimised HLO) hold more than
    :data:`MAX_CONSTANT_ELEMENTS` elements of data (a splat, one repeated value, does not)."""
    count = 0
    for line in text.splitlines():
        lowered, optimised = _LOWERED_CONSTANT.search(line), _OPTIMISED_CONSTANT.search(line)
        if lowered and lowered.group(1) in '"[':
            dims = lowered.group(2).split("x")
        elif optimised:
            dims = optimised.group(1).split(",")
        else:
            continue
        count += math.prod(int(d) for d in dims if d) > MAX_CONSTANT_ELEMENTS
    return count


def measure(n: int, algorithm: str) -> dict:
    warnings.simplefilter("ignore")
    sys.path.insert(0, str(HERE))
    import brainstate
    import gpu
    import jax
    import sparse_kernels

    import etp_viz

    brainstate.random.seed(0)
    model = sparse_kernels.CSRLIFNet(gpu.SparseNet(n, False))
    brainstate.nn.init_all_states(model, batch_size=gpu.SPARSE_BATCH)
    xs = jax.random.normal(jax.random.PRNGKey(0), (10, gpu.SPARSE_BATCH, gpu.SPARSE_IN))
    targets = jax.random.normal(jax.random.PRNGKey(1), (10, gpu.SPARSE_BATCH, 8))
    start = time.perf_counter()
    learner = gpu.make_learner(etp_viz, model, algorithm, xs[0])
    learner_s = time.perf_counter() - start
    fn = gpu.sgd_harness(etp_viz, model, gpu.squared_error, learner)
    start = time.perf_counter()
    lowered = fn.lower(xs, targets)
    lower_s = time.perf_counter() - start
    start = time.perf_counter()
    compiled = lowered.compile()
    compile_s = time.perf_counter() - start
    texts = {"lowered": lowered.as_text(), "optimised": compiled.as_text()}
    return {
        "n": n,
        "fan_in": gpu.FAN_IN,
        "algorithm": algorithm,
        "compile_graph_s": learner_s,
        "lower_s": lower_s,
        "compile_s": compile_s,
        "lower_compile_s": lower_s + compile_s,
        "chars": {k: len(v) for k, v in texts.items()},
        "data_constants": {k: data_constants(v) for k, v in texts.items()},
        "load_average": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="20000,200000")
    parser.add_argument("--algorithm", default="es_d_rtrl")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=None)
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(int(args.one), args.algorithm)))
        return
    records = []
    for round_index in range(args.rounds):
        for n in [int(v) for v in args.sizes.split(",")]:
            cmd = [sys.executable, __file__, "--one", str(n), "--algorithm", args.algorithm]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                record = {"n": n, "error": proc.stderr[-1500:]}
            else:
                record = json.loads(proc.stdout.strip().splitlines()[-1])
            record["round"] = round_index
            records.append(record)
            print(json.dumps(record), flush=True)
    sys.path.insert(0, str(HERE))
    import brainstate
    import jax

    import etp_viz

    result = {
        "machine": {
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "python": sys.version.split()[0],
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "gpu": "none lent to this session (CPU only)",
        },
        "versions": {
            "jax": jax.__version__,
            "brainstate": brainstate.__version__,
            "etp_viz": getattr(etp_viz, "__version__", "?"),
        },
        "records": records,
    }
    date = datetime.date.today().isoformat()
    out = Path(args.out or HERE / "results" / f"csr_compile-{date}.json")
    out.write_text(json.dumps(result, indent=1))
    for n in sorted({r["n"] for r in records if "error" not in r}):
        best = min(r["lower_compile_s"] for r in records if r["n"] == n and "error" not in r)
        print(f"n={n}: lower + compile {best:.2f} s (min over rounds)")
    print(f"recorded {out}")


if __name__ == "__main__":
    main()
