"""Parameters that reach a model output without crossing a new hidden value (readouts).

Their effect on the loss of the same step is not carried by any hidden state, so the learn
layer gives them their exact same-step gradient (``OUTPUT_BYPASSES_HIDDEN``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from etp_viz import _compat

from ._jaxpr import VISITS
from .diagnostics import DiagnosticCollector, DiagnosticKind, DiagnosticLevel

__all__ = ["ReadoutParam", "find_readout_params"]


class ReadoutParam(NamedTuple):
    """A ``ParamState`` whose leaves reach a model output bypassing new hidden values."""

    path: tuple
    leaf_indices: tuple
    #: equations on the way from the parameter's leaves to the outputs
    path_eqn_indices: tuple
    #: previous hidden values (h^{t-1}) that reach the outputs the same way
    hidden_paths: tuple = ()


def find_readout_params(minfo: Any, diagnostics: DiagnosticCollector) -> dict:
    """``{path: ReadoutParam}`` for every readout parameter, in compiled-state order."""
    eqns = minfo.jaxpr.eqns
    new_hidden = dict.fromkeys(v for v in minfo.outvar_to_hidden_path if _compat.is_var(v))
    needed: dict[Any, None] = dict.fromkeys(
        v for v in minfo.out_vars if _compat.is_var(v) and v not in new_hidden
    )
    visited: list[int] = []
    for index in range(len(eqns) - 1, -1, -1):
        VISITS.count += 1
        eqn = eqns[index]
        if not any(_compat.is_var(v) and v in needed for v in eqn.outvars):
            continue
        visited.append(index)
        for var in eqn.invars:
            if _compat.is_var(var) and var not in new_hidden:
                needed[var] = None
    visited.reverse()
    prev_hidden = tuple(p for v, p in minfo.invar_to_hidden_path.items() if v in needed)
    readouts: dict = {}
    for path, leaves in minfo.weight_path_to_invars.items():
        leaf_indices = tuple(i for i, v in enumerate(leaves) if v in needed)
        if not leaf_indices:
            continue
        route = _route_from(eqns, visited, [leaves[i] for i in leaf_indices])
        readouts[path] = ReadoutParam(path, leaf_indices, route, prev_hidden)
        diagnostics.emit(
            DiagnosticKind.OUTPUT_BYPASSES_HIDDEN,
            DiagnosticLevel.INFO,
            f"{'.'.join(map(str, path))} reaches a model output without crossing a new hidden "
            "value (a readout); it gets its exact same-step gradient.",
            weight_path=path,
            eqn_indices=route,
            leaf_indices=leaf_indices,
        )
    return readouts


def _route_from(eqns: Any, visited: list, sources: list) -> tuple:
    """Equations of ``visited`` (in order) that depend on ``sources``."""
    reached: dict[Any, None] = dict.fromkeys(sources)
    route = []
    for index in visited:
        eqn = eqns[index]
        if any(_compat.is_var(v) and v in reached for v in eqn.invars):
            route.append(index)
            reached.update(dict.fromkeys(v for v in eqn.outvars if _compat.is_var(v)))
    return tuple(route)
