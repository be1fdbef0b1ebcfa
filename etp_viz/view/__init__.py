"""etp_viz.view: the JSON-able view model of a compiled graph, its text and its DOT.

Where a weight's status shown to a user is decided: ``weights.py`` (from the compiler's
relations, readouts and diagnostics). ``model.build_view_model`` is the entry point;
``nodes`` turns jaxpr equations into nodes/edges/clusters, ``annotate`` adds the compiler's
decisions, ``types`` holds the dataclasses (the JSON contract, ``docs/view-model.md``),
``text`` the golden-text rendering and ``dot`` the Graphviz DOT / static SVG and its legend.
``palette`` defines the graph's visual language once (colours, node styles, legend entries in
plain words) for the live page and the static SVG; ``plain`` says in plain words what each
weight's status and gradient claim mean (the weights' ``summary``).

Needs only the engine (no widget packages).
"""

from .dot import render_svg as render_svg
from .dot import to_dot as to_dot
from .model import ViewModel as ViewModel
from .model import build_view_model as build_view_model
