r"""More recurrent cells wired with ETP primitives: UR-LSTM, MinimalRNN, minLSTM, LRU and CFN.

As in :mod:`etp_viz.nn.rnn`, every weight product is an ETP primitive (a
:class:`~etp_viz.nn.Linear` or :func:`etp_viz.element_wise` for per-unit parameters) and every
recurrent quantity a ``brainstate.HiddenState``. Where the recurrence is element-wise (the
hidden→hidden Jacobian is diagonal per unit) D-RTRL is exact; a dense recurrence through a
gate (``W [x, h]``) is an ETP boundary and makes it approximate.

What the compiler sees (cells built as ``cls(3, 4)``, D-RTRL claims):

==================  ==================================  ==================================
cell                hidden groups                       relations (claim)
==================  ==================================  ==================================
URLSTMCell          1 group of 2: ``h``, ``c``          ``Wf``, ``Wr``, ``Wu``, ``Wo``
                                                        (approximate: dense ``h -> h``)
MinimalRNNCell      1 group, ``h``                      ``phi``, ``Wu`` (approximate)
MiniLSTM            1 group, ``h`` (diagonal)           ``Wf``, ``Wi``, ``Wh`` (exact)
LRUCell             1 group of 2: ``h_re``, ``h_im``    ``nu_log``, ``theta_log``,
                    (per-unit 2×2 rotation)             ``gamma_log``, ``B_re``, ``B_im``
                                                        (exact); ``C_re``, ``C_im``, ``D``
                                                        are readouts (exact)
CFNCell             1 group, ``h``                      ``W``, ``Wtheta``, ``Weta``
                                                        (approximate; exact with
                                                        ``recurrent_gates=False``)
==================  ==================================  ==================================
"""

from __future__ import annotations

import math
from collections.abc import Callable

import brainstate
import jax
import jax.numpy as jnp

from ..ops import element_wise
from ._init import (
    Initializer,
    default_float_dtype,
    get_activation,
    normal,
    xavier_normal,
    zeros,
)
from .linear import Linear
from .rnn import RecurrentCell

__all__ = ["CFNCell", "LRUCell", "MiniLSTM", "MinimalRNNCell", "URLSTMCell"]

Activation = str | Callable[[jax.Array], jax.Array]


def _cat(x: jax.Array, h: jax.Array) -> jax.Array:
    return jnp.concatenate([x, h], axis=-1)


class URLSTMCell(RecurrentCell):
    r"""LSTM with the UR gating mechanism (Gu et al. 2020, *Improving the Gating Mechanism of
    Recurrent Neural Networks*).

    .. math::

        f_t &= \sigma(W_f [x_t, h_{t-1}] + b_{ur}),\quad
        r_t = \sigma(W_r [x_t, h_{t-1}] - b_{ur}) \\
        g_t &= 2 r_t f_t + (1 - 2 r_t) f_t^2 \\
        c_t &= g_t \odot c_{t-1} + (1 - g_t) \odot \phi(W_u [x_t, h_{t-1}]) \\
        h_t &= \sigma(W_o [x_t, h_{t-1}]) \odot \phi(c_t)

    :math:`b_{ur} = -\log(1/u - 1)`, :math:`u \sim U(1/n, 1 - 1/n)`, is a fixed uniform
    gate-initialisation offset (``forget_bias``; the gates' own biases are trainable). The
    four gates are four :class:`Linear` maps (rather than one split product) so each is its
    own ETP relation; ``h`` and ``c`` form one hidden group. The gates read ``h`` through a
    dense product, so D-RTRL is approximate.

    Parameters
    ----------
    num_in, num_out : int
        Input features and hidden units.
    w_init, b_init : initializer, optional
        Passed to the gate :class:`Linear` layers.
    activation : str or callable, optional
        :math:`\phi` (default ``'tanh'``).
    name : str, optional
        Module name.

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp
    >>> import etp_viz
    >>> cell = etp_viz.nn.URLSTMCell(3, 4)
    >>> _ = brainstate.nn.init_all_states(cell, batch_size=2)
    >>> cell(jnp.ones((2, 3))).shape
    (2, 4)
    """

    _state_names = ("h", "c")

    def __init__(
        self,
        num_in: int,
        num_out: int,
        w_init: Initializer = xavier_normal,
        b_init: Initializer = zeros,
        activation: Activation = "tanh",
        name: str | None = None,
    ) -> None:
        super().__init__(num_in, num_out, name=name)
        self.activation = get_activation(activation)
        for gate in ("Wf", "Wr", "Wu", "Wo"):
            setattr(self, gate, Linear(num_in + num_out, num_out, w_init=w_init, b_init=b_init))
        low = 1.0 / self.num_out if self.num_out > 2 else 0.25
        u = brainstate.random.uniform(low, 1.0 - low, (self.num_out,))
        self.forget_bias = jnp.asarray(-jnp.log(1.0 / u - 1.0), default_float_dtype())

    def update(self, x: jax.Array) -> jax.Array:
        """One step; returns the new ``h``."""
        xh = _cat(x, self.h.value)
        f = jax.nn.sigmoid(self.Wf(xh) + self.forget_bias)
        r = jax.nn.sigmoid(self.Wr(xh) - self.forget_bias)
        g = 2.0 * r * f + (1.0 - 2.0 * r) * f**2
        c = g * self.c.value + (1.0 - g) * self.activation(self.Wu(xh))
        self.c.value = c
        self.h.value = jax.nn.sigmoid(self.Wo(xh)) * self.activation(c)
        return self.h.value


class MinimalRNNCell(RecurrentCell):
    r"""Minimal RNN (Chen 2017, *MinimalRNN: Toward More Interpretable and Trainable Recurrent
    Neural Networks*).

    .. math::

        z_t = \Phi(x_t),\quad
        u_t = \sigma(W_u [z_t, h_{t-1}] + b_u),\quad
        h_t = u_t \odot h_{t-1} + (1 - u_t) \odot z_t

    :math:`\Phi` is ``phi`` (default: a :class:`Linear` ``num_in -> num_out``). The update
    gate reads ``h`` through the dense ``Wu``, so D-RTRL is approximate; ``phi`` also reaches
    ``h`` through ``Wu``'s product, which the compiler records as a partial path.

    Parameters
    ----------
    num_in, num_out : int
        Input features and hidden units.
    w_init, b_init : initializer, optional
        Passed to ``Wu`` and to the default ``phi``.
    phi : callable, optional
        The input map :math:`\Phi` (a module whose products are ETP primitives).
    name : str, optional
        Module name.

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp
    >>> import etp_viz
    >>> cell = etp_viz.nn.MinimalRNNCell(3, 4)
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
        phi: Callable[[jax.Array], jax.Array] | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(num_in, num_out, name=name)
        self.phi = Linear(num_in, num_out, w_init=w_init, b_init=b_init) if phi is None else phi
        self.Wu = Linear(2 * num_out, num_out, w_init=w_init, b_init=b_init)

    def update(self, x: jax.Array) -> jax.Array:
        """One step; returns the new ``h``."""
        h = self.h.value
        z = self.phi(x)
        u = jax.nn.sigmoid(self.Wu(_cat(z, h)))
        self.h.value = u * h + (1.0 - u) * z
        return self.h.value


class MiniLSTM(RecurrentCell):
    r"""Minimal LSTM (minLSTM, Feng et al. 2024, *Were RNNs All We Needed?*).

    .. math::

        f_t = \sigma(W_f x_t),\quad i_t = \sigma(W_i x_t),\quad \tilde h_t = W_h x_t \\
        f'_t = \frac{f_t}{f_t + i_t},\quad i'_t = \frac{i_t}{f_t + i_t},\quad
        h_t = f'_t \odot h_{t-1} + i'_t \odot \tilde h_t

    The gates read only the input, so the hidden→hidden Jacobian is the diagonal
    :math:`f'_t` and D-RTRL is exact.

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp
    >>> import etp_viz
    >>> cell = etp_viz.nn.MiniLSTM(3, 4)
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
        self.Wf = Linear(num_in, num_out, w_init=w_init, b_init=b_init)
        self.Wi = Linear(num_in, num_out, w_init=w_init, b_init=b_init)
        self.Wh = Linear(num_in, num_out, w_init=w_init, b_init=b_init)

    def update(self, x: jax.Array) -> jax.Array:
        """One step; returns the new ``h``."""
        f = jax.nn.sigmoid(self.Wf(x))
        i = jax.nn.sigmoid(self.Wi(x))
        total = f + i
        self.h.value = (f / total) * self.h.value + (i / total) * self.Wh(x)
        return self.h.value


class LRUCell(RecurrentCell):
    r"""Linear Recurrent Unit (Orvieto et al. 2023, *Resurrecting Recurrent Neural Networks for
    Long Sequences*), with the complex state stored as its real and imaginary parts.

    .. math::

        \lambda &= e^{-e^{\nu}} e^{i e^{\theta}},\quad \gamma = e^{\gamma_{\log}} \\
        h_t &= \lambda \odot h_{t-1} + \gamma \odot (B_{re} + i B_{im}) x_t \\
        y_t &= \mathrm{Re}[(C_{re} + i C_{im}) h_t] + D \odot x_t

    i.e. per unit a 2×2 rotation-and-decay of :math:`(h_{re}, h_{im})`. The per-unit
    parameters :math:`\nu` (``nu_log``), :math:`\theta` (``theta_log``) and
    :math:`\gamma_{\log}` (``gamma_log``) go through :func:`etp_viz.element_wise`, ``B`` through
    :class:`Linear`; both states form one group with a per-unit Jacobian, so D-RTRL is exact.
    ``C`` and ``D`` only read the new state and the input: they are readouts.

    Parameters
    ----------
    d_model : int
        Input and output features.
    d_hidden : int
        Complex hidden units (two ``HiddenState``\ s of this size).
    r_min, r_max : float, optional
        Range of :math:`|\lambda|` at initialisation (ring initialisation).
    max_phase : float, optional
        Largest initial phase of :math:`\lambda`.
    name : str, optional
        Module name.

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp
    >>> import etp_viz
    >>> cell = etp_viz.nn.LRUCell(3, 8)
    >>> _ = brainstate.nn.init_all_states(cell, batch_size=2)
    >>> cell(jnp.ones((2, 3))).shape
    (2, 3)
    """

    _state_names = ("h_re", "h_im")

    def __init__(
        self,
        d_model: int,
        d_hidden: int,
        r_min: float = 0.0,
        r_max: float = 1.0,
        max_phase: float = 6.28,
        name: str | None = None,
    ) -> None:
        super().__init__(d_model, d_hidden, name=name)
        if not 0.0 <= r_min < r_max <= 1.0:
            raise ValueError(f"LRUCell needs 0 <= r_min < r_max <= 1, got {r_min}, {r_max}.")
        self.d_model, self.d_hidden = int(d_model), int(d_hidden)
        self.out_size = (self.d_model,)
        self.r_min, self.r_max, self.max_phase = float(r_min), float(r_max), float(max_phase)
        dtype = default_float_dtype()
        u1 = brainstate.random.uniform(0.0, 1.0, (self.d_hidden,))
        u2 = brainstate.random.uniform(0.0, 1.0, (self.d_hidden,))
        # clip u1 away from 0 so that -log(.) stays finite for r_min = 0
        u1 = jnp.clip(u1, 1e-6, 1.0)
        nu_log = jnp.log(-0.5 * jnp.log(u1 * (r_max**2 - r_min**2) + r_min**2))
        theta_log = jnp.log(jnp.maximum(u2 * max_phase, 1e-6))
        modulus = jnp.exp(-jnp.exp(nu_log))
        gamma_log = jnp.log(jnp.sqrt(jnp.maximum(1.0 - modulus**2, 1e-12)))
        self.nu_log = brainstate.ParamState(jnp.asarray(nu_log, dtype))
        self.theta_log = brainstate.ParamState(jnp.asarray(theta_log, dtype))
        self.gamma_log = brainstate.ParamState(jnp.asarray(gamma_log, dtype))
        b_init = normal(1.0 / math.sqrt(2 * self.d_model))
        c_init = normal(1.0 / math.sqrt(self.d_hidden))
        self.B_re = Linear(self.d_model, self.d_hidden, w_init=b_init, b_init=None)
        self.B_im = Linear(self.d_model, self.d_hidden, w_init=b_init, b_init=None)
        self.C_re = Linear(self.d_hidden, self.d_model, w_init=c_init, b_init=None)
        self.C_im = Linear(self.d_hidden, self.d_model, w_init=c_init, b_init=None)
        self.D = brainstate.ParamState(normal(1.0)((self.d_model,)))

    def update(self, x: jax.Array) -> jax.Array:
        """One step; stores the new ``(h_re, h_im)`` and returns ``y`` (``d_model`` features)."""
        modulus = element_wise(self.nu_log.value, lambda v: jnp.exp(-jnp.exp(v)))
        phase = element_wise(self.theta_log.value, jnp.exp)
        gamma = element_wise(self.gamma_log.value, jnp.exp)
        a_re, a_im = modulus * jnp.cos(phase), modulus * jnp.sin(phase)
        h_re, h_im = self.h_re.value, self.h_im.value
        new_re = a_re * h_re - a_im * h_im + gamma * self.B_re(x)
        new_im = a_re * h_im + a_im * h_re + gamma * self.B_im(x)
        self.h_re.value = new_re
        self.h_im.value = new_im
        skip = element_wise(self.D.value) * x
        return self.C_re(new_re) - self.C_im(new_im) + skip


class CFNCell(RecurrentCell):
    r"""Chaos-free network cell (Laurent & von Brecht 2017, *A Recurrent Neural Network Without
    Chaos*).

    .. math::

        \theta_t &= \sigma(W_\theta [x_t, h_{t-1}] + b_\theta),\quad
        \eta_t = \sigma(W_\eta [x_t, h_{t-1}] + b_\eta) \\
        h_t &= \theta_t \odot \phi(h_{t-1}) + \eta_t \odot \phi(W x_t)

    The state's own path :math:`\theta_t \odot \phi(h_{t-1})` is element-wise, but the gates
    read ``h`` through dense products, so D-RTRL is approximate. With
    ``recurrent_gates=False`` the gates read only :math:`x_t`
    (:math:`\theta_t = \sigma(W_\theta x_t + b_\theta)`, likewise :math:`\eta_t`): the
    recurrence is then element-wise and D-RTRL exact.

    Parameters
    ----------
    num_in, num_out : int
        Input features and hidden units.
    w_init, b_init : initializer, optional
        Passed to the gate :class:`Linear` layers (``W`` has no bias).
    activation : str or callable, optional
        :math:`\phi` (default ``'tanh'``).
    recurrent_gates : bool, optional
        Gates read ``[x_t, h_{t-1}]`` (default, as in the paper) or ``x_t`` only.
    name : str, optional
        Module name.

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp
    >>> import etp_viz
    >>> cell = etp_viz.nn.CFNCell(3, 4)
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
        activation: Activation = "tanh",
        recurrent_gates: bool = True,
        name: str | None = None,
    ) -> None:
        super().__init__(num_in, num_out, name=name)
        self.activation = get_activation(activation)
        self.recurrent_gates = bool(recurrent_gates)
        gate_in = num_in + num_out if self.recurrent_gates else num_in
        self.W = Linear(num_in, num_out, w_init=w_init, b_init=None)
        self.Wtheta = Linear(gate_in, num_out, w_init=w_init, b_init=b_init)
        self.Weta = Linear(gate_in, num_out, w_init=w_init, b_init=b_init)

    def update(self, x: jax.Array) -> jax.Array:
        """One step; returns the new ``h``."""
        h = self.h.value
        gate_in = _cat(x, h) if self.recurrent_gates else x
        theta = jax.nn.sigmoid(self.Wtheta(gate_in))
        eta = jax.nn.sigmoid(self.Weta(gate_in))
        self.h.value = theta * self.activation(h) + eta * self.activation(self.W(x))
        return self.h.value
