"""Registry, spec registration and a custom primitive (the spec notebook's scaled matmul)."""

from __future__ import annotations

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
from etp_viz import ops
from tests.conftest import tree_allclose
from tests.ops._cases import Case
from tests.ops.test_rules import drtrl_gradient

BUILTINS = [
    "etp_mm", "etp_mv", "etp_elemwise", "etp_conv",
    "etp_sp_mm", "etp_sp_mv", "etp_lora_mm", "etp_lora_mv",
    "etp_emb", "etp_gmm", "etp_gmv", "etp_einsum",
]  # fmt: skip


def test_builtins_are_registered_with_every_rule():
    # etp_viz's own (a compiled braintrace model adds braintrace's same-named primitives)
    builtins = [
        p for p in ops.ETP_PRIMITIVES if p.name in BUILTINS and isinstance(p, ops.ETPPrimitive)
    ]
    assert sorted(p.name for p in builtins) == sorted(BUILTINS)
    # one deterministic order (primitives registered without a spec, e.g. by doctests, aside)
    with_spec = [p for p in ops.ETP_PRIMITIVES if p in ops.ETP_PRIMITIVE_SPECS]
    assert with_spec == list(ops.ETP_PRIMITIVE_SPECS)
    for p in builtins:
        for table in (
            ops.ETP_RULES_YW_TO_W,
            ops.ETP_RULES_XY_TO_DW,
            ops.ETP_RULES_INIT_DRTRL,
            ops.ETP_RULES_INIT_PP,
            ops.ETP_RULES_XY_TO_ETRACE,
        ):
            assert p in table, (p.name, table)
        assert isinstance(p, ops.ETPPrimitive) and ops.get_primitive_spec(p).name == p.name
    batched = {p.name for p in ops.BATCHED_PRIMITIVES}
    assert {"etp_mm", "etp_conv", "etp_sp_mm", "etp_lora_mm", "etp_gmm"} <= batched
    unbatched = {"etp_mv", "etp_sp_mv", "etp_lora_mv", "etp_elemwise", "etp_gmv"}
    assert not unbatched & batched
    # ids / einsum letters of any rank: no fixed batch axis (their own batching rules)
    assert not {"etp_emb", "etp_einsum"} & batched
    own_enabled = [p for p in ops.GRADIENT_ENABLED_PRIMITIVES if isinstance(p, ops.ETPPrimitive)]
    assert [p.name for p in own_enabled] == ["etp_elemwise"]


def test_trainable_invars_and_indices():
    assert ops.get_trainable_invars(ops.etp_mm_p, {"has_bias": True}) == {"weight": 1, "bias": 2}
    assert ops.get_trainable_invars(ops.etp_lora_mv_p, {"has_bias": True}) == {
        "lora_b": 1, "lora_a": 2, "bias": 3,
    }  # fmt: skip
    assert ops.get_trainable_invars(ops.etp_elemwise_p, {}) == {"weight": 0}
    assert ops.get_primitive_spec(ops.etp_lora_mm_p).weight_invar_index == 1
    assert ops.get_primitive_spec(ops.etp_elemwise_p).weight_invar_index == 0
    assert ops.get_y_outvar_index(ops.etp_conv_p) == 0


def test_recognition_is_by_identity_not_name():
    impostor = jax.extend.core.Primitive("etp_mm")
    assert not ops.is_etp_primitive(impostor) and ops.is_etp_primitive(ops.etp_mm_p)


def _scaled_impl(*args, scale=1.0, has_bias=False):
    y = scale * (args[0] @ args[1])
    return y + args[2] if has_bias else y


def _scaled_trainable(params):
    return {"weight": 1, "bias": 2} if params.get("has_bias", False) else {"weight": 1}


def _scaled_yw_to_w(g, trace, *, scale=1.0, has_bias=False):
    out = {"weight": trace["weight"] * jnp.expand_dims(g, -2)}
    if has_bias:
        out["bias"] = trace["bias"] * g
    return out


def _scaled_xy_to_dw(x, g, weights, *, scale=1.0, has_bias=False):
    def fwd(w):
        extra = [w["bias"]] if has_bias else []
        return _scaled_impl(x, w["weight"], *extra, scale=scale, has_bias=has_bias)

    return jax.vjp(fwd, weights)[1](g)[0]


def _scaled_init_drtrl(x_var, y_var, weight_vars, n):
    batch = x_var.shape[0]
    return {k: jnp.zeros((batch, *v.shape, n)) for k, v in weight_vars.items()}


def _scaled_init_pp(x_var, y_var, weight_vars, n):
    return jnp.zeros((*y_var.shape, n), y_var.dtype)


SPEC = ops.ETPPrimitiveSpec(
    name="test_scaled_mm",
    impl=_scaled_impl,
    yw_to_w=_scaled_yw_to_w,
    xy_to_dw=_scaled_xy_to_dw,
    init_drtrl=_scaled_init_drtrl,
    init_pp=_scaled_init_pp,
    trainable_invars_fn=_scaled_trainable,
    batched=True,
)
SCALED_P = ops.register_primitive_spec(SPEC)


def test_custom_spec_primitive_behaves_like_the_notebook():
    assert ops.get_primitive_spec(SCALED_P) is SPEC and ops.is_etp_primitive(SCALED_P)
    assert ops.is_batched_primitive(SCALED_P)
    assert SPEC.resolve_trainable_invars({"has_bias": True}) == {"weight": 1, "bias": 2}
    assert SPEC.weight_invar_index == 1
    x, w, b = jnp.ones((4, 3)), jnp.ones((3, 5)), jnp.full((5,), 0.1)
    np.testing.assert_allclose(SCALED_P.bind(x, w, scale=2.0, has_bias=False), 2.0 * x @ w)
    np.testing.assert_allclose(SCALED_P.bind(x, w, b, scale=2.0, has_bias=True), 6.1, rtol=1e-6)
    f = jax.jit(lambda x, w: SCALED_P.bind(x, w, scale=2.0, has_bias=False))
    np.testing.assert_allclose(f(x, w), 6.0)
    dw = jax.grad(lambda w: jnp.sum(SCALED_P.bind(x, w, scale=2.0, has_bias=False)))(w)
    np.testing.assert_allclose(dw, 8.0)
    with pytest.warns(UserWarning, match="test_scaled_mm"):
        ys = jax.vmap(lambda xi: SCALED_P.bind(xi, w, scale=2.0, has_bias=False))(
            jnp.ones((8, 4, 3))
        )
    assert ys.shape == (8, 4, 5)
    init = SPEC.init_drtrl(jax.ShapeDtypeStruct((4, 3), x.dtype), None, {"weight": w, "bias": b}, 2)
    assert init["weight"].shape == (4, 3, 5, 2) and init["bias"].shape == (4, 5, 2)


@pytest.mark.usefixtures("x64")
def test_default_etrace_rules_of_a_custom_primitive_give_exact_drtrl():
    """No xy_to_etrace / etrace_to_dw registered: the defaults must still be exact."""
    assert SCALED_P not in ops.ETP_RULES_XY_TO_ETRACE
    key = jax.random.PRNGKey(3)
    r = lambda s, i: jax.random.normal(jax.random.fold_in(key, i), s, jnp.float64)  # noqa: E731
    case = Case("scaled", SCALED_P, r((3, 4), 0), {"weight": r((4, 5), 1), "bias": r((5,), 2)},
                {"scale": 1.5, "has_bias": True})  # fmt: skip
    xs, decays, readouts = r((4, 3, 4), 3), jax.random.uniform(key, (4, 3, 5)), r((4, 3, 5), 5)
    from tests.ops.test_rules import _recurrence_loss

    expected = jax.grad(lambda w: _recurrence_loss(case, w, xs, decays, readouts))(case.weights)
    # the custom yw_to_w ignores `scale` on purpose (the notebook's version multiplies by it,
    # which would be wrong for a trace of h w.r.t. W); the default xy_to_etrace carries it.
    assert tree_allclose(drtrl_gradient(case, xs, decays, readouts), expected)
    trace = ops.get_xy_to_etrace(SCALED_P)(case.x, jnp.ones((3, 5)), case.weights, **case.params)
    assert trace["weight"].shape == (3, 4, 5) and trace["bias"].shape == (3, 5)


SCALED_MV_P = ops.register_primitive_spec(
    dataclasses.replace(
        SPEC,
        name="test_scaled_mv",
        batched=False,
        init_drtrl=None,
        init_pp=None,
        batched_counterpart=SCALED_P,
    )
)


def test_custom_unbatched_primitive_stays_etp_under_vmap_through_its_counterpart():
    x, w, b = jnp.arange(12.0).reshape(4, 3), jnp.ones((3, 5)), jnp.full((5,), 0.1)
    assert ops.get_batched_counterpart(SCALED_MV_P) is SCALED_P
    assert ops.get_batched_counterpart(SCALED_P) is None

    def f(xi):
        return SCALED_MV_P.bind(xi, w, b, scale=2.0, has_bias=True)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning
        jaxpr = jax.make_jaxpr(jax.vmap(f))(x)
        ys = jax.vmap(f)(x)
    assert [e.primitive for e in jaxpr.eqns] == [SCALED_P]
    np.testing.assert_allclose(ys, 2.0 * x @ w + b, rtol=1e-6)
    # a weight batched still falls back (and says so)
    with pytest.warns(UserWarning, match="test_scaled_mv.*batched_counterpart"):
        jax.vmap(lambda wi: SCALED_MV_P.bind(x[0], wi, scale=1.0, has_bias=False))(
            jnp.ones((2, 3, 5))
        )


def test_register_primitive_accepts_a_batched_counterpart():
    mm = ops.register_primitive("test_cube_mm", lambda x, w: (x @ w) ** 3, batched=True)
    mv = ops.register_primitive("test_cube_mv", lambda x, w: (x @ w) ** 3, batched_counterpart=mm)
    x, w = jnp.ones((6, 2)), jnp.full((2, 3), 0.5)
    jaxpr = jax.make_jaxpr(jax.vmap(lambda xi: mv.bind(xi, w)))(x)
    assert [e.primitive for e in jaxpr.eqns] == [mm]
    np.testing.assert_allclose(jax.vmap(lambda xi: mv.bind(xi, w))(x), 1.0)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"batched_counterpart": ops.etp_mv_p},
            TypeError,
            r"registered with batched=True; got 'etp_mv'",
        ),
        (
            {"batched_counterpart": SCALED_P, "batched": True},
            ValueError,
            "for unbatched primitives",
        ),
        ({"batched_counterpart": SCALED_P, "x_invar_index": None}, ValueError, "needs an input x"),
    ],
)
def test_a_wrong_batched_counterpart_is_rejected_with_the_fix(kwargs, error, match):
    with pytest.raises(error, match=match + r".*Fix: register the batched form first"):
        ops.register_primitive("test_bad_counterpart", lambda x, w: x @ w, **kwargs)


def test_a_counterpart_with_the_wrong_output_shape_fails_at_vmap_naming_both():
    mm = ops.register_primitive("test_sum_mm", lambda x, w: jnp.sum(x @ w), batched=True)
    mv = ops.register_primitive("test_sum_mv", lambda x, w: x @ w, batched_counterpart=mm)
    with pytest.raises(ValueError, match=r"'test_sum_mv' re-binds .* 'test_sum_mm'.*shape \(\)"):
        jax.vmap(lambda xi: mv.bind(xi, jnp.ones((2, 3))))(jnp.ones((4, 2)))


def test_the_fallback_warning_points_at_the_users_line():
    x, ws = jnp.ones((3, 4)), jnp.ones((2, 4, 5))

    def model(w):
        return etp_viz.matmul(x, w)  # the line the warning must name

    line = model.__code__.co_firstlineno + 1
    with pytest.warns(UserWarning, match="etp_mm") as record:
        jax.vmap(model)(ws)
    assert (record[0].filename, record[0].lineno) == (__file__, line)
