r"""The ``jax.custom_vjp`` functions behind ``ETraceVjpAlgorithm.__call__``.

Single step (``alg(x)``)
    forward: run the step, compute :math:`x^t, D_f^t, D^t`, update the traces
    :math:`\epsilon^{t-1}\to\epsilon^t`; keep ``alg.gradient_residuals(epsilon^t, data)``
    (the traces, or less: D-RTRL keeps only ``x, D_f`` where :math:`D^t\equiv 0`).
    backward: one VJP of the perturbed step gives :math:`\partial L^t/\partial h^t` (through
    ``p``) and the exact same-step gradient of the readouts; the ETP relations get
    ``residual_gradients(kept, dL/dh^t)``, pulled back from the processed weights to the
    ``ParamState`` leaves by the VJP of ``params -> operands``.

    Hidden output bypass: when an output reads hidden values from before the update
    (``plan.bypass_groups`` not empty, a static decision), the same VJP also gives
    :math:`\partial L^t/\partial h^{t-1}` along the paths that cross no new hidden value (the
    cotangent of the previous hidden values, new ones detached), and the relations get
    ``bypass_gradients(kept_prev, dL/dh^{t-1})`` too, with ``kept_prev =
    alg.bypass_residuals(epsilon^{t-1})`` (the *previous* traces of those groups only):

    .. math::

        \nabla_\theta L^t = \partial L^t/\partial\theta\big|_{h\ \mathrm{fixed}}
        + \frac{\partial L^t}{\partial h^t}\cdot\epsilon^t
        + \frac{\partial L^t}{\partial h^{t-1}}\Big|_{\mathrm{bypass}}\cdot\epsilon^{t-1}.

Multi step (``alg(MultiStepData(xs))``, ``vjp_method='multi-step'``)
    forward: scan the trace update over the window. backward: exact VJP through the window
    plus ``trace_gradients(epsilon^{t_0}, dL/dh^{t_0})`` at the window entry; a leaf the
    learner's claims call ``none`` gets 0 from both (its ``ParamState`` may be learned). No
    bypass term is needed there: :math:`\partial L/\partial h^{t_0}` is the window's exact
    VJP w.r.t. its entry state, so it already holds the first step's bypass paths, and
    :math:`\epsilon^{t_0}` is the trace that belongs to :math:`h^{t_0}`.

The states are read before and written after the custom function: it is pure.
"""

from __future__ import annotations

from typing import Any

import brainstate
import jax
import jax.numpy as jnp

from ..contract import zero_cotangent
from .trace_math import BIAS_CORRECTION_STEPS


class StateLayout:
    """Where each compiled state's leaves sit among the jaxpr invars / outvars."""

    def __init__(self, plan: Any):
        minfo = plan.module_info
        self.plan = plan
        self.states = minfo.compiled_model_states
        self.treedefs = [jax.tree.structure(st.value) for st in self.states]
        #: leaves per state (``PyTreeDef.num_leaves``, which jax's stubs do not declare)
        self.leaf_counts = [len(jax.tree.leaves(st.value)) for st in self.states]
        is_param, owner = [], []
        for i, (st, count) in enumerate(zip(self.states, self.leaf_counts)):
            is_param += [isinstance(st, brainstate.ParamState)] * count
            owner += [i] * count
        self.is_param = is_param
        self.param_positions = [i for i, p in enumerate(is_param) if p]
        self.other_positions = [i for i, p in enumerate(is_param) if not p]
        state_invars = plan.state_invars
        other_index = {state_invars[pos]: k for k, pos in enumerate(self.other_positions)}
        #: per group, the index among "other" leaves of each member's hidden value
        self.hidden_other_index = [
            [other_index[v] for v in group.hidden_invars] for group in plan.groups
        ]

    def read(self) -> tuple[list, list]:
        leaves = [leaf for st in self.states for leaf in jax.tree.leaves(st.value)]
        return [leaves[i] for i in self.param_positions], [leaves[i] for i in self.other_positions]

    def write_others(self, others: list) -> None:
        leaves: list = [None] * len(self.is_param)
        for pos, value in zip(self.other_positions, others):
            leaves[pos] = value
        start = 0
        for st, td, n in zip(self.states, self.treedefs, self.leaf_counts):
            if not isinstance(st, brainstate.ParamState):
                st.value = jax.tree.unflatten(td, leaves[start : start + n])
            start += n

    def assemble(self, arg_leaves: list, params: list, others: list) -> list:
        leaves: list = [None] * len(self.is_param)
        for pos, value in zip(self.param_positions, params):
            leaves[pos] = value
        for pos, value in zip(self.other_positions, others):
            leaves[pos] = value
        return list(arg_leaves) + leaves

    def others_of(self, state_leaves: list) -> list:
        return [state_leaves[i] for i in self.other_positions]

    def signal_per_group(self, per_hidden_outvar: list, other_cotangents: list) -> dict:
        """``{group: dL/dh}`` from the perturbation cotangents plus the cotangents of the new
        hidden values returned as state (a loss may read the state after the step)."""
        result, k = {}, 0
        for group, others in zip(self.plan.groups, self.hidden_other_index):
            parts = []
            for idx in others:
                parts.append(per_hidden_outvar[k] + other_cotangents[idx])
                k += 1
            result[group.index] = group.concat_hidden(parts)
        return result

    def hidden_of(self, others: list) -> list:
        return [others[i] for idx in self.hidden_other_index for i in idx]

    def with_hidden(self, others: list, hidden: list) -> list:
        others = list(others)
        for i, value in zip([i for idx in self.hidden_other_index for i in idx], hidden):
            others[i] = value
        return others

    def bypass_positions(self) -> list:
        """Indices among "other" leaves of the members of ``plan.bypass_groups``."""
        return [i for g in self.plan.bypass_groups for i in self.hidden_other_index[g]]

    def bypass_signal(self, hidden_cotangents: list) -> dict:
        """``{group: dL/dh^{t-1}}`` of ``plan.bypass_groups`` from the cotangents of the leaves
        at :meth:`bypass_positions`."""
        result, k = {}, 0
        for g in self.plan.bypass_groups:
            n = len(self.hidden_other_index[g])
            result[g] = self.plan.groups[g].concat_hidden(hidden_cotangents[k : k + n])
            k += n
        return result

    def entry_signal(self, hidden_cotangents: list) -> dict:
        result, k = {}, 0
        for group, idx in zip(self.plan.groups, self.hidden_other_index):
            result[group.index] = group.concat_hidden(hidden_cotangents[k : k + len(idx)])
            k += len(idx)
        return result


def _zeros(tree: Any) -> Any:
    return jax.tree.map(zero_cotangent, tree)


def _add(a: list, b: list) -> list:
    return [x + y for x, y in zip(a, b)]


def _merge_grads(a: dict, b: dict) -> dict:
    """Sum two ``{relation: {key: grad}}`` dicts (a relation may be in one only)."""
    merged = dict(a)
    for r, part in b.items():
        prev = merged.get(r)
        merged[r] = part if prev is None else {k: prev[k] + part[k] for k in part}
    return merged


def _fill_operands(operands: dict, grads: dict) -> dict:
    """Operand-shaped cotangents: the relation gradients where given, zeros elsewhere (``float0``
    for integer operands, e.g. a sparse pattern's indices)."""
    return {r: {k: _cotangent(grads.get(r, {}).get(k), v) for k, v in ops.items()}
            for r, ops in operands.items()}  # fmt: skip


def _cotangent(grad: Any, operand: Any) -> Any:
    if grad is None or not jnp.issubdtype(operand.dtype, jnp.inexact):
        return zero_cotangent(operand)
    return grad.astype(operand.dtype)


def next_count(count: Any) -> Any:
    """Number of trace updates, capped once the bias correction no longer matters."""
    return jnp.minimum(count + 1, BIAS_CORRECTION_STEPS + 1).astype(count.dtype)


def make_single_step(alg: Any):
    """``step(args) -> outputs``: reads and writes the learner's states around a custom VJP."""
    ex = alg.graph_executor
    plan = ex.plan
    layout = StateLayout(plan)
    num_out = plan.module_info.num_out_leaves
    out_treedef = plan.module_info.out_treedef
    summarize = alg.step_data_summary
    stacked_hidden = ex.graph.hidden_feeds_hidden
    bypass_at = layout.bypass_positions()  # static: empty for most models
    # the traces' cotangent is zero: built from static shapes, so no trace is a residual
    trace_shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), alg.etrace.value)

    def step_with_data(params, others, traces, prev_count, arg_leaves):
        count = next_count(prev_count)
        invals = layout.assemble(arg_leaves, params, others)
        outs, new_states, data = ex.step_data(invals)
        new_traces = alg.update_traces(traces, data, count)
        # Optional per-step record (``alg.record_step_data``): an output without a gradient.
        record = jax.lax.stop_gradient(summarize(data)) if summarize is not None else None
        return (outs, layout.others_of(new_states), new_traces, record), data

    def run(params, others, traces, prev_count, arg_leaves):
        return step_with_data(params, others, traces, prev_count, arg_leaves)[0]

    custom = jax.custom_vjp(run)

    def fwd(params, others, traces, prev_count, arg_leaves):
        primal, data = step_with_data(params, others, traces, prev_count, arg_leaves)
        outs, new_others, new_traces, record = primal
        count = next_count(prev_count)
        zeros_p = [jnp.zeros(v.aval.shape, v.aval.dtype) for v in plan.hidden_outvars]

        def readout(params, prev_hidden, perturbations):
            # prev_hidden: the bypassing groups' h^{t-1} (new hidden values are detached, so
            # its cotangent is dL^t/dh^{t-1} along the bypass paths only)
            current = list(others)
            for i, value in zip(bypass_at, prev_hidden):
                current[i] = value
            invals = layout.assemble(arg_leaves, params, current)
            return ex.perturbed_outputs(invals, perturbations)[0][:num_out]

        prev_hidden = [others[i] for i in bypass_at]
        _, vjp_fn = jax.vjp(readout, params, prev_hidden, zeros_p)
        # the pullback from processed weights to ParamState leaves, a VJP of its own: one VJP
        # returning both outputs and operands would be transposed twice in the backward (the
        # second time with a zero output cotangent, i.e. the readout's dots on zeros)
        operands, operands_fn = jax.vjp(
            lambda p: ex.operands(layout.assemble(arg_leaves, p, others)), params
        )
        signal_fn = None
        if stacked_hidden:
            # the learning signal is the total same-step dL/dh^t: h1^t also reaches the loss
            # through h2^t, which the detached readout VJP above holds fixed
            def signal(perturbations):
                invals = layout.assemble(arg_leaves, params, others)
                return ex.perturbed_outputs(invals, perturbations, detach_hidden=False)[0][:num_out]

            _, signal_fn = jax.vjp(signal, zeros_p)
        kept = alg.gradient_residuals(new_traces, data)
        # the previous traces only where an output reads h^{t-1} (static)
        kept_prev = alg.bypass_residuals(traces, plan.bypass_groups) if bypass_at else None
        residuals = (vjp_fn, operands_fn, signal_fn, kept, kept_prev, operands, count, prev_count)
        return primal, (*residuals, others, arg_leaves)

    def bwd(residuals, cotangents):
        vjp_fn, operands_fn, signal_fn, kept, kept_prev, operands, count, prev_count = residuals[:8]
        others, arg_leaves = residuals[8:]
        out_cot, other_cot, _, _ = cotangents
        readout_grads, prev_cot, p_cot = vjp_fn(list(out_cot))
        if signal_fn is not None:
            (p_cot,) = signal_fn(list(out_cot))
        dl_dh = alg.learning_signal(layout.signal_per_group(p_cot, list(other_cot)), out_cot)
        grads = alg.residual_gradients(kept, dl_dh, operands, count)
        if kept_prev is not None:
            dl_dh_prev = alg.learning_signal(layout.bypass_signal(prev_cot), out_cot, True)
            prev = alg.bypass_gradients(kept_prev, dl_dh_prev, operands, prev_count)
            grads = _merge_grads(grads, prev)
        (from_traces,) = operands_fn(_fill_operands(operands, grads))
        return (
            _add(readout_grads, from_traces),
            _zeros(others),
            jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), trace_shapes),
            zero_cotangent(prev_count),
            _zeros(arg_leaves),
        )

    custom.defvjp(fwd, bwd)

    def step(args):
        params, others = layout.read()
        prev_count = alg.count.value
        outs, new_others, new_traces, record = custom(
            params, others, alg.etrace.value, prev_count, jax.tree.leaves(args)
        )
        count = next_count(prev_count)
        layout.write_others(new_others)
        alg.etrace.value = new_traces
        alg.count.value = count
        if record is not None:
            alg.step_data_record.value = record
        return jax.tree.unflatten(out_treedef, outs)

    return step


def make_multi_step(alg: Any):
    """``step(xs) -> stacked outputs`` for ``MultiStepData`` (see the module docstring)."""
    ex = alg.graph_executor
    plan = ex.plan
    layout = StateLayout(plan)
    out_treedef = plan.module_info.out_treedef
    # every leaf claimed none gets 0, its in-window gradient included (issue 29)
    learned = alg.learning_status.learned_leaf_mask(layout, alg.graph.gradient_claims(alg))

    def run(params, others, traces, count, xs_leaves):
        def body(carry, x_leaves):
            others, traces, count = carry
            invals = layout.assemble(x_leaves, params, others)
            outs, new_states, data = ex.step_data(invals)
            count = next_count(count)
            traces = alg.update_traces(traces, data, count)
            return (layout.others_of(new_states), traces, count), outs

        (others, traces, count), outs = jax.lax.scan(body, (others, traces, count), xs_leaves)
        return outs, others, traces, count

    def window(params, hidden, others, xs_leaves):
        def body(others, x_leaves):
            outs, new_states = ex.run(layout.assemble(x_leaves, params, others))
            return layout.others_of(new_states), outs

        final, outs = jax.lax.scan(body, layout.with_hidden(others, hidden), xs_leaves)
        return outs, final

    custom = jax.custom_vjp(run)

    def fwd(params, others, traces, count, xs_leaves):
        _, _, new_traces, new_count = run(params, others, traces, count, xs_leaves)
        hidden = layout.hidden_of(others)
        (outs, final), vjp_window = jax.vjp(
            lambda p, h: window(p, h, others, xs_leaves), params, hidden
        )
        first = [leaf[0] for leaf in xs_leaves]
        operands, vjp_operands = jax.vjp(
            lambda p: ex.operands(layout.assemble(first, p, others)), params
        )
        residuals = (vjp_window, vjp_operands, traces, operands, count, others, xs_leaves)
        return (outs, final, new_traces, new_count), residuals

    def bwd(residuals, cotangents):
        vjp_window, vjp_operands, traces, operands, count, others, xs_leaves = residuals
        out_cot, other_cot, _, _ = cotangents
        window_grads, hidden_cot = vjp_window((list(out_cot), list(other_cot)))
        dl_dh = layout.entry_signal(hidden_cot)
        grads = alg.trace_gradients(traces, dl_dh, operands, count)
        (from_traces,) = vjp_operands(_fill_operands(operands, grads))
        total = _add(window_grads, from_traces)  # a none leaf: 0 from both parts
        return (
            [g if keep else jnp.zeros_like(g) for g, keep in zip(total, learned)],
            _zeros(others),
            _zeros(traces),
            zero_cotangent(count),
            _zeros(xs_leaves),
        )

    custom.defvjp(fwd, bwd)

    def step(xs):
        params, others = layout.read()
        outs, new_others, new_traces, new_count = custom(
            params, others, alg.etrace.value, alg.count.value, jax.tree.leaves(xs)
        )
        layout.write_others(new_others)
        alg.etrace.value = new_traces
        alg.count.value = new_count
        return jax.tree.unflatten(out_treedef, outs)

    return step
