"""Plain words for students: what a weight's status and gradient claim mean.

The compiler's diagnostics and claims are written for developers ("etp_mv(rnn.W.weight)
(equation 7) reaches hidden state only through other trainable ETP equation(s)
(etp_mv@12)"). Everything a student reads (the weights panel, compare mode's gap, the lesson
summary) is the sentence made by :func:`plain_reason` / :func:`weight_summary` instead, with
weight and state names and no internal codes; the compiler's text with its codes is the
``detail`` beside it (shown on hover). The translation itself is
:mod:`etp_viz.compiler.claims.plain` (``graph.explain()`` uses it too, and the compiler may
not import the view); this module adds what only the view model has.

Example
-------
>>> plain_drop("drops h→h rnn.V → rnn.V through rnn.W.weight (etp_mv, equation 4)")
'ignores how rnn.V feeds back into itself through rnn.W.weight'
>>> plain_reason("drops y → rnn.h (rnn.h is not in this relation's hidden groups)").summary
'The learner ignores its effect on rnn.h (another hidden group).'
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from etp_viz.compiler.claims.plain import (
    JARGON,
    PlainText,
    names_from_text,
    plain_claim,
    plain_drop,
    plain_reason,
    split_terms,
    strip_codes,
    term_clauses,
    weight_summary,
    without_opening,
)

from .types import WeightInfo

__all__ = [
    "JARGON",
    "PlainText",
    "dropped_terms",
    "equation_names",
    "names_from_text",
    "owners",
    "plain_claim",
    "plain_drop",
    "plain_reason",
    "split_terms",
    "strip_codes",
    "view_names",
    "weight_detail",
    "weight_summary",
]


def weight_detail(reason: str, claim: str = "", claim_reason: str = "") -> str:
    """The compiler's text behind a weight's summary, codes and all (the hover text).

    >>> print(weight_detail("online", "approximate", "drops rnn.W (etp_mv, equation 4)"))
    online
    approximate: drops rnn.W (etp_mv, equation 4)
    """
    parts = [reason, f"{claim}: {claim_reason}" if claim and claim_reason else ""]
    return "\n".join(p for p in parts if p)


def equation_names(owner: Mapping[str, str]) -> dict[int, str]:
    """Top-level equation index -> weight path, from :func:`owners` (``e7`` -> 7)."""
    return {int(k[1:]): v for k, v in owner.items() if re.fullmatch(r"e\d+", k)}


def owners(weights: Sequence[WeightInfo]) -> Mapping[str, str]:
    """Equation node id -> the weight path whose op it is (from each weight's ``node_ids``)."""
    out: dict[str, str] = {}
    for w in weights:
        for node_id in w.node_ids:
            if not node_id.startswith("p:"):
                out.setdefault(node_id, w.path)
    return out


def view_names(weights: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """Equation index -> weight path from the view model's weights as JSON (each weight's
    ``node_ids``: its op ``e<i>`` first), as :func:`equation_names` does for dataclasses.

    >>> view_names([{"path": "rnn.W", "node_ids": ["p:rnn.W", "e4", "e5"]}])
    {4: 'rnn.W', 5: 'rnn.W'}
    """
    out: dict[int, str] = {}
    for weight in weights:
        for node_id in weight.get("node_ids") or ():
            if re.fullmatch(r"e\d+", str(node_id)):
                out.setdefault(int(node_id[1:]), str(weight.get("path", "")))
    return out


def dropped_terms(weights: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per learner, the weights it does not learn exactly and why, in plain words, from the
    view model's weights (``weights[i]["claims"]``: compare mode, one per learner; else the
    one learner's ``claim`` / ``claim_reason``, keyed ``""``):
    ``{learner: [{"weight", "claim", "terms": [plain sentences], "detail": codes}]}``.

    >>> w = {"path": "rnn.W", "claim": "approximate",
    ...      "claim_reason": "drops h→h rnn.h → rnn.h through rnn.W (etp_mv, equation 4)"}
    >>> dropped_terms([w])[""][0]["terms"]
    ['ignores how rnn.h feeds back into itself through rnn.W']
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for weight in weights:
        claims = weight.get("claims")
        if claims is None and weight.get("claim"):
            claims = [
                {"algorithm": "", "claim": weight["claim"], "reason": weight.get("claim_reason")}
            ]
        for claim in claims or []:
            kind = claim.get("claim")
            if kind not in ("approximate", "none"):
                continue
            reason = str(claim.get("reason") or "")
            if kind == "approximate":
                terms = term_clauses(reason) or [
                    plain_reason(reason).summary or "it drops part of the gradient"
                ]
            else:  # the page says "not learned online" before the terms: not twice
                summary = weight.get("summary") or plain_reason(reason).summary
                terms = [without_opening(str(summary or "")) or "not learned online"]
            entry = {
                "weight": weight.get("path", ""),
                "claim": kind,
                "terms": terms,
                "detail": reason,
            }
            out.setdefault(str(claim.get("algorithm", "")), []).append(entry)
    return out
