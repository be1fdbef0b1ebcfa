r"""A recurrent LIF layer with sparse, fixed fan-in recurrent connectivity: :class:`SparseLIF`.

.. math::

    I_t = W_{in} x_t + \mathrm{sparse}(w_{rec})^\top z_{t-1},\quad
    V_t = \alpha\,(V_{t-1} - v_{th} z_{t-1}) + (1 - \alpha)\, I_t,\quad
    z_t = H(V_t - v_{th})

with :math:`z_{t-1} = H(V_{t-1} - v_{th})` the spike of the stored potential (the update
order of :class:`~etp_viz.nn.LIF`). Every neuron receives exactly ``fan_in`` recurrent synapses
(:class:`~etp_viz.ops.FixedFanIn`: the pattern's indices are computed inside the program, so
the compiled step is the same size at a thousand or a million neurons). The recurrent product
is :func:`etp_viz.sparse_matmul`, so the ETP compiler traces ``w_rec`` like any other weight:
the D-RTRL trace has one entry per synapse and sample, the ES-D-RTRL trace one per neuron.

With ``event_driven=True`` the recurrent product reads only the outgoing synapses of the
neurons that spiked (at most ``max_active`` per sample, else the dense-input product for that
step): its cost falls with the firing rate; values and gradients are the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import brainstate
import jax

from ..ops.sparse import FixedFanIn, sparse_matmul
from ._init import Initializer, default_float_dtype, state_zeros, xavier_normal
from .linear import Linear
from .neurons import _get_spike_fn

__all__ = ["SparseLIF"]


class SparseLIF(brainstate.nn.Module):
    r"""Recurrent LIF neurons with ``fan_in`` random recurrent synapses each.

    Parameters
    ----------
    n_in, n_rec : int
        Input features and recurrent neurons (``n_rec < 2**21``).
    fan_in : int
        Recurrent synapses per neuron (it is also every neuron's fan-out).
    tau : float
        Membrane time constant (same unit as ``dt``); :math:`\alpha = e^{-dt/\tau}`.
    threshold : float
        Firing threshold (the resting potential is 0).
    dt : float
        Integration step.
    surrogate : str or callable
        Spike function with a surrogate gradient: ``'sigmoid'`` (default), ``'triangle'`` or a
        callable (see :data:`etp_viz.nn.SURROGATES`).
    rec_scale : float
        Recurrent weights are drawn ``N(0, rec_scale² / fan_in)``.
    event_driven : bool
        Compute the recurrent product from the spiking neurons' rows only.
    max_active : int, optional
        Spikes per sample the event-driven path handles (default ``ceil(n_rec / 10)``); a step
        with more in any sample uses the dense-input product.
    seed : int
        Seed of the connectivity and of the recurrent weights.
    w_init : initializer
        For the input :class:`~etp_viz.nn.Linear` ``W_in`` (no bias).

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp
    >>> import etp_viz
    >>> layer = etp_viz.nn.SparseLIF(3, 50, fan_in=5, event_driven=True)
    >>> _ = brainstate.nn.init_all_states(layer, batch_size=2)
    >>> layer(jnp.ones((2, 3))).shape
    (2, 50)
    """

    def __init__(
        self,
        n_in: int,
        n_rec: int,
        fan_in: int = 100,
        tau: float = 10.0,
        threshold: float = 1.0,
        dt: float = 1.0,
        surrogate: str | Callable[[jax.Array], jax.Array] = "sigmoid",
        rec_scale: float = 1.0,
        event_driven: bool = False,
        max_active: int | None = None,
        seed: int = 0,
        w_init: Initializer = xavier_normal,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        if tau <= 0 or dt <= 0:
            raise ValueError(f"SparseLIF needs tau > 0 and dt > 0; got tau={tau}, dt={dt}.")
        self.n_in, self.n_rec = int(n_in), int(n_rec)
        self.in_size, self.out_size = (self.n_in,), (self.n_rec,)
        self.tau, self.threshold, self.dt = float(tau), float(threshold), float(dt)
        self.alpha = math.exp(-self.dt / self.tau)
        self.spike_fn = _get_spike_fn(surrogate)
        self.pattern = FixedFanIn(self.n_rec, fan_in, seed=seed)
        self.event_driven = bool(event_driven)
        default_budget = max(1, math.ceil(self.n_rec / 10))
        self.max_active = int(max_active) if max_active is not None else default_budget
        self.W_in = Linear(self.n_in, self.n_rec, w_init=w_init, b_init=None)
        key = jax.random.fold_in(jax.random.PRNGKey(seed), 1)
        std = float(rec_scale) / math.sqrt(self.pattern.fan_in)
        weight = std * jax.random.normal(key, (self.pattern.nnz,), default_float_dtype())
        self.W_rec = brainstate.ParamState({"weight": weight})

    @property
    def fan_in(self) -> int:
        return self.pattern.fan_in

    def init_state(self, batch_size: int | None = None, **kwargs) -> None:
        """Create the membrane potential ``V`` (zeros)."""
        self.V = brainstate.HiddenState(state_zeros(self.n_rec, batch_size))

    def reset_state(self, batch_size: int | None = None, **kwargs) -> None:
        """Set ``V`` back to zeros."""
        self.V.value = state_zeros(self.n_rec, batch_size)

    def spike(self, V: jax.Array | None = None) -> jax.Array:
        """Spikes emitted by ``V`` (default: the stored potential)."""
        V = self.V.value if V is None else V
        return self.spike_fn((V - self.threshold) / self.threshold)

    def recurrent_current(self, z: jax.Array) -> jax.Array:
        """``sparse(w_rec)ᵀ z``: event-driven or dense-input, as configured."""
        budget = self.max_active if self.event_driven else None
        weight = self.W_rec.value["weight"]
        return sparse_matmul(z, weight, sparse_mat=self.pattern, max_active=budget)

    def update(self, x: jax.Array) -> jax.Array:
        """One step; returns the spikes ``z_t`` of the new potential."""
        V_prev = self.V.value
        z_prev = self.spike(V_prev)
        current = self.W_in(x) + self.recurrent_current(z_prev)
        reset = V_prev - self.threshold * z_prev
        self.V.value = self.alpha * reset + (1.0 - self.alpha) * current
        return self.spike()
