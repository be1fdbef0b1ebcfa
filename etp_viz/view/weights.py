"""Weights panel data: every ``ParamState`` with status, reason, suggested fix and its path."""

from __future__ import annotations

import dataclasses
from typing import Any

import brainstate
import jax

from .nodes import aval_text, path_text
from .plain import equation_names, owners, weight_summary
from .types import WeightInfo

#: diagnostic kind -> the fix we suggest for a weight it names (first match wins)
FIXES: dict[str, str] = {
    "relation_excluded_weight_to_weight": (
        "route the op's output directly into a hidden state (element-wise ops only between "
        "them) or learn it by BPTT"
    ),
    "primitive_inside_control_flow": "move the op out of the loop / learn it by BPTT",
    "relation_excluded_shape_mismatch": (
        "make the op's output broadcast-compatible with the hidden state it feeds, or learn "
        "it by BPTT"
    ),
    "relation_excluded_no_paramstate": "hold the weight in a brainstate.ParamState",
    "trainable_invar_not_paramstate": "hold the weight in a brainstate.ParamState",
    "relation_tail_couples_positions": (
        "keep the path from the op to the hidden state element-wise (no reshapes/sums across "
        "positions), or learn it by BPTT"
    ),
    "relation_excluded_non_temporal": (
        "its output reaches no hidden state: use it as a readout of the model output, or "
        "learn it by BPTT"
    ),
}
PLAIN_MATMUL_FIX = "use etp_viz.matmul instead of `@`"
NO_ETP_FIX = "use an ETP primitive (etp_viz.matmul, etp_viz.element_wise, ...) for this weight"
NOT_ETP_REASON = "not used by an ETP primitive"
_MATMUL_PRIMITIVES = {"dot_general", "matmul", "dot"}
_READOUT_KINDS = ("output_bypasses_hidden", "relation_excluded_non_temporal", "readout")
_LEVEL_ORDER = {"error": 0, "warning": 1, "info": 2}


def _param_states(minfo: Any) -> list[tuple[str, Any]]:
    states = [(path_text(p), st) for p, st in minfo.retrieved_model_states.items()]
    return [(p, st) for p, st in states if isinstance(st, brainstate.ParamState)]


def _state_aval(state: Any) -> str:
    flat, _ = jax.tree_util.tree_flatten_with_path(state.value)
    if len(flat) == 1 and not flat[0][0]:
        return aval_text(flat[0][1])
    parts = [f"{_key_text(k)}: {aval_text(v)}" for k, v in flat]
    return "{" + ", ".join(parts) + "}"


def _key_text(keypath: Any) -> str:
    return jax.tree_util.keystr(keypath).strip("[].'\"").replace("']['", ".")


def classify_weights(ann: Any, relations, readouts, diagnostics) -> list[WeightInfo]:
    """One :class:`WeightInfo` per ``ParamState`` of the model, in the model's order."""
    invars_of = {path_text(k): v for k, v in ann.minfo.weight_path_to_invars.items()}
    records = list(getattr(ann.graph, "diagnostics", ()) or ())
    readout_paths = {r.path: r for r in readouts}
    has_readout_info = getattr(ann.graph, "readout_params", None) is not None
    # weight path -> its diagnostics / relations, grouped once (not one scan per weight)
    diagnostics_of: dict[str, list] = {}
    for d in diagnostics:
        diagnostics_of.setdefault(d.weight_path, []).append(d)
    relations_of: dict[str, list] = {}
    for r in relations:
        for weight_path in r.weight_paths:
            relations_of.setdefault(weight_path, []).append(r)
    out = []
    plain: list[dict[str, Any]] = []  # what each weight's plain-language summary needs
    for path, state in _param_states(ann.minfo):
        invars = invars_of.get(path, [])
        consumers = [i for v in invars for i in ann.minfo.def_use.consumers.get(v, [])]
        mine = list(diagnostics_of.get(path, ()))
        mine.sort(key=lambda d: (_LEVEL_ORDER.get(d.level, 3), d.index))
        contexts = {d.index: dict(getattr(records[d.index], "context", {}) or {}) for d in mine}
        rels = relations_of.get(path, [])
        node_ids = [f"p:{path}"] if f"p:{path}" in ann.builder.nodes else []
        node_ids += [r.node for r in rels if r.node] + list(ann.eqn_ids(consumers))
        kinds = [d.kind for d in mine]
        path_nodes: tuple[str, ...] = ()
        boundary: tuple[str, ...] = ()
        fix = None
        groups: tuple[int, ...] = ()
        if rels:
            status = "online"
            groups = tuple(sorted({g for r in rels for g in r.groups}))
            path_nodes = tuple(
                dict.fromkeys(n for r in rels for n in (r.node, *r.slice_nodes) if n)
            )
            reason = next(
                (d.message for d in mine if d.kind == "relation_included"),
                f"learned online (group {', '.join(map(str, groups))})",
            )
        elif path in readout_paths or (
            not has_readout_info and "relation_excluded_non_temporal" in kinds
        ):
            status = "exact"
            path_nodes = readout_paths[path].path_nodes if path in readout_paths else ()
            preferred = sorted(mine, key=lambda d: d.kind != "output_bypasses_hidden")
            reason = next(
                (d.message for d in preferred if d.kind in _READOUT_KINDS),
                "readout: reaches a model output without crossing a new hidden value "
                "(exact same-step gradient)",
            )
        else:
            status = "not_learned"
            first = next((d for d in mine if d.kind != "relation_included"), None)
            if first is not None:
                reason = first.message
                context = contexts[first.index]
                path_nodes = ann.with_nested(ann.eqn_ids(context.get("path_eqn_indices", ())))
                boundary = ann.eqn_ids(context.get("blocking_eqn_indices", ()))
            elif not invars:
                reason = "not read by the model's step"
            else:
                reason = NOT_ETP_REASON
                path_nodes = ann.eqn_ids(consumers)
            fix = next((FIXES[k] for k in kinds if k in FIXES), None)
            if fix is None and invars:
                prims = {ann.minfo.jaxpr.eqns[i].primitive.name for i in consumers}
                fix = PLAIN_MATMUL_FIX if prims & _MATMUL_PRIMITIVES else NO_ETP_FIX
            if path_nodes and boundary:
                path_nodes = tuple(dict.fromkeys((*path_nodes, *boundary)))
        claim = weight_claim(ann, path)
        plain.append(
            {
                "diagnostic_kinds": kinds,
                "hidden_paths": tuple(dict.fromkeys(h for r in rels for h in r.hidden_paths)),
                "not_read": status == "not_learned" and not invars,
                "not_etp": status == "not_learned" and reason == NOT_ETP_REASON,
            }
        )
        out.append(
            WeightInfo(
                **claim,
                path=path,
                status=status,
                groups=groups,
                reason=reason,
                fix=fix,
                aval=_state_aval(state),
                node_ids=tuple(dict.fromkeys(node_ids)),
                path_nodes=tuple(path_nodes),
                path_edges=ann.edges_among((*node_ids[:1], *path_nodes)),
                boundary_nodes=tuple(boundary),
                diagnostics=tuple(d.index for d in mine),
            )
        )
    return add_summaries(out, plain)


def add_summaries(weights: list[WeightInfo], plain: list[dict[str, Any]]) -> list[WeightInfo]:
    """Each weight with its plain-language ``summary`` (``plain.weight_summary``); a blocked
    weight names the weights whose ops block it."""
    owner = owners(weights)
    names = equation_names(owner)
    out = []
    for w, extra in zip(weights, plain, strict=True):
        blocked_by = tuple(dict.fromkeys(owner[n] for n in w.boundary_nodes if n in owner))
        summary = weight_summary(
            w.status,
            w.claim,
            leaf_claims=w.leaf_claims,
            blocked_by=blocked_by,
            names=names,
            **extra,
        )
        out.append(dataclasses.replace(w, summary=summary))
    return out


#: dropped-term equations drawn per weight (the claim's ``dropped`` keeps them all)
MAX_DROPPED_NODES = 12
#: worst first: what a ParamState's combined claim is when its leaves differ
_CLAIM_ORDER = {"none": 0, "approximate": 1, "exact": 2}


def weight_claim(ann: Any, path: str) -> dict[str, Any]:
    """The :class:`WeightInfo` claim fields of one ``ParamState`` (its leaves' claims).

    A ParamState's claim is its leaves' worst (``none`` < ``approximate`` < ``exact``); the
    reason names the leaves when they differ.
    """
    leaves = ann.claims_of(path)
    if not leaves:
        return {}
    worst, reason = combine_leaf_claims(leaves)
    dropped = [int(i) for _, c in leaves for i in getattr(c, "dropped", ())]
    # the first few (in equation order): a deep stack's first layer drops a term in every
    # layer above it, and the graph draws each weight's terms only when it is selected
    dropped_nodes = ann.eqn_ids(sorted(set(dropped))[:MAX_DROPPED_NODES])
    return {
        "claim": worst,
        "claim_reason": reason,
        "leaf_claims": tuple((k, c.kind, c.reason) for k, c in leaves),
        "dropped_nodes": dropped_nodes,
        "dropped_edges": ann.edges_into(dropped_nodes),
    }


def combine_leaf_claims(leaves: list[tuple[str, Any]]) -> tuple[str, str]:
    """``(kind, reason)`` of a ParamState from its leaves' ``[(leaf path, claim)]``: the worst
    kind, the reasons of the leaves that have it, and each leaf's kind when they differ."""
    kinds = {c.kind for _, c in leaves}
    worst = min(kinds, key=lambda k: _CLAIM_ORDER.get(k, -1))
    reasons = list(dict.fromkeys(c.reason for _, c in leaves if c.kind == worst and c.reason))
    if len(kinds) > 1:
        reasons.append(", ".join(f"{k}: {c.kind}" for k, c in leaves))
    return worst, "; ".join(reasons)


def claims_by_weight(claims: Any) -> dict[str, tuple[str, str]]:
    """``{ParamState path: (kind, reason)}`` from a learner's leaf claims
    (``graph.gradient_claims(alg)``): what compare mode puts beside each weight, one entry
    per algorithm."""
    grouped: dict[str, list] = {}
    for key, claim in claims.items():
        owner = path_text(claim.weight_path) if claim.weight_path else key
        grouped.setdefault(owner, []).append((key, claim))
    return {path: combine_leaf_claims(leaves) for path, leaves in grouped.items()}


_STATUS_WORDS = {"online": "online", "exact": "readout", "not_learned": "not learned"}


def status_text(status: str, claim: str = "") -> str:
    """What the weights panel says: ``"online · exact"``, ``"online · approximate"``,
    ``"readout · exact"``, ``"not learned"`` (without a claim: the bare status).

    >>> status_text("online", "approximate"), status_text("not_learned", "none")
    ('online · approximate', 'not learned')
    """
    if status == "not_learned":
        return "not learned"
    if not claim or claim == "none":
        return status
    return f"{_STATUS_WORDS.get(status, status)} · {claim}"
