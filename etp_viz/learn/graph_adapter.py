"""From the compiler's ``ETraceGraph`` to the executor's :class:`~.executor.ExecutionPlan`.

The plan keeps only what the learn layer evaluates each step: the flat jaxpr (``module_info``),
the hidden groups (``HiddenGroup`` objects, used as is) and, per relation, the equation, its
``x`` / ``y`` vars, its trainable operands and the primitive's rules bound to the equation's
static params.
"""

from __future__ import annotations

from typing import Any

from etp_viz import ops as _ops

from .executor import ExecutionPlan, RelationPlan
from .trace_math import PrimitiveRules


def compile_model(model: Any, *args: Any, recurrence: str = "diagonal") -> Any:
    """``etp_viz.compiler.compile_etrace_graph(model, *args, recurrence=...)``."""
    from etp_viz.compiler.graph import compile_etrace_graph

    return compile_etrace_graph(model, *args, recurrence=recurrence)


def bind_rules(primitive: Any, params: dict) -> PrimitiveRules:
    """The primitive's four per-step rules (two are etp_viz extensions, see ``etp_viz.ops``)."""
    return PrimitiveRules(
        yw_to_w=_ops.ETP_RULES_YW_TO_W[primitive],
        xy_to_dw=_ops.ETP_RULES_XY_TO_DW[primitive],
        xy_to_etrace=_ops.get_xy_to_etrace(primitive),
        etrace_to_dw=_ops.get_etrace_to_dw(primitive),
        params=dict(params),
    )


def build_plan(graph: Any) -> ExecutionPlan:
    """Resolve the executor's plan from a compiled graph (once per compilation)."""
    minfo = graph.module_info
    groups = tuple(graph.hidden_groups)
    group_position = {id(g): i for i, g in enumerate(groups)}
    relations = []
    for rel in graph.hidden_param_op_relations:
        if not rel.trainable_vars:
            continue
        eqn_index = rel.eqn_index if rel.eqn_index >= 0 else minfo.def_use.producer[rel.y_var]
        eqn = minfo.jaxpr.eqns[eqn_index]
        relations.append(
            RelationPlan(
                index=len(relations),
                eqn_index=eqn_index,
                primitive=rel.primitive,
                x_var=rel.x_var,
                y_var=rel.y_var,
                operand_vars=dict(rel.trainable_vars),
                weight_paths=dict(rel.trainable_paths),
                group_indices=tuple(group_position[id(g)] for g in rel.hidden_groups),
                rules=bind_rules(rel.primitive, eqn.params),
            )
        )
    _check_shapes(relations, groups)
    return ExecutionPlan(
        module_info=minfo,
        groups=groups,
        relations=tuple(relations),
        trainable_eqns=frozenset(_trainable_eqns(minfo)),
    )


def _trainable_eqns(minfo: Any) -> list:
    """ETP equations the ``y -> h`` tails hold constant (all but gradient-enabled ones)."""
    return [
        i
        for i, eqn in enumerate(minfo.jaxpr.eqns)
        if _ops.is_etp_primitive(eqn.primitive)
        and not _ops.is_etp_enable_gradient_primitive(eqn.primitive)
    ]


def _check_shapes(relations: list, groups: tuple) -> None:
    for rel in relations:
        y_shape = tuple(rel.y_var.aval.shape)
        for g in rel.group_indices:
            varshape = tuple(groups[g].varshape)
            if y_shape != varshape and rel.x_var is not None:
                raise NotImplementedError(
                    f"{rel.primitive.name} (equation {rel.eqn_index}) produces y of shape "
                    f"{y_shape} feeding hidden group {g} of shape {varshape}; the learn layer "
                    "needs y shaped like the hidden state for primitives with an input x. "
                    "Broadcast the input to the hidden state's shape before the ETP op."
                )
