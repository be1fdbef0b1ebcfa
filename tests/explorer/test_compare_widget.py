"""Compare mode's widget (Python side): panels, messages, status rows, claims per weight."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import etp_viz
from etp_viz import tasks
from etp_viz.explorer.compare import CompareExplorer

ALGORITHMS = ["d_rtrl", "snap1", "rtrl", "bptt"]


@pytest.fixture(scope="module")
def explorer():
    task = tasks.get_task("sine")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex = etp_viz.show(
            task.suggested_model(hidden_size=8),
            task.example_input(),
            task=task,
            algorithm=ALGORITHMS,
            fidelity_every=6,
            fidelity_window=3,
        )
    sent = []
    ex.send = lambda content, buffers=None: sent.append((content, buffers))
    ex.sent = sent
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex.step(12)
    return ex


def test_show_with_a_list_opens_compare_mode(explorer):
    assert isinstance(explorer, CompareExplorer)
    names = [p["name"] for p in explorer.live_panels]
    assert names == ["loss", "cosine", "rel_error"]  # regression: no accuracy panel
    assert all(p["kind"] == "compare" and p["labels"] == ALGORITHMS for p in explorer.live_panels)


def test_each_panel_gets_one_row_block_per_algorithm(explorer):
    last = {c["name"]: (c, b) for c, b in explorer.sent}
    content, buffers = last["loss"]
    assert content["shape"] == [4, 12, 2] and content["step"] == 12
    data = np.frombuffer(buffers[0], "<f4").reshape(content["shape"])
    np.testing.assert_array_equal(data[:, :, 0], np.tile(np.arange(12), (4, 1)))
    for i, label in enumerate(ALGORITHMS):
        np.testing.assert_allclose(data[i, :, 1], explorer.histories[label].loss, rtol=1e-6)
    content, buffers = last["cosine"]
    cosine = np.frombuffer(buffers[0], "<f4").reshape(content["shape"])
    assert content["shape"] == [4, 2, 2]
    assert cosine[:, :, 0].tolist() == [[6, 12]] * 4
    assert cosine[ALGORITHMS.index("rtrl"), :, 1] == pytest.approx([1.0, 1.0], abs=1e-5)


def test_status_carries_the_cost_table(explorer):
    status = explorer.live_status
    assert status["step"] == 12 and status["algorithm"].startswith("compare:")
    rows = status["compare"]
    assert [r["algorithm"] for r in rows] == ALGORITHMS
    assert all(r["step"] == 12 and r["state_bytes"] >= 0 for r in rows)
    json.dumps(status, allow_nan=False)  # what the front end receives is strict JSON


def test_weights_carry_one_claim_per_algorithm(explorer):
    weights = explorer.view_model["weights"]
    assert weights
    for weight in weights:
        claims = {c["algorithm"]: c["claim"] for c in weight["claims"]}
        assert list(claims) == ALGORITHMS
        assert claims["rtrl"] == "exact"
        assert claims["bptt"] == "exact"  # BPTT over each episode: the exact reference
        assert not weight.get("claim")  # no single algorithm's claim in compare mode
    approximate = [c for w in weights for c in w["claims"] if c["claim"] == "approximate"]
    assert all(c["reason"] for c in approximate)


def test_the_fidelity_panels_name_the_exact_learners_and_the_reference(explorer):
    """The reference line is labelled by what is true: RTRL and BPTT over each episode are
    exact on every weight; the meter's 3-step window is shorter than an episode, so its
    reference is named as BPTT over those steps."""
    assert explorer.exact_learners == ["rtrl", "bptt"]
    for panel in explorer.live_panels[1:]:
        assert "exact: rtrl, bptt" in panel["title"], panel["title"]
        assert "no learner" not in panel["title"]
        assert "BPTT over the last 3 steps" in panel["title"]


def test_requests_drive_every_algorithm(explorer):
    reply = explorer._answer({"id": 1, "method": "live_step", "params": {"n": 3}})
    assert reply["error"] is None and reply["result"]["step"] == 15
    assert {s.step_count for s in explorer.comparison.sessions.values()} == {15}
    reply = explorer._answer({"id": 2, "method": "live_set", "params": {"steps_per_frame": 5}})
    assert reply["result"] == {"steps_per_frame": 5}
    reply = explorer._answer({"id": 3, "method": "live_set", "params": {"decay": 0.5}})
    assert "compare mode takes" in reply["error"]
    with pytest.raises(NotImplementedError, match="etp_viz.verify"):
        explorer.verify()


def test_saved_state_is_strict_json_with_every_history(explorer):
    state = explorer.frontend_state()
    text = json.dumps(state, allow_nan=False)
    saved = json.loads(text)["live_history"]
    assert set(saved["compare"]) == set(ALGORITHMS)
    assert len(saved["compare"]["rtrl"]["steps"]) == explorer.comparison.step_count
    html = explorer.static_html()
    assert "data:image/png;base64," in html


def test_mesh_is_refused_in_compare_mode():
    task = tasks.get_task("sine")
    with pytest.raises(ValueError, match="one device"):
        etp_viz.show(
            task.suggested_model(hidden_size=4),
            task.example_input(),
            task=task,
            algorithm=["d_rtrl", "rtrl"],
            mesh=object(),
        )


def test_a_single_live_session_of_a_named_influence_learner_shows_and_verifies_its_claims():
    task = tasks.get_task("sine")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # the compare explorer's model size: the small programs of its shapes are compiled
        ex = etp_viz.show(
            task.suggested_model(hidden_size=8), task.example_input(), task=task, algorithm="rtrl"
        )
        assert {w["claim"] for w in ex.view_model["weights"]} == {"exact"}
        ex.step(6)
        report = ex.verify(steps=4)  # the session's own learner, not D-RTRL by default
    assert report.algorithm == "rtrl" and not report.contradictions


def test_panels_teach_chance_smoothing_and_which_learner_is_exact(explorer):
    loss, cosine = explorer.live_panels[0], explorer.live_panels[1]
    task = tasks.get_task("sine")
    assert loss["chance"] == pytest.approx(task.chance_loss)
    assert loss["smooth"] and loss["episode"] == task.n_steps and loss["tooltip"]
    assert explorer.exact_learners == ["rtrl", "bptt"]
    assert cosine["exact"] == ["rtrl", "bptt"] and "exact: rtrl, bptt" in cosine["title"]
    assert all(p.get("x_label") and p.get("y_label") for p in explorer.live_panels)


def test_each_approximate_weight_names_the_dropped_term_that_explains_the_gap(explorer):
    node_ids = {n["id"] for n in explorer.view_model["nodes"]}
    gaps = {w["path"]: w for w in explorer.view_model["weights"] if w.get("gap")}
    assert "rnn.W.weight" in gaps, [w["path"] for w in explorer.view_model["weights"]]
    weight = gaps["rnn.W.weight"]
    approximate = [c["algorithm"] for c in weight["claims"] if c["claim"] == "approximate"]
    assert approximate and all(name in weight["gap"] for name in approximate)
    assert "exact: rtrl, bptt" in weight["gap"] and "drop" in weight["gap"]
    assert weight["dropped_nodes"] and set(weight["dropped_nodes"]) <= node_ids
    json.dumps(explorer.view_model)


def test_a_classification_comparison_has_accuracy_and_a_masked_loss():
    task = tasks.get_task("delayed_recall", seq_len=1, delay=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex = etp_viz.show(
            task.suggested_model(hidden_size=4),
            task.example_input(),
            task=task,
            algorithm=["d_rtrl", "bptt"],
            fidelity_every=0,
        )
        sent = []
        ex.send = lambda content, buffers=None: sent.append((content, buffers))
        ex.step(9)
    assert [p["name"] for p in ex.live_panels] == ["loss", "accuracy"]
    accuracy = ex.live_panels[1]
    assert accuracy["chance"] == pytest.approx(1 / task.output_size)
    last = {c["name"]: (c, b) for c, b in sent}
    history = ex.histories["d_rtrl"]
    labelled = history["accuracy/labelled"] > 0
    for name in ("loss", "accuracy"):
        content, buffers = last[name]
        rows = np.frombuffer(buffers[0], "<f4").reshape(content["shape"])
        assert np.isnan(rows[0, ~labelled, 1]).all() and np.isfinite(rows[0, labelled, 1]).all()
    content, buffers = last["accuracy"]
    rows = np.frombuffer(buffers[0], "<f4").reshape(content["shape"])
    expected = history["accuracy/correct"][labelled] / history["accuracy/labelled"][labelled]
    np.testing.assert_allclose(rows[0, labelled, 1], expected)


def test_the_gap_names_every_kind_of_dropped_term_an_approximate_learner_has():
    """ES-D-RTRL's reason is its factorised trace, not a ``drops`` term: the gap sentence
    lists it among the dropped parts (the compiler's :func:`term_clauses`, every term kind),
    not as an unexplained "is approximate"."""
    from etp_viz.compiler.claims.plain import term_clauses

    task = tasks.get_task("sine")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex = etp_viz.show(task.suggested_model(hidden_size=4), task.example_input(), task=task,
                          algorithm=["es_d_rtrl", "bptt"], fidelity_every=0)  # fmt: skip
    weight = next(w for w in ex.view_model["weights"] if w["path"] == "rnn.W.weight")
    (es,) = [c for c in weight["claims"] if c["algorithm"] == "es_d_rtrl"]
    assert es["claim"] == "approximate"
    terms = term_clauses(es["reason"])
    assert any("factoris" in es["reason"] and t for t in terms), es["reason"]
    assert "es_d_rtrl drops part of the gradient" in weight["gap"], weight["gap"]
    assert all(t in weight["gap"] for t in terms), (terms, weight["gap"])
