r"""Spiking neurons (LIF, ALIF) with surrogate-gradient spike functions.

A spike is the Heaviside step :math:`z = H(v - v_{th})`; its derivative is replaced by a smooth
pseudo-derivative :math:`\psi(v - v_{th})` (a ``jax.custom_jvp``), which is what makes
gradient-based and eligibility-trace learning work on spiking networks (e-prop,
Bellec et al. 2020, *Nat. Commun.* 11:3625).

Update order (so that the model output is a function of the *stored* membrane potential,
which is where the compiler's perturbation measures ∂L/∂h):

1. ``z_prev = spike(V_prev - threshold)`` — the spike the stored potential emitted;
2. soft reset and leak: ``V = α (V_prev - z_prev · threshold) + (1 - α) · I_t``;
3. store ``V``; output ``spike(V - threshold)``.

Everything acting on ``V`` is element-wise, so the hidden→hidden Jacobian is diagonal and
the compiler takes it exactly. The input current is an ETP ``matmul`` through a
:class:`~etp_viz.nn.Linear` ``W`` (weight path ``(..., 'W', 'weight')``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import brainstate
import jax
import jax.numpy as jnp

from ._init import Initializer, state_zeros, xavier_normal
from .linear import Linear

__all__ = [
    "ALIF",
    "LIF",
    "SURROGATES",
    "sigmoid_spike",
    "sigmoid_surrogate_grad",
    "triangle_spike",
    "triangle_surrogate_grad",
]


def sigmoid_surrogate_grad(x: jax.Array, alpha: float = 4.0) -> jax.Array:
    r"""Pseudo-derivative :math:`\psi(x) = \alpha\, \sigma(\alpha x)(1 - \sigma(\alpha x))`."""
    s = jax.nn.sigmoid(alpha * x)
    return alpha * s * (1.0 - s)


def triangle_surrogate_grad(x: jax.Array, gamma: float = 0.3, width: float = 1.0) -> jax.Array:
    r"""e-prop's pseudo-derivative :math:`\psi(x) = \frac{\gamma}{w} \max(0, 1 - |x| / w)`."""
    return gamma / width * jnp.maximum(0.0, 1.0 - jnp.abs(x) / width)


def _heaviside(x: jax.Array) -> jax.Array:
    x = jnp.asarray(x)
    return (x > 0).astype(x.dtype)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _sigmoid_spike(x: jax.Array, alpha: float) -> jax.Array:
    return _heaviside(x)


@_sigmoid_spike.defjvp
def _sigmoid_spike_jvp(alpha, primals, tangents):
    (x,), (dx,) = primals, tangents
    return _heaviside(x), sigmoid_surrogate_grad(x, alpha) * dx


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2))
def _triangle_spike(x: jax.Array, gamma: float, width: float) -> jax.Array:
    return _heaviside(x)


@_triangle_spike.defjvp
def _triangle_spike_jvp(gamma, width, primals, tangents):
    (x,), (dx,) = primals, tangents
    return _heaviside(x), triangle_surrogate_grad(x, gamma, width) * dx


def sigmoid_spike(x: jax.Array, alpha: float = 4.0) -> jax.Array:
    """Heaviside spike ``x > 0`` whose derivative is :func:`sigmoid_surrogate_grad`.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> sigmoid_spike(jnp.array([-1.0, 0.5]))
    Array([0., 1.], dtype=float32)
    >>> float(jax.grad(sigmoid_spike)(0.0))  # alpha / 4 at the threshold
    1.0
    """
    return _sigmoid_spike(jnp.asarray(x), float(alpha))


def triangle_spike(x: jax.Array, gamma: float = 0.3, width: float = 1.0) -> jax.Array:
    """Heaviside spike ``x > 0`` whose derivative is :func:`triangle_surrogate_grad`."""
    return _triangle_spike(jnp.asarray(x), float(gamma), float(width))


#: Named spike functions accepted by the ``spike_fn`` argument of the neurons.
SURROGATES: dict[str, Callable[[jax.Array], jax.Array]] = {
    "sigmoid": sigmoid_spike,
    "triangle": triangle_spike,
}


def _get_spike_fn(spike_fn: str | Callable[[jax.Array], jax.Array]) -> Callable:
    if callable(spike_fn):
        return spike_fn
    if spike_fn in SURROGATES:
        return SURROGATES[spike_fn]
    raise ValueError(
        f"Unknown spike_fn {spike_fn!r}. Valid names: {sorted(SURROGATES)}; or pass a callable "
        f"such as functools.partial(etp_viz.nn.sigmoid_spike, alpha=10.0)."
    )


class LIF(brainstate.nn.Module):
    r"""Layer of leaky integrate-and-fire neurons driven by an ETP dense input.

    .. math::

        I_t = W [x_t, z_{t-1}] + b,\quad
        V_t = \alpha\,(V_{t-1} - v_{th} z_{t-1}) + (1 - \alpha) R\, I_t,\quad
        z_t = H(V_t - v_{th})

    with :math:`\alpha = e^{-dt/\tau_{mem}}` and :math:`z_{t-1} = H(V_{t-1} - v_{th})` (the
    spike of the stored potential, soft reset by subtraction). The recurrent input
    :math:`z_{t-1}` is only concatenated when ``recurrent=True``. One hidden state ``V``.

    Parameters
    ----------
    num_in, num_out : int
        Input features and neurons.
    tau_mem : float
        Membrane time constant (same unit as ``dt``).
    V_th : float
        Firing threshold (the resting potential is 0).
    dt : float
        Integration step.
    R : float
        Input resistance (scales the current).
    recurrent : bool
        Feed the previous spikes back through ``W`` (shape ``(num_in + num_out, num_out)``).
    spike_fn : str or callable
        ``'sigmoid'`` (default), ``'triangle'`` or a callable with a surrogate gradient.
    detach_reset : bool
        Stop the gradient through the reset term (a common stabilizer).
    w_init, b_init : initializer
        For the input :class:`Linear` (no bias by default).

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp
    >>> import etp_viz
    >>> lif = etp_viz.nn.LIF(3, 4, tau_mem=10.0)
    >>> _ = brainstate.nn.init_all_states(lif, batch_size=2)
    >>> lif(jnp.ones((2, 3))).shape
    (2, 4)
    """

    def __init__(
        self,
        num_in: int,
        num_out: int,
        tau_mem: float = 10.0,
        V_th: float = 1.0,
        dt: float = 1.0,
        R: float = 1.0,
        recurrent: bool = False,
        spike_fn: str | Callable[[jax.Array], jax.Array] = "sigmoid",
        detach_reset: bool = False,
        w_init: Initializer = xavier_normal,
        b_init: Initializer = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        if tau_mem <= 0 or dt <= 0:
            raise ValueError(f"{type(self).__name__} needs tau_mem > 0 and dt > 0.")
        self.num_in, self.num_out = int(num_in), int(num_out)
        self.in_size, self.out_size = (self.num_in,), (self.num_out,)
        self.tau_mem, self.V_th, self.dt, self.R = float(tau_mem), float(V_th), float(dt), float(R)
        self.alpha = math.exp(-self.dt / self.tau_mem)
        self.recurrent = bool(recurrent)
        self.detach_reset = bool(detach_reset)
        self.spike_fn = _get_spike_fn(spike_fn)
        w_in = num_in + num_out if recurrent else num_in
        self.W = Linear(w_in, num_out, w_init=w_init, b_init=b_init)

    def init_state(self, batch_size: int | None = None, **kwargs) -> None:
        """Create the membrane potential ``V`` (zeros)."""
        self.V = brainstate.HiddenState(state_zeros(self.num_out, batch_size))

    def reset_state(self, batch_size: int | None = None, **kwargs) -> None:
        """Set ``V`` back to zeros."""
        self.V.value = state_zeros(self.num_out, batch_size)

    def threshold(self) -> jax.Array | float:
        """The effective firing threshold (a constant for LIF)."""
        return self.V_th

    def spike(self, V: jax.Array | None = None) -> jax.Array:
        """Spikes emitted by ``V`` (default: the stored potential)."""
        V = self.V.value if V is None else V
        return self.spike_fn((V - self.threshold()) / self.V_th)

    def _input_current(self, x: jax.Array, z_prev: jax.Array) -> jax.Array:
        inputs = jnp.concatenate([x, z_prev], axis=-1) if self.recurrent else x
        return self.R * self.W(inputs)

    def _reset(self, V_prev: jax.Array, z_prev: jax.Array) -> jax.Array:
        z = jax.lax.stop_gradient(z_prev) if self.detach_reset else z_prev
        return V_prev - self.threshold() * z

    def update(self, x: jax.Array) -> jax.Array:
        """One step; returns the spikes ``z_t`` of the new potential."""
        V_prev = self.V.value
        z_prev = self.spike(V_prev)
        current = self._input_current(x, z_prev)
        self.V.value = self.alpha * self._reset(V_prev, z_prev) + (1.0 - self.alpha) * current
        return self.spike()


class ALIF(LIF):
    r"""Adaptive LIF (e-prop's ALIF): two hidden states, ``V`` and the adaptation ``a``.

    .. math::

        A_t = v_{th} + \beta a_t,\quad z_{t-1} = H(V_{t-1} - A_{t-1}) \\
        V_t = \alpha\,(V_{t-1} - A_{t-1} z_{t-1}) + (1-\alpha) R\, I_t,\quad
        a_t = \rho\, a_{t-1} + z_{t-1}

    with :math:`\rho = e^{-dt/\tau_a}`. ``V`` and ``a`` read each other element-wise, so the
    compiler merges them into **one hidden group of S = 2 states** with a per-neuron
    ``2 × 2`` Jacobian block.

    Parameters
    ----------
    tau_a : float
        Adaptation time constant.
    beta : float
        Adaptation strength (threshold increase per unit of ``a``).
    **kwargs
        As :class:`LIF`.

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp
    >>> import etp_viz
    >>> alif = etp_viz.nn.ALIF(3, 4, tau_a=50.0, beta=0.5)
    >>> _ = brainstate.nn.init_all_states(alif)
    >>> alif(jnp.ones(3)).shape
    (4,)
    """

    def __init__(
        self,
        num_in: int,
        num_out: int,
        tau_mem: float = 10.0,
        tau_a: float = 100.0,
        beta: float = 0.2,
        **kwargs,
    ) -> None:
        super().__init__(num_in, num_out, tau_mem=tau_mem, **kwargs)
        if tau_a <= 0:
            raise ValueError("ALIF needs tau_a > 0.")
        self.tau_a, self.beta = float(tau_a), float(beta)
        self.rho = math.exp(-self.dt / self.tau_a)

    def init_state(self, batch_size: int | None = None, **kwargs) -> None:
        """Create ``V`` and the adaptation ``a`` (zeros)."""
        super().init_state(batch_size)
        self.a = brainstate.HiddenState(state_zeros(self.num_out, batch_size))

    def reset_state(self, batch_size: int | None = None, **kwargs) -> None:
        """Set ``V`` and ``a`` back to zeros."""
        super().reset_state(batch_size)
        self.a.value = state_zeros(self.num_out, batch_size)

    def threshold(self) -> jax.Array:
        """The adaptive threshold ``v_th + β a`` of the stored adaptation."""
        return self.V_th + self.beta * self.a.value

    def update(self, x: jax.Array) -> jax.Array:
        """One step; returns the spikes ``z_t`` of the new potential and threshold."""
        V_prev, a_prev = self.V.value, self.a.value
        z_prev = self.spike(V_prev)
        current = self._input_current(x, z_prev)
        V = self.alpha * self._reset(V_prev, z_prev) + (1.0 - self.alpha) * current
        self.a.value = self.rho * a_prev + z_prev
        self.V.value = V
        return self.spike()
