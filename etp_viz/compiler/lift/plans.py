"""Which plain ops lift into which ETP primitive, and why the others do not.

One forward pass flags every Var of the flat step jaxpr: ``PARAM`` (computed from a
``ParamState`` leaf), ``RUNTIME`` (from the step's input or a non-parameter state) and
``MARKED`` (downstream of an ETP equation). A *weight operand* is a Var flagged exactly
``PARAM``: computed only from parameters and constants (any chain: a transpose, a mask, a
``softplus``; the relation pass pulls the gradient back through it, as for
``etp_viz.matmul(x, fn(W))``). An op lifts when one operand is a weight operand and another
is ``RUNTIME``:

* ``dot_general`` -> ``etp_mv`` / ``etp_mm`` (:func:`etp_viz.matmul`: a 2-D weight, one
  contracted axis, the input's last axis, no batch axes; ``W @ v`` of a 1-D ``v`` too), a
  bias added right after (``x @ W + b``, ``b`` a parameter vector along the output axis) fused
  in; any other ``dot_general`` -> ``etp_einsum`` (:func:`etp_viz.einsum`, its letters read
  off the dimension numbers);
* ``conv_general_dilated`` with a parameter kernel -> ``etp_conv`` (:func:`etp_viz.conv`),
  with a bias added right after fused in the same way;
* an element-wise ``mul`` / ``add`` / ``sub`` / ``div`` / ``max`` / ``min`` / ``pow`` of a
  weight operand and a runtime value -> the weight operand goes through the ``etp_elemwise``
  marker (:func:`etp_viz.element_wise`) first, placed before any trailing broadcast (the
  marker sits on the parameter's own shape, as ``element_wise(b)`` would).

Everything else that combines a weight operand with a runtime value is a :class:`Refusal`
with the reason and the fix (a ``gather`` is an embedding lookup, ...).
"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from etp_viz import _compat

from .._jaxpr import build_jaxpr, eval_jaxpr

__all__ = [
    "ELEMENTWISE",
    "MARKED",
    "PARAM",
    "Plan",
    "Refusal",
    "RUNTIME",
    "find_plans",
    "flag_vars",
]

PARAM, RUNTIME, MARKED = 1, 2, 4
#: ops that only move or replicate a value: a marker is placed before a trailing chain of them
SHAPE_ONLY = frozenset({"broadcast_in_dim", "reshape", "squeeze"})
#: element-wise binary ops whose parameter operand is marked, with the symbol the text uses
ELEMENTWISE = {
    "mul": "*",
    "add": "+",
    "add_any": "+",
    "sub": "-",
    "div": "/",
    "max": "max",
    "min": "min",
    "pow": "**",
}
_ELEMWISE_NAMES = ", ".join(sorted(set(ELEMENTWISE) - {"add_any"}))


class Plan(NamedTuple):
    """One rewrite: the equations ``drop`` go, and ``fn`` traced on ``args`` (its result bound
    to ``outs``) goes where equation ``at`` was. An ``elemwise`` plan keeps equation ``at``
    and feeds its invar ``operand`` from the marker (then ``chain`` re-applied)."""

    kind: str
    at: int
    drop: tuple
    fn: Callable[..., Any]
    args: tuple
    outs: tuple
    source: str
    weight: Any
    operand: int = -1
    chain: tuple = ()
    #: equations that may be left without a use (a bias's broadcast, a marked value's chain)
    maybe_dead: tuple = ()


class Refusal(NamedTuple):
    """An op that reads a weight operand and a runtime value but does not lift."""

    eqn: int
    source: str
    reason: str
    weight: Any


def flag_vars(jaxpr: Any, param_invars: Any, runtime_invars: Any) -> dict:
    """``{Var: PARAM | RUNTIME | MARKED bits}`` in one forward pass."""
    from etp_viz.ops import is_etp_primitive

    flags = {v: PARAM for v in param_invars}
    flags.update({v: RUNTIME for v in runtime_invars})
    for eqn in jaxpr.eqns:
        bits = MARKED if is_etp_primitive(eqn.primitive) else 0
        for atom in eqn.invars:
            if _compat.is_var(atom):
                bits |= flags.get(atom, 0)
        for out in eqn.outvars:
            flags[out] = bits
    return flags


class _Context:
    def __init__(self, jaxpr: Any, flags: dict, names: Callable[[Any], str]) -> None:
        self.eqns = jaxpr.eqns
        self.flags = flags
        self.names = names
        self.producer: dict = {}
        self.consumers: dict = {}
        for index, eqn in enumerate(jaxpr.eqns):
            for out in eqn.outvars:
                self.producer[out] = index
            for atom in dict.fromkeys(a for a in eqn.invars if _compat.is_var(a)):
                self.consumers.setdefault(atom, []).append(index)
        self.results = {v for v in jaxpr.outvars if _compat.is_var(v)}
        self.claimed: set = set()

    def weight(self, atom: Any) -> bool:
        return _compat.is_var(atom) and self.flags.get(atom, 0) == PARAM

    def runtime(self, atom: Any) -> bool:
        return _compat.is_var(atom) and bool(self.flags.get(atom, 0) & RUNTIME)

    def strip(self, var: Any) -> tuple[Any, tuple]:
        """``(v0, chain)``: ``var`` is ``v0`` through the shape-only equations ``chain``."""
        chain: list = []
        while True:
            index = self.producer.get(var)
            if index is None or self.eqns[index].primitive.name not in SHAPE_ONLY:
                return var, tuple(reversed(chain))
            chain.append(index)
            var = self.eqns[index].invars[0]

    def text(self, var: Any) -> str:
        return self.names(var)


def find_plans(jaxpr: Any, flags: dict, names: Callable[[Any], str]) -> tuple[list, list]:
    """``(plans, refusals)`` for the flat step jaxpr (module docstring)."""
    from etp_viz.ops import is_etp_primitive

    ctx = _Context(jaxpr, flags, names)
    plans: list = []
    refusals: list = []
    for index, eqn in enumerate(jaxpr.eqns):
        if index in ctx.claimed or is_etp_primitive(eqn.primitive):
            continue
        weights = [k for k, a in enumerate(eqn.invars) if ctx.weight(a)]
        if not weights or not any(ctx.runtime(a) for a in eqn.invars):
            continue
        name = eqn.primitive.name
        found: list[Plan | Refusal]
        if name == "dot_general":
            found = [_dense(ctx, index, weights[0])]
        elif name == "conv_general_dilated":
            found = [_conv(ctx, index, weights[0])]
        elif name in ELEMENTWISE:
            found = [_marker(ctx, index, k) for k in weights]
        elif name == "csr_matvec" and weights == [0]:
            found = [_csr(ctx, index)]
        elif _lookup_ids(ctx, eqn, weights[0]) is not None:
            found = [_lookup(ctx, index, weights[0])]
        else:
            found = [_refuse_other(ctx, index, weights[0])]
        for item in found:
            if isinstance(item, Plan):
                plans.append(item)
            else:
                refusals.append(item)
    return plans, refusals


# -- saiunit's CSR product (brainstate.nn.SparseLinear) ----------------------------------------


def _csr(ctx: _Context, index: int) -> Plan | Refusal:
    """``csr_matvec(data, indices, indptr, x)`` -> :func:`etp_viz.sparse_matmul` on the same
    pattern: ``x @ M`` (``transpose=True``) as a CSR of ``M``, ``M @ x`` as the CSC of ``Mᵀ``
    (the same three arrays). The indices stay operands (``OperandPattern``)."""
    eqn = ctx.eqns[index]
    data, indices, indptr, x = eqn.invars
    out = eqn.outvars[0]
    source = f"csr_matvec(x, {ctx.text(data)})"
    problem = _dtype_problem(x, data, out)
    if problem or len(x.aval.shape) != 1:
        why = problem or "a batched CSR product (csr_matmat) has no lifting rule yet"
        return Refusal(index, source, why, data)
    rows, cols = eqn.params["shape"]
    transpose = bool(eqn.params.get("transpose", False))
    dtype = out.aval.dtype

    def lifted_csr(data: Any, indices: Any, indptr: Any, x: Any) -> Any:
        from saiunit import sparse

        from etp_viz.ops import sparse_matmul

        triple = (_cast(data, dtype), indices, indptr)
        pattern = (
            sparse.CSR(triple, shape=(rows, cols))
            if transpose
            else sparse.CSC(triple, shape=(cols, rows))
        )
        return sparse_matmul(_cast(x, dtype), triple[0], sparse_mat=pattern)

    return Plan(
        "sparse", index, (index,), lifted_csr, (data, indices, indptr, x), (out,), source, data
    )


# -- a row lookup (brainstate.nn.Embedding, jnp.take, W[ids]) ---------------------------------


def _lookup_ids(ctx: _Context, eqn: Any, w_side: int) -> tuple | None:
    """``(ids operand, form)`` when ``eqn`` reads a 2-D floating weight and integer runtime ids
    and returns one row per id: ``"ids"`` (``(*P, D)`` for ids ``P``), ``"gather"`` (a
    gather's index array, the ids with a trailing axis of 1) or ``"row"`` (``W[i]`` of a scalar
    ``i``: a ``dynamic_slice`` of one whole row, ``(1, D)``; a full-width slice starts at
    column 0 whatever its column operand)."""
    table = eqn.invars[w_side]
    if len(eqn.outvars) != 1 or w_side >= len(eqn.invars) or len(table.aval.shape) != 2:
        return None
    out = eqn.outvars[0].aval
    rows, width = table.aval.shape
    if eqn.primitive.name == "dynamic_slice" and w_side == 0 and len(eqn.invars) == 3:
        ids = eqn.invars[1]
        whole_row = tuple(eqn.params["slice_sizes"]) == (1, width) == tuple(out.shape)
        form = "row" if whole_row and not ids.aval.shape else None
    elif len(eqn.invars) == 2:
        ids = eqn.invars[1 - w_side]
        shape = tuple(ids.aval.shape)
        form = None
        if tuple(out.shape) == (*shape, width):
            form = "ids"
        elif shape and shape[-1] == 1 and tuple(out.shape) == (*shape[:-1], width):
            form = "gather"
    else:
        return None
    if form is None or not ctx.runtime(ids) or not np.issubdtype(ids.aval.dtype, np.integer):
        return None
    return (ids, form) if np.issubdtype(out.dtype, np.inexact) else None


def _lookup(ctx: _Context, index: int, w_side: int) -> Plan | Refusal:
    """An op that returns ``W[ids]`` -> :func:`etp_viz.embedding`, once a probe on a known
    table and every id in range shows that it does (a ``gather``, a ``dynamic_slice`` of a
    row, brainstate's ``custom_vjp`` lookup). Out-of-range ids are not probed: the plain op
    clamps or fills them, the ETP op gives a zero row."""
    eqn = ctx.eqns[index]
    table = eqn.invars[w_side]
    found = _lookup_ids(ctx, eqn, w_side)
    assert found is not None  # find_plans asked _lookup_ids first
    ids, form = found
    source = f"{ctx.text(table)}[ids]"
    rows, width = table.aval.shape
    dtype = eqn.outvars[0].aval.dtype
    probe_table = np.arange(rows * width, dtype=dtype).reshape(rows, width)
    size = int(np.prod(ids.aval.shape))
    probe_ids = (np.arange(size) % rows).reshape(ids.aval.shape).astype(ids.aval.dtype)
    args = [probe_table, probe_ids] if w_side == 0 else [probe_ids, probe_table]
    if form == "row":
        args.append(np.zeros((), eqn.invars[2].aval.dtype))
    try:
        alone = build_jaxpr([], list(eqn.invars), list(eqn.outvars), [eqn])
        got = np.asarray(eval_jaxpr(alone, [], *args)[0])
    except Exception as error:  # noqa: BLE001 - a primitive that cannot run alone
        why = f"`{eqn.primitive.name}` could not be probed as a row lookup ({error})"
        return Refusal(index, source, why, table)
    want = probe_table[_lookup_rows(probe_ids, form)]
    if got.shape != want.shape or not np.array_equal(got, want):
        why = _OTHER_FIXES.get(eqn.primitive.name, "it reads the weight but is not a row lookup")
        return Refusal(index, source, why, table)

    # ``W[i]`` reads its row as (1, D) and squeezes it: the lookup of the scalar id is the row
    after = ctx.consumers.get(eqn.outvars[0], [])
    squeeze = (
        form == "row"
        and len(after) == 1
        and ctx.eqns[after[0]].primitive.name == "squeeze"
        and tuple(ctx.eqns[after[0]].params["dimensions"]) == (0,)
        and eqn.outvars[0] not in ctx.results
    )
    if squeeze:
        form = "scalar"
        ctx.claimed.add(after[0])

    def lifted_lookup(*operands: Any) -> Any:
        from etp_viz.ops import embedding

        ids_value = _lookup_rows(operands[1 if form in ("row", "scalar") else 1 - w_side], form)
        return embedding(ids_value, _cast(operands[w_side], dtype))

    outs = (ctx.eqns[after[0]].outvars[0],) if squeeze else (eqn.outvars[0],)
    drop = (index, after[0]) if squeeze else (index,)
    at = after[0] if squeeze else index
    return Plan("lookup", at, drop, lifted_lookup, tuple(eqn.invars), outs, source, table)


def _lookup_rows(ids: Any, form: str) -> Any:
    """The row ids of a lookup's id operand (``form``: see :func:`_lookup_ids`)."""
    if form == "gather":
        return ids[..., 0]
    return ids[None] if form == "row" else ids  # "ids", "scalar": as they are


# -- dot_general ------------------------------------------------------------------------------


def _dense(ctx: _Context, index: int, w_side: int) -> Plan | Refusal:
    eqn = ctx.eqns[index]
    w, x = eqn.invars[w_side], eqn.invars[1 - w_side]
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    wc, xc = (rc, lc) if w_side else (lc, rc)
    source = f"x @ {ctx.text(w)}" if w_side else f"{ctx.text(w)} @ x"
    out = eqn.outvars[0]
    problem = _dtype_problem(x, w, out)
    if problem:
        return Refusal(index, source, problem, w)
    x_nd, w_nd = len(x.aval.shape), len(w.aval.shape)
    plain = not lb and w_nd == 2 and len(wc) == 1
    plain = plain and (tuple(xc) == (x_nd - 1,) if w_side else x_nd == 1)
    if not plain:
        return _einsum_plan(ctx, index, w_side, source)
    transpose = tuple(wc) == (1,)
    flipped = ctx.producer.get(w)
    undo: tuple = ()
    if transpose and flipped is not None and ctx.eqns[flipped].primitive.name == "transpose":
        w, transpose, undo = ctx.eqns[flipped].invars[0], False, (flipped,)  # `h @ V.T.T`
    fn = _dense_fn(transpose, out.aval.dtype)
    fused = _fused_bias(ctx, index, axis=len(out.aval.shape) - 1)
    if fused is None:
        return Plan("dense", index, (index,), fn, (x, w), (out,), source, w, maybe_dead=undo)
    add, bias, chain = fused
    ctx.claimed.add(add)
    source = f"{source} + {ctx.text(bias)}"
    outs = (ctx.eqns[add].outvars[0],)
    return Plan(
        "dense", add, (index, add), fn, (x, w, bias), outs, source, w, maybe_dead=chain + undo
    )  # fmt: skip


def _dense_fn(transpose: bool, dtype: Any) -> Callable[..., Any]:
    def lifted_matmul(x: Any, w: Any, *bias: Any) -> Any:
        from etp_viz.ops import matmul

        w = _cast(w.T if transpose else w, dtype)
        return matmul(_cast(x, dtype), w, bias[0] if bias else None)

    return lifted_matmul


def _einsum_plan(ctx: _Context, index: int, w_side: int, source: str) -> Plan | Refusal:
    """Any other ``dot_general`` (batch axes, several contracted axes, a 3-D weight, ``W @ X``
    of a matrix) as ``etp_viz.einsum`` with its letters read off the dimension numbers."""
    eqn = ctx.eqns[index]
    w, x = eqn.invars[w_side], eqn.invars[1 - w_side]
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = eqn.invars
    letters = iter(string.ascii_letters)
    lhs_l = [next(letters) for _ in lhs.aval.shape]
    rhs_l = [next(letters) for _ in rhs.aval.shape]
    for a, b in [*zip(lc, rc), *zip(lb, rb)]:
        rhs_l[b] = lhs_l[a]
    batch = [lhs_l[a] for a in lb]
    free_l = [c for i, c in enumerate(lhs_l) if i not in lc and i not in lb]
    free_r = [c for i, c in enumerate(rhs_l) if i not in rc and i not in rb]
    out = "".join(batch + free_l + free_r)
    x_l, w_l = ("".join(lhs_l), "".join(rhs_l))[:: 1 if w_side else -1]
    spec = f"{x_l},{w_l}->{out}"
    dtype = eqn.outvars[0].aval.dtype
    if len(set(w_l)) != len(w_l) or len(set(x_l)) != len(x_l):
        return Refusal(index, source, "an operand repeats an axis (a diagonal)", w)

    def lifted_einsum(xv: Any, wv: Any) -> Any:
        from etp_viz.ops import einsum

        return einsum(spec, _cast(xv, dtype), _cast(wv, dtype))

    source = f"einsum('{spec}', x, {ctx.text(w)})"
    return Plan("einsum", index, (index,), lifted_einsum, (x, w), (eqn.outvars[0],), source, w)


def _dtype_problem(x: Any, w: Any, out: Any) -> str:
    """Why the operands cannot be cast to the result's dtype ('' when they can: a lifted op
    computes in the result's dtype, as the plain op's ``preferred_element_type`` did)."""
    dtypes = (x.aval.dtype, w.aval.dtype, out.aval.dtype)
    if not all(jnp.issubdtype(d, jnp.floating) for d in dtypes):
        return (
            f"its input, weight and result have dtypes {dtypes[0]}, {dtypes[1]} and "
            f"{dtypes[2]}; a lifted op needs floating (real) values"
        )
    return ""


def _cast(value: Any, dtype: Any) -> Any:
    return value if value.dtype == dtype else value.astype(dtype)


def _fused_bias(ctx: _Context, index: int, axis: int) -> tuple | None:
    """``(add index, bias vector, its broadcast chain)`` when the op's only use is ``y + b``
    with ``b`` a parameter vector (``(O,)``) broadcast along the output axis ``axis``."""
    out = ctx.eqns[index].outvars[0]
    uses = ctx.consumers.get(out, [])
    if len(uses) != 1 or out in ctx.results:
        return None
    add = ctx.eqns[uses[0]]
    if add.primitive.name != "add" or len(add.invars) != 2 or add.invars[0] is add.invars[1]:
        return None
    other = add.invars[1] if add.invars[0] is out else add.invars[0]
    if not ctx.weight(other) or add.outvars[0].aval.shape != out.aval.shape:
        return None
    bias, chain = ctx.strip(other)
    size = out.aval.shape[axis]
    if bias.aval.shape != (size,) or bias.aval.dtype != out.aval.dtype:
        return None
    if not _broadcasts_along(ctx, chain, size, out.aval.shape, axis):
        return None
    return uses[0], bias, chain


def _broadcasts_along(ctx: _Context, chain: tuple, size: int, shape: tuple, axis: int) -> bool:
    """Whether the shape-only ``chain`` applied to a ``(size,)`` vector and broadcast to
    ``shape`` puts the vector along ``axis`` (checked on ``arange``, concretely)."""
    value: Any = np.arange(size, dtype=np.float32)
    try:
        with jax.ensure_compile_time_eval():
            for index in chain:
                eqn = ctx.eqns[index]
                subfuns, params = _compat.eqn_bind_params(eqn)
                value = eqn.primitive.bind(*subfuns, jnp.asarray(value), **params)
            got = np.broadcast_to(np.asarray(value), shape)
    except Exception:  # noqa: BLE001 - any chain we cannot replay is not a plain bias
        return False
    view = [1] * len(shape)
    view[axis] = size
    want = np.broadcast_to(np.arange(size, dtype=np.float32).reshape(view), shape)
    return bool(np.array_equal(got, want))


# -- conv -------------------------------------------------------------------------------------

_CONV_ARGS = {
    "window_strides": "strides",
    "padding": "padding",
    "lhs_dilation": "lhs_dilation",
    "rhs_dilation": "rhs_dilation",
    "feature_group_count": "feature_group_count",
    "batch_group_count": "batch_group_count",
    "dimension_numbers": "dimension_numbers",
}


def _conv(ctx: _Context, index: int, w_side: int) -> Plan | Refusal:
    eqn = ctx.eqns[index]
    x, kernel = eqn.invars
    source = f"conv(x, {ctx.text(eqn.invars[w_side])})"
    if w_side != 1:
        reason = (
            "the parameter is the convolution's input and the kernel is computed from the "
            "step's input or state; only a parameter kernel lifts"
        )
        return Refusal(index, source, reason, eqn.invars[w_side])
    out = eqn.outvars[0]
    problem = _dtype_problem(x, kernel, out)
    if problem:
        return Refusal(index, source, problem, kernel)
    options = {name: eqn.params[key] for key, name in _CONV_ARGS.items()}
    axis = eqn.params["dimension_numbers"].out_spec[1]
    fused = _fused_bias(ctx, index, axis=axis)

    def lifted_conv(xv: Any, kv: Any, *bias: Any) -> Any:
        from etp_viz.ops import conv

        xv, kv = _cast(xv, out.aval.dtype), _cast(kv, out.aval.dtype)
        return conv(xv, kv, bias[0] if bias else None, **options)

    if fused is None:
        return Plan("conv", index, (index,), lifted_conv, (x, kernel), (out,), source, kernel)
    add, bias, chain = fused
    ctx.claimed.add(add)
    source = f"{source} + {ctx.text(bias)}"
    outs = (ctx.eqns[add].outvars[0],)
    return Plan(
        "conv", add, (index, add), lifted_conv, (x, kernel, bias), outs, source, kernel,
        maybe_dead=chain,
    )  # fmt: skip


# -- element-wise -------------------------------------------------------------------------------


def _marker(ctx: _Context, index: int, operand: int) -> Plan:
    eqn = ctx.eqns[index]
    var, chain = ctx.strip(eqn.invars[operand])
    symbol = ELEMENTWISE[eqn.primitive.name]
    terms = [ctx.text(var) if k == operand else "x" for k in range(len(eqn.invars))]
    source = f" {symbol} ".join(terms) if len(symbol) <= 2 else f"{symbol}({', '.join(terms)})"

    def lifted_marker(wv: Any) -> Any:
        from etp_viz.ops import element_wise

        return element_wise(wv)

    return Plan(
        "elemwise", index, (), lifted_marker, (var,), (), source, var,
        operand=operand, chain=chain, maybe_dead=chain,
    )  # fmt: skip


# -- the rest -----------------------------------------------------------------------------------

_OTHER_FIXES = {
    "gather": "a lookup `W[ids]` is an embedding: use etp_viz.embedding(ids, W)",
    "dynamic_slice": "a row lookup is an embedding: use etp_viz.embedding(ids, W)",
    "select_n": "a weight chosen by a runtime condition is not a fixed weight operand",
    "concatenate": "a weight concatenated with runtime values is not a fixed weight operand",
    "scan": "ops inside a loop that is not unrolled are not lifted (a loop is unrolled when its "
    "trip count is static and it touches a state or an ETP op); call the model once per step "
    "instead of looping inside it",
    "while": "ops inside a loop that is not unrolled are not lifted (a loop is unrolled when its "
    "trip count is static and it touches a state or an ETP op); call the model once per step "
    "instead of looping inside it",
}


def _refuse_other(ctx: _Context, index: int, operand: int) -> Refusal:
    eqn = ctx.eqns[index]
    name = eqn.primitive.name
    weight = eqn.invars[operand]
    why = _OTHER_FIXES.get(
        name,
        f"`{name}` has no lifting rule (lifting covers dot_general, conv_general_dilated and "
        f"the element-wise {_ELEMWISE_NAMES})",
    )
    return Refusal(index, f"{name}(x, {ctx.text(weight)})", why, weight)
