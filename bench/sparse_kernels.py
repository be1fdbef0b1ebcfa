"""Helpers of ``bench/gpu.py``'s sparse rows: kernel counts of a compiled step, the user-written
CSR model, the firing-rate guard and the CSR compile-size sweep.

Kernel counts read XLA's optimized HLO text (``jax.jit(f).lower(*args).compile().as_text()``):
in the body of the outermost ``while`` of the entry computation (the loop over time steps;
the entry itself when there is none) they count the ``fusion``, ``custom-call`` and ``while``
instructions, and list each inner while's known trip count (``known_trip_count`` in its
backend config), so a product that runs as ``fan_in`` sequential passes shows up as a while of
trip count ``fan_in``; ``module_while_trip_counts`` lists every while of the module.
"""

from __future__ import annotations

import re
import time

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
from saiunit import sparse as ss

import etp_viz

#: a measured firing rate outside this range is an error, not a benchmark row
RATE_RANGE = (0.02, 0.10)

_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_BODY = re.compile(r"\bwhile\(.*?body=%?([\w.\-]+)")
_TRIP = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')


def hlo_computations(text: str) -> tuple[dict[str, list[str]], str | None]:
    """``({computation name: instruction lines}, entry name)`` of an HLO module's text."""
    comps: dict[str, list[str]] = {}
    entry, current = None, None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header and not line[:1].isspace():
            current = header.group(2)
            comps[current] = []
            entry = current if header.group(1) else entry
        elif line.strip() == "}":
            current = None
        elif current is not None:
            comps[current].append(line)
    return comps, entry


def count_kernels(text: str) -> dict:
    """Fusions, custom calls, while loops (and their trip counts) in the step's loop body."""
    comps, entry = hlo_computations(text)
    body = entry
    for line in comps.get(entry or "", []):
        found = _BODY.search(line)
        if found and found.group(1) in comps:
            body = found.group(1)
            break
    lines = comps.get(body or "", [])
    whiles = [line for line in lines if re.search(r"\bwhile\(", line)]
    trips = [_trip_count(line) for line in whiles]
    everywhere = [line for c in comps.values() for line in c if re.search(r"\bwhile\(", line)]
    read, written = carried_bytes(lines) if body != entry else (None, None)
    return {
        "computation": body,
        "carried_bytes_read": read,
        "carried_bytes_written": written,
        "fusions": sum(bool(re.search(r"\bfusion\(", line)) for line in lines),
        "custom_calls": sum("custom-call(" in line for line in lines),
        "whiles": len(whiles),
        "while_trip_counts": trips,
        "instructions": len(lines),
        "module_while_trip_counts": [_trip_count(line) for line in everywhere],
    }


_ITEMSIZE = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "s16": 2, "u16": 2, "f32": 4,
             "s32": 4, "u32": 4, "f64": 8, "s64": 8, "u64": 8}  # fmt: skip
_ARRAY = re.compile(r"^(?:/\*index=\d+\*/)?(\w+)\[([\d,]*)\]")
_GTE = re.compile(r"^\s*%?([\w.\-]+) = .*get-tuple-element\(%?([\w.\-]+)\), index=(\d+)")


def _top_level(items: str) -> list[str]:
    """The comma-separated items of ``items`` at bracket depth 0."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(items):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            out.append(items[start:i].strip())
            start = i + 1
    return [*out, items[start:].strip()]


def _array_bytes(shape: str) -> int:
    found = _ARRAY.match(shape)
    if not found or found.group(1) not in _ITEMSIZE:
        return 0
    dims = [int(d) for d in found.group(2).split(",") if d]
    return _ITEMSIZE[found.group(1)] * int(np.prod(dims, dtype=np.int64))


def carried_bytes(lines: list[str]) -> tuple[int | None, int | None]:
    """``(bytes read, bytes written)`` per iteration of a while body's loop-carried buffers:
    an element is read when its ``get-tuple-element`` feeds an instruction other than the
    ``ROOT`` tuple, written when the ``ROOT`` tuple does not pass the same element through.
    (A trace that the step overwrites without reading counts once, not twice.)"""
    param = next((ln for ln in lines if re.search(r"\bparameter\(0\)", ln)), None)
    root = next((ln for ln in lines if ln.lstrip().startswith("ROOT")), None)
    if param is None or root is None or " tuple(" not in root:
        return None, None
    name = param.split("=")[0].strip().lstrip("%")
    types = param.split("=", 1)[1].strip()
    sizes = [_array_bytes(t) for t in _top_level(types[1 : types.rindex(")")])]
    gtes = {}
    for line in lines:
        found = _GTE.match(line)
        if found and found.group(2) == name:
            gtes[found.group(1)] = int(found.group(3))
    operands = [
        o.lstrip("%") for o in _top_level(root[root.rindex(" tuple(") + 7 : root.rindex(")")])
    ]
    used = {g for g in gtes for ln in lines if not ln.lstrip().startswith("ROOT")
            and re.search(rf"%{re.escape(g)}\b(?!\s*=)", ln.split("=", 1)[-1])}  # fmt: skip
    read = sum(sizes[i] for g, i in gtes.items() if g in used and i < len(sizes))
    written = sum(size for i, (size, op) in enumerate(zip(sizes, operands)) if gtes.get(op) != i)
    return int(read), int(written)


def _trip_count(line: str) -> int | None:
    found = _TRIP.search(line)
    return int(found.group(1)) if found else None


def compiled_kernels(fn, *args) -> dict:
    """:func:`count_kernels` of ``fn`` (a jitted function) compiled for ``args``."""
    return count_kernels(fn.lower(*args).compile().as_text())


def check_rate(rate: float, n: int) -> float:
    """``rate``, or a ValueError when it is outside :data:`RATE_RANGE` (a silent network's
    benchmark measures nothing)."""
    low, high = RATE_RANGE
    if not low <= rate <= high:
        raise ValueError(
            f"sparse network at n={n} fires at {rate:.4f} per neuron-step, outside "
            f"[{low}, {high}]: rescale the input drive (INPUT_STD) or the threshold."
        )
    return rate


def csr_of(lif) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, indices, order)`` of a SparseLIF's pattern as a CSR (rows presynaptic);
    ``weight[order]`` is its weight vector in CSR order."""
    rows, cols = lif.pattern.to_rows_cols()
    order = np.lexsort((cols, rows))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=lif.n_rec))])
    return indptr.astype(np.int32), cols[order].astype(np.int32), order


class CSRLIFNet(brainstate.nn.Module):
    """A user-written copy of ``SparseLIF -> Linear``: ``etp_viz.sparse_matmul`` on a saiunit
    CSR of the same pattern and weights, its indices kept in a ``brainstate.State`` (operands
    of the primitive, not constants of the program)."""

    def __init__(self, etp_net):
        super().__init__()
        lif = etp_net.lif
        self.n, self.alpha, self.threshold, self.spike_fn = (
            lif.n_rec,
            lif.alpha,
            lif.threshold,
            lif.spike_fn,
        )
        indptr, indices, order = csr_of(lif)
        self.conn = brainstate.State((jnp.asarray(indices), jnp.asarray(indptr)))
        self.W_in = brainstate.ParamState(lif.W_in.weight.value["weight"])
        self.W_rec = brainstate.ParamState(jnp.asarray(lif.W_rec.value["weight"])[order])
        self.out = etp_viz.nn.Linear(self.n, etp_net.out.out_size[0])
        self.out.weight.value = dict(etp_net.out.weight.value)

    def init_state(self, batch_size=None, **kwargs):
        self.V = brainstate.HiddenState(jnp.zeros((batch_size, self.n)))

    def reset_state(self, batch_size=None, **kwargs):
        self.V.value = jnp.zeros_like(self.V.value)

    def spike(self, v):
        return self.spike_fn((v - self.threshold) / self.threshold)

    def update(self, x):
        v_prev = self.V.value
        z_prev = self.spike(v_prev)
        indices, indptr = self.conn.value
        w = self.W_rec.value
        mat = ss.CSR((w, indices, indptr), shape=(self.n, self.n))
        current = etp_viz.matmul(x, self.W_in.value) + etp_viz.sparse_matmul(
            z_prev, w, sparse_mat=mat
        )
        self.V.value = self.alpha * (v_prev - self.threshold * z_prev) + (1 - self.alpha) * current
        return self.out(self.spike(self.V.value))


#: the constant-indices compile row is measured up to this size (above it the lowered text holds
#: gigabytes of index constants: 320 MB of text at 100k, fan-in 100)
MAX_CONSTANT_N = 100_000


def csr_compile_rows(sizes: list[int], fan_in: int, batch: int, n_in: int) -> list[dict]:
    """Per ``n`` and indices as constants (static pattern) or operands (a State): the lowered
    StableHLO size and the seconds to lower + compile one D-RTRL gradient step."""
    rows = []
    for n in sizes:
        for where in ("constant", "operand"):
            if where == "constant" and n > MAX_CONSTANT_N:
                size = f"~{32 * n * fan_in / 1e9:.1f} GB"
                skipped = f"the lowered text would hold {size} of index constants"
                rows.append({"n": n, "fan_in": fan_in, "indices": where, "skipped": skipped})
                continue
            rows.append(_csr_compile_row(n, fan_in, batch, n_in, where))
            print(rows[-1], flush=True)
    return rows


def _csr_compile_row(n: int, fan_in: int, batch: int, n_in: int, where: str) -> dict:
    lif = etp_viz.nn.SparseLIF(n_in, n, fan_in=fan_in)
    indptr, indices, order = csr_of(lif)
    w = brainstate.ParamState(jnp.asarray(lif.W_rec.value["weight"])[order])
    conn = brainstate.State((jnp.asarray(indices), jnp.asarray(indptr)))
    w_in = brainstate.ParamState(jnp.ones((n_in, n)) / n_in)

    class Net(brainstate.nn.Module):
        def init_state(self, batch_size=None, **kwargs):
            self.V = brainstate.HiddenState(jnp.zeros((batch_size, n)))

        def update(self, x):
            idx, ptr = conn.value if where == "operand" else (indices, indptr)
            mat = ss.CSR((w.value, idx, ptr), shape=(n, n))
            rec = etp_viz.sparse_matmul(jax.nn.sigmoid(self.V.value), w.value, sparse_mat=mat)
            self.V.value = 0.9 * self.V.value + etp_viz.matmul(x, w_in.value) + rec
            return self.V.value

    net = Net()
    net.w, net.w_in, net.conn = w, w_in, conn
    brainstate.nn.init_all_states(net, batch_size=batch)
    x = jnp.ones((batch, n_in))
    alg = etp_viz.D_RTRL(net)
    alg.compile_graph(x)
    step = brainstate.transform.jit(
        brainstate.transform.grad(lambda x: jnp.sum(alg(x) ** 2), alg.param_states)
    )
    start = time.perf_counter()
    lowered = step.lower(x)
    text = lowered.as_text()
    lowered.compile()
    seconds = time.perf_counter() - start
    return {"n": n, "fan_in": fan_in, "indices": where, "hlo_chars": len(text),
            "lower_compile_s": seconds}  # fmt: skip
