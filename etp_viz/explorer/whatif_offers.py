"""The explorer's "What if…" control: which changes a weight is offered, and running one.

A weight that is not learned online, or whose gradient claim is ``approximate`` or ``none``,
is offered the changes of :func:`etp_viz.what_if` that could fix it (decided here, in one
place; the page draws what it is sent and hard-codes none):

* ``lift`` -- "lift plain ops" (``{"lift": True}``), when the compiler's reason or fix for the
  weight names a plain op (its text says "compile with lift=True to lift its plain ops");
* ``exact`` -- "exact RTRL" (``{"learner": <exact RTRL>}``), for an approximate or missing
  claim, offered disabled (with why, on hover) when RTRL's influence matrix (hidden values x
  parameters) is above :data:`RTRL_MAX_BYTES`.

The offers go to the page in the synced ``what_if_changes`` trait (``{weight path: [{id,
label, change, title, disabled}]}``); the page's ``what_if {weight, change}`` request runs
:func:`run_offer`, whose result (the diff, the cost before and after, the two graphs as SVG)
is the ``what_if`` trait the result panel draws. A failure is a result with ``error`` set:
the panel shows it, the widget lives on. The static explorer offers them for its learner; a
live explorer (``LiveExplorer``) for its session's learner, on a copy of the model at the
step the run is paused at.
"""

from __future__ import annotations

from typing import Any

import brainstate
import jax
import numpy as np

__all__ = ["RTRL_MAX_BYTES", "exact_learner", "influence_bytes", "offered_changes", "run_offer"]

#: exact RTRL is offered only when its influence matrix (hidden values x parameters) is at
#: most this big: above it one step takes too long (and too much memory) for a click
RTRL_MAX_BYTES = 64 << 20
#: graphs with more drawn nodes are not drawn in the result panel (Graphviz takes minutes)
GRAPH_MAX_NODES = 300
#: the compiler's words for a weight whose plain op ``lift=True`` would lift
LIFT_WORDS = ("lift=True", "plain op", "instead of `@`")
#: the claims an exact learner could improve
IMPROVABLE_CLAIMS = ("approximate", "none")


def exact_learner() -> str:
    """The registry's name of exact RTRL (``EXACT_LEARNER``)."""
    from etp_viz.learn.registry import EXACT_LEARNER

    return EXACT_LEARNER


def influence_bytes(graph: Any) -> int:
    """Bytes of RTRL's influence matrix for ``graph``'s model: every value of the states the
    step carries (not weights) x every weight entry."""
    params = hidden = 0
    itemsize = 4
    for state in graph.module_info.compiled_model_states:
        leaves = jax.tree.leaves(state.value)
        count = sum(int(np.prod(np.shape(leaf))) for leaf in leaves)
        if isinstance(state, brainstate.ParamState):
            params += count
            itemsize = np.dtype(leaves[0].dtype).itemsize if leaves else itemsize
        else:
            hidden += count
    return params * hidden * itemsize


def offered_changes(graph: Any, weights: list[dict], learner: str) -> dict[str, list[dict]]:
    """``{weight path: [offer, ...]}`` for the weights of the view model's ``weights`` that a
    change could fix (see the module docstring); weights with nothing to offer are left out."""
    from etp_viz.memory import format_bytes
    from etp_viz.whatif import CHANGES

    lifted = graph.module_info.lifting is not None
    exact = exact_learner()
    size = influence_bytes(graph)
    out: dict[str, list[dict]] = {}
    for weight in weights:
        claim = weight.get("claim") or ""
        if weight.get("status") != "not_learned" and claim not in IMPROVABLE_CLAIMS:
            continue
        offers = []
        text = f"{weight.get('reason') or ''} {weight.get('fix') or ''}"
        if not lifted and any(word in text for word in LIFT_WORDS):
            offers.append(
                {"id": "lift", "label": "lift plain ops", "change": {"lift": True},
                 "title": f"What if: {CHANGES['lift']}", "disabled": False}
            )  # fmt: skip
        if claim in IMPROVABLE_CLAIMS and learner != exact:
            why_not = ""
            if size > RTRL_MAX_BYTES:
                why_not = (
                    f"exact RTRL needs an influence matrix of {format_bytes(size)} (hidden "
                    f"values x weights), above the {format_bytes(RTRL_MAX_BYTES)} a click tries"
                )
            title = (
                f"{why_not}; run etp_viz.what_if(model, x, change={{'learner': {exact!r}}}) "
                "on the model yourself"
                if why_not
                else f"What if: learn with exact RTRL instead of {learner} (every h -> h term; "
                f"an influence matrix of {format_bytes(size)})"
            )
            offers.append(
                {"id": "exact", "label": "exact RTRL", "change": {"learner": exact},
                 "title": title, "disabled": bool(why_not)}
            )  # fmt: skip
        if offers:
            out[str(weight.get("path"))] = offers
    return out


def run_offer(
    graph: Any,
    offers: dict,
    weight: str,
    change_id: str,
    learner: str,
    options: dict | None = None,
) -> dict:
    """Run the offered change ``change_id`` of ``weight`` with :func:`etp_viz.what_if` on the
    graph's model and example inputs (``measure=True``): the result panel's data. ``options``:
    the learner's (a live session's knobs, e.g. ``{"decay": 0.5}``), kept on the side that
    takes them. Any failure (an unknown offer, a change the model refuses) is a result with
    ``error``."""
    offer = next((o for o in offers.get(weight, ()) if o["id"] == change_id), None)
    result: dict[str, Any] = {"weight": weight, "id": change_id, "error": ""}
    if offer is None:
        known = {path: [o["id"] for o in found] for path, found in offers.items()}
        result["error"] = f"no change {change_id!r} is offered for {weight!r}; offered: {known}"
        return result
    result.update(label=offer["label"], change=offer["change"])
    if offer["disabled"]:
        result["error"] = offer["title"]
        return result
    from etp_viz.whatif import what_if

    options = dict(options or {})
    if graph.module_info.lifting is not None:
        options["lift"] = True
    try:
        outcome = what_if(
            graph.module_info.model, *graph.example_args, change=offer["change"],
            learner=learner, options=options, measure=True,
        )  # fmt: skip
        data = outcome.to_json()
        result.update(
            diff=data["diff"],
            before=_side(data["before"]),
            after=_side(data["after"]),
            changed=sorted(outcome.changed_weights()),
            graphs_html=outcome.graphs_html(max_nodes=GRAPH_MAX_NODES),
        )
    except Exception as error:  # shown in the result panel, never a dead widget
        result["error"] = f"{type(error).__name__}: {error}"
    return result


def _side(side: dict) -> dict:
    """What the panel shows of one side (its claims are in the diff)."""
    keys = ("learner", "state_bytes", "ms_per_step", "error")
    return {key: side[key] for key in keys}
