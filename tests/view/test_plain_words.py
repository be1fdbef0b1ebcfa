"""No internal ids in what a student reads: the view model's summaries, compare mode's claims
and gap, ``graph.explain()`` and the lesson summary say it in plain words for the suggested
model of every teaching task; the compiler's codes stay in ``detail`` (hover) and in
``explain(codes=True)``."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

import etp_viz
from etp_viz.explorer.compare import _gap
from etp_viz.live.history import History
from etp_viz.live.lesson import lesson_summary
from etp_viz.tasks import TASKS
from etp_viz.view import build_view_model
from etp_viz.view.plain import JARGON, dropped_terms, plain_reason, view_names
from etp_viz.view.weights import claims_by_weight

#: a code in the compiler's text (what ``detail`` keeps)
CODES = ("equation ", "@")
LEARNERS = ("d_rtrl", "es_d_rtrl")


@pytest.fixture(scope="module", params=sorted(TASKS))
def compiled(request):
    task = TASKS[request.param]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = etp_viz.compile_etrace_graph(
            task.suggested_model(hidden_size=4), task.example_input()
        )
    views = {a: build_view_model(graph, algorithm=a).to_json() for a in LEARNERS}
    return request.param, graph, views


def _clean(texts, where):
    bad = [t for t in texts if JARGON.search(t)]
    assert not bad, f"{where}: internal codes reach a student: {bad}"


def _student_strings(vm: dict) -> list[str]:
    out = []
    for w in vm["weights"]:
        out += [w["summary"], w.get("fix") or "", w.get("gap") or ""]
        out += [c["summary"] for c in w.get("claims") or []]
    out += [e["label"] for e in vm["legend"]] + [e["title"] for e in vm["legend"]]
    return out


def test_the_weights_panel_reads_plain_and_keeps_the_codes_on_hover(compiled):
    name, graph, views = compiled
    for algorithm, vm in views.items():
        _clean(_student_strings(vm), f"{name}/{algorithm} view model")
        for w in vm["weights"]:
            assert w["summary"], w["path"]
            coded = [t for t in (w["reason"], w["claim_reason"]) if any(c in t for c in CODES)]
            for text in coded:  # the codes are not lost: they are the hover text
                assert text in w["detail"], (w["path"], w["detail"])


def test_explain_is_plain_and_codes_true_keeps_the_developer_report(compiled):
    name, graph, _ = compiled
    plain, codes = io.StringIO(), io.StringIO()
    report = graph.explain(file=plain)
    graph.explain(file=codes, codes=True)
    _clean(plain.getvalue().splitlines(), f"{name} explain()")
    assert str(report) + "\n" == plain.getvalue() and report.records == tuple(report)
    for verdict in report.verdicts.values():
        assert f"{verdict.name}: {verdict.text}" in plain.getvalue()
    coded = [v.reason + v.claim_reason for v in report.verdicts.values()]
    if any(c in t for t in coded for c in CODES):
        assert any(c in codes.getvalue() for c in CODES), codes.getvalue()


def test_compare_claims_and_gap_are_plain_with_codes_in_detail(compiled):
    name, graph, views = compiled
    vm = views["d_rtrl"]
    tables = {a: claims_by_weight(graph.gradient_claims(a)) for a in LEARNERS}
    for weight in vm["weights"]:
        claims = [
            {"algorithm": a, "claim": t[weight["path"]][0], "reason": t[weight["path"]][1]}
            for a, t in tables.items()
        ]
        extra = _gap(weight, claims, {}, vm)
        _clean([c["summary"] for c in extra["claims"]] + [extra.get("gap", "")], name)
        for raw, shown in zip(claims, extra["claims"], strict=True):
            assert raw["reason"] in shown["detail"] and shown["summary"]


def test_the_lesson_summary_is_plain(compiled):
    name, _, views = compiled
    weights = [
        {
            **w,
            "claims": [
                {
                    "algorithm": a,
                    "claim": v["weights"][i]["claim"],
                    "reason": v["weights"][i]["claim_reason"],
                }
                for a, v in views.items()
            ],
        }
        for i, w in enumerate(views["d_rtrl"]["weights"])
    ]
    dropped = dropped_terms(weights)
    runs = {}
    for label, final in (("bptt", 0.1), *((a, 0.5) for a in LEARNERS)):
        history = History(meta={"episode": 2, "chance_loss": 1.0})
        history.extend(np.arange(4), {"loss": np.asarray([1.0, 0.8, final, final])})
        runs[label] = history
    summary = lesson_summary(runs, budget=4, reference="bptt", dropped=dropped, episodes=1)
    _clean(summary.text().splitlines(), f"{name} lesson summary")
    terms = [t for entries in dropped.values() for e in entries for t in e["terms"]]
    _clean(terms, f"{name} dropped terms")


@pytest.mark.parametrize(
    ("reason", "names", "expected"),
    [
        (
            "etp_mv(rnn.Wr.weight) (equation 3) reaches hidden state only through other "
            "trainable ETP equation(s) (etp_mv@7). By the non-parametric-tail rule it is not "
            "learned online; learn it with BPTT.",
            {7: "rnn.Wh.weight"},
            "The weight rnn.Wr.weight reaches the hidden state only through another weight op "
            "(rnn.Wh.weight), so it is not learned online; learn it with BPTT.",
        ),
        (
            "drops h→h rnn.h → rnn.h through rnn.Wz.weight (etp_mv, equation 1), etp_mv "
            "(equation 3); drops the effect on readout.r's future states (readout.r reads "
            "readout.r from the previous step; outside this weight's hidden groups)",
            {3: "rnn.Wr.weight"},
            "The learner ignores how rnn.h feeds back into itself through rnn.Wz.weight and "
            "rnn.Wr.weight. It also ignores the effect on readout.r's later steps.",
        ),
        (
            "Hidden states rnn.V, rnn.a read each other and form group 0. eqns [0, 1, 2]",
            {},
            "Hidden states rnn.V, rnn.a read each other and form group 0.",
        ),
        ("non-finite value in: trace/r0.g0 at mul (equation 9)", {}, None),
    ],
)
def test_plain_reason_turns_each_kind_of_reason_into_a_sentence(reason, names, expected):
    plain = plain_reason(reason, names)
    assert plain.detail == reason
    assert not JARGON.search(plain.summary), plain.summary
    if expected is not None:
        assert plain.summary == expected


def test_view_names_reads_the_op_of_each_weight():
    weights = [{"path": "rnn.W", "node_ids": ["p:rnn.W", "e4"]}, {"path": "b", "node_ids": []}]
    assert view_names(weights) == {4: "rnn.W"}
