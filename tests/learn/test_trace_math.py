"""The trace algebra in isolation (etp_viz.learn.etp.trace_math), against hand-written formulas."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from etp_viz.learn.etp import trace_math as tm
from etp_viz.learn.etp.plan import bind_rules
from etp_viz.ops import etp_mm_p


def test_resolve_decay():
    assert tm.resolve_decay(0.9) == (0.9, 0.9)
    assert tm.resolve_decay(3) == (0.5, 0.5)
    assert tm.resolve_decay(1) == (0.0, 0.0)
    assert tm.resolve_decay((0.5, 0.8)) == (0.5, 0.8)
    with pytest.raises(ValueError, match="rank must be >= 1"):
        tm.resolve_decay(0)
    with pytest.raises(ValueError, match=r"decay must be in \[0, 1\)"):
        tm.resolve_decay(1.0)


def test_bias_correction_is_dropped_after_1000_updates():
    assert float(tm.bias_correction(0.9, jnp.asarray(1.0))) == pytest.approx(0.1)
    assert float(tm.bias_correction(0.9, jnp.asarray(2.0))) == pytest.approx(0.19)
    assert float(tm.bias_correction(0.999, jnp.asarray(1001.0))) == 1.0


def _dense(batch=2, num_in=3, num_out=4, num_state=2, seed=0):
    keys = jax.random.split(jax.random.PRNGKey(seed), 5)
    x = jax.random.normal(keys[0], (batch, num_in))
    weights = {"weight": jax.random.normal(keys[1], (num_in, num_out))}
    df = jax.random.normal(keys[2], (batch, num_out, num_state))
    dh_dh = jax.random.normal(keys[3], (batch, num_out, num_state, num_state))
    trace = {"weight": jax.random.normal(keys[4], (batch, num_in, num_out, num_state))}
    return x, weights, df, dh_dh, trace, bind_rules(etp_mm_p, {"has_bias": False})


def test_drtrl_update_matches_the_formula():
    x, weights, df, dh_dh, trace, rules = _dense()
    got = tm.drtrl_update(trace, dh_dh, df, x, weights, rules)["weight"]
    # eps'[b,i,o,a] = sum_c D[b,o,a,c] eps[b,i,o,c] + x[b,i] df[b,o,a]
    want = jnp.einsum("boac,bioc->bioa", dh_dh, trace["weight"]) + jnp.einsum("bi,boa->bioa", x, df)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    zero_d = tm.drtrl_update(trace, None, df, x, weights, rules)["weight"]
    np.testing.assert_allclose(zero_d, jnp.einsum("bi,boa->bioa", x, df), rtol=1e-6)


def test_single_state_update_scales_the_trace_in_its_layout():
    # S = 1 takes the in-place path (trace * yw_to_w(D, ones)); same values as the formula
    x, weights, df, dh_dh, trace, rules = _dense(num_state=1)
    assert tm._trace_scale(rules, dh_dh[..., 0, 0], {"weight": trace["weight"][..., 0]})
    got = tm.drtrl_update(trace, dh_dh, df, x, weights, rules)["weight"]
    want = dh_dh[:, None, :, 0, :] * trace["weight"] + jnp.einsum("bi,boa->bioa", x, df)
    np.testing.assert_array_equal(got, want)


def test_trace_scale_rejects_a_rule_that_is_not_a_scaling():
    x, weights, df, dh_dh, trace, rules = _dense(num_state=1)
    mixing = rules._replace(yw_to_w=lambda g, tr, **p: {"weight": jnp.cumsum(tr["weight"], 1)})
    assert tm._trace_scale(mixing, dh_dh[..., 0, 0], {"weight": trace["weight"][..., 0]}) is None
    got = tm.drtrl_update(trace, dh_dh, df, x, weights, mixing)["weight"]
    want = jnp.cumsum(trace["weight"], 1) + jnp.einsum("bi,boa->bioa", x, df)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_drtrl_gradient_matches_the_formula():
    x, weights, df, dh_dh, trace, rules = _dense()
    dl_dh = jax.random.normal(jax.random.PRNGKey(9), df.shape)
    got = tm.drtrl_gradient(trace, dl_dh, weights, rules)["weight"]
    want = jnp.einsum("bioa,boa->io", trace["weight"], dl_dh)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_pp_updates_and_gradient_match_the_formulas():
    x, weights, df, dh_dh, _, rules = _dense()
    eps_x, eps_f = jnp.ones_like(x), jnp.ones_like(df)
    np.testing.assert_allclose(tm.es_update_x(eps_x, x, 0.5), 0.5 + x)
    new_f = tm.es_update_f(eps_f, dh_dh, df, 0.8)
    np.testing.assert_allclose(new_f, 0.8 * dh_dh.sum(-1) + 0.2 * df, rtol=1e-5, atol=1e-6)
    dl_dh = jax.random.normal(jax.random.PRNGKey(3), df.shape)
    got = tm.es_gradient(x, new_f, dl_dh, 0.2, weights, rules, (2, 4))["weight"]
    want = jnp.einsum("bi,bo->io", x, (new_f * dl_dh).sum(-1) / 0.2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
