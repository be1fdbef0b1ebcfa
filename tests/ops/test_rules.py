"""The ETP rules of every built-in family, checked against JAX oracles in float64."""

from __future__ import annotations

import functools
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from etp_viz import ops
from tests.conftest import tree_allclose
from tests.ops._cases import CASE_NAMES, make_case

pytestmark = pytest.mark.usefixtures("x64")


def _rules(case):
    return (
        ops.ETP_RULES_YW_TO_W[case.prim],
        ops.ETP_RULES_XY_TO_DW[case.prim],
        ops.get_xy_to_etrace(case.prim),
        ops.get_etrace_to_dw(case.prim),
    )


def _random_like(y, seed):
    return jax.random.normal(jax.random.PRNGKey(seed), y.shape, dtype=y.dtype)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_xy_to_dw_is_the_vjp_of_the_impl(name):
    case = make_case(name)
    y = case.apply()
    g = _random_like(y, 1)
    _, pullback = jax.vjp(case.apply, case.weights)
    expected = pullback(g)[0]
    got = ops.ETP_RULES_XY_TO_DW[case.prim](case.x, g, case.weights, **case.params)
    assert set(got) == set(case.weights)
    assert tree_allclose(got, expected)


def _jacobian(name):
    """``jax.jacfwd`` of case ``name``'s impl w.r.t. every weight: jitted (one compiled program
    instead of an eager dispatch per op of the batched JVP, the conv cases' slowest step) and
    computed once per case and x64 setting for the two tests that read it (read-only)."""
    return _jacobian_cached(name, jax.config.read("jax_enable_x64"))


@functools.cache
def _jacobian_cached(name, x64):
    case = make_case(name)
    return types.MappingProxyType(jax.jit(jax.jacfwd(case.apply))(case.weights))


@pytest.mark.parametrize("name", CASE_NAMES)
def test_yw_to_w_is_the_chain_rule_per_output_element(name):
    """For every output element j: g_j * dy_j/dW == contract(yw_to_w(g, x-trace), e_j)."""
    case = make_case(name)
    yw_to_w, _, xy_to_etrace, etrace_to_dw = _rules(case)
    y = case.apply()
    g = _random_like(y, 2)
    jac = _jacobian(name)  # leaves: (*y.shape, *w.shape)

    # one compiled program instead of an eager dispatch per op of the vmapped rules
    @jax.jit
    def per_element_rule(g):
        unit_trace = xy_to_etrace(case.x, jnp.ones_like(y), case.weights, **case.params)
        propagated = yw_to_w(g, unit_trace, **case.params)
        eye = jnp.eye(y.size, dtype=y.dtype).reshape(y.size, *y.shape)
        return jax.vmap(lambda e: etrace_to_dw(propagated, e, case.weights, **case.params))(eye)

    per_element = per_element_rule(g)
    for key, jac_w in jac.items():
        flat = jac_w.reshape(y.size, *case.weights[key].shape)
        expected = flat * g.reshape(y.size, *([1] * case.weights[key].ndim))
        np.testing.assert_allclose(per_element[key], expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_etrace_rules_reduce_to_xy_to_dw(name):
    case = make_case(name)
    _, xy_to_dw, xy_to_etrace, etrace_to_dw = _rules(case)
    y = case.apply()
    g, dl = _random_like(y, 3), _random_like(y, 4)
    trace = xy_to_etrace(case.x, g, case.weights, **case.params)
    ones = etrace_to_dw(trace, jnp.ones_like(y), case.weights, **case.params)
    assert tree_allclose(ones, xy_to_dw(case.x, g, case.weights, **case.params))
    weighted = etrace_to_dw(trace, dl, case.weights, **case.params)
    assert tree_allclose(weighted, xy_to_dw(case.x, g * dl, case.weights, **case.params))


CONV_CASES = [name for name in CASE_NAMES if name.startswith("conv")]


@pytest.mark.parametrize("name", ["mm+bias", "sp_mm+bias", "mv", "sp_mv+bias", *CONV_CASES])
def test_sum_of_unreduced_trace_is_xy_to_dw(name):
    """Summing the trace over batch (and output positions for conv) gives the VJP."""
    case = make_case(name)
    _, xy_to_dw, xy_to_etrace, _ = _rules(case)
    g = _random_like(case.apply(), 5)
    trace = xy_to_etrace(case.x, g, case.weights, **case.params)
    dw = xy_to_dw(case.x, g, case.weights, **case.params)
    lead = trace["weight"].ndim - dw["weight"].ndim
    np.testing.assert_allclose(
        trace["weight"].sum(axis=tuple(range(lead))), dw["weight"], rtol=1e-10, atol=1e-12
    )
    if "bias" in dw:
        if name.startswith("conv"):
            feature_axis = case.params["dimension_numbers"].out_spec[1]
            bias = jnp.moveaxis(trace["bias"], feature_axis, -1)
        else:
            bias = trace["bias"]
        bias = bias.reshape(-1, dw["bias"].shape[0])
        np.testing.assert_allclose(bias.sum(0), dw["bias"], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", CONV_CASES)
def test_conv_trace_is_the_per_position_jacobian(name):
    """eps[n, p, k] == g[n, p, c(k)] * dy[n, p, c(k)] / dK[k], from jax.jacfwd of the impl."""
    case = make_case(name)
    dn = case.params["dimension_numbers"]
    y = case.apply()
    g = _random_like(y, 6)
    trace = ops.get_xy_to_etrace(case.prim)(case.x, g, case.weights, **case.params)["weight"]
    jac = _jacobian(name)["weight"]  # the same as jacfwd w.r.t. the kernel alone
    # (*y, *K) -> (N, *spatial_out, C_out, *K): dy/dK is zero off channel c(k), so summing
    # g * jac over the output channel axis picks exactly c(k).
    order = (dn.out_spec[0], *dn.out_spec[2:], dn.out_spec[1])
    k_axes = tuple(range(y.ndim, jac.ndim))
    jac = jnp.transpose(jac, (*order, *k_axes))
    g_major = jnp.transpose(g, order).reshape(*jac.shape[: y.ndim], *([1] * len(k_axes)))
    expected = jnp.sum(g_major * jac, axis=y.ndim - 1)
    np.testing.assert_allclose(trace, expected, rtol=1e-10, atol=1e-12)


def _recurrence_loss(case, weights, xs, decays, readouts):
    h = jnp.zeros_like(case.apply())
    loss = 0.0
    for t in range(len(decays)):
        y = case.apply(weights, None if xs is None else xs[t])
        h = decays[t] * h + jnp.tanh(y)
        loss = loss + jnp.sum(readouts[t] * h)
    return loss


def drtrl_gradient(case, xs, decays, readouts):
    """D-RTRL for h_t = a_t * h_{t-1} + tanh(prim(x_t, W)) from the ETP rules alone."""
    yw_to_w, _, xy_to_etrace, etrace_to_dw = _rules(case)
    trace, grads = None, None
    for t in range(len(decays)):
        x = None if xs is None else xs[t]
        y = case.apply(x=x)
        df = 1.0 - jnp.tanh(y) ** 2  # dh/dy, element-wise
        new = xy_to_etrace(x, df, case.weights, **case.params)
        if trace is not None:
            decayed = yw_to_w(decays[t], trace, **case.params)  # D^t eps^{t-1}, D = diag(a_t)
            new = jax.tree_util.tree_map(jnp.add, decayed, new)
        trace = new
        step = etrace_to_dw(trace, readouts[t], case.weights, **case.params)
        grads = step if grads is None else jax.tree_util.tree_map(jnp.add, grads, step)
    return grads


@pytest.mark.parametrize("name", CASE_NAMES)
def test_drtrl_recursion_from_rules_equals_bptt(name):
    case = make_case(name)
    steps = 4
    y = case.apply()
    key = jax.random.PRNGKey(11)
    xs = None if case.x is None else case.random_inputs(key, steps)
    decays = jax.random.uniform(jax.random.fold_in(key, 1), (steps, *y.shape), dtype=y.dtype)
    readouts = jax.random.normal(jax.random.fold_in(key, 2), (steps, *y.shape), dtype=y.dtype)
    # jit: one compilation for both sides instead of one per eager op (conv cases are slow)
    loss = jax.grad(lambda w, xs: _recurrence_loss(case, w, xs, decays, readouts))
    expected, got = jax.jit(
        lambda xs: (loss(case.weights, xs), drtrl_gradient(case, xs, decays, readouts))
    )(xs)
    assert tree_allclose(got, expected, rtol=1e-9, atol=1e-11)


class _VarLike:
    def __init__(self, array):
        self.aval = jax.core.ShapedArray(array.shape, array.dtype)


@pytest.mark.parametrize("name", CASE_NAMES)
@pytest.mark.parametrize("wrap", [jax.ShapeDtypeStruct, _VarLike], ids=["struct", "aval"])
def test_init_rules_shapes_and_dtypes(name, wrap):
    case = make_case(name)
    y = case.apply()
    num_states = 3

    def var(a):
        return wrap(a.shape, a.dtype) if wrap is jax.ShapeDtypeStruct else wrap(a)

    x_var = None if case.x is None else var(case.x)
    weight_vars = {k: var(v) for k, v in case.weights.items()}
    init = ops.ETP_RULES_INIT_DRTRL[case.prim](
        x_var, var(y), weight_vars, num_states, **case.params
    )
    unit = ops.get_xy_to_etrace(case.prim)(case.x, jnp.ones_like(y), case.weights, **case.params)
    assert {k: v.shape for k, v in init.items()} == {
        k: (*v.shape, num_states) for k, v in unit.items()
    }
    assert all(v.dtype == y.dtype and not v.any() for v in init.values())
    pp = ops.ETP_RULES_INIT_PP[case.prim](x_var, var(y), weight_vars, num_states)
    assert pp.shape == (*y.shape, num_states) and pp.dtype == y.dtype


def test_trace_layouts_match_the_reference_table():
    """Batched traces keep the batch axis, unbatched ones do not (shapes without S)."""
    expected = {
        "mm+bias": {"weight": (3, 4, 5), "bias": (3, 5)},
        "mv+bias": {"weight": (4, 5), "bias": (5,)},
        "elemwise": {"weight": (5,)},
        "conv1d+bias": {"weight": (2, 6, 3, 3, 4), "bias": (2, 6, 4)},
        "conv2d_grouped+bias": {"weight": (2, 3, 4, 6, 2, 3, 2), "bias": (2, 6, 3, 4)},
        "lora_mm+bias": {"effective_weight": (3, 4, 5), "bias": (3, 5)},
        "lora_mv+bias": {"effective_weight": (4, 5), "bias": (5,)},
        "emb": {"weight": (3, 6, 4)},
        "emb_2d": {"weight": (2, 3, 6, 4)},
        "emb_scalar": {"weight": (6, 4)},
        "gmm+bias": {"weight": (3, 2, 4, 5), "bias": (3, 2, 5)},
        "gmv+bias": {"weight": (2, 4, 5), "bias": (2, 5)},
        "einsum_mm": {"weight": (3, 4, 5)},
        "einsum_mv": {"weight": (4, 5)},
        "einsum_grouped": {"weight": (3, 2, 4, 5)},
        "einsum_positions": {"weight": (3, 2, 5, 4)},
        "einsum_x_summed": {"weight": (3, 4, 5)},
        "einsum_outer": {"weight": (3, 4, 2)},
    }
    for name, shapes in expected.items():
        case = make_case(name)
        y = case.apply()
        trace = ops.get_xy_to_etrace(case.prim)(case.x, y, case.weights, **case.params)
        assert {k: v.shape for k, v in trace.items()} == shapes, name
    case = make_case("sp_mm")
    trace = ops.get_xy_to_etrace(case.prim)(case.x, case.apply(), case.weights, **case.params)
    assert trace["weight"].shape == (3, case.params["sparse_mat"].nnz)
