"""User ops: dispatch, JAX transformations, vmap keeping the ETP marker, errors."""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from saiunit import sparse as ss

import etp_viz
from etp_viz import ops
from tests.conftest import tree_allclose

pytestmark = pytest.mark.usefixtures("x64")

KEY = jax.random.PRNGKey(0)


def _r(shape, i):
    return jax.random.normal(jax.random.fold_in(KEY, i), shape, dtype=jnp.float64)


SPARSE = ss.CSR.fromdense(
    jnp.where(jax.random.normal(KEY, (4, 5)) > 0.0, 1.0, 0.0).at[0, 0].set(1.0)
)
DN = ("NWC", "WIO", "NWC")
PATTERN = ops.SparsePattern.from_matrix(SPARSE)


def _dense_from(data):
    return jnp.zeros(PATTERN.shape, data.dtype).at[PATTERN.rows, PATTERN.cols].set(data)


def _conv_ref(x, k, b):
    y = lax.conv_general_dilated(x, k, (1,), "SAME", dimension_numbers=DN)
    return y + b


OP_NAMES = ["matmul", "conv", "sparse_matmul", "lora_matmul", "element_wise"]


def _ops():
    """name -> (etp op(x, *weights), reference op(x, *weights), x, weights); call under x64."""
    return {
        "matmul": (
            etp_viz.matmul,
            lambda x, w, b: x @ w + b,
            _r((3, 4), 0),
            (_r((4, 5), 1), _r((5,), 2)),
        ),
        "conv": (
            lambda x, k, b: etp_viz.conv(
                x, k, b, strides=(1,), padding="SAME", dimension_numbers=DN
            ),
            _conv_ref,
            _r((2, 6, 3), 0),
            (_r((3, 3, 4), 1), _r((4,), 2)),
        ),
        "sparse_matmul": (
            lambda x, d, b: etp_viz.sparse_matmul(x, d, sparse_mat=SPARSE, bias=b),
            lambda x, d, b: x @ _dense_from(d) + b,
            _r((3, 4), 0),
            (_r((SPARSE.nse,), 1), _r((5,), 2)),
        ),
        "lora_matmul": (
            lambda x, bm, am, b: etp_viz.lora_matmul(x, bm, am, alpha=0.5, bias=b),
            lambda x, bm, am, b: 0.5 * x @ bm @ am + b,
            _r((3, 4), 0),
            (_r((4, 2), 1), _r((2, 5), 2), _r((5,), 3)),
        ),
        "element_wise": (
            lambda x, w: x * etp_viz.element_wise(w, jax.nn.softplus),
            lambda x, w: x * jax.nn.softplus(w),
            _r((3, 5), 0),
            (_r((5,), 1),),
        ),
    }


@pytest.mark.parametrize("name", OP_NAMES)
def test_values_jit_grad_jvp_match_plain_jax(name):
    op, ref, x, weights = _ops()[name]
    np.testing.assert_allclose(jax.jit(op)(x, *weights), ref(x, *weights), rtol=1e-12)
    argnums = tuple(range(len(weights) + 1))
    grads = jax.grad(lambda *a: jnp.sum(jnp.sin(op(*a))), argnums)(x, *weights)
    expected = jax.grad(lambda *a: jnp.sum(jnp.sin(ref(*a))), argnums)(x, *weights)
    assert tree_allclose(grads, expected)
    tangents = tuple(jnp.ones_like(a) for a in (x, *weights))
    assert tree_allclose(
        jax.jvp(op, (x, *weights), tangents), jax.jvp(ref, (x, *weights), tangents)
    )


@pytest.mark.parametrize("name", OP_NAMES)
def test_vmap_over_x_matches_and_keeps_the_etp_marker(name):
    op, ref, x, weights = _ops()[name]
    xs = jnp.stack([x, 2 * x, -x])
    f = jax.vmap(lambda xi: op(xi, *weights))
    np.testing.assert_allclose(f(xs), jax.vmap(lambda xi: ref(xi, *weights))(xs), rtol=1e-12)
    prims = [e.primitive for e in jax.make_jaxpr(f)(xs).eqns]
    assert any(ops.is_etp_primitive(p) for p in prims), prims


@pytest.mark.parametrize(
    ("op", "shapes", "expected"),
    [
        (etp_viz.matmul, ((4, 5),), "etp_mm"),
        (
            lambda x, d: etp_viz.sparse_matmul(x, d, sparse_mat=SPARSE),
            ((SPARSE.nse,),),
            "etp_sp_mm",
        ),
        (
            lambda x, b, a: etp_viz.lora_matmul(x, b, a),
            ((4, 2), (2, 5)),
            "etp_lora_mm",
        ),
    ],
)
def test_vmap_of_unbatched_op_rebinds_the_batched_counterpart(op, shapes, expected):
    weights = tuple(_r(shape, i + 1) for i, shape in enumerate(shapes))
    xs = _r((6, 4), 0)
    jaxpr = jax.make_jaxpr(jax.vmap(lambda xi: op(xi, *weights)))(xs)
    assert [e.primitive.name for e in jaxpr.eqns] == [expected]
    single = op(xs[0], *weights)
    assert single.shape == (5,)
    np.testing.assert_allclose(jax.vmap(lambda xi: op(xi, *weights))(xs)[0], single, rtol=1e-12)


def test_matmul_dispatches_on_rank_and_flattens_extra_leading_axes():
    w = _r((4, 5), 1)
    assert jax.make_jaxpr(etp_viz.matmul)(_r((4,), 0), w).eqns[0].primitive is ops.etp_mv_p
    x3 = _r((2, 3, 4), 0)
    jaxpr = jax.make_jaxpr(etp_viz.matmul)(x3, w)
    assert ops.etp_mm_p in [e.primitive for e in jaxpr.eqns]
    np.testing.assert_allclose(etp_viz.matmul(x3, w), x3 @ w, rtol=1e-12)


def test_vmap_over_a_weight_warns_and_stays_correct():
    x, ws = _r((3, 4), 0), _r((2, 4, 5), 1)
    with pytest.warns(UserWarning, match="etp_mm.*will NOT recognise"):
        ys = jax.vmap(lambda w: etp_viz.matmul(x, w))(ws)
    np.testing.assert_allclose(ys, jnp.einsum("bi,nio->nbo", x, ws), rtol=1e-12)


def test_grad_keeps_the_etp_primitive_in_the_forward_jaxpr():
    x, w = _r((3, 4), 0), _r((4, 5), 1)
    jaxpr = jax.make_jaxpr(jax.grad(lambda w: jnp.sum(etp_viz.matmul(x, w) ** 2)))(w)
    assert ops.etp_mm_p in [e.primitive for e in jaxpr.eqns]


def test_element_wise_applies_fn_outside_the_marker():
    jaxpr = jax.make_jaxpr(lambda w: etp_viz.element_wise(w, jax.nn.sigmoid))(_r((3,), 0))
    assert [e.primitive.name for e in jaxpr.eqns] == ["logistic", "etp_elemwise"]
    assert ops.is_etp_enable_gradient_primitive(ops.etp_elemwise_p)
    assert ops.get_x_invar_index(ops.etp_elemwise_p) is None


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: etp_viz.matmul(jnp.ones((2, 3)), jnp.ones((4, 5))),
            r"etp_viz\.matmul: x has shape \(2, 3\)",
        ),
        (
            lambda: etp_viz.matmul(jnp.ones((2, 3)), jnp.ones((3, 5)), jnp.ones(4)),
            r"bias has shape \(4,\)",
        ),
        (
            lambda: etp_viz.conv(jnp.ones((6, 3)), jnp.ones((3, 3, 4)), strides=1, padding="SAME"),
            "batch axis",
        ),
        (
            lambda: etp_viz.lora_matmul(jnp.ones(4), jnp.ones((4, 2)), jnp.ones((3, 5))),
            r"B \(I, R\), A \(R, O\)",
        ),
        (
            lambda: etp_viz.sparse_matmul(jnp.ones(4), jnp.ones(2), sparse_mat=SPARSE),
            "weight_data=sparse_mat.data",
        ),
        (
            lambda: etp_viz.sparse_matmul(jnp.ones(4), jnp.ones(2), sparse_mat=jnp.eye(4)),
            "CSR, CSC or COO",
        ),
        (
            lambda: etp_viz.conv(
                jnp.ones((2, 6, 3)), jnp.ones((3, 3, 4)), strides=1, padding="SAME"
            ),
            r"x has shape \(2, 6, 3\) \(6 input channels on axis 1\) and the kernel \(3, 3, 4\)"
            r".*Fix: check `dimension_numbers`",
        ),
        (
            lambda: etp_viz.conv(
                jnp.ones((2, 6, 3)),
                jnp.ones((3, 3, 4)),
                jnp.ones(3),
                strides=1,
                padding="SAME",
                dimension_numbers=DN,
            ),
            r"bias has shape \(3,\), expected \(4,\).*Fix: pass a 1-D bias of length 4",
        ),
        (
            lambda: etp_viz.sparse_matmul(
                jnp.ones(4), SPARSE.data, sparse_mat=SPARSE, bias=jnp.ones(2)
            ),
            r"bias has shape \(2,\), expected \(5,\) for a pattern of shape \(4, 5\)\. Fix",
        ),
        (
            lambda: etp_viz.lora_matmul(
                jnp.ones(4), jnp.ones((4, 2)), jnp.ones((2, 5)), bias=jnp.ones(3)
            ),
            r"bias has shape \(3,\), expected \(5,\) = \(O,\) for A of shape \(2, 5\)\. Fix",
        ),
    ],
)
def test_shape_and_type_errors_teach(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_sparse_pattern_is_static_and_value_hashed():
    p1 = ops.SparsePattern.from_matrix(SPARSE)
    p2 = ops.SparsePattern.from_matrix(ss.CSR.fromdense(SPARSE.todense()))
    assert p1 == p2 and hash(p1) == hash(p2) and p1.nnz == SPARSE.nse
    csc = ss.CSC.fromdense(SPARSE.todense())
    x = _r((3, 4), 0)
    np.testing.assert_allclose(
        etp_viz.sparse_matmul(x, csc.data, sparse_mat=csc), x @ SPARSE.todense(), rtol=1e-12
    )
    # saiunit keeps the indices as static pytree data, so passing the matrix through jit works;
    # traced indices (e.g. read from a brainstate.State) become operands of the primitive.
    jitted = jax.jit(lambda m: etp_viz.sparse_matmul(x, m.data, sparse_mat=m))(SPARSE)
    np.testing.assert_allclose(jitted, x @ SPARSE.todense(), rtol=1e-6)

    def traced(indices, indptr):
        mat = ss.CSR((SPARSE.data, indices, indptr), shape=SPARSE.shape)
        return etp_viz.sparse_matmul(x, SPARSE.data, sparse_mat=mat)

    out = jax.jit(traced)(jnp.asarray(SPARSE.indices), jnp.asarray(SPARSE.indptr))
    np.testing.assert_allclose(out, x @ SPARSE.todense(), rtol=1e-12)


def _param(shape):
    return brainstate.ParamState(jnp.ones(shape))


STATE_CALLS = {
    "matmul": (lambda: etp_viz.matmul(jnp.ones((2, 3)), _param((3, 5))), "weight"),
    "matmul(bias)": (
        lambda: etp_viz.matmul(jnp.ones((2, 3)), jnp.ones((3, 5)), _param(5)),
        "bias",
    ),
    "matmul(x)": (
        lambda: etp_viz.matmul(brainstate.HiddenState(jnp.ones(3)), jnp.ones((3, 5))),
        "x",
    ),
    "element_wise": (lambda: etp_viz.element_wise(_param(3), jax.nn.sigmoid), "weight"),
    "conv": (
        lambda: etp_viz.conv(
            jnp.ones((2, 6, 3)), _param((3, 3, 4)), strides=1, padding="SAME", dimension_numbers=DN
        ),
        "kernel",
    ),
    "sparse_matmul": (
        lambda: etp_viz.sparse_matmul(jnp.ones(4), _param(SPARSE.nse), sparse_mat=SPARSE),
        "weight_data",
    ),
    "lora_matmul": (
        lambda: etp_viz.lora_matmul(jnp.ones(4), jnp.ones((4, 2)), _param((2, 5))),
        "A",
    ),
}


@pytest.mark.parametrize("label", list(STATE_CALLS))
def test_a_state_instead_of_its_value_names_op_argument_and_fix(label):
    call, argument = STATE_CALLS[label]
    op = label.split("(")[0]
    kind = "HiddenState" if argument == "x" else "ParamState"
    match = (
        rf"etp_viz\.{op}: argument `{argument}` is a brainstate {kind}, not an array\..*"
        r"Fix: pass `\.value`, e\.g\. `etp_viz\." + op + r"\(.*self\.\w+\.value"
    )
    with pytest.raises(TypeError, match=match):
        call()
