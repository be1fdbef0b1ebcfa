"""Small models shared by the compiler tests."""

from __future__ import annotations

import functools

import brainstate
import jax
import jax.numpy as jnp

import etp_viz.nn as enn
from etp_viz.ops import element_wise, matmul


def init(model):
    brainstate.nn.init_all_states(model)
    return model


class TwoLayerRNN(brainstate.nn.Module):
    """The spec's running example: two vanilla RNN layers and a linear readout."""

    def __init__(self):
        super().__init__()
        self.rnn1 = enn.ValinaRNNCell(10, 32)
        self.rnn2 = enn.ValinaRNNCell(32, 16)
        self.out = enn.Linear(16, 5)

    def update(self, x):
        return self.out(self.rnn2(self.rnn1(x)))


class Leaky(brainstate.nn.Module):
    """h = a*h + (1-a)*tanh(W x + b) with an element-wise trainable decay."""

    def __init__(self, n_in=3, n=4):
        super().__init__()
        self.W = brainstate.ParamState({"weight": 0.3 * jnp.ones((n_in, n)), "bias": jnp.zeros(n)})
        self.tau = brainstate.ParamState(jnp.linspace(0.1, 0.9, n))
        self.h = brainstate.HiddenState(jnp.full((n,), 0.2))

    def update(self, x):
        a = element_wise(self.tau.value, jax.nn.sigmoid)
        y = matmul(x, self.W.value["weight"], self.W.value["bias"])
        self.h.value = a * self.h.value + (1 - a) * jnp.tanh(y)
        return self.h.value


class CoupledPlain(brainstate.nn.Module):
    """Recurrence through a plain (non-ETP) matmul with a constant matrix."""

    def __init__(self, n=4):
        super().__init__()
        self.W = brainstate.ParamState(0.1 * jnp.ones((3, n)))
        self.M = jnp.eye(n) * 0.5 + 0.1
        self.h = brainstate.HiddenState(jnp.full((n,), 0.3))

    def update(self, x):
        self.h.value = jnp.tanh(self.h.value @ self.M + matmul(x, self.W.value))
        return self.h.value


@functools.cache
def cells():
    """(name, model, input) for the recurrent cells of etp_viz.nn (built once; tests do not
    mutate them)."""
    out = [
        ("ValinaRNNCell", init(enn.ValinaRNNCell(3, 4)), jnp.ones(3)),
        ("GRUCell", init(enn.GRUCell(3, 4)), jnp.ones(3)),
        ("LSTMCell", init(enn.LSTMCell(3, 4)), jnp.ones(3)),
        ("MGUCell", init(enn.MGUCell(3, 4)), jnp.ones(3)),
        ("MiniGRU", init(enn.MiniGRU(3, 4)), jnp.ones(3)),
        ("LIF", init(enn.LIF(3, 4)), jnp.ones(3)),
        ("Leaky", Leaky(), jnp.ones(3)),
        ("TwoLayerRNN", init(TwoLayerRNN()), jnp.ones(10)),
    ]
    return out
