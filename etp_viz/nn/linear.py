"""``Linear``: a dense layer whose matmul is an ETP primitive (``etp_mv`` / ``etp_mm``)."""

from __future__ import annotations

import brainstate
import jax

from ..ops import matmul
from ._init import Initializer, make_param, xavier_normal, zeros

__all__ = ["Linear"]


class Linear(brainstate.nn.Module):
    """Dense layer ``y = x @ W + b`` computed by :func:`etp_viz.matmul`.

    The weight and bias live in one ``ParamState`` holding the dict
    ``{'weight': W, 'bias': b}`` (just ``{'weight': W}`` when ``b_init=None``), so the compiler
    sees one weight path (e.g. ``('out', 'weight')``) with two leaves. Because the product is an
    ETP primitive, the compiler can relate ``W`` to the hidden states it drives.

    Parameters
    ----------
    in_size : int
        Number of input features (last axis of ``x``).
    out_size : int
        Number of output features.
    w_init : callable or array, optional
        Weight initializer ``shape -> array`` (default: Xavier normal) or an array of shape
        ``(in_size, out_size)``.
    b_init : callable, array or None, optional
        Bias initializer (default: zeros); ``None`` builds a layer without bias.
    name : str, optional
        Module name.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import etp_viz
    >>> layer = etp_viz.nn.Linear(3, 2)
    >>> layer(jnp.ones(3)).shape
    (2,)
    >>> layer(jnp.ones((5, 3))).shape
    (5, 2)
    """

    def __init__(
        self,
        in_size: int,
        out_size: int,
        w_init: Initializer = xavier_normal,
        b_init: Initializer = zeros,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.in_size = (int(in_size),)
        self.out_size = (int(out_size),)
        params = {"weight": make_param(w_init, (in_size, out_size), "Linear.weight")}
        bias = make_param(b_init, (out_size,), "Linear.bias")
        if bias is not None:
            params["bias"] = bias
        self.weight = brainstate.ParamState(params)

    def update(self, x: jax.Array) -> jax.Array:
        """Return ``x @ W (+ b)`` for ``x`` of shape ``(in_size,)`` or ``(batch, in_size)``."""
        params = self.weight.value
        return matmul(x, params["weight"], params.get("bias"))
