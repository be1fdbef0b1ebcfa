"""Weights panel data: every ``ParamState`` with status, reason, suggested fix and its path.

Status, reason, fix and claim are the compiler's verdict (``graph.verdicts(algorithm)``,
:mod:`etp_viz.compiler.claims.verdict`); this module adds what only a view has: node ids, the
path drawn to the boundary that blocked a weight, the dropped terms' nodes and the plain
summary.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import brainstate
import jax

from etp_viz.compiler.claims import combine_leaf_claims
from etp_viz.compiler.claims.plain import reason_sentences
from etp_viz.compiler.claims.verdict import (
    NOT_ETP_REASON,
    NOT_READ_REASON,
    WeightVerdict,
    claims_by_param,
    status_text,
)

from .nodes import aval_text, path_text
from .plain import equation_names, owners, weight_detail, weight_summary
from .types import WeightInfo


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
    """One :class:`WeightInfo` per ``ParamState`` of the model, in the model's order: the
    compiler's verdict, with the nodes that draw it."""
    invars_of = {path_text(k): v for k, v in ann.minfo.weight_path_to_invars.items()}
    records = list(ann.graph.diagnostics)
    readout_paths = {r.path: r for r in readouts}
    verdicts = weight_verdicts(ann)
    out = []
    plain: list[dict[str, Any]] = []  # what each weight's plain-language summary needs
    for path, state in _param_states(ann.minfo):
        invars = invars_of.get(path, [])
        consumers = [i for v in invars for i in ann.minfo.def_use.consumers.get(v, [])]
        verdict = verdicts.get(path) or _unknown(path, invars)
        kinds = [diagnostics[i].kind for i in verdict.diagnostics]
        rels = [relations[r] for r in verdict.relations if r < len(relations)]
        node_ids = [f"p:{path}"] if f"p:{path}" in ann.builder.nodes else []
        node_ids += [r.node for r in rels if r.node] + list(ann.eqn_ids(consumers))
        path_nodes: tuple[str, ...] = ()
        boundary: tuple[str, ...] = ()
        if verdict.online:
            path_nodes = tuple(
                dict.fromkeys(n for r in rels for n in (r.node, *r.slice_nodes) if n)
            )
        elif verdict.readout:
            path_nodes = readout_paths[path].path_nodes if path in readout_paths else ()
        elif verdict.reason_record is not None:
            context = dict(records[verdict.reason_record].context or {})
            path_nodes = ann.with_nested(ann.eqn_ids(context.get("path_eqn_indices", ())))
            boundary = ann.eqn_ids(context.get("blocking_eqn_indices", ()))
            if path_nodes and boundary:
                path_nodes = tuple(dict.fromkeys((*path_nodes, *boundary)))
        elif invars:
            path_nodes = ann.eqn_ids(consumers)
        plain.append(
            {
                "diagnostic_kinds": kinds,
                "hidden_paths": tuple(dict.fromkeys(h for r in rels for h in r.hidden_paths)),
                "not_read": not verdict.learned and not invars,
                "not_etp": not verdict.learned and verdict.reason == NOT_ETP_REASON,
            }
        )
        claim = weight_claim(ann, verdict)
        out.append(
            WeightInfo(
                **claim,
                status_text=status_text(verdict.code, claim.get("claim", "")),
                path=path,
                status=verdict.code,
                groups=verdict.groups,
                reason=verdict.reason,
                fix=verdict.fix,
                aval=_state_aval(state),
                node_ids=tuple(dict.fromkeys(node_ids)),
                path_nodes=tuple(path_nodes),
                path_edges=ann.edges_among((*node_ids[:1], *path_nodes)),
                boundary_nodes=tuple(boundary),
                diagnostics=verdict.diagnostics,
            )
        )
    return add_summaries(out, plain)


def weight_verdicts(ann: Any) -> dict[str, WeightVerdict]:
    """``{dotted path: WeightVerdict}`` with the claims of the view's ``algorithm`` option
    (none for ``algorithm=None`` or a graph that makes none)."""
    algorithm = ann.options.get("algorithm")
    return {v.name: v for v in ann.graph.verdicts(algorithm or None).values()}


def _unknown(path: str, invars: Any) -> WeightVerdict:
    """A weight the graph gave no verdict for (a partial graph): not learned."""
    reason = NOT_ETP_REASON if invars else NOT_READ_REASON
    return WeightVerdict(tuple(path.split(".")), "not_learned", reason=reason)


def add_summaries(weights: list[WeightInfo], plain: list[dict[str, Any]]) -> list[WeightInfo]:
    """Each weight with its plain-language ``summary`` (``plain.weight_summary``) and its
    ``detail`` (the compiler's reason and claim reason, codes and all: the hover text); a
    blocked weight names the weights whose ops block it."""
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
            reason=w.reason,
            **extra,
        )
        detail = weight_detail(w.reason, w.claim, w.claim_reason)
        out.append(dataclasses.replace(w, summary=summary, detail=detail))
    return out


#: dropped-term equations drawn per weight (the claim's ``dropped`` keeps them all)
MAX_DROPPED_NODES = 12


def weight_claim(ann: Any, verdict: WeightVerdict) -> dict[str, Any]:
    """The :class:`WeightInfo` claim fields of one ``ParamState``: its verdict's claim (the
    worst of its leaves'), every leaf's, and the nodes of the terms it drops."""
    if not verdict.leaf_claims:
        return {}
    dropped = [int(i) for _, c in verdict.leaf_claims for i in c.dropped]
    # the first few (in equation order): a deep stack's first layer drops a term in every
    # layer above it, and the graph draws each weight's terms only when it is selected
    dropped_nodes = ann.eqn_ids(sorted(set(dropped))[:MAX_DROPPED_NODES])
    return {
        "claim": verdict.claim,
        "claim_reason": verdict.claim_reason,
        "leaf_claims": tuple((k, c.kind, c.reason) for k, c in verdict.leaf_claims),
        "block_claims": _block_claims(verdict),
        "dropped_nodes": dropped_nodes,
        "dropped_edges": ann.edges_into(dropped_nodes),
    }


def _block_claims(verdict: WeightVerdict) -> tuple[tuple[str, str, str], ...]:
    """Each block of a fused gate weight once (its weight and bias leaves share the blocks):
    where, the claim word and the reason in plain words."""
    found: dict[tuple[str, str], str] = {}
    for _, claim in verdict.leaf_claims:
        for block in claim.blocks:
            text = " ".join(reason_sentences(block.reason))
            found.setdefault((block.where(), block.kind), text)
    return tuple((where, kind, text) for (where, kind), text in found.items())


def claims_by_weight(claims: Any) -> dict[str, tuple[str, str]]:
    """``{ParamState path: (kind, reason)}`` from a learner's leaf claims
    (``graph.gradient_claims(alg)``): what compare mode puts beside each weight, one entry
    per algorithm."""
    return {
        path_text(path): combine_leaf_claims(leaves)
        for path, leaves in claims_by_param(claims).items()
    }


def with_learner_claims(vm: dict, learner: Any) -> dict:
    """The view model with each weight's ``claim`` / ``claim_reason`` from a learner instance
    (RTRL, SnAp, UORO, BPTT, a user's learner: ``learner.gradient_claims()``), for a view
    built without an algorithm name; unchanged for a learner that states no claims."""
    try:
        claims = claims_by_weight(learner.gradient_claims())
    except Exception:  # noqa: BLE001 - a learner that states no claims: none shown
        return vm
    weights = []
    for weight in vm.get("weights") or []:
        kind, reason = claims.get(weight["path"], (None, ""))
        if kind:
            text = status_text(weight["status"], kind)
            weight = {**weight, "claim": kind, "claim_reason": reason, "status_text": text}
        weights.append(weight)
    return {**vm, "weights": weights}


__all__ = [
    "add_summaries",
    "classify_weights",
    "claims_by_weight",
    "combine_leaf_claims",
    "status_text",
    "weight_claim",
    "weight_verdicts",
    "with_learner_claims",
]
