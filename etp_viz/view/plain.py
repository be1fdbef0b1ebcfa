"""Plain words for students: what a weight's status and gradient claim mean.

The compiler's diagnostics and claims are written for developers ("etp_mv(rnn.W.weight)
(equation 7) reaches hidden state only through other trainable ETP equation(s)
(etp_mv@12)"). The explorer shows the sentence made here instead, with weight and state
names and no internal codes; the developer text stays in the view model (``reason``,
``claim_reason``) and is shown on hover.

Example
-------
>>> plain_drop("drops h→h rnn.V → rnn.V through rnn.W.weight (etp_mv, equation 4)")
'ignores how rnn.V feeds back into itself through rnn.W.weight'
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["dropped_terms", "plain_drop", "weight_summary"]

_CODES = (
    (re.compile(r"\s*\((?:[\w.]+), equation \d+\)"), ""),  # "rnn.W.weight (etp_mv, equation 4)"
    (re.compile(r"\s*\(equations? [\d, ]+\)"), ""),
    (re.compile(r" at equation\(s\) [\d, ]+"), ""),
)
#: "mul (equation 9)", "etp_mv@7": an equation named by its primitive and index
_EQUATION = re.compile(r"\b(\w+) \(equation (\d+)\)|\b(\w+)@(\d+)")
_DROPS = (
    (r"drops h→h (\S+) → \1 through (.+)", r"ignores how \1 feeds back into itself through \2"),
    (r"drops h→h (.+?) → (\S+) through (.+)", r"ignores how \1 feeds into \2 through \3"),
    (
        r"drops the position-mixing h→h term (.+?) → (\S+) at (.+)",
        r"ignores how \1 feeds into \2 where values are mixed across positions",
    ),
    (
        r"counts the in-step path (.+?) → (\S+) twice.*",
        r"counts \1's effect on \2 within a step twice",
    ),
    (r"drops the past of (.+?) in (\S+)'s trace.*", r"ignores the past of \1 in \2's trace"),
    (
        r"drops the cross-group term (.+?) → (\S+) .*",
        r"ignores how \1 (another hidden group) feeds into \2",
    ),
    (r"drops the effect on (\S+)'s future states.*", r"ignores the effect on \1's later steps"),
    (
        r"drops y → (\S+) through other ETP equation\(s\) (.+)",
        r"ignores its effect on \1 through the other weight op(s) \2",
    ),
    (
        r"drops the position-mixing part of the y → (\S+) tail.*",
        r"ignores the part of its path to \1 that mixes positions",
    ),
    (r"drops y → (\S+) \(.*", r"ignores its effect on \1 (another hidden group)"),
    (
        r"drops the output's read of (.+?) from before the update.*",
        r"ignores the output's read of the old \1",
    ),
)
_DROP_RULES = tuple((re.compile(p), r) for p, r in _DROPS)


def _strip_codes(text: str, names: Mapping[int, str]) -> str:
    def name(match: re.Match) -> str:
        primitive, index = match.group(1) or match.group(3), match.group(2) or match.group(4)
        return names.get(int(index), f"the {primitive} op")

    text = _CODES[0][0].sub(_CODES[0][1], text)  # a weight's own code after its name
    text = _EQUATION.sub(name, text)
    for pattern, replacement in _CODES[1:]:
        text = pattern.sub(replacement, text)
    return text.strip()


def plain_drop(text: str, names: Mapping[int, str] | None = None) -> str:
    """One dropped term of a claim's reason in plain words: no equation numbers; an
    equation is named by the weight it uses (``names``: equation index -> weight path)."""
    names = names or {}
    text = text.strip()
    for pattern, replacement in _DROP_RULES:
        if pattern.fullmatch(text):
            return _strip_codes(pattern.sub(replacement, text), names)
    return _strip_codes("ignores " + text.removeprefix("drops "), names)


def _dropped_terms(
    leaf_claims: Sequence[tuple[str, str, str]], names: Mapping[int, str]
) -> list[str]:
    terms: dict[str, None] = {}
    for _, kind, reason in leaf_claims:
        if kind != "approximate":
            continue
        for part in _split_top_level(reason):
            terms[plain_drop(part, names)] = None
    return list(terms)


def _split_top_level(text: str, separator: str = "; ") -> list[str]:
    """``text`` split at ``separator`` outside parentheses (a term's note may hold one)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and text.startswith(separator, i):
            parts.append(text[start:i])
            start = i + len(separator)
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


#: diagnostic kind -> why a weight is not learned online, in plain words
_NOT_LEARNED = {
    "relation_excluded_weight_to_weight": (
        "it reaches the hidden state only through another weight op ({blocked}), and an "
        "eligibility trace cannot follow a path through another weight"
    ),
    "primitive_inside_control_flow": "its op sits inside a loop or a branch of the step",
    "relation_excluded_shape_mismatch": (
        "its op's output does not match the shape of the hidden state it feeds"
    ),
    "relation_excluded_no_paramstate": "it is not held in a brainstate.ParamState",
    "trainable_invar_not_paramstate": "it is not held in a brainstate.ParamState",
    "relation_tail_couples_positions": (
        "between its op and the hidden state, values are moved or mixed across positions "
        "(a reshape or a sum)"
    ),
    "relation_excluded_non_temporal": "its op's output reaches no hidden state",
}


def weight_summary(
    status: str,
    claim: str = "",
    *,
    diagnostic_kinds: Sequence[str] = (),
    leaf_claims: Sequence[tuple[str, str, str]] = (),
    blocked_by: Sequence[str] = (),
    hidden_paths: Sequence[str] = (),
    not_read: bool = False,
    not_etp: bool = False,
    names: Mapping[int, str] | None = None,
) -> str:
    """What a weight's status and claim mean, in plain words with weight and state names.

    >>> weight_summary("online", "exact", hidden_paths=["rnn.h"])
    'Learned online (trace on rnn.h), exactly: its online gradient is the true gradient.'
    """
    where = f" (trace on {', '.join(hidden_paths)})" if hidden_paths else ""
    if status == "not_learned":
        if not_read:
            return "Not learned: the model's step does not use it."
        if not_etp:
            return (
                "Not learned online: no weight op (ETP primitive) uses it, e.g. it is used "
                "with a plain `@`."
            )
        kind = next((k for k in diagnostic_kinds if k in _NOT_LEARNED), None)
        why = _NOT_LEARNED.get(kind or "", "")
        blocked = ", ".join(blocked_by) or "another weight op"
        return (
            f"Not learned online: {why.format(blocked=blocked)}."
            if why
            else ("Not learned online.")
        )
    if status == "exact":
        return (
            "A readout: it reaches the output in the same step, so its gradient is exact "
            "(no trace needed)."
        )
    head = f"Learned online{where}"
    if claim == "exact":
        return f"{head}, exactly: its online gradient is the true gradient."
    if claim == "approximate":
        terms = _dropped_terms(leaf_claims, names or {})
        what = f" The learner {'; '.join(terms)}." if terms else ""
        return (
            f"{head}, approximately: its online gradient leaves out part of the true "
            f"gradient.{what} Dashed pink lines on the graph mark what is left out."
        )
    if claim == "none":
        return f"{head}, but it gets no online gradient: no learning signal reaches its trace."
    return f"{head}."


def equation_names(owner: Mapping[str, str]) -> dict[int, str]:
    """Top-level equation index -> weight path, from :func:`owners` (``e7`` -> 7)."""
    return {int(k[1:]): v for k, v in owner.items() if re.fullmatch(r"e\d+", k)}


def owners(weights: Sequence[object]) -> Mapping[str, str]:
    """Equation node id -> the weight path whose op it is (from each weight's ``node_ids``)."""
    out: dict[str, str] = {}
    for w in weights:
        for node_id in getattr(w, "node_ids", ()):
            if not node_id.startswith("p:"):
                out.setdefault(node_id, w.path)  # type: ignore[attr-defined]
    return out


def dropped_terms(weights: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per learner, the weights it does not learn exactly and why, in plain words, from the
    view model's weights (``weights[i]["claims"]``: compare mode, one per learner; else the
    one learner's ``claim`` / ``claim_reason``, keyed ``""``):
    ``{learner: [{"weight", "claim", "terms": [plain sentences]}]}``."""
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
            parts = [p for p in reason.split("; ") if p.strip().startswith("drops")]
            if kind == "approximate":
                terms = [plain_drop(p) for p in parts] or [reason or "approximate"]
            else:
                terms = [str(weight.get("summary") or "not learned online")]
            entry = {"weight": weight.get("path", ""), "claim": kind, "terms": terms}
            out.setdefault(str(claim.get("algorithm", "")), []).append(entry)
    return out
