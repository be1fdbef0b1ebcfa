"""Cell-level folding: each cell or neuron the user wrote becomes one collapsed ``cell`` cluster.

A *cell* is a module of the model (not the model itself) that holds a ``HiddenState`` as its
own attribute: ``brainstate.nn.LSTMCell`` at ``cell`` holds ``cell.h`` and ``cell.c``, a LIF
neuron at ``lif`` holds ``lif.V``. Its weights are the parameters under its path
(``cell.W.weight``) that no deeper cell owns.

Which top-level equations belong to cell ``M`` is read off the data flow, never off the number
of equations (a fused gate weight is one ETP equation or one per block, the same cell):

* an equation *uses a weight* when it reads a parameter, or a value computed from parameters
  only (a column slice of a fused weight); it is *M's* when all those weights are M's, and it
  *blocks* M when one is not (another module's weight op is never folded into M);
* M's equations are those reached forward from M's hidden states and weights and backward from
  M's new hidden values without crossing a blocking equation, the equations using only M's
  weights, then every equation reading only values of M (a neuron's spike from its new
  voltage) and every constant only M reads;
* an equation claimed by two cells goes to the deeper one (then the first).

The cluster ``cell:<path>`` (kind ``cell``, collapsed) carries the module's path, class name,
weights (its ports) and hidden states; the cell's top-level equations, the sub-jaxpr clusters
they own and the hidden groups whose states are all the cell's go inside it.
"""

from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass
from typing import Any

from etp_viz._compat import is_var, split_closed_jaxpr

from .nodes import JaxprGraphBuilder, Role, path_text
from .types import Cluster

__all__ = ["CellInfo", "find_cell_modules", "fold_cells"]


@dataclass(frozen=True)
class CellInfo:
    """One cell: its module path, class name, weights and hidden states (paths as text)."""

    path: str
    class_name: str
    weights: tuple[str, ...]
    hidden_paths: tuple[str, ...]


def find_cell_modules(model: Any, hidden_paths: list[str], weight_paths: list[str]):
    """The cells of ``model``: the modules (not the model) holding one of ``hidden_paths``."""
    modules = _module_classes(model)
    owners: dict[str, list[str]] = {}
    for hidden in hidden_paths:
        owner = _owner(hidden, modules)
        if owner:
            owners.setdefault(owner, []).append(hidden)
    weights_of: dict[str, list[str]] = {}
    for w in weight_paths:  # each weight's owning cell, once (a deep stack has many cells)
        weights_of.setdefault(_owner(w, owners) or "", []).append(w)
    return [
        CellInfo(path, modules[path], tuple(weights_of.get(path, ())), tuple(hidden))
        for path, hidden in owners.items()
    ]


def _module_classes(model: Any) -> dict[str, str]:
    """Module path (text) -> class name, for every module of ``model`` (the model is "")."""
    try:
        found = model.nodes()
    except (AttributeError, TypeError):
        return {}
    return {path_text(path): type(module).__name__ for path, module in found.items()}


def _owner(path: str, modules: Any) -> str | None:
    """The deepest module in ``modules`` whose path is a proper prefix of ``path``."""
    parts = path.split(".")
    for k in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:k])
        if prefix in modules:
            return prefix
    return None


class _Flow:
    """Producers, consumers and weight use of the top-level equations, built once."""

    def __init__(self, jaxpr: Any, ins: list[Role | None], outs: list[Role | None]) -> None:
        self.eqns = list(jaxpr.eqns)
        self.producer: dict[Any, int] = {}
        self.consumers: dict[Any, list[int]] = {}
        self.invar_role = {v: r for v, r in zip(jaxpr.invars, ins) if r is not None}
        #: ``(kind, path)`` -> the invars of that state (its leaves)
        self.invars_of: dict[tuple, list[Any]] = {}
        for v, r in self.invar_role.items():
            self.invars_of.setdefault((r.kind, r.path), []).append(v)
        self.outvar_paths: dict[str, list[Any]] = {}
        for atom, role in zip(jaxpr.outvars, outs):
            if role is not None and role.kind == "hidden" and is_var(atom):
                self.outvar_paths.setdefault(str(role.path), []).append(atom)
        weights_of: dict[Any, frozenset[str]] = {
            v: frozenset([str(r.path)]) for v, r in self.invar_role.items() if r.kind == "param"
        }
        #: weights each equation uses (read directly or through weight-only values)
        self.uses: list[frozenset[str]] = []
        #: cell path -> the equations using only that cell's weights (set by fold_cells)
        self.own: dict[str, list[int]] = {}
        for i, eqn in enumerate(self.eqns):
            ins_ = [a for a in eqn.invars if is_var(a)]
            for atom in ins_:
                self.consumers.setdefault(atom, []).append(i)
            used = frozenset().union(*(weights_of.get(a, frozenset()) for a in ins_))
            self.uses.append(used)
            weight_only = bool(ins_) and all(a in weights_of for a in ins_)
            for var in eqn.outvars:
                self.producer[var] = i
                if weight_only:
                    weights_of[var] = used

    def var_inputs(self, i: int) -> list[Any]:
        return [a for a in self.eqns[i].invars if is_var(a)]


def _cell_equations(flow: _Flow, cell: CellInfo, weight_owner: dict[str, str | None]) -> set[int]:
    """The top-level equation indices of one cell (see the module docstring).

    Each walk follows producers and consumers from the cell's own values, so a cell costs the
    size of its neighbourhood, not of the whole step (a deep stack has one cell per layer)."""

    def blocks(i: int) -> bool:
        return any(weight_owner.get(w) != cell.path for w in flow.uses[i])

    own = set(flow.own.get(cell.path, ()))
    sources = {  # the invars of the cell's hidden states and weights
        v
        for kind, paths in (("hidden", cell.hidden_paths), ("param", cell.weights))
        for path in paths
        for v in flow.invars_of.get((kind, path), ())
    }
    forward: set[int] = set()
    queue = list(sources)
    while queue:  # forward from the cell's hidden states and weights
        for i in flow.consumers.get(queue.pop(), ()):
            if i not in forward and not blocks(i):
                forward.add(i)
                queue.extend(flow.eqns[i].outvars)
    backward: set[int] = set()
    stack = [v for p in cell.hidden_paths for v in flow.outvar_paths.get(p, ())]
    while stack:  # backward from its new hidden values
        i = flow.producer.get(stack.pop())
        if i is not None and i not in backward and not blocks(i):
            backward.add(i)
            stack.extend(flow.var_inputs(i))
    members = own | (forward & backward)
    values = set(sources) | {v for i in members for v in flow.eqns[i].outvars}
    # what reads only the cell's values (a neuron's spike), in equation order: a reader joins
    # once all its inputs are the cell's, and its outputs may let a later reader join
    heap = sorted({j for v in values for j in flow.consumers.get(v, ())} - members)
    heapq.heapify(heap)
    seen = set(heap)
    while heap:
        i = heapq.heappop(heap)
        inputs = flow.var_inputs(i)
        if inputs and not blocks(i) and all(a in values for a in inputs):
            members.add(i)
            values.update(flow.eqns[i].outvars)
            for v in flow.eqns[i].outvars:
                for j in flow.consumers.get(v, ()):
                    if j not in seen and j not in members:
                        seen.add(j)
                        heapq.heappush(heap, j)
    # constants only the cell reads
    for i in {flow.producer.get(a) for m in list(members) for a in flow.var_inputs(m)}:
        if i is None or i in members or flow.var_inputs(i):
            continue
        readers = [j for v in flow.eqns[i].outvars for j in flow.consumers.get(v, ())]
        if readers and all(j in members for j in readers):
            members.add(i)
    return members


def fold_cells(
    builder: JaxprGraphBuilder,
    model: Any,
    closed_jaxpr: Any,
    ins: list[Role | None],
    outs: list[Role | None],
) -> list[CellInfo]:
    """Add one collapsed ``cell`` cluster per cell and move its nodes into it."""
    hidden_paths = [str(r.path) for r in ins if r is not None and r.kind == "hidden"]
    weight_paths = list(
        dict.fromkeys(str(r.path) for r in ins if r is not None and r.kind == "param")
    )
    cells = find_cell_modules(model, list(dict.fromkeys(hidden_paths)), weight_paths)
    if not cells:
        return []
    jaxpr, _ = split_closed_jaxpr(closed_jaxpr)
    flow = _Flow(jaxpr, list(ins), list(outs))
    weight_owner: dict[str, str | None] = {w: None for w in weight_paths}
    weight_owner.update({w: c.path for c in cells for w in c.weights})
    for i, used in enumerate(flow.uses):  # the equations using only one cell's weights
        owners = {weight_owner.get(w) for w in used}
        if len(owners) == 1 and None not in owners:
            flow.own.setdefault(owners.pop(), []).append(i)
    owner_of: dict[int, CellInfo] = {}
    for cell in sorted(cells, key=lambda c: -c.path.count(".")):  # deeper cells first
        for i in sorted(_cell_equations(flow, cell, weight_owner)):
            owner_of.setdefault(i, cell)
    by_path = {c.path: c for c in cells}
    for cell in cells:
        parent = _owner(cell.path, by_path)
        builder.clusters[cell_cluster_id(cell.path)] = Cluster(
            cell_cluster_id(cell.path),
            "cell",
            f"{cell.path} ({cell.class_name})",
            cell_cluster_id(parent) if parent else None,
            True,
            None,
            module_path=cell.path,
            class_name=cell.class_name,
            ports=cell.weights,
            hidden_paths=cell.hidden_paths,
        )
    for i, cell in owner_of.items():
        _move_into(builder, f"e{i}", cell_cluster_id(cell.path))
    _move_groups(builder, cells)
    return cells


def cell_cluster_id(path: str) -> str:
    return f"cell:{path}"


def _move_into(builder: JaxprGraphBuilder, node_id: str, cluster_id: str) -> None:
    node = builder.nodes.get(node_id)
    if node is None:
        return
    own = node.get("subcluster")
    if own is not None and node.get("cluster") == own:  # owner of a sub-jaxpr: move its box
        box = builder.clusters[own]
        if box.parent is None:
            builder.clusters[own] = dataclasses.replace(box, parent=cluster_id)
    elif node.get("cluster") is None:
        builder.update_node(node_id, cluster=cluster_id)


def _move_groups(builder: JaxprGraphBuilder, cells: list[CellInfo]) -> None:
    """A hidden group whose states all belong to one cell goes inside that cell's box."""
    cell_of = {h: c.path for c in cells for h in c.hidden_paths}
    members: dict[str, set[str | None]] = {}
    for node in builder.nodes.values():
        cluster = node.get("cluster")
        if cluster is None and node.get("hidden_path") in cell_of:
            node["cluster"] = cell_cluster_id(cell_of[node["hidden_path"]])
        elif node.get("hidden_path") and cluster in builder.clusters:
            if builder.clusters[cluster].kind == "group":
                members.setdefault(cluster, set()).add(cell_of.get(node["hidden_path"]))
    for cluster_id, owners in members.items():
        (owner,) = owners if len(owners) == 1 else (None,)
        if owner is not None:
            box = builder.clusters[cluster_id]
            builder.clusters[cluster_id] = dataclasses.replace(box, parent=cell_cluster_id(owner))
