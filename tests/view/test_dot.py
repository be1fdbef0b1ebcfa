"""DOT rendering: structure, collapse/expand, highlight, escaping of user strings, big graphs."""

from __future__ import annotations

import re
import warnings
import xml.etree.ElementTree as ElementTree

import brainstate
import jax
import jax.numpy as jnp
import pytest

import etp_viz.nn as enn
from etp_viz.view import dot as dot_module
from etp_viz.view.dot import (
    LARGE_GRAPH_NODES,
    drawn_legend_keys,
    render_svg,
    representatives,
    to_dot,
    visible_nodes,
)
from etp_viz.view.model import build_view_model
from etp_viz.view.palette import COLOURS
from etp_viz.view.types import Cluster, Edge, Node, ViewModel
from tests.view import models


def _vm(name):
    from etp_viz.compiler import compile_etrace_graph

    model, x = models.MODELS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_view_model(compile_etrace_graph(model, x))


def _quoted_strings_are_closed(text: str) -> bool:
    """Every line's double quotes pair up once escaped quotes are removed."""
    return all(
        line.replace("\\\\", "").replace('\\"', "").count('"') % 2 == 0
        for line in text.splitlines()
    )


def test_two_layer_rnn_dot_has_every_visible_node_and_cluster():
    vm = _vm("two_layer_rnn")
    text = to_dot(vm, expanded=["cell:rnn1", "cell:rnn2"])
    assert text.startswith("digraph")
    for node_id in visible_nodes(vm, ["cell:rnn1", "cell:rnn2"]):
        assert f'"{node_id}" [' in text
    assert '"cluster_g0"' in text and '"cluster_g1"' in text
    assert '"cluster_cell:rnn1"' in text and "Mrecord" not in text
    assert "p:rnn1.W.weight" not in text  # parameters are badges, not nodes
    assert "nslimit" not in text


def test_collapse_and_expand_sub_jaxpr():
    def f(x):
        return jax.nn.relu(jnp.sin(x))

    vm = build_view_model(jax.make_jaxpr(f)(jnp.ones(3)))
    owner = next(c for c in vm.clusters if c.kind == "subjaxpr")
    collapsed = to_dot(vm)
    assert f'"{owner.node}/0" [' not in collapsed and f'"{owner.node}" [' in collapsed
    assert f'"{owner.node}" -> "out:0"' in collapsed  # inner edge re-routed to the owner
    expanded = to_dot(vm, expanded=[owner.id])
    assert f'"cluster_{owner.id}"' in expanded and f'"{owner.node}/0" [' in expanded


def test_highlight_weight_path_and_boundary():
    vm = _vm("gru")
    wr = next(w for w in vm.weights if w.path == "Wr.weight")
    text = to_dot(vm, highlight="Wr.weight")
    boundary = wr.boundary_nodes[0]
    line = next(line for line in text.splitlines() if line.strip().startswith(f'"{boundary}" ['))
    # the blocking op: double border always, the selection's boundary colours when highlighted
    assert "peripheries=2" in line
    assert COLOURS["hl_boundary"] in line and COLOURS["hl_boundary_fill"] in line


def test_user_strings_are_escaped():
    vm = _vm("hostile")
    assert any(models.HOSTILE in n.label for n in vm.nodes)  # plain text in the view model
    assert any(models.HOSTILE in v for n in vm.nodes for _, v in n.params)
    text = to_dot(vm, expanded=[c.id for c in vm.clusters])
    assert "<script>" not in text and "</script>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#x27;&amp;" in text
    assert _quoted_strings_are_closed(text)
    labels = re.findall(r"label=<(.*?)> shape=", text)
    assert labels and all("<script" not in label for label in labels)


def test_large_graph_gets_bounded_layout():
    def chain(x):
        for _ in range(LARGE_GRAPH_NODES + 10):
            x = jnp.sin(x)
        return x

    text = to_dot(build_view_model(jax.make_jaxpr(chain)(1.0)))
    assert "nslimit=1" in text and "mclimit=0.1" in text and "splines=line" in text


def test_render_svg_without_dot_returns_none(monkeypatch):
    monkeypatch.setattr(dot_module.shutil, "which", lambda name: None)
    assert render_svg("digraph { a -> b }") is None


@pytest.mark.skipif(dot_module.shutil.which("dot") is None, reason="no dot executable")
def test_render_svg_with_dot():  # pragma: no cover - depends on the machine
    svg = render_svg(to_dot(_vm("hostile")))
    assert svg is not None and "<script>" not in svg


# --- cells: the static picture draws what the live first view draws (issue 41) ----------

HAS_DOT = dot_module.shutil.which("dot") is not None


class GRUNet(brainstate.nn.Module):
    """A GRU cell and a linear readout: one cell, one weight op outside it."""

    def __init__(self):
        super().__init__()
        self.cell = enn.GRUCell(3, 8)
        self.out = enn.Linear(8, 2)

    def update(self, x):
        return self.out(self.cell(x))


@pytest.fixture(scope="module")
def gru_net():
    from etp_viz.compiler import compile_etrace_graph

    model = GRUNet()
    brainstate.nn.init_all_states(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_view_model(compile_etrace_graph(model, jnp.zeros(3)))


NODE_STMT = re.compile(r'^\t"((?:[^"\\]|\\.)*)" \[', re.M)
EDGE_STMT = re.compile(r'^\t"((?:[^"\\]|\\.)*)" -> "((?:[^"\\]|\\.)*)" \[', re.M)


def _drawn(text: str) -> tuple[list[str], list[tuple[str, str]]]:
    """(node ids, edges) of DOT text from :func:`to_dot`."""
    return NODE_STMT.findall(text), EDGE_STMT.findall(text)


def _inside(vm, cluster_id: str) -> set[str]:
    """Ids of the nodes anywhere inside a cluster."""
    parents = {c.id: c.parent for c in vm.clusters}

    def chain(cluster):
        while cluster is not None:
            yield cluster
            cluster = parents[cluster]

    return {n.id for n in vm.nodes if cluster_id in chain(n.cluster)}


def _assert_consistent(vm, expanded=()):
    """Every drawn node once, every edge between drawn nodes, every view-model edge between two
    drawn things drawn (once per pair), nothing drawn that the view model hides."""
    text = to_dot(vm, expanded=expanded)
    nodes, edges = _drawn(text)
    assert len(nodes) == len(set(nodes)) and set(nodes) == set(visible_nodes(vm, expanded))
    assert all(s in nodes and t in nodes and s != t for s, t in edges), edges
    rep = representatives(vm, expanded)
    wanted = {
        (rep[e.source], rep[e.target])
        for e in vm.edges
        if e.source in rep and e.target in rep and rep[e.source] != rep[e.target]
    }
    assert len(edges) == len(set(edges)) and set(edges) == wanted
    return text, nodes, edges


def test_each_cell_is_one_node_in_the_folded_view(gru_net):
    vm = gru_net
    (cell,) = [c for c in vm.clusters if c.kind == "cell"]
    text, nodes, edges = _assert_consistent(vm)
    assert cell.id == "cell:cell" and nodes.count("cell:cell") == 1
    inside = _inside(vm, "cell:cell")
    assert inside and not inside & set(nodes)  # none of its operations or states is drawn
    readout = next(n for n in vm.nodes if n.etp and n.weight_path == "out.weight")
    assert readout.id in nodes and ("cell:cell", readout.id) in edges
    assert any(s == "cell:cell" for s, _ in edges) and any(t == "cell:cell" for _, t in edges)
    line = next(x for x in text.splitlines() if x.startswith('\t"cell:cell" ['))
    # as js/src/dot-style.js cellAttrs: path and class, a port per weight, the hidden state
    assert 'label="{cell (GRUCell) ▸|{<w0> Wz|<w1> Wr|<w2> Wh}|h}"' in line
    assert "shape=Mrecord" in line and "16 operations" in line
    assert f'fillcolor="{COLOURS["group_fill"]}"' in line
    assert f'color="{COLOURS["group_border"]}"' in line
    assert "cluster_" not in text  # its group box is folded with it
    assert len(nodes) < len(visible_nodes(vm, [cell.id])) / 2


def test_an_expanded_cell_draws_its_operations(gru_net):
    vm = gru_net
    text, nodes, _ = _assert_consistent(vm, ["cell:cell"])
    assert "cell:cell" not in nodes and '"cluster_cell:cell"' in text
    drawn = set(nodes)
    inside = _inside(vm, "cell:cell")
    ops = {n.id for n in vm.nodes if n.id in inside and n.kind == "eqn" and n.etp}
    assert {vm.node(i).weight_path for i in ops} == {f"cell.W{g}.weight" for g in "zrh"}
    assert inside <= drawn  # every operation and state of the cell
    assert {"logistic", "tanh"} <= {vm.node(i).primitive for i in inside}
    assert {"h:cell.h:in", "h:cell.h:out"} <= drawn and '"cluster_g0"' in text


def test_every_expansion_state_is_consistent():
    vm = _vm("two_layer_rnn")
    cells = [c.id for c in vm.clusters if c.kind == "cell"]
    assert cells == ["cell:rnn1", "cell:rnn2"]
    _, folded, _ = _assert_consistent(vm)
    assert set(cells) <= set(folded) and len(folded) == 5  # input, 2 cells, readout op, output
    _, one, _ = _assert_consistent(vm, ["cell:rnn1"])
    assert "cell:rnn1" not in one and "cell:rnn2" in one
    everything = [c.id for c in vm.clusters]
    _, opened, _ = _assert_consistent(vm, everything)
    assert not set(cells) & set(opened) and len(opened) >= 3 * len(folded)


def test_legend_of_the_folded_and_the_opened_view():
    vm = _vm("two_layer_rnn")
    folded = drawn_legend_keys(vm)
    assert "cell" in folded and "group" not in folded and "hidden" not in folded
    opened = drawn_legend_keys(vm, ["cell:rnn1", "cell:rnn2"])
    assert {"cell", "group", "hidden"} <= set(opened)


def test_a_folded_cell_stands_in_for_what_it_holds_in_a_highlight(gru_net):
    vm = gru_net
    """As on the live page (js/src/highlight.js): the blocking op's colours first."""

    def line_of(text, node_id):
        return next(x for x in text.splitlines() if x.startswith(f'\t"{node_id}" ['))

    vm = gru_net
    weight = next(w for w in vm.weights if w.path == "cell.Wr.weight")
    assert weight.boundary_nodes == ("e7",) and "e3" in weight.node_ids  # Wh's op blocks Wr
    boundary = f'color="{COLOURS["hl_boundary"]}" fillcolor="{COLOURS["hl_boundary_fill"]}"'
    path = f'color="{COLOURS["hl_path"]}" penwidth=3'
    assert boundary in line_of(to_dot(vm, highlight=weight.path), "cell:cell")
    assert boundary not in line_of(to_dot(vm), "cell:cell")
    opened = to_dot(vm, expanded=["cell:cell"], highlight=weight.path)
    assert boundary in line_of(opened, "e7") and path in line_of(opened, "e3")
    readout = to_dot(vm, highlight="out.weight")
    assert path in line_of(readout, "e13") and path not in line_of(readout, "cell:cell")


def test_explorer_static_fallback_folds_cells_from_json(gru_net):
    from etp_viz.explorer.widget import Explorer

    explorer = Explorer(view_model=gru_net.to_json())  # JSON: the widget reads it as records
    assert '"cell:cell" [' in explorer.to_dot()
    opened = Explorer(view_model=gru_net.to_json(), expanded=["cell:cell"]).to_dot()
    assert '"cell:cell" [' not in opened and '"cluster_cell:cell"' in opened


@pytest.mark.skipif(not HAS_DOT, reason="no dot executable")
def test_static_svg_has_one_node_per_cell_and_no_edge_to_a_hidden_node(gru_net):
    vm = gru_net
    for expanded in ((), ("cell:cell",)):
        svg = render_svg(to_dot(vm, expanded=expanded))
        root = ElementTree.fromstring(svg)
        ns = {"svg": "http://www.w3.org/2000/svg"}
        groups = root.iterfind(".//svg:g", ns)
        nodes, edges = [], []
        for g in groups:
            title = g.findtext("svg:title", "", ns)
            if g.get("class") == "node":
                nodes.append(title)
                assert g.get("id") == f"node-{title}"
            elif g.get("class") == "edge":
                edges.append(tuple(title.split("->")))
        assert sorted(nodes) == sorted(visible_nodes(vm, expanded)), expanded
        assert all(s in nodes and t in nodes for s, t in edges), edges
        assert ("cell:cell" in nodes) == (not expanded)


class _Counted(tuple):
    """A tuple that counts the passes over it."""

    passes = 0

    def __iter__(self):
        type(self).passes += 1
        return super().__iter__()


def _chain_of_cells(count: int) -> ViewModel:
    """``count`` cells in series, each 3 equations and a hidden state, in a view model made
    directly (the layout of etp_viz/view/cells.py; no compiling)."""
    nodes, edges, clusters = [Node("in:0", "input", "x")], [], []
    previous = "in:0"
    for i in range(count):
        cell = f"cell:layers.{i}"
        path = f"layers.{i}"
        clusters.append(
            Cluster(cell, "cell", f"{path} (GRUCell)", None, True, module_path=path,
                    class_name="GRUCell", ports=(f"{path}.W.weight",), hidden_paths=(f"{path}.h",))
        )  # fmt: skip
        ids = [f"h:layers.{i}.h:in", f"e{3 * i}", f"e{3 * i + 1}", f"e{3 * i + 2}"]
        nodes.append(Node(ids[0], "hidden_in", "h", cluster=cell))
        nodes += [Node(e, "eqn", "add", primitive="add", cluster=cell) for e in ids[1:]]
        for source, target in [(previous, ids[1]), (ids[0], ids[1]), *zip(ids[1:], ids[2:])]:
            edges.append(Edge(f"x{len(edges)}", source, target, "a", "f32[8]"))
        previous = ids[-1]
    nodes.append(Node("out:0", "output", "y"))
    edges.append(Edge(f"x{len(edges)}", previous, "out:0", "a", "f32[8]"))
    return ViewModel("stack", _Counted(nodes), _Counted(edges), _Counted(clusters))


@pytest.mark.parametrize("opened", [0, 1], ids=["folded", "every-cell-open"])
def test_dot_text_takes_a_fixed_number_of_passes_over_a_deep_stack(opened):
    """The static picture of a deep stack (bench/deep_stack.py: 512 GRU layers) is linear:
    as many passes over the nodes, edges and cells at 512 cells as at 8 (count, not time)."""
    passes = []
    for count in (8, 512):
        vm = _chain_of_cells(count)
        expanded = [c.id for c in vm.clusters] if opened else []
        _Counted.passes = 0
        text = to_dot(vm, expanded=expanded)
        drawn_legend_keys(vm, expanded)
        passes.append(_Counted.passes)
        nodes, edges = _drawn(text)
        assert len(nodes) == (count * 4 + 2 if opened else count + 2)
        assert len(edges) == (len(vm.edges) if opened else count + 1)
    assert passes[0] == passes[1] and passes[0] < 40, passes
