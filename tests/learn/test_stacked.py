"""Stacked layers: a layer's new hidden value feeds the next layer's in the same step, so the
learning signal of the first layer is the *total* same-step dL/dh^t (through the second layer's
new hidden value), not the partial one with the other new hidden values held fixed."""

from __future__ import annotations

import brainstate
import jax
import pytest

import etp_viz
import etp_viz.nn as nn
from tests.learn.helpers import online_gradients, sequence_loss
from tests.oracles import assert_tree_allclose, bptt_gradients, cosine_similarity_per_param


class TwoLayerRNN(brainstate.nn.Module):
    """The spec's compiler walkthrough model (smaller)."""

    def __init__(self):
        super().__init__()
        self.rnn1 = nn.ValinaRNNCell(3, 5)
        self.rnn2 = nn.ValinaRNNCell(5, 4)
        self.out = nn.Linear(4, 2)

    def update(self, x):
        return self.out(self.rnn2(self.rnn1(x)))


class StackedLeaky(brainstate.nn.Module):
    """Two element-wise leaky layers (MiniGRU) and a leaky readout: every layer is exact on its
    own, so D-RTRL is exact at T = 1 and close to BPTT over a short sequence."""

    def __init__(self):
        super().__init__()
        self.l1 = nn.MiniGRU(3, 6)
        self.l2 = nn.MiniGRU(6, 5)
        self.out = nn.LeakyRateReadout(5, 2)

    def update(self, x):
        return self.out(self.l2(self.l1(x)))


def _build(cls, batch=2):
    brainstate.random.seed(3)
    model = cls()
    brainstate.nn.init_all_states(model, batch_size=batch)
    xs = jax.random.normal(jax.random.PRNGKey(4), (8, batch, 3))
    return model, xs


ALGORITHMS = [
    pytest.param(etp_viz.D_RTRL, id="d_rtrl"),
    pytest.param(lambda m: etp_viz.ES_D_RTRL(m, 0.9), id="es_d_rtrl"),
]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("cls", [TwoLayerRNN, StackedLeaky], ids=["two_layer_rnn", "leaky"])
@pytest.mark.parametrize("make", ALGORITHMS)
def test_one_step_equals_bptt_for_every_layer(x64, cls, make):
    model, xs = _build(cls)
    expected = bptt_gradients(model, xs[:1], sequence_loss)
    alg = make(model)
    alg.compile_graph(xs[0])
    assert alg.graph.hidden_feeds_hidden
    online = online_gradients(alg, xs[:1])
    assert_tree_allclose({p: online[p] for p in expected}, expected, rtol=1e-10)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_first_layer_learns_over_a_sequence(x64):
    model, xs = _build(StackedLeaky)
    expected = bptt_gradients(model, xs, sequence_loss)
    alg = etp_viz.D_RTRL(model)
    alg.compile_graph(xs[0])
    cosine = cosine_similarity_per_param(online_gradients(alg, xs), expected)
    print("stacked leaky, T=8, D_RTRL cosine per parameter:", cosine)
    assert all(value > 0.5 for value in cosine.values()), cosine


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_single_layer_needs_no_second_backward_pass():
    brainstate.random.seed(0)
    model = nn.MiniGRU(3, 4)
    brainstate.nn.init_all_states(model)
    graph = etp_viz.compile_etrace_graph(model, jax.numpy.zeros(3))
    assert not graph.hidden_feeds_hidden
