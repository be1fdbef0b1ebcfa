"""Where an ES_D_RTRL online step spends its time, per kind of operation, in both libraries.

Runs ``vs_braintrace_models.online_harness`` (batch 16, T = 50, SGD on every weight) for
etp_viz and braintrace 0.2.8 in one process, records ``ROUNDS`` calls of each under
``jax.profiler`` (XLA:CPU reports one event per executed instruction of the compiled loop,
and one per part of a fusion split over threads) and sums the time per step (the union of the
events' intervals, so parts running at once count once) by what the instruction computes,
read off the optimised HLO:

* ``forward matmul``: a dot whose output is ``(batch, k)`` (the cells' gate products and
  the readout);
* ``weight gradient``: a dot (or fusion holding one) with a weight's or a bias's shape;
* ``readout gradient``: the same for the readout's weight (``n x 8``) and bias;
* ``update``: the harness's SGD on a weight- or bias-shaped array (a fusion without a dot);
* ``rest``: everything else (element-wise fusions, copies, the loop's bookkeeping).

The first three rows and the update are the work any online gradient step with per-step SGD
does on these models; the last row is where two programs can differ. Run with the
interpreter that has braintrace (``.venv312``)::

    .venv312/bin/python bench/step_profile.py --cells gru,rnn --out results/step_profile-<date>.json
"""

from __future__ import annotations

import argparse
import collections
import datetime
import glob
import gzip
import json
import os
import platform
import re
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROUNDS = 20
LENGTH = 50
_INSTR = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = \w+\[([\d,]*)\]")
_SKIP = ("ThunkExecutor", "$", "Pjit", "Slinky", "Common", "while", "end:", "Threadpool")


def _shapes(text: str) -> dict[str, tuple[tuple[int, ...], bool]]:
    """``{instruction: (output shape, computes a dot)}`` of an optimised HLO module."""
    fused_dot: dict[str, bool] = {}
    current = None
    for line in text.splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith("{"):
            current = line.split()[0].lstrip("%")
            if current == "ENTRY":
                current = line.split()[1].lstrip("%")
            fused_dot[current] = False
        elif current and (" dot(" in line or "__ynn_fusion" in line):
            fused_dot[current] = True
    out = {}
    for line in text.splitlines():
        found = _INSTR.match(line)
        if not found:
            continue
        shape = tuple(int(d) for d in found.group(2).split(",") if d)
        called = re.search(r"calls=%?([\w.\-]+)", line)
        dot = " dot(" in line or bool(called and fused_dot.get(called.group(1)))
        out[found.group(1)] = (shape, dot)
    return out


def _kind(shape, dot: bool, weights: set, readout: set) -> str:
    if shape in readout:
        return "readout gradient" if dot else "update"
    if shape in weights:
        return "weight gradient" if dot else "update"
    if dot:
        return "forward matmul"
    return "rest"


def profile_one(lib, cell: str, n: int) -> dict:
    """Per-step µs by kind of operation for ``lib`` on ``cell``, and the call's wall time."""
    import jax
    import vs_braintrace_models as models

    xs, targets = models.make_data(LENGTH)
    model = models.make_model(lib, cell, n)
    fn = models.online_harness(lib, model, "es_d_rtrl", "online", xs[0])
    for _ in range(3):  # compile, and braintrace's recompile on its second call
        jax.block_until_ready(fn(xs, targets))
    walls = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        jax.block_until_ready(fn(xs, targets))
        walls.append(time.perf_counter() - start)
    shapes = _shapes(fn.lower(xs, targets).compile().as_text())
    leaves = [leaf for s in models.ALGORITHMS_OF[id(model)].param_states.values()
              for leaf in jax.tree.leaves(s.value)]  # fmt: skip
    readout = {(n, models.NUM_OUT), (models.NUM_OUT,)}  # the readout Linear(n, 8)
    weights = {tuple(leaf.shape) for leaf in leaves} - readout
    with tempfile.TemporaryDirectory() as folder:
        jax.profiler.start_trace(folder, create_perfetto_trace=True)
        for _ in range(ROUNDS):
            jax.block_until_ready(fn(xs, targets))
        jax.profiler.stop_trace()
        trace = sorted(glob.glob(f"{folder}/**/*.trace.json.gz", recursive=True))[-1]
        with gzip.open(trace) as handle:
            events = [e for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]
    events = [e for e in events if not e["name"].startswith(_SKIP)]
    intervals: dict[str, list] = collections.defaultdict(list)
    for event in events:
        known = shapes.get(event["name"])
        kind = _kind(*known, weights, readout) if known else "unmatched"
        intervals[kind].append((event["ts"], event["ts"] + event["dur"]))
    # a partitioned fusion runs its parts on pool threads at once: the union of a kind's
    # intervals is the time the step spends in it, so the rows add up to about the wall time
    per_kind = {kind: _union(spans) for kind, spans in intervals.items()}
    unknown = per_kind.pop("unmatched", 0.0)
    steps = ROUNDS * LENGTH
    return {
        "us_per_step": {k: round(v / steps, 2) for k, v in sorted(per_kind.items())},
        "unmatched_us_per_step": round(unknown / steps, 2),
        "ops_us_per_step": round(sum(per_kind.values()) / steps, 2),
        "wall_us_per_step": round(min(walls) / LENGTH * 1e6, 2),
    }


def _union(spans: list) -> float:
    """Total length of the union of ``(start, end)`` intervals."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(spans):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


MANDATORY = ("forward matmul", "weight gradient", "readout gradient", "update")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default="gru,rnn")
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import braintrace
    import jax

    import etp_viz

    jax.config.update("jax_enable_x64", False)
    sys.path.insert(0, str(HERE))
    rows = []
    for cell in args.cells.split(","):
        for lib in (braintrace, etp_viz):  # braintrace first: the machine warms up on it
            row = {"lib": lib.__name__, "cell": cell, "n": args.n, "T": LENGTH}
            row |= profile_one(lib, cell, args.n)
            row["mandatory_us_per_step"] = round(
                sum(row["us_per_step"].get(k, 0.0) for k in MANDATORY), 2
            )
            rows.append(row)
            print(json.dumps(row), flush=True)
    result = {
        "machine": {
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "load_average": os.getloadavg(),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "gpu": "none (CPU profile)",
        },
        "versions": {
            "jax": jax.__version__,
            "braintrace": braintrace.__version__,
            "python": platform.python_version(),
        },  # fmt: skip
        "rows": rows,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
        print(f"recorded {args.out}")


if __name__ == "__main__":
    main()
