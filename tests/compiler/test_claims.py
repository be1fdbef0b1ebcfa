"""``graph.gradient_claims``: the claim API, its reasons and its keys (the numbers behind the
claims are checked against BPTT in ``tests/learn/test_claims_property.py``)."""

from __future__ import annotations

import json
import warnings

import brainstate
import jax.numpy as jnp
import pytest

import etp_viz
import etp_viz.nn as enn
from etp_viz.compiler import GradientClaim, GradientClaims
from tests.compiler.models import init
from tests.learn import archs


def compiled(model, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return etp_viz.compile_etrace_graph(model, x)


def test_dense_recurrence_names_the_weight_and_equation_it_drops():
    arch = archs.Arch((archs.Layer(rec="dense"),))
    graph = compiled(archs.build(arch), archs.inputs(arch, 1)[0])
    claims = graph.gradient_claims("d_rtrl")
    claim = claims["layers.0.Wrec"]
    assert claim.kind == "approximate" and claim.online and not claim.readout
    assert "layers.0.Wrec (etp_mv, equation" in claim.reason and "h→h" in claim.reason
    eqn = graph.module_info.jaxpr.eqns[claim.dropped[0]]
    assert eqn.primitive.name == "etp_mv"
    assert claims["Wo"].kind == "exact" and claims["Wo"].readout


def test_gru_reset_weight_has_no_online_gradient_and_says_why():
    graph = compiled(init(enn.GRUCell(3, 4)), jnp.ones(3))
    claims = graph.gradient_claims()
    none = {k: c for k, c in claims.items() if c.kind == "none"}
    assert none and all(c.reason for c in none.values())
    assert any("Wr" in k for k in none)


def test_keys_are_leaf_paths_and_a_param_state_path_answers_too():
    graph = compiled(init(enn.GRUCell(3, 4)), jnp.ones(3))
    claims = graph.gradient_claims()
    assert isinstance(claims, GradientClaims)
    state_paths = {".".join(map(str, p)) for p in graph.module_info.weight_path_to_invars}
    for name in state_paths:
        assert name in claims
        combined = claims[name]
        leaves = [c for k, c in claims.items() if k == name or k.startswith(name + ".")]
        order = ["none", "approximate", "exact"]
        assert combined.kind == min((c.kind for c in leaves), key=order.index)
    assert claims.get("no.such.weight") is None
    with pytest.raises(KeyError, match="no weight 'nope'"):
        claims["nope"]
    assert all(isinstance(c, GradientClaim) for c in claims.values())
    json.dumps([c.to_json() for c in claims.values()])
    assert str(claims).count("\n") == len(claims) - 1


def test_es_d_rtrl_claims_and_algorithm_names():
    arch = archs.Arch((archs.Layer(),))
    graph = compiled(archs.build(arch), archs.inputs(arch, 1)[0])
    assert graph.gradient_claims("d_rtrl")["layers.0.Win"].kind == "exact"
    for name in ("es_d_rtrl", "pp_prop", etp_viz.ES_D_RTRL):
        claim = graph.gradient_claims(name)["layers.0.Win"]
        assert claim.kind == "approximate" and "factorises" in claim.reason
        assert claim.algorithm == "es_d_rtrl"
    with pytest.raises(ValueError, match="d_rtrl"):
        graph.gradient_claims("bptt_online")


def test_plain_parameter_into_the_state_is_named():
    class PlainBias(brainstate.nn.Module):
        def __init__(self):
            super().__init__()
            self.W = brainstate.ParamState(jnp.ones((3, 4)) * 0.1)
            self.b = brainstate.ParamState(jnp.ones(4) * 0.1)

        def init_state(self, *args, **kwargs):
            self.h = brainstate.HiddenState(jnp.zeros(4))

        def update(self, x):
            self.h.value = 0.5 * self.h.value + jnp.tanh(etp_viz.matmul(x, self.W.value))
            self.h.value = self.h.value + self.b.value * self.h.value
            return self.h.value

    graph = compiled(init(PlainBias()), jnp.ones(3))
    claims = graph.gradient_claims()
    assert claims["b"].kind == "none" and "feeds no ETP primitive" in claims["b"].reason
    # W's trace is exact: b * h is an element-wise part of the leaky transition
    assert claims["W"].kind == "exact"


def test_explain_prints_the_claims(capsys):
    arch = archs.Arch((archs.Layer(rec="dense"),))
    graph = compiled(archs.build(arch), archs.inputs(arch, 1)[0])
    graph.explain(claims="d_rtrl")
    out = capsys.readouterr().out
    assert "GRADIENT CLAIMS (d_rtrl)" in out
    assert "layers.0.Wrec: approximate" in out and "Wo: exact" in out


def test_a_weight_whose_leaves_differ_shows_its_worst_claim_everywhere():
    """A matrix (exact) and a plainly added bias (none) in one ParamState: the claims, the
    weights panel and compare mode all say "none" for the ParamState (issue 23, item 10 b)."""
    from etp_viz.view.model import build_view_model
    from etp_viz.view.weights import claims_by_weight

    arch = archs.Arch((archs.Layer(bias="mixed"),), batch=2)
    graph = compiled(archs.build(arch), archs.inputs(arch, 1)[0])
    claims = graph.gradient_claims("d_rtrl")
    assert claims["layers.0.Win.weight"].kind == "exact"
    assert claims["layers.0.Win.bias"].kind == "none"
    assert claims["layers.0.Win"].kind == "none"
    panel = {w.path: w for w in build_view_model(graph).weights}
    assert panel["layers.0.Win"].claim == "none"
    assert {leaf[1] for leaf in panel["layers.0.Win"].leaf_claims} == {"exact", "none"}
    assert claims_by_weight(claims)["layers.0.Win"][0] == "none"
