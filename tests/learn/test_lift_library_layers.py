"""saiunit's CSR product lifts (issue 41; float64): ``brainstate.nn.SparseLinear`` and a plain
``M @ x`` of a ``saiunit.sparse.CSR`` become ``etp_viz.sparse_matmul`` on the same pattern.

A recurrent net whose recurrent map is the plain CSR product learns, with ``lift=True``, the
gradients of its twin written with ``etp_viz.sparse_matmul`` to 1e-9 (D-RTRL, ES-D-RTRL), for
both products saiunit binds: ``x @ M`` (``transpose=True``, SparseLinear) and ``M @ x``.
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
