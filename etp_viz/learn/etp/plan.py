"""The executor's plan: what the learn layer reads from a compiled ``ETraceGraph``, once.

The plan keeps the flat jaxpr's indexes (``module_info``), the hidden groups (``HiddenGroup``
objects, used as is) and, per relation with trainable operands, the equation, its ``x`` / ``y``
vars, its trainable operands, the primitive's rules bound to the equation's static params and
its position among the compiler's relations (``graph.executor_layout`` is per compiler
relation). Evaluation itself is the compiler's (``ETraceGraph.eval_executor``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from etp_viz import ops as _ops
from etp_viz.compiler.graph import ETraceGraph

from .trace_math import PrimitiveRules

__all__ = ["ExecutionPlan", "RelationPlan", "bind_rules", "build_plan"]


@dataclasses.dataclass(frozen=True)
class RelationPlan:
    """One ETP equation whose trainable operands are traced into hidden groups."""

    index: int
    #: position in ``graph.hidden_param_op_relations`` (relations without trainable operands
    #: are skipped here, so it may differ from ``index``)
    graph_index: int
    eqn_index: int
    primitive: Any
    x_var: Any
    y_var: Any
    operand_vars: dict  # trainable key -> the equation's invar
    weight_paths: dict  # trainable key -> ParamState path
    group_indices: tuple
    rules: PrimitiveRules
    #: non-trainable operands (a sparse pattern's indices) -> the equation's invar; their
    #: values travel with the trainable operands and reach the rules as keyword arguments
    aux_vars: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ExecutionPlan:
    """What the executor needs from an ``ETraceGraph``, resolved once per compilation."""

    module_info: Any
    groups: tuple
    relations: tuple
    #: per hidden outvar in ``hidden_outvars`` order, its position among
    #: ``graph.hidden_perturb.perturb_vars``
    perturb_positions: tuple
    #: indices of the groups with a member whose previous value reaches an output crossing no
    #: new hidden value (``graph.bypass_hidden``): their backward also reads the previous
    #: trace. Empty for most models, which then pay nothing for the bypass term.
    bypass_groups: tuple = ()

    @property
    def state_invars(self) -> list:
        """The state leaves' invars (``module_info.invars`` has no constant invars)."""
        return list(self.module_info.invars[self.module_info.num_arg_leaves :])

    @property
    def hidden_outvars(self) -> list:
        return [v for g in self.groups for v in g.hidden_outvars]

    @property
    def operand_vars(self) -> list:
        """Every relation's trainable operands then its non-trainable ones, relation by relation
        (key order)."""
        return [v for rel in self.relations for v in (*rel.operand_vars.values(),
                                                      *rel.aux_vars.values())]  # fmt: skip

    def split_operands(self, values: list) -> dict:
        """``{relation: {key: value}}`` from values in :attr:`operand_vars` order."""
        it = iter(values)
        return {
            rel.index: {key: next(it) for key in (*rel.operand_vars, *rel.aux_vars)}
            for rel in self.relations
        }


def bind_rules(primitive: Any, params: dict) -> PrimitiveRules:
    """The primitive's four per-step rules (two are etp_viz extensions, see ``etp_viz.ops``)."""
    return PrimitiveRules(
        yw_to_w=_ops.ETP_RULES_YW_TO_W[primitive],
        xy_to_dw=_ops.ETP_RULES_XY_TO_DW[primitive],
        xy_to_etrace=_ops.get_xy_to_etrace(primitive),
        etrace_to_dw=_ops.get_etrace_to_dw(primitive),
        params=dict(params),
        aux_keys=tuple(_ops.get_aux_invars(primitive, params)),
    )


def build_plan(graph: ETraceGraph) -> ExecutionPlan:
    """Resolve the executor's plan from a compiled graph (once per compilation)."""
    minfo = graph.module_info
    groups = tuple(graph.hidden_groups)
    group_position = {id(g): i for i, g in enumerate(groups)}
    relations: list[RelationPlan] = []
    for graph_index, rel in enumerate(graph.hidden_param_op_relations):
        if not rel.trainable_vars:
            continue
        eqn_index = rel.eqn_index if rel.eqn_index >= 0 else minfo.def_use.producer[rel.y_var]
        eqn = minfo.jaxpr.eqns[eqn_index]
        relations.append(
            RelationPlan(
                index=len(relations),
                graph_index=graph_index,
                eqn_index=eqn_index,
                primitive=rel.primitive,
                x_var=rel.x_var,
                y_var=rel.y_var,
                operand_vars=dict(rel.trainable_vars),
                weight_paths=dict(rel.trainable_paths),
                group_indices=tuple(group_position[id(g)] for g in rel.hidden_groups),
                rules=bind_rules(rel.primitive, eqn.params),
                aux_vars={
                    key: eqn.invars[i]
                    for key, i in _ops.get_aux_invars(rel.primitive, eqn.params).items()
                },
            )
        )
    _check_shapes(relations, groups)
    perturb_paths = list(graph.hidden_perturb.perturb_hidden_paths)
    return ExecutionPlan(
        module_info=minfo,
        groups=groups,
        relations=tuple(relations),
        perturb_positions=tuple(perturb_paths.index(p) for g in groups for p in g.hidden_paths),
        bypass_groups=_bypass_groups(groups, graph.bypass_hidden),
    )


def _bypass_groups(groups: tuple, bypass_hidden: tuple) -> tuple:
    bypass = set(bypass_hidden)
    return tuple(g.index for g in groups if any(p in bypass for p in g.hidden_paths))


def _check_shapes(relations: list, groups: tuple) -> None:
    for rel in relations:
        y_shape = tuple(rel.y_var.aval.shape)
        for g in rel.group_indices:
            varshape = tuple(groups[g].varshape)
            if y_shape != varshape and rel.x_var is not None and y_shape == varshape[1:]:
                raise ValueError(
                    f"x: the input has no batch axis: {rel.primitive.name} (equation "
                    f"{rel.eqn_index}) produces y of shape {y_shape} but hidden group {g} was "
                    f"initialised with a batch axis, shape {varshape}. Pass one step's input "
                    f"with the batch axis first (shape ({varshape[0]}, ...); verify: xs of "
                    f"shape (T, {varshape[0]}, ...)), or initialise the model unbatched: "
                    "brainstate.nn.init_all_states(model) without batch_size."
                )
            if y_shape != varshape and rel.x_var is not None:
                raise NotImplementedError(
                    f"{rel.primitive.name} (equation {rel.eqn_index}) produces y of shape "
                    f"{y_shape} feeding hidden group {g} of shape {varshape}; the learn layer "
                    "needs y shaped like the hidden state for primitives with an input x. "
                    "Broadcast the input to the hidden state's shape before the ETP op."
                )
