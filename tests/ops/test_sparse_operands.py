"""A stored sparse pattern whose indices are traced (held in a ``brainstate.State``) is bound
with its indices as operands of the ETP primitive: the compiled learner step is the same size
at any ``n`` (no ``nnz``-sized constant), and its values and online gradients equal those of
the constant-indices path (the indices as a static ``SparsePattern``) and of a dense matrix."""

from __future__ import annotations

import re

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from saiunit import sparse as ss

import etp_viz
from etp_viz import ops
from tests.learn.helpers import online_gradients
from tests.oracles import tree_allclose

pytestmark = pytest.mark.usefixtures("x64")


def random_fan_in_csr(n: int, fan_in: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(indptr, indices)`` of an ``(n, n)`` CSR (rows = presynaptic) with ``fan_in``
    random presynaptic neurons per postsynaptic one."""
    rng = np.random.default_rng(seed)
    pre = np.stack([rng.choice(n, fan_in, replace=False) for _ in range(n)]).reshape(-1)
    post = np.repeat(np.arange(n), fan_in)
    order = np.lexsort((post, pre))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(pre, minlength=n))])
    return indptr.astype(np.int32), post[order].astype(np.int32)


class CSRLIF(brainstate.nn.Module):
    """A user-written recurrent LIF on a stored CSR: ``connectivity='state'`` keeps the indices
    in a ``brainstate.State`` (operands), ``'constant'`` closes over them (static pattern),
    ``'dense'`` multiplies by the equivalent dense matrix (``etp_viz.matmul``)."""

    def __init__(self, n_in: int, n: int, fan_in: int, connectivity: str, seed: int = 0):
        super().__init__()
        indptr, indices = random_fan_in_csr(n, fan_in, seed)
        key = jax.random.PRNGKey(seed)
        self.n, self.connectivity, self.alpha = n, connectivity, 0.9
        self.W_in = brainstate.ParamState(jax.random.normal(key, (n_in, n)) / np.sqrt(n_in))
        w = jax.random.normal(jax.random.fold_in(key, 1), (n * fan_in,)) / np.sqrt(fan_in)
        self.W_rec = brainstate.ParamState(w)
        if connectivity == "state":
            self.conn = brainstate.State((jnp.asarray(indices), jnp.asarray(indptr)))
        else:
            self.csr = ss.CSR((w, indices, indptr), shape=(n, n))

    def init_state(self, batch_size=None, **kwargs):
        self.V = brainstate.HiddenState(jnp.zeros((batch_size, self.n)))

    def recurrent(self, z):
        w = self.W_rec.value
        if self.connectivity == "dense":
            dense = ss.CSR((w, self.csr.indices, self.csr.indptr), shape=self.csr.shape)
            return etp_viz.matmul(z, dense.todense())
        if self.connectivity == "state":
            indices, indptr = self.conn.value
            mat = ss.CSR((w, indices, indptr), shape=(self.n, self.n))
        else:
            mat = self.csr
        return etp_viz.sparse_matmul(z, w, sparse_mat=mat)

    def update(self, x):
        v = self.V.value
        z = jax.nn.sigmoid(4.0 * (v - 1.0))  # a smooth "spike": gradients are exact
        current = etp_viz.matmul(x, self.W_in.value) + self.recurrent(z)
        self.V.value = self.alpha * (v - z) + (1 - self.alpha) * current
        return self.V.value


def _learner(algorithm: str, n: int, connectivity: str, fan_in: int = 5):
    model = CSRLIF(3, n, fan_in, connectivity)
    brainstate.nn.init_all_states(model, batch_size=2)
    if algorithm == "D_RTRL":
        learner = etp_viz.D_RTRL(model)
    else:
        learner = etp_viz.ES_D_RTRL(model, decay_or_rank=0.9)
    learner.compile_graph(jnp.ones((2, 3)))
    return learner


def _step_text(learner) -> tuple[int, int, int]:
    """Sizes of the lowered StableHLO, and of it and the jaxpr with every number written ``0``
    (shapes such as ``f64[2,100000]`` are longer at larger ``n``; an embedded constant is not
    a number but ``nnz`` of them), of one online gradient step."""
    step = brainstate.transform.grad(lambda x: jnp.sum(learner(x) ** 2), learner.param_states)
    x = jnp.ones((2, 3))
    jaxpr = brainstate.transform.make_jaxpr(step)(x)[0]
    lowered = brainstate.transform.jit(step).lower(x).as_text()
    return len(lowered), len(re.sub(r"\d+", "0", lowered)), len(re.sub(r"\d+", "0", str(jaxpr)))


def test_traced_indices_are_operands_of_the_primitive():
    x, w = jnp.ones((2, 4)), jnp.arange(1.0, 4.0)
    rows, cols = jnp.array([0, 2, 3]), jnp.array([1, 1, 0])

    def f(rows, cols):
        return etp_viz.sparse_matmul(x, w, sparse_mat=ss.COO((w, rows, cols), shape=(4, 2)))

    eqn = jax.make_jaxpr(f)(rows, cols).jaxpr.eqns[-1]
    assert eqn.primitive is ops.etp_sp_mm_p
    assert ops.get_aux_invars(eqn.primitive, eqn.params) == {"rows": 2, "cols": 3}
    assert isinstance(eqn.params["sparse_mat"], ops.sparse.OperandPattern)
    dense = np.zeros((4, 2))
    dense[[0, 2, 3], [1, 1, 0]] = [1.0, 2.0, 3.0]
    np.testing.assert_allclose(jax.jit(f)(rows, cols), np.ones((2, 4)) @ dense, rtol=1e-12)


@pytest.mark.parametrize("algorithm", ["D_RTRL", "ES_D_RTRL"])
def test_step_program_size_does_not_grow_with_n(algorithm):
    small = _step_text(_learner(algorithm, 1_000, "state"))
    large = _step_text(_learner(algorithm, 100_000, "state"))
    for a, b in zip(small, large):
        assert abs(b - a) / a < 0.05, (small, large)
    constant = _step_text(_learner(algorithm, 1_000, "constant"))
    assert constant[0] > 2 * small[0]  # the constant path embeds 2 x 5,000 indices


@pytest.mark.parametrize("algorithm", ["D_RTRL", "ES_D_RTRL"])
def test_gradients_equal_constant_indices_and_dense(algorithm):
    xs = jax.random.normal(jax.random.PRNGKey(3), (6, 2, 3))
    grads = {c: online_gradients(_learner(algorithm, 40, c), xs)
             for c in ("state", "constant", "dense")}  # fmt: skip
    assert tree_allclose(grads["state"], grads["constant"], rtol=1e-10, atol=1e-12)
    assert tree_allclose(grads["state"], grads["dense"], rtol=1e-10, atol=1e-12)
