"""View model: ids, clusters, badges, options, the reference invariant and the weights list."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import pytest

import etp_viz
from etp_viz.view.model import VIEW_MODEL_OPTIONS, build_view_model
from tests.view import models


def _control_flow(x, w):
    y = jax.nn.relu(x @ w)
    c, ys = jax.lax.scan(lambda c, a: (c + a, c * a), 0.0, y)
    z = jax.lax.cond(c > 0, lambda v: v + 1, lambda v: v - 1, y)
    return jax.lax.while_loop(lambda v: v[0] < 3, lambda v: v + 1, z), ys


@pytest.fixture(scope="module")
def control_flow_vm():
    closed = jax.make_jaxpr(_control_flow)(jnp.ones(3), jnp.ones((3, 3)))
    return build_view_model(closed, title="control flow")


def _compile(name):
    from etp_viz.compiler import compile_etrace_graph

    model, x = models.MODELS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model, compile_etrace_graph(model, x)


@pytest.fixture(scope="module", params=sorted(models.MODELS))
def compiled(request):
    model, graph = _compile(request.param)
    return request.param, model, graph, build_view_model(graph)


def test_generic_jaxpr_nodes_edges_and_clusters(control_flow_vm):
    vm = control_flow_vm
    ids = [n.id for n in vm.nodes]
    assert ids[:3] == ["in:0", "in:1", "e0"] and "out:0" in ids and "out:1" in ids
    by_id = {n.id: n for n in vm.nodes}
    assert by_id["e0"].primitive == "dot_general" and by_id["e0"].source.endswith("(_control_flow)")
    clusters = {c.id: c for c in vm.clusters}
    scan = next(n for n in vm.nodes if n.primitive == "scan")
    assert scan.subcluster == scan.cluster == f"c:{scan.id}" and clusters[scan.cluster].collapsed
    assert by_id[f"{scan.id}/1"].cluster == f"c:{scan.id}"
    cond = next(n for n in vm.nodes if n.primitive == "cond")
    assert clusters[f"c:{cond.id}.1"].parent == f"c:{cond.id}"  # one branch cluster each
    assert any(b.kind == "literal" for b in by_id[f"{cond.id}.0/0"].badges)
    assert vm.check_references() == []


def test_json_is_plain_and_round_trips(control_flow_vm):
    data = control_flow_vm.to_json()
    assert json.loads(json.dumps(data)) == data
    assert set(data) >= {"schema", "title", "nodes", "edges", "clusters", "weights", "legend"}
    assert isinstance(data["nodes"][2]["params"], dict)


def test_text_is_deterministic(control_flow_vm):
    closed = jax.make_jaxpr(_control_flow)(jnp.ones(3), jnp.ones((3, 3)))
    again = build_view_model(closed, title="control flow")
    assert again.to_text() == control_flow_vm.to_text()
    with pytest.raises(ValueError, match="valid: nodes"):
        again.to_text(sections=("nope",))


def test_high_fanout_var_becomes_badges():
    def fan(x):
        y = jnp.sin(x)
        return [y * i for i in range(1, 6)]

    vm = build_view_model(jax.make_jaxpr(fan)(1.0), max_fanout=3)
    sin = next(n for n in vm.nodes if n.primitive == "sin")
    assert not [e for e in vm.edges if e.source == sin.id]
    assert any(b.kind == "fanout" for b in sin.badges)
    muls = [n for n in vm.nodes if n.primitive == "mul"]
    assert all(any(b.kind == "fanout" for b in n.badges) for n in muls)
    wide = build_view_model(jax.make_jaxpr(fan)(1.0))
    assert len([e for e in wide.edges if e.source.startswith("e0")]) == 5


def test_literal_badges_show_four_significant_digits_and_keep_full_precision_in_the_title():
    value = 20.504165649414062

    def scaled(x):
        return x * value, x - 1.0

    vm = build_view_model(jax.make_jaxpr(scaled)(jnp.ones(3)))
    badges = {b.text: b.title for n in vm.nodes for b in n.badges if b.kind == "literal"}
    assert set(badges) == {"20.5", "1.0"}, badges
    assert badges["20.5"].endswith(repr(float(jnp.float32(value)))), badges


def test_unknown_option_lists_valid_ones():
    closed = jax.make_jaxpr(jnp.sin)(1.0)
    with pytest.raises(TypeError, match="max_fanout") as info:
        build_view_model(closed, max_fanot=3)
    assert "max_fanot" in str(info.value)
    for name in VIEW_MODEL_OPTIONS:
        assert name in str(info.value)
    with pytest.raises(ValueError, match="max_fanout"):
        build_view_model(closed, max_fanout=0)


def test_every_reference_exists(compiled):
    _, _, _, vm = compiled
    assert vm.check_references() == []
    json.dumps(vm.to_json())


def test_every_param_state_is_listed(compiled):
    import brainstate

    from etp_viz.view.nodes import path_text

    _, model, _, vm = compiled
    params = [
        path_text(p) for p, _ in brainstate.graph.states(model, brainstate.ParamState).items()
    ]
    assert sorted(w.path for w in vm.weights) == sorted(params)
    for w in vm.weights:
        assert w.status in ("online", "exact", "not_learned") and w.reason
        assert (w.status == "online") == bool(w.groups)


def test_each_weight_carries_its_status_text_computed_once_in_python():
    """The badge's words come from ``verdict.status_text`` (the front end shows them as is),
    with the view's algorithm's claim, and without a claim for ``algorithm=None``."""
    from etp_viz.compiler.claims.verdict import status_text

    _, graph = _compile("two_layer_rnn")
    texts = {w.path: w.status_text for w in build_view_model(graph).weights}
    assert texts == {
        "rnn1.W.weight": "online · approximate",
        "rnn2.W.weight": "online · approximate",
        "out.weight": "readout · exact",
    }
    bare = {w.path: w.status_text for w in build_view_model(graph, algorithm=None).weights}
    assert bare == {"rnn1.W.weight": "online", "rnn2.W.weight": "online", "out.weight": "readout"}
    for w in build_view_model(graph).weights:
        assert w.status_text == status_text(w.status, w.claim)


def test_the_front_end_reads_the_view_model_version_python_writes():
    """``SCHEMA_VERSION`` (the JSON's ``schema``) and the page's ``VIEW_MODEL_SCHEMA`` are one
    number: a view model of another version is refused in the widget, not drawn."""
    import re
    from pathlib import Path

    from etp_viz.view.types import SCHEMA_VERSION

    js = (Path(__file__).resolve().parents[2] / "js" / "src" / "types.js").read_text()
    found = re.search(r"export const VIEW_MODEL_SCHEMA = (\d+);", js)
    assert found and int(found.group(1)) == SCHEMA_VERSION
    assert build_view_model(jax.make_jaxpr(jnp.sin)(1.0)).to_json()["schema"] == SCHEMA_VERSION


def test_two_layer_rnn_profile():
    _, graph = _compile("two_layer_rnn")
    vm = build_view_model(graph)
    status = {w.path: w.status for w in vm.weights}
    assert status == {"rnn1.W.weight": "online", "rnn2.W.weight": "online", "out.weight": "exact"}
    assert [g.hidden_paths for g in vm.groups] == [("rnn1.h",), ("rnn2.h",)]
    assert [r.weight_paths for r in vm.relations] == [("rnn1.W.weight",), ("rnn2.W.weight",)]
    assert len(vm.perturbations) == 2 and vm.readouts[0].path == "out.weight"
    etp = [n for n in vm.nodes if n.etp]
    assert [(n.weight_path, n.status) for n in etp][-1] == ("out.weight", "exact")
    hidden_out = vm.node("h:rnn1.h:out")
    assert hidden_out.cluster == "g0" and hidden_out.kind == "hidden_out"


def test_gru_wr_is_blocked_with_a_path_and_a_fix():
    _, graph = _compile("gru")
    vm = build_view_model(graph)
    wr = next(w for w in vm.weights if w.path == "Wr.weight")
    assert wr.status == "not_learned" and "BPTT" in wr.fix
    wh = next(w for w in vm.weights if w.path == "Wh.weight")
    wh_node = next(n for n in wh.node_ids if n.startswith("e"))
    assert wr.boundary_nodes == (wh_node,) and wr.path_nodes[-1] == wh_node
    assert wr.path_edges and all(e in {x.id for x in vm.edges} for e in wr.path_edges)


def test_lstm_one_merged_group():
    _, graph = _compile("lstm")
    vm = build_view_model(graph)
    assert len(vm.groups) == 1 and vm.groups[0].num_state == 2
    assert {n.id for n in vm.nodes if n.cluster == "g0"} >= {
        "h:h:in",
        "h:c:in",
        "h:h:out",
        "h:c:out",
    }
    assert len(vm.relations) == 4 and all(w.status == "online" for w in vm.weights)


def test_plain_matmul_weight_gets_the_etp_fix():
    import brainstate

    from etp_viz.compiler import compile_etrace_graph

    class PlainReadout(brainstate.nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = models.enn.ValinaRNNCell(3, 4)
            self.w = brainstate.ParamState(jnp.ones((4, 2)))
            self.unused = brainstate.ParamState(jnp.ones(2))

        def update(self, x):
            return self.cell(x) @ self.w.value

    model = PlainReadout()
    brainstate.nn.init_all_states(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vm = build_view_model(compile_etrace_graph(model, jnp.zeros(3)))
    by_path = {w.path: w for w in vm.weights}
    # a plain-`@` readout reaches the output in the step, crossing no hidden state: learned
    # exactly by backprop within the step (the claims agree; verify measures it)
    assert by_path["w"].status == "exact"
    claims = compile_etrace_graph(model, jnp.zeros(3)).gradient_claims("d_rtrl")
    assert claims["w"].kind == "exact"
    report = etp_viz.verify(model, jnp.ones((4, 3)))
    row = next(r for r in report.rows if r.path == "w")
    assert row.claim == "exact" and row.relative_error < 1e-5, row
    assert by_path["unused"].status == "not_learned" and by_path["unused"].reason
    assert vm.check_references() == []


def test_view_model_and_dot_import_without_widget_stack():
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('anywidget', 'ipywidgets'):\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import etp_viz.view.model, etp_viz.view.dot\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_large_stack_builds_and_is_consistent():
    from etp_viz.compiler import compile_etrace_graph

    model, x = models.make_deep_stack(target_eqns=2000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = compile_etrace_graph(model, x)
    vm = build_view_model(graph)
    assert len([n for n in vm.nodes if n.kind == "eqn" and "/" not in n.id]) >= 1500
    assert vm.check_references() == []


def _annotation_visits(target_eqns, monkeypatch):
    """(visits, nodes + edges) of one view-model build, counted by the Annotator's indexes."""
    from etp_viz.compiler import compile_etrace_graph
    from etp_viz.view import annotate

    made = []

    class Recording(annotate.Annotator):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(annotate, "Annotator", Recording)
    model, x = models.make_deep_stack(target_eqns=target_eqns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = compile_etrace_graph(model, x)
    vm = build_view_model(graph)
    assert len(made) == 1
    return made[0].visits, len(vm.nodes) + len(vm.edges), len(vm.relations)


def test_annotation_pass_is_linear_in_the_graph(monkeypatch):
    """Relations/groups/readouts/weights query prebuilt indexes: visits grow with the graph.

    The old helpers scanned every node (``with_nested``) and edge (``edges_among``) per
    relation, i.e. O(relations x graph): doubling the model quadrupled the work.
    """
    small, small_size, small_relations = _annotation_visits(1000, monkeypatch)
    large, large_size, large_relations = _annotation_visits(2000, monkeypatch)
    assert large_relations >= 1.7 * small_relations  # the model really doubled
    assert large <= 6 * large_size, (large, large_size)  # a few visits per node/edge
    assert large / small <= 1.25 * large_size / small_size, (small, large)


def test_a_readout_path_reaches_only_its_own_outputs():
    """A two-equation readout (etp_mv, tanh) and a second model output that is the hidden
    state itself: the readout's highlight ends at its own output, not at every output."""
    import brainstate

    from etp_viz import nn
    from etp_viz.compiler import compile_etrace_graph

    class TwoOutputs(brainstate.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.ValinaRNNCell(3, 4)
            self.out = nn.Linear(4, 2)

        def update(self, x):
            h = self.rnn(x)
            return jnp.tanh(self.out(h)), h

    model = TwoOutputs()
    brainstate.nn.init_all_states(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vm = build_view_model(compile_etrace_graph(model, jnp.ones(3)))
    (readout,) = vm.readouts
    outputs = [n for n in readout.path_nodes if n.startswith("out:")]
    assert outputs == ["out:0"]
    assert any(not n.startswith("out:") for n in readout.path_nodes)
    edges = {(e.source, e.target) for e in vm.edges if e.id in set(readout.path_edges)}
    assert any(target == "out:0" for _, target in edges)


@pytest.mark.parametrize("reads", ["old", "new"])
def test_the_hidden_output_bypass_is_drawn(reads):
    """An output reading h^(t-1) gets a bypass path from h:<path>:in to the output, drawn
    dotted in the SVG; reading h^t gets none."""
    from etp_viz.compiler import compile_etrace_graph
    from etp_viz.view.dot import to_dot
    from tests.learn import archs

    arch = archs.Arch(layers=(archs.Layer(states=2, act="spike", reads=reads),), batch=2)
    model = archs.build(arch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vm = build_view_model(compile_etrace_graph(model, archs.inputs(arch, 1)[0]))
    assert not vm.check_references()
    if reads == "new":
        assert vm.bypasses == ()
        return
    (bypass,) = vm.bypasses
    assert bypass.hidden_path == "layers.0.h"
    assert bypass.path_nodes[0] == "h:layers.0.h:in" and bypass.path_nodes[-1].startswith("out:")
    assert bypass.path_edges
    assert "bypass" in {e.key for e in vm.legend}
    assert 'style="dotted"' in to_dot(vm)
    assert "bypasses (1)" in vm.to_text(sections=("bypasses",))
