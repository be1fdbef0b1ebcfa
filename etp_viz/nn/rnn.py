r"""Recurrent cells wired with ETP primitives.

Every weight product goes through :class:`~etp_viz.nn.Linear` (an ETP ``matmul``), and every
recurrent quantity is a ``brainstate.HiddenState``, so the compiler can find the hidden groups
and the weight→hidden relations. The cells follow one convention: the input to a gate is
``concat([x, h])`` along the last axis, which works for unbatched ``(num_in,)`` and batched
``(batch, num_in)`` inputs alike.

What the compiler sees (cells built as ``cls(3, 4)``, default boundary semantics):

==================  ===========================  =========================================
cell                hidden groups                relations
==================  ===========================  =========================================
ValinaRNNCell       1 group, ``h`` (D = 0)       ``W``
GRUCell             1 group, ``h``               ``Wz``, ``Wh`` (``Wr`` is weight→weight)
LSTMCell            1 group of 2: ``h``, ``c``   ``Wi``, ``Wg``, ``Wf``, ``Wo``
MGUCell             1 group, ``h``               ``Wf`` (partial path), ``Wh``
MiniGRU             1 group, ``h`` (diagonal)    ``Wz``, ``Wh``
LeakyRateReadout    1 group, ``r`` (diagonal)    ``W``
==================  ===========================  =========================================

More cells (``URLSTMCell``, ``MinimalRNNCell``, ``MiniLSTM``, ``LRUCell``, ``CFNCell``) live in
:mod:`etp_viz.nn.cells`, with the same table and the D-RTRL claim of each weight.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import brainstate
import jax
import jax.numpy as jnp

from ._init import Initializer, get_activation, state_zeros, xavier_normal, zeros
from .linear import Linear

__all__ = [
    "GRUCell",
    "LSTMCell",
    "LeakyRateReadout",
    "MGUCell",
    "MiniGRU",
    "RecurrentCell",
    "ValinaRNNCell",
]


class RecurrentCell(brainstate.nn.Module):
    """Base class: a cell with ``num_in`` inputs and ``num_out`` units, states zero-initialized.

    Subclasses list their hidden state attribute names in ``_state_names``; ``init_state``
    creates one ``HiddenState`` per name and ``reset_state`` zeroes them.
    """

    _state_names: tuple[str, ...] = ("h",)

    def __init__(self, num_in: int, num_out: int, name: str | None = None) -> None:
        super().__init__(name=name)
        self.num_in = int(num_in)
        self.num_out = int(num_out)
        self.in_size = (self.num_in,)
        self.out_size = (self.num_out,)

    def init_state(self, batch_size: int | None = None, **kwargs) -> None:
        """Create the hidden states, shape ``(num_out,)`` or ``(batch_size, num_out)``."""
        for state_name in self._state_names:
            setattr(self, state_name, brainstate.HiddenState(state_zeros(self.num_out, batch_size)))

    def reset_state(self, batch_size: int | None = None, **kwargs) -> None:
        """Set every hidden state back to zeros (with a possibly new batch size)."""
        for state_name in self._state_names:
            getattr(self, state_name).value = state_zeros(self.num_out, batch_size)


class _GatedCell(RecurrentCell):
    """A cell whose gates are :class:`Linear` maps of ``concat([x, h])`` (named in ``_gates``)."""

    _gates: tuple[str, ...] = ()

    def __init__(
        self,
        num_in: int,
        num_out: int,
        activation: str | Callable[[jax.Array], jax.Array] = "tanh",
        w_init: Initializer = xavier_normal,
        b_init: Initializer = zeros,
        name: str | None = None,
    ) -> None:
        super().__init__(num_in, num_out, name=name)
        self.activation = get_activation(activation)
        for gate in self._gates:
            setattr(self, gate, Linear(num_in + num_out, num_out, w_init=w_init, b_init=b_init))


class ValinaRNNCell(_GatedCell):
    r"""Vanilla RNN cell: :math:`h_t = \phi(W [x_t, h_{t-1}] + b)`.

    ``W`` is one :class:`Linear` of shape ``(num_in + num_out, num_out)`` (weight path
    ``(..., 'W', 'weight')``); the hidden state is ``h``.

    Parameters
    ----------
    num_in, num_out : int
        Input features and hidden units.
    activation : str or callable, optional
        ``'tanh'`` (default), ``'relu'``, … or any callable.
    w_init, b_init : initializer, optional
        Passed to the :class:`Linear`.
    name : str, optional
        Module name.

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp
    >>> import etp_viz
    >>> cell = etp_viz.nn.ValinaRNNCell(3, 4)
    >>> _ = brainstate.nn.init_all_states(cell)
    >>> cell(jnp.ones(3)).shape
    (4,)
    """

    _gates = ("W",)

    def update(self, x: jax.Array) -> jax.Array:
        """One step; returns the new ``h``."""
        xh = jnp.concatenate([x, self.h.value], axis=-1)
        self.h.value = self.activation(self.W(xh))
        return self.h.value


class GRUCell(_GatedCell):
    r"""Gated recurrent unit.

    .. math::

        z_t &= \sigma(W_z [x_t, h_{t-1}]),\quad r_t = \sigma(W_r [x_t, h_{t-1}]) \\
        \tilde h_t &= \phi(W_h [x_t, r_t \odot h_{t-1}]) \\
        h_t &= (1 - z_t) \odot h_{t-1} + z_t \odot \tilde h_t

    ``Wr`` reaches ``h`` only through the ETP product of ``Wh``, so the compiler excludes it as
    weight→weight (its gradient is not learned online); ``Wz`` and ``Wh`` are related.

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp
    >>> import etp_viz
    >>> gru = etp_viz.nn.GRUCell(3, 4)
    >>> _ = brainstate.nn.init_all_states(gru, batch_size=2)
    >>> gru(jnp.ones((2, 3))).shape
    (2, 4)
    """

    _gates = ("Wz", "Wr", "Wh")

    def update(self, x: jax.Array) -> jax.Array:
        """One step; returns the new ``h``."""
        h = self.h.value
        xh = jnp.concatenate([x, h], axis=-1)
        z = jax.nn.sigmoid(self.Wz(xh))
        r = jax.nn.sigmoid(self.Wr(xh))
        candidate = self.activation(self.Wh(jnp.concatenate([x, r * h], axis=-1)))
        self.h.value = (1.0 - z) * h + z * candidate
        return self.h.value


class MGUCell(_GatedCell):
    r"""Minimal gated unit (one forget gate doubling as the reset gate).

    .. math::

        f_t &= \sigma(W_f [x_t, h_{t-1}]) \\
        \tilde h_t &= \phi(W_h [x_t, f_t \odot h_{t-1}]) \\
        h_t &= (1 - f_t) \odot h_{t-1} + f_t \odot \tilde h_t

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp
    >>> import etp_viz
    >>> cell = etp_viz.nn.MGUCell(3, 4)
    >>> _ = brainstate.nn.init_all_states(cell)
    >>> cell(jnp.ones(3)).shape
    (4,)
    """

    _gates = ("Wf", "Wh")

    def update(self, x: jax.Array) -> jax.Array:
        """One step; returns the new ``h``."""
        h = self.h.value
        f = jax.nn.sigmoid(self.Wf(jnp.concatenate([x, h], axis=-1)))
        candidate = self.activation(self.Wh(jnp.concatenate([x, f * h], axis=-1)))
        self.h.value = (1.0 - f) * h + f * candidate
        return self.h.value


class LSTMCell(_GatedCell):
    r"""Long short-term memory cell with hidden ``h`` and cell ``c`` as two ``HiddenState``\ s.

    .. math::

        i_t &= \sigma(W_i [x_t, h_{t-1}]),\quad f_t = \sigma(W_f [x_t, h_{t-1}] + 1) \\
        g_t &= \tanh(W_g [x_t, h_{t-1}]),\quad o_t = \sigma(W_o [x_t, h_{t-1}]) \\
        c_t &= f_t \odot c_{t-1} + i_t \odot g_t,\quad h_t = o_t \odot \tanh(c_t)

    ``h`` reads ``c`` element-wise, so the compiler merges them into one group of 2 states;
    the four gate weights ``Wi``, ``Wg``, ``Wf``, ``Wo`` give four relations. The ``+1`` forget
    bias (``forget_bias``) is the usual trick to remember by default.

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp
    >>> import etp_viz
    >>> lstm = etp_viz.nn.LSTMCell(3, 4)
    >>> _ = brainstate.nn.init_all_states(lstm)
    >>> lstm(jnp.ones(3)).shape
    (4,)
    """

    _state_names = ("h", "c")
    _gates = ("Wi", "Wg", "Wf", "Wo")

    def __init__(
        self,
        num_in: int,
        num_out: int,
        activation: str | Callable[[jax.Array], jax.Array] = "tanh",
        forget_bias: float = 1.0,
        w_init: Initializer = xavier_normal,
        b_init: Initializer = zeros,
        name: str | None = None,
    ) -> None:
        super().__init__(num_in, num_out, activation, w_init=w_init, b_init=b_init, name=name)
        self.forget_bias = float(forget_bias)

    def update(self, x: jax.Array) -> jax.Array:
        """One step; returns the new ``h``."""
        xh = jnp.concatenate([x, self.h.value], axis=-1)
        i = jax.nn.sigmoid(self.Wi(xh))
        g = self.activation(self.Wg(xh))
        f = jax.nn.sigmoid(self.Wf(xh) + self.forget_bias)
        o = jax.nn.sigmoid(self.Wo(xh))
        c = f * self.c.value + i * g
        self.c.value = c
        self.h.value = o * self.activation(c)
        return self.h.value


class MiniGRU(RecurrentCell):
    r"""Minimal GRU (minGRU): gates read only the input, so the recurrence is element-wise.

    .. math::

        z_t = \sigma(W_z x_t),\quad \tilde h_t = W_h x_t,\quad
        h_t = (1 - z_t) \odot h_{t-1} + z_t \odot \tilde h_t

    The hidden→hidden Jacobian is the diagonal ``1 - z_t``, which the compiler recovers
    exactly; this is the cell on which D-RTRL is exact.

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp
    >>> import etp_viz
    >>> cell = etp_viz.nn.MiniGRU(3, 4)
    >>> _ = brainstate.nn.init_all_states(cell)
    >>> cell(jnp.ones(3)).shape
    (4,)
    """

    def __init__(
        self,
        num_in: int,
        num_out: int,
        w_init: Initializer = xavier_normal,
        b_init: Initializer = zeros,
        name: str | None = None,
    ) -> None:
        super().__init__(num_in, num_out, name=name)
        self.Wz = Linear(num_in, num_out, w_init=w_init, b_init=b_init)
        self.Wh = Linear(num_in, num_out, w_init=w_init, b_init=b_init)

    def update(self, x: jax.Array) -> jax.Array:
        """One step; returns the new ``h``."""
        z = jax.nn.sigmoid(self.Wz(x))
        self.h.value = (1.0 - z) * self.h.value + z * self.Wh(x)
        return self.h.value


class LeakyRateReadout(RecurrentCell):
    r"""Leaky rate readout: :math:`r_t = \alpha r_{t-1} + (1 - \alpha) W x_t`, ``α = exp(-dt/τ)``.

    The standard e-prop readout: a low-pass filter of a linear projection, with hidden
    state ``r`` and an element-wise (diagonal ``α``) recurrence. Use ``b_init=None`` (default)
    for a bias-free readout as in e-prop.

    Parameters
    ----------
    in_size, out_size : int
        Input features and readout units.
    tau : float
        Time constant (same unit as ``dt``).
    dt : float
        Integration step.

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp
    >>> import etp_viz
    >>> readout = etp_viz.nn.LeakyRateReadout(3, 2, tau=5.0)
    >>> _ = brainstate.nn.init_all_states(readout)
    >>> readout(jnp.ones(3)).shape
    (2,)
    """

    _state_names = ("r",)

    def __init__(
        self,
        in_size: int,
        out_size: int,
        tau: float = 5.0,
        dt: float = 1.0,
        w_init: Initializer = xavier_normal,
        b_init: Initializer = None,
        name: str | None = None,
    ) -> None:
        super().__init__(in_size, out_size, name=name)
        if tau <= 0 or dt <= 0:
            raise ValueError(f"LeakyRateReadout needs tau > 0 and dt > 0, got tau={tau}, dt={dt}.")
        self.tau = float(tau)
        self.dt = float(dt)
        self.decay = math.exp(-self.dt / self.tau)
        self.W = Linear(in_size, out_size, w_init=w_init, b_init=b_init)

    def update(self, x: jax.Array) -> jax.Array:
        """One step; returns the new ``r``."""
        self.r.value = self.decay * self.r.value + (1.0 - self.decay) * self.W(x)
        return self.r.value
