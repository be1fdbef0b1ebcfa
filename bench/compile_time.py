"""Compile time of ``compile_etrace_graph`` against the number of equations (10 -> 5,000).

The model is a leaky cell whose update runs through a chain of element-wise equations
(``tests/compiler/test_scaling_property.py`` proves the passes are linear by counting
visits; this records wall-clock time). Tracing by brainstate is included; the compiler passes
alone are reported too (``extract_module_info`` subtracted). Writes
``bench/results/compile_time.json`` with machine, versions and date.

    python bench/compile_time.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import time
import warnings
from pathlib import Path

import brainstate
import jax
import jax.numpy as jnp

import etp_viz
from etp_viz.compiler import compile_etrace_graph, extract_module_info
from etp_viz.compiler._jaxpr import VISITS
from etp_viz.ops import matmul

DEPTHS = (10, 50, 100, 500, 1000, 2500, 5000)


class Chain(brainstate.nn.Module):
    def __init__(self, depth):
        super().__init__()
        self.depth = depth
        self.W = brainstate.ParamState(0.1 * jnp.ones((3, 16)))
        self.R = brainstate.ParamState(0.1 * jnp.ones((16, 16)))
        self.h = brainstate.HiddenState(jnp.zeros(16))

    def update(self, x):
        v = matmul(x, self.W.value) + matmul(self.h.value, self.R.value)
        for i in range(self.depth):
            v = v * 0.999 if i % 2 else v + 0.001
        self.h.value = 0.5 * self.h.value + v
        return self.h.value


def measure(depth: int, repeats: int) -> dict:
    best_total = best_trace = float("inf")
    for _ in range(repeats):
        model, x = Chain(depth), jnp.ones(3)
        start = time.perf_counter()
        extract_module_info(model, x)
        trace = time.perf_counter() - start
        model = Chain(depth)
        VISITS.reset()
        start = time.perf_counter()
        graph = compile_etrace_graph(model, x, warn=False)
        total = time.perf_counter() - start
        best_total, best_trace = min(best_total, total), min(best_trace, trace)
    return {
        "depth": depth,
        "equations": len(graph.module_info.jaxpr.eqns),
        "visits": VISITS.count,
        "compile_s": round(best_total, 4),
        "trace_s": round(best_trace, 4),
        "passes_s": round(max(0.0, best_total - best_trace), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--out", default=str(Path(__file__).parent / "results" / "compile_time.json")
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    rows = []
    for depth in DEPTHS:
        rows.append(measure(depth, args.repeats))
        print(rows[-1], flush=True)
    result = {
        "benchmark": "compile_time",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "device": str(jax.devices()[0]),
        },
        "versions": {
            "etp_viz": etp_viz.__version__,
            "jax": jax.__version__,
            "brainstate": brainstate.__version__,
        },
        "note": "best of --repeats; shared CI-class machine, other jobs running",
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
