"""DOT rendering: structure, collapse/expand, highlight, escaping of user strings, big graphs."""

from __future__ import annotations

import re
import warnings

import jax
import jax.numpy as jnp
import pytest

from etp_viz.view import dot as dot_module
from etp_viz.view.dot import LARGE_GRAPH_NODES, render_svg, to_dot, visible_nodes
from etp_viz.view.model import build_view_model
from etp_viz.view.palette import COLOURS
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
    text = to_dot(vm)
    assert text.startswith("digraph")
    for node_id in visible_nodes(vm):
        assert f'"{node_id}" [' in text
    assert '"cluster_g0"' in text and '"cluster_g1"' in text
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
