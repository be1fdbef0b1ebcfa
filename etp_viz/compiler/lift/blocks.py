"""Fused gates: a weight op whose output is cut into blocks becomes one ETP equation per block.

brainstate's own cells compute several gates with one weight: ``GRUCell``'s ``Wrz`` gives
``r, z = split(sigmoid(xh @ Wrz))``, ``LSTMCell``'s ``W`` gives ``i, g, f, o = split(xh @ W)``.
The product's output (``4n`` columns) does not broadcast with the hidden state (``n``), so
as one relation it would meet no hidden state at all. Each block does, element-wise: the
``f`` block meets ``c`` through ``sigmoid(f + 1) * c``.

This pass finds, in the flat step jaxpr, every dense ETP equation (``etp_mv`` / ``etp_mm``)
whose output reaches, through a chain of element-wise ops with one use each, a ``split`` or
a set of disjoint ``slice`` s of its last axis, and rewrites it into one ETP equation per block
reading a column slice of the same weight (and bias), the element-wise chain repeated per
block. Values and derivatives are unchanged; the relation pass then sees one relation per
block, each with its own trace, and every weight leaf's gradient is pulled back through its
column slices (summed into the one leaf). Each block is a :class:`WeightBlock` (which
columns, the name the user's code gives it: ``i, g, f, o`` read off the assignment that
splits it), listed in ``graph.module_info.blocks``.
"""

from __future__ import annotations

import ast
import linecache
from typing import Any, NamedTuple

import jax

from etp_viz import _compat

from .._jaxpr import CALL_PRIMITIVE_NAMES, CUSTOM_CALL_PRIMITIVE_NAMES, InlinedJaxpr
from .._positions import ELEMENTWISE_PRIMITIVE_NAMES, is_position_preserving
from .plans import Plan
from .rewrite import _Splicer

__all__ = ["WeightBlock", "split_fused_gates"]

#: dense ETP primitives whose weight's last axis is the output's last axis (bias: its only axis)
_DENSE = frozenset({"etp_mv", "etp_mm"})
_CALLS = CALL_PRIMITIVE_NAMES | CUSTOM_CALL_PRIMITIVE_NAMES


class WeightBlock(NamedTuple):
    """One block of a fused weight op: the columns ``start:stop`` of its output.

    Attributes
    ----------
    eqn_index : int
        The block's ETP equation in ``graph.module_info.jaxpr``.
    weight_path : tuple
        The ``ParamState`` the columns belong to.
    start, stop : int
        Columns of the weight (and of the op's output) this block computes.
    position, of : int
        Which block of how many (in column order).
    label : str
        The name the user's code gives the block (``"z"``), or ``"block k"``.
    source : str
        ``file:line`` of the split, "" when unknown.
    """

    eqn_index: int
    weight_path: tuple
    start: int
    stop: int
    position: int
    of: int
    label: str
    source: str = ""

    @property
    def columns(self) -> str:
        """``"columns 8-15"``: the words a reason or the inspector uses."""
        return f"columns {self.start}-{self.stop - 1}"

    def describe(self) -> str:
        """``"columns 8-15 (z)"``."""
        named = self.label if not self.label.startswith("block ") else ""
        return f"{self.columns} ({named})" if named else self.columns

    def to_json(self) -> dict:
        return {
            "eqn_index": self.eqn_index,
            "weight_path": ".".join(map(str, self.weight_path)),
            "start": self.start,
            "stop": self.stop,
            "position": self.position,
            "of": self.of,
            "label": self.label,
            "source": self.source,
        }


class _Fused(NamedTuple):
    etp: int  # the dense ETP equation
    chain: tuple  # element-wise equations between its output and the cut
    cuts: tuple  # the split equation, or the slice equations (column order)
    ranges: tuple  # ((start, stop), ...) per block, column order
    outs: tuple  # the Var each block's value is bound to
    others: tuple  # Vars the chain reads besides the fused value (sliced or passed whole)


def split_fused_gates(flat: InlinedJaxpr, weight_path_of: dict) -> tuple[InlinedJaxpr, tuple, dict]:
    """Rewrite every fused weight op of ``flat`` into one ETP equation per block.

    Parameters
    ----------
    flat : InlinedJaxpr
        The flat step (after lifting).
    weight_path_of : dict
        ``{parameter leaf invar: ParamState path}``.

    Returns
    -------
    (InlinedJaxpr, tuple of WeightBlock, dict)
        The rewritten step, its blocks, and ``{old equation index: new index}`` for the
        equations kept (a fused op's old index maps to its first block).

    Examples
    --------
    >>> flat, blocks, moved = split_fused_gates(flat, weight_paths)  # doctest: +SKIP
    >>> [b.label for b in blocks]  # doctest: +SKIP
    ['i', 'g', 'f', 'o']
    """
    found = _find(flat.jaxpr)
    if not found:
        return flat, (), {i: i for i in range(len(flat.jaxpr.eqns))}
    eqns = flat.jaxpr.eqns
    splicer = _Splicer(flat)
    plans, kept = [], []
    for fused in found:
        etp = eqns[fused.etp]
        plan = Plan(
            kind="blocks",
            at=max(fused.cuts),
            drop=(fused.etp, *fused.chain, *fused.cuts),
            fn=_block_fn(etp, [eqns[i] for i in fused.chain], fused),
            args=(*etp.invars, *fused.others),
            outs=fused.outs,
            source="",
            weight=etp.invars[1],
        )
        if not splicer.prepare(plan):
            plans.append(plan)
            kept.append(fused)
    if not plans:
        return flat, (), {i: i for i in range(len(eqns))}
    new_flat, _ = splicer.emit(plans)
    moved = dict(splicer.new_index)
    blocks = []
    for plan, fused in zip(plans, kept):
        rows = splicer.etp_rows.get(id(plan), [])
        moved[fused.etp] = rows[0]
        path = _weight_path(eqns, fused.etp, weight_path_of)
        labels, source = _labels(eqns, fused)
        for k, ((start, stop), row) in enumerate(zip(fused.ranges, rows)):
            blocks.append(
                WeightBlock(row, path, start, stop, k, len(fused.ranges), labels[k], source)
            )
    return new_flat, tuple(blocks), moved


def _find(jaxpr: Any) -> list:
    from etp_viz.ops import is_etp_primitive

    consumers: dict = {}
    for index, eqn in enumerate(jaxpr.eqns):
        for atom in dict.fromkeys(a for a in eqn.invars if _compat.is_var(a)):
            consumers.setdefault(atom, []).append(index)
    results = {v for v in jaxpr.outvars if _compat.is_var(v)}
    found = []
    for index, eqn in enumerate(jaxpr.eqns):
        if not (is_etp_primitive(eqn.primitive) and eqn.primitive.name in _DENSE):
            continue
        fused = _follow(jaxpr.eqns, index, consumers, results)
        if fused is not None:
            found.append(fused)
    return found


def _follow(eqns: list, index: int, consumers: dict, results: set) -> _Fused | None:
    """The element-wise chain from equation ``index``'s output to a cut of its last axis."""
    value = eqns[index].outvars[0]
    shape = tuple(value.aval.shape)
    axis = len(shape) - 1
    chain: list = []
    others: dict = {}
    while True:
        if value in results:
            return None
        uses = consumers.get(value, [])
        if not uses:
            return None
        if len(uses) == 1 and _elementwise(eqns[uses[0]], value, shape):
            eqn = eqns[uses[0]]
            chain.append(uses[0])
            others.update((a, None) for a in eqn.invars if _compat.is_var(a) and a is not value)
            value = eqn.outvars[0]
            continue
        cut = _cut(eqns, uses, value, axis)
        if cut is None:
            return None
        cuts, ranges, outs = cut
        if len(ranges) < 2 and ranges[0] == (0, shape[axis]):
            return None  # one block of every column: nothing to split
        return _Fused(index, tuple(chain), cuts, ranges, outs, tuple(others))


def _elementwise(eqn: Any, value: Any, shape: tuple) -> bool:
    """An element-wise equation of one output, the same shape as ``value``, whose other
    operands are scalars or of that same shape (then sliced per block)."""
    if len(eqn.outvars) != 1 or tuple(eqn.outvars[0].aval.shape) != shape:
        return False
    name = eqn.primitive.name
    if name not in ELEMENTWISE_PRIMITIVE_NAMES and name not in _CALLS:
        return False
    for atom in eqn.invars:
        if atom is not value and tuple(atom.aval.shape) not in ((), shape):
            return False
    flags = [_compat.is_var(a) and a is value for a in eqn.invars]
    return is_position_preserving(eqn, flags)


def _cut(eqns: list, uses: list, value: Any, axis: int) -> tuple | None:
    """``(cut equations, column ranges, block Vars)`` when ``uses`` cut ``value``'s last axis
    into disjoint blocks (one ``split``, or ``slice`` s with unit strides)."""
    if len(uses) == 1 and eqns[uses[0]].primitive.name == "split":
        eqn = eqns[uses[0]]
        if eqn.params.get("axis") % (axis + 1) != axis:
            return None
        ranges, start = [], 0
        for size in eqn.params["sizes"]:
            ranges.append((start, start + int(size)))
            start += int(size)
        return (uses[0],), tuple(ranges), tuple(eqn.outvars)
    slices = []
    for use in uses:
        eqn = eqns[use]
        if eqn.primitive.name != "slice":
            return None
        starts, limits = eqn.params["start_indices"], eqn.params["limit_indices"]
        strides = eqn.params.get("strides") or (1,) * len(starts)
        shape = value.aval.shape
        whole = all(
            starts[d] == 0 and limits[d] == shape[d] and strides[d] == 1 for d in range(axis)
        )
        if not whole or strides[axis] != 1:
            return None
        slices.append((int(starts[axis]), int(limits[axis]), use, eqn.outvars[0]))
    slices.sort()
    if any(a[1] > b[0] for a, b in zip(slices, slices[1:])):
        return None  # overlapping columns: one column would be two relations' y
    return (
        tuple(s[2] for s in slices),
        tuple((s[0], s[1]) for s in slices),
        tuple(s[3] for s in slices),
    )


def _block_fn(etp: Any, chain: list, fused: _Fused):
    """``fn(*etp operands, *others) -> block values``: the op per block, its chain per block."""
    fused_var = etp.outvars[0]
    n_etp = len(etp.invars)
    has_bias = bool(etp.params.get("has_bias", False))
    width = fused_var.aval.shape[-1]

    def fn(*args):
        x, weight = args[0], args[1]
        weights = _columns(weight, fused.ranges)
        biases = _columns(args[2], fused.ranges) if has_bias else None
        rest = dict(zip(fused.others, args[n_etp:]))
        cut = {atom: _columns(value, fused.ranges) for atom, value in rest.items()
               if value.ndim and value.shape[-1] == width}  # fmt: skip
        blocks = []
        for k in range(len(fused.ranges)):
            operands = [x, weights[k]] + ([biases[k]] if biases is not None else [])
            value = etp.primitive.bind(*operands, **etp.params)
            current = fused_var
            for eqn in chain:
                vals = []
                for atom in eqn.invars:
                    if atom is current:
                        vals.append(value)
                    elif _compat.is_literal(atom):
                        vals.append(atom.val)
                    else:
                        vals.append(cut[atom][k] if atom in cut else rest[atom])
                value = _apply(eqn, vals)
                current = eqn.outvars[0]
            blocks.append(value)
        return blocks

    return fn


def _columns(value: Any, ranges: tuple) -> list:
    """``value``'s last-axis column blocks ``ranges`` (disjoint, sorted), cut by ONE
    ``lax.split`` (the columns between blocks are split off and dropped): its transpose is one
    ``concatenate``, so a block weight's gradient lands in the fused leaf in one pass, where a
    ``slice`` per block would transpose to a full-width ``pad`` and an add per block (the
    brainstate LSTM's D-RTRL step was 34 % slower than four separate weights with them).

    >>> [b.tolist() for b in _columns(jax.numpy.arange(6), ((0, 2), (3, 6)))]
    [[0, 1], [3, 4, 5]]
    """
    width = value.shape[-1]
    sizes, keep, at = [], [], 0
    for start, stop in ranges:
        if start > at:
            sizes.append(start - at)  # a gap between blocks
        keep.append(len(sizes))
        sizes.append(stop - start)
        at = stop
    if at < width:
        sizes.append(width - at)
    pieces = jax.lax.split(value, sizes, axis=value.ndim - 1)
    return [pieces[i] for i in keep]


def _apply(eqn: Any, vals: list) -> Any:
    """``eqn`` applied to one block's values: an element-wise primitive bound as it is; a call
    (a ``custom_jvp`` relu, a ``jit``) evaluated through its body on the block's shapes (its
    jaxpr is typed for the whole product; a custom derivative rule becomes the body's own)."""
    if eqn.primitive.name not in _CALLS:
        return eqn.primitive.bind(*vals, **eqn.params)
    from .._jaxpr import sub_jaxprs

    body = sub_jaxprs(eqn)[0][1]
    closed = eqn.params.get("call_jaxpr") or eqn.params.get("jaxpr")
    consts = list(closed.consts) if closed is not None else []
    env = dict(zip(body.constvars, consts))
    env.update(zip(body.invars, vals[len(vals) - len(body.invars) :]))

    def read(atom: Any) -> Any:
        return atom.val if _compat.is_literal(atom) else env[atom]

    for inner in body.eqns:
        env[inner.outvars[0]] = _apply(inner, [read(a) for a in inner.invars])
    return read(body.outvars[0])


def _weight_path(eqns: list, index: int, weight_path_of: dict) -> tuple:
    """The ``ParamState`` path the op's weight operand is read from (through casts,
    transposes, masks: the first parameter leaf up its producers)."""
    producer = {o: i for i, e in enumerate(eqns) for o in e.outvars}
    stack, seen = [eqns[index].invars[1]], set()
    while stack:
        var = stack.pop()
        if var in weight_path_of:
            return tuple(weight_path_of[var])
        if var in seen or var not in producer:
            continue
        seen.add(var)
        stack.extend(a for a in eqns[producer[var]].invars if _compat.is_var(a))
    return ()


def _labels(eqns: list, fused: _Fused) -> tuple[list, str]:
    """The names the user's code binds the blocks to (``r, z = jnp.split(...)``), read off the
    cut's source line, and that line as ``file:line``; ``block k`` where none is found."""
    count = len(fused.ranges)
    labels = [f"block {k}" for k in range(count)]
    source = ""
    if len(fused.cuts) == 1:
        frame = _compat.eqn_user_frame(eqns[fused.cuts[0]])
        if frame is not None:
            source = f"{frame[0]}:{frame[1]}"
            names = _assigned_names(linecache.getline(frame[0], frame[1]))
            if len(names) == count:
                labels = names
    else:
        for k, cut in enumerate(fused.cuts):
            frame = _compat.eqn_user_frame(eqns[cut])
            if frame is None:
                continue
            source = source or f"{frame[0]}:{frame[1]}"
            names = _assigned_names(linecache.getline(frame[0], frame[1]))
            if len(names) == 1:
                labels[k] = names[0]
    return labels, source


def _assigned_names(line: str) -> list:
    """``["i", "g", "f", "o"]`` for ``i, g, f, o = jnp.split(...)``; [] when not that form."""
    try:
        tree = ast.parse(line.strip())
    except SyntaxError:
        return []
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assign):
        return []
    targets = tree.body[0].targets
    if len(targets) != 1:
        return []
    target = targets[0]
    items = target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
    names = [t.id for t in items if isinstance(t, ast.Name)]
    return names if len(names) == len(items) else []
