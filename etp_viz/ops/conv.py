r"""Convolution ETP primitive ``etp_conv`` and :func:`conv`.

Forward: :math:`y = \mathrm{conv\_general\_dilated}(x, K) (+ b)`, every
``conv_general_dilated`` argument a static param (``dimension_numbers`` normalised to a
hashable ``ConvDimensionNumbers``), ``b`` of shape ``(C_out,)`` added on the output feature
axis.

Trace layout (D-RTRL, one state slice). Write an output position as :math:`(n, p)` (batch,
spatial position) and :math:`c(k)` for the output channel of kernel entry :math:`k`. Output
channel :math:`c` only depends on the kernel slice :math:`K[\dots, c]`, so

.. math:: \epsilon^K_{n,p,k} = \partial h_{n,p,c(k)} / \partial K_k,
   \qquad \text{layout } (N, *\mathrm{spatial\_out}, *K.\mathrm{shape}),

kept *per output position* (no spatial sum: the hidden state at each position has its own
trace). ``yw_to_w`` multiplies by :math:`g_{n,p,c(k)}`; ``xy_to_etrace`` is the input patch
of each output position (one ``conv_general_dilated_patches``) times :math:`g`, broadcast over
the kernel; the bias trace is ``y``-shaped (:math:`\epsilon^b = g`).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from jax import lax

from .._compat import batching
from ._common import (
    attach_unit,
    bias_mantissa,
    contract_trace,
    init_pp_output_shaped,
    reject_states,
    shape_dtype,
    split_unit,
    vjp_weights,
    zeros_trace,
)
from ._registry import ETPPrimitiveSpec, fallback_batching, register_primitive_spec

__all__ = ["etp_conv_p", "conv"]

_CONV_KEYS = (
    "window_strides",
    "padding",
    "lhs_dilation",
    "rhs_dilation",
    "feature_group_count",
    "batch_group_count",
    "dimension_numbers",
)


def _conv_only(x, kernel, params: dict):
    return lax.conv_general_dilated(x, kernel, **{k: params[k] for k in _CONV_KEYS})


def _add_bias(y, bias, dn):
    shape = [1] * y.ndim
    shape[dn.out_spec[1]] = bias.shape[0]
    return y + bias.reshape(shape)


def _conv_impl(x, kernel, *maybe_bias, has_bias=False, **params):
    y = _conv_only(x, kernel, params)
    return _add_bias(y, maybe_bias[0], params["dimension_numbers"]) if has_bias else y


def conv_trainable_invars(params: dict) -> dict[str, int]:
    """``{'weight': 1}`` plus ``'bias': 2`` when ``has_bias``."""
    return {"weight": 1, "bias": 2} if params.get("has_bias", False) else {"weight": 1}


def _position_major(g, dn):
    """``g`` from the output layout to ``(N, *spatial_out, C)``."""
    return jnp.transpose(g, (dn.out_spec[0], *dn.out_spec[2:], dn.out_spec[1]))


def _broadcast_on_kernel(g, dn, kernel_ndim: int):
    """``(N, *sp, C)`` -> ``(N, *sp, 1.., C at the kernel's O axis, ..1)``."""
    gt = _position_major(g, dn)
    shape = [1] * kernel_ndim
    shape[dn.rhs_spec[0]] = gt.shape[-1]
    return gt.reshape(*gt.shape[:-1], *shape)


def conv_yw_to_w(hidden_dim, trace: dict, **params) -> dict:
    """Per output position: ``trace[n, p, k] * g[n, p, c(k)]``; bias trace ``* g``."""
    dn = params["dimension_numbers"]
    kernel_ndim = len(dn.rhs_spec)
    out = {"weight": trace["weight"] * _broadcast_on_kernel(hidden_dim, dn, kernel_ndim)}
    if "bias" in trace:
        out["bias"] = trace["bias"] * hidden_dim
    return out


def conv_xy_to_dw(x, hidden_dim, weights: dict, *, has_bias=False, **params) -> dict:
    """One fused VJP w.r.t. ``{weight, bias}`` with cotangent ``g``."""

    def fwd(w):
        extra = [w["bias"]] if has_bias else []
        return _conv_impl(x, w["weight"], *extra, has_bias=has_bias, **params)

    return vjp_weights(fwd, weights, hidden_dim)


def _canonical_patches(x, window: tuple[int, ...], params: dict):
    """Input patches in the canonical layout ``(N, *spatial_out, C_in, *window)``.

    One ``conv_general_dilated_patches`` call applies strides, padding and both dilations
    exactly as the forward conv does. ``precision=HIGHEST`` keeps the identity-kernel
    extraction exact where the default matmul precision is reduced (TF32 on GPUs).
    """
    dn = params["dimension_numbers"]
    x_nc = jnp.transpose(x, dn.lhs_spec)
    patches = lax.conv_general_dilated_patches(
        x_nc,
        window,
        params["window_strides"],
        params["padding"],
        lhs_dilation=params["lhs_dilation"],
        rhs_dilation=params["rhs_dilation"],
        precision=lax.Precision.HIGHEST,
    )  # (N, C_in * prod(window), *spatial_out); features ordered (C_in, *window)
    n_sp, n_win = patches.ndim - 2, len(window)
    patches = patches.reshape(x_nc.shape[0], x_nc.shape[1], *window, *patches.shape[2:])
    order = (0, *range(2 + n_win, 2 + n_win + n_sp), 1, *range(2, 2 + n_win))
    return jnp.transpose(patches, order)


def _grouped_patches(patches, n_sp: int, params: dict):
    """``(N_out, *spatial_out, groups, I, *window)``: the input slice each kernel group reads.

    ``feature_group_count = G``: the input channels split into ``G`` contiguous groups of
    ``I = C_in / G``. ``batch_group_count = B``: the input batch splits into ``B`` contiguous
    groups of ``N_out = N / B`` samples and every group reads all ``I = C_in`` channels. Output
    channels are grouped the same way (contiguous blocks of ``C_out / groups``).
    """
    batch_groups = params["batch_group_count"]
    if batch_groups > 1:
        grouped = patches.reshape(batch_groups, -1, *patches.shape[1:])
        return jnp.moveaxis(grouped, 0, 1 + n_sp)
    groups = params["feature_group_count"]
    lead, channels, window = (
        patches.shape[: 1 + n_sp],
        patches.shape[1 + n_sp],
        patches.shape[2 + n_sp :],
    )
    return patches.reshape(*lead, groups, channels // groups, *window)


def conv_xy_to_etrace(x, hidden_dim, weights: dict, *, has_bias=False, **params) -> dict:
    r"""Unreduced kernel trace ``(N, *spatial_out, *K.shape)``; bias trace ``g``.

    For output position :math:`(n, p)` and kernel entry :math:`k = (o, i, w)` (channel ``i``
    of the group of output channel ``o``, window offset ``w``):

    .. math:: \epsilon^K_{n,p,k} = g_{n,p,o}\, \partial y_{n,p,o}/\partial K_{o,i,w}
       = g_{n,p,o}\, \tilde x_{n,p,\mathrm{grp}(o),i,w}

    where :math:`\tilde x` are the input patches (:func:`_grouped_patches`). Cost: one
    ``conv_general_dilated_patches`` plus one broadcasted product the size of the trace, for
    every stride, padding, dilation, feature/batch grouping and dimension numbers.
    """
    dn = params["dimension_numbers"]
    kernel = weights["weight"]
    dtype = jnp.result_type(x, kernel)
    window = tuple(kernel.shape[axis] for axis in dn.rhs_spec[2:])
    n_sp = len(window)
    patches = _canonical_patches(jnp.asarray(x, dtype), window, params)
    patches = jnp.expand_dims(_grouped_patches(patches, n_sp, params), 2 + n_sp)
    g = _position_major(jnp.asarray(hidden_dim, dtype), dn)  # (N_out, *spatial_out, C_out)
    groups = params["feature_group_count"] * params["batch_group_count"]
    c_out = g.shape[-1]
    g = g.reshape(*g.shape[:-1], groups, c_out // groups, *([1] * (1 + n_sp)))
    trace = (g * patches).reshape(*g.shape[: 1 + n_sp], c_out, *patches.shape[-1 - n_sp :])
    lead = 1 + n_sp  # canonical kernel axes (O, I, *window) -> the kernel's own layout
    to_kernel = tuple(lead + dn.rhs_spec.index(axis) for axis in range(kernel.ndim))
    out = {"weight": jnp.transpose(trace, (*range(lead), *to_kernel))}
    if has_bias:
        out["bias"] = jnp.asarray(hidden_dim)
    return out


def conv_etrace_to_dw(trace: dict, dl_dh, weights: dict, **params) -> dict:
    """Kernel: ``Σ_{n,p} trace[n, p, k] * g[n, p, c(k)]`` via ``contract_trace`` (batch and
    positions contracted, the output channel kept); bias: ``Σ`` over all but features."""
    dn = params["dimension_numbers"]
    kernel = trace["weight"]
    lead = kernel.ndim - len(dn.rhs_spec)
    signal = _position_major(dl_dh, dn)
    out = {"weight": contract_trace(kernel, signal, lead, dn.rhs_spec[0])}
    if "bias" in trace:
        axes = tuple(i for i in range(trace["bias"].ndim) if i != dn.out_spec[1])
        out["bias"] = jnp.sum(trace["bias"] * dl_dh, axis=axes)
    return out


def conv_init_drtrl(x_var, y_var, weight_vars: dict, num_hidden_state: int, **params) -> dict:
    """Kernel trace ``(N, *spatial_out, *K, S)``; bias trace ``(*y.shape, S)``.

    Needs the equation's ``dimension_numbers`` to find the output feature axis; without them
    the ``conv_general_dilated`` default (feature axis 1, ``NC...``) is assumed.
    """
    y_shape, dtype = shape_dtype(y_var)
    dn = params.get("dimension_numbers")
    feature_axis = 1 if dn is None else dn.out_spec[1]
    positions = tuple(n for i, n in enumerate(y_shape) if i != feature_axis)
    out = {
        "weight": zeros_trace(
            (*positions, *shape_dtype(weight_vars["weight"])[0]), num_hidden_state, dtype
        )
    }
    if "bias" in weight_vars:
        out["bias"] = zeros_trace(y_shape, num_hidden_state, dtype)
    return out


etp_conv_p = register_primitive_spec(
    ETPPrimitiveSpec(
        name="etp_conv",
        impl=_conv_impl,
        yw_to_w=conv_yw_to_w,
        xy_to_dw=conv_xy_to_dw,
        init_drtrl=conv_init_drtrl,
        init_pp=init_pp_output_shaped,
        trainable_invars_fn=conv_trainable_invars,
        x_invar_index=0,
        batched=True,
        xy_to_etrace=conv_xy_to_etrace,
        etrace_to_dw=conv_etrace_to_dw,
    )
)


def _conv_batcher(args, dims, **params):
    # Only x batched and no batch grouping: fold the vmapped axis into the conv batch axis.
    if any(d is not None for d in dims[1:]) or params["batch_group_count"] != 1:
        return fallback_batching(etp_conv_p, _conv_impl, args, dims, **params)
    dn = params["dimension_numbers"]
    n_axis = dn.lhs_spec[0]
    x = jnp.moveaxis(args[0], dims[0], n_axis)
    vmapped = x.shape[n_axis]
    x = x.reshape(*x.shape[:n_axis], -1, *x.shape[n_axis + 2 :])
    y = etp_conv_p.bind(x, *args[1:], **params)
    out_axis = dn.out_spec[0]
    y = y.reshape(*y.shape[:out_axis], vmapped, -1, *y.shape[out_axis + 1 :])
    return y, out_axis


batching.primitive_batchers[etp_conv_p] = _conv_batcher


def _as_tuple(value, n: int, default: int = 1) -> tuple[int, ...]:
    if value is None:
        return (default,) * n
    if isinstance(value, int):
        return (value,) * n
    return tuple(int(v) for v in value)


def _check_channels(x_shape, k_shape, dn, feature_group_count: int) -> None:
    """Input channels / groups must equal the kernel's input-feature size (a teaching error)."""
    c_in, k_in = x_shape[dn.lhs_spec[1]], k_shape[dn.rhs_spec[1]]
    if c_in % feature_group_count or c_in // feature_group_count != k_in:
        raise ValueError(
            f"etp_viz.conv: x has shape {tuple(x_shape)} ({c_in} input channels on axis "
            f"{dn.lhs_spec[1]}) and the kernel {tuple(k_shape)} ({k_in} input features on axis "
            f"{dn.rhs_spec[1]}), with feature_group_count={feature_group_count}; expected "
            f"{c_in} / feature_group_count == {k_in}. Fix: check `dimension_numbers` (the "
            "default is ('NCH..', 'OIH..', 'NCH..')), e.g. `dimension_numbers=('NWC', 'WIO', "
            "'NWC')` for channels-last, or the kernel's input-feature size."
        )


def conv(
    x: Any,
    kernel: Any,
    bias: Any = None,
    *,
    strides: Any,
    padding: Any,
    lhs_dilation: Any = None,
    rhs_dilation: Any = None,
    feature_group_count: int = 1,
    batch_group_count: int = 1,
    dimension_numbers: Any = None,
) -> Any:
    r"""ETP-marked ``lax.conv_general_dilated`` (+ a ``(C_out,)`` bias on the feature axis).

    ``x`` always has a batch axis. saiunit quantities are accepted.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> conv(jnp.ones((2, 16, 3)), jnp.ones((4, 3, 8)), strides=(1,), padding="SAME",
    ...      dimension_numbers=("NWC", "WIO", "NWC")).shape
    (2, 16, 8)
    """
    reject_states(
        "etp_viz.conv",
        "etp_viz.conv(x, self.kernel.value, strides=1, padding='SAME')",
        x=x,
        kernel=kernel,
        bias=bias,
    )
    x_m, x_unit = split_unit(x)
    k_m, k_unit = split_unit(kernel)
    x_m, k_m = jnp.asarray(x_m), jnp.asarray(k_m)
    out_unit = x_unit * k_unit
    if x_m.ndim < 3 or x_m.ndim != k_m.ndim:
        raise ValueError(
            f"etp_viz.conv: x has shape {x_m.shape} and the kernel {k_m.shape}; both need the "
            "same rank >= 3 and x must carry a batch axis (conv always expects one). Fix: add "
            "a batch axis, e.g. `conv(x[None], kernel, ...)`."
        )
    n_spatial = x_m.ndim - 2
    dn = lax.conv_dimension_numbers(x_m.shape, k_m.shape, dimension_numbers)
    _check_channels(x_m.shape, k_m.shape, dn, int(feature_group_count))
    params = dict(
        window_strides=_as_tuple(strides, n_spatial),
        padding=padding
        if isinstance(padding, str)
        else tuple(tuple(int(p) for p in pair) for pair in padding),
        lhs_dilation=_as_tuple(lhs_dilation, n_spatial),
        rhs_dilation=_as_tuple(rhs_dilation, n_spatial),
        feature_group_count=int(feature_group_count),
        batch_group_count=int(batch_group_count),
        dimension_numbers=dn,
    )
    b_m = bias_mantissa("etp_viz.conv", bias, out_unit)
    operands = [k_m]
    if b_m is not None:
        c_out = k_m.shape[dn.rhs_spec[0]]
        if tuple(jnp.shape(b_m)) != (c_out,):
            raise ValueError(
                f"etp_viz.conv: bias has shape {tuple(jnp.shape(b_m))}, expected ({c_out},) "
                "(one entry per output channel; it is added on the output feature axis). Fix: "
                f"pass a 1-D bias of length {c_out}."
            )
        operands.append(jnp.asarray(b_m))
    y = etp_conv_p.bind(x_m, *operands, has_bias=b_m is not None, **params)
    return attach_unit(y, out_unit)
