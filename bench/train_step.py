"""Benchmark one training step (gradient of a T-step sequence loss) for BPTT, D_RTRL, ES_D_RTRL.

Model: ``ValinaRNNCell(32, n, tanh) -> Linear(n, 8)``, batch 16, float32. A training step is
the gradient of ``sum_t sum((y_t - target_t)^2)`` over T steps from a zero state:

* BPTT: ``jax.grad`` through ``jax.lax.scan`` of the traced step (``etp_viz.learn.bptt``);
* online: ``brainstate.transform.scan`` over the steps of
  ``brainstate.transform.grad(lambda x: loss_t(alg(x)), alg.param_states)``, gradients summed.

Each is jitted, run once (warm-up: compile + one step), then timed ``--repeats`` times (median).
Every configuration runs in its own subprocess, whose peak resident memory (``ru_maxrss``) is
recorded. The memory-bandwidth floor of the D-RTRL trace update is the median time of a jitted
``a * eps + b`` over an array the size of the trace (16 x (32+n) x n floats), i.e. one read and
one write of the trace.

Usage::

    python bench/train_step.py                 # full sweep -> bench/results/train_step-<date>.json
    python bench/train_step.py --quick         # n=64 only
    python bench/train_step.py --one d_rtrl 256 100
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

BATCH, NUM_IN, NUM_OUT = 16, 32, 8
ALGORITHMS = ("bptt", "d_rtrl", "es_d_rtrl")
SIZES = (64, 256, 1024)
LENGTHS = (100, 1000)


def _model(n: int):
    import brainstate

    import etp_viz

    class Net(brainstate.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = etp_viz.nn.ValinaRNNCell(NUM_IN, n, "tanh")
            self.out = etp_viz.nn.Linear(n, NUM_OUT)

        def update(self, x):
            return self.out(self.rnn(x))

    brainstate.random.seed(0)
    model = Net()
    brainstate.nn.init_all_states(model, batch_size=BATCH)
    return model


def _data(length: int):
    import jax

    xs = jax.random.normal(jax.random.PRNGKey(0), (length, BATCH, NUM_IN))
    targets = jax.random.normal(jax.random.PRNGKey(1), (length, BATCH, NUM_OUT))
    return xs, targets


def _bptt_step(model, xs, targets):
    import jax
    import jax.numpy as jnp

    from etp_viz.learn.bptt import make_bptt_gradient_fn, state_values

    grad_fn = make_bptt_gradient_fn(model, xs[0], lambda ys: jnp.sum((ys - targets) ** 2))
    params, others = state_values(model, xs[0])
    fn = jax.jit(grad_fn)
    return lambda: fn(params, others, xs)


def _online_step(model, xs, targets, algorithm: str):
    import brainstate
    import jax
    import jax.numpy as jnp

    import etp_viz

    alg = etp_viz.D_RTRL(model) if algorithm == "d_rtrl" else etp_viz.ES_D_RTRL(model, 0.9)
    alg.compile_graph(xs[0])
    grad_t = brainstate.transform.grad(
        lambda x, target: jnp.sum((alg(x) - target) ** 2), alg.param_states
    )
    zeros = {p: jax.tree.map(jnp.zeros_like, s.value) for p, s in alg.param_states.items()}

    def body(total, inputs):
        grads = grad_t(*inputs)
        return jax.tree.map(jnp.add, total, dict(grads)), None

    @brainstate.transform.jit
    def train_step(xs, targets):
        alg.reset_state()
        return brainstate.transform.scan(body, zeros, (xs, targets))[0]

    return lambda: train_step(xs, targets)


def _floor(n: int, repeats: int) -> float:
    """Median seconds of one read + one write of a trace-sized float32 array."""
    import jax
    import jax.numpy as jnp

    eps = jnp.ones((BATCH, NUM_IN + n, n), jnp.float32)
    other = jnp.ones_like(eps)
    axpy = jax.jit(lambda a, b: 0.5 * a + b, donate_argnums=0)
    eps = axpy(eps, other).block_until_ready()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        eps = axpy(eps, other).block_until_ready()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run_one(algorithm: str, n: int, length: int, repeats: int) -> dict:
    """One configuration, in this process; returns the result record."""
    import jax

    model = _model(n)
    xs, targets = _data(length)
    if algorithm == "bptt":
        step = _bptt_step(model, xs, targets)
    else:
        step = _online_step(model, xs, targets, algorithm)
    start = time.perf_counter()
    jax.block_until_ready(step())
    warmup = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(step())
        times.append(time.perf_counter() - start)
    record = {
        "algorithm": algorithm,
        "n": n,
        "T": length,
        "batch": BATCH,
        "repeats": repeats,
        "warmup_s": warmup,
        "median_s": statistics.median(times),
        "times_s": times,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    if algorithm == "d_rtrl":
        record["trace_floor_s"] = _floor(n, max(repeats, 5))
    return record


def _machine() -> dict:
    import brainstate
    import jax

    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "jax": jax.__version__,
        "brainstate": brainstate.__version__,
        "devices": [str(d) for d in jax.devices()],
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "load_average": os.getloadavg(),
    }


def _repeats_for(algorithm: str, n: int, length: int) -> int:
    """Fewer repeats where one call takes minutes on 2 cores (the sweep must stay < 15 min)."""
    if algorithm == "d_rtrl" and n * length >= 1_000_000:
        return 1
    return 2 if algorithm == "d_rtrl" and n * length >= 100_000 else 5


def sweep(sizes, lengths, out_path: str, timeout: float) -> dict:
    results = []
    for n in sizes:
        for length in lengths:
            for algorithm in ALGORITHMS:
                repeats = _repeats_for(algorithm, n, length)
                cmd = [sys.executable, __file__, "--one", algorithm, str(n), str(length)]
                cmd += ["--repeats", str(repeats)]
                start = time.perf_counter()
                try:
                    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
                    if proc.returncode != 0:
                        raise RuntimeError(proc.stderr[-2000:])
                    record = json.loads(proc.stdout.strip().splitlines()[-1])
                except (subprocess.TimeoutExpired, RuntimeError) as err:
                    record = {"algorithm": algorithm, "n": n, "T": length, "error": str(err)[-500:]}
                record["wall_s"] = time.perf_counter() - start
                print(json.dumps(record), flush=True)
                results.append(record)
    report = {"machine": _machine(), "results": results, "summary": summarize(results)}
    with open(out_path, "w") as f:
        json.dump(report, f, indent=1)
    return report


def summarize(results: list) -> dict:
    """The three targets: D-RTRL per-step cost vs 3x floor, ES vs BPTT at T=1000, memory."""
    by = {(r["algorithm"], r["n"], r["T"]): r for r in results if "median_s" in r}
    summary = {}
    for n in sorted({r["n"] for r in results}):
        d = by.get(("d_rtrl", n, max(LENGTHS)))
        if d:
            per_step = d["median_s"] / d["T"]
            summary[f"d_rtrl_n{n}_per_step_s"] = per_step
            summary[f"d_rtrl_n{n}_per_step_over_floor"] = per_step / d["trace_floor_s"]
        es, bp = by.get(("es_d_rtrl", n, 1000)), by.get(("bptt", n, 1000))
        if es and bp:
            summary[f"es_over_bptt_n{n}_T1000"] = es["median_s"] / bp["median_s"]
        for algorithm in ALGORITHMS:
            short, long_ = by.get((algorithm, n, 100)), by.get((algorithm, n, 1000))
            if short and long_:
                ratio = long_["peak_rss_mib"] / short["peak_rss_mib"]
                summary[f"{algorithm}_n{n}_rss_T1000_over_T100"] = ratio
    return summary


def markdown_table(report: dict) -> str:
    """The README table: one row per (n, T), median seconds and peak RSS per algorithm."""
    by = {(r["algorithm"], r["n"], r["T"]): r for r in report["results"]}
    head = "| n | T | " + " | ".join(f"{a} s (RSS MiB)" for a in ALGORITHMS) + " | floor ms |"
    lines = [head, "|" + "---|" * (3 + len(ALGORITHMS))]
    for n, length in sorted({(r["n"], r["T"]) for r in report["results"]}):
        cells = []
        for algorithm in ALGORITHMS:
            r = by.get((algorithm, n, length), {})
            cells.append(
                f"{r['median_s']:.4g} ({r['peak_rss_mib']:.0f})" if "median_s" in r else "n/a"
            )
        floor = by.get(("d_rtrl", n, length), {}).get("trace_floor_s")
        floor_cell = f"{1e3 * floor:.3g}" if floor else "n/a"
        lines.append(f"| {n} | {length} | " + " | ".join(cells) + f" | {floor_cell} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", nargs=3, metavar=("ALGORITHM", "N", "T"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    parser.add_argument("--lengths", type=int, nargs="*", default=list(LENGTHS))
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--out", default=None)
    parser.add_argument("--table", metavar="RESULTS_JSON", help="print the README table")
    args = parser.parse_args()
    if args.table:
        with open(args.table) as f:
            report = json.load(f)
        print(markdown_table(report))
        print(json.dumps(report.get("summary", {}), indent=1))
        return
    if args.one:
        algorithm, n, length = args.one[0], int(args.one[1]), int(args.one[2])
        print(json.dumps(run_one(algorithm, n, length, args.repeats)))
        return
    sizes = [64] if args.quick else args.sizes
    stamp = datetime.date.today().isoformat()
    here = os.path.dirname(os.path.abspath(__file__))
    out = args.out or os.path.join(here, "results", f"train_step-{stamp}.json")
    report = sweep(sizes, args.lengths, out, args.timeout)
    print(json.dumps(report["summary"], indent=1))


if __name__ == "__main__":
    main()
