"""One verdict per weight (``graph.verdicts``): the compiler's, and every reader agrees with it.

``gradient_claims``, ``graph.weight_status``, ``alg.learning_status``, the view model's
weights panel and ``verify()`` all report the verdict; the status and claim words are the
ones ``docs/semantics.md`` ("Verdict") defines.
"""

from __future__ import annotations

import functools
import io
import re
import warnings
from pathlib import Path

import brainstate
import jax.numpy as jnp
import pytest

import etp_viz
import etp_viz.nn as enn
from etp_viz.compiler import WeightVerdict
from etp_viz.compiler.claims import CLAIM_KINDS, claim_algorithm, combine_leaf_claims
from etp_viz.compiler.claims.verdict import STATUS_CODES, STATUS_WORDS, STATUSES, status_text
from etp_viz.ops import matmul
from etp_viz.view.model import build_view_model
from tests.compiler.models import Leaky, init
from tests.learn import archs

SEMANTICS = Path(__file__).resolve().parents[2] / "docs" / "semantics.md"


class PlainRecurrence(brainstate.nn.Module):
    """``V`` applied with a plain ``@``: not learned (fix: etp_viz.matmul); ``Wo`` a readout."""

    def __init__(self, n=3):
        super().__init__()
        self.W = brainstate.ParamState(0.2 * jnp.ones((2, n)))
        self.V = brainstate.ParamState(0.1 * jnp.ones((n, n)))
        self.Wo = brainstate.ParamState(0.3 * jnp.ones((n, 1)))
        self.h = brainstate.HiddenState(jnp.zeros(n))

    def update(self, x):
        self.h.value = jnp.tanh(matmul(x, self.W.value) + self.h.value @ self.V.value)
        return self.h.value @ self.Wo.value


def _gru_net():
    with brainstate.random.seed_context(0):
        net = etp_viz.tasks.RecurrentNet(enn.GRUCell(3, 4), enn.Linear(4, 2))
    return brainstate.nn.init_all_states(net), jnp.ones(3)


def _arch(arch):
    return lambda: (archs.build(arch), archs.inputs(arch, 1)[0])


MODELS = {
    "gru_net": _gru_net,
    "leaky": lambda: (Leaky(), jnp.ones(3)),
    "plain_recurrence": lambda: (init(PlainRecurrence()), jnp.ones(2)),
    "dense_stack": _arch(
        archs.Arch((archs.Layer(rec="dense"), archs.Layer(rec="leaky", bias="etp")), seed=1)
    ),
}


@functools.cache
def compiled(name):
    model, x = MODELS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model, x, etp_viz.compile_etrace_graph(model, x)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.mark.parametrize("name", MODELS)
def test_every_weight_has_one_verdict_in_the_vocabulary(name):
    _, _, graph = compiled(name)
    verdicts = graph.verdicts()
    assert list(verdicts) == list(graph.module_info.weight_path_to_invars)
    for path, verdict in verdicts.items():
        assert isinstance(verdict, WeightVerdict) and verdict.path == path
        assert verdict.status in STATUSES and verdict.reason
        assert graph.weight_status[path] == STATUS_CODES[verdict.status]
        assert (verdict.fix is not None) == (not verdict.learned)
        assert verdict.claim == "" and verdict.leaf_claims == ()


@pytest.mark.parametrize("algorithm", ["d_rtrl", "es_d_rtrl"])
@pytest.mark.parametrize("name", MODELS)
def test_the_verdict_carries_the_gradient_claims(name, algorithm):
    _, _, graph = compiled(name)
    claims = graph.gradient_claims(algorithm)
    verdicts = graph.verdicts(algorithm)
    leaves = {k: c for v in verdicts.values() for k, c in v.leaf_claims}
    assert leaves == dict(claims)
    for verdict in verdicts.values():
        kind, reason = combine_leaf_claims(list(verdict.leaf_claims))
        assert (verdict.claim, verdict.claim_reason) == (kind, reason)
        assert verdict.claim == claims[verdict.name].kind and verdict.claim in CLAIM_KINDS
        assert verdict.online == any(c.online for _, c in verdict.leaf_claims)
    assert graph.verdicts(algorithm) == verdicts  # cached, and a copy each call


def test_the_verdict_names_status_reason_and_fix():
    _, _, graph = compiled("plain_recurrence")
    verdicts = graph.verdicts("d_rtrl")
    assert verdicts[("W",)].status == "online" and verdicts[("W",)].groups == (0,)
    assert verdicts[("Wo",)].status == "readout" and verdicts[("Wo",)].text == "readout · exact"
    plain = verdicts[("V",)]
    assert plain.status == "not_learned" and plain.text == "not learned"
    assert plain.fix == "use etp_viz.matmul instead of `@`" and "V" in plain.reason
    assert plain.reason == graph.diagnostics[plain.reason_record].message
    _, _, gru = compiled("gru_net")
    wr = next(v for p, v in gru.verdicts().items() if "Wr" in p)
    assert wr.status == "not_learned" and wr.reason and wr.diagnostics


@pytest.mark.parametrize("name", MODELS)
def test_learning_status_is_the_verdict(name):
    model, x, graph = compiled(name)
    alg = etp_viz.D_RTRL(model)
    alg.compile_graph(x)
    verdicts = alg.graph.verdicts()
    for path, entry in alg.learning_status.items():
        verdict = verdicts[path]
        assert entry.kind == STATUS_WORDS[verdict.status], path
        assert entry.online_groups == verdict.groups and entry.learned == verdict.learned
        assert entry.reason == ("" if verdict.learned else verdict.reason)


@pytest.mark.parametrize("name", MODELS)
def test_the_weights_panel_shows_the_verdict(name):
    _, _, graph = compiled(name)
    vm = build_view_model(graph, algorithm="d_rtrl")
    verdicts = {v.name: v for v in graph.verdicts("d_rtrl").values()}
    assert sorted(w.path for w in vm.weights) == sorted(verdicts)
    for weight in vm.weights:
        verdict = verdicts[weight.path]
        assert weight.status == verdict.code and weight.claim == verdict.claim
        assert (weight.reason, weight.fix, weight.groups) == (
            verdict.reason,
            verdict.fix,
            verdict.groups,
        )
        assert weight.diagnostics == verdict.diagnostics
        assert status_text(weight.status, weight.claim) == verdict.text


@pytest.mark.parametrize(
    ("name", "algorithm"), [("leaky", "d_rtrl"), ("plain_recurrence", "eprop")]
)
def test_verify_reports_the_verdict_claims(name, algorithm, x64):
    model, x = MODELS[name]()
    xs = jnp.stack([x, 0.5 * x, -x])
    report = etp_viz.verify(model, xs, algorithm=algorithm)
    assert not report.contradictions, report.table()
    alg = etp_viz.learn.registry.build_learner(model, algorithm)
    alg.compile_graph(x)
    leaves = {k: c for v in alg.graph.verdicts(alg).values() for k, c in v.leaf_claims}
    assert {r.path: r.claim for r in report.rows} == {k: c.kind for k, c in leaves.items()}
    assert report.algorithm == claim_algorithm(alg)[0]


def _documented_words() -> set[str]:
    """The words the "Verdict" glossary of docs/semantics.md defines (bold, backquoted)."""
    text = SEMANTICS.read_text()
    section = text.split("### Verdict", 1)[1].split("\n#", 1)[0]
    return set(re.findall(r"\*\*`([^`]+)`\*\*", section))


def test_one_vocabulary_everywhere(x64):
    documented = _documented_words()
    assert documented == set(STATUS_WORDS.values()) | set(CLAIM_KINDS)
    used: set[str] = set()
    for name in MODELS:
        model, x, graph = compiled(name)
        out = io.StringIO()
        graph.explain(file=out)
        weights = out.getvalue().split("WEIGHTS", 1)[1].split("GRADIENT CLAIMS")[0]
        # a weight's line is "  name: status · claim"; its plain sentences are indented deeper
        rows = [line for line in weights.splitlines()[1:] if not line.startswith("    ")]
        assert rows, weights
        used.update(w for line in rows for w in _status_of(line))
        alg = etp_viz.D_RTRL(model)
        alg.compile_graph(x)
        used.update(w for line in str(alg.learning_status).splitlines() for w in _status_of(line))
        for weight in build_view_model(graph, algorithm="d_rtrl").weights:
            used.update(_words(status_text(weight.status, weight.claim)))
    report = etp_viz.verify(*_plain_run(), algorithm="d_rtrl")
    used.update(r.claim for r in report.rows)
    assert used <= documented, used - documented
    assert {"online", "readout", "not learned", "exact", "approximate", "none"} <= used


def _status_of(line: str) -> set[str]:
    """The status words of an ``explain()`` / ``learning_status`` line ``name: words ...``."""
    return _words(line.split(": ", 1)[1].split(" groups=")[0].split(" -- ")[0])


def _words(text: str) -> set[str]:
    return {w.strip() for w in text.split(" · ") if w.strip()}


def _plain_run():
    model, x = MODELS["plain_recurrence"]()
    return model, jnp.stack([x, -x])


def test_a_learner_names_its_claim_family_not_its_class():
    class MyRenamedLearner(etp_viz.D_RTRL):  # no known name along its MRO
        pass

    class PPPropLookalike(etp_viz.D_RTRL):  # a misleading class name
        pass

    assert claim_algorithm(MyRenamedLearner) == ("d_rtrl", "d_rtrl")
    assert claim_algorithm(PPPropLookalike) == ("d_rtrl", "d_rtrl")
    assert claim_algorithm(etp_viz.ES_D_RTRL) == ("es_d_rtrl", "es_d_rtrl")

    class NoFamily:
        pass

    with pytest.raises(ValueError, match="claim_family"):
        claim_algorithm(NoFamily())
