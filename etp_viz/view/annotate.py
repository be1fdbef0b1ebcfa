"""The ETraceGraph part of the view model: state roles, groups, relations, weights, diagnostics.

Reads the compiler's public, typed objects only (:class:`~etp_viz.compiler.graph.ETraceGraph`:
``module_info``, ``hidden_groups``, ``hidden_param_op_relations``, ``hidden_perturb``,
``readout_params``, ``bypass_eqn_indices``, ``diagnostics``; their optional fields have
defaults in the compiler's NamedTuples).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import brainstate

from etp_viz._compat import is_var
from etp_viz.compiler.diagnostics import CompilationRecord
from etp_viz.compiler.graph import ETraceGraph

from .cells import fold_cells
from .nodes import JaxprGraphBuilder, Role, default_is_etp, path_text, role_node_id
from .types import (
    Badge,
    BypassInfo,
    Cluster,
    DiagnosticInfo,
    GroupInfo,
    PerturbInfo,
    ReadoutInfo,
    RelationInfo,
    ViewModel,
)
from .weights import classify_weights

__all__ = ["Annotator", "build_from_etrace_graph"]


class Annotator:
    """Holds the builder and the id maps shared by every annotation step."""

    def __init__(self, graph: ETraceGraph, options: dict[str, Any]) -> None:
        self.graph = graph
        self.minfo = graph.module_info
        self.options = options
        self.groups = list(graph.hidden_groups)
        self.relations = list(graph.hidden_param_op_relations)
        self.group_of = {path_text(p): g.index for g in self.groups for p in g.hidden_paths}
        self._index: _GraphIndex | None = None
        #: nodes and edges examined by the index queries (a linear pass keeps this O(graph))
        self.visits = 0

        self.builder = JaxprGraphBuilder(
            max_fanout=options["max_fanout"],
            is_etp=default_is_etp,
            param_nodes=options["param_edges"],
        )

    # --- nodes and edges ----------------------------------------------------------------
    def state_roles(self) -> tuple[list[Role | None], list[Role | None]]:
        m = self.minfo
        ins: list[Role | None] = [Role("input") for _ in range(m.num_arg_leaves)]
        outs: list[Role | None] = [Role("input") for _ in range(m.num_out_leaves)]
        for state, tin, tout in zip(
            m.compiled_model_states, m.state_tree_invars, m.state_tree_outvars
        ):
            path = path_text(m.state_id_to_path[id(state)])
            if isinstance(state, brainstate.HiddenState):
                kind = "hidden"
            elif isinstance(state, brainstate.ParamState):
                kind = "param"
            else:
                kind = "state"
            leaves_in, leaves_out = _leaves(tin), _leaves(tout)
            for leaf_in, leaf_out in zip(leaves_in, leaves_out):
                ins.append(Role(kind, path, self.group_of.get(path)))
                unchanged = kind == "param" or leaf_out is leaf_in
                outs.append(
                    Role("skip") if unchanged else Role(kind, path, self.group_of.get(path))
                )
        return ins, outs

    def eqn_id(self, index: int) -> str | None:
        node_id = f"e{index}"
        return node_id if node_id in self.builder.nodes else None

    def eqn_ids(self, indices: Any) -> tuple[str, ...]:
        ids = (self.eqn_id(int(i)) for i in indices)
        return tuple(dict.fromkeys(i for i in ids if i is not None))

    def hidden_out_id(self, path: Any) -> str | None:
        node_id = role_node_id(Role("hidden", path_text(path)), 0, out=True)
        return node_id if node_id in self.builder.nodes else None

    def hidden_in_id(self, path: Any) -> str | None:
        node_id = role_node_id(Role("hidden", path_text(path)), 0, out=False)
        return node_id if node_id in self.builder.nodes else None

    def _indexes(self) -> _GraphIndex:
        """Def/use-style indexes over the builder's nodes and edges, built once.

        Rebuilt only when nodes or edges were added since (the perturbation step adds some);
        every later query costs the size of its answer, not of the graph.
        """
        sizes = (len(self.builder.nodes), len(self.builder.edges))
        if self._index is None or self._index.sizes != sizes:
            self._index = _GraphIndex(self.builder.nodes, self.builder.edges, sizes)
            self.visits += sizes[0] + sizes[1]
        return self._index

    def edges_among(self, node_ids: Any) -> tuple[str, ...]:
        """Edges whose two ends are both in ``node_ids`` (in edge insertion order)."""
        index = self._indexes()
        pool = set(node_ids)
        found = []
        for node_id in pool:
            for edge_id, target in index.out_edges.get(node_id, ()):
                self.visits += 1
                if target in pool:
                    found.append(edge_id)
        return tuple(sorted(found, key=index.edge_order.__getitem__))

    def edges_into(self, node_ids: Any) -> tuple[str, ...]:
        """Edges that end at one of ``node_ids`` (in edge insertion order)."""
        index = self._indexes()
        found = [e for n in dict.fromkeys(node_ids) for e in index.in_edges.get(n, ())]
        self.visits += len(found)
        return tuple(sorted(set(found), key=index.edge_order.__getitem__))

    def with_nested(self, node_ids: Any) -> tuple[str, ...]:
        """Add the nested equations of every listed equation that owns a sub-jaxpr."""
        index = self._indexes()
        ids = list(dict.fromkeys(node_ids))
        nested: dict[str, None] = {}
        for owner in ids:
            for node_id in index.nested.get(owner, ()):
                self.visits += 1
                nested[node_id] = None
        ordered = sorted(nested, key=index.node_order.__getitem__)
        return tuple(dict.fromkeys(ids + ordered))

    def output_nodes(self) -> tuple[str, ...]:
        """The ``out:`` nodes (model outputs and returned states), in node order."""
        return self._indexes().outputs

    # --- annotation steps ---------------------------------------------------------------
    def group_infos(self) -> list[GroupInfo]:
        infos = []
        for g in self.groups:
            cluster = f"g{g.index}"
            paths = [path_text(p) for p in g.hidden_paths]
            self.builder.clusters[cluster] = Cluster(
                cluster, "group", f"group {g.index}: {', '.join(paths)}", None, False, None
            )
            ends = []
            for p in paths:
                for node_id in (self.hidden_in_id(p), self.hidden_out_id(p), f"pt:{p}"):
                    if node_id in self.builder.nodes:
                        self.builder.update_node(node_id, cluster=cluster, group=g.index)
                        if not node_id.startswith("pt:"):
                            ends.append(node_id)
            inner = self.with_nested(self.eqn_ids(g.transition_eqn_indices))
            nodes = tuple(dict.fromkeys([*ends[::2], *inner, *ends[1::2]]))
            infos.append(
                GroupInfo(
                    index=g.index,
                    hidden_paths=tuple(paths),
                    num_state=int(g.num_state),
                    varshape=tuple(int(d) for d in g.varshape),
                    cluster=cluster,
                    transition_nodes=nodes,
                    transition_edges=self.edges_among(nodes),
                )
            )
        return infos

    def relation_infos(self) -> list[RelationInfo]:
        infos = []
        for k, r in enumerate(self.relations):
            node = self.eqn_id(r.eqn_index)
            hidden = [path_text(p) for p in r.connected_hidden_paths]
            tail = [i for i in r.path_eqn_indices if i != r.eqn_index]
            outs = [h for h in map(self.hidden_out_id, hidden) if h]
            slice_nodes = (*self.with_nested(self.eqn_ids(tail)), *outs)
            infos.append(
                RelationInfo(
                    id=f"r{k}",
                    primitive=str(r.primitive.name),
                    node=node,
                    weight_paths=tuple(
                        dict.fromkeys(path_text(p) for p in r.trainable_paths.values())
                    ),
                    groups=tuple(g.index for g in r.hidden_groups),
                    hidden_paths=tuple(hidden),
                    slice_nodes=slice_nodes,
                    slice_edges=self.edges_among((node, *slice_nodes)),
                )
            )
        return infos

    def perturbation_infos(self) -> list[PerturbInfo]:
        perturb = self.graph.hidden_perturb
        if perturb is None:
            return []
        producers = perturb.hidden_producer_eqn_indices or {}
        infos = []
        for path in perturb.perturb_hidden_paths:
            text = path_text(path)
            index = producers.get(path, producers.get(text))
            out_id = self.hidden_out_id(text)
            pt_id = None
            if self.options["perturbation_nodes"] and out_id is not None:
                pt_id = self.builder.add_node(
                    f"pt:{text}",
                    kind="perturb",
                    label=f"p[{text}]",
                    hidden_path=text,
                    group=self.group_of.get(text),
                    out_avals=self.builder.nodes[out_id]["in_avals"],
                )
                aval = self.builder.nodes[out_id]["in_avals"][0]
                self.builder.add_edge(
                    f"{pt_id}>{out_id}", pt_id, out_id, f"p_{text}", aval, kind="perturb"
                )
            node = self.eqn_id(index) if index is not None else None
            infos.append(PerturbInfo(hidden_path=text, node=node, perturb_node=pt_id))
        return infos

    def diagnostic_infos(self) -> list[DiagnosticInfo]:
        infos = []
        records: tuple[CompilationRecord, ...] = tuple(self.graph.diagnostics)
        for k, rec in enumerate(records):
            context = dict(rec.context or {})
            node_ids = self.eqn_ids(context.get("eqn_indices", ()))
            weight = path_text(rec.weight_path) if rec.weight_path else None
            if not node_ids and weight and f"p:{weight}" in self.builder.nodes:
                node_ids = (f"p:{weight}",)
            infos.append(
                DiagnosticInfo(
                    index=k,
                    kind=rec.kind.value.lower(),
                    level=rec.level.name.lower(),
                    message=str(rec.message),
                    weight_path=weight,
                    hidden_paths=tuple(path_text(p) for p in rec.hidden_paths),
                    node_ids=node_ids,
                )
            )
        return infos

    def readout_infos(self) -> list[ReadoutInfo]:
        infos = []
        for path, readout in (self.graph.readout_params or {}).items():
            nodes = self.with_nested(self.eqn_ids(readout.path_eqn_indices))
            nodes = (*nodes, *self._touching_outputs(nodes))
            infos.append(ReadoutInfo(path_text(path), nodes, self.edges_among(nodes)))
        return infos

    def bypass_infos(self) -> list[BypassInfo]:
        """The hidden output bypass: from each ``h:<path>:in`` read by an output before the
        step's update, along ``graph.bypass_eqn_indices[path]``, to the outputs."""
        infos = []
        for path, indices in (self.graph.bypass_eqn_indices or {}).items():
            start = f"h:{path_text(path)}:in"
            nodes = self.with_nested(self.eqn_ids(indices))
            nodes = tuple(n for n in (start, *nodes) if n in self.builder.nodes)
            nodes = (*nodes, *self._touching_outputs(nodes))
            infos.append(BypassInfo(path_text(path), nodes, self.edges_among(nodes)))
        return infos

    def _touching_outputs(self, nodes: tuple[str, ...]) -> list[str]:
        """The ``out:`` nodes joined by an edge to one of ``nodes`` (the outputs a readout
        path reaches), in node order."""
        outputs = self.output_nodes()
        if not outputs:
            return []
        index, pool = self._indexes(), set(nodes)
        touching = []
        for out_id in outputs:
            ends = index.incident.get(out_id, ())
            self.visits += len(ends)
            if any(other in pool for other in ends):
                touching.append(out_id)
        return touching


class _GraphIndex:
    """Node/edge positions, out-edges, incident ends and nested-equation lists, built once."""

    def __init__(self, nodes: dict[str, Any], edges: dict[str, Any], sizes: tuple[int, int]):
        self.sizes = sizes
        self.node_order = {node_id: k for k, node_id in enumerate(nodes)}
        self.edge_order = {edge_id: k for k, edge_id in enumerate(edges)}
        self.outputs = tuple(n for n in nodes if n.startswith("out:"))
        self.out_edges: dict[str, list[tuple[str, str]]] = {}
        self.in_edges: dict[str, list[str]] = {}
        self.incident: dict[str, list[str]] = {}
        for edge in edges.values():
            self.out_edges.setdefault(edge.source, []).append((edge.id, edge.target))
            self.in_edges.setdefault(edge.target, []).append(edge.id)
            self.incident.setdefault(edge.source, []).append(edge.target)
            self.incident.setdefault(edge.target, []).append(edge.source)
        # "e3/..." and "e3.body..." are nested under "e3": register each node under every
        # prefix that ends before a '/' or '.' (ids are a few levels deep, so this is linear).
        self.nested: dict[str, list[str]] = {}
        for node_id in nodes:
            for k, char in enumerate(node_id):
                if char in "/.":
                    self.nested.setdefault(node_id[:k], []).append(node_id)


def _leaves(tree: Any) -> list[Any]:
    import jax

    return jax.tree.leaves(tree, is_leaf=lambda x: is_var(x) or not isinstance(x, Iterable))


def _mark_lifted(ann: Annotator) -> None:
    """Each ETP equation ``lift=True`` made: ``lifted`` (the plain op) and a ``lifted`` tag
    whose title the inspector shows ("lifted from `x @ W` (etp_viz.matmul)")."""
    from etp_viz.compiler.lift import lifted_text

    report = ann.minfo.lifting
    for op in report.lifted if report is not None else ():
        node_id = ann.eqn_id(op.eqn_index)
        if node_id is not None:
            badges = [*ann.builder.nodes[node_id].get("badges", ())]
            badges.append(Badge("lifted", lifted_text(op), "lifted"))
            ann.builder.update_node(node_id, lifted=op.source, badges=badges)


def build_from_etrace_graph(
    graph: ETraceGraph, *, title: str | None, options: dict, legend
) -> ViewModel:
    """The full view model of an ``ETraceGraph`` (see ``view_model.build_view_model``)."""
    ann = Annotator(graph, options)
    ins, outs = ann.state_roles()
    ann.builder.build(ann.minfo.closed_jaxpr, ins, outs)
    perturbations = ann.perturbation_infos()
    groups = ann.group_infos()
    relations = ann.relation_infos()
    readouts = ann.readout_infos()
    bypasses = ann.bypass_infos()
    diagnostics = ann.diagnostic_infos()
    fold_cells(ann.builder, ann.minfo.model, ann.minfo.closed_jaxpr, ins, outs)
    weights = classify_weights(ann, relations, readouts, diagnostics)
    for w in weights:  # label ETP equations with the weight they use and its status
        for node_id in w.node_ids:
            node = ann.builder.nodes[node_id]
            if node.get("etp") and node.get("weight_path") is None:
                ann.builder.update_node(node_id, weight_path=w.path, status=w.status)
    _mark_lifted(ann)
    nodes, edges, clusters = ann.builder.frozen()
    return ViewModel(
        title=title or type(ann.minfo.model).__name__,
        nodes=nodes,
        edges=edges,
        clusters=clusters,
        weights=tuple(weights),
        groups=tuple(groups),
        relations=tuple(relations),
        readouts=tuple(readouts),
        bypasses=tuple(bypasses),
        perturbations=tuple(perturbations),
        diagnostics=tuple(diagnostics),
        legend=legend,
        options=tuple(sorted(options.items())),
    )
