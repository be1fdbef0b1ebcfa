"""Which parameters an online learner learns, and how: ``alg.learning_status``.

Every ``ParamState`` of the model is in one of three situations (several may hold at once for
a parameter used twice):

``online``
    It feeds an ETP relation: its gradient is ``dL/dh . epsilon`` through the listed groups.
``readout``
    Some path from it to a model output crosses no new hidden value: that part of its gradient
    is exact, from the same step.
``not learned``
    Neither: it gets exactly zero, and ``reason`` quotes the compiler's diagnostic (e.g. a
    GRU's ``Wr``, which reaches ``h`` only through ``Wh``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from etp_viz import _compat


@dataclasses.dataclass(frozen=True)
class ParamLearning:
    """How one ``ParamState`` is learned."""

    path: tuple
    online_groups: tuple  # hidden-group indices its relations feed
    relations: tuple  # relation indices (executor order)
    readout: bool
    reason: str = ""

    @property
    def kind(self) -> str:
        """``'online'``, ``'readout'``, ``'online+readout'`` or ``'not learned'``."""
        kinds = [k for k, on in (("online", bool(self.relations)), ("readout", self.readout)) if on]
        return "+".join(kinds) if kinds else "not learned"

    @property
    def learned(self) -> bool:
        return bool(self.relations) or self.readout


class LearningStatus(dict):
    """``{path: ParamLearning}`` with a readable ``str`` (one line per parameter)."""

    def __str__(self) -> str:
        lines = []
        for path, entry in self.items():
            name = ".".join(map(str, path))
            detail = f" groups={list(entry.online_groups)}" if entry.relations else ""
            reason = f" -- {entry.reason}" if entry.reason else ""
            lines.append(f"{name}: {entry.kind}{detail}{reason}")
        return "\n".join(lines)

    def learned_leaf_mask(self, layout: Any) -> list:
        """Per parameter leaf (``layout.param_positions`` order): is its parameter learned?"""
        minfo = layout.plan.module_info
        state_invars = layout.plan.state_invars
        return [
            self[minfo.invar_to_weight_path[state_invars[pos]]].learned
            for pos in layout.param_positions
        ]


def readout_paths(minfo: Any, hidden_outvars: list) -> set:
    """Parameter paths with a path to a model output that crosses no new hidden value."""
    stop = set(hidden_outvars)
    reach: dict = {}
    for var in minfo.weight_invars:
        reach[var] = {minfo.invar_to_weight_path[var]}
    for eqn in minfo.jaxpr.eqns:
        found: set = set()
        for var in eqn.invars:
            if _compat.is_var(var) and var in reach and var not in stop:
                found |= reach[var]
        if found:
            for var in eqn.outvars:
                if _compat.is_var(var) and var not in stop:
                    reach[var] = found
    paths: set = set()
    for var in minfo.jaxpr.outvars[: minfo.num_out_leaves]:
        if _compat.is_var(var) and var not in stop:
            paths |= reach.get(var, set())
    return paths


def learning_status(plan: Any, graph: Any) -> LearningStatus:
    """Build ``alg.learning_status`` from the execution plan and the graph's diagnostics."""
    minfo = plan.module_info
    readouts = readout_paths(minfo, plan.hidden_outvars)
    status = LearningStatus()
    graph_relations = graph.hidden_param_op_relations
    for path in minfo.weight_path_to_invars:
        rels = [
            r
            for r in plan.relations
            if path in r.weight_paths.values()
            or path in _computed_from(graph_relations[r.graph_index])
        ]
        groups = tuple(dict.fromkeys(g for r in rels for g in r.group_indices))
        entry = ParamLearning(
            path=tuple(path),
            online_groups=groups,
            relations=tuple(r.index for r in rels),
            readout=path in readouts,
        )
        if not entry.learned:
            entry = dataclasses.replace(entry, reason=_reason(graph, path))
        status[tuple(path)] = entry
    return status


def _computed_from(relation: Any) -> set:
    """Every ParamState path a relation's trainable inputs are computed from (weight
    normalisation: ``v`` and ``g``); each gets its gradient through that computation."""
    leaves = getattr(relation, "trainable_all_leaves", {}) or {}
    return {tuple(path) for found in leaves.values() for path, _ in found}


def _reason(graph: Any, path: tuple) -> str:
    records = [r for r in getattr(graph, "diagnostics", ()) or () if r.weight_path == path]
    if records:
        return "; ".join(r.message for r in records)
    return (
        "no ETP primitive reads it on the way to a hidden state, and it does not reach an "
        "output directly (wrap the product in etp_viz.matmul / element_wise to learn it online)"
    )
