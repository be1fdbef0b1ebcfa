"""What if: apply one named change to a model's online learning and see what it changes.

A student debugging a missing relation wants to know what *would* happen if it were fixed:
lift the plain ops, learn with exact RTRL instead of D-RTRL, change ES-D-RTRL's decay, treat a
state as a hidden state. :func:`what_if` builds the model twice, before and after the change,
each on its own copy (the model passed in is never touched), and compares what the user sees:

* the compiled graph: relations (a weight and the hidden states its op reaches) and hidden
  groups added or removed;
* each weight leaf's gradient claim (``exact`` / ``approximate`` / ``none``) and its reason;
* the cost: the learner's own state in bytes and the milliseconds of one jitted online step;
* with ``xs`` (a sequence), each leaf's measured fidelity against BPTT (:func:`etp_viz.verify`).

The result (:class:`WhatIf`) is JSON-able (:meth:`WhatIf.to_json`), prints as a table of what
changed, :meth:`WhatIf.diff` names every changed relation, group and claim, and in a notebook
it draws the two graphs side by side (:meth:`WhatIf.html`), the weights whose relation or claim
changed highlighted on both, with the added and removed relations listed above them.
"""

from __future__ import annotations

import copy
import dataclasses
import time
import warnings
from collections.abc import Mapping
from html import escape
from typing import Any

import brainstate
import jax
import jax.numpy as jnp

from .compiler import compile_etrace_graph
from .learn.contract import learner_bytes
from .learn.registry import DEFAULT_LEARNER, name_of, resolve, spec_of
from .learn.verification import verify

__all__ = ["CHANGES", "Side", "WhatIf", "what_if"]

#: the changes :func:`what_if` knows besides a learner option, and what each does
CHANGES = {
    "lift": "lift plain ops on parameters (x @ W, W * h) into ETP ops (compile with lift=True)",
    "learner": "learn with another registered learner (e.g. exact RTRL for every h -> h term)",
    "hidden": "treat the state at this dotted path as a hidden state (a brainstate.HiddenState)",
}
#: timed online steps per side (the minimum is reported), after one warm-up call
TIMED_STEPS = 5


@dataclasses.dataclass(frozen=True)
class Side:
    """One side of a what-if: the learner, its graph's relations and groups, the claims, the
    cost and (with ``xs``) the fidelity measured against BPTT."""

    learner: str
    options: dict
    relations: tuple  # ((weight path, (hidden path, ...)), ...)
    groups: tuple  # ((hidden path, ...), ...)
    claims: dict  # {leaf: kind}
    reasons: dict  # {leaf: reason}
    state_bytes: int
    ms_per_step: float | None
    fidelity: dict | None  # {leaf: {"cosine": ..., "relative_error": ...}}
    graph: Any = dataclasses.field(repr=False, compare=False)
    #: why this side could not be compiled or learned ("" when it was): e.g. a model with no
    #: hidden state before ``{"hidden": ...}`` makes one
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        """The side as plain data (the graph left out)."""
        return {
            "learner": self.learner,
            "options": {k: _plain(v) for k, v in self.options.items()},
            "relations": [[w, list(h)] for w, h in self.relations],
            "groups": [list(g) for g in self.groups],
            "claims": dict(self.claims),
            "reasons": dict(self.reasons),
            "state_bytes": self.state_bytes,
            "ms_per_step": self.ms_per_step,
            "fidelity": self.fidelity,
            "error": self.error,
        }


@dataclasses.dataclass(frozen=True)
class WhatIf:
    """What one change did: :attr:`before` and :attr:`after` (:class:`Side`) and their diff.

    Examples
    --------
    >>> result = etp_viz.what_if(model, x, change="lift")  # doctest: +SKIP
    >>> result.diff()["relations"]["added"]  # doctest: +SKIP
    [['cell.W', ['cell.h']]]
    """

    change: dict
    before: Side
    after: Side

    def diff(self) -> dict[str, Any]:
        """Every relation, hidden group and claim that changed (and how), the cost before and
        after, and the fidelity of the leaves whose fidelity was measured on both sides."""
        b, a = self.before, self.after
        relations = {
            "added": [[w, list(h)] for w, h in sorted(set(a.relations) - set(b.relations))],
            "removed": [[w, list(h)] for w, h in sorted(set(b.relations) - set(a.relations))],
        }
        groups = {
            "added": [list(g) for g in sorted(set(a.groups) - set(b.groups))],
            "removed": [list(g) for g in sorted(set(b.groups) - set(a.groups))],
        }
        claims = [
            {"leaf": leaf, "before": b.claims.get(leaf), "after": a.claims.get(leaf),
             "reason": a.reasons.get(leaf, "")}
            for leaf in sorted(set(b.claims) | set(a.claims))
            if b.claims.get(leaf) != a.claims.get(leaf)
        ]  # fmt: skip
        fidelity = []
        if b.fidelity is not None and a.fidelity is not None:
            for leaf in sorted(set(b.fidelity) & set(a.fidelity)):
                fidelity.append(
                    {"leaf": leaf, "before": b.fidelity[leaf], "after": a.fidelity[leaf]}
                )
        cost = {
            "state_bytes": [b.state_bytes, a.state_bytes],
            "ms_per_step": [b.ms_per_step, a.ms_per_step],
        }
        return {"relations": relations, "groups": groups, "claims": claims,
                "fidelity": fidelity, "cost": cost}  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        """``{"change", "before", "after", "diff"}`` as plain data."""
        return {
            "change": {k: _plain(v) for k, v in self.change.items()},
            "before": self.before.to_json(),
            "after": self.after.to_json(),
            "diff": self.diff(),
        }

    def table(self) -> str:
        """A text summary: the change, what it added or removed, and each changed claim."""
        d = self.diff()
        change = ", ".join(f"{k}={v!r}" for k, v in self.change.items())
        lines = [f"what if {change}: {self.before.learner} -> {self.after.learner}"]
        for name, side in (("before", self.before), ("after", self.after)):
            if side.error:
                lines.append(f"  {name}: not learned online: {side.error}")
        for verb in ("added", "removed"):
            for weight, hidden in d["relations"][verb]:
                lines.append(f"  relation {verb}: {weight} -> {', '.join(hidden)}")
            for group in d["groups"][verb]:
                lines.append(f"  hidden group {verb}: {', '.join(group)}")
        for row in d["claims"]:
            reason = f" ({row['reason']})" if row["reason"] else ""
            lines.append(f"  {row['leaf']}: {row['before']} -> {row['after']}{reason}")
        for row in d["fidelity"]:
            before, after = row["before"]["cosine"], row["after"]["cosine"]
            lines.append(f"  {row['leaf']}: cosine vs BPTT {_num(before)} -> {_num(after)}")
        (b_bytes, a_bytes), (b_ms, a_ms) = d["cost"]["state_bytes"], d["cost"]["ms_per_step"]
        lines.append(f"  learner state {b_bytes} -> {a_bytes} bytes; "
                     f"ms per step {_num(b_ms)} -> {_num(a_ms)}")  # fmt: skip
        if not (d["relations"]["added"] or d["relations"]["removed"] or d["claims"]):
            lines.insert(1, "  no relation, group or claim changed")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.table()

    def changed_weights(self) -> set[str]:
        """Weight paths whose relation or claim changed (a leaf's ``ParamState`` path too)."""
        d = self.diff()
        paths = {w for verb in ("added", "removed") for w, _ in d["relations"][verb]}
        for row in d["claims"]:
            leaf = row["leaf"]
            paths |= {leaf, leaf.rsplit(".", 1)[0]}
        return paths

    def html(self) -> str:
        """The two graphs side by side (Graphviz SVG; the DOT text where no ``dot`` runs),
        the changed weights highlighted on both, under a list of what changed."""
        d = self.diff()
        items = [
            f'<li class="{verb}">relation {verb}: {escape(w)} &rarr; {escape(", ".join(h))}</li>'
            for verb in ("added", "removed")
            for w, h in d["relations"][verb]
        ] + [
            f'<li class="claim">{escape(r["leaf"])}: {r["before"]} &rarr; {r["after"]}</li>'
            for r in d["claims"]
        ]  # fmt: skip
        change = escape(", ".join(f"{k}={v!r}" for k, v in self.change.items()))
        listed = "".join(items) or "<li>no relation, group or claim changed</li>"
        return (
            f'<div class="etp-whatif"><p><b>what if {change}</b></p><ul>{listed}</ul>'
            f"{self.graphs_html()}</div>"
        )

    def graphs_html(self, max_nodes: int | None = None) -> str:
        """The two graphs side by side (what :meth:`html` shows under its list; the explorer's
        what-if panel shows it under its own). A graph of more than ``max_nodes`` drawn nodes
        is left out with a note (Graphviz takes minutes on large graphs)."""
        columns = "".join(
            f'<div class="etp-whatif-side" data-side="{name}" style="flex:1;min-width:0;'
            f'overflow:auto"><h4>{name}: {escape(side.learner)}</h4>'
            f"{_side_html(side, self, max_nodes)}</div>"
            for name, side in (("before", self.before), ("after", self.after))
        )
        return f'<div class="etp-whatif-graphs" style="display:flex;gap:1em">{columns}</div>'

    def _repr_html_(self) -> str:
        return self.html()


def what_if(
    model: Any,
    *args: Any,
    change: Any,
    learner: str = DEFAULT_LEARNER,
    options: Mapping[str, Any] | None = None,
    xs: Any = None,
    measure: bool = True,
) -> WhatIf:
    """Apply one named ``change`` to how ``model`` is learned online and compare before/after.

    Parameters
    ----------
    model : brainstate.nn.Module
        The model, its states initialised. It is copied for each side and never changed.
    *args
        Example inputs of one step (what ``compile_etrace_graph`` takes).
    change : str or dict
        ``"lift"``, or one entry of a dict: ``{"lift": True}``, ``{"learner": "rtrl"}``,
        ``{"hidden": "cell.h"}`` (a state treated as a hidden state) or a learner option,
        e.g. ``{"decay": 0.5}`` for ES-D-RTRL, ``{"n": 2}`` for SnAp (:data:`CHANGES`).
    learner : str
        The registered learner of the "before" side (default ``"d_rtrl"``).
    options : dict, optional
        Its options, kept on both sides unless the change sets one. A change of learner keeps
        those the new learner takes, and ``lift`` for the view: ``{"learner": "rtrl"}`` on a
        lifted view compares the lifted D-RTRL with exact RTRL on the model as written.
    xs : array, optional
        An input sequence ``(T, *input_shape)``: each leaf's fidelity is then measured against
        BPTT on both sides (:func:`etp_viz.verify`).
    measure : bool
        Time one jitted online step on each side (``ms_per_step``; None when False).

    Returns
    -------
    WhatIf

    Examples
    --------
    >>> result = etp_viz.what_if(model, x, change="lift")  # doctest: +SKIP
    >>> print(result)  # doctest: +SKIP
    what if lift=True: d_rtrl -> d_rtrl
      relation added: cell.W -> cell.h
      cell.W: none -> exact
      learner state 0 -> 96 bytes; ms per step 0.11 -> 0.14
    """
    change = _parse(change)
    before_options = dict(options or {})
    _known_learner(learner)
    after_learner = change.get("learner", learner)
    after_options = dict(before_options)
    for key, value in change.items():
        if key not in ("learner", "hidden"):
            after_options[key] = value
    if "learner" in change:  # the new learner keeps the options it takes, the view its lift
        _known_learner(after_learner)
        takes = set(spec_of(after_learner).options) | {"lift"}
        after_options = {k: v for k, v in after_options.items() if k in takes}
    _check_options(learner, before_options, {})
    _check_options(after_learner, after_options, change)
    before = _side(model, args, learner, before_options, None, xs, measure)
    after = _side(model, args, after_learner, after_options, change.get("hidden"), xs, measure)
    return WhatIf(change=change, before=before, after=after)


def _parse(change: Any) -> dict[str, Any]:
    """The change as a one-entry dict, or a ValueError naming the forms it takes."""
    if isinstance(change, str) and change == "lift":
        return {"lift": True}
    if isinstance(change, Mapping) and len(change) == 1:
        return dict(change)
    raise ValueError(
        f"what_if: change={change!r} is not one change. Give 'lift' or a one-entry dict: "
        "{'lift': True}, {'learner': 'rtrl'}, {'hidden': 'cell.h'} or a learner option such as "
        "{'decay': 0.5}."
    )


def _known_learner(name: Any) -> None:
    if not isinstance(name, str):
        raise ValueError(f"what_if: learner={name!r} is not a registered learner's name")
    try:
        spec_of(name)
    except ValueError as err:
        raise ValueError(f"what_if: learner={name!r} is not a registered learner. {err}") from None


def _check_options(learner: str, options: dict, change: dict) -> None:
    """A clear error for an option the (after) learner does not take."""
    _known_learner(learner)
    spec = spec_of(learner)
    # ``lift`` is also the view's: a learner that takes no ``lift`` (RTRL: exact on plain ops
    # as they are) learns the model as written beside a lifted view, unless lift is the change
    view_only = {"lift"} - set(change)
    unknown = sorted(set(options) - set(spec.options) - view_only)
    if unknown:
        valid = ", ".join(spec.options) or "none"
        hint = (
            f" (changes: {', '.join(CHANGES)}, or an option)" if set(unknown) & set(change) else ""
        )
        raise ValueError(
            f"what_if: learner {learner!r} takes no option(s) {unknown}{hint}; its options: "
            f"{valid}."
        )


def _side(model, args, learner, options, hidden, xs, measure) -> Side:
    """Build, claim, cost and (with ``xs``) verify one side on fresh copies of ``model``; a
    side the compiler refuses (its ValueError) is a side with nothing learned online."""
    copy_ = _copy(model, hidden)
    takes = spec_of(learner).options
    learner_options = {k: v for k, v in options.items() if k != "lift" or k in takes}
    try:
        graph = compile_etrace_graph(copy_, *args, lift=bool(options.get("lift")), warn=False)
        built = resolve(copy_, learner, learner_options)
        with warnings.catch_warnings():  # the diff says what the compiler's warnings say
            warnings.simplefilter("ignore", UserWarning)
            built.compile_graph(*args)
    except ValueError as err:
        return Side(learner=learner, options=options, relations=(), groups=(), claims={},
                    reasons={}, state_bytes=0, ms_per_step=None, fidelity=None, graph=None,
                    error=str(err))  # fmt: skip
    claims = built.gradient_claims()
    fidelity = None
    if xs is not None:
        report = verify(_copy(model, hidden), xs, algorithm=learner, **learner_options)
        fidelity = {
            row.path: {"cosine": _finite(row.cosine), "relative_error": _finite(row.relative_error)}
            for row in report.rows
        }
    return Side(
        learner=name_of(built) or learner,
        options=options,
        relations=_relations(graph),
        groups=tuple(sorted(tuple(_dot(p) for p in g.hidden_paths) for g in graph.hidden_groups)),
        claims={leaf: claim.kind for leaf, claim in claims.items()},
        reasons={leaf: claim.reason for leaf, claim in claims.items() if claim.reason},
        state_bytes=int(sum(learner_bytes(built).values())),
        ms_per_step=_step_ms(built, args) if measure else None,
        fidelity=fidelity,
        graph=graph,
    )


def _copy(model: Any, hidden: Any) -> Any:
    """A deep copy of ``model``, with the state at the dotted path ``hidden`` (if any) replaced
    by a ``brainstate.HiddenState`` holding its value."""
    copied = copy.deepcopy(model)
    if hidden is None:
        return copied
    path = tuple(str(hidden).split("."))
    states = brainstate.graph.states(copied)
    found = {tuple(str(p) for p in key): state for key, state in states.items()}
    if path not in found:
        names = [".".join(k) for k, v in found.items() if not isinstance(v, brainstate.ParamState)]
        raise ValueError(
            f"what_if: no state at {hidden!r}; the model's states (not weights): "
            f"{', '.join(sorted(names)) or 'none'}"
        )
    state = found[path]
    if isinstance(state, brainstate.ParamState):
        raise ValueError(
            f"what_if: {hidden!r} is a ParamState (a weight), not a state to make hidden"
        )
    owner = copied
    for name in path[:-1]:  # the user's modules, by attribute path
        owner = getattr(owner, name)
    setattr(owner, path[-1], brainstate.HiddenState(state.value))
    return copied


def _side_html(side: Side, result: WhatIf, max_nodes: int | None = None) -> str:
    """One side's graph as SVG (the changed weights highlighted), or why there is none."""
    from .view.dot import cells_holding, render_svg, to_dot, visible_nodes  # loaded on drawing
    from .view.model import build_view_model

    if side.graph is None:
        return f'<p class="error">not learned online: {escape(side.error)}</p>'
    vm = build_view_model(side.graph)
    changed = result.changed_weights()
    ids = {n for w in vm.weights if w.path in changed for n in (*w.node_ids, *w.path_nodes)}
    opened = cells_holding(vm, ids)  # the change is drawn open, the other cells folded
    drawn = len(visible_nodes(vm, opened))
    if max_nodes is not None and drawn > max_nodes:
        return (
            f'<p class="note">{drawn} nodes: too many to draw here; pass this side\'s graph '
            "(WhatIf.before.graph or .after.graph) to etp_viz.show</p>"
        )
    dot = to_dot(vm, expanded=opened, highlight=ids or None)
    svg = render_svg(dot)
    return svg if svg is not None else f"<pre>{escape(dot)}</pre>"


def _relations(graph: Any) -> tuple:
    """``((weight path, (hidden path, ...)), ...)`` of the graph's relations, dotted, sorted."""
    out = {
        (_dot(r.path), tuple(sorted(_dot(h) for h in r.connected_hidden_paths)))
        for r in graph.hidden_param_op_relations
    }
    return tuple(sorted(out))


def _step_ms(learner: Any, args: tuple) -> float:
    """Milliseconds of one jitted online step (the learner's output and its parameter
    gradients), the minimum of :data:`TIMED_STEPS` calls after a warm-up."""
    params = learner.param_states

    def loss(*inputs: Any) -> Any:
        return sum(jnp.sum(jnp.asarray(y) ** 2) for y in jax.tree.leaves(learner(*inputs)))

    step = brainstate.transform.jit(brainstate.transform.grad(loss, params))
    jax.block_until_ready(step(*args))
    best = float("inf")
    for _ in range(TIMED_STEPS):
        start = time.perf_counter()
        jax.block_until_ready(step(*args))
        best = min(best, time.perf_counter() - start)
    return 1e3 * best


def _dot(path: Any) -> str:
    return ".".join(str(p) for p in path) if isinstance(path, tuple) else str(path)


def _finite(value: Any) -> float | None:
    value = float(value)
    return value if value == value and abs(value) != float("inf") else None


def _num(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _plain(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)
