"""ETP equations inside ``scan`` / ``while`` bodies that were not unrolled, or inside a ``cond``
that could not be if-converted: reported, not learned online. Loops that were unrolled
(:mod:`.loops`) are reported too (INFO ``LOOP_UNROLLED``, one record per loop).

A ``cond`` outside any loop body is if-converted when the jaxpr is flattened
(:func:`._jaxpr.inline_calls`: every branch computed, results picked by ``select_n``), so its
ETP equations are top-level equations with relations like any other; what reaches this pass
is a ``cond`` inside a loop body, or one whose branches have effects or a ``while`` loop
(:func:`._jaxpr.cond_conversion_blocker`).
"""

from __future__ import annotations

from typing import Any

from etp_viz import _compat

from ._jaxpr import (
    CONTROL_FLOW_PRIMITIVE_NAMES,
    VISITS,
    cond_conversion_blocker,
    sub_jaxprs,
    trace_to_param,
)
from .diagnostics import DiagnosticCollector, DiagnosticKind, DiagnosticLevel
from .loops import MAX_UNROLL_ITERATIONS, LoopIteration, loop_not_unrolled_reason

__all__ = ["report_control_flow_primitives", "report_unrolled_loops"]


def report_control_flow_primitives(minfo: Any, diagnostics: DiagnosticCollector) -> list:
    """Emit ``PRIMITIVE_INSIDE_CONTROL_FLOW`` for every ETP equation inside a control-flow
    body of the top-level jaxpr; return the weight paths concerned."""
    from etp_viz.ops import get_trainable_invars, is_etp_primitive

    report_unrolled_loops(minfo, diagnostics)
    paths: list = []
    cache: dict = {}
    for index, eqn in enumerate(minfo.jaxpr.eqns):
        VISITS.count += 1
        if eqn.primitive.name not in CONTROL_FLOW_PRIMITIVE_NAMES:
            continue
        blocker = cond_conversion_blocker(eqn) if eqn.primitive.name == "cond" else None
        why = f" (the cond is not if-converted: {blocker})" if blocker else ""
        if eqn.primitive.name != "cond" and loop_not_unrolled_reason(eqn):
            why = f" (the loop is not unrolled: {loop_not_unrolled_reason(eqn)})"
        for body, to_outer in _bodies(eqn, lambda v: v):
            for inner in _walk(body):
                if not is_etp_primitive(inner.primitive):
                    continue
                weight_path = None
                for invar_index in get_trainable_invars(inner.primitive, inner.params).values():
                    outer = to_outer(_body_source(body, inner.invars[invar_index]))
                    found = trace_to_param(minfo, outer, cache) if outer is not None else None
                    if found is not None:
                        weight_path = found.path
                        break
                paths.append(weight_path)
                where = f" weight {'.'.join(map(str, weight_path))}" if weight_path else ""
                diagnostics.emit(
                    DiagnosticKind.PRIMITIVE_INSIDE_CONTROL_FLOW,
                    DiagnosticLevel.WARNING,
                    f"ETP primitive {inner.primitive.name}{where} is inside `{eqn.primitive.name}` "
                    f"(equation {index}){why}; its weight is not learned online (the carry "
                    "lineage across the loop is not exposed). Lift the op out of the loop body "
                    "(call the model once per step) or learn it with BPTT.",
                    primitive=inner.primitive,
                    weight_path=weight_path,
                    eqn_indices=(index,),
                    control_flow_primitive=eqn.primitive.name,
                )
    return paths


def _bodies(eqn: Any, to_outer):
    """``(body, map body-invar -> top-level var)`` for each sub-jaxpr, recursively."""
    for _, body in sub_jaxprs(eqn):
        offset = len(eqn.invars) - len(body.invars)
        mapping = {}
        if offset >= 0:
            mapping = {b: eqn.invars[offset + i] for i, b in enumerate(body.invars)}

        def outer(var: Any, mapping=mapping) -> Any:
            mapped = mapping.get(var)
            return to_outer(mapped) if mapped is not None and _compat.is_var(mapped) else None

        yield body, outer
        for inner in body.eqns:
            if sub_jaxprs(inner):
                yield from _bodies(inner, outer)


def _walk(body: Any):
    for eqn in body.eqns:
        VISITS.count += 1
        yield eqn


def _body_source(body: Any, var: Any) -> Any:
    """The body invar ``var`` comes from (following single-input producers), else ``var``."""
    producers = {o: e for e in body.eqns for o in e.outvars}
    seen = set()
    while var in producers and id(var) not in seen:
        seen.add(id(var))
        inputs = [v for v in producers[var].invars if _compat.is_var(v)]
        if not inputs:
            break
        var = inputs[0]
    return var


def report_unrolled_loops(minfo: Any, diagnostics: DiagnosticCollector) -> None:
    """One INFO ``LOOP_UNROLLED`` record per unrolled loop, with the equations it became."""
    from etp_viz.ops import is_etp_primitive

    loops: dict[int, tuple[LoopIteration, list[int]]] = {}
    for index, stack in minfo.nested_jit_eqns.items():
        for entry in stack:
            if isinstance(entry, LoopIteration):
                loops.setdefault(entry.loop_id, (entry, []))[1].append(index)
    for first, indices in loops.values():
        etp = [i for i in indices if is_etp_primitive(minfo.jaxpr.eqns[i].primitive)]
        where = f" at {first.source}" if first.source else ""
        diagnostics.emit(
            DiagnosticKind.LOOP_UNROLLED,
            DiagnosticLevel.INFO,
            f"`{first.name}`{where} ({first.trip_count} iterations) was unrolled into the step "
            f"(equations {min(indices)}..{max(indices)}, {len(etp)} of them ETP ops): compiled, "
            "learned and claimed as the step written out by hand without the loop (loops "
            f"touching a state or an ETP op are unrolled up to {MAX_UNROLL_ITERATIONS} "
            "iterations).",
            eqn_indices=indices,
            loop=first.name,
            trip_count=first.trip_count,
            source=first.source,
            etp_eqn_indices=tuple(etp),
        )
