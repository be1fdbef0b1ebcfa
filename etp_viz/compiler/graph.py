r"""Stage 5: ``compile_etrace_graph`` and the :class:`ETraceGraph` the executor consumes.

Executor contract
-----------------
``graph = compile_etrace_graph(model, *args, recurrence='diagonal')`` returns an
:class:`ETraceGraph` (a NamedTuple; ``graph._asdict()`` works). Besides the spec's six fields
(``module_info``, ``hidden_groups``, ``hid_path_to_group``, ``hidden_param_op_relations``,
``hidden_perturb``, ``diagnostics``) it carries:

``graph.executor_jaxpr`` (closed jaxpr) and ``graph.run_step(args, state_vals, perturbs=None)``
    One forward step of the *perturbed* model (every hidden outvar ``h = ĥ + p``) that also
    returns what the learning rules need. Flat layout of ``executor_jaxpr``:

    * invars: ``[*model-arg leaves, *state leaves (module_info.compiled_model_states order),
      *perturbation vars (hidden_perturb.perturb_vars order)]``
    * outvars: ``[*model-output leaves, *new state leaves, *relation x, *relation y,
      *relation transition consts, *group transition consts]`` where, for relation ``r`` in
      ``hidden_param_op_relations`` order, "x" is ``r.x_var`` (skipped when ``None``), "y" is
      ``r.y_var``, and the consts are ``constvars`` of each ``r.y_to_hidden_group_jaxprs[k]``
      (k in ``r.hidden_groups`` order); group consts are ``g.transition_jaxpr_constvars`` per
      group. ``graph.executor_layout`` gives the slices.

    ``run_step`` evaluates it and returns a :class:`StepResult`:
    ``outputs`` (model output pytree), ``new_state_vals`` (one value per compiled state),
    ``xs[i]`` / ``ys[i]`` (relation i), ``relation_consts[i][k]`` (list, in constvar order, for
    relation i and its k-th group), ``group_consts[g]`` (list), ``hidden_prev[g]`` /
    ``hidden_new[g]`` (per-path values of group g before/after the step). It is traceable and
    differentiable: ``jax.vjp`` w.r.t. ``perturbs`` at zero gives :math:`\partial L/\partial h^t`.

``graph.eval_executor(flat_inputs, perturbs=None, collect=(), detach_hidden=False)``
    The flat form ``run_step`` is built on, for executors that keep values as flat lists:
    ``flat_inputs`` is ``[*model-arg leaves, *state leaves]`` (the constants are bound from
    ``module_info.consts`` on both jax stacks); returns ``(outvals, collected)``, the
    ``executor_jaxpr`` outvars (sliced by ``executor_layout``) and the values of any
    intermediate Vars of ``module_info.jaxpr`` named in ``collect`` (e.g. an ETP equation's
    processed weight operands). ``detach_hidden=True`` evaluates ``h = stopgrad(ĥ) + p``
    (``executor_layout.detach_vars`` are the ``ĥ``): differentiating w.r.t. parameters then
    gives only the paths to the outputs that cross no new hidden value (the readouts' exact
    same-step gradient). W.r.t. ``perturbs`` it gives the *partial* :math:`\partial L/\partial
    h^t` with the step's other new hidden values held fixed, which is the total same-step
    derivative only when no new hidden value feeds another (``graph.hidden_feeds_hidden`` is
    False); otherwise take the learning signal with ``detach_hidden=False``.
    ``perturbs`` follow ``hidden_perturb.perturb_vars`` (zeros when ``None``). Evaluation is
    :func:`etp_viz.compiler._jaxpr.eval_jaxpr_collect`, the package's one jaxpr interpreter.

Per relation ``r`` (``HiddenParamOpRelation``):
    ``r.y_to_hidden_groups(y, consts)`` evaluates the y -> h tails (df = a JVP of it);
    ``r.trainable_param_fns[key]`` maps the ``ParamState`` value (the whole pytree) to the
    primitive's trainable input (pull a gradient w.r.t. the input back to the leaves with
    ``jax.vjp``); ``r.trainable_is_leaf[key]`` is True when the input *is* the leaf.
    ``r.tail_position_preserving`` False means df is not per-position (diagnosed).

Per group ``g``: ``g.diagonal_jacobian(hidden_prev[g], group_consts[g])`` -> ``(*varshape,S,S)``.

Readouts: ``graph.readout_params`` maps each ``ParamState`` path whose leaves reach a model
output without crossing a new hidden value to a :class:`ReadoutParam` (leaf indices, equation
path); those parameters get their exact same-step gradient from the learn layer.

Hidden output bypass: ``graph.bypass_hidden`` lists the hidden-state paths whose *previous*
value :math:`h^{t-1}` reaches a model output without crossing a new hidden value (an output
read before the step's update); ``graph.bypass_eqn_indices[path]`` are the equations on that
way (top-level indices of ``module_info.jaxpr``). The learn layer adds
:math:`(\partial L^t/\partial h^{t-1})\cdot\epsilon^{t-1}` for them (``HIDDEN_OUTPUT_BYPASS``).
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

import jax

from etp_viz import _compat

from ._jaxpr import build_jaxpr, eval_jaxpr_collect
from .claims import DEFAULT_LEARNER, gradient_claims
from .claims.plain import plain_report
from .claims.verdict import WeightVerdict, cached_claims, find_weight_verdicts, verdicts_of
from .diagnostics import (
    CompilationRecord,
    DiagnosticCollector,
    DiagnosticKind,
    format_records,
)
from .hidden_groups import find_hidden_groups_from_minfo
from .module_info import extract_module_info
from .perturbation import HiddenPerturbation, add_hidden_perturbation_from_minfo
from .readouts import ReadoutParam, find_bypass_hidden, find_readout_params
from .relations import find_hidden_param_op_relations_from_minfo

__all__ = [
    "CompilationRecord",
    "ETraceGraph",
    "Explanation",
    "ExecutorLayout",
    "ReadoutParam",
    "StepResult",
    "WeightVerdict",
    "compile_etrace_graph",
]


class ExecutorLayout(NamedTuple):
    """Slices of ``executor_jaxpr.outvars`` (see the module docstring)."""

    outputs: slice
    states: slice
    xs: slice
    ys: slice
    relation_consts: slice
    group_consts: slice
    #: relation index -> position in ``xs`` (None when the relation has no x)
    x_positions: tuple
    #: per relation, per group: number of consts
    relation_const_counts: tuple
    group_const_counts: tuple
    #: the pre-perturbation hidden values ``ĥ`` (``h = ĥ + p``), detached by ``detach_hidden``
    detach_vars: tuple = ()

    def xs_of(self, outvals: list) -> list:
        """Per relation, its ``x`` value (``None`` when the relation has no x)."""
        xs = outvals[self.xs]
        return [None if p is None else xs[p] for p in self.x_positions]

    def relation_consts_of(self, outvals: list) -> list:
        """``[relation][group k] -> [const values]`` (constvar order)."""
        return _regroup(outvals[self.relation_consts], self.relation_const_counts)

    def group_consts_of(self, outvals: list) -> list:
        """``[group] -> [const values]`` (``transition_jaxpr_constvars`` order)."""
        return _regroup(outvals[self.group_consts], (self.group_const_counts,))[0]


class StepResult(NamedTuple):
    """What :meth:`ETraceGraph.run_step` returns."""

    outputs: Any
    new_state_vals: list
    xs: list
    ys: list
    relation_consts: list
    group_consts: list
    hidden_prev: list
    hidden_new: list


def _notebook_cell() -> int | None:
    """The running IPython cell's execution count, or None outside IPython (not imported)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "execution_count", None)


class Explanation(tuple):
    """What :meth:`ETraceGraph.explain` found: its records (this is a tuple of them) and the
    report it printed.

    Attributes
    ----------
    records : tuple of CompilationRecord
        The records that matched the filters (the tuple itself).
    text : str
        The printed report (also ``str(explanation)``).
    verdicts : dict
        ``{param path: WeightVerdict}`` of the weights in the report (empty when filtered by
        ``kind`` or ``hidden_path``).

    In Jupyter the report appears once: ``explain()`` prints it, and the returned object
    displays nothing more in the same cell (displayed in a later cell, it shows the report
    again). ``repr()`` stays one line.

    >>> e = Explanation((), "WEIGHTS (0)", {})
    >>> e == (), str(e), repr(e)
    (True, 'WEIGHTS (0)', '<Explanation: 0 records, 0 weights; print() it for the report>')
    """

    text: str
    verdicts: dict
    _shown_in_cell: int | None

    def __new__(cls, records: Any, text: str, verdicts: dict) -> Explanation:
        self = super().__new__(cls, records)
        self.text, self.verdicts, self._shown_in_cell = text, dict(verdicts), None
        return self

    @property
    def records(self) -> tuple:
        """The matched records as a plain tuple."""
        return tuple(self)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return (
            f"<Explanation: {len(self)} records, {len(self.verdicts)} weights; "
            "print() it for the report>"
        )

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(self.text)}</pre>"

    def _ipython_display_(self) -> None:
        if self._shown_in_cell is not None and self._shown_in_cell == _notebook_cell():
            return  # printed just above, in this cell
        from IPython.display import display

        display({"text/plain": self.text, "text/html": self._repr_html_()}, raw=True)


class ETraceGraph(NamedTuple):
    """The compiled eligibility-trace graph (spec's six fields first)."""

    module_info: Any
    hidden_groups: list
    hid_path_to_group: dict
    hidden_param_op_relations: tuple
    hidden_perturb: HiddenPerturbation
    diagnostics: tuple
    readout_params: dict = {}
    #: ``{param path: 'online' | 'exact' | 'not_learned'}`` (``exact``: a readout only), read
    #: off :attr:`weight_verdicts` (``verdict.code``)
    weight_status: dict = {}
    recurrence: str = "diagonal"
    executor_jaxpr: Any = None
    executor_layout: ExecutorLayout | None = None
    #: hidden paths whose previous value reaches an output crossing no new hidden value
    bypass_hidden: tuple = ()
    #: ``{hidden path: equation indices}`` on the way from ``h^{t-1}`` to the outputs
    bypass_eqn_indices: dict = {}
    #: ``{param path: WeightVerdict}``: the one verdict per weight (status, groups, relations,
    #: reason, fix); :meth:`verdicts` adds an algorithm's claim
    weight_verdicts: dict = {}
    #: :meth:`verdicts` and :meth:`gradient_claims` per algorithm (None: not cached)
    verdict_cache: dict | None = None
    #: the example inputs of one step it was compiled on (a learner built for its claims
    #: compiles on them)
    example_args: tuple = ()

    @property
    def _layout(self) -> ExecutorLayout:
        """:attr:`executor_layout`; every graph the compiler builds has one."""
        layout = self.executor_layout
        if layout is None:
            raise ValueError(
                "this ETraceGraph has no executor_layout (it was not built by the ETP "
                "compiler); compile the model with etp_viz.compile_etrace_graph"
            )
        return layout

    def explain(
        self,
        weight_path: Any = None,
        hidden_path: Any = None,
        kind: Any = None,
        file: Any = None,
        claims: Any = DEFAULT_LEARNER,
        codes: bool = False,
    ) -> Explanation:
        """Print one report: every weight's status and the ``claims`` algorithm's claim,
        what they mean in plain words (weight and state names, no internal codes) and the
        suggested fix, then that algorithm's claim per leaf (``claims=None``: statuses only).
        ``codes=True`` prints the developer report instead: the compiler's records (filtered)
        grouped by kind, and every reason with its equation numbers and primitive ids; so
        does a query by ``kind`` or ``hidden_path`` (it asks for records).

        ``weight_path``/``hidden_path`` accept a tuple path or a dotted string; ``kind`` a
        :class:`DiagnosticKind`, its name or its value. The report goes to ``file`` (default
        stdout). Returns an :class:`Explanation`: the filtered records (a tuple, as before)
        that also carries the report (``str()``, ``.text``) and the verdicts; a notebook
        does not show the report a second time below the printed one.

        >>> report = graph.explain(weight_path="rnn.Wr")  # doctest: +SKIP
        >>> report.records, report.verdicts, str(report)  # doctest: +SKIP
        """
        records = [r for r in self.diagnostics if _matches(r, weight_path, hidden_path, kind)]
        parts = [format_records(records)]
        verdicts: dict = {}
        leaves: list = []
        algorithm: Any = None
        if kind is None and hidden_path is None:
            verdicts = self.verdicts(claims)
            if weight_path is not None:
                name = weight_path if isinstance(weight_path, str) else _dot(weight_path)
                verdicts = {p: v for p, v in verdicts.items() if _under(v.name, name)}
            lines = [f"WEIGHTS ({len(verdicts)})"] + [f"  {v.line()}" for v in verdicts.values()]
            if claims is not None:
                leaves = [(k, c) for v in verdicts.values() for k, c in v.leaf_claims]
                if weight_path is not None:
                    leaves = [(k, c) for k, c in leaves if _under(k, name)]
                algorithm = next((c.algorithm for _, c in leaves), claims)
                lines.append(f"GRADIENT CLAIMS ({algorithm})")
                lines += [
                    f"  {k}: {c.kind}" + (f" -- {c.reason}" if c.reason else "") for k, c in leaves
                ]
            parts.append("\n".join(lines))
            if not codes:
                parts = [plain_report(self, verdicts, leaves, algorithm)]
        report = Explanation(records, "\n".join(parts), verdicts)
        print(report.text, file=file or sys.stdout)
        if file is None or file is sys.stdout:
            report._shown_in_cell = _notebook_cell()
        return report

    def verdicts(self, algorithm: Any = None) -> dict:
        """``{param path: WeightVerdict}``: every weight's status, groups, relations, reason
        and fix, with ``algorithm``'s claim (worst leaf; every leaf's kept) when one is given
        (a name, a learner class or instance). Cached per algorithm. See
        :mod:`etp_viz.compiler.claims.verdict`.

        >>> graph.verdicts("d_rtrl")[("rnn", "W", "weight")].text  # doctest: +SKIP
        'online · approximate'
        """
        return verdicts_of(self, algorithm)

    def gradient_claims(self, algorithm: Any = DEFAULT_LEARNER) -> Any:
        """Per weight leaf, is ``algorithm``'s online gradient exact, approximate or absent,
        and what does it drop? See :func:`etp_viz.compiler.claims.gradient_claims`.

        >>> graph.gradient_claims("d_rtrl")["rnn.W.weight"].kind  # doctest: +SKIP
        'approximate'
        """
        return cached_claims(self, algorithm)

    def claims_json(self, algorithms: Any = (DEFAULT_LEARNER,), path: Any = None) -> str:
        """A snapshot of the gradient claims as JSON text (written to ``path`` when given),
        for ``etp_viz.testing.assert_claims`` and ``python -m etp_viz check``: a refactor
        that silently changes a weight's claim then fails a test, naming the weight.

        >>> graph.claims_json(["d_rtrl", "es_d_rtrl"], path="claims.json")  # doctest: +SKIP
        """
        import json

        text = json.dumps(claims_snapshot(self, algorithms), indent=2) + "\n"
        if path is not None:
            with open(path, "w", encoding="utf-8") as file:
                file.write(text)
        return text

    def eval_executor(
        self,
        flat_inputs: Any,
        perturbs: Any = None,
        *,
        collect: Any = (),
        detach_hidden: bool = False,
    ) -> tuple[list, list]:
        """Evaluate ``executor_jaxpr`` on flat inputs: ``(outvals, collected)`` (module
        docstring)."""
        if perturbs is None:
            perturbs = [jax.numpy.zeros(v.aval.shape, v.aval.dtype) for v in self._pvars]
        stop = self._layout.detach_vars if detach_hidden else ()
        return eval_jaxpr_collect(
            self.executor_jaxpr,
            self.module_info.consts,
            [*flat_inputs, *perturbs],
            collect=collect,
            stop_gradient=stop,
        )

    def run_step(self, args: Any, state_vals: Any, perturbs: Any = None) -> StepResult:
        """One perturbed forward step returning the executor's values (module docstring)."""
        minfo = self.module_info
        flat = jax.tree.leaves((tuple(args), list(state_vals)))
        outs, _ = self.eval_executor(flat, perturbs)
        lay = self._layout
        outputs = jax.tree.unflatten(minfo.out_treedef, outs[lay.outputs])
        flat_states = outs[lay.states]
        new_states, start = [], 0
        for tree in minfo.state_tree_outvars:
            treedef = jax.tree.structure(tree)
            n = len(jax.tree.leaves(tree))
            new_states.append(jax.tree.unflatten(treedef, flat_states[start : start + n]))
            start += n
        xs = lay.xs_of(outs)
        relation_consts = lay.relation_consts_of(outs)
        group_consts = lay.group_consts_of(outs)
        by_var = dict(zip(minfo.invars[minfo.num_arg_leaves :], flat[minfo.num_arg_leaves :]))
        new_by_var = dict(zip(minfo.jaxpr.outvars[minfo.num_out_leaves :], flat_states))
        hidden_prev = [[by_var[v] for v in g.hidden_invars] for g in self.hidden_groups]
        hidden_new = [
            [new_by_var.get(v, v.val if _compat.is_literal(v) else None) for v in g.hidden_outvars]
            for g in self.hidden_groups
        ]
        return StepResult(
            outputs,
            new_states,
            xs,
            outs[lay.ys],
            relation_consts,
            group_consts,
            hidden_prev,
            hidden_new,
        )

    @property
    def _pvars(self) -> list:
        return self.hidden_perturb.perturb_vars

    @property
    def hidden_feeds_hidden(self) -> bool:
        r"""True when a new hidden value is computed from another new hidden value of the same
        step (stacked layers: ``h1^t`` feeds ``h2^t``).

        Then ``detach_hidden=True`` gives, w.r.t. a perturbation, only the *partial*
        :math:`\partial L/\partial h^t` with the other new hidden values held fixed; the
        learning signal must be the total same-step derivative, taken with ``detach_hidden=False``.
        One forward pass over ``executor_jaxpr`` (linear in its equations).
        """
        jaxpr = self.executor_jaxpr
        reached = dict.fromkeys(self._pvars)
        targets = set(self._layout.detach_vars)
        for eqn in jaxpr.eqns:
            if any(_compat.is_var(v) and v in reached for v in eqn.invars):
                for out in eqn.outvars:
                    if out in targets:
                        return True
                    reached[out] = None
        return False


def compile_etrace_graph(
    model: Any,
    *args: Any,
    recurrence: str = "diagonal",
    warn: bool = True,
    lift: bool = False,
    **kwargs: Any,
) -> ETraceGraph:
    """Construct the eligibility-trace graph of ``model`` for example inputs ``args``.

    Parameters
    ----------
    model : brainstate.nn.Module
    *args
        Example positional inputs of one step, arrays (``jnp.zeros(3)``); a list of numbers is
        a ``TypeError`` naming the array to pass (:func:`.module_info.check_example_inputs`).
    recurrence : {'diagonal', 'coupled'}
        How dh/dh is built (see :mod:`etp_viz.compiler.hidden_groups`).
    warn : bool
        Raise WARNING/ERROR records as ``UserWarning`` (they are always in ``diagnostics``).
    lift : bool
        Lift plain ops on parameters (``x @ W``, ``W * h``) into ETP ops (:mod:`.lift`).

    Examples
    --------
    >>> graph = compile_etrace_graph(model, jnp.zeros(10))  # doctest: +SKIP
    >>> [r.weight_path for r in graph.hidden_param_op_relations]  # doctest: +SKIP
    [('rnn1', 'W', 'weight'), ('rnn2', 'W', 'weight')]
    """
    minfo = extract_module_info(model, *args, lift=lift, **kwargs)
    diagnostics = DiagnosticCollector()
    groups, hid_path_to_group = find_hidden_groups_from_minfo(
        minfo, recurrence=recurrence, diagnostics=diagnostics
    )
    relations = find_hidden_param_op_relations_from_minfo(
        minfo, hid_path_to_group, diagnostics=diagnostics
    )
    perturb = add_hidden_perturbation_from_minfo(minfo, hid_path_to_group)
    readouts = find_readout_params(minfo, diagnostics)
    diagnostics.settle_readouts(readouts)
    bypass = find_bypass_hidden(minfo, diagnostics)
    verdicts = find_weight_verdicts(minfo, relations, readouts, diagnostics)
    executor_jaxpr, layout = _executor_jaxpr(minfo, perturb, relations, groups)
    if warn:
        diagnostics.warn()
    return ETraceGraph(
        module_info=minfo,
        hidden_groups=groups,
        hid_path_to_group=hid_path_to_group,
        hidden_param_op_relations=relations,
        hidden_perturb=perturb,
        diagnostics=tuple(diagnostics.records),
        readout_params=readouts,
        weight_status={path: v.code for path, v in verdicts.items()},
        recurrence=recurrence,
        executor_jaxpr=executor_jaxpr,
        executor_layout=layout,
        bypass_hidden=tuple(bypass),
        example_args=tuple(args),
        bypass_eqn_indices=bypass,
        weight_verdicts=verdicts,
        verdict_cache={},
    )


def _executor_jaxpr(minfo, perturb, relations, groups):
    xs = [r.x_var for r in relations if r.x_var is not None]
    x_positions, pos = [], 0
    for r in relations:
        x_positions.append(None if r.x_var is None else pos)
        pos += r.x_var is not None
    ys = [r.y_var for r in relations]
    rel_consts = [list(c) for r in relations for c in r.y_to_hidden_group_constvars]
    rel_counts = tuple(tuple(len(c) for c in r.y_to_hidden_group_constvars) for r in relations)
    grp_consts = [list(g.transition_jaxpr_constvars) for g in groups]
    base = perturb.perturb_jaxpr
    extra = [*xs, *ys, *(v for c in rel_consts for v in c), *(v for c in grp_consts for v in c)]
    invars = [*minfo.invars, *perturb.perturb_vars]
    jaxpr = build_jaxpr(minfo.constvars, invars, [*base.outvars, *extra], base.eqns)
    n_out, n_all = minfo.num_out_leaves, len(base.outvars)
    n_rc = sum(len(c) for c in rel_consts)
    n_gc = sum(len(c) for c in grp_consts)
    start = n_all
    layout = ExecutorLayout(
        outputs=slice(0, n_out),
        states=slice(n_out, n_all),
        xs=slice(start, start + len(xs)),
        ys=slice(start + len(xs), start + len(xs) + len(ys)),
        relation_consts=slice(start + len(xs) + len(ys), start + len(xs) + len(ys) + n_rc),
        group_consts=slice(n_all + len(xs) + len(ys) + n_rc, n_all + len(extra)),
        x_positions=tuple(x_positions),
        relation_const_counts=rel_counts,
        group_const_counts=tuple(len(c) for c in grp_consts),
        detach_vars=tuple(_perturbed_hat_vars(base, perturb.perturb_vars)),
    )
    assert layout.group_consts.stop - layout.group_consts.start == n_gc
    return jaxpr, layout


def _perturbed_hat_vars(perturb_jaxpr: Any, perturb_vars: list) -> list:
    """The ``ĥ`` of every ``h = add ĥ p`` the perturbation pass inserted after the equation
    producing ``h`` (a read-only hidden state's ``h^{t-1} + p`` adds to an input: not one)."""
    pvars = dict.fromkeys(perturb_vars)
    inputs = dict.fromkeys(perturb_jaxpr.invars)
    found = []
    for eqn in perturb_jaxpr.eqns:
        if eqn.primitive is not jax.lax.add_p or len(eqn.invars) != 2:
            continue
        hat, p = eqn.invars
        if _compat.is_var(p) and p in pvars and _compat.is_var(hat) and hat not in inputs:
            found.append(hat)
    return found


def _regroup(flat: list, counts: tuple) -> list:
    out, start = [], 0
    for per_relation in counts:
        chunk = []
        for n in per_relation:
            chunk.append(list(flat[start : start + n]))
            start += n
        out.append(chunk)
    return out


def _as_path(value: Any) -> Any:
    if value is None or isinstance(value, tuple):
        return value
    return tuple(int(p) if p.isdigit() else p for p in str(value).split("."))


def _matches(record: CompilationRecord, weight_path, hidden_path, kind) -> bool:
    weight_path, hidden_path = _as_path(weight_path), _as_path(hidden_path)
    if weight_path is not None and record.weight_path != weight_path:
        if _as_path(".".join(map(str, record.weight_path or ()))) != weight_path:
            return False
    if hidden_path is not None and hidden_path not in tuple(
        _as_path(".".join(map(str, p))) for p in record.hidden_paths
    ):
        return False
    if kind is not None:
        wanted = kind if isinstance(kind, DiagnosticKind) else None
        if wanted is None:
            text = str(kind).lower()
            wanted = next((k for k in DiagnosticKind if text in (k.name.lower(), k.value)), None)
        if record.kind != wanted:
            return False
    return True


def _dot(path: Any) -> str:
    return ".".join(map(str, path))


def _under(key: str, name: str) -> bool:
    return key == name or key.startswith(name + ".")


#: the ``"format"`` of a claims snapshot (``graph.claims_json()``)
SNAPSHOT_FORMAT = "etp_viz.claims/1"


def claims_snapshot(graph: Any, algorithms: Any = (DEFAULT_LEARNER,)) -> dict[str, Any]:
    """The claims of ``graph`` for each algorithm as plain data: what ``graph.claims_json()``
    writes and ``etp_viz.testing.assert_claims`` compares.

    ``{"format": ..., "claims": {algorithm: {leaf: kind}}, "reasons": {algorithm: {leaf:
    reason}}}``; only the kinds are compared, the reasons say why (for a reader of a diff).
    """
    names = [algorithms] if isinstance(algorithms, str) else list(algorithms)
    kinds: dict[str, dict] = {}
    reasons: dict[str, dict] = {}
    for algorithm in names:
        claims = gradient_claims(graph, algorithm)
        kinds[algorithm] = {path: c.kind for path, c in claims.items()}
        reasons[algorithm] = {path: c.reason for path, c in claims.items() if c.reason}
    return {"format": SNAPSHOT_FORMAT, "claims": kinds, "reasons": reasons}
