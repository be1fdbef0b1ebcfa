"""The explorer's view model: a JSON-able picture of a compiled model's jaxpr.

``build_view_model(graph)`` turns an ``ETraceGraph`` (or, for the generic part, any closed
jaxpr) into a :class:`ViewModel`: equations as nodes, variables as edges, states as distinct
nodes, parameters/literals/high-fan-out variables as badges, sub-jaxprs as collapsible clusters,
one cluster per hidden group, and the compiler's decisions (weights with status, reason and
suggested fix; relations with their ``y -> h`` slice; groups with their transition; readouts;
perturbation points; diagnostics) as lists of node and edge ids. The JSON contract with the
front end is ``docs/view-model.md``.

Example
-------
>>> import jax, jax.numpy as jnp
>>> from etp_viz.view.model import build_view_model
>>> vm = build_view_model(jax.make_jaxpr(lambda x: jnp.sin(x) * 2)(1.0), title="demo")
>>> [n.id for n in vm.nodes]
['in:0', 'e0', 'e1', 'out:0']
"""

from __future__ import annotations

from typing import Any

from etp_viz.compiler.claims import DEFAULT_LEARNER
from etp_viz.compiler.graph import ETraceGraph

from .nodes import JaxprGraphBuilder, Role, default_is_etp
from .palette import LEGEND as PALETTE_LEGEND
from .types import (
    Badge,
    Cluster,
    DiagnosticInfo,
    Edge,
    GroupInfo,
    LegendEntry,
    Node,
    PerturbInfo,
    ReadoutInfo,
    RelationInfo,
    ViewModel,
    WeightInfo,
    find_dangling_references,
)

__all__ = [
    "Badge",
    "Cluster",
    "DiagnosticInfo",
    "Edge",
    "GroupInfo",
    "LegendEntry",
    "Node",
    "PerturbInfo",
    "ReadoutInfo",
    "RelationInfo",
    "ViewModel",
    "WeightInfo",
    "VIEW_MODEL_OPTIONS",
    "build_view_model",
    "find_dangling_references",
]

#: Keyword options of :func:`build_view_model` and their defaults.
VIEW_MODEL_OPTIONS: dict[str, Any] = {
    "max_fanout": 8,
    "param_edges": False,
    "perturbation_nodes": True,
    "algorithm": DEFAULT_LEARNER,
}

#: every legend entry, in plain words (defined once in ``palette.py``)
LEGEND = PALETTE_LEGEND


def validate_options(options: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults; an unknown keyword is a TypeError listing the valid ones."""
    unknown = sorted(set(options) - set(VIEW_MODEL_OPTIONS))
    if unknown:
        valid = ", ".join(["title", *VIEW_MODEL_OPTIONS])
        raise TypeError(f"build_view_model() got unknown option(s) {unknown}; valid: {valid}")
    merged = {**VIEW_MODEL_OPTIONS, **options}
    if merged["algorithm"] is not None and not isinstance(merged["algorithm"], str):
        raise TypeError(
            f"algorithm must be an algorithm name such as 'd_rtrl' or None, "
            f"got {merged['algorithm']!r}"
        )
    if not isinstance(merged["max_fanout"], int) or merged["max_fanout"] < 1:
        raise ValueError(f"max_fanout must be a positive int, got {merged['max_fanout']!r}")
    return merged


def build_view_model(graph: Any, *, title: str | None = None, **options: Any) -> ViewModel:
    """Build the :class:`ViewModel` of an ``ETraceGraph`` (or of any closed jaxpr).

    Parameters
    ----------
    graph : ETraceGraph or ClosedJaxpr
        What ``etp_viz.compile_etrace_graph(model, x)`` returns; a plain (closed) jaxpr gives
        the generic graph only (no weights, groups or relations).
    title : str, optional
        Shown by viewers; defaults to the model's class name.
    max_fanout : int
        A variable used by more nodes than this becomes a badge on each consumer (default 8).
    param_edges : bool
        Draw edges from parameter nodes to their consumers instead of badges (default False).
    perturbation_nodes : bool
        Add a ``perturb`` node feeding each perturbed hidden output (default True).
    algorithm : str or None
        Whose gradient claims the weights carry (``graph.gradient_claims(algorithm)``:
        ``"d_rtrl"`` by default, ``"es_d_rtrl"``; None for no claims).
    """
    opts = validate_options(options)
    if isinstance(graph, ETraceGraph):
        from .annotate import build_from_etrace_graph

        return build_from_etrace_graph(graph, title=title, options=opts, legend=LEGEND)
    builder = JaxprGraphBuilder(
        max_fanout=opts["max_fanout"], is_etp=default_is_etp, param_nodes=opts["param_edges"]
    )
    builder.build(graph, [], [])
    nodes, edges, clusters = builder.frozen()
    return ViewModel(
        title=title or "jaxpr",
        nodes=nodes,
        edges=edges,
        clusters=clusters,
        legend=LEGEND,
        options=tuple(sorted(opts.items())),
    )


__all__ += ["Role", "validate_options", "LEGEND"]
