r"""One forward and one backward dataflow pass over a compiled step's flat jaxpr: which
memories, relations and parameters reach each Var, and by what kind of path.

Every non-parameter state leaf is a *memory* (hidden states and any other state the step
rewrites). Each Var carries bit sets of

* the memories whose **previous** value reaches it without crossing a new memory value, split
  by how: ``clean`` (plain position-preserving ops), ``etp`` (through the input of a
  non-gradient-enabled ETP equation: a boundary, whose effect D-RTRL leaves to the weight
  traces) or ``coupled`` (through a plain op that moves or mixes positions);
* the relations whose output ``y`` reaches it (again ``clean`` / ``etp`` / ``coupled``);
* the parameter leaves that reach it along ops that are not their own ETP relation (``plain``);
* the memories whose **new** value it reads.

:mod:`etp_viz.compiler.claims` reads these to decide what each online gradient drops.

Examples
--------
>>> OLD_C, NEW
(0, 7)
"""

from __future__ import annotations

import dataclasses
import heapq
from typing import Any

import jax

from etp_viz import _compat

from ._jaxpr import VISITS
from ._positions import (
    carries_no_derivative,
    is_position_preserving,
    is_tail_position_preserving,
)

__all__ = ["Flow", "Memory", "bits_of", "leaf_name", "or_all"]

MAX_NAMED_EQNS = 6
#: the tables of a Var's bit sets, in this order
OLD_C, OLD_E, OLD_P, Y_C, Y_E, Y_P, PLAIN, NEW = range(8)


# -- the passes --------------------------------------------------------------------------
@dataclasses.dataclass
class Memory:
    name: str
    invar: Any
    outvar: Any
    hidden_path: tuple | None


class Flow:
    """Per-Var bit sets of one forward pass, per-equation summaries and a backward reach."""

    def __init__(self, graph: Any):
        self.minfo = minfo = graph.module_info
        self.eqns = minfo.jaxpr.eqns
        self.memories = memories_of(minfo)
        self.relations = [r for r in graph.hidden_param_op_relations if r.trainable_vars]
        self.rel_eqn = [relation_eqn(minfo, r) for r in self.relations]
        self.leaves = [v for v in minfo.weight_invars]
        self.leaf_bit = {v: 1 << i for i, v in enumerate(self.leaves)}
        self.path_bits: dict = {}
        for k, m in enumerate(self.memories):
            self.path_bits[m.hidden_path] = self.path_bits.get(m.hidden_path, 0) | 1 << k
        self.group_mask = {}
        for g in graph.hidden_groups:
            bits = self.bits_of_paths(g.hidden_paths)
            for p in g.hidden_paths:
                self.group_mask[p] = bits
        #: memories their group's other new states read unperturbed (compiler/perturbation.py)
        self.unperturbed = self.bits_of_paths(graph.hidden_perturb.in_group_reads)
        #: equation index -> the dotted path of the relation's weight that it computes
        self.rel_name = {i: _dot(rel.weight_path) for rel, i in zip(self.relations, self.rel_eqn)}
        # a fused gate's blocks (learned or not) are named with their columns
        self.rel_name.update(
            (b.eqn_index, f"{_dot(b.weight_path)} {b.describe()}") for b in minfo.blocks
        )
        self._indexes: dict = {}
        self._found: dict = {}
        self._forward()
        self._backward()
        self._close()

    def _close(self) -> None:
        """The per-memory summaries the claims read, each a closure over "reads the new value
        of" (``at_memory[k][NEW]``). Within one step a memory's new value reads only new values
        written by earlier equations, so one sweep in that order closes them (and a second
        confirms it)."""
        reads_new = [at[NEW] for at in self.at_memory]
        #: per memory, the memories that read its previous or new value
        self.readers = [0] * len(self.memories)
        #: per relation, the memories its ``y`` reaches (any kind of path)
        self.y_reaches = [0] * len(self.relations)
        for k, at in enumerate(self.at_memory):
            for j in bits_of(_old(at) | at[NEW]):
                self.readers[j] |= 1 << k
            for r in bits_of(at[Y_C] | at[Y_E] | at[Y_P]):
                self.y_reaches[r] |= 1 << k
        #: memories whose new value reaches an output within the step (directly or through
        #: other new values): their learning signal is not zero by structure
        self.signal = self.at_output[NEW]
        frontier = self.signal
        while frontier:
            frontier = or_all(reads_new[k] for k in bits_of(frontier)) & ~self.signal
            self.signal |= frontier
        producer = self.minfo.def_use.producer
        order = sorted(
            range(len(self.memories)),
            key=lambda k: (
                producer.get(self.memories[k].outvar, -1)
                if _compat.is_var(self.memories[k].outvar)
                else -1
            ),
        )
        #: per memory, every memory whose new value its new value reads, directly or through
        #: other new values (the transitive closure of ``at_memory[k][NEW]``)
        self.new_closure = close_over(reads_new, reads_new, order)
        #: per memory, the memories whose previous value reaches its new value by any path
        #: (through other new values too)
        self.old_total = close_over(reads_new, [_old(at) for at in self.at_memory], order)

    def closure(self, start: int) -> int:
        """``start`` and every memory that reads the previous or new value of a member."""
        reach = frontier = start
        while frontier:
            frontier = or_all(self.readers[k] for k in bits_of(frontier)) & ~reach
            reach |= frontier
        return reach

    def bits_of_paths(self, paths: Any) -> int:
        return or_all(self.path_bits.get(p, 0) for p in dict.fromkeys(map(tuple, paths)))

    def _forward(self) -> None:
        from etp_viz.ops import is_etp_enable_gradient_primitive, is_etp_primitive

        old_c: dict = {}
        old_e: dict = {}
        old_p: dict = {}
        y_c: dict = {}
        y_e: dict = {}
        y_p: dict = {}
        plain: dict = {}
        new: dict = {}
        tables = (old_c, old_e, old_p, y_c, y_e, y_p, plain, new)
        out_of: dict = {}  # memory outvar -> memory indices
        for k, mem in enumerate(self.memories):
            old_c[mem.invar] = old_c.get(mem.invar, 0) | 1 << k
            out_of.setdefault(mem.outvar, []).append(k)
        for v, bit in self.leaf_bit.items():
            plain[v] = bit
        own_operands: dict[int, dict] = {}
        for r, rel in enumerate(self.relations):
            ops = own_operands.setdefault(self.rel_eqn[r], {})
            for key, var in rel.trainable_vars.items():
                for path, index in relation_leaves(rel, key):
                    leaf = self.minfo.weight_path_to_invars[path][index]
                    ops[var] = ops.get(var, 0) | self.leaf_bit[leaf]
        rel_at: dict[int, int] = {}
        for r, index in enumerate(self.rel_eqn):
            rel_at[index] = rel_at.get(index, 0) | 1 << r
        self.at_memory: list = [None] * len(self.memories)
        for k, mem in enumerate(self.memories):
            if not _compat.is_var(mem.outvar) or produced(mem, self):
                continue
            # written back unchanged (or a literal): it reads what its Var carries
            self.at_memory[k] = tuple(t.get(mem.outvar, 0) for t in tables)
        self.eqn_in: list = []
        cache: dict = {}
        for index, eqn in enumerate(self.eqns):
            VISITS.count += 1
            ins = [v if _compat.is_var(v) else None for v in eqn.invars]
            masks = [[t.get(v, 0) if v is not None else 0 for v in ins] for t in tables]
            union = [or_all(m) for m in masks]
            self.eqn_in.append(union)
            if not any(union) and index not in rel_at or carries_no_derivative(eqn):
                continue
            oc, oe, op, yc, ye, yp, pl, nw = union
            boundary = is_etp_primitive(eqn.primitive) and not is_etp_enable_gradient_primitive(
                eqn.primitive
            )
            own = own_operands.get(index)
            if own:  # a relation: its own leaves ride on its trace, its y starts here
                pl = or_all(m & ~own.get(v, 0) for v, m in zip(ins, masks[6]))
            if boundary:
                oe, oc, op = oc | oe | op, 0, 0
                ye, yc, yp = yc | ye | yp, 0, 0
            else:
                old_dep = [bool(a | b | c) for a, b, c in zip(masks[0], masks[1], masks[2])]
                if any(old_dep) and not is_position_preserving(eqn, old_dep, cache):
                    op, oc = op | oc, 0
                y_dep = [bool(a | b | c) for a, b, c in zip(masks[3], masks[4], masks[5])]
                if any(y_dep) and not is_tail_position_preserving(eqn, y_dep, cache):
                    yp, yc = yp | yc, 0
            yc |= rel_at.get(index, 0)
            values = (oc, oe, op, yc, ye, yp, pl, nw)
            for out in eqn.outvars:
                if not _compat.is_var(out):
                    continue
                for table, value in zip(tables, values):
                    if value:
                        table[out] = value
                for k in out_of.get(out, ()):
                    self.at_memory[k] = values
                if out in out_of:  # a new memory value: paths stop here, its own bit starts
                    for table in tables:
                        table.pop(out, None)
                    new[out] = sum(1 << k for k in out_of[out])
        empty = (0,) * len(tables)
        self.at_memory = [m if m is not None else empty for m in self.at_memory]
        outs = [v for v in self.minfo.out_vars if _compat.is_var(v)]
        self.at_output = tuple(or_all(t.get(v, 0) for v in outs) for t in tables)

    def _backward(self) -> None:
        """``reach[index]``: memories (bits) and outputs (bit ``len(memories)``) that the
        outputs of equation ``index`` reach without crossing a new memory value."""
        out_bit = 1 << len(self.memories)
        own: dict = {}
        for k, mem in enumerate(self.memories):
            if _compat.is_var(mem.outvar):
                own[mem.outvar] = own.get(mem.outvar, 0) | 1 << k
        acc: dict = {}
        for v in self.minfo.out_vars:
            if _compat.is_var(v):
                acc[v] = acc.get(v, 0) | out_bit
        self.reach = [0] * len(self.eqns)
        for index in range(len(self.eqns) - 1, -1, -1):
            VISITS.count += 1
            eqn = self.eqns[index]
            mask = 0
            for v in eqn.outvars:
                if _compat.is_var(v):
                    mask |= own[v] if v in own else acc.get(v, 0)
            self.reach[index] = mask
            if mask:
                for v in eqn.invars:
                    if _compat.is_var(v):
                        acc[v] = acc.get(v, 0) | mask

    def eqns_where(
        self, table: Any, bits: int, reach: int, exclude: int = -1, keep: Any = None
    ) -> tuple:
        """Equations whose inputs carry ``bits`` in ``table`` (one table, or a tuple of them:
        any) and whose outputs reach ``reach`` (the first few, in order; ``keep``: a further
        test of the equation's index).

        Reads a per-bit index of the table built once (the first time a table is asked
        about): the cost is the equations that carry ``bits``, not the whole jaxpr."""
        tables = table if isinstance(table, tuple) else (table,)
        index = self._indexes.get(tables)
        if index is None:
            index = self._indexes[tables] = {}
            for i, union in enumerate(self.eqn_in):
                VISITS.count += 1
                for k in bits_of(or_all(union[t] for t in tables)):
                    index.setdefault(k, []).append(i)
        lists = [index.get(k, ()) for k in bits_of(bits)]
        return self._first(lists, reach, exclude, keep)

    def reading_new(self, bits: int, reach: int) -> tuple:
        """Equations that read the new value of a memory in ``bits`` and reach ``reach``."""
        outvars = dict.fromkeys(m.outvar for k, m in self._members(bits))
        return self._reading(outvars, reach)

    def reading(self, bits: int, reach: int) -> tuple:
        """Equations that read the previous value of a memory in ``bits`` and reach
        ``reach``."""
        invars = dict.fromkeys(m.invar for k, m in self._members(bits))
        return self._reading(invars, reach)

    def _members(self, bits: int) -> list:
        return [(k, self.memories[k]) for k in bits_of(bits) if k < len(self.memories)]

    def _reading(self, variables: dict, reach: int) -> tuple:
        consumers = self.minfo.def_use.consumers
        lists = [consumers.get(v, ()) for v in variables if _compat.is_var(v)]
        return self._first(lists, reach)

    def _first(self, lists: list, reach: int, exclude: int = -1, keep: Any = None) -> tuple:
        """The first :data:`MAX_NAMED_EQNS` equations of the ascending index ``lists`` that
        reach ``reach`` (not ``exclude``, passing ``keep``); answers are remembered."""
        key = (tuple(map(id, lists)), reach, exclude, keep)
        found = self._found.get(key)
        if found is not None:
            return found
        hits: list = []
        for i in _merged(lists):
            VISITS.count += 1
            if i != exclude and self.reach[i] & reach and (keep is None or keep(i)):
                hits.append(i)
                if len(hits) >= MAX_NAMED_EQNS:
                    break
        found = self._found[key] = tuple(hits)
        return found


def _merged(lists: list) -> Any:
    """The ascending union of ascending lists, each index once."""
    if len(lists) == 1:
        return iter(lists[0])
    return iter(dict.fromkeys(heapq.merge(*lists)))


def close_over(direct: list, seed: list, order: Any) -> list:
    """The least ``out`` with ``out[k] = seed[k] | out[j]`` for every ``j`` in ``direct[k]``
    (bit sets), sweeping in ``order`` until nothing changes (once and a confirming sweep when
    ``order`` puts every ``j`` before the ``k`` that reads it).

    >>> close_over([0, 0b1, 0b10], [0, 0b1, 0b10], range(3))
    [0, 1, 3]
    """
    out = list(seed)
    parts = [bits_of(d) for d in direct]
    changed = True
    while changed:
        changed = False
        for k in order:
            wider = out[k] | or_all(out[j] for j in parts[k])
            if wider != out[k]:
                out[k] = wider
                changed = True
    return out


def _old(at: tuple) -> int:
    return at[OLD_C] | at[OLD_E] | at[OLD_P]


def produced(mem: Memory, flow: Flow) -> bool:
    return mem.outvar in flow.minfo.def_use.producer


def bits_of(mask: int) -> list:
    """The set bits of ``mask``, ascending (one step per set bit, not per bit).

    >>> bits_of(0b10110)
    [1, 2, 4]
    """
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def or_all(values: Any) -> int:
    out = 0
    for v in values:
        out |= v
    return out


def memories_of(minfo: Any) -> list:
    import brainstate

    invars = list(minfo.invars[minfo.num_arg_leaves :])
    outvars = list(minfo.jaxpr.outvars[minfo.num_out_leaves :])
    hidden_of = dict(minfo.invar_to_hidden_path)
    out: list = []
    start = 0
    for state in minfo.compiled_model_states:
        leaves = jax.tree_util.tree_flatten_with_path(state.value)[0]
        path = minfo.path_of(state)
        for offset, (key, _) in enumerate(leaves):
            invar, outvar = invars[start + offset], outvars[start + offset]
            inexact = jax.numpy.issubdtype(invar.aval.dtype, jax.numpy.inexact)
            if not isinstance(state, brainstate.ParamState) and outvar is not invar and inexact:
                # an integer state carries no derivative: no gradient reaches or leaves it
                name = leaf_name(path, key)
                out.append(Memory(name, invar, outvar, hidden_of.get(invar)))
        start += len(leaves)
    return out


def leaf_name(path: tuple, key: tuple) -> str:
    """The one dotted name of a weight leaf: the ``ParamState``'s path, then the leaf's key
    inside its value, a key equal to the path's last part not repeated (the leaf ``weight``
    of ``rnn.W.weight`` is ``rnn.W.weight``, its ``bias`` ``rnn.W.weight.bias``).

    A saiunit ``Quantity`` is a pytree node whose one child, its mantissa, has the key
    ``FlattenedIndexKey(0)`` (the unit is static): that last entry is not a name, so a
    quantity-valued leaf has the name of the same leaf holding a plain array
    (``syn.comm.weight``, not ``syn.comm.weight.weight.0``).

    >>> import jax
    >>> keys = [k for k, _ in jax.tree_util.tree_flatten_with_path({"weight": 0, "bias": 0})[0]]
    >>> [leaf_name(("rnn", "W", "weight"), k) for k in keys]
    ['rnn.W.weight.bias', 'rnn.W.weight']
    """
    parts = [str(p) for p in path]
    key = _without_mantissa(tuple(key))
    for entry in key:
        for attr in ("key", "idx", "name"):
            if hasattr(entry, attr):
                part = str(getattr(entry, attr))
                if not (parts and len(key) == 1 and parts[-1] == part):
                    parts.append(part)
                break
    return ".".join(parts)


def _without_mantissa(key: tuple) -> tuple:
    """``key`` without a last ``FlattenedIndexKey(0)``: the only child of a node flattened
    without keys, a saiunit ``Quantity``'s mantissa (a node with several such children
    keeps the index of every other child, so the names stay distinct)."""
    if key and isinstance(key[-1], jax.tree_util.FlattenedIndexKey) and key[-1].key == 0:
        return key[:-1]
    return key


def relation_leaves(rel: Any, key: str) -> tuple:
    """``(path, leaf index)`` of every parameter leaf the trainable input ``key`` of ``rel``
    is computed from (the learner pulls the gradient back to each)."""
    attributed = ((rel.trainable_paths[key], rel.trainable_leaf_indices[key]),)
    return tuple(dict.fromkeys(attributed + tuple(rel.trainable_all_leaves.get(key, ()))))


def hidden_reach(eqns: Any, seeds: dict) -> dict:
    """``reach[var]``: the bits of the ``seeds`` (``{new hidden value: bit}``) that ``var``
    reaches by any path: one backward pass."""
    reach = dict(seeds)
    for eqn in reversed(eqns):
        VISITS.count += 1
        mask = 0
        for var in eqn.outvars:
            mask |= reach.get(var, 0) if _compat.is_var(var) else 0
        if mask:
            for atom in eqn.invars:
                if _compat.is_var(atom):
                    reach[atom] = reach.get(atom, 0) | mask
    return reach


def bits_by_key(pairs: Any) -> dict:
    """``{key: the OR of its bits}`` of ``(key, bit)`` pairs, keys in first-seen order."""
    out: dict = {}
    for key, bit in pairs:
        out[key] = out.get(key, 0) | bit
    return out


def _dot(path: Any) -> str:
    return ".".join(map(str, path)) if path is not None else "?"


def relation_eqn(minfo: Any, rel: Any) -> int:
    return rel.eqn_index if rel.eqn_index >= 0 else minfo.def_use.producer[rel.y_var]
