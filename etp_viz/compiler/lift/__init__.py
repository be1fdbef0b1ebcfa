"""Lifting plain ops (``lift=True``): a model written with plain brainstate / JAX learns online.

``compile_etrace_graph(model, x, lift=True)`` (and ``lift=True`` on the ETP learners) rewrites,
in the flat step jaxpr and before any analysis, each plain op that applies a parameter to a
runtime value into the ETP primitive that computes the same thing (:mod:`.plans` says which
and why the others do not; :mod:`.rewrite` splices the replacements in). The relations,
claims and learners then treat the model exactly as its twin written with ``etp_viz.ops`` /
``etp_viz.nn``. Every lifted op is an INFO record ``OP_LIFTED`` ("`x @ rnn.W` lifted into
etp_mv"), every op that reads a parameter but does not lift a WARNING ``OP_NOT_LIFTED`` with
the reason; ``graph.module_info.lifting`` is the :class:`LiftReport`.
"""

from __future__ import annotations

from typing import Any

from ..diagnostics import DiagnosticCollector, DiagnosticKind, DiagnosticLevel, source_line
from .rewrite import LiftedOp, LiftReport, NotLifted, lift_plain_ops

__all__ = ["LiftReport", "LiftedOp", "NotLifted", "lift_plain_ops", "report_lifting"]

#: the public op each lifted primitive stands for (the text a reader sees)
OP_NAMES = {
    "etp_mv": "etp_viz.matmul",
    "etp_mm": "etp_viz.matmul",
    "etp_einsum": "etp_viz.einsum",
    "etp_conv": "etp_viz.conv",
    "etp_elemwise": "etp_viz.element_wise",
}


def lifted_text(op: LiftedOp) -> str:
    """``lifted from `x @ rnn.W` (etp_viz.matmul)``: what a graph node or an inspector says."""
    return f"lifted from `{op.source}` ({OP_NAMES.get(op.primitive, op.primitive)})"


def report_lifting(minfo: Any, diagnostics: DiagnosticCollector) -> None:
    """One record per lifted op (INFO) and per op that was not lifted (WARNING)."""
    report = minfo.lifting
    if report is None:
        return
    for op in report.lifted:
        path = op.leaves[0][0] if op.leaves else None
        diagnostics.emit(
            DiagnosticKind.OP_LIFTED,
            DiagnosticLevel.INFO,
            f"`{op.source}` ({' + '.join(op.replaced)}) was lifted into {op.primitive} "
            f"(lift=True): learned online as if written with "
            f"{OP_NAMES.get(op.primitive, op.primitive)}.",
            weight_path=path,
            eqn_indices=(op.eqn_index,),
            source=op.source,
            lifted_into=op.primitive,
        )
    for miss in report.not_lifted:
        path = miss.leaves[0][0] if miss.leaves else None
        name = ".".join(map(str, path)) if path is not None else "?"
        line, library = source_line(minfo.jaxpr.eqns, miss.eqn_index)
        at = f" The op is at {line}." if line and library else ""
        if library:  # a layer the user did not write: no advice to rewrite it
            fix = (
                " That op is in a library's code, not yours. To see what learning this weight "
                "would take, try etp_viz.what_if(model, x, change={'learner': 'rtrl'}) (exact "
                "RTRL needs no ETP op), or learn it with algorithm='bptt'."
            )
        else:
            fix = (
                " Write it with an etp_viz.ops primitive (etp_viz.matmul, etp_viz.einsum, "
                "etp_viz.conv, etp_viz.element_wise) to learn it online, or see what exact RTRL "
                "would learn: etp_viz.what_if(model, x, change={'learner': 'rtrl'})."
            )
        diagnostics.emit(
            DiagnosticKind.OP_NOT_LIFTED,
            DiagnosticLevel.WARNING,
            f"ParamState {name}: `{miss.source}` ({miss.primitive}) was not lifted: "
            f"{miss.reason}.{at}{fix}",
            weight_path=path,
            eqn_indices=(miss.eqn_index,) if miss.eqn_index >= 0 else (),
            source=miss.source,
            reason=miss.reason,
            source_line=line,
        )
