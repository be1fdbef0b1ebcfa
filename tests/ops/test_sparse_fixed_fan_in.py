"""FixedFanIn (procedural sparse pattern) and the event-driven product of ``sparse_matmul``:
the pattern's structure, values/derivatives/ETP rules equal to the same pattern stored as a
SparsePattern (whose rules ``test_rules.py`` checks against JAX oracles), and the errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from etp_viz import ops
from etp_viz.ops.sparse import FixedFanIn, event_driven_product, sparse_matmul
from tests.oracles import tree_allclose

pytestmark = pytest.mark.usefixtures("x64")

PATTERN = FixedFanIn(30, fan_in=4, seed=3)
STORED = PATTERN.to_sparse_pattern()
KEY = jax.random.PRNGKey(0)


def _r(shape, i):
    return jax.random.normal(jax.random.fold_in(KEY, i), shape, dtype=jnp.float64)


def _spikes(shape, rate=0.2, i=9):
    draw = jax.random.uniform(jax.random.fold_in(KEY, i), shape)
    return (draw < rate).astype(jnp.float64)


@pytest.mark.parametrize("n, fan_in, seed", [(30, 4, 3), (1000, 100, 0), (997, 7, 5)])
def test_exact_fan_in_and_fan_out_no_self_or_repeated_synapse(n, fan_in, seed):
    rows, cols = FixedFanIn(n, fan_in, seed).to_rows_cols()
    assert np.all(np.bincount(rows, minlength=n) == fan_in)
    assert np.all(np.bincount(cols, minlength=n) == fan_in)
    assert not np.any(rows == cols)
    assert len(set(zip(rows.tolist(), cols.tolist()))) == n * fan_in


def test_equality_hash_and_postsynaptic_inverts_presynaptic():
    assert FixedFanIn(30, 4, 3) == PATTERN and hash(FixedFanIn(30, 4, 3)) == hash(PATTERN)
    assert FixedFanIn(30, 4, 4) != PATTERN
    pre = np.asarray(PATTERN.presynaptic())
    post = np.asarray(PATTERN.postsynaptic(jnp.arange(30)))
    for o in range(30):
        for k in range(4):
            assert post[pre[o, k], k] == o


@pytest.mark.parametrize("max_active", [None, 30, 2], ids=["dense", "events", "fallback"])
@pytest.mark.parametrize("x_shape", [(5, 30), (30,), (2, 3, 30)])
def test_values_and_derivatives_equal_stored_pattern(max_active, x_shape):
    x, w, b = _spikes(x_shape) * _r(x_shape, 0), _r((PATTERN.nnz,), 1), _r((30,), 2)

    def procedural(x, w, b):
        return sparse_matmul(x, w, sparse_mat=PATTERN, bias=b, max_active=max_active)

    def stored(x, w, b):
        return sparse_matmul(x, w, sparse_mat=STORED, bias=b)

    np.testing.assert_allclose(jax.jit(procedural)(x, w, b), stored(x, w, b), rtol=1e-12)
    loss = lambda f: lambda *a: jnp.sum(jnp.sin(f(*a)))  # noqa: E731
    argnums = (0, 1, 2)
    grads = jax.grad(loss(procedural), argnums)(x, w, b)
    assert tree_allclose(grads, jax.grad(loss(stored), argnums)(x, w, b))
    batched = jax.vmap(lambda xi: procedural(xi, w, b))(x[None])
    np.testing.assert_allclose(batched[0], stored(x, w, b), rtol=1e-12)


def test_event_product_reads_nonbinary_events_and_fallback_is_exact():
    x = _spikes((4, 30), rate=0.5) * _r((4, 30), 3)
    w = _r((PATTERN.nnz,), 4)
    dense = sparse_matmul(x, w, sparse_mat=PATTERN)
    for budget in (1, 10, 30):
        np.testing.assert_allclose(event_driven_product(x, w, PATTERN, budget), dense, rtol=1e-12)


@pytest.mark.parametrize("batched", [True, False])
def test_etp_rules_equal_stored_pattern(batched):
    prim = ops.etp_sp_mm_p if batched else ops.etp_sp_mv_p
    shape = (3, 30) if batched else (30,)
    x, g, dl = _r(shape, 5), _r(shape, 6), _r(shape, 7)
    weights = {"weight": _r((PATTERN.nnz,), 8), "bias": _r((30,), 9)}
    trace = {"weight": _r((*shape[:-1], PATTERN.nnz), 10), "bias": _r(shape, 11)}
    rules = {
        "xy_to_dw": lambda p: ops.ETP_RULES_XY_TO_DW[prim](x, g, weights, **p),
        "xy_to_etrace": lambda p: ops.get_xy_to_etrace(prim)(x, g, weights, **p),
        "yw_to_w": lambda p: ops.ETP_RULES_YW_TO_W[prim](g, trace, **p),
        "etrace_to_dw": lambda p: ops.get_etrace_to_dw(prim)(trace, dl, weights, **p),
    }
    for name, rule in rules.items():
        got = rule({"sparse_mat": PATTERN, "has_bias": True, "max_active": 5})
        expected = rule({"sparse_mat": STORED, "has_bias": True})
        assert tree_allclose(got, expected), name


def test_errors_name_the_fix():
    with pytest.raises(ValueError, match="fan_in < n"):
        FixedFanIn(10, fan_in=10)
    with pytest.raises(ValueError, match="FixedFanIn pattern"):
        sparse_matmul(jnp.ones(30), jnp.ones(STORED.nnz), sparse_mat=STORED, max_active=3)
    with pytest.raises(TypeError, match="FixedFanIn"):
        event_driven_product(jnp.ones(30), jnp.ones(STORED.nnz), STORED, 3)


@pytest.mark.parametrize("n", [997, 1_000, 1_000_000, 2**21 - 1])
def test_division_free_mulmod_equals_integer_arithmetic(n):
    pattern = FixedFanIn(n, 3, seed=1)
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.integers(0, n, 100_000), [0, 1, n - 2, n - 1]]).astype(np.uint32)
    for a in (pattern.multiplier, pattern.inverse, 1, n - 1):
        got = np.asarray(jax.jit(lambda x, a=a: pattern._mulmod(x, a))(x)).astype(np.int64)
        np.testing.assert_array_equal(got, (x.astype(np.int64) * a) % n)
