"""Issue 23 ("truth"): claims and ``verify()`` on models nobody here wrote, against an
independent BPTT (``tests.oracles``) in float64.

Each test is a small hand-written reproducer of one class of the issue: structural zeros
(item 1), weight normalisation (5), integer states (6a), ``jax.checkpoint``, a state-read
``jnp.where`` condition and a trailing-axis broadcast (7), NaN in ``verify`` (8), bad input
(9).
"""

from __future__ import annotations

import warnings

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
from tests.learn import archs
from tests.learn.helpers import online_gradients, step_loss
from tests.oracles import bptt_gradients

L = archs.Layer
EXACT = 1e-9


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def measured(model, xs, algorithm="d_rtrl"):
    """``(claims, {leaf: (relative error, |online|, |true|)})`` against the oracle."""
    from tests.learn.test_claims_property import leaf_errors

    expected = bptt_gradients(model, xs, lambda ys: sum(step_loss(y) for y in ys))
    cls = {"d_rtrl": etp_viz.D_RTRL, "es_d_rtrl": etp_viz.ES_D_RTRL}[algorithm]
    alg = cls(model)
    alg.compile_graph(xs[0])
    claims = alg.graph.gradient_claims(algorithm)
    return claims, leaf_errors(expected, online_gradients(alg, xs, jit=False))


def assert_claims_hold(claims, errors):
    for path, (err, online, true) in errors.items():
        if claims[path].kind == "exact":
            assert err <= EXACT, f"{path} claimed exact, off by {err:.3g}"
        if claims[path].kind == "approximate" and true > 1e-10:
            assert online > 0, f"{path}: approximate with an identically zero gradient"
        if claims[path].kind == "none":
            assert online == 0, f"{path}: claimed none, online norm {online:.3g}"


# -- item 1: a weight whose online gradient is zero by structure ---------------------------
STRUCTURAL_ZERO = {
    "readout of a second group's pre-update state": archs.Arch((L(), L(reads="old"))),
    "stacked layer reading the lower layer's old output": archs.Arch((L(reads="old"), L())),
}


@pytest.mark.parametrize("algorithm", ["d_rtrl", "es_d_rtrl"])
@pytest.mark.parametrize("name", list(STRUCTURAL_ZERO))
def test_a_structurally_zero_online_gradient_is_claimed_none(x64, name, algorithm):
    arch = STRUCTURAL_ZERO[name]
    claims, errors = measured(archs.build(arch), archs.inputs(arch, 5), algorithm)
    claim = claims["layers.0.Win"]
    assert claim.kind == "none" and claim.online
    assert "zero by structure" in claim.reason and "layers.0.h" in claim.reason
    err, online, true = errors["layers.0.Win"]
    assert online == 0 and true > 1e-3  # BPTT's is not zero: the weight matters, D-RTRL is blind
    assert_claims_hold(claims, errors)


def test_random_feedback_eprop_keeps_a_signal_for_a_structurally_silent_state(x64):
    """Random feedback sends the output error to every group: not zero, so "approximate"."""
    arch = STRUCTURAL_ZERO["readout of a second group's pre-update state"]
    model, xs = archs.build(arch), archs.inputs(arch, 5)
    for feedback, kind in (("symmetric", "none"), ("random", "approximate")):
        report = etp_viz.verify(model, xs, algorithm=etp_viz.EProp(model, feedback=feedback))
        assert report["layers.0.Win"].claim == kind and not report.contradictions
        assert (report["layers.0.Win"].online_norm > 0) == (kind == "approximate")


class DelayBuffer(brainstate.nn.Module):
    """``d^t = h^{t-1}`` in a buffer the readout reads: ``h`` reaches the loss a step late."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        self.W = brainstate.ParamState(jnp.asarray(rng.standard_normal((3, 4))))
        self.Wo = brainstate.ParamState(jnp.asarray(rng.standard_normal((4, 2))))

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.full((4,), 0.1))
        self.d = brainstate.HiddenState(jnp.zeros((4,)))

    def update(self, x):
        self.d.value = jnp.roll(self.h.value, 1)  # a buffer slot (position-moving: own group)
        self.h.value = 0.6 * self.h.value + jnp.tanh(etp_viz.matmul(x, self.W.value))
        return etp_viz.matmul(self.d.value, self.Wo.value)


def test_a_delay_buffer_leaves_the_writer_without_a_learning_signal(x64):
    model = DelayBuffer()
    brainstate.nn.init_all_states(model)
    xs = jnp.asarray(np.random.default_rng(1).standard_normal((6, 3)))
    claims, errors = measured(model, xs)
    assert claims["W"].kind == "none" and "zero by structure" in claims["W"].reason
    assert errors["W"][2] > 1e-3
    assert_claims_hold(claims, errors)


def test_verify_flags_an_approximate_claim_with_an_identically_zero_gradient(x64, monkeypatch):
    """The second line of defence: were the compiler to say "approximate" again, verify()
    reports it (the claim should be none)."""
    from etp_viz.compiler import claims as claims_module

    arch = STRUCTURAL_ZERO["readout of a second group's pre-update state"]
    model, xs = archs.build(arch), archs.inputs(arch, 5)
    assert not etp_viz.verify(model, xs).contradictions
    monkeypatch.setattr(claims_module, "_silent_states", lambda flow, r, bypass: 0)
    report = etp_viz.verify(model, xs)
    assert report["layers.0.Win"].claim == "approximate"
    assert [r.path for r in report.contradictions] == ["layers.0.Win"]
    assert "exactly 0" in report["layers.0.Win"].contradiction


# -- item 5: weight normalisation ---------------------------------------------------------
class WeightNorm(brainstate.nn.Module):
    """``W = g * v / |v|`` (Salimans & Kingma 2016) into an ETP matmul."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        self.v = brainstate.ParamState(jnp.asarray(rng.standard_normal((3, 4))))
        self.g = brainstate.ParamState(jnp.asarray(rng.uniform(0.5, 1.5, 4)))
        self.Wo = brainstate.ParamState(jnp.asarray(rng.standard_normal((4, 2))))

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.zeros(4))

    def update(self, x):
        weight = self.g.value * self.v.value / jnp.linalg.norm(self.v.value, axis=0)
        self.h.value = 0.7 * self.h.value + jnp.tanh(etp_viz.matmul(x, weight))
        return etp_viz.matmul(self.h.value, self.Wo.value)


def test_weight_normalisation_gain_is_learned_online_and_claimed_exact(x64):
    model = WeightNorm()
    brainstate.nn.init_all_states(model)
    xs = jnp.asarray(np.random.default_rng(2).standard_normal((6, 3)))
    claims, errors = measured(model, xs)
    assert claims["g"].kind == claims["v"].kind == "exact"
    assert claims["g"].online
    assert_claims_hold(claims, errors)
    graph = etp_viz.compile_etrace_graph(model, xs[0])
    assert graph.weight_status[("g",)] == "online"
    alg = etp_viz.D_RTRL(model)
    alg.compile_graph(xs[0])
    assert alg.learning_status[("g",)].online_groups == (0,)


# -- item 6a: an integer hidden state -----------------------------------------------------
class Refractory(brainstate.nn.Module):
    """A spiking membrane beside an integer refractory countdown."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        self.W = brainstate.ParamState(jnp.asarray(0.8 * rng.standard_normal((3, 4))))
        self.Wo = brainstate.ParamState(jnp.asarray(rng.standard_normal((4, 2))))

    def init_state(self, batch_size=None, **kwargs):
        self.v = brainstate.HiddenState(jnp.zeros(4))
        self.r = brainstate.HiddenState(jnp.zeros(4, dtype=jnp.int32))

    def update(self, x):
        v = 0.8 * self.v.value + etp_viz.matmul(x, self.W.value)
        v = jnp.where(self.r.value > 0, 0.0, v)
        self.r.value = jnp.where(v > 0.5, 3, jnp.maximum(self.r.value - 1, 0))
        self.v.value = v - 0.5 * jax.nn.sigmoid(4 * (v - 0.5))
        return etp_viz.matmul(self.v.value, self.Wo.value)


@pytest.mark.parametrize("algorithm", ["d_rtrl", "es_d_rtrl", "eprop"])
def test_an_integer_hidden_state_carries_no_gradient_and_learning_runs(x64, algorithm):
    model = Refractory()
    brainstate.nn.init_all_states(model)
    xs = jnp.asarray(np.random.default_rng(2).standard_normal((8, 3)))
    report = etp_viz.verify(model, xs, algorithm=algorithm)
    assert not report.contradictions, report.table()
    assert report["W"].online_norm > 0
    graph = etp_viz.compile_etrace_graph(model, xs[0])
    assert [g.hidden_paths for g in graph.hidden_groups] == [[("v",)]]


def test_an_integer_state_claim_is_checked_against_the_oracle(x64):
    model = Refractory()
    brainstate.nn.init_all_states(model)
    xs = jnp.asarray(np.random.default_rng(2).standard_normal((8, 3)))
    claims, errors = measured(model, xs)
    assert claims["W"].kind == "exact"
    assert_claims_hold(claims, errors)


# -- item 7: checkpoint, a state-read where condition, a trailing-axis broadcast ----------
class Variants(brainstate.nn.Module):
    def __init__(self, kind):
        super().__init__()
        rng = np.random.default_rng(0)
        self.kind = kind
        self.W = brainstate.ParamState(jnp.asarray(rng.standard_normal((3, 4))))
        self.Wo = brainstate.ParamState(jnp.asarray(rng.standard_normal((4, 2))))
        if kind == "gain":
            self.gain = brainstate.ParamState(jnp.asarray(rng.uniform(0.5, 1.5, (2, 1))))
        self.decay = jnp.asarray(rng.uniform(0.3, 0.9, (2, 4)))

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.full((2, 4), 0.1))

    def update(self, x):
        h, pre = self.h.value, etp_viz.matmul(x, self.W.value)
        if self.kind == "checkpoint":
            cell = jax.checkpoint(lambda pre, h: self.decay * h + jnp.tanh(pre))
            self.h.value = cell(pre, h)
        elif self.kind == "where":  # a scalar condition read off the state
            new = jnp.tanh(self.decay * h + pre)
            self.h.value = jnp.where(jnp.max(h) < 100.0, new, h)
        else:  # a per-module (G, 1) gain broadcast along the trailing axis
            self.h.value = jnp.tanh(self.decay * h + pre * etp_viz.element_wise(self.gain.value))
        return etp_viz.matmul(self.h.value, self.Wo.value)


@pytest.mark.parametrize("kind", ["checkpoint", "where", "gain"])
def test_exact_weights_are_not_called_approximate_by_a_false_reason(x64, kind):
    model = Variants(kind)
    brainstate.nn.init_all_states(model)
    xs = jnp.asarray(np.random.default_rng(3).standard_normal((6, 2, 3)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = etp_viz.compile_etrace_graph(model, xs[0])
    assert not [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    claims, errors = measured(model, xs)
    kinds = {p: c.kind for p, c in claims.items()}
    assert kinds["W"] == "exact" and kinds["Wo"] == "exact", claims
    if kind == "gain":
        assert kinds["gain"] == "exact"
    assert graph.weight_status[("W",)] == "online"
    assert_claims_hold(claims, errors)


# -- item 8: NaN in verify is a finding ---------------------------------------------------
def test_a_nan_parameter_is_a_contradiction_not_a_pass(x64):
    arch = archs.Arch((L(),))
    model, xs = archs.build(arch), archs.inputs(arch, 4)
    model.layers[0].Win.value = model.layers[0].Win.value.at[0, 0].set(jnp.nan)
    report = etp_viz.verify(model, xs)
    assert {r.path for r in report.contradictions} == {r.path for r in report.rows}
    assert "NaN" in report["layers.0.Win"].contradiction
    assert "0 contradiction(s)" not in report.table()
    assert report.to_json()["rows"][0]["ok"] is False


def test_a_nan_loss_is_a_contradiction(x64):
    arch = archs.Arch((L(),))
    model, xs = archs.build(arch), archs.inputs(arch, 4)
    report = etp_viz.verify(model, xs, loss=lambda y: jnp.sum(jnp.log(y - 100.0)))
    assert report.contradictions and all("NaN" in r.contradiction for r in report.contradictions)


# -- item 9: bad input gets an error naming the argument, the shape and the fix ------------
BATCHED = archs.Arch((L(),), batch=2)


def test_a_vector_loss_names_the_loss_and_the_fix():
    model, xs = archs.build(BATCHED), archs.inputs(BATCHED, 3)
    with pytest.raises(ValueError, match=r"loss: loss\(y\) must return one scalar .*\(2, 2\)"):
        etp_viz.verify(model, xs, loss=lambda y: y**2)


@pytest.mark.parametrize("shape", [(3, 3), (3, 2, 5)])
def test_targets_of_the_wrong_shape_name_ys_and_the_expected_shape(shape):
    model, xs = archs.build(BATCHED), archs.inputs(BATCHED, 3)
    with pytest.raises(ValueError, match=r"ys: .*output's shape \(2, 2\).*expected \(3, 2, 2\)"):
        etp_viz.verify(model, xs, jnp.zeros(shape))


def test_a_model_never_initialised_says_init_all_states():
    model = archs.ArchNet(BATCHED)
    x = archs.inputs(BATCHED, 1)[0]
    for call in (
        lambda: etp_viz.compile_etrace_graph(model, x),
        lambda: etp_viz.D_RTRL(model).compile_graph(x),
        lambda: etp_viz.verify(model, x[None]),
    ):
        with pytest.raises(ValueError, match=r"not initialised.*init_all_states\(model\)"):
            call()


def test_a_missing_batch_axis_says_so():
    model, xs = archs.build(BATCHED), archs.inputs(BATCHED, 3)
    with pytest.raises(ValueError, match=r"no batch axis.*\(2, 3\)") as error:
        etp_viz.verify(model, xs[:, 0])
    assert "Broadcast the input" not in str(error.value)
    alg = etp_viz.D_RTRL(model)
    alg.compile_graph(xs[0])
    with pytest.raises(ValueError, match=r"batch axis is missing.*\(2, 3\)"):
        alg(xs[0, 0])


class DictOut(brainstate.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = archs.ArchNet(archs.Arch((L(),)))

    def update(self, x):
        return {"y": self.net(x)}


def test_a_dict_output_works_with_the_default_loss_and_names_ys_with_targets(x64):
    model = DictOut()
    brainstate.nn.init_all_states(model)
    xs = archs.inputs(archs.Arch((L(),)), 4)
    report = etp_viz.verify(model, xs)
    assert not report.contradictions and report["net.layers.0.Win"].online_norm > 0
    with pytest.raises(TypeError, match=r"ys: the model's output is a dict.*loss="):
        etp_viz.verify(model, xs, jnp.zeros((4, 2)))
