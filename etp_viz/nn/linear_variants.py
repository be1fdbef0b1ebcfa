r"""Linear-layer variants on ETP primitives: sign-constrained, weight-standardised, sparse and
low-rank (LoRA).

==============  ================================================  ===============================
layer           forward                                           ETP primitives
==============  ================================================  ===============================
SignedWLinear   :math:`y = x (|W| \odot S)`                       ``etp_mv`` / ``etp_mm``
ScaledWSLinear  :math:`y = (x\, \mathrm{ws}(W)) \odot g + b`      ``etp_mm``, ``etp_elemwise`` ×2
SparseLinear    :math:`y = x\, \mathrm{sparse}(w) + b`            ``etp_sp_mv`` / ``etp_sp_mm``
LoRA            :math:`y = \alpha\, x B A + \mathrm{base}(x)`     ``etp_lora_mv`` / ``etp_lora_mm``
==============  ================================================  ===============================

The weight processing (``|W| * S``, the standardisation) runs in plain JAX *before* the
primitive, so the compiler traces the processed weight back to its ``ParamState`` and relates
the raw parameters to the hidden states the product drives.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import brainstate
import jax
import jax.numpy as jnp
import numpy as np

from ..ops import SparsePattern, element_wise, lora_matmul, matmul, sparse_matmul
from ._init import Initializer, default_float_dtype, make_param, xavier_normal, zeros

__all__ = [
    "LoRA",
    "ScaledWSLinear",
    "SignedWLinear",
    "SparseLinear",
    "lecun_normal",
    "weight_standardization",
]


def lecun_normal(shape: tuple[int, ...]) -> jax.Array:
    """LeCun normal initializer ``N(0, 1 / fan_in)`` (``fan_in = shape[0]``).

    Examples
    --------
    >>> lecun_normal((4, 2)).shape
    (4, 2)
    """
    std = 1.0 / math.sqrt(shape[0])
    return jnp.asarray(brainstate.random.normal(size=shape) * std, default_float_dtype())


class SignedWLinear(brainstate.nn.Module):
    r"""Dense layer with sign-constrained weights: :math:`y = x\, (|W| \odot S)`.

    ``S`` (``w_sign``) is a fixed array of ``±1`` broadcastable to ``(in_size, out_size)``,
    e.g. one sign per presynaptic unit for Dale's law; without it every weight is
    non-negative (``S = 1``). The magnitude ``W`` is trainable (``ParamState`` dict
    ``{'weight': W}``, no bias) and ``|W| ⊙ S`` is computed before :func:`etp_viz.matmul`.

    Parameters
    ----------
    in_size, out_size : int
        Input and output features.
    w_init : initializer, optional
        Magnitude initializer (default: Xavier normal; its sign is discarded by ``|·|``).
    w_sign : array, optional
        Fixed sign mask broadcastable to ``(in_size, out_size)``.
    name : str, optional
        Module name.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import etp_viz
    >>> sign = jnp.array([1.0, 1.0, -1.0])[:, None]   # the third input is inhibitory
    >>> layer = etp_viz.nn.SignedWLinear(3, 2, w_sign=sign)
    >>> layer(jnp.ones((5, 3))).shape
    (5, 2)
    """

    def __init__(
        self,
        in_size: int,
        out_size: int,
        w_init: Initializer = xavier_normal,
        w_sign: Any = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.in_size = (int(in_size),)
        self.out_size = (int(out_size),)
        shape = (int(in_size), int(out_size))
        self.weight = brainstate.ParamState(
            {"weight": make_param(w_init, shape, "SignedWLinear.weight")}
        )
        if w_sign is not None:
            w_sign = jnp.broadcast_to(jnp.asarray(w_sign, default_float_dtype()), shape)
        self.w_sign = w_sign

    def update(self, x: jax.Array) -> jax.Array:
        """Return ``x @ (|W| * S)`` for ``x`` of shape ``(in_size,)`` or ``(batch, in_size)``."""
        w = jnp.abs(self.weight.value["weight"])
        if self.w_sign is not None:
            w = w * self.w_sign
        return matmul(x, w)


def weight_standardization(
    w: jax.Array, eps: float = 1e-4, gain: jax.Array | None = None
) -> jax.Array:
    r"""Scaled weight standardisation over the input axes of ``w`` (output axis last).

    .. math:: \hat W_{io} = g_o\, \frac{W_{io} - \mu_o}{\sqrt{\max(n\,\sigma_o^2, \epsilon)}}

    with :math:`\mu_o, \sigma_o^2` the mean and variance of column :math:`o` and :math:`n` the
    fan-in (as brainstate's ``weight_standardization``).

    Examples
    --------
    >>> w = weight_standardization(jnp.arange(6.0).reshape(3, 2))
    >>> [round(float(v), 6) for v in w.mean(axis=0)]
    [0.0, 0.0]
    """
    axes = tuple(range(w.ndim - 1))
    fan_in = math.prod(w.shape[:-1])
    mean = jnp.mean(w, axis=axes, keepdims=True)
    var = jnp.var(w, axis=axes, keepdims=True)
    scale = jax.lax.rsqrt(jnp.maximum(var * fan_in, eps))
    if gain is not None:
        scale = gain * scale
    return w * scale - mean * scale


class ScaledWSLinear(brainstate.nn.Module):
    r"""Linear layer with scaled weight standardisation: :math:`y = x\, \mathrm{ws}(W, g) + b`.

    Each output column of ``W`` is centred and scaled to unit fan-in variance
    (:func:`weight_standardization`), then multiplied by a learnable gain ``g`` of shape
    ``(1, out_size)`` (``ws_gain=True``). ``W``, ``g`` and ``b`` share one ``ParamState``
    dict ``{'weight', 'gain', 'bias'}``. The standardisation runs before
    :func:`etp_viz.matmul`; since :math:`x (\hat W \odot g) = (x \hat W) \odot g` column by
    column, the gain multiplies the product's output and, like the bias, is marked with
    :func:`etp_viz.element_wise`: each leaf gets its own ETP relation (a weight computed from
    two leaves could not be pulled back to either).

    Parameters
    ----------
    in_size, out_size : int
        Input and output features.
    w_init, b_init : initializer, optional
        Weight (Xavier normal) and bias (zeros; ``None``: no bias) initializers.
    w_mask : array, optional
        Fixed mask multiplied into the standardised weight.
    ws_gain : bool, optional
        Learn the gain ``g`` (initialised to ones); ``False``: no gain.
    eps : float, optional
        Lower bound on ``n σ²`` (default ``1e-4``).
    name : str, optional
        Module name.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import etp_viz
    >>> layer = etp_viz.nn.ScaledWSLinear(3, 2)
    >>> sorted(layer.weight.value)
    ['bias', 'gain', 'weight']
    >>> layer(jnp.ones(3)).shape
    (2,)
    """

    def __init__(
        self,
        in_size: int,
        out_size: int,
        w_init: Initializer = xavier_normal,
        b_init: Initializer = zeros,
        w_mask: Any = None,
        ws_gain: bool = True,
        eps: float = 1e-4,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.in_size = (int(in_size),)
        self.out_size = (int(out_size),)
        shape = (int(in_size), int(out_size))
        params = {"weight": make_param(w_init, shape, "ScaledWSLinear.weight")}
        if ws_gain:
            params["gain"] = jnp.ones((1, int(out_size)), default_float_dtype())
        bias = make_param(b_init, (int(out_size),), "ScaledWSLinear.bias")
        if bias is not None:
            params["bias"] = bias
        self.weight = brainstate.ParamState(params)
        self.w_mask = None if w_mask is None else jnp.broadcast_to(jnp.asarray(w_mask), shape)
        self.eps = float(eps)

    def update(self, x: jax.Array) -> jax.Array:
        """Return ``(x @ ws(W)) * g (+ b)`` for ``x`` of shape ``(in,)`` or ``(batch, in)``."""
        params = self.weight.value
        w = weight_standardization(params["weight"], self.eps)
        if self.w_mask is not None:
            w = w * self.w_mask
        y = matmul(x, w)
        # x @ (ws(W) * g) == (x @ ws(W)) * g column by column: the gain and the bias are
        # per-output parameters, each marked on its own so the compiler relates every leaf
        if "gain" in params:
            y = y * element_wise(params["gain"], lambda g: g.reshape(-1))
        if "bias" in params:
            y = y + element_wise(params["bias"])
        return y


class SparseLinear(brainstate.nn.Module):
    r"""Linear layer over a fixed sparsity pattern.

    .. math:: y_o = \sum_{k:\, c_k = o} x_{r_k} w_k + b_o

    The trainable values ``w`` (``nnz`` of them, initialised from ``sparse_mat.data``) live
    in the ``ParamState`` dict ``{'weight': w (, 'bias': b)}``; the pattern (rows ``r_k``,
    columns ``c_k``) is static and the product is :func:`etp_viz.sparse_matmul`, whose trace
    has one entry per stored weight.

    Parameters
    ----------
    sparse_mat : saiunit.sparse CSR / CSC / COO, shape ``(in_size, out_size)``
        Pattern and initial values.
    b_init : initializer, optional
        Bias initializer (default ``None``: no bias, as in braintrace).
    in_size : int, optional
        Checked against ``sparse_mat.shape[0]`` when given.
    name : str, optional
        Module name.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from saiunit import sparse as ss
    >>> import etp_viz
    >>> layer = etp_viz.nn.SparseLinear(ss.CSR.fromdense(jnp.eye(3) * 2.0))
    >>> layer(jnp.ones((2, 3))).tolist()
    [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]
    """

    def __init__(
        self,
        sparse_mat: Any,
        b_init: Initializer = None,
        in_size: int | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.pattern = SparsePattern.from_matrix(sparse_mat)
        n_in, n_out = self.pattern.shape
        if in_size is not None and int(np.prod(in_size)) != n_in:
            raise ValueError(
                f"SparseLinear: in_size={in_size} but sparse_mat has {n_in} rows; they must match."
            )
        self.in_size = (n_in,)
        self.out_size = (n_out,)
        data = jnp.asarray(getattr(sparse_mat, "data", jnp.zeros(self.pattern.nnz)))
        params = {"weight": jnp.asarray(data, default_float_dtype())}
        bias = make_param(b_init, (n_out,), "SparseLinear.bias")
        if bias is not None:
            params["bias"] = bias
        self.weight = brainstate.ParamState(params)

    def update(self, x: jax.Array) -> jax.Array:
        """Return ``x @ sparse(w) (+ b)`` for ``x`` of shape ``(in,)`` or ``(batch, in)``."""
        params = self.weight.value
        return sparse_matmul(x, params["weight"], sparse_mat=self.pattern, bias=params.get("bias"))


class LoRA(brainstate.nn.Module):
    r"""Low-rank adapter :math:`y = \alpha\, x B A\ (+\ \mathrm{base}(x))`.

    ``B`` has shape ``(in_features, lora_rank)`` and ``A`` ``(lora_rank, out_features)``
    (the naming of :func:`etp_viz.lora_matmul`); both live in one ``ParamState`` dict
    ``{'lora_b': B, 'lora_a': A}``. By default ``A`` starts at zero so the adapter adds
    nothing until trained, the usual LoRA initialisation. The D-RTRL trace is kept for the
    effective weight :math:`\alpha B A` and the factor gradients recovered from it.

    Parameters
    ----------
    in_features, lora_rank, out_features : int
        Input features, adapter rank and output features.
    alpha : float, optional
        Static scale (keyword only).
    base_module : callable, optional
        A module added to the adapter's output, e.g. a frozen or trainable
        :class:`~etp_viz.nn.Linear` (keyword only).
    B_init, A_init : initializer, optional
        Initializers of ``B`` (default LeCun normal) and ``A`` (default zeros).
    in_size : int, optional
        Checked against ``in_features`` when given.
    name : str, optional
        Module name.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import etp_viz
    >>> lora = etp_viz.nn.LoRA(8, 2, 4, alpha=0.5, base_module=etp_viz.nn.Linear(8, 4))
    >>> lora(jnp.ones((3, 8))).shape
    (3, 4)
    """

    def __init__(
        self,
        in_features: int,
        lora_rank: int,
        out_features: int,
        *,
        alpha: float = 1.0,
        base_module: Callable[[jax.Array], jax.Array] | None = None,
        B_init: Initializer = lecun_normal,  # noqa: N803 (braintrace's argument names)
        A_init: Initializer = zeros,  # noqa: N803
        in_size: int | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        if in_size is not None and int(np.prod(in_size)) != int(in_features):
            raise ValueError(f"LoRA: in_size={in_size} does not match in_features={in_features}.")
        self.in_size = (int(in_features),)
        self.out_size = (int(out_features),)
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.lora_rank = int(lora_rank)
        self.alpha = float(alpha)
        self.base_module = base_module
        self.weight = brainstate.ParamState(
            {
                "lora_b": make_param(B_init, (self.in_features, self.lora_rank), "LoRA.B"),
                "lora_a": make_param(A_init, (self.lora_rank, self.out_features), "LoRA.A"),
            }
        )

    def update(self, x: jax.Array) -> jax.Array:
        """Return ``α x B A (+ base_module(x))``."""
        params = self.weight.value
        y = lora_matmul(x, params["lora_b"], params["lora_a"], alpha=self.alpha)
        if self.base_module is not None:
            y = y + self.base_module(x)
        return y
