"""embedding, grouped_matmul, einsum: values, JAX transformations, units, errors, and D-RTRL
equal to BPTT on a leaky recurrence (float64). Their ETP rules are checked against JAX oracles
with every other family in ``test_rules.py`` (cases ``emb*``, ``gmm*``, ``gmv*``,
``einsum_*`` of ``_cases.py``)."""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import saiunit as u

import etp_viz
from etp_viz import ops
from tests.conftest import tree_allclose
from tests.learn.helpers import online_gradients, sequence_loss
from tests.oracles import assert_tree_allclose, bptt_gradients

pytestmark = pytest.mark.usefixtures("x64")

KEY = jax.random.PRNGKey(0)


def _r(shape, i):
    return jax.random.normal(jax.random.fold_in(KEY, i), shape, dtype=jnp.float64)


IDS = jnp.array([[0, 5, 2], [5, 5, 1]], dtype=jnp.int32)

#: name -> (etp op(x, w[, b]), reference op, x, float operands)
FLOAT_OPS = {
    "grouped_matmul": (
        etp_viz.grouped_matmul,
        lambda x, w, b: jnp.einsum("bgi,gio->bgo", x, w) + b,
        (3, 2, 4),
        ((2, 4, 5), (2, 5)),
    ),
    "einsum_mm": (
        lambda x, w: etp_viz.einsum("bi,io->bo", x, w),
        lambda x, w: x @ w,
        (3, 4),
        ((4, 5),),
    ),
    "einsum_grouped": (
        lambda x, w: etp_viz.einsum("bgi, gio -> bgo", x, w),
        lambda x, w: jnp.einsum("bgi,gio->bgo", x, w),
        (3, 2, 4),
        ((2, 4, 5),),
    ),
    "einsum_positions": (
        lambda x, w: etp_viz.einsum("bti,oi->tbo", x, w),
        lambda x, w: jnp.einsum("bti,oi->tbo", x, w),
        (2, 3, 4),
        ((5, 4),),
    ),
}


def _float_op(name):
    op, ref, x_shape, shapes = FLOAT_OPS[name]
    return op, ref, _r(x_shape, 0), tuple(_r(s, i + 1) for i, s in enumerate(shapes))


@pytest.mark.parametrize("name", list(FLOAT_OPS))
def test_values_jit_grad_jvp_match_plain_jax(name):
    op, ref, x, weights = _float_op(name)
    np.testing.assert_allclose(jax.jit(op)(x, *weights), ref(x, *weights), rtol=1e-12)
    argnums = tuple(range(len(weights) + 1))
    grads = jax.grad(lambda *a: jnp.sum(jnp.sin(op(*a))), argnums)(x, *weights)
    expected = jax.grad(lambda *a: jnp.sum(jnp.sin(ref(*a))), argnums)(x, *weights)
    assert tree_allclose(grads, expected)
    tangents = tuple(jnp.ones_like(a) for a in (x, *weights))
    assert tree_allclose(
        jax.jvp(op, (x, *weights), tangents), jax.jvp(ref, (x, *weights), tangents)
    )
    # the Hessians jitted: one compiled program each instead of an eager dispatch per op
    hessian = jax.jit(jax.hessian(lambda w: jnp.sum(jnp.sin(op(x, w, *weights[1:])))))(weights[0])
    expected = jax.jit(jax.hessian(lambda w: jnp.sum(jnp.sin(ref(x, w, *weights[1:])))))(weights[0])
    np.testing.assert_allclose(hessian, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", list(FLOAT_OPS))
def test_vmap_over_x_matches_and_stays_one_etp_equation(name):
    op, ref, x, weights = _float_op(name)
    xs = jnp.stack([x, 2 * x, -x])
    f = jax.vmap(lambda xi: op(xi, *weights))
    np.testing.assert_allclose(f(xs), jax.vmap(lambda xi: ref(xi, *weights))(xs), rtol=1e-12)
    jaxpr = jax.make_jaxpr(f)(xs)
    assert sum(ops.is_etp_primitive(e.primitive) for e in jaxpr.eqns) == 1
    # a second vmap (e.g. over an ensemble) keeps it too
    jaxpr = jax.make_jaxpr(jax.vmap(f))(jnp.stack([xs, xs]))
    assert sum(ops.is_etp_primitive(e.primitive) for e in jaxpr.eqns) == 1


def test_embedding_values_grad_jvp_jit():
    table = _r((6, 4), 1)
    np.testing.assert_allclose(jax.jit(etp_viz.embedding)(IDS, table), table[IDS], rtol=0)
    grad = jax.grad(lambda t: jnp.sum(jnp.sin(etp_viz.embedding(IDS, t))))(table)
    expected = jax.grad(lambda t: jnp.sum(jnp.sin(t[IDS])))(table)
    np.testing.assert_allclose(grad, expected, rtol=1e-12)
    assert not grad[3].any() and not grad[4].any()  # rows never looked up
    tangent = jnp.ones_like(table)
    y, dy = jax.jvp(lambda t: etp_viz.embedding(IDS, t), (table,), (tangent,))
    np.testing.assert_allclose(dy, 1.0)
    # ids are integers: their tangent is float0 and nothing flows to them
    zero = np.zeros(IDS.shape, jax.dtypes.float0)
    _, dy = jax.jvp(etp_viz.embedding, (IDS, table), (zero, tangent))
    np.testing.assert_allclose(dy, 1.0)
    # the Hessians jitted: one compiled program each instead of an eager dispatch per op
    hessian = jax.jit(jax.hessian(lambda t: jnp.sum(etp_viz.embedding(IDS, t) ** 3)))(table)
    expected = jax.jit(jax.hessian(lambda t: jnp.sum(t[IDS] ** 3)))(table)
    np.testing.assert_allclose(hessian, expected)


def test_embedding_negative_ids_index_from_the_end_and_out_of_range_is_nan():
    table = _r((6, 4), 1)
    y = etp_viz.embedding(jnp.array([-1, 6]), table)
    np.testing.assert_allclose(y[0], table[5])
    assert np.isnan(y[1]).all()
    trace = ops.get_xy_to_etrace(ops.etp_emb_p)(
        jnp.array([-1]), jnp.ones((1, 4)), {"weight": table}
    )["weight"]
    np.testing.assert_allclose(trace[0, 5], 1.0)
    assert not trace[0, :5].any()


def test_embedding_vmap_over_ids_stays_one_equation_and_weight_vmap_warns():
    table = _r((6, 4), 1)
    f = jax.vmap(lambda ids: etp_viz.embedding(ids, table), in_axes=1)
    np.testing.assert_allclose(f(IDS), jnp.swapaxes(table[IDS], 0, 1))
    prims = [e.primitive for e in jax.make_jaxpr(f)(IDS).eqns]
    assert [p for p in prims if ops.is_etp_primitive(p)] == [ops.etp_emb_p]
    tables = jnp.stack([table, 2 * table])
    with pytest.warns(UserWarning, match="etp_emb.*will NOT recognise"):
        ys = jax.vmap(lambda t: etp_viz.embedding(IDS, t))(tables)
    np.testing.assert_allclose(ys[1], 2 * table[IDS])


def test_grouped_matmul_dispatch_and_batching():
    x, w = _r((2, 3, 2, 4), 0), _r((2, 4, 5), 1)
    jaxpr = jax.make_jaxpr(etp_viz.grouped_matmul)(x, w)
    assert [e.primitive.name for e in jaxpr.eqns if ops.is_etp_primitive(e.primitive)] == [
        "etp_gmm"
    ]
    np.testing.assert_allclose(
        etp_viz.grouped_matmul(x, w), jnp.einsum("nbgi,gio->nbgo", x, w), rtol=1e-12
    )
    single = etp_viz.grouped_matmul(x[0, 0], w)
    names = [e.primitive.name for e in jax.make_jaxpr(etp_viz.grouped_matmul)(x[0, 0], w).eqns]
    assert names == ["etp_gmv"] and single.shape == (2, 5)
    vm = jax.vmap(lambda xi: etp_viz.grouped_matmul(xi, w))
    assert [e.primitive.name for e in jax.make_jaxpr(vm)(x[0]).eqns] == ["etp_gmm"]
    np.testing.assert_allclose(vm(x[0])[0], single, rtol=1e-12)
    with pytest.warns(UserWarning, match="etp_gmm.*will NOT recognise"):
        jax.vmap(lambda wi: etp_viz.grouped_matmul(x[0], wi))(jnp.stack([w, w]))


def test_einsum_vmap_adds_a_fresh_letter_and_weight_vmap_warns():
    x, w = _r((3, 4), 0), _r((4, 5), 1)
    f = jax.vmap(lambda xi: etp_viz.einsum("i,io->o", xi, w), 1)
    np.testing.assert_allclose(f(x.T), x @ w, rtol=1e-12)
    jaxpr = jax.make_jaxpr(f)(x.T)
    (eqn,) = jaxpr.eqns[-1:]
    assert eqn.primitive is ops.etp_einsum_p and eqn.params["spec"] == "ia,io->ao"
    assert len(jaxpr.eqns) == 1  # the vmapped axis is named where it is: no transpose
    with pytest.warns(UserWarning, match="etp_einsum.*will NOT recognise"):
        ys = jax.vmap(lambda wi: etp_viz.einsum("bi,io->bo", x, wi))(jnp.stack([w, -w]))
    np.testing.assert_allclose(ys[1], -(x @ w), rtol=1e-12)


@pytest.mark.parametrize(
    "call",
    [
        lambda x, w: etp_viz.einsum("bi,io->bo", x, w),
        lambda x, w: etp_viz.grouped_matmul(x[:, None], w[None])[:, 0],
        lambda x, w: etp_viz.embedding(jnp.array([0, 3]), w),
    ],
    ids=["einsum", "grouped_matmul", "embedding"],
)
def test_grad_keeps_the_etp_primitive_in_the_forward_jaxpr(call):
    x, w = _r((2, 4), 0), _r((4, 5), 1)
    jaxpr = jax.make_jaxpr(jax.grad(lambda w: jnp.sum(call(x, w) ** 2)))(w)
    assert any(ops.is_etp_primitive(e.primitive) for e in jaxpr.eqns)


# --- units ------------------------------------------------------------------------------------


def test_units_round_trip():
    y = etp_viz.embedding(jnp.array([1, 0]), jnp.ones((3, 2)) * u.mV)
    assert u.get_unit(y) == u.mV and y.shape == (2, 2)
    y = etp_viz.grouped_matmul(
        jnp.ones((4, 2, 3)) * u.volt,
        jnp.ones((2, 3, 5)) * u.siemens,
        bias=jnp.full((2, 5), 500.0) * u.mA,
    )
    assert u.get_unit(y).has_same_dim(u.amp)
    np.testing.assert_allclose(y.to_decimal(u.amp), 3.5)
    y = etp_viz.einsum("bi,io->bo", jnp.ones((2, 3)) * u.mV, jnp.ones((3, 4)) * u.siemens)
    np.testing.assert_allclose(y.to_decimal(u.amp), 3e-3)
    y = etp_viz.einsum("bi,io->bo", jnp.ones((2, 3)) * u.volt, jnp.ones((3, 4)) / u.volt)
    assert not isinstance(y, u.Quantity)


def test_grad_through_unitful_new_ops():
    x = jnp.ones((2, 3)) * u.volt

    def loss(w):
        return jnp.sum(etp_viz.einsum("bi,io->bo", x, w * u.siemens).to_decimal(u.amp))

    np.testing.assert_allclose(jax.grad(loss)(jnp.ones((3, 4))), 2.0)

    def emb_loss(t):
        return jnp.sum(etp_viz.embedding(jnp.array([1, 1]), t * u.mV).to_decimal(u.volt))

    np.testing.assert_allclose(jax.grad(emb_loss)(jnp.ones((3, 2)))[1], 2e-3)


def test_grouped_bias_with_the_wrong_dimension_is_a_unit_error():
    call = lambda b: etp_viz.grouped_matmul(  # noqa: E731
        jnp.ones((2, 3)) * u.volt, jnp.ones((2, 3, 4)) * u.siemens, bias=b
    )
    with pytest.raises(etp_viz.UnitMismatchError, match=r"bias has unit 'V'"):
        call(jnp.ones((2, 4)) * u.volt)


# --- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("bi,io", "exactly one '->'"),
        ("bi->bo", "1 operand"),
        ("bi,io,oj->bj", "3 operand"),
        ("...i,io->...o", "ellipsis"),
        ("b1,1o->bo", "non-letters"),
        ("bii,io->bo", r"letter\(s\) \['i'\] repeat within the x subscripts"),
        ("bi,io->boo", "repeat within the output"),
        ("bi,io->bz", r"output letter\(s\) \['z'\] appear in neither operand"),
        ("bi,iko->bo", r"weight letter\(s\) \['k'\] appear in neither x nor the output"),
    ],
)
def test_einsum_spec_errors_name_the_problem(spec, match):
    with pytest.raises(ValueError, match=r"etp_viz\.einsum: invalid spec .*" + match):
        etp_viz.einsum(spec, jnp.ones((2, 3)), jnp.ones((3, 4)))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: etp_viz.einsum("bi,io->bo", jnp.ones((2, 3, 1)), jnp.ones((3, 4))),
            r"names 2 axes for x \('bi'\) but x has shape \(2, 3, 1\)",
        ),
        (
            lambda: etp_viz.einsum("bi,io->bo", jnp.ones((2, 3)), jnp.ones((5, 4))),
            r"letter 'i' .* has size 3 in x \(2, 3\) but 5 in the weight",
        ),
        (lambda: etp_viz.einsum(3, jnp.ones(2), jnp.ones(2)), "spec must be a string"),
        (
            lambda: etp_viz.grouped_matmul(jnp.ones((2, 3)), jnp.ones((3, 3, 4))),
            r"grouped_matmul: x has shape \(2, 3\) and the weight \(3, 3, 4\)",
        ),
        (
            lambda: etp_viz.grouped_matmul(jnp.ones(3), jnp.ones((1, 3, 4))),
            r"expected x \(\.\.\., G, I\) and weight \(G, I, O\)",
        ),
        (
            lambda: etp_viz.grouped_matmul(jnp.ones((2, 3)), jnp.ones((2, 3, 4)), jnp.ones(4)),
            r"bias has shape \(4,\), expected \(2, 4\) = \(G, O\)",
        ),
        (
            lambda: etp_viz.embedding(jnp.array([0.0, 1.0]), jnp.ones((3, 2))),
            r"ids must be a unitless integer array .* got dtype float.*astype\(jnp\.int32\)",
        ),
        (
            lambda: etp_viz.embedding(jnp.array([0, 1]) * u.mV, jnp.ones((3, 2))),
            r"ids must be a unitless integer array .* got unit 'mV'",
        ),
        (
            lambda: etp_viz.embedding(jnp.array([0, 1]), jnp.ones(3)),
            r"the table has shape \(3,\); expected \(V, D\)",
        ),
        (
            lambda: etp_viz.embedding(jnp.array([0]), brainstate.ParamState(jnp.ones((3, 2)))),
            r"argument `table` is a brainstate ParamState.*self\.table\.value",
        ),
        (
            lambda: etp_viz.grouped_matmul(
                jnp.ones((2, 3)), brainstate.ParamState(jnp.ones((2, 3, 4)))
            ),
            r"argument `weight` is a brainstate ParamState",
        ),
        (
            lambda: etp_viz.einsum(
                "bi,io->bo", jnp.ones((2, 3)), brainstate.ParamState(jnp.ones((3, 4)))
            ),
            r"argument `weight` is a brainstate ParamState",
        ),
    ],
)
def test_shape_and_type_errors_teach(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


# --- end to end: D-RTRL == BPTT -------------------------------------------------------------


NUM_IN, NUM_GROUPS, NUM_HID, VOCAB = 3, 2, 4, 7


def _param(key, shape):
    return brainstate.ParamState(0.5 * jax.random.normal(jax.random.PRNGKey(key), shape))


class _Leaky(brainstate.nn.Module):
    """``h = 0.8 * h + tanh(op(x, W))``: element-wise recurrence, so D-RTRL is exact."""

    def __init__(self, hidden_shape):
        super().__init__()
        self._shape = hidden_shape

    def _zeros(self, batch_size):
        return jnp.zeros(self._shape if batch_size is None else (batch_size, *self._shape))

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(self._zeros(batch_size))

    def reset_state(self, batch_size=None, **kwargs):
        self.h.value = self._zeros(batch_size)

    def update(self, x):
        self.h.value = 0.8 * self.h.value + jnp.tanh(self.op(x))
        return self.h.value


class LeakyEmbedding(_Leaky):
    def __init__(self):
        super().__init__((NUM_HID,))
        self.table = _param(10, (VOCAB, NUM_HID))

    def op(self, ids):
        return etp_viz.embedding(ids, self.table.value)


class LeakyGrouped(_Leaky):
    def __init__(self):
        super().__init__((NUM_GROUPS, NUM_HID))
        self.W = _param(11, (NUM_GROUPS, NUM_IN, NUM_HID))
        self.b = _param(12, (NUM_GROUPS, NUM_HID))

    def op(self, x):
        return etp_viz.grouped_matmul(x, self.W.value, self.b.value)


class LeakyEinsum(_Leaky):
    def __init__(self, spec, w_shape, hidden_shape):
        super().__init__(hidden_shape)
        self.spec = spec
        self.W = _param(13, w_shape)

    def op(self, x):
        return etp_viz.einsum(self.spec, x, self.W.value)


G, IN, H = NUM_GROUPS, NUM_IN, NUM_HID
#: id -> (model factory, batch size, per-step input shape or None for ids, expected primitive)
E2E = {
    "embedding": (LeakyEmbedding, 2, None, "etp_emb"),
    "embedding_unbatched": (LeakyEmbedding, None, None, "etp_emb"),
    "gmm": (LeakyGrouped, 2, (2, G, IN), "etp_gmm"),
    "gmv": (LeakyGrouped, None, (G, IN), "etp_gmv"),
    "einsum_mm": (lambda: LeakyEinsum("bi,io->bo", (IN, H), (H,)), 2, (2, IN), "etp_einsum"),
    "einsum_mv": (lambda: LeakyEinsum("i,io->o", (IN, H), (H,)), None, (IN,), "etp_einsum"),
    "einsum_grouped": (
        lambda: LeakyEinsum("bgi,gio->bgo", (G, IN, H), (G, H)),
        2,
        (2, G, IN),
        "etp_einsum",
    ),
    "einsum_transposed": (
        lambda: LeakyEinsum("ib,oi->bo", (H, IN), (H,)),
        2,
        (IN, 2),
        "etp_einsum",
    ),
}


def _build(name):
    factory, batch, x_shape, prim = E2E[name]
    brainstate.random.seed(0)
    model = factory()
    brainstate.nn.init_all_states(model, batch_size=batch)
    steps, key = 6, jax.random.PRNGKey(3)
    if x_shape is None:
        shape = (steps,) if batch is None else (steps, batch)
        xs = jax.random.randint(key, shape, 0, VOCAB, dtype=jnp.int32)
    else:
        xs = jax.random.normal(key, (steps, *x_shape))
    return model, xs, prim


@pytest.mark.parametrize("name", list(E2E))
def test_compiled_graph_relates_the_weight_to_the_hidden_state(name):
    model, xs, prim = _build(name)
    graph = etp_viz.compile_etrace_graph(model, xs[0])
    assert [r.primitive.name for r in graph.hidden_param_op_relations] == [prim]
    (relation,) = graph.hidden_param_op_relations
    assert [p for p in relation.connected_hidden_paths] == [("h",)]


@pytest.mark.parametrize("name", list(E2E))
def test_d_rtrl_equals_bptt(name):
    model, xs, _ = _build(name)
    expected = bptt_gradients(model, xs, sequence_loss)
    alg = etp_viz.D_RTRL(model)
    alg.compile_graph(xs[0])
    got = online_gradients(alg, xs)
    assert set(got) == set(expected)
    assert_tree_allclose(got, expected, rtol=1e-10)


def test_es_d_rtrl_averages_embedding_ids_as_one_hot_rows():
    """Integer ids have no meaningful running average: ES-D-RTRL averages their one-hot rows
    (the embedding's ``pp_x_repr``; tests/learn/test_embedding_es.py checks the values)."""

    class Embedded(brainstate.nn.Module):
        def __init__(self):
            super().__init__()
            self.table = brainstate.ParamState(jnp.ones((5, 3)))

        def init_state(self, batch_size=None, **kwargs):
            self.h = brainstate.HiddenState(jnp.zeros(3))

        def update(self, ids):
            self.h.value = 0.8 * self.h.value + etp_viz.embedding(ids, self.table.value)
            return self.h.value

    model = Embedded()
    brainstate.nn.init_all_states(model)
    averaged = etp_viz.ES_D_RTRL(model, 0.9)
    averaged.compile_graph(jnp.asarray(1))
    assert [v.shape for v in averaged.etrace.value["x"].values()] == [(5,)]  # one row per id
    assert jnp.all(jnp.isfinite(averaged(jnp.asarray(2))))
    alg = etp_viz.ES_D_RTRL(model, (0.0, 0.9))
    alg.compile_graph(jnp.asarray(1))
    assert jnp.all(jnp.isfinite(alg(jnp.asarray(2))))
