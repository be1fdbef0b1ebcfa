"""The explorer widget: an anywidget showing the view model as an interactive graph.

Traitlets are the source of truth (the front end rebuilds the whole view from them, which is
what makes saved HTML and page reloads work without a kernel). The front end lives in ``js/``;
its ``WidgetTraits`` type (``js/src/types.js``) mirrors the synced traits below.

Front end -> Python: ``selected``, ``highlight`` and ``expanded`` trait changes, plus custom
messages ``{"type": "request", "id", "method", "params"}`` answered with ``{"type":
"response", "id", "result", "error"}`` (``to_dot``, ``summary``, ``what_if {weight, change}``:
the inspector's "What if…" control, see ``whatif_offers``; ``view_part {box, nodes, weights}``:
the records a box or a weight card needs, see ``parts``), and ``{"type": "frontend_error",
"message"}``. The full ``view_model`` stays in Python; the page gets its shell
(``view_shell``).
Python -> front end: trait changes (``highlight_weight``, ``select``, ``expand``) and custom
messages ``{"type": "live", "name", "shape", "dtype": "float32"}`` with one binary buffer
(the live panels; see ``push_live``).

Example
-------
>>> from etp_viz.explorer.widget import Explorer
>>> ex = Explorer(view_model={"schema": 3, "title": "t", "nodes": [], "edges": []})
>>> ex.options["height"], ex.scale
(600, 1.0)
"""

from __future__ import annotations

import difflib
import json
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from etp_viz.compiler.claims import DEFAULT_LEARNER
from etp_viz.compiler.graph import ETraceGraph
from etp_viz.learn.contract import OnlineLearner

from .bundle import MISSING_ESM, bundle_text
from .headless import anywidget, traitlets  # stand-ins without the [explorer] extra
from .parts import every_part, split_for_page, view_part

#: Display options of the widget and their defaults (view-model options are passed through
#: to ``build_view_model``). The front end reads one more, ``level_layout_min_nodes`` (drawn
#: nodes above which a graph is laid out box by box, js/src/graph.js); it is not offered here
#: (bench/explorer_render.py --flat sets it in the page's state), so
#: ``Explorer(level_layout_min_nodes=...)`` is an unknown option.
DISPLAY_OPTIONS: dict[str, Any] = {
    "height": 600,
    "rankdir": "auto",
    "large_graph_threshold": 150,
    "show_params": False,
    "panels": ["inspector", "weights", "groups", "diagnostics", "legend"],
    # "auto": follows JupyterLab's theme (body[data-jp-theme-light]); "light" or "dark"
    "theme": "auto",
}
#: smallest and largest text ``scale``
SCALE_RANGE = (0.5, 3.0)
SELECTION_KINDS = ("node", "weight", "group", "diagnostic", "relation", "cluster", "edge")
#: cluster kinds that fold into one box and open (``expand`` / ``collapse``)
FOLDING_CLUSTERS = ("subjaxpr", "cell")
#: A static SVG in the notebook fallback is rendered only for graphs this small: Debian's
#: ``dot`` takes minutes on large jaxprs.
STATIC_SVG_MAX_NODES = 300


def _view_model_options() -> dict[str, Any]:
    try:
        from etp_viz.view.model import VIEW_MODEL_OPTIONS
    except ImportError:  # the view model module is optional for JSON-fed explorers
        return {}
    return dict(VIEW_MODEL_OPTIONS)


def split_display_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split keyword options into (display options with defaults, view-model options).

    An unknown keyword is a ``TypeError`` that lists the valid ones.
    """
    vm_valid = _view_model_options()
    # ``expanded`` and ``scale`` (the text size) are traits of their own
    unknown = sorted(set(options) - set(DISPLAY_OPTIONS) - set(vm_valid) - {"expanded", "scale"})
    if unknown:
        valid = sorted({*DISPLAY_OPTIONS, *vm_valid, "expanded", "scale"})
        hints = [m for u in unknown for m in difflib.get_close_matches(u, valid, n=1)]
        hint = f" (did you mean {', '.join(map(repr, hints))}?)" if hints else ""
        raise TypeError(
            f"Explorer got unknown option(s) {', '.join(map(repr, unknown))}{hint}; "
            f"valid options: {', '.join(valid)}"
        )
    display = {**DISPLAY_OPTIONS, **{k: v for k, v in options.items() if k in DISPLAY_OPTIONS}}
    if not isinstance(display["height"], int) or display["height"] < 100:
        raise ValueError(f"height must be an int >= 100 (pixels), got {display['height']!r}")
    if display["theme"] not in ("auto", "light", "dark"):
        raise ValueError(f"theme must be 'auto', 'light' or 'dark', got {display['theme']!r}")
    if "scale" in options:
        check_scale(options["scale"])
    if display["rankdir"] not in ("auto", "TB", "LR"):
        raise ValueError(f"rankdir must be 'auto', 'TB' or 'LR', got {display['rankdir']!r}")
    bad_panels = set(display["panels"]) - set(DISPLAY_OPTIONS["panels"])
    if bad_panels:
        raise ValueError(
            f"unknown panel(s) {sorted(bad_panels)}; valid: {DISPLAY_OPTIONS['panels']}"
        )
    display["panels"] = list(display["panels"])
    return display, {k: v for k, v in options.items() if k in vm_valid}


def check_scale(scale: Any) -> float:
    """``scale`` as a float in :data:`SCALE_RANGE`, else a ``ValueError`` saying what to pass.

    Example
    -------
    >>> check_scale(1.5)
    1.5
    """
    low, high = SCALE_RANGE
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not low <= scale <= high:
        raise ValueError(
            f"scale must be a number from {low} to {high} (the text size factor: 1.5 for a "
            f"projector), got {scale!r}"
        )
    return float(scale)


def shown_graph(obj: Any) -> Any:
    """What a view of ``obj`` draws: a learner's ``graph``, else ``obj`` itself (an
    ``ETraceGraph``, a closed jaxpr, a view model)."""
    return obj.graph if isinstance(obj, OnlineLearner) else obj


def to_view_model(obj: Any, **vm_options: Any) -> tuple[dict[str, Any], Any]:
    """(JSON dict, ViewModel object or None) from a ViewModel, its JSON, an algorithm with a
    ``graph``, an ``ETraceGraph`` or a closed jaxpr."""
    if isinstance(obj, dict):
        if vm_options:
            raise TypeError(f"view-model options {sorted(vm_options)} need a graph, not JSON")
        return obj, None
    from etp_viz.view.model import ViewModel, build_view_model

    if isinstance(obj, ViewModel):
        return obj.to_json(), obj
    vm = build_view_model(shown_graph(obj), **vm_options)
    return vm.to_json(), vm


class Explorer(anywidget.AnyWidget):
    """Interactive graph of a compiled model's jaxpr, with weights/groups/diagnostics panels.

    Parameters
    ----------
    graph : ETraceGraph, algorithm, ViewModel or view-model JSON dict, optional
        What to show. ``view_model=`` may be given instead.
    **options
        Display options (``height``, ``rankdir``, ``large_graph_threshold``, ``show_params``,
        ``panels``, ``theme``, ``scale``, ``expanded``) and ``build_view_model`` options.
        Unknown keywords raise ``TypeError`` listing the valid ones. ``height`` is the graph
        area's height in pixels (a live run's panels come below it); ``scale`` multiplies every
        text on the page (1.5 for a projector: graph labels of at least 16 px in the first
        view); ``theme`` is ``"auto"`` (JupyterLab's light or dark theme), ``"light"`` or
        ``"dark"``.

    Example
    -------
    >>> ex = etp_viz.Explorer(graph)                       # doctest: +SKIP
    >>> ex.highlight_weight("gru.Wr.weight")               # doctest: +SKIP
    >>> ex.scale = 1.5    # larger text, also A+ in the page's toolbar  # doctest: +SKIP
    """

    #: The full view model (docs/view-model.md), what Python reads and writes; not synced.
    view_model = traitlets.Dict(allow_none=True, default_value=None)
    # Synced traits; mirrored by WidgetTraits in js/src/types.js.
    #: ``view_model``'s shell (``parts.split_for_page``), remade when ``view_model`` changes
    view_shell = traitlets.Dict(allow_none=True, default_value=None).tag(sync=True)
    expanded = traitlets.List(traitlets.Unicode()).tag(sync=True)
    selected = traitlets.Dict().tag(sync=True)
    highlight = traitlets.Dict().tag(sync=True)
    options = traitlets.Dict().tag(sync=True)
    #: text size factor of the page (1: default; 1.5: a projector), kept in saved HTML
    scale = traitlets.Float(1.0).tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)
    live_panels = traitlets.List(traitlets.Dict()).tag(sync=True)
    #: the last ``verify()`` report (``VerifyReport.to_json()``): measured fidelity per weight
    #: beside its claim; None until verified
    verification = traitlets.Dict(allow_none=True, default_value=None).tag(sync=True)
    #: ``{weight path: [{id, label, change, title, disabled}]}``: the "What if…" changes the
    #: inspector offers each weight (``whatif_offers.offered_changes``)
    what_if_changes = traitlets.Dict().tag(sync=True)
    #: the last what-if the page ran (``whatif_offers.run_offer``), None when closed
    what_if = traitlets.Dict(allow_none=True, default_value=None).tag(sync=True)
    #: whether the inspector offers "What if…" (a static view and a live session; compare mode
    #: does not)
    offers_what_if = True

    @property
    def _esm(self) -> str:  # read once by AnyWidget.__init__, then a synced trait
        try:
            return bundle_text()
        except FileNotFoundError as error:
            return MISSING_ESM.replace("MESSAGE", json.dumps(str(error)))

    def __init__(self, graph: Any = None, *, view_model: Any = None, **options: Any):
        expanded = options.pop("expanded", None)
        display, vm_options = split_display_options(options)
        source = view_model if view_model is not None else graph
        vm_json, self._vm_object = (None, None)
        #: the compiled ETraceGraph behind the view (None for a JSON or plain-jaxpr view)
        graph = shown_graph(source)
        self.graph = graph if isinstance(graph, ETraceGraph) else None
        if source is not None:
            vm_json, self._vm_object = to_view_model(source, **vm_options)
        if expanded is None:
            expanded = [
                c["id"]
                for c in (vm_json or {}).get("clusters", [])
                if c.get("kind") == "subjaxpr" and c.get("collapsed") is False
            ]
        scale = check_scale(options.get("scale", 1.0))
        self._split = split_for_page(vm_json)
        super().__init__(
            view_model=vm_json,
            view_shell=self._split.shell or None,
            options=display,
            expanded=list(expanded),
            scale=scale,
        )
        self.observe(self._on_view_model, names=["view_model"])
        self.frontend_errors: list[str] = []
        self._requests = {"to_dot": self._request_to_dot, "summary": lambda p: self.summary()}
        self._requests["view_part"] = lambda params: view_part(self._split, params)
        if self.offers_what_if and self.graph is not None and vm_json:
            from .whatif_offers import offered_changes

            try:
                offers = offered_changes(self.graph, vm_json["weights"], self._learner())
            except Exception:  # an optional control must never break the explorer
                offers = {}
            self.what_if_changes = offers
            self._requests["what_if"] = lambda p: self.run_what_if(p.get("weight"), p.get("change"))
        self.on_msg(self._on_custom_message)

    def _on_view_model(self, change: dict) -> None:
        """A new view model: a new shell for the page (its parts from the new model)."""
        self._split = split_for_page(change["new"])
        self.view_shell = self._split.shell or None

    # --- Python -> front end ------------------------------------------------------------
    def highlight_weight(self, path: str) -> None:
        """Highlight a weight's path (for an excluded weight: up to the blocking boundary)."""
        self._check_id("weight", path)
        self.selected = {"kind": "weight", "id": path}
        self.highlight = {"kind": "weight", "id": path}

    def select(self, **which: str | int) -> None:
        """Select one thing: ``select(node="e7")``, ``select(weight=...)``, ``group=0``,
        ``diagnostic=3``, ``relation="r0"``, ``cluster="c:e4"`` or ``edge="v5"``."""
        if len(which) != 1 or next(iter(which)) not in SELECTION_KINDS:
            raise TypeError(f"select() takes exactly one of {', '.join(SELECTION_KINDS)}")
        kind, value = next(iter(which.items()))
        self._check_id(kind, str(value))
        if kind == "node":
            self.expanded = self._expanded_to_show(str(value))
        self.selected = {"kind": kind, "id": str(value)}
        self.highlight = {"kind": kind, "id": str(value)}

    def clear_selection(self) -> None:
        self.selected = {}
        self.highlight = {}

    def expand(self, cluster_id: str) -> None:
        """Expand a ``subjaxpr`` or ``cell`` cluster (a ``branch`` cluster opens with its
        owner only)."""
        self._check_collapsible(cluster_id)
        if cluster_id not in self.expanded:
            self.expanded = [*self.expanded, cluster_id]

    def collapse(self, cluster_id: str) -> None:
        self._check_collapsible(cluster_id)
        self.expanded = [c for c in self.expanded if c != cluster_id]

    def verify(self, xs: Any, ys: Any = None, **options: Any) -> Any:
        """Measure every weight's online gradient against BPTT on ``xs`` (``ys``) and show
        the fidelity beside its claim (see :func:`etp_viz.verify`; the model is left as it
        was). The report is returned and kept in the ``verification`` trait.

        Options go to :func:`etp_viz.verify`; ``algorithm`` defaults to the one whose claims
        the view shows.
        """
        if self.graph is None:
            raise ValueError(
                "verify() needs the explorer of a model: etp_viz.show(model, x), not of a "
                "view-model JSON or a plain jaxpr."
            )
        from etp_viz.learn import verify

        options.setdefault("algorithm", self._learner())
        report = verify(self.graph.module_info.model, xs, ys, **options)
        self.verification = report.to_json()
        return report

    def run_what_if(self, weight: str, change: str) -> dict[str, Any]:
        """Run the "What if…" change ``change`` (an id of ``what_if_changes[weight]``, e.g.
        ``"lift"``) with :func:`etp_viz.what_if` and show it in the page's result panel (the
        ``what_if`` trait, returned too); a failure is shown there as its ``error``."""
        from .whatif_offers import run_offer

        if self.graph is None:
            raise ValueError("what if needs the explorer of a model: etp_viz.show(model, x)")
        self.what_if = run_offer(
            self.graph, self.what_if_changes, str(weight), str(change), self._learner()
        )
        return self.what_if

    def _learner(self) -> str:
        """The learner whose claims the view shows."""
        options = (self.view_model or {}).get("options") or {}
        return str(options.get("algorithm") or DEFAULT_LEARNER)

    def push_live(self, name: str, values: Any, **meta: Any) -> None:
        """Send float32 data to live panel ``name`` (declared in ``live_panels``)."""
        import numpy as np

        if name not in {p.get("name") for p in self.live_panels}:
            valid = [p.get("name") for p in self.live_panels]
            raise KeyError(f"no live panel {name!r}; declared panels: {valid}")
        array = np.ascontiguousarray(values, dtype="<f4")
        content = {"type": "live", "name": name, "shape": list(array.shape), "dtype": "float32"}
        self.send({**content, **meta}, buffers=[array.tobytes()])

    # --- front end -> Python ------------------------------------------------------------
    def _on_custom_message(self, _widget: Any, content: Any, buffers: list) -> None:
        if not isinstance(content, dict):
            return
        if content.get("type") == "frontend_error":
            self.frontend_errors.append(str(content.get("message")))
        elif content.get("type") == "request":
            self.send(self._answer(content))

    def _answer(self, request: dict) -> dict:
        reply: dict[str, Any] = {"type": "response", "id": request.get("id"), "result": None}
        handler = self._requests.get(request.get("method"))
        try:
            if handler is None:
                raise ValueError(
                    f"unknown request {request.get('method')!r}; known: {sorted(self._requests)}"
                )
            reply["result"] = handler(request.get("params") or {})
            reply["error"] = None
        except Exception as error:  # reported to the page, never swallowed
            reply["error"] = f"{type(error).__name__}: {error}"
            self.error = "".join(traceback.format_exception_only(error)).strip()
        return reply

    def _request_to_dot(self, params: dict) -> str:
        return self.to_dot(expanded=params.get("expanded"))

    # --- lookups ------------------------------------------------------------------------
    def _ids(self, kind: str) -> list[str]:
        vm = self.view_model or {}
        key, field = {
            "node": ("nodes", "id"),
            "edge": ("edges", "id"),
            "cluster": ("clusters", "id"),
            "weight": ("weights", "path"),
            "group": ("groups", "index"),
            "diagnostic": ("diagnostics", "index"),
            "relation": ("relations", "id"),
        }[kind]
        return [str(item.get(field)) for item in vm.get(key) or []]

    def _check_id(self, kind: str, value: str) -> None:
        ids = self._ids(kind)
        if str(value) not in ids:
            close = difflib.get_close_matches(str(value), ids, n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            shown = ", ".join(ids[:20]) + (" …" if len(ids) > 20 else "")
            raise KeyError(f"no {kind} {value!r} in this graph{hint} (known: {shown})")

    def _check_collapsible(self, cluster_id: str) -> None:
        self._check_id("cluster", cluster_id)
        clusters = {c["id"]: c for c in (self.view_model or {}).get("clusters", [])}
        kind = clusters[cluster_id].get("kind")
        if kind not in FOLDING_CLUSTERS:
            parent = clusters[cluster_id].get("parent")
            hint = f"; expand its owner {parent!r}" if kind == "branch" and parent else ""
            raise ValueError(
                f"cluster {cluster_id!r} is a {kind} cluster: only 'subjaxpr' and 'cell' "
                f"clusters collapse and expand{hint}"
            )

    def _expanded_to_show(self, node_id: str) -> list[str]:
        vm = self.view_model or {}
        clusters = {c["id"]: c for c in vm.get("clusters", [])}
        node = next(n for n in vm.get("nodes", []) if n["id"] == node_id)
        result = list(self.expanded)
        cluster = node.get("cluster")
        while cluster in clusters:
            if clusters[cluster].get("kind") in FOLDING_CLUSTERS and cluster not in result:
                result.append(cluster)
            cluster = clusters[cluster].get("parent")
        return result

    # --- text, DOT, export --------------------------------------------------------------
    def summary(self) -> str:
        """Plain-text summary: counts, then each weight with its status and reason."""
        vm = self.view_model or {}
        eqns = sum(1 for n in vm.get("nodes", []) if n.get("kind") == "eqn")
        lines = [
            f"etp_viz Explorer: {vm.get('title', '(empty)')} — {eqns} equations, "
            f"{len(vm.get('groups', []))} hidden groups, {len(vm.get('weights', []))} weights"
        ]
        for w in vm.get("weights", []):
            groups = f" groups {w.get('groups')}" if w.get("groups") else ""
            label = _status_label(w)
            lines.append(f"  {label:<22} {w.get('path')}{groups}")
            if w.get("summary"):  # plain words (view model); the compiler's text is in reason
                lines.append(f"      {w.get('summary')}")
                if w.get("fix"):
                    lines.append(f"      fix: {w.get('fix')}")
            elif w.get("status") == "not_learned":
                lines.append(f"      reason: {w.get('reason')}")
                if w.get("fix"):
                    lines.append(f"      fix: {w.get('fix')}")
            elif w.get("claim") == "approximate" and w.get("claim_reason"):
                lines.append(f"      {w.get('claim_reason')}")
        return "\n".join(lines)

    def static_html(self) -> str:
        """What a page without a kernel shows (GitHub, nbviewer, a stored notebook): the
        graph as SVG, each weight's status and claim, and :meth:`static_images` (a live run's
        plots). Self-contained; every text escaped."""
        import html

        vm = self.view_model or {}
        rows = "".join(
            "<tr><td><code>{}</code></td><td>{}</td><td title='{}'>{}</td></tr>".format(
                html.escape(str(w.get("path"))),
                html.escape(_status_label(w)),
                html.escape(_codes(w), quote=True),
                html.escape(
                    str(w.get("summary") or w.get("claim_reason") or w.get("reason") or "")
                ),
            )
            for w in vm.get("weights", [])
        )
        parts = [
            f"<div class='etp-viz-static'><b>{html.escape(self.summary().splitlines()[0])}</b>",
            "<p><i>A static picture: run the notebook for the interactive explorer.</i></p>",
        ]
        svg = self.static_svg()
        if svg:
            start = svg.find("<svg")
            parts.append(f"<div style='max-width:100%;overflow:auto'>{svg[max(start, 0) :]}</div>")
            parts.append(self.static_legend())
        for name, png in self.static_images():
            parts.append(
                f"<img alt='{html.escape(name)}' style='max-width:100%' "
                f"src='data:image/png;base64,{png}'/>"
            )
        if rows:
            parts.append(
                "<table><tr><th>weight</th><th>learned</th><th>what it means</th></tr>"
                f"{rows}</table>"
            )
        parts.append("</div>")
        return "".join(parts)

    def static_legend(self) -> str:
        """The static graph's legend (HTML): the live page's entries for what the SVG draws,
        in the same colours (``etp_viz.view.palette``); "" when it cannot be made."""
        try:
            from etp_viz.view.dot import legend_html
        except ImportError:
            return ""
        vm = self._vm_object if self._vm_object is not None else _namespace(self.view_model)
        try:
            return legend_html(vm, self.expanded)
        except Exception:  # a static fallback must never break display
            return ""

    def static_images(self) -> list[tuple[str, str]]:
        """``[(name, base64 PNG)]`` for the static output (none for a graph-only explorer)."""
        return []

    def __repr__(self) -> str:
        return self.summary().splitlines()[0]

    def to_dot(self, *, expanded: Any = None) -> str:
        """DOT text of the current expansion state (from ``etp_viz.view.dot``)."""
        try:
            from etp_viz.view import dot
        except ImportError as error:
            raise RuntimeError("etp_viz.view.dot is not available") from error
        vm = self._vm_object if self._vm_object is not None else _namespace(self.view_model)
        return dot.to_dot(
            vm,
            expanded=self.expanded if expanded is None else expanded,
            highlight=_dot_highlight(self.view_model or {}, self.highlight),
        )

    def static_svg(self) -> str | None:
        """SVG via a ``dot`` executable (None when there is none or the graph is too big)."""
        try:
            from etp_viz.view.dot import render_svg, visible_nodes
        except ImportError:
            return None
        vm = self._vm_object if self._vm_object is not None else _namespace(self.view_model)
        if vm is None or len(visible_nodes(vm, self.expanded)) > STATIC_SVG_MAX_NODES:
            return None
        try:
            return render_svg(self.to_dot(), timeout=20.0)
        except Exception:  # a static fallback must never break display
            return None

    def _repr_mimebundle_(self, **kwargs: Any):
        bundle = super()._repr_mimebundle_(**kwargs)
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        data = {**data, "text/plain": self.summary()}
        try:
            data["text/html"] = self.static_html()
        except Exception:  # a static fallback must never break display
            pass
        svg = self.static_svg()
        if svg:
            data["image/svg+xml"] = svg
        return data, metadata

    def frontend_state(self) -> dict[str, Any]:
        """The state the front end renders from (what saved HTML embeds): the synced traits,
        and ``view_parts``, every part of the view model (a saved page has no kernel to ask;
        None when the view model is sent whole)."""
        return {
            "view_shell": self.view_shell,
            "view_parts": every_part(self._split),
            "expanded": self.expanded,
            "selected": self.selected,
            "highlight": self.highlight,
            "options": self.options,
            "error": self.error,
            "verification": self.verification,
            "what_if_changes": self.what_if_changes,
            "what_if": self.what_if,
            "scale": self.scale,
            "live_panels": list(self.live_panels),
        }

    def save_html(self, path: str | Path, *, title: str | None = None) -> Path:
        """Write one self-contained offline HTML file (bundle + state); see ``export``."""
        from .export import save_html

        return save_html(self, path, title=title)


def _dot_highlight(vm: dict, highlight: dict) -> Any:
    """The DOT module's highlight argument: a weight path, a group cluster id, a relation id
    or node ids."""
    kind, value = highlight.get("kind"), highlight.get("id")
    if kind == "group":
        group = next((g for g in vm.get("groups", []) if str(g.get("index")) == value), None)
        return group.get("cluster") if group else None
    if kind == "diagnostic":
        diag = next((d for d in vm.get("diagnostics", []) if str(d.get("index")) == value), None)
        return list(diag.get("node_ids", [])) if diag else None
    return value


class _Record(SimpleNamespace):
    """A JSON object with attribute access; fields the JSON lacks read as None."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return None


def _namespace(value: Any) -> Any:
    """Attribute access over view-model JSON (for the DOT module when only JSON is held)."""
    if isinstance(value, dict):
        # the ViewModel dataclasses hold params and badges as tuples
        return _Record(
            **{
                k: tuple(v.items()) if k == "params" and isinstance(v, dict) else _namespace(v)
                for k, v in value.items()
            }
        )
    if isinstance(value, list):
        return tuple(_namespace(v) for v in value)
    return value


def _codes(weight: dict) -> str:
    """The compiler's text behind a weight's plain summary (shown on hover)."""
    parts = [weight.get("reason"), weight.get("claim_reason")]
    return "\n".join(str(p) for p in parts if p)


def _status_label(weight: dict) -> str:
    """ "online · exact", "readout · exact", "not learned" ... (the weights panel's words:
    the view model's ``status_text``)."""
    return str(weight.get("status_text") or weight.get("status", "?"))
