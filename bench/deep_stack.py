"""Time to a view model on a deep stack: ``compile_etrace_graph`` + ``graph.gradient_claims``
+ ``build_view_model`` (what ``etp_viz.show()`` does before any widget exists).

The model is ``N`` ``etp_viz.nn.GRUCell(8, 8)`` layers in series and a ``Linear`` readout
(issue #32: GRU x128 took 9.4 s, x512 3.4 min, 85 % of it in the gradient claims). Every
depth runs in its own subprocess. Writes JSON with machine, versions and date.

    .venv/bin/python bench/deep_stack.py [--depths 64 128 256 512] [--out FILE.json]
    .venv/bin/python bench/deep_stack.py --profile 128     # cProfile of one depth
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def make_stack(depth: int, width: int = 8):
    import brainstate
    import jax.numpy as jnp

    import etp_viz.nn as enn

    class GRUStack(brainstate.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = [enn.GRUCell(width, width) for _ in range(depth)]
            self.out = enn.Linear(width, 2)

        def update(self, x):
            for layer in self.layers:
                x = layer(x)
            return self.out(x)

    model = GRUStack()
    brainstate.nn.init_all_states(model)
    return model, jnp.zeros(width)


def measure(depth: int) -> dict:
    from etp_viz.compiler import compile_etrace_graph
    from etp_viz.view.model import build_view_model

    model, x = make_stack(depth)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        graph = compile_etrace_graph(model, x)
        compiled = time.perf_counter()
        claims = graph.gradient_claims("d_rtrl")
        claimed = time.perf_counter()
        vm = build_view_model(graph)
        viewed = time.perf_counter()
    return {
        "depth": depth,
        "equations": len(graph.module_info.jaxpr.eqns),
        "compile_s": round(compiled - start, 3),
        "claims_s": round(claimed - compiled, 3),
        "view_model_s": round(viewed - claimed, 3),
        "total_s": round(viewed - start, 3),
        "claims": len(claims),
        "approximate_claims": sum(c.kind == "approximate" for c in claims.values()),
        "nodes": len(vm.nodes),
    }


def versions() -> dict:
    import brainstate
    import jax

    return {
        "python": platform.python_version(),
        "jax": jax.__version__,
        "brainstate": brainstate.__version__,
        "platform": platform.platform(),
        "processor": platform.machine(),
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[64, 128, 256, 512])
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--profile", type=int, help="cProfile one depth (top 30, cumulative)")
    parser.add_argument("--note", default="", help="machine load etc., stored in the JSON")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "deep_stack.json"))
    parser.add_argument("--label", default="", help="which code was measured (before/after)")
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure(args.one)))
        return
    if args.profile is not None:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.runcall(measure, args.profile)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
        return
    runs = []
    for depth in args.depths:
        done = subprocess.run(
            [sys.executable, __file__, "--one", str(depth)],
            capture_output=True,
            text=True,
            check=True,
        )
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(runs[-1]), flush=True)
    result = {
        "benchmark": "deep_stack",
        "model": "N x etp_viz.nn.GRUCell(8, 8) in series + Linear(8, 2)",
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": versions(),
        "code": args.label,
        "load_average": os.getloadavg(),
        "runs": runs,
        "note": args.note,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
