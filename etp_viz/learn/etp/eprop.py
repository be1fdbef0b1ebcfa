r"""e-prop: D-RTRL's per-parameter eligibility trace, a low-pass (kappa) filter on it, and
symmetric or fixed random feedback of the learning signal.

Bellec et al. (2020), "A solution to the learning dilemma for recurrent networks of spiking
neurons", write the gradient of a weight as a sum over time of a *learning signal* times an
*eligibility trace*. In this library's terms, with :math:`\epsilon^t\approx\partial h^t/\partial
W` the D-RTRL trace (:class:`~etp_viz.D_RTRL`),

.. math::

    \bar\epsilon^t = \kappa\,\bar\epsilon^{t-1} + \epsilon^t, \qquad
    \nabla_W \mathcal{L} \approx \sum_t L^t\cdot\bar\epsilon^t,

where :math:`\kappa` (``kappa_filter_decay``) is the leak of a low-pass readout (``0``: no
filter, :math:`\bar\epsilon=\epsilon`) and the learning signal :math:`L^t` is

* ``feedback="symmetric"``: the exact same-step :math:`\partial\mathcal{L}^t/\partial h^t`
  (through the real output weights) -- with :math:`\kappa=0` this *is* D-RTRL;
* ``feedback="random"`` (random e-prop): for a hidden group that reaches the outputs only
  through trainable ETP weights, the output error :math:`\partial\mathcal{L}^t/\partial y^t`
  projected by a fixed random matrix :math:`B_g` (entries :math:`\mathcal{N}(0, 1/n_{out})`,
  drawn once from ``random_feedback_key``) instead of the transposed output weights. Groups
  whose new value reaches an output without crossing an ETP weight (a leaky readout) keep the
  exact signal, so the output weights learn with their true gradient; a random group gets no
  hidden-output-bypass term (the projected error stands for its whole signal).

Both choices are approximations (the gradient claims say so); e-prop's point is that they are
local in time and (random) in space. :class:`ThreeFactor` replaces the learning signal by a
scalar third factor of the step (a reward), on the same trace.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp

from etp_viz import _compat

from .d_rtrl import ParamDimVjpAlgorithm

__all__ = ["EProp", "ThreeFactor"]

FEEDBACKS = ("symmetric", "random")


class EProp(ParamDimVjpAlgorithm):
    r"""e-prop (Bellec et al. 2020) on the D-RTRL trace (see the module docstring).

    Parameters
    ----------
    model : brainstate.nn.Module
        Initialised model.
    feedback : {'symmetric', 'random'}
        The learning signal: exact (``'symmetric'``) or the output error through fixed random
        feedback matrices (``'random'``).
    kappa_filter_decay : float
        :math:`\kappa\in[0, 1)`, the low-pass filter of the eligibility trace (0: none).
    random_feedback_key : jax PRNG key or int, optional
        Draws the random feedback matrices (default: key 0).
    vjp_method : {'single-step', 'multi-step'}
        Random feedback needs ``'single-step'``.
    mesh : jax.sharding.Mesh, optional
        Split the batch over the mesh's ``"batch"`` axis (:mod:`etp_viz.learn.etp.base`).

    Examples
    --------
    >>> alg = etp_viz.EProp(model, kappa_filter_decay=0.9, feedback="random")  # doctest: +SKIP
    >>> alg.compile_graph(x0); y = alg(x1)                                     # doctest: +SKIP
    """

    claim_family = "eprop"  # whose gradient claims it makes (the registry's family)

    def __init__(
        self,
        model: Any,
        feedback: str = "symmetric",
        kappa_filter_decay: float = 0.0,
        random_feedback_key: Any = None,
        vjp_method: str = "single-step",
        name: str | None = None,
        mesh: Any = None,
        lift: bool = False,
    ):
        if feedback not in FEEDBACKS:
            raise ValueError(f"feedback must be one of {FEEDBACKS}, got {feedback!r}")
        kappa = float(kappa_filter_decay)
        if not 0.0 <= kappa < 1.0:
            raise ValueError(f"kappa_filter_decay must be in [0, 1), got {kappa_filter_decay!r}")
        if feedback == "random" and vjp_method != "single-step":
            raise ValueError(
                "random feedback replaces each step's learning signal, so it needs "
                "vjp_method='single-step' (a multi-step window backpropagates exactly)"
            )
        if kappa and vjp_method != "single-step":
            raise ValueError("the kappa filter needs vjp_method='single-step'")
        self.feedback = feedback
        self.kappa = kappa
        if random_feedback_key is None:
            random_feedback_key = 0
        if isinstance(random_feedback_key, int):
            random_feedback_key = jax.random.PRNGKey(random_feedback_key)
        self.random_feedback_key = random_feedback_key
        self.feedback_matrices: dict = {}
        super().__init__(model, vjp_method=vjp_method, name=name, mesh=mesh, lift=lift)

    # -- traces: the D-RTRL trace, and its filtered copy when kappa > 0 ----------------------
    def init_traces(self, plan: Any) -> dict:
        traces = super().init_traces(plan)
        if self.kappa:
            traces.update({(*key, "kappa"): dict(value) for key, value in list(traces.items())})
        return traces

    def update_traces(self, traces: dict, data: dict, count: Any) -> dict:
        raw = {k: v for k, v in traces.items() if len(k) == 2}
        new = super().update_traces(raw, data, count)
        if self.kappa:
            for key, eps in list(new.items()):
                old = traces[(*key, "kappa")]
                new[(*key, "kappa")] = {k: self.kappa * old[k] + eps[k] for k in eps}
        return new

    def _contracted(self, traces: dict) -> dict:
        """The traces the gradient reads: the filtered ones when kappa > 0."""
        if not self.kappa:
            return traces
        return {key[:2]: value for key, value in traces.items() if len(key) == 3}

    def gradient_residuals(self, new_traces: dict, data: dict) -> dict:
        if not self.kappa:
            return super().gradient_residuals(new_traces, data)
        return {"traces": jax.lax.optimization_barrier(self._contracted(new_traces)), "fresh": {}}

    def trace_gradients(self, traces: dict, dl_dh: dict, weights: dict, count: Any) -> dict:
        return super().trace_gradients(self._contracted(traces), dl_dh, weights, count)

    def bypass_residuals(self, traces: dict, groups: tuple) -> dict:
        return super().bypass_residuals(self._contracted(traces), groups)

    def traces_of_path(self, traces: dict, path: tuple) -> dict:
        raw = {k: v for k, v in traces.items() if len(k) == 2}
        return super().traces_of_path(raw, path)

    # -- the learning signal ------------------------------------------------------------------
    def init_etrace_state(self, *args: Any, **kwargs: Any) -> None:
        self.feedback_matrices = self._draw_feedback() if self.feedback == "random" else {}
        super().init_etrace_state(*args, **kwargs)

    def learning_signal(self, dl_dh: dict, out_cotangents: list, previous: bool = False) -> dict:
        if not self.feedback_matrices:
            return dl_dh
        if previous:  # a random group's projected error stands for its whole signal
            return {g: s for g, s in dl_dh.items() if g not in self.feedback_matrices}
        plan = self.graph_executor.plan
        batch = _batch_size(self.graph_executor.example_args)
        signal = dict(dl_dh)
        for g, matrix in self.feedback_matrices.items():
            group = plan.groups[g]
            shape = (*tuple(group.varshape), group.num_state)
            batched = batch is not None and shape[0] == batch
            lead = (batch,) if batched else ()
            error = jnp.concatenate(
                [jnp.reshape(jnp.asarray(c), (*lead, -1)) for c in out_cotangents], axis=-1
            )
            signal[g] = jnp.reshape(error.astype(matrix.dtype) @ matrix, shape)
        return signal

    def random_groups(self) -> tuple:
        """Indices of the hidden groups whose learning signal random feedback replaces."""
        return tuple(sorted(self.feedback_matrices))

    def random_feedback_leaves(self) -> set:
        """``{(ParamState path, leaf index)}``: every parameter leaf a relation into a random
        group is computed from (the learner pulls that relation's gradient back to each).

        A relation names one ParamState per trainable operand, but a weight computed from
        several (weight normalisation ``g * v / |v|``) is pulled back to all of them: ``g``
        learns from the random signal as much as ``v`` does (it was claimed exact, 1.3-1.8
        off BPTT, when only the named ``v`` was counted).

        >>> alg.random_feedback_leaves()   # doctest: +SKIP
        {(('v',), 0), (('g',), 0)}
        """
        from etp_viz.compiler.dataflow import relation_leaves

        if self.feedback != "random" or not self.is_compiled:
            return set()
        plan = self.graph_executor.plan
        relations = self.graph.hidden_param_op_relations
        random = set(self.random_groups())
        leaves: set = set()
        for rel in plan.relations:
            if random & set(rel.group_indices):
                graph_rel = relations[rel.graph_index]
                for key in graph_rel.trainable_vars:
                    leaves.update((tuple(p), i) for p, i in relation_leaves(graph_rel, key))
        return leaves

    def _draw_feedback(self) -> dict:
        plan = self.graph_executor.plan
        direct = direct_output_groups(plan)
        batch = _batch_size(self.graph_executor.example_args)
        outs = [v for v in plan.module_info.out_vars if _compat.is_var(v)]
        matrices = {}
        keys = jax.random.split(self.random_feedback_key, max(len(plan.groups), 1))
        for group in plan.groups:
            if group.index in direct:
                continue
            shape = (*tuple(group.varshape), group.num_state)
            batched = batch is not None and shape[0] == batch
            per_sample = shape[1:] if batched else shape
            num_out = sum(math.prod(v.aval.shape[1:] if batched else v.aval.shape) for v in outs)
            if num_out == 0:
                continue
            size = math.prod(per_sample)
            dtype = _float_dtype_of(outs)
            matrices[group.index] = jax.random.normal(
                keys[group.index], (num_out, size), dtype
            ) / jnp.sqrt(jnp.asarray(num_out, dtype))
        return matrices

    # -- claims -------------------------------------------------------------------------------
    def adjust_claims(self, claims: Any) -> Any:
        """D-RTRL's claims, made approximate where the filter or random feedback changes the
        gradient (``graph.gradient_claims(alg)`` calls this)."""
        reasons = []
        if self.kappa:
            reasons.append(
                f"e-prop low-pass filters the eligibility trace (kappa={self.kappa:g}): each "
                "step's learning signal meets a decaying sum of past traces"
            )
        random_leaves = self.random_feedback_leaves()
        for key, claim in list(claims.items()):
            extra = list(reasons) if claim.online else []
            fed = claim.online and (tuple(claim.weight_path), claim.leaf_index) in random_leaves
            if fed:
                extra.append(
                    "random feedback: the learning signal of its hidden group is the output "
                    "error through a fixed random matrix, not the output weights"
                )
            kind = claim.kind
            if extra and kind == "exact":
                kind = "approximate"
            elif kind == "none" and fed:
                kind = "approximate"  # the random signal is the output error: not zero
            reason = "; ".join([r for r in (claim.reason, *extra) if r])
            claims[key] = dataclasses.replace(claim, kind=kind, reason=reason, algorithm="eprop")
        return claims


def direct_output_groups(plan: Any) -> set:
    """Groups whose new value reaches a model output without crossing an ETP primitive (a
    readout state): their learning signal does not travel through a trainable weight."""
    from etp_viz.ops import is_etp_primitive

    minfo = plan.module_info
    outs = {v for v in minfo.out_vars if _compat.is_var(v)}
    direct = set()
    for group in plan.groups:
        tainted = {v for v in group.hidden_outvars if _compat.is_var(v)}
        for eqn in minfo.jaxpr.eqns:
            if is_etp_primitive(eqn.primitive):
                continue
            if any(_compat.is_var(v) and v in tainted for v in eqn.invars):
                tainted.update(v for v in eqn.outvars if _compat.is_var(v))
        if tainted & outs:
            direct.add(group.index)
    return direct


def _batch_size(example: Any) -> int | None:
    leaves = jax.tree.leaves(example)
    return leaves[0].shape[0] if leaves and len(leaves[0].shape) >= 2 else None


def _float_dtype_of(outs: list) -> Any:
    for v in outs:
        if jnp.issubdtype(v.aval.dtype, jnp.floating):
            return v.aval.dtype
    return jnp.result_type(float)


#: the key of ThreeFactor's step counter among its traces
STEP = (-1,)  # comparable with the (relation, group) keys a pytree dict sorts


class ThreeFactor(ParamDimVjpAlgorithm):
    r"""A reward-modulated three-factor rule on the D-RTRL eligibility trace.

    Each ETP weight's update is a third factor times its eligibility trace,
    :math:`\Delta W \propto M(t)\,\sum_i \epsilon_{i,W}^t`, with :math:`\epsilon` D-RTRL's trace
    (pre-synaptic input filtered by the post-synaptic dynamics) and :math:`M(t)` =
    ``modulator(t)`` a scalar of the step number ``t`` (0 at compile or reset; a traceable
    function, e.g. a reward schedule read from an array). The "gradient" it reports is
    :math:`-M(t)\,\sum_i\epsilon_i^t`, so a descent optimiser moves the weights *along* the
    trace when :math:`M > 0` (reward) and against it when :math:`M < 0`. The loss does not
    enter these weights' updates; readout weights (no hidden state between them and the output)
    keep their exact loss gradient. There is no hidden-output-bypass term.

    Parameters
    ----------
    model : brainstate.nn.Module
    modulator : callable
        ``modulator(t) -> scalar`` with ``t`` an integer array (the step number).

    Examples
    --------
    >>> rewards = jnp.asarray(reward_per_step)                            # doctest: +SKIP
    >>> alg = etp_viz.ThreeFactor(model, modulator=lambda t: rewards[t])  # doctest: +SKIP
    """

    def __init__(
        self,
        model: Any,
        modulator: Any,
        vjp_method: str = "single-step",
        name: str | None = None,
        mesh: Any = None,
        lift: bool = False,
    ):
        if not callable(modulator):
            raise TypeError(
                f"modulator must be a function of the step, modulator(t) -> scalar; got "
                f"{modulator!r}"
            )
        if vjp_method != "single-step":
            raise ValueError("a three-factor rule modulates each step: vjp_method='single-step'")
        self.modulator = modulator
        super().__init__(model, vjp_method=vjp_method, name=name, mesh=mesh, lift=lift)

    def init_traces(self, plan: Any) -> dict:
        traces = super().init_traces(plan)
        traces[STEP] = jnp.zeros((), jnp.int32)
        return traces

    def update_traces(self, traces: dict, data: dict, count: Any) -> dict:
        new = super().update_traces(_eligibility(traces), data, count)
        new[STEP] = traces[STEP] + 1
        return new

    def gradient_residuals(self, new_traces: dict, data: dict) -> dict:
        residuals = super().gradient_residuals(_eligibility(new_traces), data)
        return {**residuals, "step": new_traces[STEP] - 1}

    def residual_gradients(self, residuals: dict, dl_dh: dict, weights: dict, count: Any) -> dict:
        factor = jnp.asarray(self.modulator(residuals["step"])).reshape(())
        signal = {g: -factor.astype(s.dtype) * jnp.ones_like(s) for g, s in dl_dh.items()}
        return super().residual_gradients(residuals, signal, weights, count)

    def bypass_residuals(self, traces: dict, groups: tuple) -> dict:
        return {"traces": {}, "fresh": {}}

    def bypass_gradients(self, kept: dict, dl_dh_prev: dict, weights: dict, count: Any) -> dict:
        return {}

    def traces_of_path(self, traces: dict, path: tuple) -> dict:
        return super().traces_of_path(_eligibility(traces), path)

    def adjust_claims(self, claims: Any) -> Any:
        for key, claim in list(claims.items()):
            if claim.online:
                claim = dataclasses.replace(
                    claim,
                    kind="approximate",
                    reason="three-factor rule: modulator(t) x eligibility trace, not the "
                    "loss gradient",
                )
            claims[key] = dataclasses.replace(claim, algorithm="three_factor")
        return claims


def _eligibility(traces: dict) -> dict:
    return {k: v for k, v in traces.items() if k != STEP}
