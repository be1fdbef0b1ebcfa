r"""Gradient claims: per weight leaf and algorithm, is the online gradient exact, approximate or
absent, and which Jacobian terms does it drop?

This package: the derivation lives here (``gradient_claims``), the claim records, their
combination and the algorithm names in :mod:`.records`, and the one verdict per weight
(status + claim + reason + fix, ``graph.verdicts()``) in :mod:`.verdict`.

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

from typing import Any

import jax

from etp_viz import _compat

from .._positions import is_position_preserving
from ..dataflow import (
    MAX_NAMED_EQNS,
    NEW,
    OLD_C,
    OLD_E,
    OLD_P,
    PLAIN,
    Y_C,
    Y_E,
    Y_P,
    Flow,
    bits_of,
    leaf_name,
    relation_leaves,
)
from .blocks import leaf_block_claims
from .records import CLAIM_KINDS as CLAIM_KINDS
from .records import DEFAULT_LEARNER as DEFAULT_LEARNER
from .records import DERIVATIONS as DERIVATIONS
from .records import GradientClaim as GradientClaim
from .records import GradientClaims as GradientClaims
from .records import claim_algorithm as claim_algorithm
from .records import combine_claims as combine_claims
from .records import combine_leaf_claims as combine_leaf_claims
from .records import delegated_claims as delegated_claims
from .records import install_learner_directory as install_learner_directory

__all__ = [
    "DEFAULT_LEARNER",
    "DERIVATIONS",
    "CLAIM_KINDS",
    "GradientClaim",
    "GradientClaims",
    "claim_algorithm",
    "delegated_claims",
    "install_learner_directory",
    "combine_claims",
    "combine_leaf_claims",
    "gradient_claims",
]

ES_REASON = (
    "ES-D-RTRL factorises the trace into input × output (decaying averages), not the exact "
    "per-weight trace"
)


# -- the claims ----------------------------------------------------------------------------
def gradient_claims(graph: Any, algorithm: Any = DEFAULT_LEARNER) -> GradientClaims:
    """Per weight leaf, the claim an online ``algorithm`` makes about its gradient.

    Parameters
    ----------
    graph : ETraceGraph
    algorithm : str
        ``'d_rtrl'`` (default) or ``'es_d_rtrl'`` (also ``'pp_prop'``, ``'eprop'``,
        ``'ostl_feedforward'``), or a learner class or instance: its ``claim_family``
        (:func:`.records.claim_algorithm`). An instance with an ``adjust_claims(claims)``
        method (e-prop, RTRL, SnAp...) refines the claims of the family it derives from.

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
    own = delegated_claims(graph, algorithm)
    if own is not None:  # a learner the graph does not derive answers for itself
        return own
    name, derivation = claim_algorithm(algorithm)
    adjust = (
        None if isinstance(algorithm, str | type) else getattr(algorithm, "adjust_claims", None)
    )
    flow = Flow(graph)
    minfo = graph.module_info
    readout_leaves = {
        (path, i) for path, ro in graph.readout_params.items() for i in ro.leaf_indices
    }
    bypass = set(map(tuple, getattr(graph, "bypass_hidden", ()) or ()))
    seen: dict = {}  # drops that do not depend on the relation, made once
    rel_drops = [_relation_drops(flow, r, bypass, seen) for r in range(len(flow.relations))]
    rel_silent = [_silent_states(flow, r, bypass) for r in range(len(flow.relations))]
    users = _relations_by_leaf(flow)
    records = _records_by_weight(graph)
    plain_reach = _memories_by_plain_leaf(flow)
    claims = GradientClaims()
    for path, leaves in minfo.weight_path_to_invars.items():
        leaf_keys = _leaf_keys(minfo, path)
        for leaf_index, leaf in enumerate(leaves):
            key = leaf_name(path, leaf_keys[leaf_index])
            uses = users.get((path, leaf_index), [])
            readout = (path, leaf_index) in readout_leaves
            drops = [d for r in uses for d in rel_drops[r]]
            plain = _plain_drops(flow, flow.leaf_bit[leaf], key, plain_reach)
            extra = [(ES_REASON, ())] if uses and derivation == "es_d_rtrl" else []
            blocks, plain = leaf_block_claims(graph, flow, path, uses, rel_drops, extra, plain)
            drops += plain
            drops += _shared_drops(flow, uses)
            silent = [rel_silent[r] for r in uses]
            if not uses and not readout:
                kind, reason = "none", _none_reason(records, path, drops)
                drops = []
            elif all(silent) and not readout:
                kind, reason = (
                    "none",
                    _silent_reason(flow, silent, [flow.relations[r] for r in uses]),
                )
            else:
                if uses and derivation == "es_d_rtrl":
                    drops.insert(0, (ES_REASON, ()))
                kind = "approximate" if drops else "exact"
                reason = _join_reasons([text for text, _ in drops])
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
                blocks=blocks,
            )
    return adjust(claims) if adjust is not None else claims


def _relations_by_leaf(flow: Flow) -> dict:
    """``{(path, leaf index): [relation indices]}``: the relations each leaf's gradient is
    pulled back from (:func:`..dataflow.relation_leaves`), in relation order."""
    users: dict = {}
    for r, rel in enumerate(flow.relations):
        for k in rel.trainable_vars:
            for leaf in relation_leaves(rel, k):
                users.setdefault(leaf, {})[r] = None
    return {leaf: list(rs) for leaf, rs in users.items()}


def _memories_by_plain_leaf(flow: Flow) -> dict:
    """``{leaf bit: [memories]}``: the memories each parameter leaf reaches along plain ops."""
    found: dict = {}
    for k, at in enumerate(flow.at_memory):
        for i in bits_of(at[PLAIN]):
            found.setdefault(1 << i, []).append(k)
    return found


def _shared_drops(flow: Flow, uses: list) -> list:
    """A leaf whose relations reach several hidden groups (one weight shared by two layers).

    Conservative: the derivation above tracks each relation's own reach, and the generated
    architectures found a shared elementwise weight between two non-recurrent spiking layers
    claimed exact at a relative error of 1.29 (the second layer reads the first one's previous
    output through the same weight). Until that path has its own rule, such a leaf is never
    claimed exact. The rule is needed: one relation feeding two layers, the upper reading the
    lower's new value and the output reading the upper's previous value, is 0.46 off BPTT and
    nothing else drops a term there (the upper's trace holds the lower's new value fixed;
    ``tests/learn/test_claim_rules.py``).
    """
    groups = {
        tuple(map(str, g.hidden_paths)) for r in uses for g in flow.relations[r].hidden_groups
    }
    if len(groups) < 2:
        return []
    return [
        (
            "the weight is shared by layers of different hidden groups: the terms between its "
            "uses are not tracked",
            tuple(flow.rel_eqn[r] for r in uses),
        )
    ]


#: a claim's reason names at most this many dropped terms (a deep stack's first layer drops
#: the future of every layer above it); ``dropped`` keeps every equation
MAX_NAMED_TERMS = 8


def _join_reasons(texts: list) -> str:
    unique = list(dict.fromkeys(texts))
    if len(unique) > MAX_NAMED_TERMS:
        more = len(unique) - MAX_NAMED_TERMS
        unique = [*unique[:MAX_NAMED_TERMS], f"and {more} more dropped term(s)"]
    return "; ".join(unique)


def _leaf_keys(minfo: Any, path: tuple) -> list:
    state = minfo.retrieved_model_states[path]
    return [key for key, _ in jax.tree_util.tree_flatten_with_path(state.value)[0]]


def _relation_drops(flow: Flow, r: int, bypass: set, seen: dict) -> list:
    """``[(reason, equation indices)]`` for relation ``r`` (empty: its traces are exact).

    ``seen`` keeps the drops that depend only on the state and the bits they name (a deep
    stack's lower layers all drop the same future of each layer above): made once, shared."""
    rel = flow.relations[r]
    mems = flow.memories
    bit = 1 << r
    tracked = flow.bits_of_paths([p for g in rel.hidden_groups for p in g.hidden_paths])
    reach = flow.closure(tracked | flow.y_reaches[r])
    drops: list = []
    for k in bits_of(reach):
        at = flow.at_memory[k]
        target = mems[k].name
        kbit = 1 << k
        if tracked & kbit:
            etp = at[OLD_E] & reach
            if etp:
                eqns = _boundary_eqns(flow, etp, kbit)
                drops.append(
                    (
                        f"drops h→h {_names(mems, etp)} → {target} through {_describe(flow, eqns)}",
                        eqns,
                    )
                )
            coupled = at[OLD_P] & reach
            if coupled:
                eqns = _coupling_eqns(flow, coupled, kbit)
                drops.append(
                    (
                        f"drops the position-mixing h→h term {_names(mems, coupled)} → "
                        f"{target} at {_describe(flow, eqns)}",
                        eqns,
                    )
                )
            reads_new = flow.new_closure[k]  # directly or through other new values
            twice = reads_new & tracked & ~kbit if flow.signal & kbit else 0
            # a state of the group read unperturbed in-step: its signal is the partial one
            # (compiler/perturbation.py), so the path is counted once, by the trace
            # (a reader that also reaches an output sees it perturbed: counted twice,
            # tests/learn/test_claim_rules.py)
            twice &= ~(flow.unperturbed & flow.group_mask.get(mems[k].hidden_path, kbit))
            if twice:
                eqns = flow.reading_new(twice, kbit) or flow.reading_new(at[NEW], kbit)
                drops.append(
                    (
                        f"counts the in-step path {_names(mems, twice)} → {target} twice "
                        f"({target} reads the new value of a state this weight also traces: "
                        "the learning signal carries that path and so does the trace)",
                        eqns,
                    )
                )
            own_group = flow.group_mask.get(mems[k].hidden_path, kbit)
            # the trace holds another group's new value fixed: its past is not followed
            # (tests/learn/test_claim_rules.py)
            stale = sum(
                1 << j for j in bits_of(reads_new & ~own_group) if flow.old_total[j] & reach
            )
            if stale:
                eqns = flow.reading_new(stale, kbit) or flow.reading_new(at[NEW], kbit)
                drops.append(
                    (
                        f"drops the past of {_names(mems, stale)} in {target}'s trace "
                        f"({target} reads the new {_names(mems, stale)} of another hidden "
                        "group; its trace carries only this step's part of it)",
                        eqns,
                    )
                )
            cross = at[OLD_C] & reach & ~own_group
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
            past = (at[OLD_C] | at[OLD_E] | at[OLD_P]) & reach
            if past:
                drops.append(_future_drop(flow, k, past, seen))
        if at[Y_E] & bit:
            eqns = _boundary_eqns_y(flow, bit, kbit, flow.rel_eqn[r])
            through = f" {_describe(flow, eqns)}" if eqns else ""
            drops.append((f"drops y → {target} through other ETP equation(s){through}", eqns))
        if at[Y_P] & bit:
            eqns = flow.eqns_where(Y_P, bit, kbit) or flow.eqns_where(Y_C, bit, kbit)
            drops.append(
                (
                    f"drops the position-mixing part of the y → {target} tail "
                    f"({_describe(flow, eqns)})",
                    eqns,
                )
            )
        if at[Y_C] & bit and not tracked & kbit:
            eqns = (flow.rel_eqn[r],)
            drops.append(
                (f"drops y → {target} ({target} is not in this relation's hidden groups)", eqns)
            )
    old_out = flow.at_output[OLD_C] | flow.at_output[OLD_E] | flow.at_output[OLD_P]
    untracked_read = old_out & reach & ~tracked
    tracked_unhandled = sum(
        1 << k for k in bits_of(old_out & tracked) if mems[k].hidden_path not in bypass
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


def _future_drop(flow: Flow, k: int, past: int, seen: dict) -> tuple:
    """State ``k``, outside the relation's traced groups, reads the previous values ``past``
    of states the relation reaches: the effect on its future states is dropped."""
    key = ("future", k, past)
    if key not in seen:
        mems = flow.memories
        target = mems[k].name
        what = (
            "a state that is not a HiddenState"
            if mems[k].hidden_path is None
            else ("outside this weight's hidden groups")
        )
        seen[key] = (
            f"drops the effect on {target}'s future states ({target} reads "
            f"{_names(mems, past)} from the previous step; {what})",
            flow.reading(past, 1 << k),
        )
    return seen[key]


def _silent_states(flow: Flow, r: int, bypass: set) -> int:
    """The states relation ``r`` traces when no learning signal ever meets its traces (their
    online contribution is zero by structure), else 0.

    The online gradient of ``r`` is the traces of its states ``T_r`` contracted with their
    learning signal (the same-step derivative of the loss by their new values) plus the bypass
    term (the output's read of their previous values). When no state of ``T_r`` reaches an
    output in the step it is written (only through another state's previous value, a step
    later) and the output reads none of their previous values through a bypass, both are 0
    for every input.
    """
    rel = flow.relations[r]
    tracked = flow.bits_of_paths([p for g in rel.hidden_groups for p in g.hidden_paths])
    zero = set(rel.zero_tail_groups)
    # a group whose tail is zero by structure (D_f = 0) keeps a zero trace: neither its
    # learning signal nor an output's read of its previous value carries anything
    live = flow.bits_of_paths(
        [p for g in rel.hidden_groups if g.index not in zero for p in g.hidden_paths]
    )
    if not live:
        return tracked  # D_f = 0 by structure: every trace of the relation stays 0
    old_out = flow.at_output[OLD_C] | flow.at_output[OLD_E] | flow.at_output[OLD_P]
    bypassed = sum(
        1 << k for k in bits_of(old_out & live) if flow.memories[k].hidden_path in bypass
    )
    return 0 if live & (flow.signal | bypassed) else tracked


def _silent_reason(flow: Flow, silent: list, relations: list) -> str:
    if all(set(r.zero_tail_groups) >= {g.index for g in r.hidden_groups} for r in relations):
        names = _names(flow.memories, _or(silent))
        return (
            f"zero by structure: the y → {names} tail is invariant to shifting y along the "
            "positions it mixes (a layer normalisation), so its all-ones derivative D_f "
            "(what the trace accumulates) is 0 for every input: the trace stays 0"
        )
    states = 0
    for bits in silent:
        states |= bits
    # states whose trace is zero by structure (a normalising tail) are explained apart
    flat = flow.bits_of_paths(
        [
            p
            for r in relations
            for g in r.hidden_groups
            if g.index in set(r.zero_tail_groups)
            for p in g.hidden_paths
        ]
    )
    states &= ~flat
    tail = (
        f"; the trace of {_names(flow.memories, flat)} stays 0 (its y → tail is invariant to "
        "shifting y along the positions it mixes, a layer normalisation: D_f = 0)"
        if flat
        else ""
    )
    readers = sum(
        1 << k
        for k in range(len(flow.memories))
        if (flow.old_total[k] | flow.new_closure[k]) & states and not states >> k & 1
    )
    names = _names(flow.memories, states)
    via = f", through {_names(flow.memories, readers)}" if readers else ""
    # the ops those later states read it at: the dropped term (a weight op, issue 41)
    ops = flow.reading(states, readers) or flow.reading_new(states, readers) if readers else ()
    verb = "reads" if len(bits_of(readers)) == 1 else "read"
    via += f", which {verb} it at {_describe(flow, ops)}" if ops else ""
    return (
        f"zero by structure: {names} (what its trace follows) reaches the loss only in a later "
        f"step than the one it is written in{via}, and no output reads its previous value: no "
        f"learning signal ever meets the trace{tail}"
    )


def _or(bits: list) -> int:
    out = 0
    for b in bits:
        out |= b
    return out


def _plain_drops(flow: Flow, leaf_bit: int, key: str, reached: dict) -> list:
    drops = []
    for k in reached.get(leaf_bit, ()):
        eqns = flow.eqns_where(PLAIN, leaf_bit, 1 << k)
        target = flow.memories[k].name
        drops.append(
            (
                f"drops {key} → {target} through plain op(s) "
                f"({_describe(flow, eqns)}; not an ETP primitive)",
                eqns,
            )
        )
    return drops


def _boundary_eqns(flow: Flow, old_bits: int, target: int) -> tuple:
    return flow.eqns_where((OLD_C, OLD_E, OLD_P), old_bits, target, keep=_Boundary(flow))


class _EqnTest:
    """A test of equation ``i`` of one flow; equal for the same flow and test, so
    :meth:`Flow.eqns_where` remembers its answers across relations."""

    def __init__(self, flow: Flow) -> None:
        self.eqns = flow.eqns

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _EqnTest) and type(other) is type(self) and other.eqns is self.eqns

    def __hash__(self) -> int:
        return hash((type(self), id(self.eqns)))


class _Boundary(_EqnTest):
    """An ETP boundary: an ETP primitive that is not gradient-enabled."""

    def __call__(self, i: int) -> bool:
        from etp_viz.ops import is_etp_enable_gradient_primitive, is_etp_primitive

        prim = self.eqns[i].primitive
        return is_etp_primitive(prim) and not is_etp_enable_gradient_primitive(prim)


class _Coupling(_EqnTest):
    """An equation that moves or mixes positions."""

    def __call__(self, i: int) -> bool:
        eqn = self.eqns[i]
        return not is_position_preserving(eqn, [_compat.is_var(v) for v in eqn.invars], {})


def _boundary_eqns_y(flow: Flow, y_bit: int, target: int, own: int) -> tuple:
    from etp_viz.ops import is_etp_primitive

    return tuple(
        i
        for i in flow.eqns_where(Y_C, y_bit, target, exclude=own)
        + flow.eqns_where(Y_E, y_bit, target, exclude=own)
        if is_etp_primitive(flow.eqns[i].primitive)
    )[:MAX_NAMED_EQNS]


def _coupling_eqns(flow: Flow, old_bits: int, target: int) -> tuple:
    return flow.eqns_where(OLD_C, old_bits, target, keep=_Coupling(flow))


def _describe(flow: Flow, eqns: tuple) -> str:
    """The equations ``eqns`` as the reasons name them: ``rnn.W.weight (etp_mv, equation 4)``
    for an op on a weight (a relation's, or an ETP op no relation keeps: a GRU's ``Wr``),
    ``mul (equation 9)`` otherwise; ``the step`` for none."""
    if not eqns:
        return "the step"
    parts = []
    for i in eqns:
        prim = flow.eqns[i].primitive.name
        name = flow.rel_name.get(i) or _weight_of(flow, i)
        parts.append(f"{name} ({prim}, equation {i})" if name else f"{prim} (equation {i})")
    return ", ".join(parts)


def _weight_of(flow: Flow, index: int) -> str:
    """The dotted path of the weight an ETP equation applies, if it reads one directly."""
    from etp_viz.ops import is_etp_primitive

    eqn = flow.eqns[index]
    if not is_etp_primitive(eqn.primitive):
        return ""
    weights = flow.minfo.invar_to_weight_path
    path = next((weights[v] for v in eqn.invars if _compat.is_var(v) and v in weights), None)
    return ".".join(map(str, path)) if path is not None else ""


def _names(mems: list, bits: int) -> str:
    names = [mems[k].name for k in bits_of(bits) if k < len(mems)]
    return names[0] if len(names) == 1 else "{" + ", ".join(names) + "}"


def _records_by_weight(graph: Any) -> dict:
    """``{weight path: message}`` of the first record naming each weight that explains why
    it is not learned (not an inclusion or a bypass)."""
    found: dict = {}
    for record in graph.diagnostics:
        if record.weight_path is not None:
            if record.kind.value not in _POSITIVE_KINDS:
                found.setdefault(tuple(record.weight_path), record.message)
    return found


#: records that say a weight *is* learned (never the reason of a ``none`` claim)
_POSITIVE_KINDS = ("relation_included", "output_bypasses_hidden", "op_lifted")


def _none_reason(records: dict, path: tuple, drops: list) -> str:
    if tuple(path) in records:
        return records[tuple(path)]
    if drops:
        return "no ETP relation traces it: " + "; ".join(text for text, _ in drops)
    return "it reaches no hidden state through an ETP primitive and no model output"
