"""etp_viz.nn layers: shapes, states, ETP primitives in the jaxpr, gradients vs plain jnp."""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from etp_viz import nn
from etp_viz.ops._registry import ETP_PRIMITIVES

NUM_IN, NUM_OUT = 3, 4

#: cell class -> (hidden state names, number of ETP products per step)
LAYERS = {
    nn.ValinaRNNCell: (("h",), 1),
    nn.GRUCell: (("h",), 3),
    nn.MGUCell: (("h",), 2),
    nn.LSTMCell: (("h", "c"), 4),
    nn.MiniGRU: (("h",), 2),
    nn.LeakyRateReadout: (("r",), 1),
    nn.LIF: (("V",), 1),
    nn.ALIF: (("V", "a"), 1),
}


def make(cls, batch_size=None, **kwargs):
    brainstate.random.seed(0)
    model = cls(NUM_IN, NUM_OUT, **kwargs)
    brainstate.nn.init_all_states(model, batch_size=batch_size)
    return model


def make_input(batch_size=None, scale=1.0, seed=1):
    shape = (NUM_IN,) if batch_size is None else (batch_size, NUM_IN)
    return scale * jax.random.normal(jax.random.PRNGKey(seed), shape)


def etp_equations(model, x):
    closed, _ = brainstate.transform.make_jaxpr(lambda inp: model(inp))(x)
    return [eqn for eqn in closed.jaxpr.eqns if eqn.primitive in ETP_PRIMITIVES]


@pytest.mark.parametrize("batch_size", [None, 2])
@pytest.mark.parametrize("cls", list(LAYERS), ids=lambda c: c.__name__)
def test_shapes_and_states(cls, batch_size):
    model = make(cls, batch_size)
    y = model(make_input(batch_size))
    expected = (NUM_OUT,) if batch_size is None else (batch_size, NUM_OUT)
    assert y.shape == expected
    names, _ = LAYERS[cls]
    hidden = model.states(brainstate.HiddenState)
    assert sorted(path[-1] for path in hidden.keys()) == sorted(names)
    for name in names:
        state = getattr(model, name)
        assert isinstance(state, brainstate.HiddenState)
        assert state.value.shape == expected


@pytest.mark.parametrize("cls", list(LAYERS), ids=lambda c: c.__name__)
def test_reset_state_changes_batch_and_zeroes(cls):
    model = make(cls)
    model(make_input(scale=3.0))
    brainstate.nn.reset_all_states(model, batch_size=5)
    for name in LAYERS[cls][0]:
        value = getattr(model, name).value
        assert value.shape == (5, NUM_OUT)
        assert not np.any(np.asarray(value))
    assert model(make_input(5)).shape == (5, NUM_OUT)


@pytest.mark.parametrize("batch_size", [None, 2])
@pytest.mark.parametrize("cls", list(LAYERS), ids=lambda c: c.__name__)
def test_etp_primitives_in_jaxpr(cls, batch_size):
    model = make(cls, batch_size)
    eqns = etp_equations(model, make_input(batch_size))
    assert len(eqns) == LAYERS[cls][1]
    expected_name = "etp_mv" if batch_size is None else "etp_mm"
    assert {eqn.primitive.name for eqn in eqns} == {expected_name}


def test_linear_param_state_layout():
    layer = nn.Linear(NUM_IN, NUM_OUT)
    assert set(layer.weight.value) == {"weight", "bias"}
    assert layer.weight.value["weight"].shape == (NUM_IN, NUM_OUT)
    no_bias = nn.Linear(NUM_IN, NUM_OUT, b_init=None)
    assert set(no_bias.weight.value) == {"weight"}
    x = make_input()
    np.testing.assert_allclose(no_bias(x), x @ no_bias.weight.value["weight"], rtol=1e-6)
    (eqn,) = etp_equations(no_bias, x)
    assert eqn.params["has_bias"] is False


def test_linear_rejects_bad_initializer_shape():
    with pytest.raises(ValueError, match=r"Linear.weight.*expected \(3, 4\)"):
        nn.Linear(3, 4, w_init=jnp.ones((4, 3)))


def test_unknown_activation_lists_valid_names():
    with pytest.raises(ValueError, match="Valid names: .*tanh"):
        nn.ValinaRNNCell(3, 4, activation="tanhh")


def test_unknown_spike_fn_lists_valid_names():
    with pytest.raises(ValueError, match="Valid names: .*sigmoid"):
        nn.LIF(3, 4, spike_fn="step")


def test_spec_two_layer_rnn_paths():
    class TwoLayerRNN(brainstate.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn1 = nn.ValinaRNNCell(10, 32)
            self.rnn2 = nn.ValinaRNNCell(32, 16)
            self.out = nn.Linear(16, 5)

        def update(self, x):
            return self.out(self.rnn2(self.rnn1(x)))

    model = brainstate.nn.init_all_states(TwoLayerRNN())
    closed, states = brainstate.transform.make_jaxpr(lambda x: model(x))(jnp.zeros(10))
    assert len(states) == 5
    assert set(model.states(brainstate.HiddenState).keys()) == {("rnn1", "h"), ("rnn2", "h")}
    params = model.states(brainstate.ParamState)
    assert set(params.keys()) == {
        ("rnn1", "W", "weight"),
        ("rnn2", "W", "weight"),
        ("out", "weight"),
    }
    assert all(len(jax.tree.leaves(state.value)) == 2 for state in params.values())
    etp = [e for e in closed.jaxpr.eqns if e.primitive in ETP_PRIMITIVES]
    assert [e.primitive.name for e in etp] == ["etp_mv"] * 3
