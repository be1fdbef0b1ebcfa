r"""Check the gradient claims against the numbers: online gradients next to BPTT, per weight.

:func:`verify` runs an online learner over a sequence (one gradient per step, summed) and
backpropagation through time over the same sequence from the same states, then sets each
weight leaf's measured fidelity beside the claim the compiler makes for it
(the leaves of its verdict, :meth:`~etp_viz.ETraceGraph.verdicts`):

.. math::

    g_{on} = \sum_t \nabla^{on}_\theta \mathcal{L}^t, \qquad
    g_{true} = \nabla_\theta \sum_t \mathcal{L}^t, \qquad
    \cos(g_{on}, g_{true}), \quad \|g_{on} - g_{true}\| / \|g_{true}\|.

A claim the numbers refute is a *contradiction*: an ``exact`` leaf off by more than the
tolerance of its dtype, or a ``none`` leaf with a non-zero online gradient. ``approximate``
is never contradicted (an approximation may be right on a given sequence). The model's states
are restored afterwards, so verifying changes nothing.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Callable
from typing import Any

import brainstate
import jax
import jax.numpy as jnp
import numpy as np

from etp_viz.compiler.claims import (
    GradientClaim,
    GradientClaims,
    claim_algorithm,
    combine_leaf_claims,
)
from etp_viz.compiler.dataflow import leaf_name
from etp_viz.compiler.graph import ETraceGraph

from .bptt import bptt_gradients
from .registry import DEFAULT_LEARNER, OnlineLearner

__all__ = ["VerifyReport", "VerifyRow", "verify"]

#: Why a weight is not verified: the window gives it no gradient to compare.
NO_SIGNAL = (
    "BPTT's gradient is zero on these inputs, so there is nothing to compare (all-zero inputs, "
    "such as a task's example_input()? no target in the window?). Verify on data that drives "
    "the loss, e.g. xs, ys = task.sample(0)."
)
#: Relative error above which an "exact" claim is contradicted, by gradient dtype.
EXACT_TOLERANCE = {np.dtype("float64"): 1e-7, np.dtype("float32"): 2e-3}


@dataclasses.dataclass(frozen=True)
class VerifyRow:
    """One weight leaf: its claim and what was measured."""

    path: str
    claim: str
    reason: str
    cosine: float
    relative_error: float
    online_norm: float
    true_norm: float
    contradiction: str = ""
    #: why nothing was checked on this weight ("" when it was): BPTT's gradient is zero here
    unverified: str = ""

    @property
    def verified(self) -> bool:
        """True when the numbers tested the claim (BPTT's gradient is not zero here)."""
        return not self.unverified

    def to_json(self) -> dict[str, Any]:
        """Its fields (a non-finite number as None), ``verified`` and ``ok``: verified with
        no contradiction."""
        values = dataclasses.asdict(self)
        fields = {
            f.name: _finite(values[f.name]) if f.type == "float" else values[f.name]
            for f in dataclasses.fields(self)
        }
        ok = not self.contradiction and self.verified
        return fields | {"verified": self.verified, "ok": ok}


@dataclasses.dataclass(frozen=True)
class VerifyReport:
    """What :func:`verify` measured: one :class:`VerifyRow` per weight leaf.

    Attributes
    ----------
    rows : tuple of VerifyRow
    algorithm : str
    num_steps : int
    dtype : str
        The gradients' dtype (the tolerance of an exact claim depends on it).
    tolerance : float
        Relative error above which an ``exact`` claim is a contradiction.
    blocks : tuple of VerifyRow
        Per block of columns of a fused gate weight (brainstate's ``LSTMCell.W``: ``i, g, f,
        o``), its block claim against the same columns of the two gradients
        (``cell.W.weight[..., 0:8] (i)``); their contradictions count too.
    """

    rows: tuple
    algorithm: str
    num_steps: int
    dtype: str
    tolerance: float
    blocks: tuple = ()

    @property
    def contradictions(self) -> list[VerifyRow]:
        """Rows (and block rows) whose claim the numbers refute."""
        return [row for row in (*self.rows, *self.blocks) if row.contradiction]

    @property
    def unverified(self) -> list[VerifyRow]:
        """Rows the window could not test: BPTT's gradient of the weight is zero there."""
        return [row for row in self.rows if row.unverified]

    @property
    def verified_nothing(self) -> bool:
        """True when no weight was tested (every BPTT gradient is zero on these inputs):
        the report vouches for nothing."""
        return bool(self.rows) and all(row.unverified for row in self.rows)

    def verdict(self) -> str:
        """One line: contradictions, weights not verified, or what agreed."""
        bad, untested = len(self.contradictions), len(self.unverified)
        if self.verified_nothing:
            return f"nothing verified: {NO_SIGNAL}"
        words = f"{bad} contradiction(s)"
        if untested:
            words += (
                f"; {untested} of {len(self.rows)} weight leaves not verified (BPTT's gradient "
                "is zero on them in this window)"
            )
        return words

    def __getitem__(self, path: str) -> VerifyRow:
        """A weight's row: a ``ParamState``'s (``"rnn.W.weight"``: its leaves, its weight
        ``rnn.W.weight`` and bias ``rnn.W.weight.bias``, taken together with their worst
        claim), a module's (``"rnn.W"``) or one leaf's (``"rnn.W.weight.bias"``)."""
        leaves = [r for r in self.rows if r.path == path or r.path.startswith(path + ".")]
        if not leaves:
            raise KeyError(f"no weight {path!r}; measured leaves: {[r.path for r in self.rows]}")
        if len(leaves) == 1 and leaves[0].path == path:
            return leaves[0]
        return _combine(path, leaves)

    def table(self) -> str:
        """A plain-text table, one line per weight leaf."""
        width = max([len("weight"), *(len(r.path) for r in (*self.rows, *self.blocks))])
        lines = [
            f"verify: {self.algorithm} vs BPTT over {self.num_steps} steps ({self.dtype}; "
            f"exact means rel. error <= {self.tolerance:g})",
            f"{'weight':<{width}}  {'claim':<11} {'cosine':>9} {'rel.err':>9} "
            f"{'|online|':>9} {'|true|':>9}",
        ]
        for r in (*self.rows, *self.blocks):
            flag = f"  <- CONTRADICTION: {r.contradiction}" if r.contradiction else ""
            flag = flag or ("  (not verified: BPTT's gradient is 0 here)" if r.unverified else "")
            lines.append(
                f"{r.path:<{width}}  {r.claim:<11} {r.cosine:>9.6f} {r.relative_error:>9.2e} "
                f"{r.online_norm:>9.3g} {r.true_norm:>9.3g}{flag}"
            )
        lines.append(self.verdict())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(
            f"<th>{h}</th>"
            for h in ("weight", "claim", "cosine", "rel. error", "|online|", "|true|", "")
        )
        body = []
        for r in (*self.rows, *self.blocks):
            style = " style='background:#ffcdd2'" if r.contradiction else ""
            style = style or (" style='color:#777'" if r.unverified else "")
            body.append(
                f"<tr{style}><td><code>{esc(r.path)}</code></td>"
                f"<td title='{esc(r.reason)}'>{esc(r.claim)}</td><td>{r.cosine:.6f}</td>"
                f"<td>{r.relative_error:.2e}</td><td>{r.online_norm:.3g}</td>"
                f"<td>{r.true_norm:.3g}</td>"
                f"<td>{esc(r.contradiction or ('not verified' if r.unverified else ''))}</td></tr>"
            )
        caption = (
            f"{esc(self.algorithm)} vs BPTT over {self.num_steps} steps "
            f"({esc(self.dtype)}): {esc(self.verdict())}"
        )
        return f"<table><caption>{caption}</caption><tr>{head}</tr>{''.join(body)}</table>"

    def to_json(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm,
            "num_steps": self.num_steps,
            "dtype": self.dtype,
            "tolerance": self.tolerance,
            "rows": [r.to_json() for r in self.rows],
            "blocks": [r.to_json() for r in self.blocks],
            "contradictions": len(self.contradictions),
            "unverified": len(self.unverified),
            "verified_nothing": self.verified_nothing,
            "verdict": self.verdict(),
        }


def verify(
    model: Any,
    xs: Any,
    ys: Any = None,
    *,
    algorithm: Any = DEFAULT_LEARNER,
    loss: Callable[..., Any] | None = None,
    **options: Any,
) -> VerifyReport:
    """Measure every weight's online gradient against BPTT, beside its gradient claim.

    Parameters
    ----------
    model : brainstate.nn.Module
        The model, its states initialised (the run starts from its current hidden states).
    xs : array
        Inputs, time first: ``(T, *input_shape)``. A nested list of numbers is taken as the
        array it spells (``jnp.asarray``): ``xs`` is one array, never several inputs (where a
        single step's example input is given, as to ``compile_etrace_graph``, a list is an
        error instead).
    ys : array, optional
        Targets, time first (``T`` of them). With ``ys``, the loss is ``loss(y_t, ys[t])``.
    algorithm : str, class, callable or instance
        Any form the registry's resolver takes (:func:`etp_viz.learn.registry.resolve`): a
        registered name (``"d_rtrl"`` (default), ``"es_d_rtrl"`` (``"pp_prop"``), ``"eprop"``,
        ``"rtrl"``, ``"snap<n>"``, ``"uoro"``, ``"ostl_recurrent"``, ``"ostl_feedforward"``,
        ``"tbptt"``, ``"bptt"``: BPTT over the whole of ``xs``, exact by construction), a
        learner class, a factory ``model -> learner`` (e.g.
        ``functools.partial(etp_viz.EProp, feedback="random")``) or a learner built for this
        model (e.g. ``EProp(model, ...)``).
    loss : callable, optional
        The per-step loss: ``loss(y_t)`` without targets, ``loss(y_t, target_t)`` with them.
        Default: ``mean((y - target)**2)``, or ``sum(y**2)`` without targets.
    **options
        For a named algorithm, the options it takes (the registry says which: ``decay`` (or
        ``decay_or_rank``) and ``vjp_method`` for ES-D-RTRL, ``window`` for ``"tbptt"``...);
        another is a TypeError naming the valid ones.

    Returns
    -------
    VerifyReport
        ``rows`` per weight leaf (claim, cosine, relative error, norms), ``contradictions``,
        ``table()`` and an HTML repr.

    Examples
    --------
    >>> report = etp_viz.verify(model, xs)                           # doctest: +SKIP
    >>> print(report.table()); assert not report.contradictions      # doctest: +SKIP
    """
    xs, ys = _check_data(xs, ys)
    loss_fn = _resolve_loss(loss, ys)
    given = isinstance(algorithm, brainstate.nn.Module)
    # everything verify touches: the model's states, and a given algorithm's traces too
    saved = [(s, s.value) for s in brainstate.graph.states(algorithm if given else model).values()]
    hidden = [(s, v) for s, v in saved if not isinstance(s, brainstate.ParamState)]
    alg = None
    try:
        alg = _build(model, algorithm, options, episode=len(xs))
        if not alg.is_compiled:
            alg.compile_graph(xs[0])
        if not alg.graph.hidden_groups:
            raise ValueError(
                "verify() needs a model with hidden state: the compiled model has no hidden "
                "group (no brainstate.HiddenState updated through an ETP primitive), so there "
                "is no online gradient to check. See etp_viz.compile_etrace_graph(model, "
                "x).explain()."
            )
        if isinstance(alg.graph, ETraceGraph):  # an influence learner's StepGraph has no jaxpr
            _check_loss(alg.graph.module_info, xs, ys, loss_fn, loss is None)
        claims = _claims(alg)
        _restore(saved)
        true = bptt_gradients(model, xs, lambda outs: _total_loss(loss_fn, outs, ys))
        _restore(hidden)
        alg.reset_traces()
        online, bad_step = _online_gradients(alg, xs, ys, loss_fn)
    finally:
        if alg is not None and not given and alg.is_compiled:
            alg.reset_traces()
        _restore(saved)
    name = next((c.algorithm for c in claims.values()), None) or claim_algorithm(alg)[0]
    report = _report(claims, online, true, name, len(xs))
    if bad_step is not None:  # a NaN loss is a finding on every row, never a pass
        why = f"the loss is NaN or inf (first at step {bad_step}): nothing was verified"
        rows = [dataclasses.replace(r, contradiction=r.contradiction or why) for r in report.rows]
        report = dataclasses.replace(report, rows=tuple(rows))
    return report


def _claims(alg: Any) -> GradientClaims:
    """Every weight leaf's claim: the leaves of the compiler's verdicts (``graph.verdicts``),
    or an influence learner's own claims (read off its step, with or without an ETP graph)."""
    if isinstance(alg, OnlineLearner):
        return alg.gradient_claims()
    verdicts = alg.graph.verdicts(alg)
    return GradientClaims((k, c) for v in verdicts.values() for k, c in v.leaf_claims)


def _check_data(xs: Any, ys: Any) -> tuple[Any, Any]:
    def as_array(value: Any, name: str) -> Any:
        try:
            array = jnp.asarray(value)
        except TypeError:
            raise TypeError(f"{name} must be an array (time first), got {type(value)}") from None
        if array.ndim < 1 or array.shape[0] < 1 or array.size == 0:
            raise ValueError(
                f"{name} must have a time axis first with at least one step, got shape "
                f"{tuple(array.shape)}"
            )
        if jnp.issubdtype(array.dtype, jnp.inexact) and not bool(jnp.isfinite(array).all()):
            bad = int(np.argwhere(~np.isfinite(np.asarray(array)))[0][0])
            raise ValueError(f"{name} holds NaN or inf (first at step {bad}): clean the data")
        return array

    xs = as_array(xs, "xs")
    if ys is not None:
        ys = as_array(ys, "ys")
        if ys.shape[0] != xs.shape[0]:
            raise ValueError(
                f"ys has {ys.shape[0]} steps but xs has {xs.shape[0]}: pass one target per "
                "input step (both time first)"
            )
    return xs, ys


def _resolve_loss(loss: Any, ys: Any) -> Callable[..., Any]:
    if loss is None:
        if ys is None:  # every output leaf (a dict or tuple output too)
            return lambda y: sum(jnp.sum(leaf**2) for leaf in jax.tree.leaves(y))
        return lambda y, target: jnp.mean((y - target) ** 2)
    if not callable(loss):
        raise TypeError(f"loss must be a callable loss(y[, target]) -> scalar, got {loss!r}")
    return loss


def _check_loss(minfo: Any, xs: Any, ys: Any, loss_fn: Any, default: bool) -> None:
    """Every check of the loss against the model's output and the targets, before any run:
    an error naming the argument, the shape expected and the fix."""
    leaves = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in minfo.out_vars]
    out = jax.tree.unflatten(minfo.out_treedef, leaves)
    out_text = jax.tree.map(lambda leaf: tuple(leaf.shape), out)
    target = None if ys is None else jax.ShapeDtypeStruct(ys.shape[1:], ys.dtype)
    if default and target is not None:
        if not isinstance(out, jax.ShapeDtypeStruct):
            raise TypeError(
                f"ys: the model's output is a {type(out).__name__} ({out_text}), which the "
                "default loss mean((y - target)**2) cannot compare with one target array. Pass "
                "loss=, e.g. loss=lambda y, target: jnp.mean((y['out'] - target) ** 2)."
            )
        if tuple(out.shape) != tuple(target.shape):
            raise ValueError(
                f"ys: each step's target must have the model output's shape {out_text}, got "
                f"{tuple(target.shape)} (ys of shape {tuple(ys.shape)}; expected "
                f"{(ys.shape[0], *out.shape)}). Reshape the targets, or pass a loss= that "
                "compares them with the output."
            )
    args = (out,) if target is None else (out, target)
    call = "loss(y)" if target is None else "loss(y, target)"
    try:
        value = jax.eval_shape(loss_fn, *args)
    except Exception as error:
        raise TypeError(
            f"loss: {call} failed on the model's output {out_text}"
            + ("" if target is None else f" and a target of shape {tuple(target.shape)}")
            + f": {type(error).__name__}: {error}"
        ) from error
    shapes = [tuple(leaf.shape) for leaf in jax.tree.leaves(value)]
    if len(shapes) != 1 or int(np.prod(shapes[0])) != 1:
        raise ValueError(
            f"loss: {call} must return one scalar per step; it returned "
            f"{shapes[0] if len(shapes) == 1 else jax.tree.map(lambda v: v.shape, value)} for "
            f"the model's output {out_text}. Reduce it, e.g. "
            + (
                "loss=lambda y: jnp.sum(y ** 2)."
                if target is None
                else "loss=lambda y, target: jnp.mean((y - target) ** 2)."
            )
        )


def _step_loss(loss_fn: Any, y: Any, target: Any) -> Any:
    value = loss_fn(y) if target is None else loss_fn(y, target)
    return jnp.asarray(value).reshape(())


def _total_loss(loss_fn: Any, outs: Any, ys: Any) -> Any:
    def add(total: Any, pair: Any) -> tuple:
        y, target = pair
        return total + _step_loss(loss_fn, y, target), None

    dtype = jnp.result_type(*jax.tree.leaves(outs))
    return jax.lax.scan(add, jnp.zeros((), dtype), (outs, ys))[0]


def _build(model: Any, algorithm: Any, options: dict, episode: int | None = None) -> Any:
    """The learner to verify, in any form the registry's resolver takes (a name, class,
    factory or a learner built for ``model``)."""
    from .registry import resolve

    if "decay_or_rank" in options:
        options["decay"] = options.pop("decay_or_rank")
    # "bptt" is BPTT over an episode: verify's inputs are one episode
    return resolve(model, algorithm, options, where="verify(algorithm=)", episode=episode)


def _online_gradients(
    alg: Any, xs: Any, ys: Any, loss_fn: Any
) -> tuple[dict[tuple[Any, ...], Any], int | None]:
    params = alg.param_states

    def one(x: Any, target: Any) -> Any:
        return _step_loss(loss_fn, alg(x), target)

    # check_states=False: a weight the step never reads (an unused ParamState) gets a zero
    # gradient instead of brainstate's "states not found" error
    grad_step = brainstate.transform.jit(
        brainstate.transform.grad(one, params, return_value=True, check_states=False)
    )
    total, bad_step = None, None
    for t in range(xs.shape[0]):
        grads, value = grad_step(xs[t], None if ys is None else ys[t])
        if bad_step is None and not bool(jnp.isfinite(value)):
            bad_step = t
        total = grads if total is None else jax.tree.map(jnp.add, total, grads)
    if total is None:
        raise ValueError("verify() needs at least one time step (xs has an empty time axis)")
    return {tuple(k): v for k, v in dict(total).items()}, bad_step


def _restore(saved: list) -> None:
    for state, value in saved:
        state.value = value


def _report(claims: Any, online: dict, true: dict, algorithm: str, steps: int) -> VerifyReport:
    rows, blocks = [], []
    dtypes = set()
    for path, true_tree in true.items():
        got = online.get(tuple(path))
        true_leaves = jax.tree_util.tree_flatten_with_path(true_tree)[0]
        got_leaves = jax.tree.leaves(got) if got is not None else [None] * len(true_leaves)
        for (key, t), o in zip(true_leaves, got_leaves):
            t = np.asarray(t)
            dtypes.add(t.dtype)
            o = np.zeros_like(t) if o is None else np.asarray(o, t.dtype)
            name = leaf_name(tuple(path), key)
            claim = claims.leaf(name)
            kind, reason = (claim.kind, claim.reason) if claim is not None else ("none", "")
            rows.append(_row(name, kind, reason, o.ravel(), t.ravel()))
            for b in claim.blocks if claim is not None else ():
                cols = (Ellipsis, slice(b.start, b.stop))
                label = "" if b.label.startswith("block ") else f" ({b.label})"
                where = f"{name}[..., {b.start}:{b.stop}]{label}"
                blocks.append(_row(where, b.kind, b.reason, o[cols].ravel(), t[cols].ravel()))
    dtype = np.dtype(max(dtypes, key=lambda d: d.itemsize)) if dtypes else np.dtype("float32")
    tolerance = EXACT_TOLERANCE.get(dtype, 2e-3)
    scale = max([r.true_norm for r in rows if np.isfinite(r.true_norm)] or [0.0])
    floor = 1e3 * float(np.finfo(dtype).eps) * scale  # below it, a gradient is rounding
    rows = [_untested(_judge(row, tolerance, scale), floor) for row in rows]
    blocks = [_untested(_judge(row, tolerance, scale), floor) for row in blocks]
    return VerifyReport(tuple(rows), algorithm, steps, str(dtype), tolerance, tuple(blocks))


def _row(path: str, kind: str, reason: str, online: np.ndarray, true: np.ndarray) -> VerifyRow:
    online, true = online.astype(np.float64), true.astype(np.float64)
    n_on, n_true = float(np.linalg.norm(online)), float(np.linalg.norm(true))
    diff = float(np.linalg.norm(online - true))
    if n_on > 0 and n_true > 0:
        cosine = float(online @ true / (n_on * n_true))
    else:
        cosine = 1.0 if n_on == n_true == 0 else 0.0
    rel = diff / n_true if n_true > 0 else (0.0 if diff == 0 else float("inf"))
    return VerifyRow(path, kind, reason, cosine, rel, n_on, n_true)


def _combine(path: str, rows: list) -> VerifyRow:
    """Several leaves as one vector: norms and the dot product add up over the leaves; the
    claim is the compiler's one rule for a ParamState (its worst leaf,
    :func:`etp_viz.compiler.claims.combine_leaf_claims`)."""
    worst, reason = combine_leaf_claims(
        [(r.path, GradientClaim(r.path, r.claim, reason=r.reason)) for r in rows]
    )
    n_on = float(np.sqrt(sum(r.online_norm**2 for r in rows)))
    n_true = float(np.sqrt(sum(r.true_norm**2 for r in rows)))
    diff2 = [
        (r.relative_error * r.true_norm) ** 2 if r.true_norm > 0 else r.online_norm**2 for r in rows
    ]
    dot = sum((r.online_norm**2 + r.true_norm**2 - d) / 2 for r, d in zip(rows, diff2))
    cosine = dot / (n_on * n_true) if n_on > 0 and n_true > 0 else float(n_on == n_true)
    diff = float(np.sqrt(sum(diff2)))
    rel = diff / n_true if n_true > 0 else (0.0 if diff == 0 else float("inf"))
    why = "; ".join(f"{r.path}: {r.contradiction}" for r in rows if r.contradiction)
    return VerifyRow(path, worst, reason, float(cosine), rel, n_on, n_true, why)


def _judge(row: VerifyRow, tolerance: float, scale: float = 0.0) -> VerifyRow:
    """The contradiction of one row ("" when the numbers agree with the claim).

    NaN or inf in either gradient is always one (it never passes as "exact"); so is an
    ``approximate`` claim whose online gradient is exactly zero while BPTT's is not (the
    claim should be ``none``: no learning signal ever meets the trace)."""
    why = ""
    bad = [
        name
        for name, norm in (("online", row.online_norm), ("BPTT", row.true_norm))
        if not np.isfinite(norm)
    ]
    if bad:
        why = (
            f"the {' and the '.join(bad)} gradient holds NaN or inf (a NaN loss, parameter or "
            "state?): nothing was verified"
        )
    elif row.claim == "approximate" and row.online_norm == 0 and row.true_norm > tolerance * scale:
        why = (
            f"claimed approximate, but the online gradient is exactly 0 while BPTT's is not "
            f"(norm {row.true_norm:.3g}): no online gradient reaches this weight"
        )
    elif row.claim == "exact" and row.relative_error > tolerance:
        # a true gradient of (near) zero makes the relative error meaningless: compare sizes
        scale = max(row.true_norm, row.online_norm)
        if row.true_norm > 0 or scale > tolerance:
            why = f"claimed exact, relative error {row.relative_error:.3g} > {tolerance:g}"
    elif row.claim == "none" and row.online_norm > 0:
        why = f"claimed no online gradient, but it is non-zero (norm {row.online_norm:.3g})"
    return dataclasses.replace(row, contradiction=why) if why else row


def _untested(row: VerifyRow, floor: float) -> VerifyRow:
    """``row`` marked not verified when BPTT's gradient of the weight is zero (or at rounding
    level, ``floor``: 1000 ulps of the largest one): a claim cannot be tested on a gradient
    that is not there (a contradiction found anyway stays)."""
    if row.contradiction or not np.isfinite(row.true_norm):
        return row
    if row.true_norm == 0 or row.true_norm <= floor:
        return dataclasses.replace(row, unverified=NO_SIGNAL)
    return row


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None
