"""The explorer's "What if…" control without a browser: which changes each weight is offered
(decided in Python, sent in ``what_if_changes``) and the ``what_if`` request, whose result
(the diff, the cost, the two graphs) is the ``what_if`` trait; a failure is a result with
``error``, never an exception out of the widget."""

from __future__ import annotations

import warnings

import jax
import pytest

import etp_viz
from etp_viz.explorer import whatif_offers
from etp_viz.explorer.live_explorer import build_explorer
from etp_viz.explorer.running import RunningExplorer
from tests.test_whatif import N_HID, N_IN, Leaky, _net

X = jax.random.normal(jax.random.PRNGKey(1), (N_IN,))


def explorer_of(model, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the plain `@` warning: the subject here
        explorer = build_explorer(model, X, **options)
    explorer.sent = []
    explorer.send = lambda content, buffers=None: explorer.sent.append(content)
    return explorer


def ids(explorer, weight):
    return [offer["id"] for offer in explorer.what_if_changes.get(weight, [])]


def ask(explorer, weight, change, request_id=1):
    explorer._on_custom_message(
        explorer,
        {"type": "request", "id": request_id, "method": "what_if",
         "params": {"weight": weight, "change": change}},
        [],
    )  # fmt: skip
    return explorer.sent[-1]


@pytest.fixture(scope="module")
def plain():
    return explorer_of(_net(Leaky(plain=True)))


@pytest.fixture(scope="module")
def gru():
    return explorer_of(_net(etp_viz.nn.GRUCell(N_IN, N_HID)))


def test_a_plain_matmul_weight_is_offered_lift_and_exact_rtrl_and_learned_ones_nothing(plain):
    assert ids(plain, "cell.W") == ["lift", "exact"]
    lift, exact = plain.what_if_changes["cell.W"]
    assert lift["change"] == {"lift": True} and lift["label"] == "lift plain ops"
    assert exact["change"] == {"learner": whatif_offers.exact_learner()}
    assert not lift["disabled"] and not exact["disabled"]
    assert set(plain.what_if_changes) == {"cell.W"}  # cell.V online exact, out a readout
    assert plain.frontend_state()["what_if_changes"] == plain.what_if_changes


def test_a_gru_gate_is_offered_exact_rtrl_and_no_lift(gru):
    assert ids(gru, "cell.Wr.weight") == ["exact"]  # not learned: h -> h through Wh
    assert ids(gru, "cell.Wz.weight") == ["exact"]  # approximate
    assert "out.weight" not in gru.what_if_changes
    title = gru.what_if_changes["cell.Wr.weight"][0]["title"]
    assert "influence matrix" in title


def test_the_lift_request_sets_the_diff_and_both_graphs(plain):
    reply = ask(plain, "cell.W", "lift", request_id=7)
    assert reply["type"] == "response" and reply["id"] == 7 and reply["error"] is None
    result = plain.what_if
    assert reply["result"] == result and result["error"] == ""
    assert result["diff"]["relations"] == {"added": [["cell.W", ["cell.h"]]], "removed": []}
    claims = [(r["leaf"], r["before"], r["after"]) for r in result["diff"]["claims"]]
    assert claims == [("cell.W", "none", "exact")]
    assert result["after"]["state_bytes"] > result["before"]["state_bytes"]
    assert result["before"]["ms_per_step"] > 0 and result["after"]["ms_per_step"] > 0
    assert result["graphs_html"].count('class="etp-whatif-side"') == 2
    assert plain.frontend_state()["what_if"] == result
    assert plain.error == ""


def test_exact_rtrl_on_the_gru_makes_every_claim_exact(gru):
    result = ask(gru, "cell.Wr.weight", "exact")["result"]
    assert result["error"] == "" and result["after"]["learner"] == whatif_offers.exact_learner()
    after = {r["leaf"]: r["after"] for r in result["diff"]["claims"]}
    assert after["cell.Wr.weight"] == "exact" and after["cell.Wz.weight"] == "exact"


def test_failures_are_results_with_an_error_not_a_broken_widget(plain, monkeypatch):
    unknown = ask(plain, "cell.V", "lift")
    assert unknown["error"] is None
    assert "no change 'lift' is offered for 'cell.V'" in unknown["result"]["error"]

    def refuse(*args, **kwargs):
        raise ValueError("this model refuses")

    monkeypatch.setattr(etp_viz.whatif, "what_if", refuse)
    failed = ask(plain, "cell.W", "lift")["result"]
    assert failed["error"] == "ValueError: this model refuses" and plain.what_if == failed
    assert plain.error == ""


def test_exact_rtrl_is_offered_disabled_with_why_above_the_size_limit(monkeypatch):
    monkeypatch.setattr(whatif_offers, "RTRL_MAX_BYTES", 16)
    explorer = explorer_of(_net(Leaky(plain=True)))
    exact = explorer.what_if_changes["cell.W"][1]
    assert exact["disabled"] and "above the 16 B a click tries" in exact["title"]
    assert ask(explorer, "cell.W", "exact")["result"]["error"] == exact["title"]


def test_a_lifted_view_is_offered_exact_rtrl_not_lift_and_compare_mode_offers_nothing():
    lifted = explorer_of(_net(etp_viz.nn.GRUCell(N_IN, N_HID)), lift=True)
    offers = {w: found for w, found in lifted.what_if_changes.items()}
    assert offers and {o["id"] for found in offers.values() for o in found} == {"exact"}
    assert not any(o["disabled"] for found in offers.values() for o in found)
    # RTRL takes no lift: the view stays lifted, RTRL learns the model as written, exactly
    weight = next(iter(offers))
    result = ask(lifted, weight, "exact")["result"]
    assert not result["error"] and not result["after"]["error"]
    assert result["after"]["learner"] == "rtrl"
    assert {row["after"] for row in result["diff"]["claims"]} == {"exact"}
    assert weight in result["changed"]
    assert RunningExplorer.offers_what_if is False


def test_graphs_above_the_node_limit_are_left_out_with_a_note():
    result = etp_viz.what_if(_net(Leaky(plain=True)), X, change="lift", measure=False)
    html = result.graphs_html(max_nodes=3)
    assert "<svg" not in html and html.count("too many to draw here") == 2
