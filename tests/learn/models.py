"""Small models for the learn tests: one per ETP primitive family, recurrence element-wise.

Each ``Leaky*`` cell computes ``h_t = a * h_{t-1} + tanh(op(x_t, W))`` with a constant decay
``a``: the hidden-to-hidden Jacobian is diagonal and the ``y -> h`` tail element-wise, so
D-RTRL must equal BPTT to rounding. ``Net`` adds an ETP readout.
"""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp
from saiunit import sparse as ss

import etp_viz
import etp_viz.nn as nn

NUM_IN, NUM_HID, NUM_OUT = 3, 4, 2


def _param(key: int, shape: tuple, scale: float = 0.5) -> brainstate.ParamState:
    return brainstate.ParamState(scale * jax.random.normal(jax.random.PRNGKey(key), shape))


class LeakyCell(brainstate.nn.Module):
    """``h = a*h + tanh(op(x))``; subclasses define ``op`` and the hidden shape."""

    decay = 0.8

    def __init__(self):
        super().__init__()
        self.num_out = NUM_HID

    def hidden_shape(self, batch_size):
        return (NUM_HID,) if batch_size is None else (batch_size, NUM_HID)

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.zeros(self.hidden_shape(batch_size)))

    def reset_state(self, batch_size=None, **kwargs):
        self.h.value = jnp.zeros(self.hidden_shape(batch_size))

    def update(self, x):
        self.h.value = self.decay * self.h.value + jnp.tanh(self.op(x))
        return self.h.value


class LeakyDense(LeakyCell):
    """``etp_mm`` with a batch, ``etp_mv`` without; weight and bias in one ParamState."""

    def __init__(self):
        super().__init__()
        self.W = _param(0, (NUM_IN, NUM_HID))
        self.b = _param(1, (NUM_HID,))

    def op(self, x):
        return etp_viz.matmul(x, self.W.value, bias=self.b.value)


class LeakyElemwise(LeakyCell):
    """``etp_elemwise`` with a processing chain (``softplus``) and a per-unit weight shared
    over the batch: ``h = sigmoid(w~) * h + tanh(x W0 + w~)`` with ``w~ = softplus(w)``."""

    def __init__(self):
        super().__init__()
        self.w = _param(2, (NUM_HID,))
        self.W0 = jax.random.normal(jax.random.PRNGKey(3), (NUM_IN, NUM_HID)) * 0.5

    def update(self, x):
        w = etp_viz.element_wise(self.w.value, jax.nn.softplus)
        self.h.value = jax.nn.sigmoid(w) * self.h.value + jnp.tanh(x @ self.W0 + w)
        return self.h.value


class LeakyConv(LeakyCell):
    """``etp_conv`` 1-D, 'SAME', hidden ``(B, L, C)``."""

    length, channels = 5, 2

    def __init__(self):
        super().__init__()
        self.K = _param(4, (3, NUM_IN, self.channels))
        self.num_out = self.channels

    def hidden_shape(self, batch_size):
        return (batch_size or 1, self.length, self.channels)

    def op(self, x):
        return etp_viz.conv(
            x, self.K.value, strides=(1,), padding="SAME", dimension_numbers=("NWC", "WIO", "NWC")
        )


class LeakySparse(LeakyCell):
    """``etp_sp_mm`` / ``etp_sp_mv`` over a fixed random pattern."""

    def __init__(self):
        super().__init__()
        dense = jnp.where(
            jax.random.uniform(jax.random.PRNGKey(5), (NUM_IN, NUM_HID)) < 0.6,
            jax.random.normal(jax.random.PRNGKey(6), (NUM_IN, NUM_HID)),
            0.0,
        )
        self.pattern = ss.CSR.fromdense(dense)
        self.w = brainstate.ParamState(self.pattern.data * 0.5)

    def op(self, x):
        return etp_viz.sparse_matmul(x, self.w.value, sparse_mat=self.pattern)


class LeakyLora(LeakyCell):
    """``etp_lora_mm`` / ``etp_lora_mv``: ``B`` and ``A`` in one dict ParamState."""

    def __init__(self):
        super().__init__()
        self.lora = brainstate.ParamState(
            {
                "B": 0.5 * jax.random.normal(jax.random.PRNGKey(7), (NUM_IN, 2)),
                "A": 0.5 * jax.random.normal(jax.random.PRNGKey(8), (2, NUM_HID)),
            }
        )

    def op(self, x):
        return etp_viz.lora_matmul(x, self.lora.value["B"], self.lora.value["A"], alpha=0.7)


class Net(brainstate.nn.Module):
    """``cell -> Linear`` readout (flattening spatial hidden states)."""

    def __init__(self, cell, readout: bool = True):
        super().__init__()
        self.cell = cell
        self.readout = nn.Linear(cell.num_out, NUM_OUT) if readout else None

    def update(self, x):
        h = self.cell(x)
        return h if self.readout is None else self.readout(h)


def build(cell_factory, batch_size=None, readout=True, seed=0):
    """A freshly initialised ``Net`` (deterministic parameters)."""
    brainstate.random.seed(seed)
    model = Net(cell_factory(), readout=readout)
    brainstate.nn.init_all_states(model, batch_size=batch_size)
    return model


def inputs(model, num_steps, batch_size=None, seed=1):
    """``(T, [B,] *input_shape)`` normal inputs matching the model's cell."""
    cell = model.cell
    if isinstance(cell, LeakyConv):
        shape = (num_steps, batch_size or 1, cell.length, NUM_IN)
    elif batch_size is None:
        shape = (num_steps, getattr(cell, "num_in", NUM_IN))
    else:
        shape = (num_steps, batch_size, getattr(cell, "num_in", NUM_IN))
    return jax.random.normal(jax.random.PRNGKey(seed), shape)
