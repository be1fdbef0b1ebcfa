"""DOT text from a view model (the ``graphviz`` package), and a static SVG when ``dot`` exists.

The browser lays the DOT out with Graphviz compiled to wasm; this module is also the fallback
for static output (``_repr_mimebundle_``, nbviewer). One level at a time: a collapsed sub-jaxpr
is drawn as its owning equation; an expanded one as a cluster of its equations, with the
owner's own edges replaced by the inner ones.

Every string that came from user code (paths, names, params, labels) is escaped: node labels
are HTML-like labels built with :func:`html.escape`, everything else goes through graphviz's
quoting.

Example
-------
>>> import jax, jax.numpy as jnp
>>> from etp_viz.view.model import build_view_model
>>> text = to_dot(build_view_model(jax.make_jaxpr(jnp.sin)(1.0)))
>>> text.startswith("digraph")
True
"""

from __future__ import annotations

import html
import shutil
import subprocess
from collections.abc import Iterable
from typing import Any

from .weights import status_text

__all__ = ["LARGE_GRAPH_NODES", "STYLE", "render_svg", "to_dot", "visible_nodes"]

#: Above this many visible nodes the layout is bounded (``nslimit``, ``mclimit``, straight edges).
LARGE_GRAPH_NODES = 300

#: node kind -> (shape, fill colour); ETP equations and highlights override the fill.
STYLE: dict[str, tuple[str, str]] = {
    "eqn": ("box", "#f5f5f5"),
    "input": ("invhouse", "#e3f2fd"),
    "output": ("house", "#e3f2fd"),
    "hidden_in": ("ellipse", "#fff3e0"),
    "hidden_out": ("ellipse", "#ffe0b2"),
    "state_in": ("ellipse", "#eceff1"),
    "state_out": ("ellipse", "#cfd8dc"),
    "param": ("note", "#f3e5f5"),
    "perturb": ("diamond", "#fce4ec"),
}
_STATUS_FILL = {"online": "#c8e6c9", "exact": "#bbdefb", "not_learned": "#ffcdd2"}
_HIGHLIGHT = "#d32f2f"
_DROPPED = "#c2185b"
_BYPASS = "#8e24aa"


def representatives(vm: Any, expanded: Iterable[str] = ()) -> dict[str, str]:
    """Node id -> the id drawn for it in this expansion state.

    An equation that owns a sub-jaxpr sits inside its own cluster as the entry node. A node
    inside a collapsed ``subjaxpr`` cluster is drawn as the owner of the outermost collapsed
    cluster around it; every other node is drawn as itself. Parameter nodes without edges
    (their consumers carry badges) are not drawn.
    """
    expanded = set(expanded)
    clusters = {c.id: c for c in vm.clusters}
    with_edges = {e.source for e in vm.edges} | {e.target for e in vm.edges}
    out: dict[str, str] = {}
    for node in vm.nodes:
        if node.kind == "param" and node.id not in with_edges:
            continue
        drawn, cluster_id = node.id, node.cluster
        while cluster_id is not None:
            cluster = clusters[cluster_id]
            if cluster.kind == "subjaxpr" and cluster.id not in expanded:
                drawn = cluster.node or drawn
            cluster_id = cluster.parent
        out[node.id] = drawn
    return out


def visible_nodes(vm: Any, expanded: Iterable[str] = ()) -> dict[str, Any]:
    """Nodes drawn for this expansion state, by id (in the view model's order)."""
    drawn = set(representatives(vm, expanded).values())
    return {n.id: n for n in vm.nodes if n.id in drawn}


def _label(node: Any, weight_label: dict[str, str]) -> str:
    """HTML-like label: every piece of text escaped."""
    esc = html.escape
    rows = [f"<B>{esc(node.label)}</B>"]
    if node.etp and node.weight_path:
        status = weight_label.get(node.weight_path, node.status or "")
        rows.append(f"{esc(node.weight_path)} ({esc(status)})" if status else esc(node.weight_path))
    avals = ", ".join(node.out_avals or node.in_avals)
    if avals:
        rows.append(f'<FONT POINT-SIZE="9">{esc(avals)}</FONT>')
    if node.badges:
        texts = " ".join(f"[{b.text}]" for b in node.badges[:6])
        more = f" +{len(node.badges) - 6}" if len(node.badges) > 6 else ""
        rows.append(f'<FONT POINT-SIZE="9" COLOR="#6a1b9a">{esc(texts + more)}</FONT>')
    return "<" + "<BR/>".join(rows) + ">"


def _tooltip(node: Any) -> str:
    parts = [node.id, node.primitive or node.kind]
    parts += [f"{k}={v}" for k, v in node.params[:8]]
    if node.source:
        parts.append(node.source)
    return _quote(" | ".join(parts))


def _quote(text: str) -> str:
    """A DOT double-quoted string with markup, quotes, backslashes and newlines made inert.

    Markup is written as entities: Graphviz decodes them in labels and tooltips, so the SVG
    shows the text while no raw ``<``/``>`` ever reaches DOT or SVG.
    """
    text = html.escape(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def _highlight_ids(vm: Any, highlight: Any) -> tuple[set[str], set[str], set[str]]:
    """(nodes, edges, boundary nodes) to emphasise for a weight path, group, relation or ids."""
    if highlight is None:
        return set(), set(), set()
    for w in vm.weights:
        if w.path == highlight:
            return set(w.path_nodes) | set(w.node_ids), set(w.path_edges), set(w.boundary_nodes)
    for g in vm.groups:
        if highlight in (g.cluster, f"group:{g.index}"):
            return set(g.transition_nodes), set(g.transition_edges), set()
    for r in vm.relations:
        if highlight == r.id:
            return {r.node, *r.slice_nodes} - {None}, set(r.slice_edges), set()
    ids = {highlight} if isinstance(highlight, str) else set(highlight)
    return ids, ids, set()


def to_dot(vm: Any, *, expanded: Iterable[str] = (), highlight: Any = None) -> str:
    """DOT text of the view model for one expansion state.

    Parameters
    ----------
    vm : ViewModel
    expanded : iterable of cluster ids
        ``subjaxpr`` clusters to draw open (all are collapsed otherwise).
    highlight : str or iterable of str, optional
        A weight path, a group cluster id (``"g0"``), a relation id (``"r0"``) or node/edge ids.
    """
    import graphviz

    expanded = set(expanded)
    parents = {c.id: c.parent for c in vm.clusters}
    rep = representatives(vm, expanded)
    nodes = {n.id: n for n in vm.nodes if n.id in set(rep.values())}
    hi_nodes, hi_edges, boundary = _highlight_ids(vm, highlight)
    weight_status = {w.path: w.status for w in vm.weights}
    weight_label = {w.path: status_text(w.status, getattr(w, "claim", "")) for w in vm.weights}
    dropped = {e for w in vm.weights for e in getattr(w, "dropped_edges", ())}
    bypass = {e for b in getattr(vm, "bypasses", ()) for e in b.path_edges}
    graph_attr = {"rankdir": "TB", "fontname": "Helvetica", "fontsize": "10", "compound": "true"}
    if len(nodes) > LARGE_GRAPH_NODES:
        graph_attr.update(nslimit="1", nslimit1="1", mclimit="0.1", splines="line")
    dot = graphviz.Digraph(
        name="etp_viz",
        graph_attr=graph_attr,
        node_attr={"fontname": "Helvetica", "fontsize": "10", "style": "filled"},
        edge_attr={"fontname": "Helvetica", "fontsize": "8", "color": "#757575"},
    )
    dot.body.append(f"\tlabel={_quote(vm.title)} labelloc=t\n")
    bodies = _cluster_bodies(vm)
    for node_id, node in nodes.items():
        hi, blocked = node_id in hi_nodes, node_id in boundary
        line = _node_stmt(node, weight_status, weight_label, hi, blocked)
        bodies.get(_drawn_cluster(parents, node, expanded), bodies[None]).append(line)
    dot.body.extend(_assemble_clusters(vm, bodies))
    drawn_pairs: set[tuple[str, str]] = set()
    for edge in vm.edges:
        source, target = rep.get(edge.source), rep.get(edge.target)
        if source is None or target is None or source == target:
            continue
        if (source, target) in drawn_pairs:
            continue
        drawn_pairs.add((source, target))
        attrs = [f"tooltip={_quote(f'{edge.var}: {edge.aval}')}"]
        if edge.id in hi_edges:
            attrs.append(f'color="{_HIGHLIGHT}" penwidth=2')
        if edge.kind == "perturb":
            attrs.append("style=dashed")
        elif edge.id in dropped:  # a Jacobian term the algorithm's gradient ignores
            attrs.append(f'style=dashed color="{_DROPPED}" penwidth=2')
        elif edge.id in bypass:  # an output reading h^(t-1): the hidden output bypass
            attrs.append(f'style=dotted color="{_BYPASS}" penwidth=2')
        dot.body.append(f"\t{_quote(source)} -> {_quote(target)} [{' '.join(attrs)}]\n")
    return dot.source


def _node_stmt(
    node: Any, weight_status: dict[str, str], weight_label: dict[str, str], hi: bool, boundary: bool
) -> str:
    shape, fill = STYLE.get(node.kind, ("box", "#ffffff"))
    if node.etp:
        fill = _STATUS_FILL.get(weight_status.get(node.weight_path or "", ""), "#fff59d")
    attrs = [f"label={_label(node, weight_label)}", f"shape={shape}", f'fillcolor="{fill}"']
    attrs.append(f"tooltip={_tooltip(node)}")
    attrs.append(f"id={_quote('node-' + node.id)}")
    if node.etp:
        attrs.append("penwidth=2")
    if hi or boundary:
        attrs.append(f'color="{_HIGHLIGHT}" penwidth=3')
    if boundary:
        attrs.append('style="filled,dashed"')
    return f"\t{_quote(node.id)} [{' '.join(attrs)}]\n"


def _drawn_cluster(parents: dict, node: Any, expanded: set[str]) -> str | None:
    """The cluster a drawn node goes in: a collapsed owner goes in its cluster's parent."""
    if node.subcluster is not None and node.subcluster not in expanded:
        return parents.get(node.subcluster)
    return node.cluster


def _cluster_bodies(vm: Any) -> dict[str | None, list[str]]:
    return {None: [], **{cluster.id: [] for cluster in vm.clusters}}


def _assemble_clusters(vm: Any, bodies: dict) -> list[str]:
    """Nest cluster bodies (``subgraph cluster_…``); empty clusters are dropped."""
    children: dict[str | None, list[Any]] = {}
    for cluster in vm.clusters:
        children.setdefault(cluster.parent, []).append(cluster)

    def emit(cluster_id: str | None) -> list[str]:
        lines = list(bodies.get(cluster_id, []))
        for child in children.get(cluster_id, []):
            inner = emit(child.id)
            if not inner:
                continue
            style = "dashed" if child.kind == "group" else "rounded"
            colour = "#ef6c00" if child.kind == "group" else "#90a4ae"
            lines.append(f"\tsubgraph {_quote('cluster_' + child.id)} {{\n")
            lines.append(f'\t\tlabel={_quote(child.label)} style={style} color="{colour}"\n')
            lines.extend(inner)
            lines.append("\t}\n")
        return lines

    return emit(None)


def render_svg(dot_text: str, *, timeout: float = 60.0) -> str | None:
    """SVG from DOT text with a ``dot`` executable, or None when there is none (or it fails)."""
    executable = shutil.which("dot")
    if executable is None:
        return None
    try:
        result = subprocess.run(
            [executable, "-Tsvg"],
            input=dot_text.encode("utf-8"),
            capture_output=True,
            timeout=timeout,
            check=True,
        )
    except (subprocess.SubprocessError, OSError):
        return None
    return result.stdout.decode("utf-8")
