r"""What reaches a model output without crossing a new hidden value: readouts and bypasses.

One backward pass from the model outputs, stopping at every new hidden value :math:`h^t`,
finds the *bypass region*: the equations whose values reach an output along paths that cross
no new hidden value. Two things enter it from outside:

* parameters (**readouts**, ``OUTPUT_BYPASSES_HIDDEN``): their effect on the loss of the same
  step is not carried by any hidden state, so the learn layer gives them their exact same-step
  gradient;
* previous hidden values :math:`h^{t-1}` (**hidden output bypass**, ``HIDDEN_OUTPUT_BYPASS``):
  an output that reads a hidden state before this step's update (a spike from the membrane
  potential at the start of the step, a delayed readout). The loss then depends on
  :math:`h^{t-1}` directly, and the learn layer adds
  :math:`(\partial L^t/\partial h^{t-1})\cdot\epsilon^{t-1}` to the online gradient.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from etp_viz import _compat

from ._jaxpr import VISITS
from .diagnostics import DiagnosticCollector, DiagnosticKind, DiagnosticLevel

__all__ = ["ReadoutParam", "find_bypass_hidden", "find_readout_params"]


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
    needed, visited = bypass_region(minfo)
    prev_hidden = tuple(p for v, p in minfo.invar_to_hidden_path.items() if v in needed)
    sources = {
        path: [leaves[i] for i, v in enumerate(leaves) if v in needed]
        for path, leaves in minfo.weight_path_to_invars.items()
    }
    routes = routes_from(eqns, visited, {p: vs for p, vs in sources.items() if vs})
    readouts: dict = {}
    for path, leaves in minfo.weight_path_to_invars.items():
        leaf_indices = tuple(i for i, v in enumerate(leaves) if v in needed)
        if not leaf_indices:
            continue
        route = routes[path]
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


def find_bypass_hidden(minfo: Any, diagnostics: DiagnosticCollector) -> dict:
    r"""``{hidden path: equation indices}`` for every hidden state whose *previous* value
    :math:`h^{t-1}` reaches a model output without crossing a new hidden value.

    The indices (top-level equations of ``minfo.jaxpr``, in order) are the equations on the
    way from :math:`h^{t-1}` to the outputs; empty when the output *is* :math:`h^{t-1}`. One
    INFO record (``HIDDEN_OUTPUT_BYPASS``) names all of them, with
    ``context['path_eqn_indices'] = {hidden path: indices}``.

    Examples
    --------
    >>> graph = etp_viz.compile_etrace_graph(spiking_cell, x0)   # doctest: +SKIP
    >>> graph.bypass_hidden                                      # doctest: +SKIP
    (('v',),)
    """
    needed, visited = bypass_region(minfo)
    sources = {p: [v] for v, p in minfo.invar_to_hidden_path.items() if v in needed}
    routes = routes_from(minfo.jaxpr.eqns, visited, sources)
    if routes:
        names = ", ".join(".".join(map(str, p)) for p in routes)
        diagnostics.emit(
            DiagnosticKind.HIDDEN_OUTPUT_BYPASS,
            DiagnosticLevel.INFO,
            f"The model output reads the previous value of hidden state(s) {names} (before "
            "this step's update) without crossing a new hidden value; online learners add "
            "dL^t/dh^{t-1} · e^{t-1} (the learning signal of the previous values contracted "
            "with the previous trace) to the gradient.",
            hidden_paths=tuple(routes),
            eqn_indices=[i for route in routes.values() for i in route],
            path_eqn_indices=dict(routes),
        )
    return routes


def bypass_region(minfo: Any) -> tuple[dict, list]:
    """``(needed, visited)``: the Vars (insertion-ordered dict as a set) that reach a model
    output without crossing a new hidden value, and the indices (in order) of the equations
    producing them. One reversed pass over the equations."""
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
    return needed, visited


def routes_from(eqns: Any, visited: list, sources: dict) -> dict:
    """``{key: equation indices}``: per key, the equations of ``visited`` (in order) that
    depend on any of its source Vars (``sources[key]``). One forward pass; each Var carries
    the bit set of the keys it depends on."""
    keys = list(sources)
    bits: dict[Any, int] = {}
    for k, key in enumerate(keys):
        for var in sources[key]:
            bits[var] = bits.get(var, 0) | (1 << k)
    routes: dict = {key: [] for key in keys}
    for index in visited:
        VISITS.count += 1
        eqn = eqns[index]
        mask = 0
        for var in eqn.invars:
            if _compat.is_var(var):
                mask |= bits.get(var, 0)
        if not mask:
            continue
        for var in eqn.outvars:
            if _compat.is_var(var):
                bits[var] = bits.get(var, 0) | mask
        while mask:  # the set bits only: total work is the size of the routes
            low = mask & -mask
            routes[keys[low.bit_length() - 1]].append(index)
            mask ^= low
    return {key: tuple(route) for key, route in routes.items()}
