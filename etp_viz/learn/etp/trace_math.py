r"""The trace algebra of D-RTRL and ES-D-RTRL (pp_prop) as pure functions.

Everything here works on one (relation, hidden group) pair and one time step, with arrays only
(no graph, no states), so it can be read next to the papers and tested in isolation. Shapes:

* ``dh_dh`` -- the per-position block :math:`D^t` of :math:`\partial h^t/\partial h^{t-1}`,
  shape ``(*varshape, S, S)`` with entry ``[p, a, b] = d h^t[p, a] / d h^{t-1}[p, b]``;
* ``df`` -- :math:`D_f^t = \partial h^t/\partial y^t` (one JVP with an all-ones tangent per
  state), shape ``(*varshape, S)``; exact when the tail ``y -> h`` is element-wise;
* ``dl_dh`` -- the learning signal :math:`\partial L/\partial h^t`, shape ``(*varshape, S)``;
* ``x`` -- the primitive's input :math:`x^t` (``None`` for element-wise weights).

``rules`` is a :class:`PrimitiveRules` (the primitive's ETP rules, see ``etp_viz.ops``).

References
----------
Wang, C. et al. "Towards scalable and efficient online learning for spiking and recurrent
neural networks" (D-RTRL and ES-D-RTRL, the eligibility-trace propagation framework).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ..._compat import is_var

#: bias correction of the ES-D-RTRL df trace is dropped after this many updates
#: (:math:`\alpha_f^{1000}` is below float32 resolution for any useful decay).
BIAS_CORRECTION_STEPS = 1000


class PrimitiveRules(NamedTuple):
    """The ETP rules of one primitive, bound to an equation's static params."""

    yw_to_w: Callable[..., dict]
    xy_to_dw: Callable[..., dict]
    xy_to_etrace: Callable[..., dict]
    etrace_to_dw: Callable[..., dict]
    params: dict
    #: keys of the non-trainable operands (``etp_viz.ops.get_aux_invars``) in ``weights``
    aux_keys: tuple = ()

    def bind(self, weights: dict) -> tuple[dict, PrimitiveRules]:
        """``(trainable weights, rules)`` with the non-trainable operands moved from ``weights``
        into the rules' keyword arguments (a sparse pattern's traced indices)."""
        if not self.aux_keys:
            return weights, self
        trainable = {k: v for k, v in weights.items() if k not in self.aux_keys}
        aux = {k: weights[k] for k in self.aux_keys}
        return trainable, self._replace(params={**self.params, **aux})


def _slice(trace: dict, index: int) -> dict:
    if next(iter(trace.values())).shape[-1] == 1:  # a reshape, not a strided copy
        return {key: jnp.squeeze(value, -1) for key, value in trace.items()}
    return {key: value[..., index] for key, value in trace.items()}


def _add(a: dict, b: dict) -> dict:
    return {key: a[key] + b[key] for key in a}


def _stack(slices: list, like: dict) -> dict:
    if len(slices) == 1:
        return {key: slices[0][key][..., None].astype(like[key].dtype) for key in like}
    return {key: jnp.stack([s[key] for s in slices], -1).astype(like[key].dtype) for key in like}


def drtrl_update(
    trace: dict, dh_dh: Any, df: Any, x: Any, weights: dict, rules: PrimitiveRules
) -> dict:
    r"""One D-RTRL step of the parameter-dimension eligibility trace.

    .. math::

        \epsilon^t = D^t \epsilon^{t-1} + \mathrm{diag}(D_f^t) \otimes x^t,

    per state ``a`` of the group:
    :math:`\epsilon^t_a = \sum_b \mathrm{yw\_to\_w}(D^t_{ab}, \epsilon^{t-1}_b) +
    \mathrm{xy\_to\_etrace}(x^t, D^t_{f,a})`. ``trace`` is laid out as ``init_drtrl`` (one
    leaf per trainable key, trailing state axis ``S``); the result has the same layout.
    ``dh_dh=None`` means :math:`D^t \equiv 0` (a group with an empty transition, e.g. a vanilla
    RNN): the previous trace is not read at all.
    """
    weights, rules = rules.bind(weights)
    num_state = df.shape[-1]
    if num_state == 1 and dh_dh is not None:
        scale = _trace_scale(rules, dh_dh[..., 0, 0], _slice(trace, 0))
        if scale is not None:
            fresh = rules.xy_to_etrace(x, df[..., 0], weights, **rules.params)
            return {
                key: (trace[key] * scale[key][..., None] + fresh[key][..., None]).astype(
                    trace[key].dtype
                )
                for key in trace
            }
    slices = []
    for a in range(num_state):
        acc = rules.xy_to_etrace(x, df[..., a], weights, **rules.params)
        for b in range(num_state if dh_dh is not None else 0):
            acc = _add(acc, rules.yw_to_w(dh_dh[..., a, b], _slice(trace, b), **rules.params))
        slices.append(acc)
    return _stack(slices, trace)


def _trace_scale(rules: PrimitiveRules, dh: Any, like: dict) -> dict | None:
    r"""``{key: g}`` with ``yw_to_w(dh, trace) == trace * g`` (``g = yw_to_w(dh, ones)``),
    or ``None`` when the rule is not such a scaling, judged from its jaxpr: every output is a
    ``mul`` of its own trace leaf by a factor that does not read the trace, in the trace's
    shape and dtype (every built-in family; a registered rule may be anything).

    With one state (``S = 1``) :func:`drtrl_update` then scales the trace in its own
    ``(..., 1)`` layout. Squeezing the state axis and restoring it is a bitcast around the
    update, and XLA does not update a carried buffer in place through a bitcast: the step would
    copy the whole trace once more (a read and a write of the largest array in the step)."""
    keys = sorted(like)
    shapes = [jax.ShapeDtypeStruct(jnp.shape(like[k]), jnp.result_type(like[k])) for k in keys]
    dh_shape = jax.ShapeDtypeStruct(jnp.shape(dh), jnp.result_type(dh))

    def rule(dh, *leaves):
        out = rules.yw_to_w(dh, dict(zip(keys, leaves)), **rules.params)
        return [out.get(k) for k in keys] if set(out) == set(keys) else None

    try:
        closed = jax.make_jaxpr(rule)(dh_shape, *shapes)
    except Exception:  # noqa: BLE001 - any rule we cannot trace alone keeps the generic path
        return None
    jaxpr = closed.jaxpr
    if len(jaxpr.outvars) != len(keys):
        return None
    trace_vars = set(jaxpr.invars[1:])
    producers: dict[Any, Any] = {v: eqn for eqn in jaxpr.eqns for v in eqn.outvars}
    reads_trace = set(trace_vars)
    for eqn in jaxpr.eqns:
        if any(is_var(v) and v in reads_trace for v in eqn.invars):
            reads_trace.update(eqn.outvars)
    for out, invar, shape in zip(jaxpr.outvars, jaxpr.invars[1:], shapes):
        producer = producers.get(out)
        aval: Any = out.aval  # a ShapedArray (jax types it as the abstract base)
        if producer is None or producer.primitive.name != "mul" or aval.shape != shape.shape:
            return None
        if aval.dtype != shape.dtype:
            return None
        factors = [v for v in producer.invars if v is not invar]
        if len(factors) != 1 or invar not in producer.invars:
            return None
        if is_var(factors[0]) and factors[0] in reads_trace:
            return None
    ones = {k: jnp.ones(s.shape, s.dtype) for k, s in zip(keys, shapes)}
    return rules.yw_to_w(dh, ones, **rules.params)


def drtrl_gradient(trace: dict, dl_dh: Any, weights: dict, rules: PrimitiveRules) -> dict:
    r"""Online D-RTRL gradient of one step: :math:`\nabla_\theta L^t = \sum_a
    (\partial L^t/\partial h^t_a) \cdot \epsilon^t_a` (summed over hidden positions, and over
    the batch for batched primitives), in the shape of the primitive's trainable inputs."""
    weights, rules = rules.bind(weights)
    total: dict | None = None
    for a in range(dl_dh.shape[-1]):
        part = rules.etrace_to_dw(_slice(trace, a), dl_dh[..., a], weights, **rules.params)
        total = part if total is None else _add(total, part)
    if total is None:
        raise ValueError("the learning signal has no hidden positions (last axis of size 0)")
    return total


def es_update_x(trace_x: Any, x: Any, alpha_x: float) -> Any:
    r"""ES-D-RTRL input trace: :math:`\epsilon_x^t = \alpha_x \epsilon_x^{t-1} + x^t`
    (no :math:`1-\alpha_x` factor, as in the reference implementation)."""
    return (alpha_x * trace_x + x).astype(trace_x.dtype)


def es_update_f(trace_f: Any, dh_dh: Any, df: Any, alpha_f: float) -> Any:
    r"""ES-D-RTRL output (df) trace:
    :math:`\epsilon_f^t = \alpha_f D^t \epsilon_f^{t-1} + (1-\alpha_f) D_f^t`,
    with :math:`(D^t \epsilon_f)_a = \sum_b D^t_{ab} \epsilon_{f,b}` per hidden position
    (``dh_dh=None``: :math:`D^t \equiv 0`)."""
    fresh = (1.0 - alpha_f) * df
    if dh_dh is None:  # D = 0
        return fresh.astype(trace_f.dtype)
    # S is small (1 for most cells, 2 for an LSTM): unrolled element-wise products fuse with
    # the rest of the update, where an einsum becomes a batched dot_general of (batch x units)
    # tiny S x S blocks (plus a layout copy of D) on CPU.
    propagated = jnp.stack(
        [_sum_over_states(dh_dh[..., a, :] * trace_f) for a in range(dh_dh.shape[-2])], -1
    )
    return (alpha_f * propagated + fresh).astype(trace_f.dtype)


def _sum_over_states(value: Any) -> Any:
    """``value.sum(-1)`` over the (small) state axis as unrolled adds (an element-wise fusion
    on CPU, not a reduction)."""
    if value.shape[-1] > 8:
        return jnp.sum(value, axis=-1)
    total = value[..., 0]
    for b in range(1, value.shape[-1]):
        total = total + value[..., b]
    return total


def bias_correction(alpha_f: float, num_updates: Any) -> Any:
    r""":math:`1 - \alpha_f^{k}` after ``k`` updates of the df trace (``k >= 1``), and exactly
    1 once ``k > BIAS_CORRECTION_STEPS`` (the reference's :math:`1-\alpha_f^{k+1}` with ``k``
    counted from 0, dropped at ``k >= 1000``)."""
    k = jnp.maximum(num_updates, 1)
    corrected = 1.0 - jnp.power(alpha_f, k.astype(jnp.result_type(float)))
    return jnp.where(k > BIAS_CORRECTION_STEPS, 1.0, corrected)


def es_gradient(
    trace_x: Any,
    trace_f: Any,
    dl_dh: Any,
    correction: Any,
    weights: dict,
    rules: PrimitiveRules,
    y_shape: tuple[int, ...],
) -> dict:
    r"""Online ES-D-RTRL gradient:
    :math:`\nabla_W = \sum_a \mathrm{xy\_to\_dw}\big(\epsilon_x^t,\;
    \epsilon^t_{f,a} \odot \partial L/\partial h^t_a \,/\, (1-\alpha_f^{k})\big)`.

    The weighted df is summed down to ``y_shape`` (the VJP of a broadcast from ``y`` to
    ``h``, e.g. an element-wise weight shared over the batch). ``xy_to_dw`` (a VJP w.r.t. the
    weights) is linear in its signal, so it is called once on :func:`es_signal` (the states'
    signals summed first), not once per state."""
    signal = es_signal(trace_f, dl_dh, correction, y_shape)
    return es_contract(trace_x, signal, weights, rules)


def es_signal(trace_f: Any, dl_dh: Any, correction: Any, y_shape: tuple[int, ...]) -> Any:
    r""":math:`\sum_a \epsilon^t_{f,a} \odot \partial L/\partial h^t_a \,/\, (1-\alpha_f^{k})`
    summed down to ``y_shape``: what :func:`es_contract` contracts with the input trace.
    Signals of several hidden groups fed by one relation may be added before contracting."""
    total = _sum_over_states(trace_f * dl_dh)
    return (sum_to_shape(total, y_shape) / correction).astype(trace_f.dtype)


def es_contract(trace_x: Any, signal: Any, weights: dict, rules: PrimitiveRules) -> dict:
    r""":math:`\mathrm{xy\_to\_dw}(\epsilon_x^t, \mathrm{signal})`, the weight gradient.

    A 2-D input trace ``(batch, inputs)`` of a large weight (at least
    :data:`BATCH_MINOR_MIN_WEIGHT` entries) is handed to the rule batch-minor in memory
    (:func:`batch_minor`): the same values, but XLA then emits ``trace_x^T @ signal`` as a
    canonical matmul (XNNPACK on CPU) instead of a dot contracting the leading axis of both
    operands (Eigen): 0.8-0.95x a whole online step at n=1024 (jax 0.10 / 0.12), nothing at
    n=256, where the XNNPACK dot was slower in the median on a busy 2-core machine, so small
    weights keep the plain dot."""
    weights, rules = rules.bind(weights)
    if (
        trace_x is not None
        and jnp.ndim(trace_x) == 2
        and jnp.ndim(signal) == 2
        and trace_x.shape[1] * signal.shape[1] >= BATCH_MINOR_MIN_WEIGHT
    ):
        trace_x = batch_minor(trace_x)
    return rules.xy_to_dw(trace_x, signal, weights, **rules.params)


#: :func:`es_contract` transposes the input trace in memory for weights of at least this many
#: entries (1056 x 1024 yes, 288 x 256 no).
BATCH_MINOR_MIN_WEIGHT = 1 << 18


def batch_minor(x: Any) -> Any:
    r"""``x`` unchanged in value; a 2-D ``(batch, features)`` array is materialised transposed
    (``optimization_barrier(x.T).T``) so that XLA's layout assignment keeps it column-major and
    a contraction over the batch axis becomes a canonical ``(features, batch) @ (batch, out)``
    matmul."""
    return jax.lax.optimization_barrier(x.T).T


def fresh_gradient(
    x: Any, df: Any, dl_dh: Any, weights: dict, rules: PrimitiveRules, y_shape: tuple[int, ...]
) -> dict:
    r""":math:`\sum_a \mathrm{xy\_to\_dw}(x,\; D_{f,a} \odot \partial L/\partial h_a)`
    (summed down to ``y_shape``): the contraction of the fresh trace term
    :math:`\mathrm{diag}(D_f)\otimes x` with the learning signal, without forming it.

    It is D-RTRL's whole gradient when :math:`D^t \equiv 0` (then
    :math:`\epsilon^t = \mathrm{diag}(D_f^t)\otimes x^t`), at the cost of one ``xy_to_dw``
    instead of a read of the parameter-sized trace."""
    weights, rules = rules.bind(weights)
    total: dict | None = None
    for a in range(dl_dh.shape[-1]):
        signal = sum_to_shape(df[..., a] * dl_dh[..., a], y_shape)
        part = rules.xy_to_dw(x, signal.astype(df.dtype), weights, **rules.params)
        total = part if total is None else _add(total, part)
    if total is None:
        raise ValueError("the learning signal has no hidden positions (last axis of size 0)")
    return total


def resolve_decay(decay_or_rank: Any) -> tuple[float, float]:
    r"""``(alpha_x, alpha_f)`` from ES-D-RTRL's ``decay_or_rank`` argument.

    * a float in ``[0, 1)``: the decay of both traces;
    * an int ``r >= 1``: the decay :math:`(r-1)/(r+1)` of an exponential window whose mean
      memory is ``r`` steps;
    * a pair: ``(alpha_x, alpha_f)``.

    >>> resolve_decay(0.9), resolve_decay(3), resolve_decay((0.5, 0.8))
    ((0.9, 0.9), (0.5, 0.5), (0.5, 0.8))
    """
    if isinstance(decay_or_rank, tuple | list):
        if len(decay_or_rank) != 2:
            raise ValueError(f"decay_or_rank pair must be (alpha_x, alpha_f), got {decay_or_rank}")
        alphas = tuple(resolve_decay(float(v))[0] for v in decay_or_rank)
        return alphas[0], alphas[1]
    if isinstance(decay_or_rank, bool):
        raise TypeError("decay_or_rank must be a float in [0, 1), an int >= 1 or a pair")
    if isinstance(decay_or_rank, int):
        if decay_or_rank < 1:
            raise ValueError(f"rank must be >= 1, got {decay_or_rank}")
        decay = (decay_or_rank - 1) / (decay_or_rank + 1)
        return decay, decay
    decay = float(decay_or_rank)
    if not 0.0 <= decay < 1.0:
        raise ValueError(
            f"decay must be in [0, 1), got {decay}. Pass an int r >= 1 for the decay (r-1)/(r+1)."
        )
    return decay, decay


def sum_to_shape(value: Any, shape: tuple[int, ...]) -> Any:
    """Sum ``value`` down to ``shape`` (leading extra axes, then broadcast size-1 axes)."""
    extra = value.ndim - len(shape)
    if extra > 0:
        value = jnp.sum(value, axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and value.shape[i] != 1)
    return jnp.sum(value, axis=axes, keepdims=True) if axes else value


def resolve_trace_dtype(trace_dtype: Any) -> Any:
    r"""The storage dtype of the eligibility traces: ``None`` (the model's dtype) or a
    floating dtype such as ``jnp.bfloat16``.

    Stored in a narrower dtype, every trace update is still computed in the model's dtype
    (:func:`widen_traces`) and rounded once when stored (:func:`store_traces`): the carried
    trace is read and written at half the bytes, and the error of a step is one rounding
    (relative :math:`2^{-8}` for bfloat16), not one per operation.

    >>> resolve_trace_dtype("bfloat16")
    dtype(bfloat16)
    """
    if trace_dtype is None:
        return None
    try:
        dtype = jnp.dtype(trace_dtype)
    except TypeError as err:
        raise TypeError(
            f"trace_dtype must be a floating dtype such as jnp.bfloat16, got {trace_dtype!r}"
        ) from err
    if not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(
            f"trace_dtype must be a floating dtype (the traces are real-valued sums), got "
            f"{dtype}; e.g. etp_viz.D_RTRL(model, trace_dtype=jnp.bfloat16), or None for the "
            "model's dtype"
        )
    return dtype


def compute_dtype(model_dtype: Any, trace_dtype: Any) -> Any:
    """The dtype trace updates and contractions run in: the model's float dtype, promoted with
    a wider storage dtype (``trace_dtype=None``: the model's)."""
    if trace_dtype is None:
        return jnp.dtype(model_dtype)
    return jnp.promote_types(model_dtype, trace_dtype)


def store_traces(traces: Any, dtype: Any) -> Any:
    """``traces`` with every floating leaf cast to the storage ``dtype`` (``None``: as is).
    Integer leaves (e.g. ES-D-RTRL's input trace of embedding ids) keep their dtype."""
    if dtype is None:
        return traces
    return jax.tree.map(lambda v: _cast_float(v, dtype), traces)


def widen_traces(traces: Any, dtype: Any, compute: Any) -> Any:
    """``traces`` stored in ``dtype`` with every floating leaf cast to the ``compute`` dtype
    (``dtype=None``: as is) -- the dtype each update and contraction runs in."""
    if dtype is None:
        return traces
    return jax.tree.map(lambda v: _cast_float(v, compute), traces)


def _cast_float(value: Any, dtype: Any) -> Any:
    if value is None or not jnp.issubdtype(jnp.result_type(value), jnp.floating):
        return value
    return value.astype(dtype)
