"""The one grammar of claim reasons (issue 42, "Reasons as sentences";
``etp_viz.compiler.claims.plain.reason_sentences``).

Every reason the claims code emits, on models that together produce each kind of it (checked:
a kind no model produces fails the coverage test), read as plain sentences: each starts with a
capital and ends with a period; a claim's dropped terms give one sentence each (``The learner
ignores ...``, then ``It also ...``), each parsing as one term; ops are named by their weights
as the user's code names them, listed in English (no ``, a weight op,``); no code
(``equation 3``, ``@7``) and no opening said twice ("Not learned online: Not learned online:",
as the lesson summary printed it).
"""

from __future__ import annotations

import re
import warnings

import brainstate
import jax.numpy as jnp
import pytest

import etp_viz
from etp_viz.compiler.claims.plain import (
    JARGON,
    TERM_SENTENCE,
    graph_names,
    reason_sentences,
    split_terms,
    term_clauses,
    weight_summary,
    without_opening,
)
from tests.learn import archs

L = archs.Layer

#: each kind of text the claims code writes (``etp_viz/compiler/claims``): a dropped term of
#: an approximate claim, or the reason of a ``none`` claim
TERM_KINDS = {
    "h_self": r"drops h→h (\S+) → \1 through .+",
    "h_other": r"drops h→h .+? → \S+ through .+",
    "mixing_hh": r"drops the position-mixing h→h term .+",
    "twice": r"counts the in-step path .+",
    "past": r"drops the past of .+",
    "cross": r"drops the cross-group term .+",
    "future": r"drops the effect on \S+'s future states .+",
    "y_etp": r"drops y → \S+ through other ETP equation\(s\).*",
    "y_mixing": r"drops the position-mixing part of the y → .+",
    "y_group": r"drops y → \S+ \(.+",
    "output_read": r"drops the output's read of .+",
    "plain": r"drops \S+ → \S+ through plain op\(s\) .+",
    "shared": r"the weight is shared by layers of different hidden groups: .+",
    "es": r"ES-D-RTRL factorises the trace .+",
    "more": r"and \d+ more dropped term\(s\)",
    "block": r"columns \d+-\d+.* of the weight are not learned online: .+",
}
NONE_KINDS = {
    "no_trace": r"no ETP relation traces it: .+",
    "nothing": r"it reaches no hidden state through an ETP primitive and no model output",
    "silent": r"zero by structure: .+",
}
#: kinds no model below produces (each is checked on the compiler's text shape instead)
SYNTHETIC = {
    "y_group": "drops y → l2.h (l2.h is not in this relation's hidden groups)",
    "output_read": (
        "drops the output's read of {l1.h, l1.a} from before the update (outside this "
        "weight's traced groups)"
    ),
    "nothing": "it reaches no hidden state through an ETP primitive and no model output",
}

#: generated architectures that, between them, produce the other kinds (found by drawing the
#: property tests' architectures and keeping the first that gave each kind)
ARCHS = [
    # es, future, h_other, mixing_hh, past, a diagnostic's none, silent (ES-D-RTRL)
    archs.Arch(
        (
            L(rec="dense", bias="etp", act="lif", adapt="first", norm="affine"),
            L(
                states=2,
                inp="wnorm",
                bias="plain",
                act="spike",
                reads="old",
                cross=True,
                adapt="new",
                norm="affine",
                cond="lax",
            ),
        ),
        out="plain",
        batch=2,
        seed=113,
        shared=True,
        feedback="mix",
    ),
    archs.Arch((L(rec="dense"),)),  # h_self
    # no_trace, plain (a matrix and a plainly added bias in one ParamState)
    archs.Arch(
        (
            L(
                rec="dense",
                inp="elemwise",
                bias="mixed",
                act="spike",
                reads="old",
                adapt="first",
                count=True,
                cond="brainstate",
            ),
        ),
        out="plain",
        shared=True,
        feedback="add",
    ),
    # y_mixing
    archs.Arch(
        (
            L(
                states=2,
                inp="elemwise",
                bias="plain",
                act="jvp",
                count=True,
                norm="brainstate",
                cond="lax",
            ),
            L(bias="plain", act="jvp", norm="ln", cond="lax"),
        ),
        seed=51,
        feedback="add",
    ),
    # cross, more
    archs.Arch(
        (
            L(states=2, bias="mixed", act="lif", adapt="first", count=True, cond="brainstate"),
            L(states=2, rec="mix", bias="plain", act="lif", cross=True, adapt="first", cond="lax"),
        ),
        batch=2,
        seed=324,
        feedback="add",
    ),
    # shared
    archs.Arch(
        (
            L(bias="plain", act="jvp", reads="old", norm="ln", cond="lax"),
            L(rec="dense", inp="wnorm", bias="mixed", act="relu_grad", adapt="first"),
        ),
        batch=2,
        seed=896,
        shared=True,
        feedback="add",
    ),
    # twice
    archs.Arch(
        (
            L(states=2, rec="mix", inp="wnorm", bias="mixed", act="jvp", count=True),
            L(states=2, inp="elemwise", bias="plain", act="jvp", adapt="new"),
        ),
        seed=150,
        shared=True,
        feedback="etp",
    ),
]


class Cell(brainstate.nn.Module):
    """A recurrent cell under a readout: etp_viz's GRU and MGU (a weight op reading another's
    output: y_etp, and the GRU's Wr through Wh: a diagnostic's none), brainstate's own GRU
    (``lift=True``: its reset gate's columns of ``Wrz``, block), a plain ``@`` weight."""

    def __init__(self, cell):
        super().__init__()
        self.rnn = cell
        self.out = etp_viz.nn.Linear(4, 2)
        self.plain = brainstate.ParamState(jnp.full((4,), 0.5))

    def update(self, x):
        return self.out(self.rnn(x)) + self.plain.value @ jnp.ones((4, 2))


def _graphs():
    """``(name, graph, algorithms)`` of every model above."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, arch in enumerate(ARCHS):
            model = archs.build(arch)
            graph = etp_viz.compile_etrace_graph(model, archs.inputs(arch, 1)[0], warn=False)
            yield f"arch {i}", graph, ("d_rtrl", "es_d_rtrl")
        for cell, lift in (
            (etp_viz.nn.GRUCell(3, 4), False),
            (etp_viz.nn.MGUCell(3, 4), False),
            (brainstate.nn.GRUCell(3, 4), True),
        ):
            model = Cell(cell)
            brainstate.nn.init_all_states(model)
            graph = etp_viz.compile_etrace_graph(model, jnp.zeros(3), lift=lift, warn=False)
            yield type(cell).__module__ + "." + type(cell).__name__, graph, ("d_rtrl",)


@pytest.fixture(scope="module")
def reasons() -> list[tuple[str, str, dict, str]]:
    """``(where, claim kind, names, reason)`` of every non-exact leaf claim of the models."""
    found = []
    for name, graph, algorithms in _graphs():
        names = graph_names(graph)
        for algorithm in algorithms:
            for key, claim in graph.gradient_claims(algorithm).items():
                if claim.kind != "exact":
                    found.append((f"{name} [{algorithm}] {key}", claim.kind, names, claim.reason))
    return found


def _kinds(kind: str, reason: str) -> list[str]:
    """The kinds of a claim's reason: one per dropped term (``approximate``) or one."""
    if kind == "none":
        for name, pattern in NONE_KINDS.items():
            if re.fullmatch(pattern, reason, re.S):
                rest = reason.partition(": ")[2] if name == "no_trace" else ""
                return [name, *_term_kinds(rest)]
        return ["record"]  # a compiler record's message (a weight no relation keeps)
    return _term_kinds(reason)


def _term_kinds(reason: str) -> list[str]:
    kinds = []
    for term in split_terms(reason):
        found = [k for k, p in TERM_KINDS.items() if re.fullmatch(p, term.strip(), re.S)]
        assert found, f"a dropped term of no known kind: {term!r}"
        kinds.append(found[0])
    return kinds


def _assert_sentences(where: str, sentences: list[str], terms: int) -> None:
    assert sentences, where
    for sentence in sentences:
        assert sentence[:1].isupper(), f"{where}: no capital: {sentence!r}"
        assert sentence.endswith("."), f"{where}: no period: {sentence!r}"
        assert not JARGON.search(sentence), f"{where}: a code: {sentence!r}"
        assert ", a weight op," not in sentence and "a weight op, " not in sentence, sentence
        assert not re.search(r"(?i)not learned online: not learned online", sentence), sentence
        assert " the step." not in sentence and "op(s) the" not in sentence, sentence
    term_part = [s for s in sentences if TERM_SENTENCE.fullmatch(s)]
    assert len(term_part) <= terms, f"{where}: {sentences}"
    for sentence in term_part:  # one term each: one verb, no list of terms
        assert ";" not in sentence and sentence.count(" ignores ") <= 1, sentence
    if terms and sentences[0] != "No eligibility trace follows it.":
        assert len(term_part) == len(sentences), f"{where}: a term is not a sentence: {sentences}"


def test_the_models_produce_every_kind_of_reason(reasons):
    seen = {k for _, kind, _, reason in reasons for k in _kinds(kind, reason)}
    expected = (set(TERM_KINDS) | set(NONE_KINDS) | {"record"}) - set(SYNTHETIC)
    assert expected <= seen, f"no model produces {sorted(expected - seen)}"


def test_every_reason_reads_as_sentences_one_per_dropped_term(reasons):
    for where, kind, names, reason in reasons:
        kinds = _kinds(kind, reason)
        terms = len([k for k in kinds if k in TERM_KINDS])
        sentences = reason_sentences(reason, names)
        _assert_sentences(where, sentences, terms)
        if kind == "approximate":
            assert len(sentences) == len(dict.fromkeys(sentences)) <= terms, where
            assert sentences[0].startswith("The learner "), where
            assert all(s.startswith("It also ") for s in sentences[1:]), where


@pytest.mark.parametrize("kind", sorted(SYNTHETIC))
def test_the_kinds_no_model_here_produces_read_as_sentences(kind):
    text = SYNTHETIC[kind]
    if kind in TERM_KINDS:
        assert re.fullmatch(TERM_KINDS[kind], text)
        _assert_sentences(kind, reason_sentences(text), 1)
        _assert_sentences(kind, reason_sentences("no ETP relation traces it: " + text), 1)
    else:
        assert re.fullmatch(NONE_KINDS[kind], text)
        _assert_sentences(kind, reason_sentences(text), 0)


def test_a_list_of_ops_names_each_weight_once_in_english():
    reason = (
        "drops h→h rnn.h → rnn.h through rnn.Wz.weight (etp_mv, equation 1), etp_mv "
        "(equation 3), mul (equation 5), rnn.Wh.weight (etp_mv, equation 7)"
    )
    (sentence,) = reason_sentences(reason, {3: "rnn.Wr.weight"})
    assert sentence == (
        "The learner ignores how rnn.h feeds back into itself through rnn.Wz.weight, "
        "rnn.Wr.weight, a mul op and rnn.Wh.weight."
    )


def test_the_not_learned_opening_is_said_once():
    summary = weight_summary(
        "not_learned", reason="Not learned online: it reaches no hidden state."
    )
    assert summary == "Not learned online: it reaches no hidden state."
    assert without_opening(summary) == "It reaches no hidden state."
    assert without_opening("Not learned online: Not learned online: x y.") == "X y."


def test_the_lesson_summarys_terms_do_not_repeat_its_opening():
    """``dropped_terms`` feeds the lesson summary, which writes "(not learned online): " before
    a none weight's terms (``js/src/live/lesson.js``): its terms must not say it again."""
    from etp_viz.view.plain import dropped_terms

    weights = [
        {
            "path": "rnn.Wr.weight",
            "claim": "none",
            "claim_reason": "etp_mv(rnn.Wr.weight) (equation 3) reaches hidden state only "
            "through other trainable ETP equation(s) (etp_mv@7).",
            "summary": "Not learned online: it reaches the hidden state only through another "
            "weight op (rnn.Wh.weight).",
        },
        {
            "path": "rnn.Wz.weight",
            "claim": "approximate",
            "claim_reason": "ES-D-RTRL factorises the trace into input × output (decaying "
            "averages), not the exact per-weight trace; drops h→h rnn.h → rnn.h through "
            "rnn.Wz.weight (etp_mv, equation 1), rnn.Wh.weight (etp_mv, equation 7)",
        },
    ]
    (none, approximate) = dropped_terms(weights)[""]
    assert none["terms"] == [
        "It reaches the hidden state only through another weight op (rnn.Wh.weight)."
    ]
    assert approximate["terms"] == term_clauses(weights[1]["claim_reason"])
    assert approximate["terms"] == [
        "approximates each weight's trace by input × output (decaying averages), not the "
        "exact per-weight trace",
        "ignores how rnn.h feeds back into itself through rnn.Wz.weight and rnn.Wh.weight",
    ]


def test_each_weights_summary_in_explain_says_its_opening_once():
    """``graph.explain()``: per weight a status line, then its summary in sentences."""
    import io

    for name, graph, algorithms in _graphs():
        for algorithm in algorithms:
            out = io.StringIO()
            graph.explain(claims=algorithm, file=out)
            for line in out.getvalue().splitlines():
                text = line.strip()
                if text.startswith(("Not learned", "Learned online", "A readout")):
                    assert text.endswith("."), f"{name}: {text}"
                    assert not JARGON.search(text), f"{name}: {text}"
                    assert not re.search(r"(?i)not learned online: not learned", text), text
                    assert ", a weight op," not in text and "; ignores" not in text, text
