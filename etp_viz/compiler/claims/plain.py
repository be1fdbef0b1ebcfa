"""Plain words for students: any claim reason or verdict as a sentence without internal codes.

The compiler writes its reasons for developers ("etp_mv(rnn.Wr.weight) (equation 3) reaches
hidden state only through other trainable ETP equation(s) (etp_mv@7). By the
non-parametric-tail rule ..."). What a student reads (``graph.explain()``, the explorer's
weights panel, compare mode's gap, the lesson summary) is the sentence :func:`plain_reason`
makes from it, with weight and state names; the codes stay in its ``detail`` (shown on hover,
or by ``graph.explain(codes=True)``). The compiler's reasons themselves are not changed.

This module lives beside the claims because ``graph.explain()`` (compiler) needs it and the
compiler may not import the view layer; ``etp_viz.view.plain`` re-exports it.

Example
-------
>>> text = ("etp_mv(rnn.Wr.weight) (equation 3) reaches hidden state only through other "
...         "trainable ETP equation(s) (etp_mv@7).")
>>> plain_reason(text, {7: "rnn.Wh.weight"}).summary
'rnn.Wr.weight reaches the hidden state only through another weight op (rnn.Wh.weight).'
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

__all__ = [
    "JARGON",
    "PlainText",
    "graph_names",
    "names_from_text",
    "plain_claim",
    "plain_drop",
    "plain_reason",
    "plain_report",
    "split_terms",
    "strip_codes",
    "weight_summary",
]

#: what must never reach a student: equation indices, primitive ids, relation ids, the
#: compiler's rule names (the tests check every student-facing string against it)
JARGON = re.compile(r"@\d|equation \d|eqn|non-parametric|r\d+\.g\d+")


class PlainText(NamedTuple):
    """A reason in plain words (``summary``) and the compiler's text with its codes
    (``detail``, shown on hover)."""

    summary: str
    detail: str


# -- removing the codes ----------------------------------------------------------------------
#: "rnn.W.weight (etp_mv, equation 4)": a weight's op after its name
_NAMED_OP = re.compile(r"([\w.\[\]]+) \((\w+), equation (\d+)\)")
#: "etp_mv(rnn.Wr.weight) (equation 3)": an op named by its weight
_OP_OF = re.compile(r"\b(\w+)\(([\w.\[\]]+)\) \(equation (\d+)\)")
#: "mul (equation 9)", "etp_mv@7": an op named by its primitive and index
_EQUATION = re.compile(r"\b(\w+) \(equation (\d+)\)|\b(\w+)@(\d+)")
_REWORDS = (
    (re.compile(r"\.? ?By the non-parametric-tail rule it is"), ", so it is"),
    (re.compile(r"non-parametric-tail rule"), "rule that a trace follows element-wise ops only"),
    (re.compile(r"other trainable ETP equation\(s\) \(([^()]*)\)"), r"another weight op (\1)"),
    (re.compile(r"reaches hidden state\b"), "reaches the hidden state"),
    (re.compile(r"ETP equation\(s\)"), "weight op(s)"),
    (re.compile(r"ETP equations?"), "weight op"),
    (re.compile(r"\s*\beqns? \[[\d, ]*\]"), ""),
    (re.compile(r"\s*\(equations? [\d, ]+\)"), ""),
    (re.compile(r" at equation\(s\) [\d, ]+"), ""),
    (re.compile(r"\bequations? [\d, ]*\d"), "an op"),
    (re.compile(r"\btrace/r\d+(?:\.g\d+)*"), "an eligibility trace"),
    (re.compile(r"\br\d+\.g\d+\b"), "an eligibility trace"),
)


def names_from_text(texts: Sequence[str]) -> dict[int, str]:
    """Equation index -> weight path, as the compiler's texts name them
    (``rnn.W.weight (etp_mv, equation 4)``, ``etp_mv(rnn.Wr.weight) (equation 3)``).

    >>> names_from_text(["drops h→h rnn.h → rnn.h through rnn.W.weight (etp_mv, equation 4)"])
    {4: 'rnn.W.weight'}
    """
    out: dict[int, str] = {}
    for text in texts:
        for match in _NAMED_OP.finditer(text):
            out.setdefault(int(match.group(3)), match.group(1))
        for match in _OP_OF.finditer(text):
            out.setdefault(int(match.group(3)), match.group(2))
    return out


def _op_word(primitive: str) -> str:
    return "a weight op" if primitive.startswith("etp") else f"a {primitive} op"


def strip_codes(text: str, names: Mapping[int, str] | None = None) -> str:
    """``text`` without equation indices, primitive ids or relation ids: an op is named by
    the weight it uses (``names``: equation index -> weight path) or by what it does.

    >>> strip_codes("counts mul (equation 9) twice", {})
    'counts a mul op twice'
    """
    names = names or {}

    def op(match: re.Match) -> str:
        primitive, index = match.group(1) or match.group(3), match.group(2) or match.group(4)
        return names.get(int(index), _op_word(primitive))

    text = _NAMED_OP.sub(r"\1", text)
    text = _OP_OF.sub(r"\2", text)
    text = _EQUATION.sub(op, text)
    for pattern, replacement in _REWORDS:
        text = pattern.sub(replacement, text)
    return re.sub(r"\s{2,}", " ", text).strip()


# -- dropped terms ---------------------------------------------------------------------------
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
    (
        r"drops (\S+) → (\S+) through plain op\(s\) .*",
        r"ignores how \1 reaches \2 through ops that are not weight ops",
    ),
    (r"and (\d+) more dropped term\(s\)", r"and \1 more such term(s)"),
)
_DROP_RULES = tuple((re.compile(p), r) for p, r in _DROPS)


def plain_drop(text: str, names: Mapping[int, str] | None = None) -> str:
    """One dropped term of a claim's reason in plain words (no codes; an op is named by the
    weight it uses, ``names``: equation index -> weight path).

    >>> plain_drop("drops h→h rnn.V → rnn.V through rnn.W.weight (etp_mv, equation 4)")
    'ignores how rnn.V feeds back into itself through rnn.W.weight'
    """
    text = text.strip()
    for pattern, replacement in _DROP_RULES:
        if pattern.fullmatch(text):
            return strip_codes(pattern.sub(replacement, text), names)
    return strip_codes("ignores " + text.removeprefix("drops "), names)


def split_terms(text: str, separator: str = "; ") -> list[str]:
    """``text`` split at ``separator`` outside parentheses (a term's note may hold one)."""
    parts, depth, start = [], 0, 0
    for match in re.finditer(r"[()]|" + re.escape(separator), text):
        token = match.group()
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        elif depth == 0:
            parts.append(text[start : match.start()])
            start = match.end()
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def _is_term(part: str) -> bool:
    part = part.strip()
    return part.startswith(("drops ", "counts the in-step")) or part.endswith("dropped term(s)")


def _sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return ""
    if re.match(r"[a-z]+(?![\w.\[(])", text):  # a word, not a weight or state name
        text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


# -- the one function ----------------------------------------------------------------------
def plain_reason(reason: str, names: Mapping[int, str] | None = None) -> PlainText:
    """Any reason the compiler gives (a claim's, a verdict's, a diagnostic's message) as a
    plain sentence with weight and state names, and the original text as ``detail``.

    Dropped terms become "the learner ignores ..."; every other text keeps its words with
    the codes taken out (an op named by its weight, ``names``: equation index -> weight
    path, completed from the names the text itself gives).

    >>> plain_reason("drops h→h rnn.h → rnn.h through rnn.W.weight (etp_mv, equation 4)")
    PlainText(summary='The learner ignores how rnn.h feeds back into itself through \
rnn.W.weight.', detail='drops h→h rnn.h → rnn.h through rnn.W.weight (etp_mv, equation 4)')
    """
    reason = (reason or "").strip()
    if not reason:
        return PlainText("", "")
    names = {**names_from_text([reason]), **(names or {})}
    head, sep, rest = reason.partition("no ETP relation traces it: ")
    if sep and not head:
        terms = [plain_drop(p, names) for p in split_terms(rest)]
        return PlainText(_sentence("no eligibility trace follows it: " + "; ".join(terms)), reason)
    parts = split_terms(reason)
    if all(_is_term(p) for p in parts):
        terms = list(dict.fromkeys(plain_drop(p, names) for p in parts))
        return PlainText(_sentence("the learner " + "; ".join(terms)), reason)
    return PlainText(_sentence(strip_codes(reason, names)), reason)


#: claim kind -> how a student reads it
_CLAIM_HEADS = {
    "exact": "exact: its online gradient is the true gradient",
    "approximate": "approximate: its online gradient leaves out part of the true gradient",
    "none": "no online gradient",
}


def plain_claim(kind: str, reason: str = "", names: Mapping[int, str] | None = None) -> dict:
    """One learner's claim on a weight as ``{"summary", "detail"}``: the claim word and its
    reason in plain words, and the compiler's codes for the hover.

    >>> plain_claim("exact")["summary"]
    'exact: its online gradient is the true gradient.'
    """
    head = _CLAIM_HEADS.get(kind, kind or "no claim")
    why = plain_reason(reason, names).summary if kind != "exact" else ""
    summary = f"{head}. {why}" if why else f"{head}."
    return {"summary": summary, "detail": f"{kind}: {reason}" if reason else kind}


# -- what a weight's status and claim mean ----------------------------------------------------
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
    reason: str = "",
) -> str:
    """What a weight's status (a ``weight_status`` code) and claim mean, in plain words with
    weight and state names (``reason``: the verdict's, used when no diagnostic explains a
    weight that is not learned).

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
        why = _NOT_LEARNED.get(kind or "", "").format(
            blocked=", ".join(blocked_by) or "another weight op"
        )
        if not why and reason:
            why = plain_reason(reason, names).summary.rstrip(".")
            why = why[:1].lower() + why[1:]
        return f"Not learned online: {why}." if why else "Not learned online."
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


def _dropped_terms(
    leaf_claims: Sequence[tuple[str, str, str]], names: Mapping[int, str]
) -> list[str]:
    terms: dict[str, None] = {}
    reasons = dict.fromkeys(reason for _, kind, reason in leaf_claims if kind == "approximate")
    for reason in reasons:  # a weight's leaves often share one reason: read it once
        found = {**names_from_text([reason]), **names}
        for part in split_terms(reason):
            terms[plain_drop(part, found)] = None
    return list(terms)


# -- graph.explain()'s report ------------------------------------------------------------------
def _dot(path: Any) -> str:
    return ".".join(map(str, path))


def graph_names(graph: Any) -> dict[int, str]:
    """Equation index -> weight path of every weight op the graph knows: its relations'
    equations, and the ops its records name."""
    names: dict[int, str] = {}
    for relation in getattr(graph, "hidden_param_op_relations", ()) or ():
        paths = list((getattr(relation, "trainable_paths", {}) or {}).values())
        if paths and getattr(relation, "eqn_index", -1) >= 0:
            names[int(relation.eqn_index)] = _dot(paths[0])
    texts = [str(getattr(r, "message", "")) for r in getattr(graph, "diagnostics", ()) or ()]
    return {**names_from_text(texts), **names}


def _summary_of(graph: Any, verdict: Any, names: Mapping[int, str]) -> str:
    records = list(getattr(graph, "diagnostics", ()) or ())
    relations = list(getattr(graph, "hidden_param_op_relations", ()) or ())
    kinds = [getattr(records[i].kind, "value", str(records[i].kind)) for i in verdict.diagnostics]
    hidden = [
        _dot(p)
        for r in verdict.relations
        if r < len(relations)
        for p in relations[r].connected_hidden_paths
    ]
    blocked: list[str] = []
    if verdict.reason_record is not None and verdict.reason_record < len(records):
        context = dict(getattr(records[verdict.reason_record], "context", {}) or {})
        blocked = [names[i] for i in context.get("blocking_eqn_indices", ()) if i in names]
    from .verdict import NOT_ETP_REASON, NOT_READ_REASON

    return weight_summary(
        verdict.code,
        verdict.claim,
        diagnostic_kinds=kinds,
        leaf_claims=[(k, c.kind, c.reason) for k, c in verdict.leaf_claims],
        blocked_by=list(dict.fromkeys(blocked)),
        hidden_paths=list(dict.fromkeys(hidden)),
        not_read=not verdict.learned and verdict.reason == NOT_READ_REASON,
        not_etp=not verdict.learned and verdict.reason == NOT_ETP_REASON,
        names=names,
        reason=verdict.reason,
    )


def plain_report(
    graph: Any, verdicts: Mapping[Any, Any], leaves: Sequence[tuple[str, Any]], algorithm: Any
) -> str:
    """``graph.explain()``'s report for students: every weight's status and claim, what they
    mean in plain words and the suggested fix, then the claim of each weight leaf; no codes
    (``graph.explain(codes=True)`` prints the compiler's records and reasons)."""
    names = graph_names(graph)
    lines = [f"WEIGHTS ({len(verdicts)})" + (f", as {algorithm} learns them" if algorithm else "")]
    for verdict in verdicts.values():
        lines.append(f"  {verdict.name}: {verdict.text}")
        lines.append(f"    {_summary_of(graph, verdict, names)}")
        if verdict.fix:
            lines.append(f"    Suggested fix: {verdict.fix}.")
    if algorithm is not None:
        lines.append(f"GRADIENT CLAIMS ({algorithm})")
        lines += [f"  {key}: {claim.kind}" for key, claim in leaves]
    lines.append(
        "(graph.explain(codes=True) adds the compiler's records and the equation numbers "
        "behind these sentences.)"
    )
    return "\n".join(lines)
