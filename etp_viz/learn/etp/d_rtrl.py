r"""D-RTRL: online learning with a per-parameter (diagonal) eligibility trace.

For each ETP relation (an equation :math:`y = f(x, W)`) and each hidden group :math:`h` it feeds,
the trace :math:`\epsilon \approx \partial h/\partial W` follows

.. math::

    \epsilon^t = D^t \epsilon^{t-1} + \mathrm{diag}(D_f^t) \otimes x^t,
    \qquad \nabla_W \mathcal{L} = \sum_t \frac{\partial \mathcal{L}^t}{\partial h^t}
    \cdot \epsilon^t + \frac{\partial \mathcal{L}^t}{\partial h^{t-1}}\Big|_{\mathrm{bypass}}
    \cdot \epsilon^{t-1},

where the second term (the hidden output bypass) is present only when an output reads
:math:`h^{t-1}` along a path that crosses no new hidden value (``graph.bypass_hidden``), with
:math:`D^t` the per-position block of :math:`\partial h^t/\partial h^{t-1}` and
:math:`D_f^t = \partial h^t/\partial y^t`. It is exact (equal to BPTT) when the recurrence is
element-wise, and costs :math:`O(|W|)` memory per sample.

Reference: Wang, C. et al., "Towards scalable and efficient online learning for spiking and
recurrent neural networks" (D-RTRL).
"""

from __future__ import annotations

import inspect
from typing import Any

import jax
import jax.numpy as jnp

from .base import ETraceVjpAlgorithm, _float_dtype
from .trace_math import (
    compute_dtype,
    drtrl_gradient,
    drtrl_update,
    fresh_gradient,
    resolve_trace_dtype,
    store_traces,
    widen_traces,
)

__all__ = ["D_RTRL", "ParamDimVjpAlgorithm"]


class ParamDimVjpAlgorithm(ETraceVjpAlgorithm):
    r"""Online learner with a parameter-dimension trace (D-RTRL).

    Parameters
    ----------
    model : brainstate.nn.Module
        Initialised model (``brainstate.nn.init_all_states(model, batch_size)``).
    vjp_method : {'single-step', 'multi-step'}
        See :class:`~etp_viz.learn.ETraceVjpGraphExecutor`.
    mesh : jax.sharding.Mesh, optional
        Split the batch over the mesh's ``"batch"`` axis: batch-leading states and traces
        live sharded, weights replicated (:mod:`etp_viz.learn.etp.base`).
    trace_dtype : dtype, optional
        Store the traces in this floating dtype (e.g. ``jnp.bfloat16``: half the trace memory
        and memory traffic). Each update is computed in the model's dtype and rounded once on
        store. ``None`` (default): the model's dtype.
    lift : bool
        Compile with ``lift=True``: plain ops on parameters (``x @ W``, ``W * h``, a plain
        bias) are lifted into ETP ops and learned online (:mod:`etp_viz.compiler.lift`).

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp, etp_viz
    >>> model = etp_viz.nn.MiniGRU(3, 4)                      # doctest: +SKIP
    >>> brainstate.nn.init_all_states(model)                  # doctest: +SKIP
    >>> alg = etp_viz.D_RTRL(model)                           # doctest: +SKIP
    >>> alg.compile_graph(jnp.zeros(3))                       # doctest: +SKIP
    >>> grads = brainstate.transform.grad(
    ...     lambda x: jnp.sum(alg(x) ** 2), alg.param_states)(jnp.ones(3))  # doctest: +SKIP
    """

    claim_family = "d_rtrl"  # whose gradient claims it makes (the registry's family)

    #: the traces' storage dtype (``None``: the model's); see ``trace_dtype``
    trace_dtype: Any = None

    def __init__(
        self,
        model: Any,
        vjp_method: str = "single-step",
        name: str | None = None,
        mesh: Any = None,
        trace_dtype: Any = None,
        lift: bool = False,
    ):
        self.trace_dtype = resolve_trace_dtype(trace_dtype)
        super().__init__(model, vjp_method=vjp_method, name=name, mesh=mesh, lift=lift)

    def init_traces(self, plan: Any) -> dict:
        """``{(relation, group): {key: zeros(init_drtrl layout)}}``."""
        traces = {}
        for rel in plan.relations:
            for g in rel.group_indices:
                group = plan.groups[g]
                traces[(rel.index, g)] = _init_trace(rel, group)
        self._compute_dtype = compute_dtype(_float_dtype(plan), self.trace_dtype)
        return store_traces(traces, self.trace_dtype)

    def update_traces(self, traces: dict, data: dict, count: Any) -> dict:
        """:math:`\\epsilon^t = D^t\\epsilon^{t-1} + \\mathrm{diag}(D_f^t)\\otimes x^t`."""
        plan = self.graph_executor.plan
        traces = widen_traces(traces, self.trace_dtype, self._compute_dtype)
        new = {}
        for rel in plan.relations:
            for g in rel.group_indices:
                new[(rel.index, g)] = drtrl_update(
                    traces[(rel.index, g)],
                    data["dh_dh"][g],
                    data["df"][(rel.index, g)],
                    data["x"][rel.index],
                    data["weights"][rel.index],
                    rel.rules,
                )
        return store_traces(new, self.trace_dtype)

    def trace_gradients(self, traces: dict, dl_dh: dict, weights: dict, count: Any) -> dict:
        """:math:`\\partial L/\\partial W = \\sum_g (\\partial L/\\partial h_g)\\cdot
        \\epsilon_g` per relation, shaped like its trainable operands."""
        return self.residual_gradients({"traces": traces, "fresh": {}}, dl_dh, weights, count)

    def gradient_residuals(self, new_traces: dict, data: dict) -> dict:
        """``{'traces': {key: epsilon^t}, 'fresh': {key: (x^t, D_f^t)}}``: a group with
        :math:`D^t \\equiv 0` keeps only ``x`` and ``D_f`` (its trace is exactly
        :math:`\\mathrm{diag}(D_f^t)\\otimes x^t`, so the backward never reads the
        parameter-sized trace; see :func:`~.trace_math.fresh_gradient`)."""
        fresh = {
            (r, g): (data["x"][r], data["df"][(r, g)])
            for (r, g) in new_traces
            if data["dh_dh"][g] is None
        }
        traces = {key: value for key, value in new_traces.items() if key not in fresh}
        # Ask for epsilon^t materialised once: XLA recomputing the trace update inside the
        # gradient's fusion would read epsilon^{t-1} after the in-place update of the carried
        # trace and cost a full copy of the old trace per step (~1.5x on GRU/LIF/LSTM when
        # measured on 2026-11-23). XLA:CPU now drops the barrier from the compiled module and
        # makes no such copy without it either (tests/learn/test_hlo_copies.py, jax 0.10 and
        # 0.12, checked 2026-11-29); backends that keep barriers still get the request.
        return {"traces": jax.lax.optimization_barrier(traces), "fresh": fresh}

    def residual_gradients(self, residuals: dict, dl_dh: dict, weights: dict, count: Any) -> dict:
        """The gradients of :meth:`trace_gradients` from :meth:`gradient_residuals`."""
        plan = self.graph_executor.plan
        stored = widen_traces(residuals["traces"], self.trace_dtype, self._compute_dtype)
        grads: dict = {}
        for rel in plan.relations:
            for g in rel.group_indices:
                key = (rel.index, g)
                if g not in dl_dh:  # e.g. a group without hidden output bypass
                    continue
                if key in residuals["fresh"]:
                    x, df = residuals["fresh"][key]
                    y_shape = tuple(rel.y_var.aval.shape)
                    part = fresh_gradient(x, df, dl_dh[g], weights[rel.index], rel.rules, y_shape)
                else:
                    part = drtrl_gradient(stored[key], dl_dh[g], weights[rel.index], rel.rules)
                prev = grads.get(rel.index)
                grads[rel.index] = part if prev is None else {k: prev[k] + part[k] for k in part}
        return grads

    def bypass_residuals(self, traces: dict, groups: tuple) -> dict:
        r"""The previous traces :math:`\epsilon^{t-1}` of the (relation, group) pairs of
        ``groups``, in :meth:`gradient_residuals` form (a group with :math:`D\equiv 0` still
        needs its whole previous trace here)."""
        wanted = set(groups)
        return {"traces": {k: v for k, v in traces.items() if k[1] in wanted}, "fresh": {}}

    def bypass_gradients(self, kept: dict, dl_dh_prev: dict, weights: dict, count: Any) -> dict:
        r""":math:`\sum_g (\partial L^t/\partial h_g^{t-1})\big|_{\mathrm{bypass}}\cdot
        \epsilon_g^{t-1}` (:func:`~.trace_math.drtrl_gradient` on the previous traces)."""
        return self.residual_gradients(kept, dl_dh_prev, weights, count)

    def traces_of_path(self, traces: dict, path: tuple) -> dict:
        plan = self.graph_executor.plan
        return {
            key: {
                k: v for k, v in trace.items() if plan.relations[key[0]].weight_paths.get(k) == path
            }
            for key, trace in traces.items()
            if path in plan.relations[key[0]].weight_paths.values()
        }


def _init_trace(rel: Any, group: Any) -> dict:
    """The ``init_drtrl`` layout; element-wise weights broadcast over the hidden state (e.g. a
    per-unit weight shared by a batch) get a hidden-shaped trace ``(*varshape, S)``."""
    from etp_viz import ops as _ops

    y_shape = tuple(rel.y_var.aval.shape)
    if rel.x_var is None and y_shape != tuple(group.varshape):
        dtype = rel.y_var.aval.dtype
        return {k: jnp.zeros((*group.varshape, group.num_state), dtype) for k in rel.operand_vars}
    init = _ops.ETP_RULES_INIT_DRTRL[rel.primitive]
    params = rel.rules.params if _accepts_params(init) else {}
    return dict(init(rel.x_var, rel.y_var, dict(rel.operand_vars), group.num_state, **params))


def _accepts_params(fn: Any) -> bool:
    """Whether an ``init_drtrl`` rule takes the equation's static params (``**params``)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # pragma: no cover - builtins
        return False
    return any(p.kind is p.VAR_KEYWORD for p in parameters)


class D_RTRL(ParamDimVjpAlgorithm):  # noqa: N801 - the algorithm's name in the papers
    """Preset of :class:`ParamDimVjpAlgorithm` (D-RTRL); same arguments."""
