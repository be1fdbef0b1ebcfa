"""SparseLIF: compiles and steps with the online learners, event-driven = dense-input, gradients
against BPTT (verify) and against the stored-pattern path, program size independent of n."""

from __future__ import annotations

import functools

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
from etp_viz import nn
from etp_viz.ops.sparse import SparsePattern, sparse_matmul
from tests.learn.helpers import online_gradients
from tests.oracles import tree_allclose

BATCH, N_IN = 3, 4
ALGORITHMS = {"d_rtrl": etp_viz.D_RTRL, "es_d_rtrl": etp_viz.ES_D_RTRL}
#: the least cosine with BPTT accepted (measured 0.99 / 0.86 on this instance)
MIN_COSINE = {"d_rtrl": 0.95, "es_d_rtrl": 0.75}


def _layer(n=200, fan_in=10, batch=BATCH, **kwargs):
    brainstate.random.seed(0)  # W_in: the same input weights in every layer built here
    layer = nn.SparseLIF(N_IN, n, fan_in=fan_in, rec_scale=3.0, **kwargs)
    brainstate.nn.init_all_states(layer, batch_size=batch)
    return layer


def _inputs(steps, batch=BATCH, scale=8.0, dtype=jnp.float32):
    return scale * jax.random.normal(jax.random.PRNGKey(0), (steps, batch, N_IN), dtype)


@pytest.mark.parametrize("event_driven", [False, True], ids=["dense_input", "event_driven"])
@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_compiles_and_steps_on_cpu(algorithm, event_driven):
    layer = _layer(event_driven=event_driven)
    alg = ALGORITHMS[algorithm](layer)
    xs = _inputs(12)
    alg.compile_graph(xs[0])
    status = {".".join(map(str, path)): entry.kind for path, entry in alg.learning_status.items()}
    assert status == {"W_in.weight": "online", "W_rec": "online"}
    grads = online_gradients(alg, xs, loss=jnp.sum)
    rec = grads[("W_rec",)]["weight"]
    assert rec.shape == (200 * 10,)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(grads))
    assert float(jnp.abs(rec).sum()) > 0.0  # the neurons spiked: the recurrent weight learned


def _outputs_and_gradients(event_driven, max_active=None):
    """15 steps' spikes and D-RTRL gradients; computed once per setting and x64 flag (the
    dense-input reference is read by both ``test_event_driven_equals_dense_input`` cases)."""
    x64 = jax.config.read("jax_enable_x64")
    ys, grads = _outputs_and_gradients_cached(event_driven, max_active, x64)
    return ys, jax.tree.map(lambda leaf: leaf, grads)  # fresh containers: the cache stays intact


@functools.cache
def _outputs_and_gradients_cached(event_driven, max_active, x64):
    layer = _layer(event_driven=event_driven, max_active=max_active)
    alg = etp_viz.D_RTRL(layer)
    xs = _inputs(15)
    alg.compile_graph(xs[0])
    step = brainstate.transform.jit(lambda x: alg(x))
    ys = [step(x) for x in xs]
    brainstate.nn.init_all_states(layer, batch_size=BATCH)
    alg.compile_graph(xs[0])
    return jnp.stack(ys), online_gradients(alg, xs, loss=jnp.sum)


@pytest.mark.parametrize("max_active", [None, 3], ids=["events", "budget_overflow"])
def test_event_driven_equals_dense_input(max_active):
    """Same spikes (binary, so exactly equal) and the same online gradients to float32 rounding;
    ``max_active=3`` also takes the dense fallback on the steps with more spikes."""
    ys_dense, grads_dense = _outputs_and_gradients(False)
    ys_event, grads_event = _outputs_and_gradients(True, max_active)
    assert float(ys_dense.mean()) > 0.0
    np.testing.assert_array_equal(ys_event, ys_dense)
    assert tree_allclose(grads_event, grads_dense, rtol=1e-5)


def test_fixed_fan_in_gradients_equal_stored_pattern():
    """The procedural pattern's ETP rules give the D-RTRL gradients of the same pattern stored
    as a SparsePattern (whose rules ``tests/ops/test_rules.py`` checks against JAX)."""
    xs = _inputs(10)

    def gradients(stored: bool):
        layer = _layer(n=40, fan_in=5)
        if stored:
            layer.pattern = layer.pattern.to_sparse_pattern()
            assert isinstance(layer.pattern, SparsePattern)
        alg = etp_viz.D_RTRL(layer)
        alg.compile_graph(xs[0])
        return online_gradients(alg, xs, loss=jnp.sum)

    grads = gradients(stored=False)
    assert float(jnp.abs(grads[("W_rec",)]["weight"]).sum()) > 0.0
    assert tree_allclose(grads, gradients(stored=True), rtol=1e-5)


@pytest.mark.usefixtures("x64")
@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_online_gradients_close_to_bptt(algorithm):
    """D-RTRL / ES-D-RTRL are approximate here (the sparse recurrence couples neurons): their
    gradient points where BPTT's does, and verify finds no contradicted claim."""
    layer = _layer(n=30, fan_in=4, batch=2, event_driven=True, max_active=10)
    xs = _inputs(12, batch=2, scale=4.0, dtype=jnp.float64)
    report = etp_viz.verify(layer, xs, algorithm=algorithm, loss=jnp.sum)
    assert not report.contradictions
    rows = {row.path: row for row in report.rows}
    assert rows["W_rec.weight"].claim == "approximate"
    assert rows["W_rec.weight"].cosine > MIN_COSINE[algorithm]


def _lowered_step_size(n: int) -> int:
    layer = nn.SparseLIF(N_IN, n, fan_in=10, event_driven=True)
    brainstate.nn.init_all_states(layer, batch_size=2)
    alg = etp_viz.ES_D_RTRL(layer)
    x = jnp.ones((2, N_IN))
    alg.compile_graph(x)
    step = brainstate.transform.grad(lambda x: jnp.sum(alg(x)), alg.param_states)
    return len(brainstate.transform.jit(step).lower(x).as_text())


def test_program_size_does_not_grow_with_n():
    """No per-synapse constant: the ES-D-RTRL step's lowered program for 10x the neurons is the
    same size up to the digits of the shapes (a stored pattern's grows with nnz)."""
    small, large = _lowered_step_size(1_000), _lowered_step_size(10_000)
    assert abs(large - small) < 0.02 * small
    assert small < 200_000


def test_stored_pattern_program_grows_with_nnz():
    """The contrast the test above rules out: a stored pattern's indices are constants."""

    def size(n):
        pattern = nn.SparseLIF(1, n, fan_in=10).pattern.to_sparse_pattern()
        fn = jax.jit(lambda x, w: sparse_matmul(x, w, sparse_mat=pattern))
        return len(fn.lower(jnp.ones((2, n)), jnp.ones(pattern.nnz)).as_text())

    assert size(2_000) > 1.5 * size(1_000)
