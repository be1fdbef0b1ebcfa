r"""Graph executors: run the compiled step and return what the trace algorithms consume.

Per step, on the compiler's flat jaxpr (``graph.module_info``), the executor produces

* the model outputs and the new hidden / other state values (forward pass);
* per relation ``r``: its input :math:`x^t` and its trainable operands (the processed weights
  the ETP equation reads), and per (relation, group) :math:`D_f^t = \partial h^t/\partial y^t`
  -- one JVP of ``y -> h`` with an all-ones tangent, the other trainable ETP equations held
  constant -- with a trailing state axis ``S`` (shape ``(*varshape, S)``);
* per hidden group: :math:`D^t`, the per-position block of :math:`\partial h^t/\partial h^{t-1}`
  of shape ``(*varshape, S, S)``, by ``S`` JVPs (one per state of the group, all-ones tangent
  over positions) with the boundary equations (non-gradient-enabled ETP primitives and plain
  ``dot_general`` / ``conv_general_dilated``) held constant;
* under differentiation, the learning signal :math:`\partial L/\partial h^t` through
  perturbation variables ``h^t = stopgrad(\hat h^t) + p`` (``p = 0``), together with the exact
  same-step gradient of every parameter whose path to an output crosses no new hidden value
  (readouts), from the same VJP.

``D`` and ``D_f`` are evaluated with :func:`jax.lax.stop_gradient` semantics (they are
derivatives, never differentiated again). All of it is traceable: no host transfer in a step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp

from etp_viz import _compat

from .trace_math import PrimitiveRules

__all__ = [
    "ETraceGraphExecutor",
    "ETraceVjpGraphExecutor",
    "ExecutionPlan",
    "MultiStepData",
    "RelationPlan",
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


@dataclasses.dataclass(frozen=True)
class RelationPlan:
    """One ETP equation whose trainable operands are traced into hidden groups."""

    index: int
    eqn_index: int
    primitive: Any
    x_var: Any
    y_var: Any
    operand_vars: dict  # trainable key -> the equation's invar
    weight_paths: dict  # trainable key -> ParamState path
    group_indices: tuple
    rules: PrimitiveRules


@dataclasses.dataclass(frozen=True)
class ExecutionPlan:
    """What the executor needs from an ``ETraceGraph``, resolved once per compilation."""

    module_info: Any
    groups: tuple
    relations: tuple
    trainable_eqns: frozenset

    @property
    def jaxpr(self):
        return self.module_info.jaxpr

    @property
    def consts(self):
        return self.module_info.consts

    @property
    def num_const_invars(self) -> int:
        """Leading invars that hold the jaxpr's constants. jax 0.12 traces closed-over arrays
        as invars (no constvars) while ``module_info.consts`` still lists their values."""
        if self.jaxpr.constvars or not self.consts:
            return 0
        return len(self.consts)

    @property
    def input_invars(self) -> list:
        """``[*model-arg leaves, *state leaves]``: what ``invals`` binds, in order."""
        return list(self.jaxpr.invars[self.num_const_invars :])

    @property
    def state_invars(self) -> list:
        num_states = sum(len(jax.tree.leaves(t)) for t in self.module_info.state_tree_invars)
        return list(self.jaxpr.invars[len(self.jaxpr.invars) - num_states :])

    @property
    def hidden_outvars(self) -> list:
        return [v for g in self.groups for v in g.hidden_outvars]


def interpret(
    plan: ExecutionPlan,
    invals: Sequence[Any],
    *,
    replace: dict | None = None,
    cut: frozenset = frozenset(),
    perturb: dict | None = None,
    capture: Sequence[Any] = (),
) -> tuple[list, list]:
    """Evaluate the flat step jaxpr with hooks; returns ``(outvals, captured)``.

    ``replace``: ``{var: value}`` used instead of what the producing equation computes;
    ``cut``: equation indices whose outputs are ``stop_gradient``-ed; ``perturb``:
    ``{hidden outvar: p}``, the value becomes ``stop_gradient(value) + p`` (read-only hidden
    states, whose outvar is an invar, are perturbed in the outputs only).
    """
    replace, perturb = replace or {}, perturb or {}
    jaxpr = plan.jaxpr
    env: dict = {}

    def read(atom):
        return env[atom] if _compat.is_var(atom) else atom.val

    if plan.num_const_invars:
        env.update(zip(jaxpr.invars[: plan.num_const_invars], plan.consts))
    else:
        env.update(zip(jaxpr.constvars, plan.consts))
    env.update(zip(plan.input_invars, invals))
    for var, value in replace.items():
        if var in env:
            env[var] = value
    for index, eqn in enumerate(jaxpr.eqns):
        if eqn.outvars and all(v in replace for v in eqn.outvars if _compat.is_var(v)):
            for var in eqn.outvars:
                env[var] = replace[var]
            continue
        params = eqn.primitive.get_bind_params(eqn.params)
        subfuns: list = []
        if isinstance(params, tuple):  # older jax: (subfuns, params)
            subfuns, params = params
        outs = eqn.primitive.bind(*subfuns, *map(read, eqn.invars), **params)
        outs = outs if eqn.primitive.multiple_results else [outs]
        for var, value in zip(eqn.outvars, outs):
            if not _compat.is_var(var):
                continue
            if index in cut:
                value = jax.lax.stop_gradient(value)
            if var in perturb:
                value = jax.lax.stop_gradient(value) + perturb[var]
            env[var] = replace.get(var, value)
    outvals = [read(v) for v in jaxpr.outvars]
    invar_set = set(jaxpr.invars)
    for i, var in enumerate(jaxpr.outvars):
        if var in perturb and var in invar_set:
            outvals[i] = outvals[i] + perturb[var]
    return outvals, [read(v) for v in capture]


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
    >>> outs, states, data = executor.forward(invals)  # doctest: +SKIP
    """

    def __init__(self, model: Any):
        self.model = model
        self.graph = None
        self.plan: ExecutionPlan | None = None
        self.example_args = None

    @property
    def is_compiled(self) -> bool:
        return self.plan is not None

    def compile_graph(self, *args: Any) -> Any:
        """Compile the model on example inputs (one step) and resolve the execution plan."""
        from .graph_adapter import build_plan, compile_model

        self.graph = compile_model(self.model, *args)
        self.plan = build_plan(self.graph)
        self.example_args = jax.tree.map(
            lambda a: jax.ShapeDtypeStruct(jnp.shape(a), a.dtype), args
        )
        return self.graph

    # -- per-step pieces -------------------------------------------------------------------

    def forward(self, invals: Sequence[Any]) -> tuple[list, list, dict]:
        """Outputs, new state leaves, and what the traces need from this step:
        ``{'x': {r: x}, 'weights': {r: {key: operand}}, 'y': {r: y},
        'consts': {group: transition constants}}``."""
        plan = self.plan
        capture: list = []
        for rel in plan.relations:
            capture.extend([rel.x_var] if rel.x_var is not None else [])
            capture.extend(rel.operand_vars.values())
            capture.append(rel.y_var)
        for group in plan.groups:
            capture.extend(group.transition_jaxpr_constvars)
        outs, captured = interpret(plan, invals, capture=capture)
        it = iter(captured)
        data: dict = {"x": {}, "weights": {}, "y": {}, "consts": {}}
        for rel in plan.relations:
            data["x"][rel.index] = next(it) if rel.x_var is not None else None
            data["weights"][rel.index] = {key: next(it) for key in rel.operand_vars}
            data["y"][rel.index] = next(it)
        for group in plan.groups:
            data["consts"][group.index] = [next(it) for _ in group.transition_jaxpr_constvars]
        n = plan.module_info.num_out_leaves
        return outs[:n], outs[n:], data

    def hidden_jacobians(self, invals: Sequence[Any], consts: dict) -> dict:
        """``{group: D}`` with ``D[..., a, b] = dh^t_a/dh^{t-1}_b`` per position, from the
        compiler's transition jaxpr of each group (``HiddenGroup.diagonal_jacobian``).

        ``None`` for a group whose transition is empty (``D`` is identically zero, e.g. a
        vanilla RNN whose only recurrence goes through its ETP weight): the algorithms then
        skip reading the previous trace.
        """
        positions = {var: i for i, var in enumerate(self.plan.input_invars)}
        result = {}
        for group in self.plan.groups:
            if not group.transition_jaxpr.eqns:  # empty transition: D is exactly zero
                result[group.index] = None
                continue
            hidden = [invals[positions[v]] for v in group.hidden_invars]
            dh_dh = group.diagonal_jacobian(hidden, consts[group.index])
            result[group.index] = jax.lax.stop_gradient(dh_dh)
        return result

    def output_jacobians(self, invals: Sequence[Any], ys: dict) -> dict:
        """``{(relation, group): D_f}`` of shape ``(*varshape, S)``."""
        plan, result = self.plan, {}
        for rel in plan.relations:
            groups = [plan.groups[g] for g in rel.group_indices]
            outvars = [v for g in groups for v in g.hidden_outvars]
            cut = plan.trainable_eqns - {rel.eqn_index}

            def tail(y, rel=rel, outvars=outvars, cut=cut):
                return interpret(plan, invals, replace={rel.y_var: y}, cut=cut, capture=outvars)[1]

            y = ys[rel.index]
            _, tangents = jax.jvp(tail, (y,), (jnp.ones_like(y),))
            start = 0
            for g in groups:
                n = len(g.hidden_outvars)
                df = g.concat_hidden(tangents[start : start + n])
                result[(rel.index, g.index)] = jax.lax.stop_gradient(df)
                start += n
        return result

    def step_data(self, invals: Sequence[Any]) -> tuple[list, list, dict]:
        """Forward outputs, new state leaves and ``{'x', 'weights', 'df', 'dh_dh'}``."""
        outs, new_states, data = self.forward(invals)
        data["df"] = self.output_jacobians(invals, data["y"])
        data["dh_dh"] = self.hidden_jacobians(invals, data["consts"])
        return outs, new_states, data

    def perturbed_outputs(self, invals: Sequence[Any], perturbations: Sequence[Any]):
        """``(outputs and state leaves, operands)`` with ``h^t = stopgrad(h^t) + p`` on every
        hidden outvar.

        Its VJP gives ``dL/dp = dL/dh^t``, the exact same-step gradient of the inputs whose
        path to an output crosses no new hidden value, and (through the operands) the pullback
        from processed weights to ``ParamState`` leaves.
        """
        plan = self.plan
        perturb = dict(zip(plan.hidden_outvars, perturbations))
        capture = [v for rel in plan.relations for v in rel.operand_vars.values()]
        outs, values = interpret(plan, invals, perturb=perturb, capture=capture)
        return outs, self._split_operands(values)

    def operands(self, invals: Sequence[Any]) -> dict:
        """``{relation: {key: operand}}`` as a function of the inputs (for pulling gradients
        w.r.t. the processed weights back to the ``ParamState`` leaves by VJP)."""
        plan = self.plan
        capture = [v for rel in plan.relations for v in rel.operand_vars.values()]
        return self._split_operands(interpret(plan, invals, capture=capture)[1])

    def _split_operands(self, values: Sequence[Any]) -> dict:
        it = iter(values)
        return {
            rel.index: {key: next(it) for key in rel.operand_vars} for rel in self.plan.relations
        }


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

    def __init__(self, model: Any, vjp_method: str = "single-step"):
        if vjp_method not in ("single-step", "multi-step"):
            raise ValueError(
                f"vjp_method must be 'single-step' or 'multi-step', got {vjp_method!r}"
            )
        super().__init__(model)
        self.vjp_method = vjp_method
