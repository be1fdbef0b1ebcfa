"""Scale benchmark (issue "gpu"): dense cells, the sparse spiking layer, bf16 traces, the planner.

One command, one JSON (device, versions, date) under ``bench/results/``::

    .venv312/bin/python bench/gpu.py             # GPU sizes on a GPU, small sizes on CPU
    .venv312/bin/python bench/gpu.py --quick     # smallest sizes anywhere (~1-3 min on CPU)
    .venv312/bin/python bench/gpu.py --table bench/results/<date>-cpu.json

(a) **Dense cells** ``cell(32, n) -> Linear(n, 8)`` (tanh RNN, GRU, LSTM): per-step gradient +
SGD (the ``online`` harness of ``vs_braintrace_models.py``) for D-RTRL and ES-D-RTRL(0.9), and
BPTT (``grad`` through the T-step loop, then SGD), T = 100, min over 5 calls, divided by T.
**Trace floor** = bytes of the learner's traces read + written once per step / the measured
bandwidth (a jitted, buffer-donating ``0.5 a + b`` axpy: 3 words moved per element).

(b) **Sparse LIF** ``etp_viz.nn.SparseLIF(32, n, fan_in=100) -> Linear(n, 8)``, batch 8, sum of
squares loss against targets, SGD: ms/step, neuron-steps/s, compile s (trace + lower +
compile), peak memory (``device.memory_stats()`` where the backend has it, else XLA's
compiled memory analysis), firing rate. Floor = the weights read once (forward) and read +
written once (SGD), 12 bytes per synapse, over the bandwidth; the event-driven forward reads
only the spiking neurons' rows, so its floor is ``(8 + 4 * rate)`` bytes per synapse. With
``import braintrace`` working (the py3.12 venv), braintrace 0.2.8 runs the same model (its
``sparse_matmul`` on a ``brainevent.CSR`` of the same pattern and weights) in this process,
and ``etp_viz-csr`` rows run a user-written copy (``sparse_kernels.CSRLIFNet``:
``etp_viz.sparse_matmul`` on a saiunit CSR whose indices are a ``brainstate.State``). The
firing rate is measured first; one outside [0.02, 0.10] makes the row an error (and the run
exit non-zero). Each row has ``kernels``: fusions / custom calls / whiles in the compiled
step's loop body (``sparse_kernels.count_kernels``). ``csr_compile``: lowered-HLO size and
lower + compile seconds of one D-RTRL step with the CSR indices as constants vs operands.
``--sparse-only`` runs (b) and the sweep and writes ``<date>-<cpu|gpu>-sparse.json``.

(c) **bf16 traces** (``D_RTRL(model, trace_dtype=jnp.bfloat16)``) and the **planner**
(``etp_viz.plan(model, x, algorithm, T=..., batch=...)``): called when the installed etp_viz
has them; the JSON says when it does not.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
import traceback
from pathlib import Path

import brainstate
import jax
import jax.numpy as jnp
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import sparse_kernels  # noqa: E402
import vs_braintrace_models as models  # noqa: E402

import etp_viz  # noqa: E402

LEARNING_RATE = 1e-3
DENSE_CELLS = ("rnn", "gru", "lstm")
SPARSE_BATCH, SPARSE_IN, FAN_IN = 8, 32, 100
#: input weights N(0, INPUT_STD²) on N(0, 1) inputs: a firing rate of 5.3-5.9 % at 1k, 10k,
#: 100k (T = 20 and 100) and 1M (T = 20) neurons, measured on CPU
INPUT_STD = 1.0


def sizes(on_gpu: bool, quick: bool) -> dict:
    """The configurations: the issue's on a GPU, small ones on CPU, the smallest with --quick."""
    if on_gpu and not quick:
        dense = [(c, b, 1024) for c in DENSE_CELLS for b in (16, 128)] + [("gru", 16, 4096)]
        return {"dense": dense, "T": 100, "sparse": [10_000, 100_000, 1_000_000], "sparse_T": 100}
    if quick:
        return {"dense": [(c, 16, 32) for c in DENSE_CELLS], "T": 100, "sparse": [1_000],
                "sparse_T": 10}  # fmt: skip
    dense = [(c, 16, 64) for c in DENSE_CELLS]
    return {"dense": dense, "T": 100, "sparse": [1_000, 10_000], "sparse_T": 20}


def best_of(fn, args, calls: int) -> tuple[float, float]:
    """``(first call s, min over calls s)``: the first includes tracing and compilation."""
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    first = time.perf_counter() - start
    best = float("inf")
    for _ in range(calls):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return first, best


def bandwidth_bytes_per_s(words: int) -> float:
    """Bytes moved per second by a donating axpy ``0.5 a + b`` (read a, read b, write)."""
    a, b = jnp.ones((words,), jnp.float32), jnp.ones((words,), jnp.float32)
    axpy = jax.jit(lambda a, b: 0.5 * a + b, donate_argnums=0)
    a = axpy(a, b).block_until_ready()
    best = float("inf")
    for _ in range(9):
        start = time.perf_counter()
        a = axpy(a, b).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return 3 * 4 * words / best


def peak_memory() -> dict:
    stats = jax.devices()[0].memory_stats() or {}
    return {"peak_bytes_in_use": stats.get("peak_bytes_in_use")}


def compiled_memory_mib(fn, *args) -> float | None:
    try:
        stats = fn.lower(*args).compile().memory_analysis()
        used = stats.argument_size_in_bytes + stats.output_size_in_bytes
        return (used + stats.temp_size_in_bytes - stats.alias_size_in_bytes) / 2**20
    except Exception:  # noqa: BLE001 - not every backend / version reports it
        return None


def compile_seconds(fn, *args) -> tuple[float, float | None]:
    """``(s to trace + lower + compile fn, its compiled memory MiB)``."""
    start = time.perf_counter()
    memory = compiled_memory_mib(fn, *args)
    return time.perf_counter() - start, memory


def trace_bytes(alg, model) -> int:
    """Bytes of the learner's own states (its traces), not the model's."""
    own = {id(s) for s in brainstate.graph.states(model).values()}
    leaves = [
        leaf
        for s in brainstate.graph.states(alg).values()
        if id(s) not in own
        for leaf in jax.tree.leaves(s.value)
    ]
    return int(sum(leaf.size * leaf.dtype.itemsize for leaf in leaves))


def sgd_harness(lib, model, step_loss, learner=None):
    """``jit((xs, targets) -> losses)``: per-step gradient then SGD (``learner`` None: BPTT,
    one gradient of the whole sequence, then SGD)."""
    params = learner.param_states if learner is not None else model.states(brainstate.ParamState)

    def sgd(grads):
        for path, g in dict(grads).items():
            params[path].value = jax.tree.map(
                lambda w, d: w - LEARNING_RATE * d, params[path].value, g
            )

    if learner is not None:
        grad_t = brainstate.transform.grad(
            lambda x, t: step_loss(learner(x), t), params, return_value=True
        )

        def body(x, target):
            grads, loss = grad_t(x, target)
            sgd(grads)
            return loss

        @brainstate.transform.jit
        def run(xs, targets):
            learner.reset_state()
            return brainstate.transform.for_loop(body, xs, targets)

        return run

    def loss(xs, targets):
        return step_loss(brainstate.transform.for_loop(model, xs), targets)

    grad = brainstate.transform.grad(loss, params, return_value=True)

    @brainstate.transform.jit
    def run_bptt(xs, targets):
        brainstate.nn.reset_all_states(model, batch_size=xs.shape[1])
        grads, value = grad(xs, targets)
        sgd(grads)
        return value

    return run_bptt


def _squared_error(y, target):
    return jnp.sum((y - target) ** 2)


def make_learner(lib, model, algorithm: str, x0, **options):
    alg = lib.D_RTRL(model, **options) if algorithm == "d_rtrl" else lib.ES_D_RTRL(model, 0.9)
    alg.compile_graph(x0)
    return alg


def dense_row(cell: str, batch: int, n: int, length: int, algorithm: str, bw: float, **opt):
    brainstate.random.seed(0)
    model = models.Net(etp_viz, cell, n)
    brainstate.nn.init_all_states(model, batch_size=batch)
    xs = jax.random.normal(jax.random.PRNGKey(0), (length, batch, models.NUM_IN))
    targets = jax.random.normal(jax.random.PRNGKey(1), (length, batch, models.NUM_OUT))
    row = {"cell": cell, "batch": batch, "n": n, "T": length, "algorithm": algorithm, **opt}
    alg = None if algorithm == "bptt" else make_learner(etp_viz, model, algorithm, xs[0], **opt)
    fn = sgd_harness(etp_viz, model, _squared_error, alg)
    row["compile_s"], row["memory_mib_compiled"] = compile_seconds(fn, xs, targets)
    _, best = best_of(fn, (xs, targets), 5)
    row["ms_per_step"] = 1e3 * best / length
    if alg is not None:
        moved = 2 * trace_bytes(alg, model)
        row |= {"trace_bytes": moved // 2, "floor_ms": 1e3 * moved / bw}
        row["x_floor"] = row["ms_per_step"] / row["floor_ms"] if moved else None
    return row


class SparseNet(brainstate.nn.Module):
    """``SparseLIF(32, n, fan_in) -> Linear(n, 8)`` (etp_viz)."""

    def __init__(self, n: int, event_driven: bool):
        super().__init__()
        self.lif = etp_viz.nn.SparseLIF(
            SPARSE_IN,
            n,
            fan_in=FAN_IN,
            rec_scale=2.0,
            event_driven=event_driven,
            w_init=etp_viz.nn.normal(INPUT_STD),
        )
        self.out = etp_viz.nn.Linear(n, models.NUM_OUT)

    def update(self, x):
        return self.out(self.lif(x))


class BraintraceSparseNet(brainstate.nn.Module):
    """The same model written with braintrace: ``braintrace.sparse_matmul`` on a
    ``brainevent.CSR`` of the same pattern, the same weights, spike function and readout."""

    def __init__(self, etp_net: SparseNet):
        import brainevent
        import braintrace

        super().__init__()
        lif = etp_net.lif
        self.bt, self.alpha, self.threshold = braintrace, lif.alpha, lif.threshold
        self.spike_fn, self.n = lif.spike_fn, lif.n_rec
        rows, cols = lif.pattern.to_rows_cols()
        order = np.lexsort((cols, rows))  # CSR: row (presynaptic) major
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=self.n))])
        weight = np.asarray(lif.W_rec.value["weight"])[order]
        self.csr = brainevent.CSR(
            (jnp.asarray(weight), jnp.asarray(cols[order]), jnp.asarray(indptr)),
            shape=(self.n, self.n),
        )
        self.W_in = brainstate.ParamState(lif.W_in.weight.value["weight"])
        self.W_rec = brainstate.ParamState(jnp.asarray(weight))
        self.W_out = brainstate.ParamState(dict(etp_net.out.weight.value))

    def init_state(self, batch_size=None, **kwargs):
        self.V = brainstate.HiddenState(jnp.zeros((batch_size, self.n)))

    def reset_state(self, batch_size=None, **kwargs):
        self.V.value = jnp.zeros_like(self.V.value)

    def update(self, x):
        bt = self.bt
        v_prev = self.V.value
        z_prev = self.spike_fn(v_prev - self.threshold)
        current = bt.matmul(x, self.W_in.value) + bt.sparse_matmul(
            z_prev, self.W_rec.value, sparse_mat=self.csr
        )
        self.V.value = self.alpha * (v_prev - self.threshold * z_prev) + (1 - self.alpha) * current
        z = self.spike_fn(self.V.value - self.threshold)
        out = self.W_out.value
        return bt.matmul(z, out["weight"], out.get("bias"))


def sparse_row(lib_name: str, n: int, length: int, algorithm: str, event_driven: bool, bw: float):
    brainstate.random.seed(0)
    net = SparseNet(n, event_driven)
    model = net
    lib = etp_viz
    xs = jax.random.normal(jax.random.PRNGKey(0), (length, SPARSE_BATCH, SPARSE_IN))
    rate = sparse_kernels.check_rate(firing_rate(net, xs), n)  # same model for every lib
    if lib_name == "etp_viz-csr":
        model = sparse_kernels.CSRLIFNet(net)
    if lib_name == "braintrace":
        import brainevent
        import braintrace as lib

        if jax.devices()[0].platform == "cpu":  # numba (its CPU default) is not installed
            brainevent.config.set_backend("cpu", "jax_raw")
        model = BraintraceSparseNet(net)
    brainstate.nn.init_all_states(model, batch_size=SPARSE_BATCH)
    targets = jax.random.normal(jax.random.PRNGKey(1), (length, SPARSE_BATCH, models.NUM_OUT))
    row = {"lib": lib_name, "n": n, "fan_in": FAN_IN, "batch": SPARSE_BATCH, "T": length}
    row |= {"algorithm": algorithm, "event_driven": event_driven}
    alg = make_learner(lib, model, algorithm, xs[0])
    fn = sgd_harness(lib, model, _squared_error, alg)
    row["compile_s"], row["memory_mib_compiled"] = compile_seconds(fn, xs, targets)
    row["kernels"] = sparse_kernels.compiled_kernels(fn, xs, targets)
    _, best = best_of(fn, (xs, targets), 3 if n >= 100_000 else 5)
    step_s = best / length
    nnz = n * FAN_IN
    floor_bytes = (8 + 4 * rate) * nnz if event_driven else 12 * nnz
    row |= {
        "ms_per_step": 1e3 * step_s,
        "neuron_steps_per_s": SPARSE_BATCH * n / step_s,
        "firing_rate": rate,
        "floor_ms": 1e3 * floor_bytes / bw,
        **peak_memory(),
    }
    row["x_floor"] = row["ms_per_step"] / row["floor_ms"]
    return row


def firing_rate(net: SparseNet, xs) -> float:
    brainstate.nn.init_all_states(net, batch_size=SPARSE_BATCH)
    run = brainstate.transform.jit(lambda xs: brainstate.transform.for_loop(net.lif, xs))
    rate = float(jnp.mean(run(xs)))
    brainstate.nn.init_all_states(net, batch_size=SPARSE_BATCH)
    return rate


def guarded(rows: list, fn, *args, **kwargs) -> None:
    """Append ``fn(*args)``'s row, or an error row (the sweep goes on)."""
    try:
        rows.append(fn(*args, **kwargs))
        print(json.dumps(rows[-1]), flush=True)
    except Exception as err:  # noqa: BLE001 - recorded
        rows.append({"args": [str(a) for a in args], **kwargs, "error": _error(err)})
        print(rows[-1], flush=True)


def _error(err: Exception) -> str:
    return f"{type(err).__name__}: {str(err)[:400]}"


def bf16_and_plan(config: dict, bw: float) -> dict:
    """(c): a bf16-trace D-RTRL row and the planner, each guarded against a missing API."""
    out: dict = {}
    cell, batch, n = config["dense"][0]
    try:
        out["bf16_dense"] = dense_row(cell, batch, n, config["T"], "d_rtrl", bw)
        out["bf16_dense"] = dense_row(
            cell, batch, n, config["T"], "d_rtrl", bw, trace_dtype=jnp.bfloat16
        )
        out["bf16_dense"]["trace_dtype"] = "bfloat16"
    except TypeError as err:
        out["bf16_dense"] = {"missing": "D_RTRL(model, trace_dtype=...)", "error": _error(err)}
    except Exception as err:  # noqa: BLE001
        out["bf16_dense"] = {"error": _error(err)}
    if not hasattr(etp_viz, "plan"):
        out["plan"] = {"missing": "etp_viz.plan is not in this etp_viz"}
        return out
    out["plan"] = {}
    for n in config["sparse"]:
        try:
            brainstate.random.seed(0)
            net = SparseNet(n, event_driven=True)
            brainstate.nn.init_all_states(net, batch_size=SPARSE_BATCH)
            x = jnp.ones((SPARSE_BATCH, SPARSE_IN))
            plan = etp_viz.plan(net, x, ["d_rtrl", "es_d_rtrl", "bptt"], T=100, batch=8)
            out["plan"][f"sparse_lif_{n}"] = _plain(plan)
        except Exception as err:  # noqa: BLE001
            out["plan"][f"sparse_lif_{n}"] = {"error": _error(err)}
    return out


def _plain(obj):
    """A JSON-safe rendering of a planner result (its ``to_json`` / ``dict`` / ``str``)."""
    for attr in ("to_json", "to_dict", "as_dict"):
        if hasattr(obj, attr):
            return json.loads(json.dumps(getattr(obj, attr)(), default=str))
    return str(obj)


def versions() -> dict:
    out = {"python": sys.version.split()[0], "jax": jax.__version__}
    for name in ("jaxlib", "brainstate", "brainevent", "braintrace", "etp_viz"):
        try:
            out[name] = getattr(__import__(name), "__version__", "?")
        except Exception:  # noqa: BLE001
            out[name] = None
    return out


def braintrace_available() -> bool:
    try:
        import braintrace  # noqa: F401
    except Exception:  # noqa: BLE001
        return False
    return True


def run(args) -> dict:
    device = jax.devices()[0]
    on_gpu = device.platform == "gpu"
    config = sizes(on_gpu, args.quick)
    bw = bandwidth_bytes_per_s(64 * 2**20 if on_gpu else 8 * 2**20)
    result = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "device": {"platform": device.platform, "kind": device.device_kind, "str": str(device)},
        "machine": {"host": platform.node(), "cpu": platform.processor(), "os": platform.system()},
        "versions": versions(),
        "config": {k: v for k, v in config.items()},
        "bandwidth_GB_s": bw / 1e9,
        "note": "" if on_gpu else "No GPU was available: CPU sizes only; GPU rows not measured.",
    }
    dense = []
    if not (args.skip_dense or args.sparse_only):
        for cell, batch, n in config["dense"]:
            for algorithm in ("d_rtrl", "es_d_rtrl", "bptt"):
                guarded(dense, dense_row, cell, batch, n, config["T"], algorithm, bw)
    sparse = []
    with_bt = braintrace_available()
    result["braintrace_in_process"] = with_bt
    for n in config["sparse"]:
        jobs = [("etp_viz", "es_d_rtrl", False), ("etp_viz", "es_d_rtrl", True)]
        if n * FAN_IN * SPARSE_BATCH * 4 <= (4 * 2**30 if on_gpu else 2**28):
            jobs += [("etp_viz", "d_rtrl", False), ("etp_viz", "d_rtrl", True)]
        if with_bt:
            jobs += [("braintrace", "es_d_rtrl", False), ("braintrace", "d_rtrl", False)]
        jobs += [("etp_viz-csr", "es_d_rtrl", False)]
        if n * FAN_IN * SPARSE_BATCH * 4 <= (4 * 2**30 if on_gpu else 2**28):
            jobs += [("etp_viz-csr", "d_rtrl", False)]
        for lib_name, algorithm, event in jobs:
            guarded(sparse, sparse_row, lib_name, n, config["sparse_T"], algorithm, event, bw)
    result |= {"dense": dense, "sparse": sparse}
    if not args.skip_compile:
        sweep = config["sparse"] if on_gpu else [1_000, 10_000, 100_000]
        result["csr_compile"] = sparse_kernels.csr_compile_rows(sweep, FAN_IN, 8, SPARSE_IN)
    if not args.sparse_only:
        result |= bf16_and_plan(config, bw)
    return result


def table(result: dict) -> str:
    """Markdown tables of a result JSON."""
    lines = [
        f"{result['date']} · {result['device']['kind']} · "
        + ", ".join(f"{k} {v}" for k, v in result["versions"].items() if v)
        + f" · axpy bandwidth {result['bandwidth_GB_s']:.1f} GB/s",
        "",
        "| cell | batch | n | algorithm | ms/step | compile s | trace floor ms | × floor |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["dense"]:
        if "error" in r:
            lines.append(f"| {r.get('args')} | error: {r['error'][:80]} |")
            continue
        floor = r.get("floor_ms")
        lines.append(
            f"| {r['cell']} | {r['batch']} | {r['n']} | {r['algorithm']} | "
            f"{r['ms_per_step']:.3g} | {r['compile_s']:.2f} | "
            f"{_num(floor, '.3g')} | "
            f"{_num(r.get('x_floor'), '.1f')} |"
        )
    lines += [
        "",
        "| lib | n | algorithm | event-driven | ms/step | neuron-steps/s | compile s | rate "
        "| floor ms | × floor | compiled MiB | fusions / custom calls / whiles |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["sparse"]:
        if "error" in r:
            lines.append(f"| {r.get('args')} | error: {r['error'][:80]} |")
            continue
        rate = "" if r["firing_rate"] is None else f"{r['firing_rate']:.3f}"
        mem = r.get("memory_mib_compiled")
        lines.append(
            f"| {r['lib']} | {r['n']} | {r['algorithm']} | {r['event_driven']} | "
            f"{r['ms_per_step']:.3g} | {r['neuron_steps_per_s']:.3g} | {r['compile_s']:.2f} | "
            f"{rate} | {r['floor_ms']:.3g} | {r['x_floor']:.1f} | "
            f"{_num(mem, '.0f')} | {_kernels(r.get('kernels'))} |"
        )
    for r in result.get("csr_compile", []):
        lines.append(f"CSR n={r['n']} indices {r['indices']}: HLO {r['hlo_chars']} chars, "
                     f"lower + compile {r['lower_compile_s']:.2f} s")  # fmt: skip
    return "\n".join(lines)


def _kernels(k: dict | None) -> str:
    if not k:
        return ""
    trips = f" (trips {k['while_trip_counts']})" if k["whiles"] else ""
    return f"{k['fusions']} / {k['custom_calls']} / {k['whiles']}{trips}"


def _num(value, spec: str) -> str:
    return "" if value is None else format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smallest sizes")
    parser.add_argument("--skip-dense", action="store_true")
    parser.add_argument("--sparse-only", action="store_true", help="no dense, bf16, planner")
    parser.add_argument("--skip-compile", action="store_true", help="no CSR compile sweep")
    parser.add_argument("--out", default=None, help="JSON path (default bench/results/...)")
    parser.add_argument("--table", default=None, help="print the tables of a result JSON")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return
    try:
        result = run(args)
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        raise
    kind = "gpu" if result["device"]["platform"] == "gpu" else "cpu"
    day = result["date"][:10]
    suffix = "-sparse" if args.sparse_only else ""
    out = Path(args.out) if args.out else HERE / "results" / f"{day}-{kind}{suffix}.json"
    out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(table(result))
    print(f"wrote {out}")
    silent = [r for r in result["sparse"] if "fires at" in r.get("error", "")]
    if silent:  # a row off the firing-rate range is an error of the run, not a number
        raise SystemExit(f"{len(silent)} sparse row(s) outside the firing-rate range: {silent}")


if __name__ == "__main__":
    main()
