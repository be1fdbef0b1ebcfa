"""Turn any (closed) jaxpr into view-model nodes, edges and collapsible clusters.

Ids are structural: ``e<i>`` for equation ``i`` of the top-level jaxpr, ``e7/3`` for equation 3
of the only sub-jaxpr of ``e7`` (``e7.1/3`` when ``e7`` holds several, e.g. ``cond`` branches),
``v<n>`` for the n-th variable defined at top level (``e7/v<n>`` inside), and ``<var>><node>``
for an edge. Display names for variables come from one counter, top level first, so they do
not depend on jax's printer. Parameters, literals, constants and high-fan-out variables become
badges on their consumers instead of edges.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from etp_viz._compat import Jaxpr, eqn_user_frame, is_literal, is_var, split_closed_jaxpr
from etp_viz.ops import is_etp_primitive

from .types import Badge, Cluster, Edge, Node


@dataclass(frozen=True)
class Role:
    """What a top-level invar/outvar stands for: input/output, hidden, state, param or const."""

    kind: str
    path: str | None = None
    group: int | None = None


@dataclass(frozen=True)
class _Source:
    """Where a variable's value comes from, inside one scope: a node, or a badge."""

    node: str | None
    var_id: str
    name: str
    aval: str
    badge: Badge | None = None


_ROLE_NODE_KINDS = {  # role kind -> (invar node kind, outvar node kind)
    "input": ("input", "output"),
    "hidden": ("hidden_in", "hidden_out"),
    "state": ("state_in", "state_out"),
    "param": ("param", "state_out"),
}


def role_node_id(role: Role, position: int, *, out: bool) -> str:
    """``in:0``/``out:0``, ``h:<path>:in``/``h:<path>:out``, ``s:<path>:in``/…, ``p:<path>``."""
    if role.kind == "input":
        return f"{'out' if out else 'in'}:{position}"
    if role.kind == "param" and not out:
        return f"p:{role.path}"
    letter = {"hidden": "h", "state": "s", "param": "s"}[role.kind]
    return f"{letter}:{role.path}:{'out' if out else 'in'}"


def aval_text(aval: Any) -> str:
    """``f32[3,4]``-style text for an abstract value, identical across jax versions."""
    shape = getattr(aval, "shape", None)
    dtype = getattr(aval, "dtype", None)
    if shape is None or dtype is None:
        return str(aval)
    name = np.dtype(dtype).name
    for long, short in (("bfloat", "bf"), ("float", "f"), ("uint", "u"), ("int", "i")):
        name = name.replace(long, short)
    name = name.replace("complex", "c")
    return f"{name}[{','.join(str(d) for d in shape)}]"


def var_display_name(n: int) -> str:
    """a, b, …, z, ba, bb, … (jax's own scheme, but from our counter)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    text = letters[n % 26]
    n //= 26
    while n:
        text = letters[n % 26] + text
        n //= 26
    return text


def literal_text(literal: Any, *, full: bool = False) -> str:
    """A literal as a node badge shows it: floats with at most 4 significant digits
    (``full=True``: every digit, for the tooltip).

    >>> import numpy as np
    >>> literal_text(np.float32(20.504165649414062)), literal_text(np.float32(1.0))
    ('20.5', '1.0')
    >>> literal_text(np.float32(20.504165649414062), full=True)
    '20.504165649414062'
    """
    value = np.asarray(literal.val if is_literal(literal) else literal)
    if value.ndim:
        return f"{aval_text(literal.aval)} literal"
    item = value.item()
    if not isinstance(item, float) or full:
        return repr(item)
    text = f"{item:.4g}"
    return text + ".0" if text.lstrip("-").isdigit() else text  # 1.0 stays a float


def literal_badge(literal: Any, title: str) -> Badge:
    """The badge of a literal: short text, full precision in the tooltip."""
    return Badge(literal_text(literal), f"{title} = {literal_text(literal, full=True)}", "literal")


def param_text(value: Any, limit: int = 120) -> str:
    """One line of ``str(value)`` for an equation parameter: no addresses, callables by name."""
    if callable(value) and not isinstance(value, type):
        text = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
        text = text or type(value).__name__
    else:
        text = str(value)
    if " at 0x" in text:
        text = type(value).__name__
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def subjaxprs_of(eqn: Any) -> list[tuple[str, Any]]:
    """``[(label, jaxpr_like)]`` of the sub-jaxprs in an equation's params, in key order."""
    found: list[tuple[str, Any]] = []
    for key in sorted(eqn.params):
        value = eqn.params[key]
        items = value if isinstance(value, tuple | list) else (value,)
        for i, item in enumerate(items):
            inner, _ = split_closed_jaxpr(item)
            if isinstance(inner, Jaxpr):
                found.append((f"{key}[{i}]" if len(items) > 1 else key, item))
    return found


def _inner_invar_map(eqn: Any, label: str, n_inner: int) -> list[int | None]:
    """Outer invar position feeding each inner invar (None when unknown)."""
    n_outer = len(eqn.invars)
    if eqn.primitive.name == "while":
        cond_n, body_n = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
        carry = list(range(cond_n + body_n, n_outer))
        if label.startswith("cond"):
            positions = list(range(cond_n)) + carry
        else:
            positions = list(range(cond_n, cond_n + body_n)) + carry
        return positions if len(positions) == n_inner else [None] * n_inner
    if n_inner <= n_outer:  # identity (call-like, scan) or aligned at the end (cond's index)
        return list(range(n_outer - n_inner, n_outer))
    return [None] * n_inner


class JaxprGraphBuilder:
    """Builds nodes, edges and clusters for one jaxpr tree (see the module docstring)."""

    def __init__(
        self,
        *,
        max_fanout: int,
        is_etp: Callable[[Any], bool],
        param_nodes: bool = False,
    ) -> None:
        self.max_fanout = max_fanout
        self.is_etp = is_etp
        self.param_nodes = param_nodes
        self.nodes: dict[str, dict[str, Any]] = {}
        self.edges: dict[str, Edge] = {}
        self.clusters: dict[str, Cluster] = {}
        self.var_ids: dict[Any, str] = {}  # top-level Var -> "v<n>"
        self.producer: dict[Any, str] = {}  # top-level Var -> node id
        self.eqn_node_ids: list[str] = []
        self._names = 0
        self._pending: list[tuple[Any, ...]] = []
        self._consumers: dict[tuple[str, str], list[str]] = {}  # (node, var name) -> targets

    # --- public -------------------------------------------------------------------------
    def build(
        self,
        closed_jaxpr: Any,
        invar_roles: Sequence[Role | None] = (),
        outvar_roles: Sequence[Role | None] = (),
    ) -> None:
        jaxpr, _ = split_closed_jaxpr(closed_jaxpr)
        env: dict[Any, _Source] = {}
        counter = iter(range(1 << 62))
        for var in jaxpr.constvars:
            env[var] = self._badge_source(var, "const", "const", f"constant {aval_text(var.aval)}")
        roles = list(invar_roles) + [None] * (len(jaxpr.invars) - len(invar_roles))
        for k, (var, role) in enumerate(zip(jaxpr.invars, roles)):
            var_id = f"v{next(counter)}"
            env[var] = self._add_invar(var, role or Role("input", str(k)), k, var_id)
            self.var_ids[var] = var_id
            if env[var].node is not None:
                self.producer[var] = env[var].node
        self._add_level(jaxpr, env, "", None, counter, top=True)
        self._add_outvars(jaxpr, env, outvar_roles)
        while self._pending:  # nested levels after the whole top level: names stay stable
            self._add_subjaxprs(*self._pending.pop(0))

    def frozen(self) -> tuple[tuple[Node, ...], tuple[Edge, ...], tuple[Cluster, ...]]:
        nodes = []
        for spec in self.nodes.values():
            spec = dict(spec)
            spec["badges"] = tuple(dict.fromkeys(spec.get("badges", ())))
            nodes.append(Node(**spec))
        return tuple(nodes), tuple(self.edges.values()), tuple(self.clusters.values())

    def add_node(self, node_id: str, **fields: Any) -> str:
        self.nodes[node_id] = {"id": node_id, **fields}
        return node_id

    def add_edge(self, edge_id: str, source: str, target: str, var: str, aval: str, **kw) -> str:
        if edge_id not in self.edges:
            self.edges[edge_id] = Edge(edge_id, source, target, var, aval, **kw)
        return edge_id

    def update_node(self, node_id: str, **fields: Any) -> None:
        self.nodes[node_id].update(fields)

    # --- helpers ------------------------------------------------------------------------
    def _new_name(self) -> str:
        name = var_display_name(self._names)
        self._names += 1
        return name

    def _badge_source(self, var: Any, kind: str, text: str, title: str) -> _Source:
        aval = aval_text(var.aval)
        return _Source(None, "", self._new_name(), aval, Badge(text, title, kind))

    def _add_invar(self, var: Any, role: Role, k: int, var_id: str) -> _Source:
        aval = aval_text(var.aval)
        if role.kind == "const":
            return self._badge_source(var, "const", "const", role.path or "constant")
        node_id = role_node_id(role, k, out=False)
        kind = _ROLE_NODE_KINDS[role.kind][0]
        if node_id in self.nodes:  # another leaf of the same state: one node per state
            node = self.nodes[node_id]
            node["out_avals"] = (*node["out_avals"], aval)
            source = _Source(node_id, var_id, self._new_name(), aval)
            badge = node.get("badges", [None])[0] if node.get("badges") else None
            return dataclasses.replace(source, badge=badge) if badge else source
        fields: dict[str, Any] = {"kind": kind, "out_avals": (aval,), "group": role.group}
        if role.kind == "hidden":
            fields.update(label=str(role.path), hidden_path=role.path)
        elif role.kind == "state":
            fields.update(label=str(role.path), state_path=role.path)
        elif role.kind == "param":
            fields.update(label=str(role.path), weight_path=role.path)
        else:
            fields.update(label=f"input {k}")
        self.add_node(node_id, **fields)
        source = _Source(node_id, var_id, self._new_name(), aval)
        if role.kind == "param" and not self.param_nodes:
            short = ".".join(str(role.path).split(".")[-2:])
            badge = Badge(short, f"{role.path} {aval}", "param")
            self._badge(node_id, badge)
            return dataclasses.replace(source, badge=badge)
        return source

    def _uses(self, jaxpr: Any) -> dict[Any, int]:
        uses: dict[Any, int] = {}
        for eqn in jaxpr.eqns:
            for atom in dict.fromkeys(a for a in eqn.invars if is_var(a)):
                uses[atom] = uses.get(atom, 0) + 1
        for atom in jaxpr.outvars:
            if is_var(atom):
                uses[atom] = uses.get(atom, 0) + 1
        return uses

    def _add_level(self, jaxpr, env, prefix, cluster, counter, top=False) -> None:
        uses = self._uses(jaxpr)
        for i, eqn in enumerate(jaxpr.eqns):
            node_id = f"{prefix}e{i}" if top else f"{prefix}{i}"
            top_index = i if top else self.nodes[prefix.split("/")[0].split(".")[0]]["eqn_index"]
            own = f"c:{node_id}" if subjaxprs_of(eqn) else cluster  # owner sits in its cluster
            self._add_eqn_node(eqn, node_id, top_index, own)
            if top:
                self.eqn_node_ids.append(node_id)
            for atom in eqn.invars:
                self._connect(atom, env, node_id)
            for var in eqn.outvars:
                if not is_var(var):
                    continue
                var_id = f"{prefix}v{next(counter)}"
                source = _Source(node_id, var_id, self._new_name(), aval_text(var.aval))
                if uses.get(var, 0) > self.max_fanout:
                    title = f"{source.name} {source.aval} from {node_id}, used {uses[var]}x"
                    self._badge(node_id, Badge(f"{source.name} x{uses[var]}", title, "fanout"))
                    source = dataclasses.replace(source, badge=Badge(source.name, title, "fanout"))
                env[var] = source
                if top:
                    self.var_ids[var], self.producer[var] = var_id, node_id
            subs = subjaxprs_of(eqn)
            if subs:
                self._pending.append((eqn, node_id, subs, env, cluster))

    def _add_eqn_node(self, eqn: Any, node_id: str, index: int | None, cluster: str | None):
        frame = eqn_user_frame(eqn)
        name = eqn.params.get("name")
        prim = eqn.primitive.name
        subs = {label for label, _ in subjaxprs_of(eqn)}
        params = tuple((k, param_text(v)) for k, v in sorted(eqn.params.items()) if k not in subs)
        self.add_node(
            node_id,
            kind="eqn",
            label=f"{prim} ({name})" if isinstance(name, str) and name else prim,
            primitive=prim,
            eqn_index=index,
            cluster=cluster,
            etp=bool(self.is_etp(eqn.primitive)),
            params=params,
            in_avals=tuple(aval_text(a.aval) for a in eqn.invars),
            out_avals=tuple(aval_text(v.aval) for v in eqn.outvars),
            source=None if frame is None else f"{_basename(frame[0])}:{frame[1]} ({frame[2]})",
            badges=[],
        )

    def _badge(self, node_id: str, badge: Badge) -> None:
        self.nodes[node_id].setdefault("badges", []).append(badge)

    def _connect(self, atom: Any, env: dict[Any, _Source], target: str) -> None:
        if is_literal(atom):
            self._badge(target, literal_badge(atom, f"literal {aval_text(atom.aval)}"))
            return
        source = env.get(atom) if is_var(atom) else None
        if source is None:
            return
        if source.badge is not None:
            self._badge(target, source.badge)
        elif source.node is not None and source.node != target:
            self.add_edge(
                f"{source.var_id}>{target}", source.node, target, source.name, source.aval
            )
            self._consumers.setdefault((source.node, source.name), []).append(target)

    def _add_outvars(self, jaxpr, env, outvar_roles) -> None:
        roles = list(outvar_roles) + [None] * (len(jaxpr.outvars) - len(outvar_roles))
        for k, (atom, role) in enumerate(zip(jaxpr.outvars, roles)):
            role = role or Role("input", str(k))
            if role.kind == "skip":  # e.g. a parameter passed through unchanged
                continue
            node_id = role_node_id(role, k, out=True)
            kind = _ROLE_NODE_KINDS[role.kind][1]
            fields: dict[str, Any] = {"kind": kind, "in_avals": (aval_text(atom.aval),)}
            fields["group"] = role.group
            if role.kind == "hidden":
                fields.update(label=f"{role.path}'", hidden_path=role.path)
            elif role.kind in ("state", "param"):
                fields.update(label=f"{role.path}'", state_path=role.path)
            else:
                fields.update(label=f"output {k}")
            self.add_node(node_id, **fields)
            self._connect(atom, env, node_id)

    def _add_subjaxprs(self, eqn, node_id, subs, outer_env, parent_cluster) -> None:
        owner = f"c:{node_id}"
        label = self.nodes[node_id]["label"]
        self.clusters[owner] = Cluster(owner, "subjaxpr", label, parent_cluster, True, node_id)
        self.update_node(node_id, subcluster=owner)
        outer_consumers = {
            var: self._consumers.get((node_id, outer_env[var].name), [])
            for var in eqn.outvars
            if var in outer_env
        }
        for k, (sub_label, jaxpr_like) in enumerate(subs):
            inner, _ = split_closed_jaxpr(jaxpr_like)
            scope, cluster = f"{node_id}/", owner
            if len(subs) > 1:
                scope, cluster = f"{node_id}.{k}/", f"c:{node_id}.{k}"
                self.clusters[cluster] = Cluster(cluster, "branch", sub_label, owner, False, None)
            env: dict[Any, _Source] = {}
            for var in inner.constvars:
                env[var] = self._badge_source(
                    var, "const", "const", f"constant {aval_text(var.aval)}"
                )
            for var, pos in zip(inner.invars, _inner_invar_map(eqn, sub_label, len(inner.invars))):
                atom = None if pos is None else eqn.invars[pos]
                if atom is not None and is_literal(atom):
                    badge = literal_badge(atom, "literal")
                    env[var] = _Source(None, "", badge.text, aval_text(atom.aval), badge)
                elif atom is not None and atom in outer_env:
                    outer = outer_env[atom]  # enters through the owner equation
                    env[var] = (
                        outer
                        if outer.badge
                        else dataclasses.replace(outer, node=node_id, aval=aval_text(var.aval))
                    )
            counter = iter(range(1 << 62))
            self._add_level(inner, env, scope, cluster, counter)
            if _maps_outputs(eqn, sub_label, len(inner.outvars)):
                for inner_atom, outer_var in zip(inner.outvars, eqn.outvars):
                    source = env.get(inner_atom) if is_var(inner_atom) else None
                    if source is None or source.node is None or not source.node.startswith(scope):
                        continue
                    outer_id = outer_env[outer_var].var_id if outer_var in outer_env else None
                    for target in outer_consumers.get(outer_var, ()):
                        self.edges.pop(f"{outer_id}>{target}", None)  # leaves from inside now
                        self.add_edge(
                            f"{source.var_id}>{target}",
                            source.node,
                            target,
                            source.name,
                            source.aval,
                        )
            for var in inner.outvars:  # drop so sibling branches don't see each other
                env.pop(var, None)


def _maps_outputs(eqn: Any, label: str, n_inner: int) -> bool:
    """Whether the sub-jaxpr's outputs are the equation's outputs, one to one."""
    if eqn.primitive.name == "while" and label.startswith("cond"):
        return False
    return n_inner == len(eqn.outvars)


def _basename(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def path_text(path: Any) -> str:
    """``('rnn1', 'W', 'weight')`` -> ``'rnn1.W.weight'`` (strings pass through)."""
    if isinstance(path, str):
        return path
    return ".".join(str(p) for p in path)


def default_is_etp(primitive: Any) -> bool:
    """Is ``primitive`` registered as an ETP primitive (the ops registry decides)?"""
    return bool(is_etp_primitive(primitive))
