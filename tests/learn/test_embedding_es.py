"""ES-D-RTRL on an embedding (issue 29, part 2): the input trace averages one-hot rows.

An embedding is linear in the one-hot encoding of its ids (``y = onehot(ids) @ T``), so
ES-D-RTRL's input trace of an embedding is the decayed sum of one-hot rows, shape ``(..., V)``
(the primitive's ``pp_x_repr``), and the table's gradient is the outer product of that trace
with the df-weighted learning signal. Checked in float64 against the recursion written out
here with numpy on one-hot vectors, and against BPTT on a single step.
"""

from __future__ import annotations

import dataclasses

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
from etp_viz.ops import get_primitive_spec, register_primitive_spec
from tests.learn.helpers import online_gradients
from tests.oracles import bptt_gradients, relative_error

V, D, B, T = 6, 3, 2, 8


class EmbeddedLeaky(brainstate.nn.Module):
    """``h = a * h + tanh(Embedding(ids))`` (``leak=False``: ``h = tanh(Embedding(ids))``)."""

    def __init__(self, leak=True, lookup=None):
        super().__init__()
        rng = np.random.default_rng(7)
        self.emb = etp_viz.nn.Embedding(V, D, embedding_init=jnp.asarray(rng.normal(size=(V, D))))
        self.a = jnp.asarray(rng.uniform(0.3, 0.9, D)) if leak else jnp.zeros(D)
        self.leak = leak
        self.lookup = lookup

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.full((batch_size, D), 0.1))

    def update(self, ids):
        y = self.emb(ids) if self.lookup is None else self.lookup(ids, self.emb.weight.value)
        pre = jnp.tanh(y)
        self.h.value = self.a * self.h.value + pre if self.leak else pre
        return self.h.value


def _ids(length=T, seed=8):
    return jnp.asarray(np.random.default_rng(seed).integers(0, V, (length, B)), jnp.int32)


def _model(**kwargs):
    model = EmbeddedLeaky(**kwargs)
    brainstate.nn.init_all_states(model, batch_size=B)
    return model


def reference(model, ids, alpha_x, alpha_f):
    """ES-D-RTRL written out on one-hot vectors (loss ``sum_t sum(h_t**2)``):
    ``eps_x = alpha_x eps_x + onehot(ids)``, ``eps_f = alpha_f a eps_f + (1 - alpha_f) D_f``,
    ``dW += sum_b eps_x[b] ⊗ (eps_f[b] / (1 - alpha_f**k) * 2 h[b])``."""
    table = np.asarray(model.emb.weight.value, np.float64)
    a = np.asarray(model.a, np.float64)
    h = np.full((B, D), 0.1)
    eps_x, eps_f = np.zeros((B, V)), np.zeros((B, D))
    grad = np.zeros_like(table)
    for t, step_ids in enumerate(np.asarray(ids)):
        pre = np.tanh(table[step_ids])
        h = a * h + pre
        eps_x = alpha_x * eps_x + np.eye(V)[step_ids]
        eps_f = alpha_f * a * eps_f + (1 - alpha_f) * (1 - pre**2)
        signal = eps_f / (1 - alpha_f ** (t + 1)) * 2 * h
        grad += np.einsum("bv,bd->vd", eps_x, signal)
    return grad


def _es_gradient(model, ids, decay):
    alg = etp_viz.ES_D_RTRL(model, decay)
    alg.compile_graph(ids[0])
    return np.asarray(online_gradients(alg, ids, jit=True)[("emb", "weight")]), alg


@pytest.mark.parametrize("decay", [(0.0, 0.8), (0.6, 0.8), (0.9, 0.5)])
def test_es_d_rtrl_follows_the_one_hot_recursion(x64, decay):
    model = _model()
    ids = _ids()
    want = reference(model, ids, *decay)
    got, alg = _es_gradient(model, ids, decay)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    (trace_x,) = alg.etrace.value["x"].values()
    if decay[0]:  # the averaged one-hot rows
        assert trace_x.shape == (B, V) and jnp.issubdtype(trace_x.dtype, jnp.floating)
    else:  # alpha_x = 0: the ids themselves, as before (V times smaller, same gradient)
        assert trace_x.shape == (B,) and jnp.issubdtype(trace_x.dtype, jnp.integer)
    # the case can tell: the input decay matters
    other = reference(model, ids, 0.3 if decay[0] != 0.3 else 0.0, decay[1])
    assert np.linalg.norm(other - want) > 1e-3 * np.linalg.norm(want)


def test_alpha_x_zero_equals_the_averaged_path_at_zero_decay(x64):
    """The one-hot path at a vanishing alpha_x meets the ids path (alpha_x = 0)."""
    ids = _ids()
    exact_zero, _ = _es_gradient(_model(), ids, (0.0, 0.8))
    tiny, _ = _es_gradient(_model(), ids, (1e-12, 0.8))
    np.testing.assert_allclose(tiny, exact_zero, rtol=1e-9, atol=1e-12)


def test_a_single_step_without_recurrence_equals_bptt(x64):
    model = _model(leak=False)
    ids = _ids(length=1)
    want = bptt_gradients(model, ids, lambda hs: jnp.sum(hs**2))
    got, _ = _es_gradient(model, ids, (0.7, 0.9))
    assert relative_error(got, want[("emb", "weight")]) <= 1e-10


def test_an_integer_input_without_a_representation_is_refused():
    """A primitive taking integer inputs without ``pp_x_repr`` still cannot be averaged."""
    spec = get_primitive_spec(etp_viz.ops.etp_emb_p)
    bare = register_primitive_spec(
        dataclasses.replace(spec, name="test_emb_without_x_repr", pp_x_repr=None)
    )
    model = _model(lookup=lambda ids, table: bare.bind(ids, table))
    with pytest.raises(ValueError, match=r"integer inputs.*pp_x_repr"):
        etp_viz.ES_D_RTRL(model, 0.9).compile_graph(_ids()[0])
    alg = etp_viz.ES_D_RTRL(model, (0.0, 0.9))  # no averaging: learned from the ids
    alg.compile_graph(_ids()[0])
    assert jnp.all(jnp.isfinite(alg(_ids()[1])))


def test_changing_alpha_x_from_zero_asks_for_a_reset():
    model = _model()
    alg = etp_viz.ES_D_RTRL(model, (0.0, 0.8))
    alg.compile_graph(_ids()[0])
    alg.alpha_x = 0.5
    with pytest.raises(ValueError, match="reset_state"):
        jax.block_until_ready(alg(_ids()[1]))
    alg.reset_state(batch_size=B)
    assert jnp.all(jnp.isfinite(alg(_ids()[1])))
