"""saiunit quantities through the user ops."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import saiunit as u
from saiunit import sparse as ss

import etp_viz


def test_matmul_reattaches_the_product_unit_and_converts_the_bias():
    x, w = jnp.ones((4, 3)) * u.volt, jnp.ones((3, 5)) * u.siemens
    y = etp_viz.matmul(x, w, bias=jnp.full((5,), 500.0) * u.mA)
    assert u.get_unit(y).has_same_dim(u.amp)
    np.testing.assert_allclose(y.to_decimal(u.amp), 3.5)


def test_matmul_with_millivolts_keeps_the_scale():
    y = etp_viz.matmul(jnp.ones(3) * u.mV, jnp.ones((3, 2)) * u.siemens)
    np.testing.assert_allclose(y.to_decimal(u.amp), 3e-3)


def test_dimensionless_result_is_a_plain_array():
    y = etp_viz.matmul(jnp.ones(3) * u.volt, jnp.ones((3, 2)) / u.volt)
    assert not isinstance(y, u.Quantity)
    np.testing.assert_allclose(y, 3.0)


@pytest.mark.parametrize(
    "call",
    [
        lambda b: etp_viz.matmul(jnp.ones(3) * u.volt, jnp.ones((3, 2)) * u.siemens, bias=b),
        lambda b: etp_viz.lora_matmul(
            jnp.ones(3) * u.volt, jnp.ones((3, 1)) * u.siemens, jnp.ones((1, 2)), bias=b
        ),
    ],
)
def test_bias_with_the_wrong_dimension_is_a_clear_error(call):
    with pytest.raises(etp_viz.UnitMismatchError, match=r"bias has unit 'V'.*x \* weight has unit"):
        call(jnp.ones(2) * u.volt)
    with pytest.raises(etp_viz.UnitMismatchError, match="Fix: give the bias"):
        call(jnp.ones(2))


def test_conv_sparse_lora_element_wise_round_trip_units():
    y = etp_viz.conv(
        jnp.ones((1, 5, 2)) * u.volt,
        jnp.ones((3, 2, 4)) * u.siemens,
        jnp.zeros(4) * u.amp,
        strides=(1,),
        padding="VALID",
        dimension_numbers=("NWC", "WIO", "NWC"),
    )
    assert y.shape == (1, 3, 4) and u.get_unit(y).has_same_dim(u.amp)
    mat = ss.CSR.fromdense(jnp.eye(3))
    y = etp_viz.sparse_matmul(jnp.ones(3) * u.volt, mat.data * u.siemens, sparse_mat=mat)
    np.testing.assert_allclose(y.to_decimal(u.amp), 1.0)
    y = etp_viz.lora_matmul(jnp.ones(2) * u.volt, jnp.ones((2, 1)) * u.siemens, jnp.ones((1, 3)))
    np.testing.assert_allclose(y.to_decimal(u.amp), 2.0)
    tau = etp_viz.element_wise(jnp.array([-2.0, 3.0]) * u.ms, u.math.abs)
    np.testing.assert_allclose(tau.to_decimal(u.ms), [2.0, 3.0])


def test_grad_through_a_unitful_matmul():
    x = jnp.ones((2, 3)) * u.volt

    def loss(w):
        return jnp.sum(etp_viz.matmul(x, w * u.siemens).to_decimal(u.amp))

    np.testing.assert_allclose(jax.grad(loss)(jnp.ones((3, 4))), 2.0)
