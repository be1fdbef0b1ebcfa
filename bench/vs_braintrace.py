"""etp_viz vs braintrace 0.2.8: the same models and harnesses, timed in alternating processes.

Models (``vs_braintrace_models.py``, one file for both libraries): ``cell(32, n) -> Linear(n,
8)``, batch 16, float32, cells ValinaRNN (tanh), GRU, LSTM, MGU, MiniGRU and a recurrent LIF
written with ``lib.matmul``. Per (cell, n): D_RTRL and ES_D_RTRL(0.9) under the harnesses
``online`` (per-step grad + SGD), ``stacked`` (``for_loop`` of per-step grads, summed after)
and ``summed`` (scan carrying the sum), plus BPTT (``grad`` through ``for_loop``). Each
function is jitted, compiled and run once (warm-up), then timed; a configuration runs as one
process per library, the libraries' processes alternate, and the recorded time is the minimum
over rounds (the 2-core machine is shared: minima are the least noisy statistic). Peak memory
is XLA's compiled memory analysis (arguments + outputs + temporaries - aliased) of the jitted
function, at T and at 10 T for the online harness (flat in T = online).

etp_viz runs in this interpreter (the project venv); braintrace in ``bench/.venv-braintrace``
(Python >= 3.12) when it exists, else in this interpreter when ``import braintrace`` works
there (``.venv312`` has braintrace 0.2.8 installed beside etp_viz), else in that venv created
on first use (``--setup``)::

    .venv312/bin/python bench/vs_braintrace.py            # full run -> bench/results/
    .venv312/bin/python bench/vs_braintrace.py --quick    # smoke run (rnn/gru, n=64, T=10)
    .venv312/bin/python bench/vs_braintrace.py --rows gru:256,rnn:256 --rounds 3
    .venv312/bin/python bench/vs_braintrace.py --paired 40 --rows gru:256,rnn:256
    .venv312/bin/python bench/vs_braintrace.py --table bench/results/vs_braintrace-<date>.json

``--paired N`` (both libraries in this interpreter) times ES_D_RTRL only, in one process per
row: the two libraries' jitted calls alternate N times and the ratio is the median of the N
per-pair ratios (with its quartiles), which a busy machine disturbs far less than a ratio of
minima taken minutes apart.
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
from pathlib import Path

HERE = Path(__file__).resolve().parent
BT_VENV = HERE / ".venv-braintrace"
BT_PYTHON = BT_VENV / "bin" / "python"
ALGORITHMS = ("d_rtrl", "es_d_rtrl")
HARNESSES = ("online", "stacked", "summed")
FULL_CELLS = ("rnn", "gru", "lstm", "mgu", "minigru", "lif")
MEMORY_COLUMNS = (("d_rtrl", "online"), ("es_d_rtrl", "online"), ("bptt", "-"))


def _braintrace_python() -> Path:
    """``bench/.venv-braintrace``'s python when it exists, else this interpreter when it has
    braintrace, else the venv's path (created by :func:`_setup_braintrace`)."""
    if BT_PYTHON.exists():
        return BT_PYTHON
    import importlib.util

    return Path(sys.executable) if importlib.util.find_spec("braintrace") else BT_PYTHON


def _setup_braintrace() -> None:
    """Create ``bench/.venv-braintrace`` with braintrace 0.2.8 (a benchmark peer only)."""
    if _braintrace_python().exists():
        return
    pyenv_root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
    python = Path(pyenv_root) / "versions" / "3.12.1" / "bin" / "python3"
    subprocess.run([str(python), "-m", "venv", str(BT_VENV)], check=True)
    pip = [str(BT_VENV / "bin" / "pip"), "install", "-q"]
    subprocess.run([*pip, "braintrace==0.2.8", "numba"], check=True)


def _memory_mib(jitted, *args) -> float | None:
    try:
        stats = jitted.lower(*args).compile().memory_analysis()
    except Exception:  # noqa: BLE001 - not every backend/version reports it
        return None
    if stats is None:
        return None
    total = (
        stats.argument_size_in_bytes
        + stats.output_size_in_bytes
        + stats.temp_size_in_bytes
        - stats.alias_size_in_bytes
    )
    return total / 2**20


def _time(fn, args, repeats: int) -> tuple[float, list]:
    import jax

    warmup = []
    for _ in range(2):  # braintrace's LSTM/MGU/MiniGRU recompile on the second call
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        warmup.append(time.perf_counter() - start)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return best, warmup


def _trace_floor(model) -> float | None:
    """Seconds of one read + one write of every D-RTRL trace of ``model`` (etp_viz only): a
    jitted, buffer-donating ``0.5 * eps + b`` over an array of the traces' total size."""
    import jax
    import jax.numpy as jnp
    import vs_braintrace_models as models

    alg = models.ALGORITHMS_OF.get(id(model))
    if alg is None or getattr(alg, "etrace", None) is None:
        return None
    size = sum(leaf.size for leaf in jax.tree.leaves(alg.etrace.value))
    eps, other = jnp.ones((size,), jnp.float32), jnp.ones((size,), jnp.float32)
    axpy = jax.jit(lambda a, b: 0.5 * a + b, donate_argnums=0)
    eps = axpy(eps, other).block_until_ready()
    best = float("inf")
    for _ in range(7):
        start = time.perf_counter()
        eps = axpy(eps, other).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return best


def run_group(lib_name: str, cell: str, n: int, length: int, repeats: int, jobs: list) -> list:
    """Time ``jobs`` (``(algorithm, harness)`` pairs, algorithm ``'bptt'`` for BPTT)."""
    import warnings

    warnings.simplefilter("ignore")
    lib = __import__(lib_name)
    import jax

    jax.config.update("jax_enable_x64", False)
    sys.path.insert(0, str(HERE))
    import vs_braintrace_models as models

    xs, targets = models.make_data(length)
    long_xs, long_targets = models.make_data(10 * length)
    records = []
    for algorithm, harness in jobs:
        model = models.make_model(lib, cell, n)
        if algorithm == "bptt":
            fn = models.bptt_harness(lib, model)
        else:
            fn = models.online_harness(lib, model, algorithm, harness, xs[0])
        record = {"lib": lib_name, "cell": cell, "n": n, "T": length}
        record |= {"algorithm": algorithm, "harness": harness}
        try:
            record["memory_mib"] = _memory_mib(fn, xs, targets)
            if harness == "online" or algorithm == "bptt":
                record["memory_mib_10T"] = _memory_mib(fn, long_xs, long_targets)
            record["time_s"], record["first_calls_s"] = _time(fn, (xs, targets), repeats)
            if lib_name == "etp_viz" and algorithm == "d_rtrl" and harness == "summed":
                record["trace_floor_s"] = _trace_floor(model)
        except Exception as err:  # noqa: BLE001 - recorded, the sweep goes on
            record["error"] = f"{type(err).__name__}: {str(err)[:300]}"
        records.append(record)
    return records


def _machine(lib_name: str) -> dict:
    import brainstate
    import jax

    lib = __import__(lib_name)
    return {
        "python": sys.version.split()[0],
        "jax": jax.__version__,
        "brainstate": brainstate.__version__,
        lib_name: getattr(lib, "__version__", "?"),
        "devices": [str(d) for d in jax.devices()],
    }


#: glibc's dynamic mmap threshold makes a ~30 MB temporary buffer (the stacked harness's T
#: gradients) come back from the OS, page-faulted and zeroed, on some calls and not others,
#: depending on the process's allocation history: up to 2x on one row, for either library.
#: Fixed thresholds for both libraries' processes (``--default-malloc`` turns this off).
FIXED_MALLOC = {"MALLOC_MMAP_THRESHOLD_": "4000000000", "MALLOC_TRIM_THRESHOLD_": "4000000000"}


def _subprocess(python: Path, lib_name: str, group: dict, timeout: float, env: dict) -> list:
    cmd = [str(python), __file__, "--one", json.dumps({"lib": lib_name, **group})]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **env}
        )
    except subprocess.TimeoutExpired:
        return [{"lib": lib_name, **group, "error": "timeout"}]
    if proc.returncode != 0:
        return [{"lib": lib_name, **group, "error": proc.stderr[-1500:]}]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _groups(quick: bool) -> list[dict]:
    if quick:
        cells, sizes = ("rnn", "gru"), {64: 10}
        jobs = [(a, h) for a in ALGORITHMS for h in HARNESSES] + [("bptt", "-")]
        return [
            {"cell": c, "n": n, "T": t, "repeats": 2, "jobs": jobs}
            for c in cells
            for n, t in sizes.items()
        ]
    jobs = [(a, h) for a in ALGORITHMS for h in HARNESSES] + [("bptt", "-")]
    groups = [
        {"cell": c, "n": n, "T": t, "repeats": r, "jobs": jobs}
        for n, t, r in ((256, 50, 3), (1024, 10, 2))
        for c in FULL_CELLS
    ]
    groups.append(
        {
            "cell": "rnn",
            "n": 1024,
            "T": 1000,
            "repeats": 1,
            "jobs": [("es_d_rtrl", "summed"), ("bptt", "-")],
        }
    )
    return groups


def _selected(groups: list[dict], rows: str | None) -> list[dict]:
    """The groups named by ``--rows cell:n,...`` (all when None)."""
    if not rows:
        return groups
    wanted = {(c, int(n)) for c, n in (row.split(":")[:2] for row in rows.split(","))}
    return [g for g in groups if (g["cell"], g["n"]) in wanted and g["T"] <= 50]


def sweep(args) -> dict:
    _setup_braintrace()
    groups = _selected(_groups(args.quick), args.rows)
    env = {} if args.default_malloc else FIXED_MALLOC
    records = []
    for round_index in range(args.rounds):
        for group in groups:
            # alternate which library goes first, so neither always runs on a warmer machine
            order = [("etp_viz", Path(sys.executable)), ("braintrace", _braintrace_python())]
            for lib_name, python in order[:: 1 if round_index % 2 == 0 else -1]:
                for record in _subprocess(python, lib_name, group, args.timeout, env):
                    record["round"] = round_index
                    record["load_average"] = os.getloadavg()
                    records.append(record)
                    print(json.dumps(record), flush=True)
    return {
        "machine": {
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "gpu": "none lent to this session (CPU only)",
            "malloc_env": env,
        },
        "versions": {
            "etp_viz": _version_of(Path(sys.executable), "etp_viz"),
            "braintrace": _version_of(_braintrace_python(), "braintrace"),
        },
        "records": records,
    }


def paired_row(cell: str, n: int, harness: str, pairs: int) -> dict:
    """ES_D_RTRL on one (cell, n, harness) in both libraries in this process, calls alternated
    (which library goes first alternates too); the median and quartiles of the per-pair ratios
    etp_viz / braintrace."""
    import statistics
    import warnings

    warnings.simplefilter("ignore")
    import braintrace
    import jax

    import etp_viz

    jax.config.update("jax_enable_x64", False)
    sys.path.insert(0, str(HERE))
    import vs_braintrace_models as models

    length = 50 if n <= 256 else 10
    xs, targets = models.make_data(length)
    fns = {}
    for lib in (etp_viz, braintrace):
        fn = models.online_harness(
            lib, models.make_model(lib, cell, n), "es_d_rtrl", harness, xs[0]
        )
        for _ in range(3):  # compile, and braintrace's recompile on its second call
            jax.block_until_ready(fn(xs, targets))
        fns[lib.__name__] = fn
    times: dict = {name: [] for name in fns}
    for i in range(pairs):
        for name in list(fns)[:: 1 if i % 2 == 0 else -1]:
            start = time.perf_counter()
            jax.block_until_ready(fns[name](xs, targets))
            times[name].append(time.perf_counter() - start)
    ratios = [e / b for e, b in zip(times["etp_viz"], times["braintrace"])]
    quartiles = statistics.quantiles(ratios, n=4)
    return {
        "cell": cell, "n": n, "T": length, "harness": harness, "algorithm": "es_d_rtrl",
        "pairs": pairs, "ratio_median": statistics.median(ratios),
        "ratio_quartiles": [quartiles[0], quartiles[2]],
        "ratio_of_minima": min(times["etp_viz"]) / min(times["braintrace"]),
        "etp_viz_s": {"min": min(times["etp_viz"]), "median": statistics.median(times["etp_viz"])},
        "braintrace_s": {
            "min": min(times["braintrace"]), "median": statistics.median(times["braintrace"])
        },
        "load_average": os.getloadavg(),
    }  # fmt: skip


def paired(args) -> None:
    """``--paired N``: :func:`paired_row` per selected row and harness, one process each."""
    groups = _selected(_groups(False), args.rows or "gru:256,rnn:256")
    records = []
    for group in groups:
        for harness in args.harnesses.split(","):
            spec = {"cell": group["cell"], "n": group["n"], "harness": harness}
            cmd = [
                sys.executable,
                __file__,
                "--paired-one",
                json.dumps({**spec, "pairs": args.paired}),
            ]
            proc = subprocess.run(
                cmd, capture_output=True, text=True, env={**os.environ, **FIXED_MALLOC}
            )
            record = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else (
                spec | {"error": proc.stderr[-1500:]})  # fmt: skip
            records.append(record)
            print(json.dumps(record), flush=True)
    result = {
        "machine": {
            "platform": platform.platform(), "cpu_count": os.cpu_count(),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "gpu": "none lent to this session (CPU only)", "malloc_env": FIXED_MALLOC,
            "note": "both libraries in one interpreter, calls alternated",
        },
        "versions": _machine("etp_viz") | {"braintrace": _machine("braintrace")["braintrace"]},
        "records": records,
    }  # fmt: skip
    date = datetime.date.today().isoformat()
    out = Path(args.out or HERE / "results" / f"vs_braintrace-paired-{date}.json")
    out.write_text(json.dumps(result, indent=1))
    print(f"recorded {out}")


def _version_of(python: Path, lib_name: str) -> dict:
    cmd = [str(python), __file__, "--versions", lib_name]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def best_times(records: list) -> dict:
    """``{(lib, cell, n, T, algorithm, harness): min time}`` over rounds (errors skipped)."""
    best: dict = {}
    for r in records:
        if "time_s" not in r:
            continue
        key = (r["lib"], r["cell"], r["n"], r["T"], r["algorithm"], r["harness"])
        best[key] = min(best.get(key, float("inf")), r["time_s"])
    return best


def table(result: dict) -> str:
    """Markdown: one row per (cell, n, T, harness); ms per call and etp/bt ratios."""
    best = best_times(result["records"])
    memory = {}
    for r in result["records"]:
        key = (r["lib"], r["cell"], r["n"], r["T"], r["algorithm"], r["harness"])
        memory[key] = (r.get("memory_mib"), r.get("memory_mib_10T"))
    rows = sorted({k[1:4] + (k[5],) for k in best if k[4] != "bptt"}, key=str)
    head = (
        "| cell | n | T | harness | D_RTRL etp / bt ms (ratio) | ES_D_RTRL etp / bt ms (ratio)"
        " | BPTT etp / bt ms |\n|---|---|---|---|---|---|---|"
    )
    lines = [head]

    def cell_text(cell, n, length, algorithm, harness):
        e = best.get(("etp_viz", cell, n, length, algorithm, harness))
        b = best.get(("braintrace", cell, n, length, algorithm, harness))
        if e is None or b is None:
            return f"{_ms(e)} / {_ms(b)}"
        return f"{_ms(e)} / {_ms(b)} ({e / b:.2f})"

    for cell, n, length, harness in rows:
        texts = [cell_text(cell, n, length, a, harness) for a in ALGORITHMS]
        texts.append(cell_text(cell, n, length, "bptt", "-").split(" (")[0])
        lines.append(f"| {cell} | {n} | {length} | {harness} | " + " | ".join(texts) + " |")
    lines.append("")
    lines.append(
        "| cell | n | T | lib | D_RTRL MiB (T / 10T) | ES_D_RTRL MiB (T / 10T) | BPTT MiB (T / 10T)"
        " |\n|---|---|---|---|---|---|---|"
    )
    for cell, n, length in sorted({k[1:4] for k in memory}, key=str):
        for lib in ("etp_viz", "braintrace"):
            texts = []
            for algorithm, harness in MEMORY_COLUMNS:
                one, ten = memory.get((lib, cell, n, length, algorithm, harness), (None, None))
                texts.append(f"{_mib(one)} / {_mib(ten)}")
            lines.append(f"| {cell} | {n} | {length} | {lib} | " + " | ".join(texts) + " |")
    lines.append("")
    lines.append(
        "| cell | n | T | D_RTRL summed ms/step | trace floor ms | x floor |\n"
        "|---|---|---|---|---|---|"
    )
    for r in result["records"]:
        if r.get("trace_floor_s") and "time_s" in r:
            per_step = best[(r["lib"], r["cell"], r["n"], r["T"], "d_rtrl", "summed")] / r["T"]
            ratio = per_step / r["trace_floor_s"]
            lines.append(
                f"| {r['cell']} | {r['n']} | {r['T']} | {per_step * 1e3:.3g} | "
                f"{r['trace_floor_s'] * 1e3:.3g} | {ratio:.1f} |"
            )
    return "\n".join(lines)


def _ms(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3g}"


def _mib(value) -> str:
    return "-" if value is None else f"{value:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: rnn/gru, n=64, T=10")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--out", default=None)
    parser.add_argument("--table", default=None, help="print the table of a recorded JSON")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--versions", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--default-malloc", action="store_true", help="no fixed malloc env")
    parser.add_argument("--setup", action="store_true", help="only create the braintrace venv")
    parser.add_argument("--rows", default=None, help="only these cell:n groups, e.g. gru:256")
    parser.add_argument("--paired", type=int, default=0, help="ES_D_RTRL paired calls per row")
    parser.add_argument("--harnesses", default=",".join(HARNESSES), help="--paired harnesses")
    parser.add_argument("--paired-one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        group = json.loads(args.one)
        jobs = [tuple(job) for job in group["jobs"]]
        records = run_group(
            group["lib"], group["cell"], group["n"], group["T"], group["repeats"], jobs
        )
        print(json.dumps(records))
        return
    if args.versions:
        print(json.dumps(_machine(args.versions)))
        return
    if args.setup:
        _setup_braintrace()
        return
    if args.paired_one:
        print(json.dumps(paired_row(**json.loads(args.paired_one))))
        return
    if args.paired:
        paired(args)
        return
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return
    result = sweep(args)
    date = datetime.date.today().isoformat()
    suffix = "-quick" if args.quick else ""
    out = Path(args.out or HERE / "results" / f"vs_braintrace-{date}{suffix}.json")
    out.write_text(json.dumps(result, indent=1))
    print(table(result))
    print(f"recorded {out}")


if __name__ == "__main__":
    main()
