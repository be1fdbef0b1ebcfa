"""etp_viz.verify: claims beside measured fidelity (issue 12 D), against the BPTT oracle."""

from __future__ import annotations

import dataclasses
import warnings

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
from etp_viz.compiler.claims import GradientClaim
from tests.learn import archs
from tests.learn.helpers import step_loss
from tests.oracles import bptt_gradients

LEAKY = archs.Arch(layers=(archs.Layer(rec="leaky", bias="etp"),), batch=2, seed=3)
CONCAT = archs.Arch(layers=(archs.Layer(rec="concat"),), batch=2, seed=4)


def build(arch, steps=6):
    return archs.build(arch), archs.inputs(arch, steps)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_exact_claims_hold_and_match_the_oracle(x64):
    model, xs = build(LEAKY)
    report = etp_viz.verify(model, xs)
    assert report.algorithm == "d_rtrl" and report.dtype == "float64" and report.num_steps == 6
    assert not report.contradictions, report.table()
    expected = bptt_gradients(model, xs, lambda ys: sum(step_loss(y) for y in ys))
    for row in report.rows:
        assert row.claim == "exact", row
        assert row.relative_error < 1e-9 and row.cosine == pytest.approx(1.0, abs=1e-12)
    leaves = jax.tree.leaves(expected[("layers", 0, "Win")])
    norm = float(np.sqrt(sum(np.sum(np.asarray(leaf) ** 2) for leaf in leaves)))
    assert report["layers.0.Win"].true_norm == pytest.approx(norm, rel=1e-12)


def test_dense_recurrence_is_approximate_and_measured(x64):
    model, xs = build(CONCAT)
    report = etp_viz.verify(model, xs)
    row = report["layers.0.Wcat"]
    assert row.claim == "approximate" and "h→h" in row.reason
    assert row.relative_error > 1e-3 and row.cosine < 1.0
    assert not report.contradictions


def test_a_false_exact_claim_is_a_contradiction(x64, monkeypatch):
    """The report can fail: an 'exact' claim on a gradient the numbers refute is flagged."""
    model, xs = build(CONCAT)
    real = etp_viz.ETraceGraph.gradient_claims

    def lying(self, algorithm="d_rtrl"):
        claims = real(self, algorithm)
        for key, claim in list(claims.items()):
            claims[key] = dataclasses.replace(claim, kind="exact", reason="")
        return claims

    monkeypatch.setattr(etp_viz.ETraceGraph, "gradient_claims", lying)
    report = etp_viz.verify(model, xs)
    assert [r.path for r in report.contradictions] == ["layers.0.Wcat"]
    assert "claimed exact" in report.contradictions[0].contradiction
    assert "CONTRADICTION" in report.table()
    assert report.to_json()["contradictions"] == 1


def test_none_claim_with_an_online_gradient_is_a_contradiction():
    from etp_viz.learn.verification import VerifyRow, _judge

    row = VerifyRow("w", "none", "", 0.3, 0.9, 1.0, 2.0)
    assert "non-zero" in _judge(row, 1e-7).contradiction
    assert not _judge(dataclasses.replace(row, claim="approximate"), 1e-7).contradiction
    assert GradientClaim("w", "none").kind == "none"


def test_targets_loss_and_es_d_rtrl(x64):
    model, xs = build(LEAKY)
    ys = jnp.asarray(np.random.default_rng(0).standard_normal((6, 2, 2)))
    report = etp_viz.verify(model, xs, ys, algorithm="es_d_rtrl", decay=0.5)
    assert report.algorithm == "es_d_rtrl"
    assert report["layers.0.Win"].claim == "approximate"
    custom = etp_viz.verify(model, xs, ys, loss=lambda y, t: jnp.sum(jnp.abs(y - t)))
    assert not custom.contradictions
    assert custom["Wo"].true_norm != pytest.approx(report["Wo"].true_norm)


def test_verify_leaves_the_model_as_it_was(x64):
    model, xs = build(LEAKY)
    model(xs[0])  # hidden states away from their initial values
    before = {k: np.asarray(s.value) for k, s in brainstate.graph.states(model).items()}
    etp_viz.verify(model, xs)
    after = {k: np.asarray(s.value) for k, s in brainstate.graph.states(model).items()}
    assert before.keys() == after.keys()
    for key in before:
        np.testing.assert_array_equal(before[key], after[key])


def test_a_built_algorithm_instance_keeps_its_traces(x64):
    model, xs = build(LEAKY)
    alg = etp_viz.D_RTRL(model)
    alg.compile_graph(xs[0])
    alg(xs[0])
    traces = jax.tree.map(np.asarray, alg.etrace.value)
    report = etp_viz.verify(model, xs, algorithm=alg)
    assert not report.contradictions
    jax.tree.map(np.testing.assert_array_equal, traces, jax.tree.map(np.asarray, alg.etrace.value))


def test_reports_render(x64):
    model, xs = build(CONCAT)
    report = etp_viz.verify(model, xs)
    html = report._repr_html_()
    assert "<table>" in html and "layers.0.Wcat" in html
    data = report.to_json()
    assert {r["path"] for r in data["rows"]} == {"Wo", "layers.0.Wcat"}
    assert set(data["rows"][0]) >= {"claim", "cosine", "relative_error", "contradiction"}
    assert str(report) == report.table()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ys": np.zeros((5, 2, 2))}, "ys has 5 steps but xs has 6"),
        ({"xs": "nan"}, "xs holds NaN"),
        ({"ys": np.full((6, 2, 2), np.nan)}, "ys holds NaN"),
        ({"xs": np.zeros((0, 2, 3))}, "xs must have a time axis"),
        ({"algorithm": "foo"}, "Valid names"),
        ({"loss": 3}, "loss must be a callable"),
        ({"bogus": 1}, "unknown option"),
        ({"decay": 0.5}, "ES-D-RTRL option"),
    ],
)
def test_bad_input_names_the_argument(kwargs, match):
    model, xs = build(LEAKY)
    if isinstance(kwargs.get("xs"), str):
        kwargs["xs"] = np.asarray(xs).copy()
        kwargs["xs"][2, 0, 0] = np.nan
    kwargs.setdefault("xs", xs)
    with pytest.raises((ValueError, TypeError), match=match):
        etp_viz.verify(model, **kwargs)


def test_a_model_without_hidden_state_is_refused():
    class Readout(brainstate.nn.Module):
        def __init__(self):
            super().__init__()
            self.W = brainstate.ParamState(jnp.ones((3, 2)))

        def update(self, x):
            return etp_viz.matmul(x, self.W.value)

    with pytest.raises(ValueError, match="HiddenState"):
        etp_viz.verify(Readout(), jnp.ones((4, 3)))


def test_a_param_state_row_combines_its_leaves(x64):
    """``report["cell.W"]`` of a leaf pair: norms, cosine and error of the leaves as one vector."""
    from etp_viz.learn.verification import VerifyRow, _combine

    rng = np.random.default_rng(0)
    online = [rng.standard_normal(4), rng.standard_normal(3)]
    true = [rng.standard_normal(4), rng.standard_normal(3)]
    rows = []
    for k, (o, t) in enumerate(zip(online, true)):
        rel = np.linalg.norm(o - t) / np.linalg.norm(t)
        cos = o @ t / np.linalg.norm(o) / np.linalg.norm(t)
        rows.append(
            VerifyRow(f"w.{k}", "exact", "", cos, rel, np.linalg.norm(o), np.linalg.norm(t))
        )
    row = _combine("w", rows)
    o, t = np.concatenate(online), np.concatenate(true)
    assert row.cosine == pytest.approx(o @ t / np.linalg.norm(o) / np.linalg.norm(t), rel=1e-12)
    assert row.relative_error == pytest.approx(np.linalg.norm(o - t) / np.linalg.norm(t), rel=1e-12)
    model, xs = build(LEAKY)
    report = etp_viz.verify(model, xs)
    assert report["layers.0"].path == "layers.0"
    with pytest.raises(KeyError, match="no weight"):
        report["nope"]


def test_a_window_without_gradient_verifies_nothing():
    """Issue 29: the task model on its zero example input has BPTT gradient 0 on every
    weight; the report must say it verified nothing, never "0 contradictions"."""
    task = etp_viz.tasks.get_task("delayed_recall")
    model = task.suggested_model(hidden_size=4)
    xs = jnp.stack([task.example_input()] * 3)
    ys = jnp.zeros((3, task.batch_size, task.output_size))  # no target: nothing to learn
    report = etp_viz.verify(model, xs, ys, loss=task.loss)
    assert report.verified_nothing and len(report.unverified) == len(report.rows)
    assert report.verdict().startswith("nothing verified") and "task.sample" in report.verdict()
    assert "0 contradiction(s)" not in report.table()
    assert report.to_json()["verified_nothing"] and not any(
        row["ok"] for row in report.to_json()["rows"]
    )


def test_only_the_weights_without_gradient_are_unverified(x64):
    model, xs = build(LEAKY)
    report = etp_viz.verify(model, xs)
    assert not report.unverified and not report.verified_nothing
    zero = dataclasses.replace(report.rows[0], true_norm=0.0, online_norm=0.0)
    from etp_viz.learn.verification import _untested

    marked = _untested(zero, floor=1e-12)
    assert not marked.verified and "task.sample" in marked.unverified
    assert _untested(report.rows[0], floor=1e-12).verified
