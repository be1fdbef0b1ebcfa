"""Library layers whose weight op is not a ``dot_general`` lift too (issue 41; float64).

* saiunit's CSR product (``brainstate.nn.SparseLinear``, ``M @ x`` of a ``saiunit.sparse.CSR``)
  becomes ``etp_viz.sparse_matmul`` on the same pattern: a recurrent net whose recurrent map is
  the plain product learns the gradients of its twin written with ``etp_viz.sparse_matmul`` to
  1e-9 (D-RTRL, ES-D-RTRL), for both products saiunit binds: ``x @ M`` (``transpose=True``,
  SparseLinear) and ``M @ x``.
* a row lookup (``brainstate.nn.Embedding``'s ``custom_vjp``, ``jnp.take`` / ``W[ids]``'s
  ``gather``) becomes ``etp_viz.embedding``: the same gradients as the twin written with it.
"""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import saiunit

import etp_viz
from tests.learn.helpers import online_gradients

N, IN, STEPS = 6, 3, 6
DENSE = np.where(np.arange(N * N).reshape(N, N) % 3 == 0, 0.4, 0.0) - 0.1 * np.eye(N)


@pytest.fixture
def f64():
    with brainstate.environ.context(precision=64):
        yield


class SparseNet(brainstate.nn.Module):
    """``h = tanh(x W_in + rec(h))``; ``rec`` is the product under test."""

    def __init__(self, form):
        super().__init__()
        self.form = form
        self.matrix = saiunit.sparse.CSR.fromdense(jnp.asarray(DENSE))
        self.data = brainstate.ParamState(self.matrix.data)
        self.w_in = brainstate.ParamState(jax.random.normal(jax.random.PRNGKey(2), (IN, N)))

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.zeros(N))

    def update(self, x):
        h = self.h.value
        m = self.matrix.with_data(self.data.value)
        if self.form == "x @ M":
            rec = h @ m
        elif self.form == "M @ x":
            rec = m @ h
        else:  # the twin: the ETP op on the same pattern (M @ h = h @ M.T)
            pattern = self.matrix if self.form == "twin x @ M" else self.matrix.T
            rec = etp_viz.sparse_matmul(h, self.data.value, sparse_mat=pattern)
        self.h.value = jnp.tanh(x @ self.w_in.value + rec)
        return self.h.value


def _grads(form, algorithm):
    model = SparseNet(form)
    brainstate.nn.init_all_states(model)
    xs = jax.random.normal(jax.random.PRNGKey(5), (STEPS, IN))
    alg = etp_viz.learn.registry.resolve(model, algorithm, {"lift": True})
    alg.compile_graph(xs[0])
    return alg, {tuple(k): v for k, v in online_gradients(alg, xs).items()}


@pytest.mark.parametrize("algorithm", ["d_rtrl", "es_d_rtrl"])
@pytest.mark.parametrize("form", ["x @ M", "M @ x"])
def test_plain_csr_product_learns_as_its_sparse_matmul_twin(f64, form, algorithm):
    alg, got = _grads(form, algorithm)
    _, want = _grads(f"twin {form}", algorithm)
    names = [e.primitive.name for e in alg.graph.module_info.jaxpr.eqns]
    assert "csr_matvec" not in names and "etp_sp_mv" in names
    for path in want:
        a, b = np.asarray(got[path]), np.asarray(want[path])
        assert np.linalg.norm(b) > 0, path
        assert np.linalg.norm(a - b) <= 1e-9 * np.linalg.norm(b), (form, algorithm, path)
    claims = alg.graph.gradient_claims(algorithm)
    assert claims["data"].kind == "approximate" and claims["data"].online


class Lookup(brainstate.nn.Module):
    """``h = tanh(lookup(ids) + h W_rec)``: the lookup under test feeds a recurrent layer."""

    def __init__(self, form):
        super().__init__()
        self.form = form
        self.emb = brainstate.nn.Embedding(5, N)
        self.w_rec = brainstate.ParamState(jax.random.normal(jax.random.PRNGKey(3), (N, N)) * 0.4)

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.zeros((2, N) if "batched" in self.form else N))

    def update(self, ids):
        table = self.emb.weight.value
        if self.form == "Embedding":
            rows = self.emb(ids)
        elif self.form == "W[ids]":
            rows = table[ids]  # a scalar id: a dynamic_slice of one row
        elif self.form == "W[ids] batched":
            rows = table[jnp.stack([ids, (ids + 1) % 5])]  # ids of shape (2,): a gather
        elif self.form == "twin batched":
            rows = etp_viz.embedding(jnp.stack([ids, (ids + 1) % 5]), table)
        else:  # the twin
            rows = etp_viz.embedding(ids, table)
        self.h.value = jnp.tanh(rows + self.h.value @ self.w_rec.value)
        return self.h.value


@pytest.mark.parametrize("algorithm", ["d_rtrl", "es_d_rtrl"])
@pytest.mark.parametrize("form", ["Embedding", "W[ids]", "W[ids] batched"])
def test_a_row_lookup_learns_as_its_embedding_twin(f64, form, algorithm):
    ids = jnp.asarray([0, 3, 1, 4, 4, 2])

    def grads(form):
        brainstate.random.seed(11)  # the same table on both sides
        model = Lookup(form)
        brainstate.nn.init_all_states(model)
        alg = etp_viz.learn.registry.resolve(model, algorithm, {"lift": True})
        alg.compile_graph(ids[0])
        return alg, {tuple(k): v for k, v in online_gradients(alg, ids).items()}

    alg, got = grads(form)
    _, want = grads("twin batched" if "batched" in form else "twin")
    names = [e.primitive.name for e in alg.graph.module_info.jaxpr.eqns]
    assert "etp_emb" in names and "gather" not in names and "dynamic_slice" not in names
    for path in want:
        a, b = np.asarray(got[path]), np.asarray(want[path])
        assert np.linalg.norm(b) > 0, path
        assert np.linalg.norm(a - b) <= 1e-9 * np.linalg.norm(b), (form, algorithm, path)
    assert alg.graph.gradient_claims(algorithm)["emb.weight"].online
