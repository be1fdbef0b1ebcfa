"""The graph's visual language, defined once: colours, node styles and legend entries.

Every renderer reads this module: the live page (``js/src/graph.js``, through the view model's
``palette`` and ``legend``), the static SVG stored in notebooks (``dot.py``) and the static
legend beside it (``explorer/widget.py``). A colour that is not here is not on the graph.

Each :data:`LEGEND` entry says in plain words what a mark on the graph means (``label`` on
screen, ``title`` on hover) and how its swatch is drawn (``swatch``, ``fill``, ``stroke``,
``line``). Renderers show only the entries of what they drew (:func:`legend_keys`).

Example
-------
>>> COLOURS["etp"], node_style("eqn", etp=True, status="not_learned")["fill"]
('#ffe08a', '#f6d0d0')
>>> [e.key for e in legend_entries(["edge", "op"])]
['op', 'edge']
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "COLOURS",
    "DARK_COLOURS",
    "LEGEND",
    "LegendEntry",
    "NODE_KIND_TEXT",
    "edge_key",
    "edge_style",
    "legend_entries",
    "node_key",
    "node_style",
    "dark_colour",
    "palette_json",
    "theme_colours",
]

#: name -> colour (lower-case ``#rrggbb``). The live page takes these from the view model.
COLOURS: dict[str, str] = {
    "op_fill": "#ffffff",
    "op_border": "#555555",
    "etp": "#ffe08a",
    "etp_border": "#b8860b",
    "online": "#009e73",
    "exact": "#2f6fd0",
    "not_learned": "#cc3311",
    "not_learned_fill": "#f6d0d0",
    "hidden": "#cfe8ff",
    "group_fill": "#f1f7ff",
    "group_border": "#5b8fd0",
    "state": "#eeeeee",
    "io": "#e6e6e6",
    "param": "#f7f7f7",
    "perturb": "#2f6fd0",
    "perturb_fill": "#d8e9f7",
    "collapsed": "#f2f2f2",
    "collapsed_border": "#777777",
    "subjaxpr_border": "#888888",
    "boundary": "#cc3311",
    "edge": "#9a9a9a",
    "slice": "#e8710a",
    "transition": "#785ef0",
    "readout": "#4a7fd4",
    "bypass": "#a0522d",
    "dropped": "#994f88",
    # highlights of a selection (CSS classes hl-* in js/src/style.css and view.js)
    "hl_selected": "#000000",
    "hl_path": "#e8710a",
    "hl_boundary": "#cc3311",
    "hl_boundary_fill": "#ffd6d6",
    "hl_cluster": "#5b8fd0",
    "hl_transition": "#785ef0",
    "hl_search": "#ff00aa",
    # the weights panel: an online weight whose gradient is approximate (claim chips, status)
    "approximate": "#e69f00",
    # keyboard focus ring (a dashed outline around the focused node or weight row)
    "focus": "#00a3c4",
    "text": "#000000",
    "background": "#ffffff",
}

#: The dark theme (JupyterLab's dark themes: ``body[data-jp-theme-light="false"]``): the
#: colours that change, by name. Fills turn dark and text light; the categorical colours
#: (online, exact, approximate, not learned, dropped, the edge paths) stay: they were chosen
#: with mid luminance so that they read on both backgrounds (contrast >= 3 against white and
#: against the dark background, checked in tests/view/test_palette_cvd.py). One light colour
#: maps to one dark colour (``dark_colour``), so a legend swatch can be mapped by its hex.
DARK_COLOURS: dict[str, str] = dict(
    op_fill="#1e1e1e",
    op_border="#a8a8a8",
    etp="#5a4a14",
    etp_border="#d9a93a",
    not_learned_fill="#5c2418",
    hidden="#1d3a57",
    group_fill="#17212d",
    group_border="#7ea6e0",
    state="#353535",
    io="#3a3a3a",
    param="#303030",
    perturb_fill="#1c3550",
    collapsed="#333333",
    collapsed_border="#a0a0a0",
    subjaxpr_border="#8c8c8c",
    bypass="#c49a6c",
    hl_selected="#f0f0f0",
    hl_boundary_fill="#5c2418",
    hl_cluster="#7ea6e0",
    text="#f0f0f0",
    background="#1e1e1e",
)

_STATUS_BORDER = {"online": "online", "exact": "exact", "not_learned": "not_learned"}

#: Plain words for each node kind (tooltips of nodes, the inspector's first line).
NODE_KIND_TEXT: dict[str, str] = {
    "eqn": "an operation of the model's step (one equation of its jaxpr)",
    "input": "a model input: what the model reads at each step",
    "output": "a model output: what the model returns at each step",
    "hidden_in": "a hidden state as it comes in: its value from the previous step, h(t-1)",
    "hidden_out": "a hidden state as it goes out: its new value, h(t)",
    "state_in": "another state of the model, as it comes in",
    "state_out": "another state of the model, as it goes out",
    "param": "a weight (a parameter of the model)",
    "perturb": "where the learner reads the learning signal dL/dh (h = h_hat + p)",
}


@dataclass(frozen=True)
class LegendEntry:
    """One legend row: what a mark on the graph means, in plain words.

    ``swatch`` is the shape drawn beside the label: ``box`` | ``round`` | ``ellipse`` |
    ``diamond`` | ``house`` | ``note`` | ``box3d`` | ``line`` | ``ramp`` | ``text``; ``line``
    its outline or stroke: ``solid`` | ``dashed`` | ``dotted`` | ``double``.
    """

    key: str
    label: str
    title: str = ""
    swatch: str = "box"
    fill: str | None = None
    stroke: str | None = None
    line: str = "solid"

    def colours(self) -> tuple[str, ...]:
        """The colours this entry explains (``ramp`` explains the live trace colour map)."""
        return tuple(c for c in (self.fill, self.stroke) if c)


def _entry(key, label, title, swatch="box", fill=None, stroke=None, line="solid"):
    fill = COLOURS[fill] if fill else None
    stroke = COLOURS[stroke] if stroke else None
    return LegendEntry(key, label, title, swatch, fill, stroke, line)


#: Every legend entry, in the order legends list them.
LEGEND: tuple[LegendEntry, ...] = (
    _entry(
        "etp_online",
        "weight op, learned online",
        "An operation that uses a weight (an ETP primitive). Green border: the weight is "
        "learned online, step by step, from its eligibility trace.",
        "round",
        "etp",
        "online",
    ),
    _entry(
        "etp_exact",
        "weight op, readout",
        "Blue border: the weight is a readout. It reaches the output in the same step, so "
        "its online gradient is exact.",
        "round",
        "etp",
        "exact",
    ),
    _entry(
        "etp_not_learned",
        "weight op, not learned",
        "Pink with a red border: this weight gets no online gradient. Click it in the "
        "Weights list to see why and how to fix it.",
        "round",
        "not_learned_fill",
        "not_learned",
    ),
    _entry(
        "etp",
        "weight op",
        "An operation that uses a weight (an ETP primitive).",
        "round",
        "etp",
        "etp_border",
    ),
    LegendEntry(
        "trace",
        "‖ε‖ trace size (live)",
        "Live colouring of the weight ops: the fill shows the size of the weight's "
        "eligibility trace ‖ε‖ (log scale; dark = small, yellow = large). The border still "
        "says how the weight is learned.",
        "ramp",
    ),
    _entry(
        "op",
        "operation",
        "One operation of the model's step (e.g. mul, tanh). Hover it for its details.",
        "round",
        "op_fill",
        "op_border",
    ),
    _entry(
        "io",
        "input / output",
        "What the model reads (input) and returns (output) at each step.",
        "house",
        "io",
        "op_border",
    ),
    _entry(
        "hidden",
        "hidden state h",
        "The memory carried from one step to the next: h(t-1) comes in, h(t) goes out.",
        "ellipse",
        "hidden",
        "group_border",
    ),
    _entry(
        "state",
        "other state",
        "A value the model keeps between steps that the learner does not trace.",
        "note",
        "state",
        "op_border",
    ),
    _entry(
        "param",
        "weight",
        "A weight (parameter) of the model.",
        "note",
        "param",
        "op_border",
    ),
    _entry(
        "perturb",
        "learning-signal point",
        "Where the learner reads the learning signal dL/dh: the hidden state is written "
        "h = h_hat + p, and the gradient with respect to p is dL/dh.",
        "diamond",
        "perturb_fill",
        "perturb",
    ),
    _entry(
        "perturbed",
        "op that writes h (dashed blue)",
        "The operation that produces a new hidden state; the learning signal dL/dh is read here.",
        "round",
        "op_fill",
        "perturb",
        "dashed",
    ),
    _entry(
        "boundary",
        "blocking op (double red)",
        "A weight op that cuts another weight's path to the hidden state, so that other "
        "weight cannot be learned online.",
        "round",
        None,
        "boundary",
        "double",
    ),
    _entry(
        "collapsed",
        "folded operations ▸",
        "Several operations folded into one box (e.g. the inner steps of tanh). Click it "
        "to open it.",
        "box3d",
        "collapsed",
        "collapsed_border",
    ),
    _entry(
        "cell",
        "cell or neuron ▸",
        "A cell or neuron of your model, folded into one box: its name and class as in your "
        "code, its weights in the middle row, its hidden states at the bottom. Click it to "
        "see its operations.",
        "box",
        "group_fill",
        "group_border",
    ),
    _entry(
        "group",
        "hidden group",
        "Hidden states updated together; the learner keeps one eligibility trace per "
        "weight and group.",
        "box",
        "group_fill",
        "group_border",
    ),
    _entry(
        "subjaxpr",
        "opened box",
        "An opened box of operations (dashed grey); click it to fold it again.",
        "box",
        None,
        "subjaxpr_border",
        "dashed",
    ),
    _entry(
        "edge",
        "data flow",
        "A value passed from one operation to the next.",
        "line",
        None,
        "edge",
    ),
    _entry(
        "slice",
        "weight → hidden state (y → h)",
        "How a weight op's output reaches the hidden state it updates: the path its "
        "eligibility trace follows.",
        "line",
        None,
        "slice",
    ),
    _entry(
        "transition",
        "hidden → hidden (h → h)",
        "How the hidden state of the previous step feeds the new one.",
        "line",
        None,
        "transition",
    ),
    _entry(
        "readout",
        "readout path (exact)",
        "A weight's path to the output within the same step: its gradient is exact.",
        "line",
        None,
        "readout",
        "dashed",
    ),
    _entry(
        "bypass",
        "output reads the old h",
        "The output reads a hidden state from before this step's update; online learners "
        "add a term for it.",
        "line",
        None,
        "bypass",
        "dotted",
    ),
    _entry(
        "dropped",
        "term the learner drops",
        "A dependency the online learner ignores: why its gradient is approximate.",
        "line",
        None,
        "dropped",
        "dashed",
    ),
    _entry(
        "badge",
        "tag: a constant or a weight",
        "A tag ⟨…⟩ after an operation's name stands in for an input arrow: a weight, a "
        "constant, or a value used in many places.",
        "text",
    ),
    _entry(
        "lifted",
        "weight op lifted from a plain op",
        "A weight op the model did not write as one: it was compiled with lift=True, which "
        "turned a plain product or sum on a weight (x @ W, W * h, y + b) into it. It is "
        "drawn like any weight op; click it: its tags say which plain op it replaces.",
        "round",
        "etp",
        "etp_border",
    ),
    _entry(
        "hl_selected",
        "selected",
        "What you selected (thick black outline).",
        "round",
        None,
        "hl_selected",
    ),
    _entry(
        "hl_path",
        "path of the selection",
        "The selected weight's path to its hidden state (or, for a blocked weight, to the "
        "op that blocks it).",
        "line",
        None,
        "hl_path",
    ),
    _entry(
        "hl_boundary",
        "op that blocks the selection",
        "The weight op that cuts the selected weight's path to the hidden state.",
        "round",
        "hl_boundary_fill",
        "hl_boundary",
    ),
    _entry(
        "hl_cluster",
        "selected group",
        "The box of the selected hidden group.",
        "box",
        None,
        "hl_cluster",
    ),
    _entry(
        "hl_transition",
        "h → h of the selected group",
        "How the selected group's hidden state feeds itself from step to step.",
        "line",
        None,
        "hl_transition",
    ),
    _entry(
        "hl_search",
        "search match",
        "A node that matches the search.",
        "round",
        None,
        "hl_search",
    ),
    _entry(
        "focus",
        "keyboard focus",
        "The node the arrow keys are on (dashed outline). Enter selects it, Tab moves on to "
        "the panels.",
        "round",
        None,
        "focus",
        "dashed",
    ),
)
_BY_KEY = {e.key: e for e in LEGEND}


def node_key(kind: str, *, etp: bool = False, status: str | None = None) -> str:
    """The legend key of a node's own fill and border."""
    if etp:
        return f"etp_{status}" if status in _STATUS_BORDER else "etp"
    if kind in ("hidden_in", "hidden_out"):
        return "hidden"
    if kind in ("state_in", "state_out"):
        return "state"
    if kind in ("input", "output"):
        return "io"
    if kind in ("param", "perturb"):
        return kind
    return "op"


def node_style(
    kind: str,
    *,
    etp: bool = False,
    status: str | None = None,
    perturbed: bool = False,
    boundary: bool = False,
    collapsed: bool = False,
) -> dict[str, str]:
    """Graphviz attributes (``shape``, ``style``, ``fill``, ``stroke``, ``penwidth``,
    ``peripheries``) of a node; ``js/src/graph.js`` ``nodeStyle`` draws the same."""
    c = COLOURS
    if collapsed:
        return dict(
            shape="box3d", style="filled", fill=c["collapsed"], stroke=c["collapsed_border"]
        )
    style = dict(shape="box", style="rounded,filled", fill=c["op_fill"], stroke=c["op_border"])
    key = node_key(kind, etp=etp, status=status)
    if etp:
        fill = c["not_learned_fill" if status == "not_learned" else "etp"]
        stroke = c[_STATUS_BORDER.get(status or "", "etp_border")]
        style.update(fill=fill, stroke=stroke, penwidth="2")
    elif key == "hidden":
        style.update(shape="ellipse", style="filled", fill=c["hidden"], stroke=c["group_border"])
    elif key == "state":
        style.update(shape="note", style="filled", fill=c["state"])
    elif key == "io":
        shape = "invhouse" if kind == "input" else "house"
        style.update(shape=shape, style="filled", fill=c["io"])
    elif key == "param":
        style.update(shape="cds", style="filled", fill=c["param"])
    elif key == "perturb":
        style.update(shape="diamond", style="filled", fill=c["perturb_fill"], stroke=c["perturb"])
    if perturbed and kind != "perturb":
        style.update(style=style["style"] + ",dashed", stroke=c["perturb"], penwidth="2")
    if boundary:
        style.update(peripheries="2", stroke=c["boundary"], penwidth="2")
    return style


def edge_key(
    *,
    slice_: bool = False,
    transition: bool = False,
    readout: bool = False,
    bypass: bool = False,
    dropped: bool = False,
) -> str:
    """The legend key of an edge (later marks win: dropped over bypass over the paths)."""
    for key, on in (("dropped", dropped), ("bypass", bypass)):
        if on:
            return key
    for key, on in (("slice", slice_), ("transition", transition), ("readout", readout)):
        if on:
            return key
    return "edge"


def edge_style(key: str) -> dict[str, str]:
    """Graphviz attributes (``color``, ``style``, ``penwidth``) of an edge of legend ``key``."""
    widths = {"slice": "2", "transition": "1.6", "readout": "1.6", "bypass": "2", "dropped": "2"}
    out = {"color": COLOURS[key]}
    if key in widths:
        out["penwidth"] = widths[key]
    line = _BY_KEY[key].line
    if line != "solid":
        out["style"] = line
    return out


def legend_entries(keys: Iterable[str]) -> list[LegendEntry]:
    """The entries of ``keys`` in legend order (unknown keys are left out)."""
    wanted = set(keys)
    return [e for e in LEGEND if e.key in wanted]


def dark_colour(colour: str) -> str:
    """The dark theme's colour for a light-theme colour (itself when it does not change).

    Example
    -------
    >>> dark_colour(COLOURS["op_fill"]), dark_colour(COLOURS["online"])
    ('#1e1e1e', '#009e73')
    """
    for name, light in COLOURS.items():
        if light == colour and name in DARK_COLOURS:
            return DARK_COLOURS[name]
    return colour


def theme_colours(theme: str = "light") -> dict[str, str]:
    """Every colour by name in ``theme`` (``"light"`` or ``"dark"``)."""
    if theme not in ("light", "dark"):
        raise ValueError(f"theme must be 'light' or 'dark', got {theme!r}")
    return {**COLOURS, **DARK_COLOURS} if theme == "dark" else dict(COLOURS)


def palette_json() -> dict[str, str]:
    """The view model's ``palette``: every colour by name, and the dark theme's as
    ``dark.<name>`` (the live page switches with JupyterLab's theme)."""
    return {**COLOURS, **{f"dark.{name}": c for name, c in DARK_COLOURS.items()}}
