"""DOT text from a view model (the ``graphviz`` package), and a static SVG when ``dot`` exists.

The browser lays the DOT out with Graphviz compiled to wasm; this module is also the fallback
for static output (``_repr_mimebundle_``, nbviewer), and draws what the live page draws for the
same expansion state: a collapsed ``cell`` (a module holding hidden state, ``cells.py``) is one
record node, its path and class, a port per weight and its hidden states (the live first view
folds every cell); a collapsed sub-jaxpr is drawn as its owning equation (styled as a folded
box); an expanded cluster as a box of its equations, with the folded node's edges replaced by
the inner ones. Colours, node styles and the legend come from ``palette.py``, the same as the
live page's. Each pass is one loop over the nodes, edges or clusters (a deep stack has one cell
per layer).

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
from collections import Counter
from collections.abc import Iterable
from typing import Any

from .palette import COLOURS, NODE_KIND_TEXT, edge_key, edge_style, node_key, node_style

__all__ = [
    "LARGE_GRAPH_NODES",
    "cells_holding",
    "drawn_legend_keys",
    "legend_html",
    "port_name",
    "render_svg",
    "representatives",
    "to_dot",
    "visible_nodes",
]

#: Above this many visible nodes the layout is bounded (``nslimit``, ``mclimit``, straight edges).
LARGE_GRAPH_NODES = 300

_HIGHLIGHT = COLOURS["hl_path"]
_HIGHLIGHT_BOUNDARY = COLOURS["hl_boundary"]


def _folded_as(vm: Any, expanded: set[str]) -> dict[str, str | None]:
    """Cluster id -> the id drawn for everything inside it (None: drawn as itself).

    The outermost folded cluster around a node wins: a collapsed ``cell`` is drawn as one node
    (its cluster id, ``cell:rnn``), a collapsed ``subjaxpr`` as its owning equation. One pass
    over the clusters, parents first (a deep stack has one cell per layer)."""
    clusters = {c.id: c for c in vm.clusters}
    folded: dict[str, str | None] = {}
    for cluster_id in clusters:
        chain: list[str] = []
        while cluster_id in clusters and cluster_id not in folded:
            chain.append(cluster_id)
            cluster_id = clusters[cluster_id].parent
        outer = folded.get(cluster_id) if cluster_id is not None else None
        for inner in reversed(chain):  # outermost first
            if outer is None:
                outer = _folds_to(clusters[inner], expanded)
            folded[inner] = outer
    return folded


def cells_holding(vm: Any, node_ids: Iterable[str]) -> list[str]:
    """The ``cell`` clusters holding any of ``node_ids``, with the cells around them: what
    ``expanded`` must list for those nodes to be drawn (``etp_viz.what_if`` opens the cells of
    the weights a change touches).

    >>> import jax, jax.numpy as jnp
    >>> from etp_viz.view.model import build_view_model
    >>> cells_holding(build_view_model(jax.make_jaxpr(jax.nn.relu)(jnp.ones(2))), ["e0"])
    []
    """
    clusters = {c.id: c for c in vm.clusters}
    home = {n.id: n.cluster for n in vm.nodes}
    opened: dict[str, None] = {}
    for node in node_ids:
        cluster_id = home.get(node)
        while cluster_id in clusters and cluster_id not in opened:
            if clusters[cluster_id].kind == "cell":
                opened[cluster_id] = None
            cluster_id = clusters[cluster_id].parent
    return list(opened)


def _folds_to(cluster: Any, expanded: set[str]) -> str | None:
    if cluster.id in expanded:
        return None
    if cluster.kind == "cell":
        return cluster.id
    if cluster.kind == "subjaxpr":
        return cluster.node
    return None


def representatives(vm: Any, expanded: Iterable[str] = ()) -> dict[str, str]:
    """Node id -> the id drawn for it in this expansion state.

    The live page's first view (``js/src/graph.js`` ``visibleGraph``): a node inside a
    collapsed ``cell`` cluster is drawn as that cell (one node, the cluster's id); a node
    inside a collapsed ``subjaxpr`` cluster as the owner of that cluster (an equation that owns
    a sub-jaxpr sits inside its own cluster as the entry node); the outermost folded cluster
    wins. Every other node is drawn as itself. Parameter nodes without edges (their consumers
    carry badges) are not drawn.

    Example
    -------
    >>> import jax, jax.numpy as jnp
    >>> from etp_viz.view.model import build_view_model
    >>> vm = build_view_model(jax.make_jaxpr(jax.nn.relu)(jnp.ones(2)))
    >>> sorted(set(representatives(vm).values())) == sorted(visible_nodes(vm))
    True
    """
    folded = _folded_as(vm, set(expanded))
    with_edges = {e.source for e in vm.edges} | {e.target for e in vm.edges}
    out: dict[str, str] = {}
    for node in vm.nodes:
        if node.kind == "param" and node.id not in with_edges:
            continue
        drawn = folded.get(node.cluster) if node.cluster is not None else None
        out[node.id] = drawn or node.id
    return out


def visible_nodes(vm: Any, expanded: Iterable[str] = ()) -> dict[str, Any]:
    """What is drawn for this expansion state, by drawn id, in the view model's order: the
    nodes drawn as themselves, and each folded cell as its ``Cluster`` (where its first node
    is)."""
    return _drawn_items(vm, representatives(vm, expanded))


def _drawn_items(vm: Any, rep: dict[str, str]) -> dict[str, Any]:
    cells = {c.id: c for c in vm.clusters if c.kind == "cell"}
    items: dict[str, Any] = {}
    for node in vm.nodes:
        shown = rep.get(node.id)
        if shown == node.id:
            items[shown] = node
        elif shown in cells and shown not in items:
            items[shown] = cells[shown]
    return items


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
        rows.append(f'<FONT POINT-SIZE="9">{esc(texts + more)}</FONT>')
    return "<" + "<BR/>".join(rows) + ">"


def _tooltip(node: Any) -> str:
    if node.etp and node.weight_path:
        plain = f"weight op: uses {node.weight_path}"
    else:
        plain = NODE_KIND_TEXT.get(node.kind, node.kind)
    parts = [plain, node.id, node.primitive or node.kind]
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


def _marks(vm: Any) -> dict[str, set[str]]:
    """Ids of the annotated nodes and edges (the same sets ``js/src/graph.js`` indexes)."""

    return {
        "slice": {e for r in vm.relations for e in r.slice_edges},
        "transition": {e for g in vm.groups for e in g.transition_edges},
        "readout": {e for r in vm.readouts for e in r.path_edges},
        "bypass": {e for b in vm.bypasses for e in b.path_edges},
        "dropped": {e for w in vm.weights for e in w.dropped_edges},
        "boundary": {n for w in vm.weights for n in w.boundary_nodes},
        "perturbed": {p.node for p in vm.perturbations if p.node},
    }


def _edge_key_of(edge_ids: Iterable[str], marks: dict[str, set[str]]) -> str:
    ids = set(edge_ids)
    flags = {k: bool(ids & marks[k]) for k in ("transition", "readout", "bypass", "dropped")}
    return edge_key(slice_=bool(ids & marks["slice"]), **flags)


def _drawn_edges(vm: Any, rep: dict[str, str]) -> dict[tuple[str, str], list[Any]]:
    """(drawn source, drawn target) -> the view-model edges drawn as that one edge."""
    pairs: dict[tuple[str, str], list[Any]] = {}
    for edge in vm.edges:
        source, target = rep.get(edge.source), rep.get(edge.target)
        if source is None or target is None or source == target:
            continue
        pairs.setdefault((source, target), []).append(edge)
    return pairs


def _node_style_of(node: Any, marks: dict, weight_status: dict, expanded: set) -> dict:
    status = weight_status.get(node.weight_path or "", node.status) if node.etp else None
    return node_style(
        node.kind,
        etp=bool(node.etp),
        status=status,
        perturbed=node.id in marks["perturbed"],
        boundary=node.id in marks["boundary"],
        collapsed=node.subcluster is not None and node.subcluster not in expanded,
    )


def _is_cell(item: Any) -> bool:
    """Whether a drawn item is a folded cell (a ``Cluster``), not a view-model node."""
    return item.kind == "cell"


def drawn_legend_keys(vm: Any, expanded: Iterable[str] = ()) -> list[str]:
    """The legend keys (``palette.LEGEND``) of what :func:`to_dot` draws: the static
    fallback's legend lists exactly these."""
    expanded = set(expanded)
    rep = representatives(vm, expanded)
    items = _drawn_items(vm, rep)
    marks = _marks(vm)
    weight_status = {w.path: w.status for w in vm.weights}
    keys: set[str] = set()
    for item in items.values():
        if _is_cell(item):
            keys.add("cell")
            continue
        if item.subcluster is not None and item.subcluster not in expanded:
            keys.add("collapsed")
        else:
            status = weight_status.get(item.weight_path or "", item.status) if item.etp else None
            keys.add(node_key(item.kind, etp=bool(item.etp), status=status))
        keys.update(k for k in ("perturbed", "boundary") if item.id in marks[k])
        if item.badges:
            keys.add("badge")
    for edges in _drawn_edges(vm, rep).values():
        keys.add(_edge_key_of((e.id for e in edges), marks))
    kinds = {c.id: c.kind for c in vm.clusters}
    for cluster_id in _drawn_boxes(vm, items.values(), expanded):
        keys.add(kinds[cluster_id] if kinds[cluster_id] in ("group", "cell") else "subjaxpr")
    from .palette import LEGEND

    return [e.key for e in LEGEND if e.key in keys]


def _drawn_boxes(vm: Any, items: Iterable[Any], expanded: set[str]) -> set[str]:
    """The clusters drawn as boxes: those holding a drawn item, and every one around them."""
    parents = {c.id: c.parent for c in vm.clusters}
    boxes: set[str] = set()
    for item in items:
        cluster_id = _drawn_cluster(parents, item, expanded)
        while cluster_id in parents and cluster_id not in boxes:  # each box climbed once
            boxes.add(cluster_id)
            cluster_id = parents[cluster_id]
    return boxes


def to_dot(vm: Any, *, expanded: Iterable[str] = (), highlight: Any = None) -> str:
    """DOT text of the view model for one expansion state: what the live page draws for it.

    Each ``cell`` cluster (a module holding hidden state, ``view/cells.py``) is folded into one
    node, as in the live page's first view: its path and class, one port per weight, its
    hidden states; the edges of its operations reach that node. Each ``subjaxpr`` cluster is
    drawn as its owning equation. The clusters in ``expanded`` are drawn open.

    Parameters
    ----------
    vm : ViewModel
    expanded : iterable of cluster ids
        ``cell`` and ``subjaxpr`` clusters to draw open (all are folded otherwise).
    highlight : str or iterable of str, optional
        A weight path, a group cluster id (``"g0"``), a relation id (``"r0"``) or node/edge
        ids. A folded cell stands in for the highlighted nodes it holds.

    Example
    -------
    >>> import jax, jax.numpy as jnp
    >>> from etp_viz.view.model import build_view_model
    >>> vm = build_view_model(jax.make_jaxpr(lambda x: jnp.sin(x) * 2)(1.0))
    >>> '"out:0"' in to_dot(vm)
    True
    """
    import graphviz

    expanded = set(expanded)
    parents = {c.id: c.parent for c in vm.clusters}
    rep = representatives(vm, expanded)
    items = _drawn_items(vm, rep)
    hi_nodes, hi_edges, boundary = _highlight_ids(vm, highlight)
    # a folded node stands in for the highlighted nodes it holds (js/src/highlight.js)
    hi_drawn = {rep.get(i, i) for i in hi_nodes}
    boundary_drawn = {rep.get(i, i) for i in boundary}
    marks = _marks(vm)
    weight_status = {w.path: w.status for w in vm.weights}
    weight_label = {w.path: w.status_text for w in vm.weights}
    graph_attr = {"rankdir": "TB", "fontname": "Helvetica", "fontsize": "12", "compound": "true"}
    if len(items) > LARGE_GRAPH_NODES:
        graph_attr.update(nslimit="1", nslimit1="1", mclimit="0.1", splines="line")
    dot = graphviz.Digraph(
        name="etp_viz",
        graph_attr=graph_attr,
        node_attr={"fontname": "Helvetica", "fontsize": "12", "style": "filled"},
        edge_attr={"fontname": "Helvetica", "fontsize": "10", "color": COLOURS["edge"]},
    )
    dot.body.append(f"\tlabel={_quote(vm.title)} labelloc=t\n")
    bodies = _cluster_bodies(vm)
    sizes = Counter(rep.values())
    for item_id, item in items.items():
        hi, blocks = item_id in hi_drawn, item_id in boundary_drawn
        if _is_cell(item):
            line = _cell_stmt(item, sizes[item_id], weight_label, hi, blocks)
        else:
            style = _node_style_of(item, marks, weight_status, expanded)
            line = _node_stmt(item, style, weight_label, hi, blocks)
        bodies.get(_drawn_cluster(parents, item, expanded), bodies[None]).append(line)
    dot.body.extend(_assemble_clusters(vm, bodies))
    for (source, target), edges in _drawn_edges(vm, rep).items():
        ids = [e.id for e in edges]
        tooltip = "\n".join(f"{e.var}: {e.aval}" for e in edges)
        attrs = [f"tooltip={_quote(tooltip)}"]
        style = edge_style(_edge_key_of(ids, marks))
        if set(ids) & hi_edges:
            style.update(color=_HIGHLIGHT, penwidth="3")
        attrs += [f'{k}="{v}"' for k, v in style.items()]
        if len(ids) > 1:
            attrs.append(f'label="×{len(ids)}"')
        dot.body.append(f"\t{_quote(source)} -> {_quote(target)} [{' '.join(attrs)}]\n")
    return dot.source


def _highlight_attrs(hi: bool, boundary: bool) -> list[str]:
    """Attributes drawn over a node's own: the highlighted weight's blocking op, its path."""
    if boundary:
        fill = COLOURS["hl_boundary_fill"]
        return [f'color="{_HIGHLIGHT_BOUNDARY}" fillcolor="{fill}"', "penwidth=4"]
    return [f'color="{_HIGHLIGHT}" penwidth=3'] if hi else []


def _node_stmt(
    node: Any, style: dict, weight_label: dict[str, str], hi: bool, boundary: bool
) -> str:
    attrs = [f"label={_label(node, weight_label)}", f"shape={style['shape']}"]
    attrs += [f'style="{style["style"]}"', f'fillcolor="{style["fill"]}"']
    attrs += [f'color="{style["stroke"]}"', f"penwidth={style.get('penwidth', '1')}"]
    if "peripheries" in style:
        attrs.append(f"peripheries={style['peripheries']}")
    attrs.append(f"tooltip={_tooltip(node)}")
    attrs.append(f"id={_quote('node-' + node.id)}")
    attrs += _highlight_attrs(hi, boundary)
    return f"\t{_quote(node.id)} [{' '.join(attrs)}]\n"


def _cell_stmt(cell: Any, size: int, weight_label: dict[str, str], hi: bool, boundary: bool) -> str:
    """A folded cell as the live page draws it (``js/src/dot-style.js`` ``cellAttrs``): one
    record node, its path and class on top, one port per weight (``w<i>``), its hidden
    states at the bottom, in the colours of the legend's "cell" entry."""
    path, ports, hidden = cell.module_path or "", cell.ports or (), cell.hidden_paths or ()
    fields = [f"{_record_text(_truncate(cell.label, 40))} ▸"]
    if ports:
        names = (_record_text(_truncate(port_name(path, w), 24)) for w in ports)
        fields.append("{" + "|".join(f"<w{i}> {name}" for i, name in enumerate(names)) + "}")
    if hidden:
        fields.append(_record_text(_truncate(", ".join(port_name(path, h) for h in hidden), 40)))
    tooltip = [f'{cell.label}: {size} operations (expanded=["{cell.id}"] draws them)']
    tooltip += [f"weight {w}: {weight_label.get(w, '')}" for w in ports]
    tooltip += [f"hidden state: {', '.join(hidden)}"] if hidden else []
    # the fields are escaped: only the record's own syntax is left (no quote, no backslash)
    attrs = [f'label="{{{"|".join(fields)}}}"', "shape=Mrecord"]
    attrs += ['style="filled"', f'fillcolor="{COLOURS["group_fill"]}"']
    attrs += [f'color="{COLOURS["group_border"]}"', "penwidth=1.5"]
    attrs += [f"tooltip={_quote(chr(10).join(tooltip))}", f"id={_quote('node-' + cell.id)}"]
    attrs += _highlight_attrs(hi, boundary)
    return f"\t{_quote(cell.id)} [{' '.join(attrs)}]\n"


def port_name(cell_path: str, weight_path: str) -> str:
    """A weight's name on its cell's port: its path below the cell, without a Linear's
    trailing ``.weight`` (``js/src/dot-style.js`` ``portName``).

    Example
    -------
    >>> port_name("cell", "cell.W.weight"), port_name("lif", "lif.V")
    ('W', 'V')
    """
    below = weight_path
    if weight_path.startswith(cell_path + "."):
        below = weight_path[len(cell_path) + 1 :]
    parts = below.split(".")
    return ".".join(parts[:-1]) if len(parts) > 1 and parts[-1] == "weight" else below


def _record_text(text: str) -> str:
    """Record-label text: the record syntax's own characters (and backslashes, its escape)
    become look-alikes, markup characters entities (Graphviz decodes them)."""
    return html.escape(text.translate(str.maketrans("{<}>|\\\n\r", "(())//  ")))


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _drawn_cluster(parents: dict, item: Any, expanded: set[str]) -> str | None:
    """The cluster a drawn item goes in: a folded cell or collapsed owner goes in its
    cluster's parent."""
    if _is_cell(item):
        return item.parent
    if item.subcluster is not None and item.subcluster not in expanded:
        return parents.get(item.subcluster)
    return item.cluster


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
            if child.kind == "group":
                fill, border = COLOURS["group_fill"], COLOURS["group_border"]
                look = f'style="filled,rounded" fillcolor="{fill}" color="{border}" penwidth=1.5'
            elif child.kind == "cell":  # drawn open: static output has no click to fold
                look = f'style="rounded" color="{COLOURS["group_border"]}" penwidth=1.5'
            else:
                look = f'style="dashed,rounded" color="{COLOURS["subjaxpr_border"]}"'
            lines.append(f"\tsubgraph {_quote('cluster_' + child.id)} {{\n")
            lines.append(f"\t\tlabel={_quote(child.label)} {look}\n")
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


_DASH = {"dashed": "5,2", "dotted": "1.5,3"}


def _swatch_svg(entry: Any) -> str:
    """A small inline SVG of a legend entry's mark (the live legend draws the same,
    ``js/src/legend.js``)."""
    fill, stroke = entry.fill or "none", entry.stroke or "none"
    dash = f' stroke-dasharray="{_DASH[entry.line]}"' if entry.line in _DASH else ""
    paint = f'fill="{fill}" stroke="{stroke}" stroke-width="2"{dash}'
    shapes = {
        "line": f'<line x1="1" y1="8" x2="27" y2="8" stroke="{stroke}" stroke-width="3"{dash}/>',
        "ellipse": f'<ellipse cx="14" cy="8" rx="12" ry="6.5" {paint}/>',
        "diamond": f'<polygon points="14,1 27,8 14,15 1,8" {paint}/>',
        "house": f'<polygon points="2,6 14,1 26,6 26,15 2,15" {paint}/>',
        "note": f'<polygon points="2,2 21,2 26,7 26,14 2,14" {paint}/>',
        "text": '<text x="14" y="12" text-anchor="middle" font-size="11">⟨1⟩</text>',
        "box3d": f'<polyline points="5,3 5,1 27,1 27,12 24,12" fill="none" stroke="{stroke}"/>'
        f'<rect x="2" y="4" width="21" height="10" {paint}/>',
    }
    body = shapes.get(entry.swatch)
    if body is None:
        rx = 4 if entry.swatch == "round" else 2
        body = f'<rect x="2" y="2" width="24" height="12" rx="{rx}" {paint}/>'
        if entry.line == "double":
            body += (
                f'<rect x="5" y="5" width="18" height="6" rx="2" fill="none" stroke="{stroke}"/>'
            )
    return f'<svg width="28" height="16" viewBox="0 0 28 16" aria-hidden="true">{body}</svg>'


def legend_html(vm: Any, expanded: Iterable[str] = ()) -> str:
    """The static fallback's legend: one item per kind of mark :func:`to_dot` draws, with
    the live page's words, tooltips (``title``) and colours (``palette.LEGEND``)."""
    from .palette import legend_entries

    items = []
    for e in legend_entries(drawn_legend_keys(vm, expanded)):
        colours = " ".join(c for c in (e.fill, e.stroke) if c)
        items.append(
            f"<span class='etp-legend-item' data-key='{e.key}' data-colours='{colours}' "
            f"title='{html.escape(e.title or e.label, quote=True)}' style='display:inline-flex;"
            f"align-items:center;gap:5px;margin:1px 12px 1px 0;white-space:nowrap'>"
            f"{_swatch_svg(e)}<span>{html.escape(e.label)}</span></span>"
        )
    return (
        "<div class='etp-legend' data-legend='static' style='display:flex;flex-wrap:wrap;"
        f"font:12px sans-serif;margin:4px 0'>{''.join(items)}</div>"
    )
