"""Claims a user's CI can hold (issue 23): ``etp_viz.testing.assert_claims``,
``graph.claims_json()`` and ``python -m etp_viz check`` fail, naming the weight, when a claim
changes (here: a refactor that applies ``W`` with a plain ``@`` and so cuts its relation)."""

from __future__ import annotations

import io
import json
import warnings

import brainstate
import jax.numpy as jnp
import pytest

import etp_viz
import etp_viz.testing
from etp_viz.__main__ import main


class Cell(brainstate.nn.Module):
    def __init__(self, refactored: bool = False):
        super().__init__()
        self.refactored = refactored
        self.W = brainstate.ParamState(0.3 * jnp.ones((3, 4)))
        self.U = brainstate.ParamState(0.1 * jnp.ones((4, 4)))
        self.Wo = brainstate.ParamState(0.2 * jnp.ones((4, 2)))

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.zeros(4))

    def update(self, x):
        drive = x @ self.W.value if self.refactored else etp_viz.matmul(x, self.W.value)
        h = jnp.tanh(drive + etp_viz.matmul(self.h.value, self.U.value))
        self.h.value = h
        return etp_viz.matmul(h, self.Wo.value)


def make_model():
    model = Cell()
    brainstate.nn.init_all_states(model)
    return model, jnp.ones(3)


def make_refactored():
    model = Cell(refactored=True)
    brainstate.nn.init_all_states(model)
    return model, jnp.ones(3)


EXPECTED = {"W": "approximate", "U": "approximate", "Wo": "exact"}


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_assert_claims_holds_and_fails_naming_the_changed_weight():
    graph = etp_viz.testing.assert_claims(*make_model(), EXPECTED)
    assert graph.gradient_claims()["Wo"].kind == "exact"
    with pytest.raises(
        AssertionError,
        match=r"1 gradient claim.*\n  W \[d_rtrl\]: expected approximate, got none -- ",
    ) as error:
        etp_viz.testing.assert_claims(*make_refactored(), EXPECTED)
    assert "U [" not in str(error.value) and "Wo [" not in str(error.value)


def test_a_misspelt_weight_or_kind_is_named():
    with pytest.raises(
        AssertionError, match=r"Wx \[d_rtrl\]: expected exact, but the model has no"
    ):
        etp_viz.testing.assert_claims(*make_model(), {"Wx": "exact"})
    with pytest.raises(AssertionError, match=r"W \[d_rtrl\]: expected kind 'exactly'"):
        etp_viz.testing.assert_claims(*make_model(), {"W": "exactly"})


def test_a_snapshot_round_trips_and_catches_a_change(tmp_path):
    model, x = make_model()
    path = tmp_path / "claims.json"
    graph = etp_viz.compile_etrace_graph(model, x)
    text = graph.claims_json(["d_rtrl", "es_d_rtrl"], path=path)
    data = json.loads(path.read_text())
    assert json.loads(text) == data and data["format"] == "etp_viz.claims/1"
    assert data["claims"]["d_rtrl"] == EXPECTED
    assert data["claims"]["es_d_rtrl"]["W"] == "approximate" and data["reasons"]["d_rtrl"]["W"]
    etp_viz.testing.assert_claims(model, x, path)
    etp_viz.testing.assert_claims(model, x, text, algorithm="es_d_rtrl")
    with pytest.raises(AssertionError, match=r"W \[d_rtrl\]: expected approximate, got none"):
        etp_viz.testing.assert_claims(*make_refactored(), path)


def test_a_snapshot_is_strict_about_new_weights(tmp_path):
    snapshot = {"format": "etp_viz.claims/1", "claims": {"d_rtrl": {"W": "approximate"}}}
    with pytest.raises(AssertionError, match=r"U \[d_rtrl\]: not in the expected claims"):
        etp_viz.testing.assert_claims(*make_model(), snapshot)
    etp_viz.testing.assert_claims(*make_model(), {"W": "approximate"})  # a mapping: not strict


def test_the_check_command_writes_holds_and_fails(tmp_path, capsys):
    path = str(tmp_path / "claims.json")
    factory = "tests.test_testing:make_model"
    assert main(["check", factory, "--claims", path, "--write"]) == 0
    assert main(["check", factory, "--claims", path]) == 0
    assert "match" in capsys.readouterr().out
    assert main(["check", "tests.test_testing:make_refactored", "--claims", path]) == 1
    out = capsys.readouterr().out
    assert "W [d_rtrl]: expected approximate, got none" in out and "Wo [" not in out


def test_run_check_prints_to_the_given_stream(tmp_path):
    from etp_viz.__main__ import build_parser, run_check

    path = str(tmp_path / "claims.json")
    args = build_parser().parse_args(["check", "tests.test_testing:make_model", "--claims", path])
    args.write = True
    out = io.StringIO()
    assert run_check(args, out) == 0 and "Wrote" in out.getvalue()


def test_the_check_command_takes_every_learner_by_name(tmp_path, capsys):
    """``check --algorithm`` takes the influence learners too (their claims come from the
    learner itself), and ``assert_claims`` with their names."""
    path = str(tmp_path / "claims.json")
    factory = "tests.test_testing:make_model"
    names = ["--algorithm", "snap1", "--algorithm", "rtrl", "--algorithm", "ostl"]
    assert main(["check", factory, "--claims", path, "--write", *names]) == 0
    snapshot = json.loads(open(path, encoding="utf-8").read())
    assert set(snapshot["claims"]) == {"snap1", "rtrl", "ostl"}
    assert set(snapshot["claims"]["rtrl"].values()) == {"exact"}
    assert main(["check", factory, "--claims", path]) == 0
    model, x = make_model()
    etp_viz.testing.assert_claims(model, x, {"W": "exact"}, algorithm="rtrl")
    with pytest.raises(AssertionError, match=r"W \[snap1\]"):
        wrong = {"W": "none" if snapshot["claims"]["snap1"]["W"] != "none" else "exact"}
        etp_viz.testing.assert_claims(model, x, wrong, algorithm="snap1")
