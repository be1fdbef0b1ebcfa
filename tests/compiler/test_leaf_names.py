"""One dotted name per weight leaf (``etp_viz.compiler.dataflow.leaf_name``): a saiunit
quantity-valued weight reads as the same weight holding a plain array (issue 41: it was
``syn.comm.weight.weight.0`` where the plain array read ``syn.comm.weight``)."""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import saiunit as u

import etp_viz
from etp_viz.compiler.dataflow import leaf_name


class Comm(brainstate.nn.Module):
    """A linear projection whose weight (a dict ``{"weight": W}``, as brainstate's layers
    hold it) is in siemens, or plain."""

    def __init__(self, units: bool):
        super().__init__()
        w = jnp.asarray(np.random.default_rng(0).normal(size=(3, 4)) * 0.5)
        self.weight = brainstate.ParamState({"weight": w * u.siemens if units else w})
        self.units = units

    def update(self, v):
        w = self.weight.value["weight"]
        if self.units:
            return etp_viz.matmul(v * u.volt, w).to_decimal(u.amp)
        return etp_viz.matmul(v, w)


class Syn(brainstate.nn.Module):
    def __init__(self, units: bool):
        super().__init__()
        self.comm = Comm(units)


class Net(brainstate.nn.Module):
    def __init__(self, units: bool):
        super().__init__()
        self.syn = Syn(units)
        gain = jnp.full((4,), 0.8)
        self.gain = brainstate.ParamState(gain * u.ms if units else gain)
        self.units = units

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.zeros(4))

    def update(self, x):
        gain = self.gain.value.to_decimal(u.ms) if self.units else self.gain.value
        self.h.value = jnp.tanh(self.syn.comm(x) + 0.5 * self.h.value) * etp_viz.element_wise(gain)
        return self.h.value


def _net(units: bool) -> Net:
    net = Net(units)
    brainstate.nn.init_all_states(net)
    return net


@pytest.mark.parametrize("units", [False, True], ids=["plain", "saiunit"])
def test_a_quantity_valued_weight_has_the_plain_weights_name(units):
    graph = etp_viz.compile_etrace_graph(_net(units), jnp.ones(3))
    claims = graph.gradient_claims("d_rtrl")
    assert list(claims) == ["gain", "syn.comm.weight"]
    assert claims["syn.comm.weight"].kind != "none"


def test_leaf_name_drops_only_a_quantitys_mantissa_index():
    value = {"weight": jnp.ones(2) * u.siemens, "bias": jnp.ones(2) * u.mA}
    keys = [k for k, _ in jax.tree_util.tree_flatten_with_path(value)[0]]
    assert [leaf_name(("syn", "comm", "weight"), k) for k in keys] == [
        "syn.comm.weight.bias",
        "syn.comm.weight",
    ]
    (key,) = [k for k, _ in jax.tree_util.tree_flatten_with_path(jnp.ones(2) * u.ms)[0]]
    assert leaf_name(("gain",), key) == "gain"


def test_verify_names_the_quantity_valued_weight_once(x64):
    net = _net(True)
    xs = jnp.asarray(np.random.default_rng(1).normal(size=(4, 3)))
    report = etp_viz.verify(net, xs)
    assert {row.path for row in report.rows} == {"gain", "syn.comm.weight"}
