r"""Graph executors: run the compiled step and return what the trace algorithms consume.

Per step, by evaluating the compiler's executor jaxpr (``graph.eval_executor``: the compiler
owns jaxpr evaluation, this layer owns the derivatives), the executor produces

* the model outputs and the new hidden / other state values (forward pass);
* per relation ``r``: its input :math:`x^t` and its trainable operands (the processed weights
  the ETP equation reads), and per (relation, group) :math:`D_f^t = \partial h^t/\partial y^t`
  -- one JVP of the compiler's ``y -> h`` tails (``HiddenParamOpRelation.y_to_hidden_groups``,
  everything off the tail held constant) with an all-ones tangent -- with a trailing state
  axis ``S`` (shape ``(*varshape, S)``);
* per hidden group: :math:`D^t`, the per-position block of :math:`\partial h^t/\partial h^{t-1}`
  of shape ``(*varshape, S, S)``, by ``S`` JVPs (one per state of the group, all-ones tangent
  over positions) with the boundary equations (non-gradient-enabled ETP primitives and plain
  ``dot_general`` / ``conv_general_dilated``) held constant;
* under differentiation, the exact same-step gradient of every parameter whose path to an
  output crosses no new hidden value (readouts), by a VJP through perturbation variables
  ``h^t = stopgrad(\hat h^t) + p`` (``p = 0``; the compiler's ``detach_hidden``), and the
  learning signal :math:`\partial L/\partial h^t` (total same-step derivative) from the
  cotangents of ``p``: from the same VJP when no new hidden value feeds another, else from a
  second VJP through ``h^t = \hat h^t + p`` (stacked layers: ``h1^t`` reaches the loss
  through ``h2^t``).

``D`` and ``D_f`` are evaluated with :func:`jax.lax.stop_gradient` semantics (they are
derivatives, never differentiated again). All of it is traceable: no host transfer in a step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp

from etp_viz.compiler._jaxpr import REVERSE_ONLY_PRIMITIVE_NAMES, binds

from ..autodiff import push_forward
from .plan import ExecutionPlan, build_plan

if TYPE_CHECKING:
    from etp_viz.compiler.graph import ETraceGraph, ExecutorLayout

__all__ = [
    "ETraceGraphExecutor",
    "ETraceVjpGraphExecutor",
    "MultiStepData",
]


class MultiStepData:
    """A window of ``T`` inputs for one multi-step call: ``alg(MultiStepData(xs))``.

    Every leaf of ``xs`` has the time axis first. Only learners built with
    ``vjp_method='multi-step'`` accept it under differentiation.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> MultiStepData(jnp.zeros((50, 16, 3))).num_steps
    50
    """

    def __init__(self, *xs: Any):
        if not xs:
            raise ValueError("MultiStepData needs at least one input sequence")
        self.xs = xs
        lengths = {jnp.shape(leaf)[0] for leaf in jax.tree.leaves(xs)}
        if len(lengths) != 1:
            raise ValueError(f"MultiStepData inputs disagree on the time axis: {sorted(lengths)}")
        self.num_steps = lengths.pop()


class ETraceGraphExecutor:
    """Runs a compiled eligibility-trace graph: forward, ``x``, ``D_f`` and ``D`` per step.

    Parameters
    ----------
    model : brainstate.nn.Module
        The model; its states must be initialised.

    Examples
    --------
    >>> executor = ETraceGraphExecutor(model)          # doctest: +SKIP
    >>> executor.compile_graph(x0)                     # doctest: +SKIP
    >>> outs, states, data = executor.step_data(invals)  # doctest: +SKIP
    """

    def __init__(self, model: Any, lift: bool = False):
        self.model = model
        #: compile with ``lift=True`` (plain ops on parameters lifted into ETP ops)
        self.lift = bool(lift)
        self.graph: ETraceGraph | None = None
        self.plan: ExecutionPlan | None = None
        self.example_args: Any = None
        self.reverse_tails: set[int] = set()

    @property
    def is_compiled(self) -> bool:
        return self.plan is not None

    def compile_graph(self, *args: Any) -> Any:
        """Compile the model on example inputs (one step) and resolve the execution plan."""
        from etp_viz.compiler.graph import compile_etrace_graph

        self.graph = compile_etrace_graph(self.model, *args, lift=self.lift)
        self.plan = build_plan(self.graph)
        # relations whose y -> h tails bind a custom_vjp (no forward mode), decided once
        self.reverse_tails = {
            i
            for i, rel in enumerate(self.graph.hidden_param_op_relations)
            if any(binds(j, REVERSE_ONLY_PRIMITIVE_NAMES) for j in rel.y_to_hidden_group_jaxprs)
        }
        self.example_args = jax.tree.map(
            lambda a: jax.ShapeDtypeStruct(jnp.shape(a), a.dtype), args
        )
        return self.graph

    def _compiled(self) -> tuple[ExecutionPlan, ETraceGraph]:
        """The plan and the graph (after :meth:`compile_graph`)."""
        if self.plan is None or self.graph is None:
            raise RuntimeError(
                f"{type(self).__name__} is not compiled: call compile_graph(x) with one "
                "step's example input first."
            )
        return self.plan, self.graph

    def _layout(self) -> ExecutorLayout:
        """Where the executor's outputs, new states, x, y and constants sit in its outputs."""
        layout = self._compiled()[1].executor_layout
        if layout is None:
            raise RuntimeError(
                "the compiled graph has no executor (compile_etrace_graph made none)"
            )
        return layout

    # -- per-step pieces -------------------------------------------------------------------

    def run(self, invals: Sequence[Any]) -> tuple[list, list]:
        """The plain step: ``(output leaves, new state leaves)`` from
        ``invals = [*arg leaves, *state leaves]``."""
        outvals, _ = self._compiled()[1].eval_executor(invals)
        return self._split_outvals(outvals)

    def forward(self, invals: Sequence[Any]) -> tuple[list, list, dict]:
        """Outputs, new state leaves, and what the traces need from this step:
        ``{'x': {r: x}, 'weights': {r: {key: operand}}, 'y': {r: y},
        'consts': {group: transition constants}, 'tail_consts': {r: [per group constants]}}``."""
        plan, graph = self._compiled()
        outvals, operands = graph.eval_executor(invals, collect=plan.operand_vars)
        lay = self._layout()
        xs, ys = lay.xs_of(outvals), outvals[lay.ys]
        tail_consts = lay.relation_consts_of(outvals)
        group_consts = lay.group_consts_of(outvals)
        data: dict = {
            "x": {},
            "weights": plan.split_operands(operands),
            "y": {},
            "consts": {g.index: group_consts[i] for i, g in enumerate(plan.groups)},
            "tail_consts": {},
        }
        for rel in plan.relations:
            data["x"][rel.index] = xs[rel.graph_index]
            data["y"][rel.index] = ys[rel.graph_index]
            data["tail_consts"][rel.index] = tail_consts[rel.graph_index]
        return (*self._split_outvals(outvals), data)

    def hidden_jacobians(self, invals: Sequence[Any], consts: dict) -> dict:
        """``{group: D}`` with ``D[..., a, b] = dh^t_a/dh^{t-1}_b`` per position, from the
        compiler's transition jaxpr of each group (``HiddenGroup.diagonal_jacobian``).

        ``None`` for a group whose transition is empty (``D`` is identically zero, e.g. a
        vanilla RNN whose only recurrence goes through its ETP weight): the algorithms then
        skip reading the previous trace.
        """
        plan = self._compiled()[0]
        minfo = plan.module_info
        positions = {var: i for i, var in enumerate(minfo.invars)}
        result: dict[int, Any] = {}
        for group in plan.groups:
            if not group.transition_jaxpr.eqns:  # empty transition: D is exactly zero
                result[group.index] = None
                continue
            hidden = [invals[positions[v]] for v in group.hidden_invars]
            dh_dh = group.diagonal_jacobian(hidden, consts[group.index])
            result[group.index] = jax.lax.stop_gradient(dh_dh)
        return result

    def output_jacobians(self, ys: dict, tail_consts: dict) -> dict:
        """``{(relation, group): D_f}`` of shape ``(*varshape, S)``: one JVP (all-ones
        tangent) of the relation's compiled ``y -> h`` tails; by reverse over reverse where a
        tail binds a ``jax.custom_vjp`` (a surrogate spike), which has no forward mode; exact
        zeros for a group the compiler proved zero by structure (``zero_tail_groups``)."""
        plan, graph = self._compiled()
        relations = graph.hidden_param_op_relations
        result = {}
        for rel in plan.relations:
            tails = relations[rel.graph_index]
            consts = tail_consts[rel.index]
            y = ys[rel.index]
            _, tangents = push_forward(
                lambda y, tails=tails, consts=consts: tails.y_to_hidden_groups(y, consts),
                (y,),
                (jnp.ones_like(y),),
                reverse=rel.graph_index in self.reverse_tails,
            )
            zero = set(tails.zero_tail_groups)
            for g, group, df in zip(rel.group_indices, tails.hidden_groups, tangents):
                # zero by structure (a normalisation): exactly 0, as the claim "none" says
                # (a compiled JVP may round to 1e-16 instead)
                df = jnp.zeros_like(df) if group.index in zero else df
                result[(rel.index, g)] = jax.lax.stop_gradient(df)
        return result

    def step_data(self, invals: Sequence[Any]) -> tuple[list, list, dict]:
        """Forward outputs, new state leaves and ``{'x', 'weights', 'df', 'dh_dh', ...}``."""
        outs, new_states, data = self.forward(invals)
        data["df"] = self.output_jacobians(data["y"], data["tail_consts"])
        data["dh_dh"] = self.hidden_jacobians(invals, data["consts"])
        return outs, new_states, data

    def perturbed_outputs(
        self, invals: Sequence[Any], perturbations: Sequence[Any], detach_hidden: bool = True
    ):
        """``(output and state leaves, operands)`` with ``h^t = stopgrad(ĥ^t) + p`` on every
        hidden outvar (``perturbations`` in :attr:`ExecutionPlan.hidden_outvars` order).

        Its VJP gives the exact same-step gradient of the inputs whose path to an output
        crosses no new hidden value, (through the operands) the pullback from processed
        weights to ``ParamState`` leaves, and ``dL/dp``: the total ``dL/dh^t`` when no new
        hidden value feeds another (``graph.hidden_feeds_hidden`` False), else only the
        partial one. ``detach_hidden=False`` (``h^t = ĥ^t + p``) gives the total ``dL/dh^t``
        of stacked layers (its parameter cotangents are not the readout gradients).
        """
        plan, graph = self._compiled()
        perturbs: list = [None] * len(plan.perturb_positions)
        for position, value in zip(plan.perturb_positions, perturbations):
            perturbs[position] = value
        outvals, operands = graph.eval_executor(
            invals, perturbs, collect=plan.operand_vars, detach_hidden=detach_hidden
        )
        outs, new_states = self._split_outvals(outvals)
        return [*outs, *new_states], plan.split_operands(operands)

    def operands(self, invals: Sequence[Any]) -> dict:
        """``{relation: {key: operand}}`` as a function of the inputs (for pulling gradients
        w.r.t. the processed weights back to the ``ParamState`` leaves by VJP)."""
        plan, graph = self._compiled()
        return plan.split_operands(graph.eval_executor(invals, collect=plan.operand_vars)[1])

    def _split_outvals(self, outvals: list) -> tuple[list, list]:
        lay = self._layout()
        return list(outvals[lay.outputs]), list(outvals[lay.states])


class ETraceVjpGraphExecutor(ETraceGraphExecutor):
    """The executor of the VJP-based algorithms.

    Parameters
    ----------
    model : brainstate.nn.Module
    vjp_method : {'single-step', 'multi-step'}
        ``'single-step'``: the learning signal of each step is :math:`\\partial L^t/\\partial h^t`
        through the perturbation variables. ``'multi-step'``: a call on ``MultiStepData(xs)``
        is differentiated exactly inside the window (backpropagation through its steps) and the
        past enters through the hidden state at the window entry,
        :math:`\\partial L/\\partial h^{t_0}\\cdot\\epsilon^{t_0}`.
    """

    def __init__(self, model: Any, vjp_method: str = "single-step", lift: bool = False):
        if vjp_method not in ("single-step", "multi-step"):
            raise ValueError(
                f"vjp_method must be 'single-step' or 'multi-step', got {vjp_method!r}"
            )
        super().__init__(model, lift=lift)
        self.vjp_method = vjp_method
