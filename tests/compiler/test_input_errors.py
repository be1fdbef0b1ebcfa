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
