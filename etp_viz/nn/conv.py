r"""Convolution layers ``Conv1d`` / ``Conv2d`` / ``Conv3d`` on the ETP primitive ``etp_conv``.

Channels-last, as in braintrace: an input of shape ``(*spatial, C_in)`` (unbatched) or
``(batch, *spatial, C_in)``, a kernel of shape ``(*kernel_size, C_in // groups, C_out)``, an
output of shape ``([batch,] *spatial_out, C_out)``:

.. math:: y_{n,p,o} = \sum_{w, i} x_{n,\, s p + d w,\, g(o) I + i}\, K_{w,i,o} (+ b_o)

with strides :math:`s`, kernel dilation :math:`d` and :math:`I = C_{in} / \mathrm{groups}`.
The product is one :func:`etp_viz.conv` equation, so the compiler relates the kernel (and the
bias) to the hidden states it drives; its trace is kept per output position (see
:mod:`etp_viz.ops.conv`).

An unbatched input gets a batch axis of 1 around the primitive, so the forward pass and the
compiler's relations work without a batch. The online learners, however, need the
primitive's output shaped like the hidden state it drives: for D-RTRL / ES-D-RTRL keep a batch
axis (a batch of 1 if need be) on the input and the hidden state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import brainstate
import jax
import jax.numpy as jnp
from jax import lax

from ..ops import conv
from ._init import Initializer, default_float_dtype, make_param

__all__ = ["Conv1d", "Conv2d", "Conv3d", "conv_xavier_normal"]

_LAYOUTS = {
    1: ("NWC", "WIO", "NWC"),
    2: ("NHWC", "HWIO", "NHWC"),
    3: ("NDHWC", "DHWIO", "NDHWC"),
}


def conv_xavier_normal(shape: tuple[int, ...], gain: float = 1.0) -> jax.Array:
    """Xavier normal for a ``(*window, I, O)`` kernel: fans count the receptive field.

    Examples
    --------
    >>> conv_xavier_normal((3, 2, 4)).shape
    (3, 2, 4)
    """
    receptive = math.prod(shape[:-2])
    std = gain * math.sqrt(2.0 / (receptive * (shape[-2] + shape[-1])))
    return jnp.asarray(brainstate.random.normal(size=shape) * std, default_float_dtype())


def _tuple(value: int | Sequence[int], n: int, what: str) -> tuple[int, ...]:
    if isinstance(value, int):
        return (int(value),) * n
    out = tuple(int(v) for v in value)
    if len(out) != n:
        raise ValueError(f"{what} needs {n} entries (one per spatial axis), got {value!r}.")
    return out


def _padding(padding: Any, n: int) -> str | tuple[tuple[int, int], ...]:
    """``'SAME'`` / ``'VALID'``, an int, one int per axis, or one ``(lo, hi)`` pair per axis."""
    if isinstance(padding, str):
        return padding.upper()
    if isinstance(padding, int):
        return ((int(padding), int(padding)),) * n
    items = list(padding)
    if len(items) != n:
        raise ValueError(f"padding needs {n} entries (one per spatial axis), got {padding!r}.")
    return tuple((int(p), int(p)) if isinstance(p, int) else (int(p[0]), int(p[1])) for p in items)


class _Conv(brainstate.nn.Module):
    """Shared body of the ``ConvNd`` layers (``num_spatial_dims`` set by each subclass)."""

    num_spatial_dims: int = 0

    def __init__(
        self,
        in_size: Sequence[int],
        out_channels: int,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] = 1,
        padding: str | int | Sequence[Any] = "SAME",
        lhs_dilation: int | Sequence[int] = 1,
        rhs_dilation: int | Sequence[int] = 1,
        groups: int = 1,
        w_init: Initializer = conv_xavier_normal,
        b_init: Initializer = None,
        w_mask: Any = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        n = self.num_spatial_dims
        in_size = (int(in_size),) if isinstance(in_size, int) else tuple(int(s) for s in in_size)
        if len(in_size) != n + 1:
            raise ValueError(
                f"{type(self).__name__}: in_size must be (*spatial, channels) with {n} spatial "
                f"axes, got {in_size}. Example: in_size={(16,) * n + (3,)}."
            )
        self.in_size = in_size
        self.in_channels = in_size[-1]
        self.out_channels = int(out_channels)
        self.groups = int(groups)
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ValueError(
                f"{type(self).__name__}: in_channels={self.in_channels} and out_channels="
                f"{self.out_channels} must both be divisible by groups={self.groups}."
            )
        self.kernel_size = _tuple(kernel_size, n, "kernel_size")
        self.stride = _tuple(stride, n, "stride")
        self.padding = _padding(padding, n)
        self.lhs_dilation = _tuple(lhs_dilation, n, "lhs_dilation")
        self.rhs_dilation = _tuple(rhs_dilation, n, "rhs_dilation")
        self.dimension_numbers = _LAYOUTS[n]
        kernel_shape = (*self.kernel_size, self.in_channels // self.groups, self.out_channels)
        self.kernel_shape = kernel_shape
        params = {"weight": make_param(w_init, kernel_shape, f"{type(self).__name__}.weight")}
        bias = make_param(b_init, (self.out_channels,), f"{type(self).__name__}.bias")
        if bias is not None:
            params["bias"] = bias
        self.weight = brainstate.ParamState(params)
        self.w_mask = (
            None if w_mask is None else jnp.broadcast_to(jnp.asarray(w_mask), kernel_shape)
        )
        probe = jax.ShapeDtypeStruct((1, *in_size), default_float_dtype())
        kernel = jax.ShapeDtypeStruct(kernel_shape, default_float_dtype())
        out = jax.eval_shape(
            lambda x, k: lax.conv_general_dilated(
                x,
                k,
                self.stride,
                self.padding,
                self.lhs_dilation,
                self.rhs_dilation,
                lax.conv_dimension_numbers(x.shape, k.shape, self.dimension_numbers),
                self.groups,
            ),
            probe,
            kernel,
        )
        self.out_size = tuple(out.shape[1:])

    def update(self, x: jax.Array) -> jax.Array:
        """Convolve ``x`` of shape ``(*spatial, C_in)`` or ``(batch, *spatial, C_in)``."""
        x = jnp.asarray(x)
        n = self.num_spatial_dims
        if x.ndim not in (n + 1, n + 2) or tuple(x.shape[-n - 1 :]) != self.in_size:
            raise ValueError(
                f"{type(self).__name__}: expected input ([batch,] *{self.in_size}), got shape "
                f"{x.shape}. Inputs are channels-last."
            )
        unbatched = x.ndim == n + 1
        params = self.weight.value
        kernel = params["weight"]
        if self.w_mask is not None:
            kernel = kernel * self.w_mask
        y = conv(
            x[None] if unbatched else x,
            kernel,
            params.get("bias"),
            strides=self.stride,
            padding=self.padding,
            lhs_dilation=self.lhs_dilation,
            rhs_dilation=self.rhs_dilation,
            feature_group_count=self.groups,
            dimension_numbers=self.dimension_numbers,
        )
        return y[0] if unbatched else y


class Conv1d(_Conv):
    """1-D convolution (``NWC`` input, ``WIO`` kernel) through :func:`etp_viz.conv`.

    Parameters
    ----------
    in_size : tuple of int
        ``(length, in_channels)`` (no batch axis).
    out_channels : int
        Output channels.
    kernel_size : int or tuple of int
        Window size.
    stride, lhs_dilation, rhs_dilation : int or tuple of int, optional
        Strides, input (transposed-conv) dilation and kernel dilation (default 1).
    padding : str, int or sequence, optional
        ``'SAME'`` (default), ``'VALID'``, an int or ``(lo, hi)`` pairs per axis.
    groups : int, optional
        Feature groups (``in_channels`` and ``out_channels`` divisible by it).
    w_init, b_init : initializer, optional
        Kernel initializer (default: Xavier normal with receptive-field fans) and bias
        initializer (default ``None``: no bias).
    w_mask : array, optional
        Fixed multiplicative kernel mask (applied before the primitive, so the compiler sees
        the masked kernel as processed from the ``ParamState``).
    name : str, optional
        Module name.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import etp_viz
    >>> layer = etp_viz.nn.Conv1d((16, 3), 8, kernel_size=3)
    >>> layer(jnp.ones((16, 3))).shape, layer(jnp.ones((2, 16, 3))).shape
    ((16, 8), (2, 16, 8))
    """

    num_spatial_dims = 1


class Conv2d(_Conv):
    """2-D convolution (``NHWC`` input, ``HWIO`` kernel) through :func:`etp_viz.conv`.

    ``in_size`` is ``(height, width, in_channels)``; the other arguments are those of
    :class:`Conv1d`, with one entry per spatial axis where a tuple is given.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import etp_viz
    >>> layer = etp_viz.nn.Conv2d((8, 8, 3), 4, kernel_size=3, stride=2, b_init=etp_viz.nn.zeros)
    >>> layer(jnp.ones((2, 8, 8, 3))).shape
    (2, 4, 4, 4)
    """

    num_spatial_dims = 2


class Conv3d(_Conv):
    """3-D convolution (``NDHWC`` input, ``DHWIO`` kernel) through :func:`etp_viz.conv`.

    ``in_size`` is ``(depth, height, width, in_channels)``; the other arguments are those of
    :class:`Conv1d`.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import etp_viz
    >>> layer = etp_viz.nn.Conv3d((4, 4, 4, 2), 3, kernel_size=2, padding="VALID")
    >>> layer(jnp.ones((4, 4, 4, 2))).shape
    (3, 3, 3, 3)
    """

    num_spatial_dims = 3
