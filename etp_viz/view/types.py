"""The view model's data: frozen dataclasses, JSON conversion and checks.

The JSON shape is the contract with ``js/`` and is documented in ``docs/view-model.md``. All
strings are plain text (never pre-escaped): renderers escape them.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from .palette import LegendEntry, palette_json
from .text import render_text

#: The view model's version, ``"schema"`` at the top of its JSON: the front end renders only
#: the version it was built for (``VIEW_MODEL_SCHEMA`` in ``js/src/types.js``) and shows an
#: error for any other. 2: each weight carries ``status_text``. 3: the page may get it as a
#: shell and parts (``etp_viz/explorer/parts.py``; a shell carries ``parts``).
SCHEMA_VERSION = 3

NODE_KINDS = (
    "eqn",
    "input",
    "output",
    "hidden_in",
    "hidden_out",
    "state_in",
    "state_out",
    "param",
    "perturb",
)
WEIGHT_STATUSES = ("online", "exact", "not_learned")


@dataclass(frozen=True)
class Badge:
    """A small tag on a node standing in for an edge (parameter, literal, constant, fan-out)."""

    text: str
    title: str
    kind: str  # param | literal | const | fanout


@dataclass(frozen=True)
class Node:
    id: str
    kind: str
    label: str
    primitive: str | None = None
    eqn_index: int | None = None
    cluster: str | None = None
    etp: bool = False
    weight_path: str | None = None
    status: str | None = None
    hidden_path: str | None = None
    state_path: str | None = None
    group: int | None = None
    params: tuple[tuple[str, str], ...] = ()
    in_avals: tuple[str, ...] = ()
    out_avals: tuple[str, ...] = ()
    source: str | None = None
    badges: tuple[Badge, ...] = ()
    subcluster: str | None = None  # the collapsible cluster this equation owns, if any
    #: an ETP equation that ``lift=True`` made from a plain op: that op's text (``x @ W``)
    lifted: str | None = None


@dataclass(frozen=True)
class Edge:
    id: str
    source: str
    target: str
    var: str
    aval: str
    kind: str = "data"  # data | perturb


@dataclass(frozen=True)
class Cluster:
    id: str
    kind: str  # subjaxpr | branch | group | cell
    label: str
    parent: str | None = None
    collapsed: bool = False
    node: str | None = None  # the equation that owns a subjaxpr cluster
    #: a ``cell`` cluster (a module of the model holding hidden states, ``view/cells.py``):
    #: its module path, class name, weights (drawn as the folded cell's ports) and hidden states
    module_path: str | None = None
    class_name: str | None = None
    ports: tuple[str, ...] = ()
    hidden_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class WeightInfo:
    path: str
    status: str
    groups: tuple[int, ...] = ()
    reason: str = ""
    fix: str | None = None
    aval: str | None = None
    node_ids: tuple[str, ...] = ()
    path_nodes: tuple[str, ...] = ()
    path_edges: tuple[str, ...] = ()
    boundary_nodes: tuple[str, ...] = ()
    diagnostics: tuple[int, ...] = ()
    #: the gradient claim for the view's algorithm: "exact" | "approximate" | "none" | ""
    #: (no claim made), its reason (what is dropped), and per leaf (path, kind, reason)
    claim: str = ""
    claim_reason: str = ""
    #: what the status badge says, status and claim in the reader's words (``"online ·
    #: approximate"``, ``"readout · exact"``, ``"not learned"``): computed once, in Python
    #: (``compiler.claims.verdict.status_text``); the front end shows it as is
    status_text: str = ""
    leaf_claims: tuple[tuple[str, str, str], ...] = ()
    #: a fused gate weight's claim per block of columns, ``(where, kind, reason in plain
    #: words)``: ``("columns 0-7 (r)", "none", "They reach ...")`` (brainstate's GRUCell.Wrz)
    block_claims: tuple[tuple[str, str, str], ...] = ()
    #: the equations of the Jacobian terms the algorithm drops for this weight, and the edges
    #: into them (drawn dashed: the cut h -> h dependencies)
    dropped_nodes: tuple[str, ...] = ()
    dropped_edges: tuple[str, ...] = ()
    #: what the status and claim mean in plain words, with weight and state names (no
    #: internal codes): what the explorer shows; ``detail`` (``reason`` and ``claim_reason``,
    #: codes and all) goes on hover
    summary: str = ""
    detail: str = ""


@dataclass(frozen=True)
class GroupInfo:
    index: int
    hidden_paths: tuple[str, ...]
    num_state: int
    varshape: tuple[int, ...]
    cluster: str
    transition_nodes: tuple[str, ...] = ()
    transition_edges: tuple[str, ...] = ()


@dataclass(frozen=True)
class RelationInfo:
    id: str
    primitive: str
    node: str | None
    weight_paths: tuple[str, ...]
    groups: tuple[int, ...]
    hidden_paths: tuple[str, ...] = ()
    slice_nodes: tuple[str, ...] = ()
    slice_edges: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReadoutInfo:
    path: str
    path_nodes: tuple[str, ...] = ()
    path_edges: tuple[str, ...] = ()


@dataclass(frozen=True)
class BypassInfo:
    """A hidden state whose *previous* value reaches a model output without crossing a new
    hidden value (the hidden output bypass): the path from ``h:<path>:in`` to the outputs."""

    hidden_path: str
    path_nodes: tuple[str, ...] = ()
    path_edges: tuple[str, ...] = ()


@dataclass(frozen=True)
class PerturbInfo:
    hidden_path: str
    node: str | None  # the equation producing the perturbed hidden value
    perturb_node: str | None = None


@dataclass(frozen=True)
class DiagnosticInfo:
    index: int
    kind: str
    level: str
    message: str
    weight_path: str | None = None
    hidden_paths: tuple[str, ...] = ()
    node_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class ViewModel:
    """The explorer's whole picture of one compiled model: JSON-able, text-renderable."""

    title: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    clusters: tuple[Cluster, ...] = ()
    weights: tuple[WeightInfo, ...] = ()
    groups: tuple[GroupInfo, ...] = ()
    relations: tuple[RelationInfo, ...] = ()
    readouts: tuple[ReadoutInfo, ...] = ()
    bypasses: tuple[BypassInfo, ...] = ()
    perturbations: tuple[PerturbInfo, ...] = ()
    diagnostics: tuple[DiagnosticInfo, ...] = ()
    #: every legend entry (``palette.LEGEND``); renderers show those of what they draw
    legend: tuple[LegendEntry, ...] = ()
    options: tuple[tuple[str, Any], ...] = field(default=())
    #: colour name -> colour (``palette.COLOURS``): the one palette of every renderer
    palette: tuple[tuple[str, str], ...] = field(
        default_factory=lambda: tuple(palette_json().items())
    )
    schema: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        """A dict of str/int/float/bool/None/list/dict only (see ``docs/view-model.md``)."""
        return _to_jsonable(self)

    def to_json_string(self, **dumps_kwargs: Any) -> str:
        return json.dumps(self.to_json(), **dumps_kwargs)

    def to_text(self, *, sections: tuple[str, ...] | None = None) -> str:
        """Deterministic human-readable rendering (used by the golden tests)."""
        return render_text(self, sections=sections)

    def node(self, node_id: str) -> Node:
        return self._node_index()[node_id]

    def _node_index(self) -> dict[str, Node]:
        return {n.id: n for n in self.nodes}

    def check_references(self) -> list[str]:
        """Every id referenced anywhere that does not exist (empty when consistent)."""
        return find_dangling_references(self)


def _to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        out = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.name in ("params", "options", "palette"):
                out[f.name] = {k: _to_jsonable(v) for k, v in item}
            else:
                out[f.name] = _to_jsonable(item)
        return out
    if isinstance(value, tuple | list):
        return [_to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _to_jsonable(v) for k, v in value.items()}
    return value


def find_dangling_references(vm: ViewModel) -> list[str]:
    """List "where: id" for each referenced node/edge/cluster id that is not defined."""
    node_ids = {n.id for n in vm.nodes}
    edge_ids = {e.id for e in vm.edges}
    cluster_ids = {c.id for c in vm.clusters}
    problems: list[str] = []

    def need(ids: Any, pool: set[str], where: str) -> None:
        for item in [ids] if ids is None or isinstance(ids, str) else ids:
            if item is not None and item not in pool:
                problems.append(f"{where}: {item}")

    for kind, pool in (("node", node_ids), ("edge", edge_ids), ("cluster", cluster_ids)):
        size = {"node": len(vm.nodes), "edge": len(vm.edges), "cluster": len(vm.clusters)}[kind]
        if len(pool) != size:
            problems.append(f"duplicate {kind} ids")
    for n in vm.nodes:
        need(n.cluster, cluster_ids, f"node {n.id}.cluster")
        need(n.subcluster, cluster_ids, f"node {n.id}.subcluster")
    for e in vm.edges:
        need((e.source, e.target), node_ids, f"edge {e.id}")
    for c in vm.clusters:
        need(c.parent, cluster_ids, f"cluster {c.id}.parent")
        need(c.node, node_ids, f"cluster {c.id}.node")
    for w in vm.weights:
        need(w.node_ids + w.path_nodes + w.boundary_nodes, node_ids, f"weight {w.path}")
        need(w.path_edges, edge_ids, f"weight {w.path}.path_edges")
    for g in vm.groups:
        need(g.cluster, cluster_ids, f"group {g.index}.cluster")
        need(g.transition_nodes, node_ids, f"group {g.index}")
        need(g.transition_edges, edge_ids, f"group {g.index}.transition_edges")
    for r in vm.relations:
        need((r.node, *r.slice_nodes), node_ids, f"relation {r.id}")
        need(r.slice_edges, edge_ids, f"relation {r.id}.slice_edges")
    for r in vm.readouts:
        need(r.path_nodes, node_ids, f"readout {r.path}")
        need(r.path_edges, edge_ids, f"readout {r.path}.path_edges")
    for b in vm.bypasses:
        need(b.path_nodes, node_ids, f"bypass {b.hidden_path}")
        need(b.path_edges, edge_ids, f"bypass {b.hidden_path}.path_edges")
    for p in vm.perturbations:
        need((p.node, p.perturb_node), node_ids, f"perturbation {p.hidden_path}")
    for d in vm.diagnostics:
        need(d.node_ids, node_ids, f"diagnostic {d.index}")
    return problems
