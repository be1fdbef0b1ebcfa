"""nn.Embedding and nn.GroupedLinear: values, relations, and D-RTRL == BPTT (float64) when
they feed an element-wise recurrence; an embedding feeding a GRU renders in the explorer."""

from __future__ import annotations

import warnings

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
from etp_viz import nn
from tests.learn.helpers import online_gradients, step_loss
from tests.oracles import bptt_gradients


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_embedding_rows_and_shapes():
    emb = nn.Embedding(6, 3, embedding_init=jnp.arange(18.0).reshape(6, 3))
    np.testing.assert_array_equal(emb(jnp.asarray([2, 0])), [[6, 7, 8], [0, 1, 2]])
    assert emb(jnp.zeros((4, 5), jnp.int32)).shape == (4, 5, 3)


def test_grouped_linear_is_block_diagonal():
    layer = nn.GroupedLinear(3, 2, num_groups=4)
    x = jax.random.normal(jax.random.PRNGKey(0), (5, 4, 3))
    w, b = layer.weight.value["weight"], layer.weight.value["bias"]
    expected = jnp.einsum("bgi,gio->bgo", x, w) + b
    np.testing.assert_allclose(layer(x), expected, rtol=1e-6)
    assert nn.GroupedLinear(3, 2, 4, b_init=None)(x[0]).shape == (4, 2)


class Leaky(brainstate.nn.Module):
    """h = 0.7 h + tanh(layer(x)), read out by a Linear: element-wise, so D-RTRL is exact."""

    def __init__(self, layer, units):
        super().__init__()
        self.layer, self.units = layer, units
        self.out = nn.Linear(int(np.prod(units)), 2)

    def init_state(self, batch_size=None, **kwargs):
        shape = self.units if batch_size is None else (batch_size, *self.units)
        self.h = brainstate.HiddenState(jnp.zeros(shape))

    def update(self, x):
        self.h.value = 0.7 * self.h.value + jnp.tanh(self.layer(x))
        flat = self.h.value.reshape(*self.h.value.shape[: self.h.value.ndim - len(self.units)], -1)
        return self.out(flat)


@pytest.mark.parametrize("which", ["embedding", "grouped"])
def test_d_rtrl_equals_bptt(which, x64):
    brainstate.random.seed(1)
    if which == "embedding":
        model = Leaky(nn.Embedding(7, 4), (4,))
        xs = jnp.asarray(np.random.default_rng(0).integers(0, 7, (6, 3)))
        brainstate.nn.init_all_states(model, batch_size=3)
    else:
        model = Leaky(nn.GroupedLinear(3, 2, num_groups=2), (2, 2))
        xs = jnp.asarray(np.random.default_rng(0).standard_normal((6, 3, 2, 3)))
        brainstate.nn.init_all_states(model, batch_size=3)
    graph = etp_viz.compile_etrace_graph(model, xs[0])
    assert graph.weight_status[("layer", "weight")] == "online"
    expected = bptt_gradients(model, xs, lambda ys: sum(step_loss(y) for y in ys))
    alg = etp_viz.D_RTRL(model)
    alg.compile_graph(xs[0])
    got = online_gradients(alg, xs, jit=False)
    for path in expected:
        for a, b in zip(jax.tree.leaves(got[path]), jax.tree.leaves(expected[path])):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-9, atol=1e-12)
    claims = graph.gradient_claims("d_rtrl")
    assert claims["layer.weight"].kind == "exact"


def test_embedding_into_a_gru_renders():
    """Token ids -> Embedding -> GRU -> readout: the table reaches h only through the GRU's
    products (not learned online, like a GRU's Wr); the view model is consistent."""
    from etp_viz.view import build_view_model

    class TokenGRU(brainstate.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.rnn = nn.GRUCell(4, 6)
            self.out = nn.Linear(6, 3)

        def update(self, ids):
            return self.out(self.rnn(self.emb(ids)))

    model = TokenGRU()
    brainstate.nn.init_all_states(model, batch_size=2)
    graph = etp_viz.compile_etrace_graph(model, jnp.asarray([1, 2]))
    vm = build_view_model(graph)
    assert vm.check_references() == []
    status = {w.path: w.status for w in vm.weights}
    assert status["emb.weight"] == "not_learned" and status["rnn.Wh.weight"] == "online"
    assert any(n.label == "etp_emb" for n in vm.nodes if n.etp)
