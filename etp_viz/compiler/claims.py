r"""Gradient claims: per weight leaf and algorithm, is the online gradient exact, approximate or
absent, and which Jacobian terms does it drop?

The claims are derived from the flat jaxpr alone, in one forward and one backward pass, from
first principles rather than from the other passes' warnings. Every non-parameter state leaf
is a *memory* :math:`m` (hidden states and any other state the step rewrites). Each Var carries
bit sets of

* the memories whose **previous** value reaches it without crossing a new memory value, split
  by how: ``clean`` (plain position-preserving ops), ``etp`` (through the input of a
  non-gradient-enabled ETP equation: a boundary, whose effect D-RTRL leaves to the weight
  traces) or ``coupled`` (through a plain op that moves or mixes positions);
* the relations whose output ``y`` reaches it (again ``clean`` / ``etp`` / ``coupled``);
* the parameter leaves that reach it along ops that are not their own ETP relation (``plain``);
* the memories whose **new** value it reads.

A relation :math:`r` feeding the groups :math:`G_r` keeps the traces of the states
:math:`T_r` of those groups. Its *reach* :math:`R_r` is the smallest set of memories holding
:math:`T_r` and what ``y`` reaches, closed under "reads the previous or new value of a member".
The online gradient of :math:`r` is exact when every dependency of a member of :math:`R_r` on
the previous value of a member is one the traces carry: a clean dependency of a state of
:math:`T_r` on a state of its own group. Everything else is *dropped* and named:

* ``h -> h`` through an ETP boundary (a dense recurrence ``W h``);
* a position-coupling op on an ``h -> h`` path (cut from the transition);
* a dependency between states of different groups (different layers or shapes);
* the future states of a state outside :math:`T_r` that reads its own past (a stacked layer);
* ``y`` reaching a state through another ETP equation (weight to weight), through a tail that
  mixes positions (broadcasting along *leading* axes is position-preserving) or outside
  :math:`T_r`;
* an output reading the previous value of a state of :math:`R_r` outside :math:`T_r` (the
  learn layer's bypass term covers :math:`T_r` only);
* a parameter reaching a state along plain ops (no ETP primitive carries its effect).

A readout leaf (a path to an output crossing no new hidden value) gets its exact same-step
gradient. ES-D-RTRL's traces are factorised into an input and an output trace, so its online
claims are at best approximate. See ``docs/semantics.md`` ("Gradient claims").
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from etp_viz import _compat

from ._jaxpr import VISITS
from ._positions import is_position_preserving, is_tail_position_preserving

__all__ = ["CLAIM_ALGORITHMS", "GradientClaim", "GradientClaims", "gradient_claims"]

#: algorithm name -> canonical name (``pp_prop`` is ES-D-RTRL's other name)
CLAIM_ALGORITHMS = {"d_rtrl": "d_rtrl", "es_d_rtrl": "es_d_rtrl", "pp_prop": "es_d_rtrl"}
_KIND_ORDER = {"none": 0, "approximate": 1, "exact": 2}
ES_REASON = (
    "ES-D-RTRL factorises the trace into input × output (decaying averages), not the exact "
    "per-weight trace"
)
_MAX_NAMED_EQNS = 6


@dataclasses.dataclass(frozen=True)
class GradientClaim:
    """What an online learner's gradient for one weight leaf is.

    Attributes
    ----------
    path : str
        The leaf's dotted path (``"rnn.W.weight"``; a bare-array ``ParamState``: its path).
    kind : str
        ``"exact"`` (equal to the true gradient for every loss and input), ``"approximate"``
        (some Jacobian terms are dropped: ``reason`` names them) or ``"none"`` (no online
        gradient: ``reason`` says why).
    reason : str
        Empty for an exact claim.
    dropped : tuple of int
        Top-level equation indices (``graph.module_info.jaxpr``) of the dropped terms.
    algorithm : str
    online : bool
        Some ETP relation traces it.
    readout : bool
        Some path reaches a model output crossing no new hidden value (exact same-step part).

    Examples
    --------
    >>> claim = GradientClaim("rnn.W.weight", "exact", algorithm="d_rtrl", online=True)
    >>> claim.kind, claim.to_json()["path"]
    ('exact', 'rnn.W.weight')
    """

    path: str
    kind: str
    reason: str = ""
    dropped: tuple = ()
    algorithm: str = "d_rtrl"
    online: bool = False
    readout: bool = False
    weight_path: tuple = ()
    leaf_index: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "reason": self.reason,
            "dropped": [int(i) for i in self.dropped],
            "algorithm": self.algorithm,
            "online": self.online,
            "readout": self.readout,
        }


class GradientClaims(dict):
    """``{leaf path: GradientClaim}``; a ``ParamState`` path answers too (its leaves' worst
    claim), and ``str()`` is one line per leaf."""

    def __missing__(self, key: Any) -> GradientClaim:
        name = key if isinstance(key, str) else ".".join(map(str, key))
        if dict.__contains__(self, name):
            return dict.__getitem__(self, name)
        leaves = [c for k, c in self.items() if k.startswith(name + ".")]
        if not leaves:
            raise KeyError(f"no weight {name!r}; known: {sorted(self)}")
        return combine_claims(name, leaves)

    def get(self, key: Any, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        name = key if isinstance(key, str) else ".".join(map(str, key))  # type: ignore[arg-type]
        return any(k == name or k.startswith(name + ".") for k in self.keys())

    def __str__(self) -> str:
        lines = []
        for path, claim in self.items():
            reason = f" -- {claim.reason}" if claim.reason else ""
            lines.append(f"{path}: {claim.kind}{reason}")
        return "\n".join(lines)


def combine_claims(name: str, leaves: list) -> GradientClaim:
    """One claim for several leaves: the worst kind; reasons of the worst leaves."""
    worst = min(leaves, key=lambda c: _KIND_ORDER[c.kind]).kind
    reasons = list(dict.fromkeys(c.reason for c in leaves if c.kind == worst and c.reason))
    if len({c.kind for c in leaves}) > 1:
        reasons.append(", ".join(f"{c.path}: {c.kind}" for c in leaves))
    return GradientClaim(
        path=name,
        kind=worst,
        reason="; ".join(reasons),
        dropped=tuple(sorted({i for c in leaves for i in c.dropped})),
        algorithm=leaves[0].algorithm,
        online=any(c.online for c in leaves),
        readout=any(c.readout for c in leaves),
        weight_path=leaves[0].weight_path,
    )


def canonical_algorithm(algorithm: Any) -> str:
    """``'d_rtrl'`` or ``'es_d_rtrl'`` from a name, a class or an instance."""
    aliases = {"paramdimvjpalgorithm": "d_rtrl", "iodimvjpalgorithm": "es_d_rtrl"}
    if isinstance(algorithm, str):
        names = [algorithm]
    else:  # a class or an instance: the first known name along its MRO (user subclasses)
        cls = algorithm if isinstance(algorithm, type) else type(algorithm)
        names = [c.__name__ for c in cls.__mro__]
    keys = [aliases.get(k, k) for k in (n.lower().replace("-", "_") for n in names)]
    key = next((k for k in keys if k in CLAIM_ALGORITHMS), keys[0])
    if key not in CLAIM_ALGORITHMS:
        raise ValueError(
            f"gradient claims know the algorithms {sorted(CLAIM_ALGORITHMS)}; got {algorithm!r}"
        )
    return CLAIM_ALGORITHMS[key]


# -- the dataflow --------------------------------------------------------------------------
@dataclasses.dataclass
class _Memory:
    name: str
    invar: Any
    outvar: Any
    hidden_path: tuple | None


class _Flow:
    """Per-Var bit sets of one forward pass, per-equation summaries and a backward reach."""

    def __init__(self, graph: Any):
        self.minfo = minfo = graph.module_info
        self.eqns = minfo.jaxpr.eqns
        self.memories = _memories(minfo)
        self.relations = [r for r in graph.hidden_param_op_relations if r.trainable_vars]
        self.rel_eqn = [_relation_eqn(minfo, r) for r in self.relations]
        self.leaves = [v for v in minfo.weight_invars]
        self.leaf_bit = {v: 1 << i for i, v in enumerate(self.leaves)}
        self.group_mask = {}
        for g in graph.hidden_groups:
            bits = self._bits_of_paths(g.hidden_paths)
            for p in g.hidden_paths:
                self.group_mask[p] = bits
        self._forward()
        self._backward()
        #: memories whose new value reaches an output within the step (directly or through
        #: other new values): their learning signal is not zero by structure
        signal = self.at_output[_NEW]
        changed = True
        while changed:
            changed = False
            for k, at in enumerate(self.at_memory):
                if signal >> k & 1 and at[_NEW] & ~signal:
                    signal |= at[_NEW]
                    changed = True
        self.signal = signal

    def _bits_of_paths(self, paths: Any) -> int:
        wanted = set(map(tuple, paths))
        return sum(1 << k for k, m in enumerate(self.memories) if m.hidden_path in wanted)

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
                path = rel.trainable_paths[key]
                leaf = self.minfo.weight_path_to_invars[path][rel.trainable_leaf_indices[key]]
                ops[var] = ops.get(var, 0) | self.leaf_bit[leaf]
        rel_at = {}
        for r, index in enumerate(self.rel_eqn):
            rel_at[index] = rel_at.get(index, 0) | 1 << r
        self.at_memory: list = [None] * len(self.memories)
        for k, mem in enumerate(self.memories):
            if not _compat.is_var(mem.outvar) or _produced(mem, self):
                continue
            # written back unchanged (or a literal): it reads what its Var carries
            self.at_memory[k] = tuple(t.get(mem.outvar, 0) for t in tables)
        self.eqn_in: list = []
        cache: dict = {}
        for index, eqn in enumerate(self.eqns):
            VISITS.count += 1
            ins = [v if _compat.is_var(v) else None for v in eqn.invars]
            masks = [[t.get(v, 0) if v is not None else 0 for v in ins] for t in tables]
            union = [_or(m) for m in masks]
            self.eqn_in.append(union)
            if not any(union) and index not in rel_at:
                continue
            oc, oe, op, yc, ye, yp, pl, nw = union
            boundary = is_etp_primitive(eqn.primitive) and not is_etp_enable_gradient_primitive(
                eqn.primitive
            )
            own = own_operands.get(index)
            if own:  # a relation: its own leaves ride on its trace, its y starts here
                pl = _or(m & ~own.get(v, 0) for v, m in zip(ins, masks[6]))
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
        self.at_output = tuple(_or(t.get(v, 0) for v in outs) for t in tables)

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

    def eqns_where(self, table: int, bits: int, reach: int, exclude: int = -1) -> tuple:
        """Equations whose inputs carry ``bits`` in ``table`` and whose outputs reach ``reach``
        (the first few, in order)."""
        found = []
        for index, union in enumerate(self.eqn_in):
            if index != exclude and union[table] & bits and self.reach[index] & reach:
                found.append(index)
                if len(found) >= _MAX_NAMED_EQNS:
                    break
        return tuple(found)

    def reading_new(self, bits: int, reach: int) -> tuple:
        """Equations that read the new value of a memory in ``bits`` and reach ``reach``."""
        outvars = {m.outvar for k, m in enumerate(self.memories) if bits >> k & 1}
        return self._reading(outvars, reach)

    def reading(self, bits: int, reach: int) -> tuple:
        """Equations that read the previous value of a memory in ``bits`` and reach
        ``reach``."""
        invars = {m.invar for k, m in enumerate(self.memories) if bits >> k & 1}
        return self._reading(invars, reach)

    def _reading(self, invars: set, reach: int) -> tuple:
        found = []
        for index, eqn in enumerate(self.eqns):
            if self.reach[index] & reach and any(
                _compat.is_var(v) and v in invars for v in eqn.invars
            ):
                found.append(index)
                if len(found) >= _MAX_NAMED_EQNS:
                    break
        return tuple(found)


_OLD_C, _OLD_E, _OLD_P, _Y_C, _Y_E, _Y_P, _PLAIN, _NEW = range(8)


def _produced(mem: _Memory, flow: _Flow) -> bool:
    return mem.outvar in flow.minfo.def_use.producer


def _bits(mask: int) -> list:
    return [k for k in range(mask.bit_length()) if mask >> k & 1]


def _or(values: Any) -> int:
    out = 0
    for v in values:
        out |= v
    return out


def _memories(minfo: Any) -> list:
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
            if not isinstance(state, brainstate.ParamState) and outvar is not invar:
                name = _leaf_name(path, key)
                out.append(_Memory(name, invar, outvar, hidden_of.get(invar)))
        start += len(leaves)
    return out


def _leaf_name(path: tuple, key: tuple) -> str:
    parts = [str(p) for p in path]
    for entry in key:
        for attr in ("key", "idx", "name"):
            if hasattr(entry, attr):
                parts.append(str(getattr(entry, attr)))
                break
    return ".".join(parts)


def _relation_eqn(minfo: Any, rel: Any) -> int:
    return rel.eqn_index if rel.eqn_index >= 0 else minfo.def_use.producer[rel.y_var]


# -- the claims ----------------------------------------------------------------------------
def gradient_claims(graph: Any, algorithm: Any = "d_rtrl") -> GradientClaims:
    """Per weight leaf, the claim an online ``algorithm`` makes about its gradient.

    Parameters
    ----------
    graph : ETraceGraph
    algorithm : str
        ``'d_rtrl'`` (default) or ``'es_d_rtrl'`` (also ``'pp_prop'``, a class or an instance).

    Returns
    -------
    GradientClaims
        ``{dotted leaf path: GradientClaim}`` in parameter order.

    Examples
    --------
    >>> claims = graph.gradient_claims("d_rtrl")           # doctest: +SKIP
    >>> claims["rnn.W.weight"].kind, claims["rnn.W.weight"].reason  # doctest: +SKIP
    ('approximate', 'drops h→h through rnn.W.weight (etp_mv, equation 4) ...')
    """
    name = canonical_algorithm(algorithm)
    flow = _Flow(graph)
    minfo = graph.module_info
    readout_leaves = {
        (path, i) for path, ro in graph.readout_params.items() for i in ro.leaf_indices
    }
    bypass = set(map(tuple, getattr(graph, "bypass_hidden", ()) or ()))
    rel_drops = [_relation_drops(flow, r, bypass) for r in range(len(flow.relations))]
    claims = GradientClaims()
    for path, leaves in minfo.weight_path_to_invars.items():
        for leaf_index, leaf in enumerate(leaves):
            key = _leaf_name(path, _leaf_keys(minfo, path)[leaf_index])
            uses = [
                r
                for r, rel in enumerate(flow.relations)
                if any(
                    rel.trainable_paths[k] == path and rel.trainable_leaf_indices[k] == leaf_index
                    for k in rel.trainable_vars
                )
            ]
            readout = (path, leaf_index) in readout_leaves
            drops = [d for r in uses for d in rel_drops[r]]
            drops += _plain_drops(flow, flow.leaf_bit[leaf], key)
            if not uses and not readout:
                kind, reason = "none", _none_reason(graph, path, drops)
                drops = []
            else:
                if uses and name == "es_d_rtrl":
                    drops.insert(0, (ES_REASON, ()))
                kind = "approximate" if drops else "exact"
                reason = "; ".join(dict.fromkeys(text for text, _ in drops))
            claims[key] = GradientClaim(
                path=key,
                kind=kind,
                reason=reason,
                dropped=tuple(sorted({i for _, eqns in drops for i in eqns})),
                algorithm=name,
                online=bool(uses),
                readout=readout,
                weight_path=tuple(path),
                leaf_index=leaf_index,
            )
    return claims


def _leaf_keys(minfo: Any, path: tuple) -> list:
    state = minfo.retrieved_model_states[path]
    return [key for key, _ in jax.tree_util.tree_flatten_with_path(state.value)[0]]


def _closure(flow: _Flow, start: int) -> int:
    reach = start
    changed = True
    while changed:
        changed = False
        for k, at in enumerate(flow.at_memory):
            if reach >> k & 1:
                continue
            if (at[_OLD_C] | at[_OLD_E] | at[_OLD_P] | at[_NEW]) & reach:
                reach |= 1 << k
                changed = True
    return reach


def _relation_drops(flow: _Flow, r: int, bypass: set) -> list:
    """``[(reason, equation indices)]`` for relation ``r`` (empty: its traces are exact)."""
    rel = flow.relations[r]
    mems = flow.memories
    bit = 1 << r
    tracked = flow._bits_of_paths([p for g in rel.hidden_groups for p in g.hidden_paths])
    direct = sum(
        1 << k for k, at in enumerate(flow.at_memory) if (at[_Y_C] | at[_Y_E] | at[_Y_P]) & bit
    )
    reach = _closure(flow, tracked | direct)
    drops: list = []
    for k, at in enumerate(flow.at_memory):
        if not reach >> k & 1:
            continue
        target = mems[k].name
        kbit = 1 << k
        if tracked & kbit:
            etp = at[_OLD_E] & reach
            if etp:
                eqns = _boundary_eqns(flow, etp, kbit)
                drops.append(
                    (
                        f"drops h→h {_names(mems, etp)} → {target} through {_describe(flow, eqns)}",
                        eqns,
                    )
                )
            coupled = at[_OLD_P] & reach
            if coupled:
                eqns = _coupling_eqns(flow, coupled, kbit)
                drops.append(
                    (
                        f"drops the position-mixing h→h term {_names(mems, coupled)} → "
                        f"{target} at {_describe(flow, eqns)}",
                        eqns,
                    )
                )
            twice = at[_NEW] & tracked & ~kbit if flow.signal & kbit else 0
            if twice:
                eqns = flow.reading_new(twice, kbit)
                drops.append(
                    (
                        f"counts the in-step path {_names(mems, twice)} → {target} twice "
                        f"({target} reads the new value of a state this weight also traces: "
                        "the learning signal carries that path and so does the trace)",
                        eqns,
                    )
                )
            own_group = flow.group_mask.get(mems[k].hidden_path, kbit)
            stale = sum(
                1 << j
                for j in _bits(at[_NEW] & tracked & ~own_group)
                if (
                    flow.at_memory[j][_OLD_C]
                    | flow.at_memory[j][_OLD_E]
                    | flow.at_memory[j][_OLD_P]
                )
                & reach
            )
            if stale:
                eqns = flow.reading_new(stale, kbit)
                drops.append(
                    (
                        f"drops the past of {_names(mems, stale)} in {target}'s trace "
                        f"({target} reads the new {_names(mems, stale)} of another hidden "
                        "group; its trace carries only this step's part of it)",
                        eqns,
                    )
                )
            cross = at[_OLD_C] & reach & ~own_group
            if cross:
                eqns = flow.reading(cross, kbit)
                drops.append(
                    (
                        f"drops the cross-group term {_names(mems, cross)} → {target} "
                        "(separate hidden groups: no per-position block between them)",
                        eqns,
                    )
                )
        else:
            past = (at[_OLD_C] | at[_OLD_E] | at[_OLD_P]) & reach
            if past:
                eqns = flow.reading(past, kbit)
                what = (
                    "a state that is not a HiddenState"
                    if mems[k].hidden_path is None
                    else ("outside this weight's hidden groups")
                )
                drops.append(
                    (
                        f"drops the effect on {target}'s future states ({target} reads "
                        f"{_names(mems, past)} from the previous step; {what})",
                        eqns,
                    )
                )
        if at[_Y_E] & bit:
            eqns = _boundary_eqns_y(flow, bit, kbit, flow.rel_eqn[r])
            drops.append(
                (f"drops y → {target} through other ETP equation(s) {_describe(flow, eqns)}", eqns)
            )
        if at[_Y_P] & bit:
            eqns = flow.eqns_where(_Y_P, bit, kbit) or flow.eqns_where(_Y_C, bit, kbit)
            drops.append(
                (
                    f"drops the position-mixing part of the y → {target} tail "
                    f"({_describe(flow, eqns)})",
                    eqns,
                )
            )
        if at[_Y_C] & bit and not tracked & kbit:
            eqns = (flow.rel_eqn[r],)
            drops.append(
                (f"drops y → {target} ({target} is not in this relation's hidden groups)", eqns)
            )
    old_out = flow.at_output[_OLD_C] | flow.at_output[_OLD_E] | flow.at_output[_OLD_P]
    untracked_read = old_out & reach & ~tracked
    tracked_unhandled = sum(
        1 << k
        for k, m in enumerate(mems)
        if (old_out & tracked) >> k & 1 and m.hidden_path not in bypass
    )
    for bits, why in (
        (untracked_read, "outside this weight's traced groups"),
        (tracked_unhandled, "no bypass term for it"),
    ):
        if bits:
            eqns = flow.reading(bits, 1 << len(mems))
            drops.append(
                (
                    f"drops the output's read of {_names(mems, bits)} from before the "
                    f"update ({why})",
                    eqns,
                )
            )
    return drops


def _plain_drops(flow: _Flow, leaf_bit: int, key: str) -> list:
    drops = []
    for k, at in enumerate(flow.at_memory):
        if at[_PLAIN] & leaf_bit:
            eqns = flow.eqns_where(_PLAIN, leaf_bit, 1 << k)
            target = flow.memories[k].name
            drops.append(
                (
                    f"drops {key} → {target} through plain op(s) "
                    f"({_describe(flow, eqns)}; not an ETP primitive)",
                    eqns,
                )
            )
    return drops


def _boundary_eqns(flow: _Flow, old_bits: int, target: int) -> tuple:
    from etp_viz.ops import is_etp_enable_gradient_primitive, is_etp_primitive

    found = []
    for index, union in enumerate(flow.eqn_in):
        prim = flow.eqns[index].primitive
        if (
            (union[_OLD_C] | union[_OLD_E] | union[_OLD_P]) & old_bits
            and flow.reach[index] & target
            and is_etp_primitive(prim)
            and not is_etp_enable_gradient_primitive(prim)
        ):
            found.append(index)
            if len(found) >= _MAX_NAMED_EQNS:
                break
    return tuple(found)


def _boundary_eqns_y(flow: _Flow, y_bit: int, target: int, own: int) -> tuple:
    from etp_viz.ops import is_etp_primitive

    return tuple(
        i
        for i in flow.eqns_where(_Y_C, y_bit, target, exclude=own)
        + flow.eqns_where(_Y_E, y_bit, target, exclude=own)
        if is_etp_primitive(flow.eqns[i].primitive)
    )[:_MAX_NAMED_EQNS]


def _coupling_eqns(flow: _Flow, old_bits: int, target: int) -> tuple:
    found = []
    cache: dict = {}
    for index, union in enumerate(flow.eqn_in):
        if not union[_OLD_C] & old_bits or not flow.reach[index] & target:
            continue
        eqn = flow.eqns[index]
        if not is_position_preserving(eqn, [_compat.is_var(v) for v in eqn.invars], cache):
            found.append(index)
            if len(found) >= _MAX_NAMED_EQNS:
                break
    return tuple(found)


def _describe(flow: _Flow, eqns: tuple) -> str:
    if not eqns:
        return "the step"
    names = {}
    for rel, index in zip(flow.relations, flow.rel_eqn):
        names[index] = _dot(rel.weight_path)
    parts = []
    for i in eqns:
        prim = flow.eqns[i].primitive.name
        parts.append(
            f"{names[i]} ({prim}, equation {i})" if i in names else f"{prim} (equation {i})"
        )
    return ", ".join(parts)


def _names(mems: list, bits: int) -> str:
    names = [m.name for k, m in enumerate(mems) if bits >> k & 1]
    return names[0] if len(names) == 1 else "{" + ", ".join(names) + "}"


def _none_reason(graph: Any, path: tuple, drops: list) -> str:
    for record in graph.diagnostics:
        if record.weight_path is not None and tuple(record.weight_path) == tuple(path):
            if record.kind.value not in ("relation_included", "output_bypasses_hidden"):
                return record.message
    if drops:
        return "no ETP relation traces it: " + "; ".join(text for text, _ in drops)
    return "it reaches no hidden state through an ETP primitive and no model output"


def _dot(path: Any) -> str:
    return ".".join(map(str, path)) if path is not None else "?"
