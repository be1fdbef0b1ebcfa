"""``etp_viz.what_if``: one named change, before and after, on copies of the model; the diff
names exactly the relations, groups and claims that changed, against the compiler and BPTT."""

from __future__ import annotations

import json

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz

N_IN, N_HID, T = 3, 4, 6


class Leaky(brainstate.nn.Module):
    """``h = 0.8 h + tanh(x @ W)``, with a plain ``@`` (``plain``) or ``etp_viz.matmul``; ``V``
    is always wired (so a lift must add ``W``'s relation and nothing else)."""

    def __init__(self, plain: bool = True, state: type = brainstate.HiddenState):
        super().__init__()
        key = jax.random.PRNGKey(2)
        self.W = brainstate.ParamState(0.5 * jax.random.normal(key, (N_IN, N_HID)))
        self.V = brainstate.ParamState(0.3 * jax.random.normal(key, (N_IN, N_HID)))
        self.plain, self.state = plain, state

    def init_state(self, batch_size=None, **kwargs):
        self.h = self.state(jnp.zeros(N_HID))

    def update(self, x):
        y = x @ self.W.value if self.plain else etp_viz.matmul(x, self.W.value)
        self.h.value = 0.8 * self.h.value + jnp.tanh(y) + etp_viz.matmul(x, self.V.value)
        return self.h.value


class Net(brainstate.nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.cell = cell
        self.out = etp_viz.nn.Linear(N_HID, 2)

    def update(self, x):
        return self.out(self.cell(x))


def _net(cell):
    brainstate.random.seed(0)
    model = Net(cell)
    brainstate.nn.init_all_states(model)
    return model


@pytest.fixture
def xs(x64):
    return jax.random.normal(jax.random.PRNGKey(1), (T, N_IN))


def test_lift_adds_exactly_the_plain_weights_relation_and_it_is_exact_against_bptt(xs):
    model = _net(Leaky(plain=True))
    result = etp_viz.what_if(model, xs[0], change="lift", xs=xs)
    diff = result.diff()
    assert diff["relations"] == {"added": [["cell.W", ["cell.h"]]], "removed": []}
    assert diff["groups"] == {"added": [], "removed": []}
    assert [(r["leaf"], r["before"], r["after"]) for r in diff["claims"]] == [
        ("cell.W", "none", "exact")
    ]
    # the after side's claims are the compiler's for the lifted model
    lifted = etp_viz.compile_etrace_graph(model, xs[0], lift=True, warn=False)
    assert result.after.claims == {k: c.kind for k, c in lifted.gradient_claims().items()}
    fidelity = {row["leaf"]: row for row in diff["fidelity"]}
    assert fidelity["cell.W"]["before"]["cosine"] == 0.0
    assert fidelity["cell.W"]["after"]["relative_error"] < 1e-9  # exact, float64
    assert result.after.state_bytes > result.before.state_bytes  # W's trace


def test_the_model_passed_in_is_never_changed(xs):
    model = _net(Leaky(plain=False, state=brainstate.ShortTermState))
    before = {k: np.asarray(s.value) for k, s in brainstate.graph.states(model).items()}
    kinds = {k: type(s) for k, s in brainstate.graph.states(model).items()}
    etp_viz.what_if(model, xs[0], change={"hidden": "cell.h"}, xs=xs, measure=False)
    after = brainstate.graph.states(model)
    assert {k: type(s) for k, s in after.items()} == kinds
    for key, value in before.items():
        np.testing.assert_array_equal(np.asarray(after[key].value), value)


def test_making_a_state_hidden_turns_an_untraceable_model_into_a_learned_one(xs):
    model = _net(Leaky(plain=False, state=brainstate.ShortTermState))
    result = etp_viz.what_if(model, xs[0], change={"hidden": "cell.h"}, xs=xs)
    assert "no HiddenState" in result.before.error and not result.after.error
    diff = result.diff()
    assert diff["relations"]["added"] == [["cell.V", ["cell.h"]], ["cell.W", ["cell.h"]]]
    assert diff["groups"]["added"] == [["cell.h"]]
    assert {r["leaf"]: r["after"] for r in diff["claims"]}["cell.W"] == "exact"
    assert result.after.fidelity["cell.W"]["relative_error"] < 1e-9
    assert "not learned online" in result.table()


def test_another_learner_keeps_the_graph_and_changes_the_claims_to_its_own(xs):
    model = _net(etp_viz.nn.GRUCell(N_IN, N_HID))
    result = etp_viz.what_if(model, xs[0], change={"learner": "rtrl"}, xs=xs)
    diff = result.diff()
    assert diff["relations"] == {"added": [], "removed": []}
    changed = {r["leaf"]: (r["before"], r["after"]) for r in diff["claims"]}
    assert changed["cell.Wr.weight"] == ("none", "exact")  # weight -> weight under D-RTRL
    assert changed["cell.Wz.weight"] == ("approximate", "exact")
    assert result.after.learner == "rtrl" and result.before.learner == "d_rtrl"
    for leaf, measured in result.after.fidelity.items():
        assert measured["relative_error"] < 1e-9, leaf  # RTRL: every claim exact
    assert result.after.state_bytes > result.before.state_bytes


def test_a_learner_option_changes_no_claim_and_is_recorded(xs):
    model = _net(etp_viz.nn.GRUCell(N_IN, N_HID))
    result = etp_viz.what_if(
        model, xs[0], learner="es_d_rtrl", change={"decay": 0.5}, measure=False
    )
    assert result.after.options == {"decay": 0.5} and result.before.options == {}
    assert result.diff()["claims"] == []
    assert "no relation, group or claim changed" in repr(result)
    assert result.before.ms_per_step is None


def test_the_result_is_plain_json(xs):
    model = _net(Leaky(plain=True))
    result = etp_viz.what_if(model, xs[0], change={"lift": True}, measure=False)
    data = json.loads(json.dumps(result.to_json()))
    assert data["change"] == {"lift": True}
    assert data["diff"]["relations"]["added"] == [["cell.W", ["cell.h"]]]
    assert data["after"]["relations"] == [["cell.V", ["cell.h"]], ["cell.W", ["cell.h"]]]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"change": "faster"}, "is not one change"),
        ({"change": {"lift": True, "decay": 0.5}}, "is not one change"),
        ({"change": {"decay": 0.5}}, "takes no option(s) ['decay']"),
        ({"change": {"learner": "nope"}}, "is not a registered learner"),
        ({"change": "lift", "learner": "rtrl"}, "takes no option(s) ['lift']"),
        ({"change": {"hidden": "cell.nope"}}, "no state at 'cell.nope'"),
        ({"change": {"hidden": "cell.W"}}, "is a ParamState"),
    ],
)
def test_bad_changes_say_what_and_how(kwargs, message, xs):
    model = _net(Leaky(plain=True))
    with pytest.raises(ValueError, match=None) as err:
        etp_viz.what_if(model, xs[0], measure=False, **kwargs)
    assert message in str(err.value)


def test_exact_rtrl_on_a_lifted_view_keeps_the_view_and_learns_every_weight_exactly(xs):
    """Per-side options: the lifted D-RTRL before, exact RTRL after (which takes no ``lift``:
    it learns the plain ops as written), and the after side's fidelity exact against BPTT."""
    model = _net(Leaky(plain=True))
    result = etp_viz.what_if(
        model, xs[0], change={"learner": "rtrl"}, options={"lift": True}, xs=xs, measure=False
    )
    assert result.before.options == {"lift": True} and result.after.options == {"lift": True}
    assert result.after.learner == "rtrl"
    assert set(result.after.claims.values()) == {"exact"}
    assert result.after.graph.module_info.lifting is not None  # the view stays lifted
    worst = max(row["relative_error"] for row in result.after.fidelity.values())
    assert worst < 1e-9


def test_the_pictures_open_the_cell_that_changed_and_show_the_lifted_op():
    """The static pictures fold cells as the first view does, but a cell holding a changed
    weight is drawn open on both sides: after a lift, the new ETP op of ``cell.W`` is drawn
    (highlighted), so the two pictures differ where the change is."""
    import shutil

    if shutil.which("dot") is None:
        pytest.skip("Graphviz `dot` is not installed (the pictures need it)")
    import re

    result = etp_viz.what_if(_net(Leaky(plain=True)), jnp.zeros(N_IN), change="lift")
    before, after = result.graphs_html().split('data-side="after"')

    def texts(svg):
        return set(re.findall(r"<text[^>]*>([^<]*)</text>", svg))

    for side in (before, after):  # the cell is drawn open: its operations, not one record
        assert "<title>cluster_cell:cell</title>" in side
    assert "dot_general" in texts(before) and "dot_general" not in texts(after)
    assert "[cell.W] [lifted]" in texts(after) and "cell.W (online · exact)" in texts(after)
