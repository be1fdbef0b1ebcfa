"""An example input of the wrong feature size is a clear error naming the size the model expects
(not jax's "Cannot concatenate arrays ..." from deep inside the trace)."""

from __future__ import annotations

import re

import brainstate
import jax.numpy as jnp
import pytest

import etp_viz


class Net(brainstate.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = etp_viz.nn.GRUCell(3, 4)
        self.out = etp_viz.nn.Linear(4, 2)

    def update(self, x):
        return self.out(self.rnn(x))


@pytest.mark.parametrize("shape", [(5,), (2, 5)])
def test_wrong_feature_size_names_the_expected_input_size(shape):
    net = Net()
    brainstate.nn.init_all_states(net, batch_size=shape[0] if len(shape) == 2 else None)
    expected = (
        r"Net expects inputs with 3 features \(its first layer `rnn` \(GRUCell\) has "
        r"in_size=\(3,\)\), but the example input has shape " + re.escape(str(shape))
    )
    # the tracing error's type is kept (jax raises TypeError for some shape mismatches)
    with pytest.raises((TypeError, ValueError), match=expected) as info:
        etp_viz.compile_etrace_graph(net, jnp.zeros(shape))
    assert "jnp.zeros(3)" in str(info.value)
    assert info.value.__cause__ is not None  # the tracing error stays attached


def test_a_model_without_in_size_still_says_the_shape_given():
    class Bare(brainstate.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = brainstate.ParamState(jnp.ones((3, 4)))
            self.h = brainstate.HiddenState(jnp.zeros(4))

        def update(self, x):
            self.h.value = jnp.tanh(etp_viz.ops.matmul(x, self.w.value) + self.h.value)
            return self.h.value

    with pytest.raises(ValueError, match=r"example input\(s\) of shape float32\[5\]"):
        etp_viz.compile_etrace_graph(Bare(), jnp.zeros(5))


LIST_MESSAGE = (
    r"Net's example input is a Python (list|tuple) of 3 numbers, not an array: JAX would trace "
    r"it as 3 separate scalar inputs\. Pass an array: jnp\.asarray\(.0\.0, 0\.0, 0\.0.\) "
    r"\(shape \(3,\)\)\. Net expects inputs with 3 features \(its first layer `rnn` "
    r"\(GRUCell\) has in_size=\(3,\)\)"
)


@pytest.mark.parametrize("given", [[0.0, 0.0, 0.0], (0.0, 0.0, 0.0)], ids=["list", "tuple"])
def test_a_list_of_numbers_is_named_with_the_array_to_pass(given):
    net = Net()
    brainstate.nn.init_all_states(net)
    with pytest.raises(TypeError, match=LIST_MESSAGE):
        etp_viz.compile_etrace_graph(net, given)


def test_a_list_input_gets_the_message_from_every_entry_point():
    from etp_viz.explorer.live_explorer import build_explorer

    net = Net()
    brainstate.nn.init_all_states(net)
    entries = {
        "show": lambda: build_explorer(net, [0.0, 0.0, 0.0]),
        "show (live)": lambda: build_explorer(
            net, [0.0, 0.0, 0.0], data=lambda t: (jnp.zeros(3), jnp.zeros(2))
        ),
        "D_RTRL": lambda: etp_viz.D_RTRL(net).compile_graph([0.0, 0.0, 0.0]),
        "RTRL": lambda: etp_viz.RTRL(net).compile_graph([0.0, 0.0, 0.0]),
    }
    for entry in entries.values():
        with pytest.raises(TypeError, match=LIST_MESSAGE):
            entry()


def test_a_ragged_list_and_a_model_without_in_size():
    class Bare(brainstate.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = brainstate.ParamState(jnp.ones((3, 4)))
            self.h = brainstate.HiddenState(jnp.zeros(4))

        def update(self, x):
            self.h.value = jnp.tanh(etp_viz.ops.matmul(x, self.w.value) + self.h.value)
            return self.h.value

    with pytest.raises(TypeError, match=r"Python list of 2 numbers.*different lengths"):
        etp_viz.compile_etrace_graph(Bare(), [[0.0], [1.0, 2.0]])
    bare = r"Bare's example input is a Python list.*\(shape \(3,\)\)\.$"
    with pytest.raises(TypeError, match=bare):
        etp_viz.compile_etrace_graph(Bare(), [0, 0, 0])


def test_a_list_of_arrays_is_several_inputs_not_an_error():
    class Two(brainstate.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = brainstate.ParamState(jnp.ones((3, 4)))
            self.h = brainstate.HiddenState(jnp.zeros(4))

        def update(self, xs):
            a, b = xs
            self.h.value = jnp.tanh(etp_viz.ops.matmul(a + b, self.w.value) + self.h.value)
            return self.h.value

    graph = etp_viz.compile_etrace_graph(Two(), [jnp.zeros(3), jnp.ones(3)])
    assert graph.hidden_groups
