"""Shared explorer test models: the spec's two-layer RNN, GRU/LSTM cells, a hostile-names
model and a generator for a large (~2,000-equation) stack of ETP-wired cells.

Used by the view-model tests, the widget's browser tests and ``bench/``. Each ``make_*``
returns ``(model, example_input)`` with states initialised.

    >>> from tests.view.models import make_deep_stack  # doctest: +SKIP
    >>> model, x = make_deep_stack(target_eqns=2000)        # doctest: +SKIP
"""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp

import etp_viz.nn as enn
from tests.compiler.models import TwoLayerRNN  # the spec's running example (one copy)

#: Text that must never execute or break out of a renderer: tags, both quotes, an ampersand.
HOSTILE = "<script>alert(1)</script>\"'&"


def _ready(model, x):
    brainstate.nn.init_all_states(model)
    return model, x


def make_two_layer_rnn():
    return _ready(TwoLayerRNN(), jnp.zeros(10))


def make_gru():
    return _ready(enn.GRUCell(3, 4), jnp.zeros(3))


def make_lstm():
    return _ready(enn.LSTMCell(3, 4), jnp.zeros(3))


class HostileNames(brainstate.nn.Module):
    """A cell whose attribute name and a primitive param (custom_jvp name) carry markup."""

    def __init__(self):
        super().__init__()
        setattr(self, HOSTILE, enn.ValinaRNNCell(3, 4, activation=_make_hostile_fn()))

    def update(self, x):
        from jax.ad_checkpoint import checkpoint_name

        return getattr(self, HOSTILE)(checkpoint_name(x, HOSTILE))


def _make_hostile_fn():
    def act(x):
        return jnp.tanh(x)

    act.__name__ = act.__qualname__ = HOSTILE
    fn = jax.custom_jvp(act)
    fn.defjvp(lambda primals, tangents: (jnp.tanh(primals[0]), tangents[0]))
    return fn


def make_hostile():
    return _ready(HostileNames(), jnp.zeros(3))


class DeepStack(brainstate.nn.Module):
    """``num_layers`` ETP-wired recurrent cells in series (GRU, LSTM, vanilla in turn)."""

    def __init__(self, num_layers: int, width: int = 8):
        super().__init__()
        kinds = (enn.GRUCell, enn.LSTMCell, enn.ValinaRNNCell)
        self.layers = [kinds[i % 3](width, width) for i in range(num_layers)]
        self.out = enn.Linear(width, 2)

    def update(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.out(x)


def count_eqns(model, x) -> int:
    """Top-level equations of the model's step with nested jit bodies inlined."""
    from etp_viz.compiler.module_info import extract_module_info

    return len(extract_module_info(model, x).jaxpr.eqns)


def make_deep_stack(target_eqns: int = 2000, width: int = 8):
    """A :class:`DeepStack` with about ``target_eqns`` equations (within one layer triple)."""
    probe_model, probe_x = _ready(DeepStack(3, width), jnp.zeros(width))
    per_triple = max(1, count_eqns(probe_model, probe_x))
    num_layers = 3 * max(1, round(target_eqns / per_triple))
    return _ready(DeepStack(num_layers, width), jnp.zeros(width))


MODELS = {
    "two_layer_rnn": make_two_layer_rnn,
    "gru": make_gru,
    "lstm": make_lstm,
    "hostile": make_hostile,
}
