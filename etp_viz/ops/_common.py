"""Helpers shared by the built-in primitive families: avals, the counterpart batching rule, and
saiunit support (bind mantissas, re-attach the unit, convert the bias)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import brainstate
import jax
import jax.numpy as jnp
import saiunit as u

from .._compat import batching
from ._registry import ETPPrimitive, ETPPrimitiveSpec, register_primitive_spec
from ._registry import counterpart_batcher as counterpart_batcher  # re-export for built-ins


def reject_states(op: str, example: str, **arguments: Any) -> None:
    """Raise a TypeError when an argument is a brainstate ``State`` instead of its value.

    ``jnp.asarray(ParamState)`` would otherwise fail deep inside JAX ("Cannot determine dtype" /
    "dtype object is not a valid JAX array type") without naming the op or the argument.
    """
    for name, value in arguments.items():
        if isinstance(value, brainstate.State):
            raise TypeError(
                f"{op}: argument `{name}` is a brainstate {type(value).__name__}, not an array. "
                "ETP ops take the state's current value (the compiler traces that value back "
                f"to its state). Fix: pass `.value`, e.g. `{example}`."
            )


def shape_dtype(var: Any) -> tuple[tuple[int, ...], Any]:
    """``(shape, dtype)`` of a jaxpr Var (``.aval``), a ShapeDtypeStruct or an array."""
    aval = getattr(var, "aval", var)
    return tuple(aval.shape), aval.dtype


def zeros_trace(shape: tuple[int, ...], num_hidden_state: int, dtype: Any) -> jax.Array:
    """A zero trace with a trailing state axis ``S``."""
    return jnp.zeros((*shape, num_hidden_state), dtype=dtype)


def init_pp_output_shaped(x_var, y_var, weight_vars, num_hidden_state: int, **params) -> jax.Array:
    """ES-D-RTRL df trace for every family: ``(*y.shape, S)``."""
    shape, dtype = shape_dtype(y_var)
    return zeros_trace(shape, num_hidden_state, dtype)


def vjp_weights(fwd: Callable[[dict], jax.Array], weights: dict, cotangent: jax.Array) -> dict:
    """One fused VJP of ``fwd`` w.r.t. every trainable array in ``weights``."""
    y, pullback = jax.vjp(fwd, dict(weights))
    return pullback(jnp.asarray(cotangent, dtype=y.dtype))[0]


def contract_trace(
    trace: jax.Array, signal: jax.Array, batch_axes: int, out_axis: int
) -> jax.Array:
    r""":math:`G_{k} = \sum_{b} \epsilon_{b,k}\, s_{b, o(k)}` without forming and reducing
    ``trace * signal`` over the batch axis.

    ``trace`` has ``batch_axes`` leading axes (batch, output positions) that are summed, then
    the weight-shaped axes ``k``; ``signal`` has the same leading axes and one output axis, which
    is the trace's weight axis ``out_axis`` (counted within the weight axes).

    The element-wise product reduced over the (major) batch axis is a strided reduction in XLA,
    ~10x slower on CPU than either form used here (16 x 288 x 256 float32 trace):

    * lead size <= :data:`UNROLL_MAX_BATCH`: a chain of adds of contiguous per-sample slices
      ``trace[b] * signal[b]``; XLA fuses it with the trace update that produced ``trace``, so
      the step reads and writes the trace once (measured at the read+write floor);
    * larger leads: one ``dot_general`` contracting the lead axes with the output axis as a batch
      dimension (HLO size independent of the batch). XLA CPU runs it after a transposing copy
      of the trace (~2x the floor). Precision ``HIGHEST``: exact on TF32 hardware, like the
      element-wise form.
    """
    dtype = jnp.result_type(trace, signal)
    trace, signal = trace.astype(dtype), signal.astype(dtype)
    lead_size = math.prod(trace.shape[:batch_axes])
    if 1 < lead_size <= UNROLL_MAX_BATCH:
        return _unrolled_contraction(trace, signal, batch_axes, out_axis)
    lead = tuple(range(batch_axes))
    out = batch_axes + out_axis
    dims = ((lead, lead), ((out,), (batch_axes,)))
    result = jax.lax.dot_general(trace, signal, dims, precision=jax.lax.Precision.HIGHEST)
    # dot_general puts the batch (output) axis first, then the trace's remaining axes in order
    return jnp.moveaxis(result, 0, out_axis)


#: lead sizes up to this are contracted slice by slice, larger ones by ``dot_general``
#: (see :func:`contract_trace`); 64 keeps the unrolled HLO small
UNROLL_MAX_BATCH = 64


def _unrolled_contraction(trace, signal, batch_axes: int, out_axis: int):
    """``Σ_b trace[b] * signal[b]`` as a chain of adds over contiguous trace slices."""
    weight_ndim = trace.ndim - batch_axes
    trace = trace.reshape(-1, *trace.shape[batch_axes:])
    signal = signal.reshape(-1, signal.shape[-1])
    shape = [1] * weight_ndim
    shape[out_axis] = signal.shape[-1]
    total = trace[0] * signal[0].reshape(shape)
    for b in range(1, trace.shape[0]):
        total = total + trace[b] * signal[b].reshape(shape)
    return total


def per_sample_weight_trace(
    x_var: Any, y_var: Any, weight_vars: dict, num_hidden_state: int, **params: Any
) -> dict:
    """``init_drtrl`` of the matmul family: one zero trace per trainable key, shaped
    ``(*batch, *key_shape, S)`` where ``batch`` are x's leading axes (none when unbatched)."""
    batch = shape_dtype(x_var)[0][:-1]
    _, dtype = shape_dtype(y_var)
    return {
        key: zeros_trace((*batch, *shape_dtype(var)[0]), num_hidden_state, dtype)
        for key, var in weight_vars.items()
    }


def register_batched_pair(
    batched_name: str, unbatched_name: str, **spec_fields: Any
) -> tuple[ETPPrimitive, ETPPrimitive]:
    """Register a batched primitive and its unbatched form (``x`` of shape ``(I,)``) from one set
    of spec fields; under ``vmap`` the unbatched one re-binds the batched one and the batched
    one folds the new axis into its batch axis, so both stay ETP equations."""
    common = {"x_invar_index": 0, "init_pp": init_pp_output_shaped, **spec_fields}
    batched = register_primitive_spec(ETPPrimitiveSpec(name=batched_name, batched=True, **common))
    unbatched = register_primitive_spec(
        ETPPrimitiveSpec(name=unbatched_name, batched=False, batched_counterpart=batched, **common)
    )
    batching.primitive_batchers[batched] = counterpart_batcher(batched, batched, common["impl"])
    return batched, unbatched


class UnitMismatchError(ValueError):
    """A bias whose physical dimension differs from the unit of ``x * weight``."""


def split_unit(value: Any) -> tuple[Any, Any]:
    """``(mantissa, unit)`` of a Quantity or a plain array (unit: saiunit's unitless)."""
    return u.get_mantissa(value), u.get_unit(value)


def attach_unit(mantissa: Any, unit: Any) -> Any:
    """Re-attach ``unit``; a dimensionless result comes back as a plain array."""
    return u.maybe_decimal(u.Quantity(mantissa, unit=unit))


def bias_mantissa(op: str, bias: Any, out_unit: Any) -> Any:
    """The bias mantissa expressed in ``out_unit`` (the unit of ``x * weight``).

    Raises
    ------
    UnitMismatchError
        When the bias has another physical dimension than ``x * weight``.
    """
    if bias is None:
        return None
    mantissa, unit = split_unit(bias)
    if not unit.has_same_dim(out_unit):
        raise UnitMismatchError(
            f"{op}: the bias has unit '{unit}' (dimension {unit.dim}) but x * weight has unit "
            f"'{out_unit}' (dimension {out_unit.dim}); a sum needs one physical dimension. "
            f"Fix: give the bias in a unit of that dimension, e.g. `bias = values * {out_unit}`"
            " (or drop the units from x and weight)."
        )
    if unit == out_unit:
        return mantissa
    return u.Quantity(mantissa, unit=unit).to_decimal(out_unit)
