"""The view model in parts: a *shell* synced at once, the rest sent as the page needs it.

A deep model's view model is megabytes (a 128-layer GRU stack: 3.6 MB), most of it text that
only an opened box or a clicked weight shows: the equations' shapes, source lines, settings and
badges, and the weight cards' explanations. The widget keeps the full view model in Python
(``Explorer.view_model``) and syncs its shell (``Explorer.view_shell``):

- every node keeps :data:`SHELL_NODE_FIELDS` (what the layout of a folded box, the viewer's
  module boxes, search, highlights and the lists read) unless null or false; the rest of each
  record (``badges``, ``params``, ``in_avals``, ``out_avals``, ``source``, ``lifted``, ...) is
  a node part;
- every weight drops :data:`CARD_WEIGHT_FIELDS` (what only its card shows when clicked) into a
  weight part;
- everything else (edges, clusters, groups, relations, diagnostics, legend, palette) is whole,
  and ``parts`` names the fields held back.

The page asks for parts with a ``view_part`` request (``Explorer._answer``): ``{"nodes": [ids],
"weights": [paths]}`` (and ``box``, the box the nodes are drawn in, for the page's own use),
answered by :func:`view_part` with ``{"nodes": {id: fields}, "weights": {path: fields}}`` (an
opened box asks for its drawn nodes and the cards of their weights). A view model of at most
:data:`WHOLE_MAX_BYTES` of JSON is sent whole (its shell is itself, without ``parts``).
:func:`assemble` puts a shell and parts back together (tests; docs/view-model.md).

Example
-------
>>> vm = {"schema": 3, "title": "t", "edges": [], "weights": [],
...       "nodes": [{"id": "e0", "kind": "eqn", "label": "sin", "source": "m.py:3"}]}
>>> split = split_view_model(vm)
>>> split.shell["nodes"], split.nodes
([{'id': 'e0', 'kind': 'eqn', 'label': 'sin'}], {'e0': {'source': 'm.py:3'}})
>>> assemble(split.shell, view_part(split, {"nodes": ["e0"]})) == vm
True
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any

#: Node fields every node keeps in the shell: ids and cluster membership (hierarchy, layout of
#: collapsed boxes and their crossing edges, the viewer's module boxes: js/src/graph.js
#: ``withModules``), and what search, highlights, the lists and the node names read.
SHELL_NODE_FIELDS = (
    "id",
    "kind",
    "label",
    "primitive",
    "eqn_index",
    "cluster",
    "subcluster",
    "etp",
    "weight_path",
    "status",
    "hidden_path",
    "state_path",
    "group",
)
#: Weight fields only the weight's card shows (the inspector and the detail under the list,
#: js/src/panels.js): sent when the card opens, or with a box that uses the weight.
CARD_WEIGHT_FIELDS = (
    "reason",
    "fix",
    "aval",
    "claim_reason",
    "leaf_claims",
    "block_claims",
    "summary",
    "detail",
    "gap",
)
#: A view model of at most this many bytes of JSON is sent whole (no parts): the 417 KB of a
#: 16-layer GRU stack come in parts, the shared test models (GRU, LSTM: tens of KB) whole.
WHOLE_MAX_BYTES = 200_000


@dataclass
class SplitViewModel:
    """A view model as its shell and its parts (node id / weight path -> held-back fields).

    ``whole`` is true when the shell is the view model itself (nothing held back).
    """

    shell: dict[str, Any]
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    weights: dict[str, dict[str, Any]] = field(default_factory=dict)
    whole: bool = False


def split_view_model(vm: dict[str, Any]) -> SplitViewModel:
    """The shell and parts of a view model JSON dict (always split; see :func:`split_for_page`).

    Example
    -------
    >>> split_view_model({"nodes": [], "edges": []}).shell["parts"]["nodes"][:2]
    ['id', 'kind']
    """
    nodes: dict[str, dict[str, Any]] = {}
    weights: dict[str, dict[str, Any]] = {}
    shell_nodes = []
    for node in vm.get("nodes") or []:
        kept = {k: v for k, v in node.items() if k in SHELL_NODE_FIELDS and _present(v)}
        shell_nodes.append(kept)
        nodes[str(node["id"])] = {k: v for k, v in node.items() if k not in kept}
    shell_weights = []
    for weight in vm.get("weights") or []:
        shell_weights.append({k: v for k, v in weight.items() if k not in CARD_WEIGHT_FIELDS})
        weights[str(weight["path"])] = {k: v for k, v in weight.items() if k in CARD_WEIGHT_FIELDS}
    shell = {**vm, "nodes": shell_nodes}
    if "weights" in vm:
        shell["weights"] = shell_weights
    shell["parts"] = {"nodes": list(SHELL_NODE_FIELDS), "weights": list(CARD_WEIGHT_FIELDS)}
    return SplitViewModel(shell, nodes, weights)


def _present(value: Any) -> bool:
    """Whether a shell node keeps a field: null and false ones (most of them: a plain equation
    has no weight, state or group) come with the node's part, and readers take a missing
    field for null."""
    return value is not None and value is not False


def split_for_page(vm: dict[str, Any] | None, max_bytes: int = WHOLE_MAX_BYTES) -> SplitViewModel:
    """What the page is sent: the view model whole when its JSON is at most ``max_bytes``
    (``whole``: the shell *is* ``vm``), else split into shell and parts.

    Example
    -------
    >>> split_for_page({"nodes": [], "edges": []}).whole
    True
    """
    if vm is None:
        return SplitViewModel(shell={}, whole=True)
    if len(json.dumps(vm, separators=(",", ":"))) <= max_bytes:
        return SplitViewModel(shell=vm, whole=True)
    return split_view_model(vm)


def view_part(split: SplitViewModel, request: dict[str, Any]) -> dict[str, Any]:
    """The part a ``view_part`` request asks for: ``{"nodes": {id: fields}, "weights": {path:
    fields}}`` for ``request["nodes"]`` (node ids) and ``request["weights"]`` (weight paths; a
    box asks for the cards of the weights its nodes use too). An unknown id is a ``KeyError``
    naming it.

    Example
    -------
    >>> split = split_view_model({"nodes": [], "edges": [],
    ...                           "weights": [{"path": "W", "status": "online", "fix": "x"}]})
    >>> view_part(split, {"weights": ["W"]})
    {'nodes': {}, 'weights': {'W': {'fix': 'x'}}}
    """
    node_ids = [str(i) for i in request.get("nodes") or []]
    paths = [str(p) for p in request.get("weights") or []]
    if split.whole:
        raise KeyError("this view model was sent whole: it has no parts to ask for")
    _check_known("node", node_ids, split.nodes, request.get("box"))
    _check_known("weight", paths, split.weights, None)
    return {
        "nodes": {i: split.nodes[i] for i in node_ids},
        "weights": {p: split.weights[p] for p in paths},
    }


def _check_known(kind: str, asked: list[str], known: dict[str, Any], box: Any) -> None:
    unknown = [i for i in asked if i not in known]
    if not unknown:
        return
    close = difflib.get_close_matches(unknown[0], list(known), n=3)
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    where = f" (asked for box {box!r})" if box else ""
    raise KeyError(
        f"no {kind} {', '.join(map(repr, unknown[:5]))} in this view model{where}{hint}: a part "
        f"is asked for by the ids of the shell's {kind}s ({len(known)} of them). A page "
        "showing an older view model asks for ids it no longer has: run the cell again."
    )


def assemble(shell: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """The view model from its shell and a part holding every node and weight (what the page
    holds once every box and card has come): ``assemble(shell, all parts) == view model``.

    Example
    -------
    >>> assemble({"nodes": [{"id": "e0"}], "weights": [], "parts": {}},
    ...          {"nodes": {"e0": {"source": "m.py:3"}}, "weights": {}})
    {'nodes': [{'id': 'e0', 'source': 'm.py:3'}], 'weights': []}
    """
    if "parts" not in shell:
        return shell
    full = {k: v for k, v in shell.items() if k != "parts"}
    full["nodes"] = [{**n, **part["nodes"].get(n["id"], {})} for n in shell.get("nodes") or []]
    if "weights" in shell:
        full["weights"] = [{**w, **part["weights"].get(w["path"], {})} for w in shell["weights"]]
    return full


def every_part(split: SplitViewModel) -> dict[str, Any] | None:
    """All parts at once (what a saved page embeds: no kernel to ask), or ``None`` when the
    view model was sent whole.

    Example
    -------
    >>> every_part(split_for_page({"nodes": [], "edges": []})) is None
    True
    """
    if split.whole:
        return None
    return {"nodes": split.nodes, "weights": split.weights}
