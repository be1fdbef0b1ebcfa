r"""ES-D-RTRL (pp_prop): online learning with an input/output factorised trace.

Per relation :math:`y = f(x, W)` an input trace, and per (relation, hidden group) an output
(df) trace:

.. math::

    \epsilon_x^t = \alpha_x \epsilon_x^{t-1} + x^t, \qquad
    \epsilon_f^t = \alpha_f D^t \epsilon_f^{t-1} + (1-\alpha_f) D_f^t,

    \nabla_W \mathcal{L}^t = \mathrm{xy\_to\_dw}\Big(\epsilon_x^t,\;
    \frac{\epsilon_f^t}{1-\alpha_f^{k}} \odot \frac{\partial \mathcal{L}^t}{\partial h^t}\Big),

with :math:`k` the number of trace updates so far (the startup bias correction, dropped once
:math:`k > 1000`). When an output reads :math:`h^{t-1}` along a path that crosses no new hidden
value (``graph.bypass_hidden``), the hidden output bypass term of the previous traces is added:

.. math::

    \nabla_W \mathcal{L}^t \mathrel{+}= \mathrm{xy\_to\_dw}\Big(\epsilon_x^{t-1},\;
    \frac{\epsilon_f^{t-1}}{1-\alpha_f^{k-1}} \odot
    \frac{\partial \mathcal{L}^t}{\partial h^{t-1}}\Big|_{\mathrm{bypass}}\Big)

(zero at the first step, where the previous traces are zero). Memory :math:`O(|x| + |h|)` per
sample instead of :math:`O(|W|)`; exact at the first step, approximate afterwards.

Reference: Wang, C. et al., "Towards scalable and efficient online learning for spiking and
recurrent neural networks" (ES-D-RTRL).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from .base import ETraceVjpAlgorithm, _float_dtype
from .trace_math import (
    bias_correction,
    compute_dtype,
    pp_contract,
    pp_signal,
    pp_update_f,
    pp_update_x,
    resolve_decay,
    resolve_trace_dtype,
    store_traces,
    widen_traces,
)

__all__ = ["ES_D_RTRL", "IODimVjpAlgorithm", "pp_prop"]


class IODimVjpAlgorithm(ETraceVjpAlgorithm):
    r"""Online learner with input- and output-dimension traces (ES-D-RTRL / pp_prop).

    Parameters
    ----------
    model : brainstate.nn.Module
        Initialised model.
    decay_or_rank : float, int or (float, float)
        A float in ``[0, 1)`` is the decay of both traces; an int ``r >= 1`` means the decay
        ``(r-1)/(r+1)``; a pair sets ``(alpha_x, alpha_f)``.
    vjp_method : {'single-step', 'multi-step'}
    mesh : jax.sharding.Mesh, optional
        Split the batch over the mesh's ``"batch"`` axis: batch-leading states and traces
        live sharded, weights replicated (:mod:`etp_viz.learn.base`).
    trace_dtype : dtype, optional
        Store the input and df traces in this floating dtype (e.g. ``jnp.bfloat16``); each
        update is computed in the model's dtype and rounded once on store. ``None``
        (default): the model's dtype.

    Examples
    --------
    >>> alg = etp_viz.ES_D_RTRL(model, decay_or_rank=0.9)    # doctest: +SKIP
    >>> alg.compile_graph(x0); y = alg(x1)                   # doctest: +SKIP
    """

    claim_family = "es_d_rtrl"  # whose gradient claims it makes (the registry's family)

    def __init__(
        self,
        model: Any,
        decay_or_rank: Any = 0.9,
        vjp_method: str = "single-step",
        name: str | None = None,
        mesh: Any = None,
        trace_dtype: Any = None,
    ):
        self.alpha_x, self.alpha_f = resolve_decay(decay_or_rank)
        self.trace_dtype = resolve_trace_dtype(trace_dtype)
        super().__init__(model, vjp_method=vjp_method, name=name, mesh=mesh)

    def init_traces(self, plan: Any) -> dict:
        """``{'x': {relation: zeros like x}, 'f': {(relation, group): zeros (*varshape, S)}}``."""
        for rel in plan.relations:
            x_dtype = None if rel.x_var is None else rel.x_var.aval.dtype
            if x_dtype is not None and not jnp.issubdtype(x_dtype, jnp.inexact) and self.alpha_x:
                paths = sorted(".".join(map(str, p)) for p in rel.weight_paths.values())
                raise ValueError(
                    f"ES-D-RTRL averages each ETP input over time, but {rel.primitive.name} of "
                    f"{', '.join(paths)} takes integer inputs ({x_dtype}, e.g. embedding ids), "
                    "whose average is meaningless. Use decay_or_rank=(0.0, alpha_f) (no input "
                    "averaging) or D-RTRL."
                )
        xs = {
            rel.index: jnp.zeros(rel.x_var.aval.shape, rel.x_var.aval.dtype)
            for rel in plan.relations
            if rel.x_var is not None
        }
        fs = {
            (rel.index, g): jnp.zeros(
                (*plan.groups[g].varshape, plan.groups[g].num_state), rel.y_var.aval.dtype
            )
            for rel in plan.relations
            for g in rel.group_indices
        }
        self._compute_dtype = compute_dtype(_float_dtype(plan), self.trace_dtype)
        return store_traces({"x": xs, "f": fs}, self.trace_dtype)

    def update_traces(self, traces: dict, data: dict, count: Any) -> dict:
        plan = self.graph_executor.plan
        traces = widen_traces(traces, self.trace_dtype, self._compute_dtype)
        xs = {r: pp_update_x(v, data["x"][r], self.alpha_x) for r, v in traces["x"].items()}
        fs = {
            (r, g): pp_update_f(v, data["dh_dh"][g], data["df"][(r, g)], self.alpha_f)
            for (r, g), v in traces["f"].items()
        }
        del plan
        return store_traces({"x": xs, "f": fs}, self.trace_dtype)

    def trace_gradients(self, traces: dict, dl_dh: dict, weights: dict, count: Any) -> dict:
        plan = self.graph_executor.plan
        traces = widen_traces(traces, self.trace_dtype, self._compute_dtype)
        correction = bias_correction(self.alpha_f, count)
        grads: dict = {}
        for rel in plan.relations:
            # xy_to_dw is linear in its signal: sum the signals of the relation's groups (and
            # states, in pp_signal), then contract with the input trace once
            signal = None
            for g in rel.group_indices:
                if g not in dl_dh:  # e.g. a group without hidden output bypass
                    continue
                part = pp_signal(
                    traces["f"][(rel.index, g)], dl_dh[g], correction, tuple(rel.y_var.aval.shape)
                )
                signal = part if signal is None else signal + part
            if signal is not None:
                grads[rel.index] = pp_contract(
                    traces["x"].get(rel.index), signal, weights[rel.index], rel.rules
                )
        return grads

    def bypass_residuals(self, traces: dict, groups: tuple) -> dict:
        """The previous input traces of the relations feeding ``groups`` and the previous df
        traces of those (relation, group) pairs."""
        wanted = set(groups)
        fs = {key: v for key, v in traces["f"].items() if key[1] in wanted}
        relations = {r for r, _ in fs}
        return {"x": {r: v for r, v in traces["x"].items() if r in relations}, "f": fs}

    def traces_of_path(self, traces: dict, path: tuple) -> dict:
        plan = self.graph_executor.plan
        result = {}
        for rel in plan.relations:
            if path in rel.weight_paths.values():
                for g in rel.group_indices:
                    result[(rel.index, g)] = {
                        "x": traces["x"].get(rel.index),
                        "f": traces["f"][(rel.index, g)],
                    }
        return result


class pp_prop(IODimVjpAlgorithm):  # noqa: N801 - the reference's preset name
    """Preset of :class:`IODimVjpAlgorithm`; same arguments."""


#: ES-D-RTRL is the paper's name of pp_prop.
ES_D_RTRL = pp_prop
