"""``ViewModel.to_text()``: a deterministic, version-independent rendering for golden tests.

Left out on purpose: source lines (they point into jax/brainstate frames that move between
versions) and parameters of non-ETP equations (jax adds params between versions).
"""

from __future__ import annotations

from typing import Any

ALL_SECTIONS = (
    "nodes",
    "edges",
    "clusters",
    "weights",
    "groups",
    "relations",
    "readouts",
    "bypasses",
    "perturbations",
    "diagnostics",
    "legend",
)


def _ids(items: Any) -> str:
    items = list(items)
    return " ".join(str(i) for i in items) if items else "-"


def _node_line(n: Any) -> str:
    parts = [n.id, n.kind, repr(n.label)]
    if n.etp:
        parts.append("etp")
    named = (
        ("weight_path", n.weight_path),
        ("status", n.status),
        ("hidden_path", n.hidden_path),
        ("state_path", n.state_path),
        ("group", n.group),
        ("cluster", n.cluster),
        ("lifted", n.lifted),
    )
    for key, value in named:
        if value is not None:
            parts.append(f"{key}={value}")
    if n.subcluster:
        parts.append(f"owns={n.subcluster}")
    if n.in_avals:
        parts.append(f"in=({', '.join(n.in_avals)})")
    if n.out_avals:
        parts.append(f"out=({', '.join(n.out_avals)})")
    if n.etp and n.params:
        parts.append("params={" + ", ".join(f"{k}={v}" for k, v in n.params) + "}")
    if n.badges:
        parts.append("badges=[" + ", ".join(f"{b.kind}:{b.text}" for b in n.badges) + "]")
    return "  " + " ".join(parts)


def _section_nodes(vm: Any) -> list[str]:
    return [_node_line(n) for n in vm.nodes]


def _section_edges(vm: Any) -> list[str]:
    return [
        f"  {e.source} -> {e.target}  {e.var}:{e.aval}"
        + ("" if e.kind == "data" else f" ({e.kind})")
        for e in vm.edges
    ]


def _section_clusters(vm: Any) -> list[str]:
    lines = []
    for c in vm.clusters:
        state = "collapsed" if c.collapsed else "expanded"
        owner = f" node={c.node}" if c.node else ""
        lines.append(f"  {c.id} {c.kind} {c.label!r} parent={c.parent or '-'} {state}{owner}")
        if c.kind == "cell":
            lines.append(
                f"    module={c.module_path} class={c.class_name} ports={list(c.ports)}"
                f" hidden={list(c.hidden_paths)}"
            )
    return lines


def _section_weights(vm: Any) -> list[str]:
    lines = []
    for w in vm.weights:
        groups = f" groups={list(w.groups)}" if w.groups else ""
        lines.append(f"  {w.path} [{w.aval or '?'}] {w.status}{groups}")
        lines.append(f"    shown: {w.status_text}")
        lines.append(f"    reason: {w.reason}")
        if w.claim:
            lines.append(f"    claim: {w.claim} -- {w.claim_reason or '-'}")
            if w.dropped_nodes:
                lines.append(f"    dropped: {_ids(w.dropped_nodes)}")
        if w.summary:
            lines.append(f"    summary: {w.summary}")
        if w.fix:
            lines.append(f"    fix: {w.fix}")
        lines.append(f"    nodes: {_ids(w.node_ids)}")
        lines.append(f"    path: {_ids(w.path_nodes)}")
        if w.boundary_nodes:
            lines.append(f"    boundary: {_ids(w.boundary_nodes)}")
        if w.diagnostics:
            lines.append(f"    diagnostics: {_ids(w.diagnostics)}")
    return lines


def _section_groups(vm: Any) -> list[str]:
    lines = []
    for g in vm.groups:
        lines.append(
            f"  group {g.index}: {', '.join(g.hidden_paths)} num_state={g.num_state} "
            f"varshape={list(g.varshape)} cluster={g.cluster}"
        )
        lines.append(f"    transition: {_ids(g.transition_nodes)}")
    return lines


def _section_relations(vm: Any) -> list[str]:
    lines = []
    for r in vm.relations:
        lines.append(
            f"  {r.id} {r.primitive} node={r.node} weights={', '.join(r.weight_paths)} "
            f"groups={list(r.groups)} hidden={', '.join(r.hidden_paths) or '-'}"
        )
        lines.append(f"    slice: {_ids(r.slice_nodes)}")
    return lines


def _section_readouts(vm: Any) -> list[str]:
    return [f"  {r.path} path: {_ids(r.path_nodes)}" for r in vm.readouts]


def _section_bypasses(vm: Any) -> list[str]:
    return [f"  {b.hidden_path}^(t-1) path: {_ids(b.path_nodes)}" for b in vm.bypasses]


def _section_perturbations(vm: Any) -> list[str]:
    return [
        f"  {p.hidden_path} at {p.node or '-'} via {p.perturb_node or '-'}"
        for p in vm.perturbations
    ]


def _section_diagnostics(vm: Any) -> list[str]:
    lines = []
    for d in vm.diagnostics:
        who = d.weight_path or ", ".join(d.hidden_paths) or "-"
        lines.append(f"  [{d.index}] {d.level} {d.kind} ({who}) nodes: {_ids(d.node_ids)}")
        lines.append(f"    {d.message}")
    return lines


def _section_legend(vm: Any) -> list[str]:
    lines = []
    for e in vm.legend:
        colours = "/".join(c for c in (e.fill, e.stroke) if c) or "-"
        lines.append(f"  {e.key}: {e.label} [{e.swatch} {e.line} {colours}]")
    return lines


#: each section's renderer, in :data:`ALL_SECTIONS` order
SECTION_RENDERERS = {
    "nodes": _section_nodes,
    "edges": _section_edges,
    "clusters": _section_clusters,
    "weights": _section_weights,
    "groups": _section_groups,
    "relations": _section_relations,
    "readouts": _section_readouts,
    "bypasses": _section_bypasses,
    "perturbations": _section_perturbations,
    "diagnostics": _section_diagnostics,
    "legend": _section_legend,
}
assert tuple(SECTION_RENDERERS) == ALL_SECTIONS


def render_text(vm: Any, *, sections: tuple[str, ...] | None = None) -> str:
    """Render the chosen sections (all by default) of a view model as text."""
    chosen = ALL_SECTIONS if sections is None else tuple(sections)
    unknown = [s for s in chosen if s not in ALL_SECTIONS]
    if unknown:
        raise ValueError(f"unknown sections {unknown}; valid: {', '.join(ALL_SECTIONS)}")
    lines = [f"view model {vm.title!r} (schema {vm.schema})"]
    items = {
        "nodes": vm.nodes,
        "edges": vm.edges,
        "clusters": vm.clusters,
        "weights": vm.weights,
        "groups": vm.groups,
        "relations": vm.relations,
        "readouts": vm.readouts,
        "bypasses": vm.bypasses,
        "perturbations": vm.perturbations,
        "diagnostics": vm.diagnostics,
        "legend": vm.legend,
    }
    for name in chosen:
        lines.append(f"{name} ({len(items[name])}):")
        lines.extend(SECTION_RENDERERS[name](vm))
    return "\n".join(lines) + "\n"
