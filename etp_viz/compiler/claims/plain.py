"""Plain words for students: any claim reason or verdict as a sentence without internal codes.

The compiler writes its reasons for developers ("etp_mv(rnn.Wr.weight) (equation 3) reaches
hidden state only through other trainable ETP equation(s) (etp_mv@7). By the
non-parametric-tail rule ..."). What a student reads (``graph.explain()``, the explorer's
weights panel, compare mode's gap, the lesson summary) is the sentence :func:`plain_reason`
makes from it, with weight and state names; the codes stay in its ``detail`` (shown on hover,
or by ``graph.explain(codes=True)``). The compiler's reasons themselves are not changed.

The grammar is this module's, one for every reason (:func:`reason_sentences`; issue 42):
each dropped term of a claim is one sentence, "The learner ignores how rnn.h feeds back into
itself through rnn.Wz.weight and rnn.Wh.weight." for the first and "It also ..." after it
(:data:`TERM_SENTENCE`); ops are named by the weights they apply, as the user's code names
them, in an English list; any other reason is one sentence, a capital first (a sentence that
would open with a lower-case weight path opens "The weight ..."); a summary opens with "Not
learned online:" once (:func:`without_opening` for a caller that writes it itself).
``tests/compiler/test_reason_grammar.py`` reads every kind of reason the claims code writes.

This module lives beside the claims because ``graph.explain()`` (compiler) needs it and the
compiler may not import the view layer; ``etp_viz.view.plain`` re-exports it.

Example
-------
>>> text = ("etp_mv(rnn.Wr.weight) (equation 3) reaches hidden state only through other "
...         "trainable ETP equation(s) (etp_mv@7).")
>>> plain_reason(text, {7: "rnn.Wh.weight"}).summary
'The weight rnn.Wr.weight reaches the hidden state only through another weight op (rnn.Wh.weight).'
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

__all__ = [
    "JARGON",
    "NOT_LEARNED_OPENINGS",
    "TERM_SENTENCE",
    "english_list",
    "reason_sentences",
    "term_clauses",
    "term_sentences",
    "without_opening",
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
    (
        r"ES-D-RTRL factorises the trace into (.+?), not the exact per-weight trace",
        r"approximates each weight's trace by \1, not the exact per-weight trace",
    ),
    (
        r"the weight is shared by layers of different hidden groups: .*",
        r"ignores the terms between the uses of this weight, which layers of different "
        r"hidden groups share",
    ),
    (
        r"(columns \d+-\d+(?: \([^()]*\))?) of the weight are not learned online: (.+)",
        r"does not learn \1 of the weight online (\2)",
    ),
    (r"and (\d+) more dropped term\(s\)", r"ignores \1 more such term(s)"),
)
_DROP_RULES = tuple((re.compile(p), r) for p, r in _DROPS)

# -- the grammar of a reason -------------------------------------------------------------------
#: one op as the compiler names it: ``rnn.W.weight (etp_mv, equation 4)``, a fused block's
#: ``rnn.Wrz.weight columns 0-7 (r) (etp_mv, equation 3)``, ``mul (equation 9)``
_ONE_OP = (
    r"(?:[\w.\[\]]+(?: columns \d+-\d+(?: \([^()]*\))?)? \(\w+, equation \d+\)"
    r"|\w+ \(equation \d+\))"
)
_OP_LIST = re.compile(rf"{_ONE_OP}(?:, {_ONE_OP})*")
_OP_PARTS = re.compile(
    r"(?P<name>[\w.\[\]]+(?: columns \d+-\d+(?: \([^()]*\))?)?) \((?P<prim>\w+), equation "
    r"(?P<index>\d+)\)|(?P<bare>\w+) \(equation (?P<bare_index>\d+)\)"
)
#: the subject of a reason's first dropped term, and of each one after it
TERM_SUBJECTS = ("The learner", "It also")
#: the verbs a dropped term's clause starts with (:func:`plain_drop`)
TERM_VERBS = ("ignores", "counts", "approximates", "does not learn")
#: one dropped term as a sentence (what :func:`reason_sentences` makes of each)
TERM_SENTENCE = re.compile(
    rf"(?:{'|'.join(TERM_SUBJECTS)}) (?:{'|'.join(TERM_VERBS)}) [^;]+[^.;]\."
)
#: the opening of a summary of a weight that is not learned (said once)
NOT_LEARNED_OPENINGS = ("Not learned online: ", "Not learned: ")


def english_list(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``.

    >>> english_list(["rnn.Wz.weight", "rnn.Wr.weight", "rnn.Wh.weight"])
    'rnn.Wz.weight, rnn.Wr.weight and rnn.Wh.weight'
    """
    items = list(items)
    if len(items) < 2:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _name_ops(text: str, names: Mapping[int, str]) -> str:
    """Every list of ops the compiler names (``A (etp_mv, equation 1), mul (equation 5)``) as
    an English list of the weights they apply, as the user's code names them (an op on no
    weight by what it does: ``a mul op``), each once."""

    def one_list(match: re.Match) -> str:
        found: dict[str, None] = {}
        for op in _OP_PARTS.finditer(match.group(0)):
            index = int(op.group("index") or op.group("bare_index"))
            name = names.get(index) or op.group("name") or _op_word(op.group("bare"))
            found[name] = None
        return english_list(list(found))

    return _OP_LIST.sub(one_list, text)


def plain_drop(text: str, names: Mapping[int, str] | None = None) -> str:
    """One dropped term of a claim's reason in plain words (no codes; an op is named by the
    weight it uses, ``names``: equation index -> weight path).

    >>> plain_drop("drops h→h rnn.V → rnn.V through rnn.W.weight (etp_mv, equation 4)")
    'ignores how rnn.V feeds back into itself through rnn.W.weight'
    """
    text = _name_ops(text.strip(), names or {})
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
    """A dropped term of a claim's reason (one of the compiler's term kinds)."""
    part = part.strip()
    if part.startswith(("drops ", "counts the in-step")):
        return True
    return any(pattern.fullmatch(part) for pattern, _ in _DROP_RULES)


def term_sentences(terms: Sequence[str], names: Mapping[int, str] | None = None) -> list[str]:
    """One sentence per dropped term (the compiler's texts), each once: ``The learner ignores
    ...`` for the first, ``It also ...`` after it.

    >>> for sentence in term_sentences(
    ...     ["drops h→h rnn.h → rnn.h through rnn.W.weight (etp_mv, equation 4)",
    ...      "and 2 more dropped term(s)"]):
    ...     print(sentence)
    The learner ignores how rnn.h feeds back into itself through rnn.W.weight.
    It also ignores 2 more such term(s).
    """
    clauses = list(dict.fromkeys(plain_drop(t, names) for t in terms if t.strip()))
    return [f"{TERM_SUBJECTS[min(i, 1)]} {clause.rstrip('.')}." for i, clause in enumerate(clauses)]


def term_clauses(reason: str, names: Mapping[int, str] | None = None) -> list[str]:
    """The dropped terms of a claim's reason as clauses (``ignores how ...``, no subject, no
    period), each once, for a caller that writes its own sentence around them (the lesson
    summary's list); a reason without dropped terms gives none."""
    names = {**names_from_text([reason or ""]), **(names or {})}
    body = _without_no_trace(reason or "")
    return list(dict.fromkeys(plain_drop(p, names) for p in split_terms(body) if _is_term(p)))


def _without_no_trace(reason: str) -> str:
    head, sep, rest = reason.strip().partition("no ETP relation traces it: ")
    return rest if sep and not head else reason.strip()


def without_opening(text: str) -> str:
    """``text`` without its opening "Not learned online:" (for a caller that says it already),
    as a sentence.

    >>> without_opening("Not learned online: it reaches the hidden state only through rnn.Wh.")
    'It reaches the hidden state only through rnn.Wh.'
    """
    text = (text or "").strip()
    for opening in NOT_LEARNED_OPENINGS:
        while text.lower().startswith(opening.lower()):
            text = text[len(opening) :].lstrip()
    return _sentence(text)


def reason_sentences(reason: str, names: Mapping[int, str] | None = None) -> list[str]:
    """The one grammar of a reason: any reason the compiler gives (a claim's, a verdict's, a
    diagnostic's message) as plain sentences with the weights and states named as in the
    user's code, no codes. A claim's dropped terms give one sentence each
    (:func:`term_sentences`); a leaf no relation traces opens with "No eligibility trace
    follows it."; any other text is one sentence, its codes taken out. Each sentence starts
    with a capital and ends with a period.

    >>> for sentence in reason_sentences(
    ...     "no ETP relation traces it: drops y → rnn.h (rnn.h is not in this relation's "
    ...     "hidden groups)"):
    ...     print(sentence)
    No eligibility trace follows it.
    The learner ignores its effect on rnn.h (another hidden group).
    """
    reason = (reason or "").strip()
    if not reason:
        return []
    names = {**names_from_text([reason]), **(names or {})}
    body = _without_no_trace(reason)
    parts = split_terms(body)
    if parts and all(_is_term(p) for p in parts):
        opening = ["No eligibility trace follows it."] if body != reason else []
        return opening + term_sentences(parts, names)
    return [_sentence(_named_subject(strip_codes(_name_ops(reason, names), names)))]


#: a sentence that opens with a dotted weight path (``rnn.Wr.weight reaches ...``)
_OPENS_WITH_PATH = re.compile(r"[a-z_][\w]*(?:\.[\w\[\]]+)+ ")


def _named_subject(text: str) -> str:
    """A compiler record's sentence opens with the weight it is about, as the user's code
    names it (lower case): "The weight rnn.Wr.weight reaches ...", a capital without renaming
    it."""
    return "The weight " + text if _OPENS_WITH_PATH.match(text) else text


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
    return PlainText(" ".join(reason_sentences(reason, names)), reason)


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
            why = without_opening(plain_reason(reason, names).summary).rstrip(".")
            why = why[:1].lower() + why[1:]
        return f"{NOT_LEARNED_OPENINGS[0]}{why}." if why else "Not learned online."
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
        what = "".join(f" {sentence}" for sentence in terms)
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
    """One sentence per dropped term of the weight's approximate leaves, each once."""
    terms: dict[str, None] = {}
    reasons = dict.fromkeys(reason for _, kind, reason in leaf_claims if kind == "approximate")
    for reason in reasons:  # a weight's leaves often share one reason: read it once
        for part in split_terms(reason):
            terms[part] = None
    return term_sentences(list(terms), {**names_from_text(list(reasons)), **names})


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
