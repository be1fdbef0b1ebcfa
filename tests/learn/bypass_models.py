"""Models whose output reads hidden values from before the step's update (hidden output
bypass, issue 12 A), shared by ``tests/learn/test_bypass.py`` and
``tests/compiler/test_bypass.py``."""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp

import etp_viz
import etp_viz.nn as nn

NUM_IN, NUM_HID, NUM_OUT = 3, 4, 2


def _param(key: int, shape: tuple, scale: float = 0.7) -> brainstate.ParamState:
    return brainstate.ParamState(scale * jax.random.normal(jax.random.PRNGKey(key), shape))


def spike(v):
    """A smooth spike read from the membrane potential."""
    return jax.nn.sigmoid(4.0 * (v - 1.0))


def cell_step(v, a, y):
    """The two-state spiking cell's update from the previous ``(v, a)`` and ``y = x W``."""
    s = spike(v)
    a = 0.8 * a + 0.2 * s
    return 0.9 * v * (1 - s) + y - 0.3 * a, a


class SpikingCell(brainstate.nn.Module):
    """Issue 12's cell: the spike and the output read ``v`` before the update."""

    def __init__(self, num_in: int = NUM_IN, num_hid: int = NUM_HID, seed: int = 0):
        super().__init__()
        self.num_hid = num_hid
        self.W = _param(seed, (num_in, num_hid))
        self.Wo = _param(seed + 1, (num_hid, NUM_OUT))

    def init_state(self, batch_size=None, **kwargs):
        shape = (self.num_hid,) if batch_size is None else (batch_size, self.num_hid)
        self.v = brainstate.HiddenState(jnp.full(shape, 0.5))
        self.a = brainstate.HiddenState(jnp.zeros(shape))

    def reset_state(self, batch_size=None, **kwargs):
        self.init_state(batch_size)

    def update(self, x):
        s = spike(self.v.value)
        self.v.value, self.a.value = cell_step(
            self.v.value, self.a.value, etp_viz.matmul(x, self.W.value)
        )
        return s @ self.Wo.value


class DelayedReadout(brainstate.nn.Module):
    """``out_t = tanh(h_{t-1}) @ Wo`` on a recurrent cell (``delay=False``: ``tanh(h_t)``)."""

    def __init__(self, cell_cls, delay: bool = True):
        super().__init__()
        self.cell = cell_cls(NUM_IN, NUM_HID)
        self.Wo = _param(11, (NUM_HID, NUM_OUT))
        self.delay = delay

    def update(self, x):
        previous = self.cell.h.value
        new = self.cell(x)
        return jnp.tanh(previous if self.delay else new) @ self.Wo.value


class StackedSpiking(brainstate.nn.Module):
    """An element-wise gated layer feeding a spiking layer in the same step; the top layer's
    output reads its old membrane potential (and, with ``read_lower``, the lower layer's old
    state too). ``detach=True`` cuts the lower layer's effect on the top layer (the oracle of
    what D-RTRL claims for the lower layer: it drops that cross-layer temporal term)."""

    def __init__(self, read_lower: bool = False, detach: bool = False):
        super().__init__()
        self.lower = nn.MiniGRU(NUM_IN, 5)
        self.top = SpikingCell(5, NUM_HID, seed=20)
        self.read_lower = read_lower
        self.detach = detach
        if read_lower:
            self.Wl = _param(30, (5, NUM_OUT))

    def update(self, x):
        lower_previous = self.lower.h.value
        lower = self.lower(x)
        out = self.top(jax.lax.stop_gradient(lower) if self.detach else lower)
        if self.read_lower:
            out = out + jnp.tanh(lower_previous) @ self.Wl.value
        return out


class PlainGRU(brainstate.nn.Module):
    """A GRU and a Linear readout of the *new* state: no bypass."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.GRUCell(NUM_IN, NUM_HID)
        self.out = nn.Linear(NUM_HID, NUM_OUT)

    def update(self, x):
        return self.out(self.rnn(x))


def build(factory, batch_size=2, seed=0):
    brainstate.random.seed(seed)
    model = factory()
    brainstate.nn.init_all_states(model, batch_size=batch_size)
    return model


def inputs(num_steps, batch_size=2, seed=1):
    return jax.random.normal(jax.random.PRNGKey(seed), (num_steps, batch_size, NUM_IN))
