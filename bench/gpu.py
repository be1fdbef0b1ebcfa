"""Scale benchmark (issue "gpu"): dense cells, the sparse spiking layer, bf16 traces, the planner.

One command, one JSON (device, versions, date) under ``bench/results/``::

    .venv312/bin/python bench/gpu.py             # GPU sizes on a GPU, small sizes on CPU
    .venv312/bin/python bench/gpu.py --quick     # smallest sizes anywhere (~1-3 min on CPU)
    .venv312/bin/python bench/gpu.py --table bench/results/<date>-cpu.json

(a) **Dense cells** ``cell(32, n) -> Linear(n, 8)`` (tanh RNN, GRU, LSTM): per-step gradient +
SGD (the ``online`` harness of ``vs_braintrace_models.py``) for D-RTRL and ES-D-RTRL(0.9), and
BPTT (``grad`` through the T-step loop, then SGD), T = 100, min over 5 calls, divided by T.
**Floor** (every row) = the bytes one step must move, read from the compiled loop body: its
loop-carried buffers (traces, weights) read + written, a buffer overwritten without being read
(a trace whose group has no decay, e.g. a tanh RNN's under D-RTRL) counted once; over the
measured bandwidth (ten donated ``0.5 a + b`` axpys in one program: 3 words per element). A
time below its floor fails the run (the number misses work).

(b) **Sparse LIF** ``etp_viz.nn.SparseLIF(32, n, fan_in=100) -> Linear(n, 8)``, batch 8, sum of
squares loss against targets, SGD: ms/step, neuron-steps/s, compile s (trace + lower +
compile), peak memory (``device.memory_stats()`` where the backend has it, else XLA's
compiled memory analysis), firing rate, floor as in (a). With
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


AXPYS = 10  # per timed program: the dispatch of one call is not counted as memory time


def bandwidth_bytes_per_s(words: int) -> float:
    """Bytes moved per second by donating axpys ``a <- 0.5 a + b`` (read a, read b, write a),
    :data:`AXPYS` of them in one program."""
    a, b = jnp.ones((words,), jnp.float32), jnp.ones((words,), jnp.float32)

    def axpys(a, b):
        return jax.lax.fori_loop(0, AXPYS, lambda _, a: 0.5 * a + b, a)

    run = jax.jit(axpys, donate_argnums=0)
    a = run(a, b).block_until_ready()
    best = float("inf")
    for _ in range(7):
        start = time.perf_counter()
        a = run(a, b).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return AXPYS * 3 * 4 * words / best


def peak_memory() -> dict:
    stats = jax.devices()[0].memory_stats() or {}
    return {"peak_bytes_in_use": stats.get("peak_bytes_in_use")}


def compiled_memory_mib(compiled) -> float | None:
    try:
        stats = compiled.memory_analysis()
        used = stats.argument_size_in_bytes + stats.output_size_in_bytes
        return (used + stats.temp_size_in_bytes - stats.alias_size_in_bytes) / 2**20
    except Exception:  # noqa: BLE001 - not every backend / version reports it
        return None


#: ``--hlo-dir``: where each row's optimized HLO text is written (None: nowhere)
HLO_DIR: list = [None]


def compile_seconds(fn, *args, name: str = "step") -> tuple[float, float | None, dict]:
    """``(s to trace + lower + compile fn, its compiled memory MiB, its loop body's kernels)``
    from one compilation."""
    start = time.perf_counter()
    compiled = fn.lower(*args).compile()
    seconds = time.perf_counter() - start
    if HLO_DIR[0] is not None:
        HLO_DIR[0].mkdir(parents=True, exist_ok=True)
        (HLO_DIR[0] / f"{name}.hlo.txt").write_text(compiled.as_text())
    kernels = sparse_kernels.count_kernels(compiled.as_text())
    return seconds, compiled_memory_mib(compiled), kernels


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


def squared_error(y, target):
    return jnp.sum((y - target) ** 2)


def make_learner(lib, model, algorithm: str, x0, **options):
    alg = lib.D_RTRL(model, **options) if algorithm == "d_rtrl" else lib.ES_D_RTRL(model, 0.9)
    alg.compile_graph(x0)
    return alg


def dense_row(cell: str, batch: int, n: int, length: int, algorithm: str, bw: float,
              lib_name: str = "etp_viz", **opt):  # fmt: skip
    """One dense row of ``lib_name`` (``"etp_viz"`` or ``"braintrace"``, same model, weights
    and data), with the fusions / custom calls of its compiled loop body."""
    lib = etp_viz
    if lib_name == "braintrace":
        import braintrace as lib
    brainstate.random.seed(0)
    model = models.Net(lib, cell, n)
    brainstate.nn.init_all_states(model, batch_size=batch)
    xs = jax.random.normal(jax.random.PRNGKey(0), (length, batch, models.NUM_IN))
    targets = jax.random.normal(jax.random.PRNGKey(1), (length, batch, models.NUM_OUT))
    row = {"lib": lib_name, "cell": cell, "batch": batch, "n": n, "T": length}
    row |= {"algorithm": algorithm, **opt}
    alg = None if algorithm == "bptt" else make_learner(lib, model, algorithm, xs[0], **opt)
    fn = sgd_harness(lib, model, squared_error, alg)
    name = f"{lib_name}-{cell}-b{batch}-n{n}-{algorithm}"
    compiled = compile_seconds(fn, xs, targets, name=name)
    row["compile_s"], row["memory_mib_compiled"], row["kernels"] = compiled
    _, best = best_of(fn, (xs, targets), 5)
    row["ms_per_step"] = 1e3 * best / length
    if alg is None:  # BPTT's loops carry the whole sequence: no per-step floor
        return row
    row["trace_bytes"] = trace_bytes(alg, model)
    return with_floor(row, bw)


#: a step moving at least this much cannot run from a cache (H100/H200 L2: 50-60 MB)
UNCACHED_BYTES = 256 * 2**20


def with_floor(row: dict, bw: float, fallback_bytes: float | None = None) -> dict:
    """``floor_ms``: the bytes one step of the compiled loop must move (its loop-carried
    buffers read + written, from the HLO: traces, weights, optimizer state; a trace written
    without being read counts once) over the measured bandwidth; ``below_floor`` marks a time
    under it when no cache can hold what it moves (>= :data:`UNCACHED_BYTES`): a bug in the
    number, and the run fails."""
    k = row.get("kernels") or {}
    moved = (k.get("carried_bytes_read") or 0) + (k.get("carried_bytes_written") or 0)
    moved = moved or fallback_bytes
    if not moved:
        return row
    row |= {"floor_bytes": int(moved), "floor_ms": 1e3 * moved / bw}
    row["x_floor"] = row["ms_per_step"] / row["floor_ms"]
    row["below_floor"] = bool(row["x_floor"] < 1.0 and moved >= UNCACHED_BYTES)
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
    """One sparse row; ``lib_name`` ``"etp_viz[loop]"`` / ``"etp_viz[gather]"`` pins
    ``FixedFanIn``'s fan-in strategy (``etp_viz.ops.patterns.FAN_IN_STRATEGY``) for the row."""
    strategy = lib_name[len("etp_viz[") : -1] if lib_name.startswith("etp_viz[") else None
    previous = etp_viz.ops.patterns.FAN_IN_STRATEGY
    etp_viz.ops.patterns.FAN_IN_STRATEGY = strategy or previous
    try:
        row = _sparse_row(lib_name, n, length, algorithm, event_driven, bw)
    finally:
        etp_viz.ops.patterns.FAN_IN_STRATEGY = previous
    row["fan_in_strategy"] = strategy or etp_viz.ops.patterns.fan_in_strategy()
    return row


def _sparse_row(lib_name: str, n: int, length: int, algorithm: str, event_driven: bool, bw: float):
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
    fn = sgd_harness(lib, model, squared_error, alg)
    name = f"{lib_name}-n{n}-{algorithm}{'-events' if event_driven else ''}"
    compiled = compile_seconds(fn, xs, targets, name=name)
    row["compile_s"], row["memory_mib_compiled"], row["kernels"] = compiled
    _, best = best_of(fn, (xs, targets), 3 if n >= 100_000 else 5)
    step_s = best / length
    nnz = n * FAN_IN
    row |= {
        "ms_per_step": 1e3 * step_s,
        "neuron_steps_per_s": SPARSE_BATCH * n / step_s,
        "firing_rate": rate,
        **peak_memory(),
    }
    return with_floor(row, bw, fallback_bytes=12 * nnz)


def firing_rate(net: SparseNet, xs) -> float:
    brainstate.nn.init_all_states(net, batch_size=SPARSE_BATCH)
    run = brainstate.transform.jit(lambda xs: brainstate.transform.for_loop(net.lif, xs))
    rate = float(jnp.mean(run(xs)))
    brainstate.nn.init_all_states(net, batch_size=SPARSE_BATCH)
    return rate


#: called with nothing after every row (``run`` sets it to write the result so far, so a run
#: stopped by a time limit still leaves its finished rows on disk)
CHECKPOINT = [lambda: None]


def guarded(rows: list, fn, *args, **kwargs) -> None:
    """Append ``fn(*args)``'s row, or an error row (the sweep goes on)."""
    try:
        rows.append(fn(*args, **kwargs))
        print(json.dumps(rows[-1]), flush=True)
    except Exception as err:  # noqa: BLE001 - recorded
        rows.append({"args": [str(a) for a in args], **kwargs, "error": _error(err)})
        print(rows[-1], flush=True)
    CHECKPOINT[0]()


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
    if args.sizes:
        config["sparse"] = [int(n) for n in args.sizes.split(",")]
    out = output_path(args, result)
    dense: list = []
    sparse: list = []
    result |= {"dense": dense, "sparse": sparse}

    def checkpoint() -> None:
        out.write_text(json.dumps(result, indent=1, default=str) + "\n")

    CHECKPOINT[0] = checkpoint
    if not (args.skip_dense or args.sparse_only):
        libs = ("etp_viz", "braintrace") if braintrace_available() else ("etp_viz",)
        if args.cells:
            config["dense"] = [tuple(int(v) if v.isdigit() else v for v in c.split(":")[:3])
                               for c in args.cells.split(",")]  # fmt: skip
        for cell, batch, n in config["dense"]:
            for algorithm in ("d_rtrl", "es_d_rtrl", "bptt"):
                for lib_name in libs if algorithm != "bptt" else ("etp_viz",):
                    guarded(dense, dense_row, cell, batch, n, config["T"], algorithm, bw,
                            lib_name=lib_name)  # fmt: skip
    with_bt = braintrace_available()
    result["braintrace_in_process"] = with_bt
    for n in [] if args.dense_only else config["sparse"]:
        jobs = [("etp_viz", "es_d_rtrl", False), ("etp_viz", "es_d_rtrl", True)]
        if n <= 10_000:  # the other fan-in strategy, for the record
            other = "loop" if etp_viz.ops.patterns.fan_in_strategy() == "gather" else "gather"
            jobs += [(f"etp_viz[{other}]", "es_d_rtrl", False)]
        if n * FAN_IN * SPARSE_BATCH * 4 <= (4 * 2**30 if on_gpu else 2**28):
            jobs += [("etp_viz", "d_rtrl", False), ("etp_viz", "d_rtrl", True)]
        if with_bt:
            jobs += [("braintrace", "es_d_rtrl", False), ("braintrace", "d_rtrl", False)]
        jobs += [("etp_viz-csr", "es_d_rtrl", False)]
        if n * FAN_IN * SPARSE_BATCH * 4 <= (4 * 2**30 if on_gpu else 2**28):
            jobs += [("etp_viz-csr", "d_rtrl", False)]
        if args.jobs:
            jobs = [(lib, alg, event == "1") for lib, alg, event in
                    (job.split(":") for job in args.jobs.split(","))]  # fmt: skip
        for lib_name, algorithm, event in jobs:
            guarded(sparse, sparse_row, lib_name, n, config["sparse_T"], algorithm, event, bw)
    if not (args.skip_compile or args.dense_only):
        sweep = config["sparse"] if on_gpu else [1_000, 10_000, 100_000]
        result["csr_compile"] = sparse_kernels.csr_compile_rows(sweep, FAN_IN, 8, SPARSE_IN)
        checkpoint()
    if not args.sparse_only:
        result |= bf16_and_plan(config, bw)
    checkpoint()
    return result


def output_path(args, result: dict) -> Path:
    """``--out``, or ``bench/results/<date>-<cpu|gpu>[-sparse|-dense].json``."""
    if args.out:
        return Path(args.out)
    kind = "gpu" if result["device"]["platform"] == "gpu" else "cpu"
    suffix = "-sparse" if args.sparse_only else "-dense" if args.dense_only else ""
    return HERE / "results" / f"{result['date'][:10]}-{kind}{suffix}.json"


def table(result: dict) -> str:
    """Markdown tables of a result JSON."""
    lines = [
        f"{result['date']} · {result['device']['kind']} · "
        + ", ".join(f"{k} {v}" for k, v in result["versions"].items() if v)
        + f" · axpy bandwidth {result['bandwidth_GB_s']:.1f} GB/s",
        "",
        "| lib | cell | batch | n | algorithm | ms/step | compile s | floor ms | × floor "
        "| fusions / custom calls / whiles |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["dense"]:
        if "error" in r:
            lines.append(f"| {r.get('args')} | error: {r['error'][:80]} |")
            continue
        floor = r.get("floor_ms")
        lines.append(
            f"| {r.get('lib', 'etp_viz')} | {r['cell']} | {r['batch']} | {r['n']} | "
            f"{r['algorithm']} | {r['ms_per_step']:.3g} | {r['compile_s']:.2f} | "
            f"{_num(floor, '.3g')} | {_num(r.get('x_floor'), '.1f')} | "
            f"{_kernels(r.get('kernels'))} |"
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
        if "skipped" in r:
            lines.append(f"CSR n={r['n']} indices {r['indices']}: skipped ({r['skipped']})")
            continue
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
    parser.add_argument("--dense-only", action="store_true", help="dense cells, bf16, planner")
    parser.add_argument("--sizes", default=None, help="sparse sizes, e.g. 10000,1000000")
    parser.add_argument(
        "--jobs",
        default=None,
        help="sparse rows lib:algorithm:event, e.g. "
        "etp_viz[loop]:es_d_rtrl:1,braintrace:d_rtrl:0 (default: all)",
    )
    parser.add_argument(
        "--cells",
        default=None,
        help="dense configs cell:batch:n[:lib], e.g. rnn:128:1024 (default: all, both libraries)",
    )
    parser.add_argument("--skip-compile", action="store_true", help="no CSR compile sweep")
    parser.add_argument("--hlo-dir", default=None, help="write each row's optimized HLO here")
    parser.add_argument("--out", default=None, help="JSON path (default bench/results/...)")
    parser.add_argument("--table", default=None, help="print the tables of a result JSON")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return
    HLO_DIR[0] = Path(args.hlo_dir) if args.hlo_dir else None
    try:
        result = run(args)
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        raise
    out = output_path(args, result)
    print(table(result))
    print(f"wrote {out}")
    silent = [r for r in result["sparse"] if "fires at" in r.get("error", "")]
    if silent:  # a row off the firing-rate range is an error of the run, not a number
        raise SystemExit(f"{len(silent)} sparse row(s) outside the firing-rate range: {silent}")
    below = [r for r in result["dense"] + result["sparse"] if r.get("below_floor")]
    if below:  # faster than the bytes it must move: the timing misses work
        raise SystemExit(f"{len(below)} row(s) below their bandwidth floor: {below}")


if __name__ == "__main__":
    main()
