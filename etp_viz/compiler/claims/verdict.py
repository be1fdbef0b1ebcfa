"""One verdict per weight: is this ``ParamState`` learned, how, how well, why and what to do.

The compiler decides it once, in :func:`find_weight_verdicts` (``compile_etrace_graph``), and
stores it on the graph (``graph.weight_verdicts``); ``graph.verdicts(algorithm)`` adds an
algorithm's claim (cached per algorithm). ``graph.explain()``, ``graph.weight_status``,
``alg.learning_status``, ``etp_viz.verify`` and the explorer's weights panel all read it, so a
weight has one status, one claim and one reason everywhere.

The words are defined once, in ``docs/semantics.md`` ("Verdict"):

status (how it is learned, :data:`STATUSES`)
    ``online`` (an ETP relation traces it), ``readout`` (a path to a model output crosses no
    new hidden value: exact same-step gradient), ``online+readout`` (both) or ``not_learned``
    (neither: it gets no gradient). Shown as :data:`STATUS_WORDS` (``not learned``).
claim (how well, per algorithm, :data:`~.records.CLAIM_KINDS`)
    ``exact``, ``approximate`` or ``none``: the worst of its leaves' claims.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..diagnostics import DiagnosticCollector, DiagnosticKind, DiagnosticLevel
from . import gradient_claims
from .records import CLAIM_KINDS, combine_leaf_claims

__all__ = [
    "FIXES",
    "STATUSES",
    "STATUS_WORDS",
    "WeightVerdict",
    "attach_claims",
    "claims_by_param",
    "find_weight_verdicts",
    "status_text",
    "verdicts_of",
]

#: how a weight is learned (the one vocabulary; ``docs/semantics.md``, "Verdict")
STATUSES = ("online", "online+readout", "readout", "not_learned")
#: what a reader sees for each status
STATUS_WORDS = {
    "online": "online",
    "online+readout": "online+readout",
    "readout": "readout",
    "not_learned": "not learned",
}
#: status -> the code ``graph.weight_status`` and the view model's ``WeightInfo.status`` carry
#: (a JSON contract older than the verdict: a readout is ``"exact"``)
STATUS_CODES = {
    "online": "online",
    "online+readout": "online",
    "readout": "exact",
    "not_learned": "not_learned",
}

#: diagnostic kind -> the fix suggested for a weight it names (first match wins)
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
NOT_READ_REASON = "not read by the model's step"
READOUT_REASON = (
    "readout: reaches a model output without crossing a new hidden value (exact same-step gradient)"
)
_MATMUL_PRIMITIVES = {"dot_general", "matmul", "dot"}
#: records that explain a readout, the first preferred
_READOUT_KINDS = ("output_bypasses_hidden", "relation_excluded_non_temporal", "readout")
_LEVEL_ORDER = {"error": 0, "warning": 1, "info": 2}


@dataclasses.dataclass(frozen=True)
class WeightVerdict:
    """The compiler's verdict on one ``ParamState``.

    Attributes
    ----------
    path : tuple
        The ``ParamState``'s path (``("rnn", "W", "weight")``).
    status : str
        One of :data:`STATUSES`: ``"online"``, ``"online+readout"``, ``"readout"``,
        ``"not_learned"``.
    groups : tuple of int
        The hidden groups (``graph.hidden_groups`` indices) its relations feed.
    relations : tuple of int
        Its relations (``graph.hidden_param_op_relations`` indices), weight normalisation's
        ``v`` and ``g`` included (the relation's trainable input is computed from them).
    reason : str
        Why this status, in the compiler's words (the diagnostic it quotes, if any).
    fix : str or None
        The suggested fix for a weight that is not learned.
    diagnostics : tuple of int
        The ``graph.diagnostics`` records naming it, most severe first.
    reason_record : int or None
        The record ``reason`` quotes.
    algorithm, claim, claim_reason : str
        With an algorithm (``graph.verdicts(algorithm)``): its name, the worst claim of the
        weight's leaves (``"exact"``, ``"approximate"``, ``"none"``; ``""`` when it makes
        none) and the reasons of the leaves that have it.
    leaf_claims : tuple of (str, GradientClaim)
        Every leaf's claim, in leaf order.

    Examples
    --------
    >>> verdict = graph.verdicts("d_rtrl")[("rnn", "W", "weight")]  # doctest: +SKIP
    >>> verdict.status, verdict.claim, verdict.text                  # doctest: +SKIP
    ('online', 'approximate', 'online · approximate')
    """

    path: tuple
    status: str
    groups: tuple = ()
    relations: tuple = ()
    reason: str = ""
    fix: str | None = None
    diagnostics: tuple = ()
    reason_record: int | None = None
    algorithm: str = ""
    claim: str = ""
    claim_reason: str = ""
    leaf_claims: tuple = ()

    @property
    def name(self) -> str:
        """The dotted path (``"rnn.W.weight"``)."""
        return ".".join(map(str, self.path))

    @property
    def online(self) -> bool:
        return self.status in ("online", "online+readout")

    @property
    def readout(self) -> bool:
        return self.status in ("readout", "online+readout")

    @property
    def learned(self) -> bool:
        return self.status != "not_learned"

    @property
    def code(self) -> str:
        """The status as ``graph.weight_status`` and the view model write it."""
        return STATUS_CODES[self.status]

    @property
    def text(self) -> str:
        """What a reader sees: ``"online · exact"``, ``"readout · exact"``, ``"not learned"``."""
        return status_text(self.status, self.claim)

    def line(self) -> str:
        """One line for ``explain()``: name, status and claim, groups, reason and fix."""
        groups = f" groups={list(self.groups)}" if self.groups else ""
        if not self.learned:
            why = self.reason
        else:
            why = self.claim_reason if self.claim in ("approximate", "none") else ""
        fix = f" (fix: {self.fix})" if self.fix else ""
        return f"{self.name}: {self.text}{groups}" + (f" -- {why}" if why else "") + fix


def status_text(status: str, claim: str = "") -> str:
    """A status (a :data:`STATUSES` word or a ``weight_status`` code) with its claim, in the
    words a reader sees: ``"online · exact"``, ``"online · approximate"``, ``"readout ·
    exact"``, ``"not learned"`` (without a claim, or a ``none`` claim: the bare status).

    >>> status_text("online", "approximate"), status_text("exact"), status_text("not_learned")
    ('online · approximate', 'readout', 'not learned')
    """
    word = STATUS_WORDS.get(status) or STATUS_WORDS.get(_FROM_CODE.get(status, ""), status)
    if word == STATUS_WORDS["not_learned"] or not claim or claim == "none":
        return word
    return f"{word} · {claim}"


_FROM_CODE = {"exact": "readout"}


def find_weight_verdicts(
    minfo: Any, relations: Any, readouts: dict, diagnostics: DiagnosticCollector
) -> dict:
    """``{path: WeightVerdict}`` for every ``ParamState`` of the model, in compiled order.

    A weight that is neither online nor a readout and that no record names gets a
    ``PARAM_NOT_USED_BY_ETP`` WARNING first, so every ``ParamState`` is accounted for (after
    the records of ``lift=True``: each lifted op, each op on a parameter that did not lift).
    """
    from ..lift import report_lifting

    report_lifting(minfo, diagnostics)
    online = _relations_of(relations)
    named = {tuple(r.weight_path) for r in diagnostics.records if r.weight_path is not None}
    for path, leaves in minfo.weight_path_to_invars.items():
        if path in online or path in readouts or tuple(path) in named:
            continue
        uses = sorted({i for v in leaves for i in minfo.def_use.consumers.get(v, ())})
        diagnostics.emit(
            DiagnosticKind.PARAM_NOT_USED_BY_ETP,
            DiagnosticLevel.WARNING,
            f"ParamState {'.'.join(map(str, path))} feeds no ETP primitive and no model "
            "output directly, so it gets no online gradient. Use an etp_viz.ops "
            "primitive (e.g. etp_viz.matmul) where it is applied, or compile with "
            "lift=True to lift its plain ops.",
            weight_path=path,
            eqn_indices=uses,
        )
    records = list(diagnostics.records)
    by_weight: dict = {}
    for index, record in enumerate(records):
        if record.weight_path is not None:
            by_weight.setdefault(tuple(record.weight_path), []).append(index)
    verdicts = {}
    for path, leaves in minfo.weight_path_to_invars.items():
        mine = sorted(by_weight.get(tuple(path), ()), key=lambda i: (_level(records[i]), i))
        rels = online.get(path, ())
        groups = tuple(sorted({g.index for r in rels for g in relations[r].hidden_groups}))
        verdict = WeightVerdict(
            path=tuple(path),
            status=_status(bool(rels), path in readouts),
            groups=groups,
            relations=tuple(rels),
            diagnostics=tuple(mine),
        )
        verdicts[tuple(path)] = _explained(verdict, records, minfo, leaves)
    return verdicts


def _relations_of(relations: Any) -> dict:
    """``{path: relation indices}``: the relations whose trainable inputs are the weight or
    are computed from it (weight normalisation: ``v`` and ``g``)."""
    found: dict = {}
    for index, rel in enumerate(relations):
        paths = [tuple(p) for p in rel.trainable_paths.values()]
        leaves = getattr(rel, "trainable_all_leaves", {}) or {}
        paths += [tuple(p) for found_leaves in leaves.values() for p, _ in found_leaves]
        for path in dict.fromkeys(paths):
            found.setdefault(path, []).append(index)
    return found


def _status(online: bool, readout: bool) -> str:
    if online:
        return "online+readout" if readout else "online"
    return "readout" if readout else "not_learned"


def _level(record: Any) -> int:
    level = getattr(record.level, "name", record.level)
    return _LEVEL_ORDER.get(str(level).lower(), 3)


def _kind(record: Any) -> str:
    return str(getattr(record.kind, "value", record.kind)).lower()


def _explained(verdict: WeightVerdict, records: list, minfo: Any, leaves: Any) -> WeightVerdict:
    """The verdict with its reason (the record it quotes) and, when not learned, its fix."""
    mine = [(i, records[i]) for i in verdict.diagnostics]
    if verdict.online:
        first = next((i for i, r in mine if _kind(r) == "relation_included"), None)
        default = f"learned online (group {', '.join(map(str, verdict.groups))})"
    elif verdict.readout:
        preferred = sorted(mine, key=lambda ir: _kind(ir[1]) != "output_bypasses_hidden")
        first = next((i for i, r in preferred if _kind(r) in _READOUT_KINDS), None)
        default = READOUT_REASON
    else:
        first = next((i for i, r in mine if _kind(r) != "relation_included"), None)
        default = NOT_READ_REASON if not leaves else NOT_ETP_REASON
    reason = records[first].message if first is not None else default
    fix = None
    if not verdict.learned:
        fix = next((FIXES[_kind(r)] for _, r in mine if _kind(r) in FIXES), None)
        if fix is None and leaves:
            uses = {i for v in leaves for i in minfo.def_use.consumers.get(v, ())}
            prims = {minfo.jaxpr.eqns[i].primitive.name for i in uses}
            fix = PLAIN_MATMUL_FIX if prims & _MATMUL_PRIMITIVES else NO_ETP_FIX
    return dataclasses.replace(verdict, reason=str(reason), fix=fix, reason_record=first)


def claims_by_param(claims: Any, by_name: dict | None = None) -> dict:
    """``{ParamState path (tuple): [(leaf path, GradientClaim)]}``: an algorithm's leaf claims
    grouped by the weight they belong to -- the one grouping (the verdicts, compare mode's
    per-algorithm column and the live explorer's claims all read it). A claim without a
    ``weight_path`` is looked up by its name in ``by_name`` (``{dotted name: path}``), else
    kept under its own name as a one-part path."""
    grouped: dict = {}
    for key, claim in claims.items():
        if claim.weight_path:
            owner = tuple(claim.weight_path)
        else:
            owner = (by_name or {}).get(key, (key,))
        grouped.setdefault(owner, []).append((key, claim))
    return grouped


def attach_claims(verdicts: dict, claims: Any) -> dict:
    """Each verdict with an algorithm's claim: its leaves' claims (``claims``: ``{leaf path:
    GradientClaim}``, grouped by :func:`claims_by_param`) and their worst
    (:func:`.records.combine_leaf_claims`)."""
    grouped = claims_by_param(claims, {v.name: path for path, v in verdicts.items()})
    out = {}
    for path, verdict in verdicts.items():
        leaves = grouped.get(path, [])
        if not leaves:
            out[path] = verdict
            continue
        kind, reason = combine_leaf_claims(leaves)
        assert kind in CLAIM_KINDS, kind
        out[path] = dataclasses.replace(
            verdict,
            algorithm=str(leaves[0][1].algorithm),
            claim=kind,
            claim_reason=reason,
            leaf_claims=tuple(leaves),
        )
    return out


def verdicts_of(graph: Any, algorithm: Any = None) -> dict:
    """``graph.verdicts(algorithm)``: the structural verdicts, with the claims of
    ``graph.gradient_claims(algorithm)`` when an algorithm is given (cached on the graph per
    algorithm: a name, or a learner instance in its compiled state)."""
    base = graph.weight_verdicts
    if algorithm is None:
        return dict(base)
    return dict(_cached(graph, ("verdicts", *_cache_key(algorithm)), algorithm, _with_claims))


def cached_claims(graph: Any, algorithm: Any) -> Any:
    """``graph.gradient_claims(algorithm)``: the derivation's leaf claims, computed once per
    algorithm (a fresh ``GradientClaims`` each call: callers may edit it)."""
    claims = _cached(graph, ("claims", *_cache_key(algorithm)), algorithm, gradient_claims)
    return type(claims)(claims)


def _with_claims(graph: Any, algorithm: Any) -> dict:
    return attach_claims(graph.weight_verdicts, graph.gradient_claims(algorithm))


def _cached(graph: Any, key: tuple, algorithm: Any, make: Any) -> Any:
    cache = graph.verdict_cache if graph.verdict_cache is not None else {}
    hit = cache.get(key)
    if hit is None or (not isinstance(algorithm, str) and hit[0] is not algorithm):
        hit = cache[key] = (algorithm, make(graph, algorithm))
    return hit[1]


def _cache_key(algorithm: Any) -> Any:
    if isinstance(algorithm, str):
        return ("name", algorithm)
    return ("object", id(algorithm), bool(getattr(algorithm, "is_compiled", True)))
