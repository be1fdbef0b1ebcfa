r"""ES-D-RTRL (the reference's ``pp_prop``): online learning with an input/output factorised trace.

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

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from etp_viz.ops import get_primitive_spec

from .base import ETraceVjpAlgorithm, _float_dtype
from .trace_math import (
    bias_correction,
    compute_dtype,
    es_contract,
    es_signal,
    es_update_f,
    es_update_x,
    resolve_decay,
    resolve_trace_dtype,
    store_traces,
    widen_traces,
)

__all__ = ["ES_D_RTRL", "IODimVjpAlgorithm", "pp_prop", "x_representations"]


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
        live sharded, weights replicated (:mod:`etp_viz.learn.etp.base`).
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
        lift: bool = False,
    ):
        self.alpha_x, self.alpha_f = resolve_decay(decay_or_rank)
        self.trace_dtype = resolve_trace_dtype(trace_dtype)
        #: ``{relation: pp_x_repr}`` of the inputs averaged in another representation (set by
        #: :meth:`init_traces`)
        self._x_reprs: dict = {}
        #: ``{relation: relation whose input trace it reads}``: relations reading the same
        #: input Var (the gates of one cell, the blocks of a fused gate weight) share one trace
        self._x_owner: dict = {}
        super().__init__(model, vjp_method=vjp_method, name=name, mesh=mesh, lift=lift)

    def init_traces(self, plan: Any) -> dict:
        """``{'x': {relation: zeros like x}, 'f': {(relation, group): zeros (*varshape, S)}}``.

        With ``alpha_x > 0``, a primitive whose spec has a ``pp_x_repr`` (the embedding: the
        one-hot rows of its ids) keeps its input trace in that representation instead.
        Relations that read the same input (an LSTM's four gates, the blocks of a fused gate
        weight) keep one input trace, under the first of them: the traces are equal."""
        self._x_reprs = x_representations(plan.relations, self.alpha_x)
        self._x_owner = shared_inputs(plan.relations, self._x_reprs)
        xs = {}
        for rel in plan.relations:
            if rel.x_var is None or self._x_owner[rel.index] != rel.index:
                continue
            like = jax.ShapeDtypeStruct(rel.x_var.aval.shape, rel.x_var.aval.dtype)
            if rel.index in self._x_reprs:
                like = jax.eval_shape(self._x_reprs[rel.index], like, _avals(rel.operand_vars))
            xs[rel.index] = jnp.zeros(like.shape, like.dtype)
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
        reprs = self._x_reprs
        if self.alpha_x and any(
            not jnp.issubdtype(v.dtype, jnp.inexact) for v in traces["x"].values()
        ):
            raise ValueError(
                "ES-D-RTRL: alpha_x changed from 0 after the traces were made, and an input "
                "trace holds integer ids (kept as is when alpha_x = 0). Reset the learner's "
                "state (alg.reset_state()) so its traces are made again."
            )
        xs = {
            r: es_update_x(
                v,
                reprs[r](data["x"][r], data["weights"][r]) if r in reprs else data["x"][r],
                self.alpha_x,
            )
            for r, v in traces["x"].items()
        }
        fs = {
            (r, g): es_update_f(v, data["dh_dh"][g], data["df"][(r, g)], self.alpha_f)
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
            # states, in es_signal), then contract with the input trace once
            signal = None
            for g in rel.group_indices:
                if g not in dl_dh:  # e.g. a group without hidden output bypass
                    continue
                part = es_signal(
                    traces["f"][(rel.index, g)], dl_dh[g], correction, tuple(rel.y_var.aval.shape)
                )
                signal = part if signal is None else signal + part
            if signal is not None:
                x_trace = traces["x"].get(self._x_owner.get(rel.index, rel.index))
                grads[rel.index] = es_contract(x_trace, signal, weights[rel.index], rel.rules)
        return grads

    def bypass_residuals(self, traces: dict, groups: tuple) -> dict:
        """The previous input traces of the relations feeding ``groups`` and the previous df
        traces of those (relation, group) pairs."""
        wanted = set(groups)
        fs = {key: v for key, v in traces["f"].items() if key[1] in wanted}
        owners = {self._x_owner.get(r, r) for r, _ in fs}
        return {"x": {r: v for r, v in traces["x"].items() if r in owners}, "f": fs}

    def traces_of_path(self, traces: dict, path: tuple) -> dict:
        plan = self.graph_executor.plan
        result = {}
        for rel in plan.relations:
            if path in rel.weight_paths.values():
                for g in rel.group_indices:
                    result[(rel.index, g)] = {
                        "x": traces["x"].get(self._x_owner.get(rel.index, rel.index)),
                        "f": traces["f"][(rel.index, g)],
                    }
        return result


def x_representations(relations: Any, alpha_x: float) -> dict:
    """``{relation: pp_x_repr}`` for the relations whose input ES-D-RTRL averages in another
    representation (``alpha_x > 0`` only: with ``alpha_x = 0`` the trace is the current input,
    which every ``xy_to_dw`` takes as is). An integer input without one cannot be averaged."""
    if not alpha_x:
        return {}
    reprs = {}
    for rel in relations:
        if rel.x_var is None:
            continue
        spec = get_primitive_spec(rel.primitive)
        x_repr = spec.pp_x_repr if spec is not None else None
        if x_repr is not None:
            reprs[rel.index] = x_repr
        elif not jnp.issubdtype(rel.x_var.aval.dtype, jnp.inexact):
            paths = sorted(".".join(map(str, p)) for p in rel.weight_paths.values())
            raise ValueError(
                f"ES-D-RTRL averages each ETP input over time, but {rel.primitive.name} of "
                f"{', '.join(paths)} takes integer inputs ({rel.x_var.aval.dtype}) and has no "
                "pp_x_repr (the float representation to average, e.g. one-hot rows) in its "
                "ETPPrimitiveSpec. Register one, use decay_or_rank=(0.0, alpha_f) (no input "
                "averaging) or D-RTRL."
            )
    return reprs


def shared_inputs(relations: Any, reprs: dict) -> dict:
    """``{relation: the first relation reading the same input Var}`` (itself when none came
    before); a relation whose input is averaged in its own representation (``reprs``: built
    from its weights) keeps its own trace."""
    first: dict = {}
    owner = {}
    for rel in relations:
        if rel.x_var is None or rel.index in reprs:
            owner[rel.index] = rel.index
            continue
        owner[rel.index] = first.setdefault(rel.x_var, rel.index)
    return owner


def _avals(operand_vars: dict) -> dict:
    return {k: jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for k, v in operand_vars.items()}


class ES_D_RTRL(IODimVjpAlgorithm):  # noqa: N801 - the paper's name
    """ES-D-RTRL (the registry's ``"es_d_rtrl"``): :class:`IODimVjpAlgorithm`; same arguments.

    >>> type(etp_viz.ES_D_RTRL(model)).__name__  # doctest: +SKIP
    'ES_D_RTRL'
    """


#: The reference's preset name of ES-D-RTRL (an alias: the same class).
pp_prop = ES_D_RTRL


class OSTLFeedforward(IODimVjpAlgorithm):
    """OSTL for feed-forward (non-recurrent) layers: the factorised input x output trace of
    ES-D-RTRL (see the module docstring); arguments as :class:`etp_viz.ES_D_RTRL`.

    Examples
    --------
    >>> alg = etp_viz.OSTLFeedforward(model, decay_or_rank=0.9)   # doctest: +SKIP
    """

    claim_family = "ostl_feedforward"

    def adjust_claims(self, claims: Any) -> Any:
        for key, claim in list(claims.items()):
            claims[key] = dataclasses.replace(claim, algorithm="ostl_feedforward")
        return claims
