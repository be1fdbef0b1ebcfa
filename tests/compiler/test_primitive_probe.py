"""Primitives the compiler has no rule for are judged from their own structure (their JVP).

A library's surrogate spike (braintools binds ``heaviside_surrogate_gradient``) must stay in
the h -> h transition, or D-RTRL loses an LIF's soft reset ``-V_th * s(V)``; a primitive that
moves positions (``cumsum``, ``sort``, ``fft``, a custom one) must stay cut. The gradient
checks run in float64 against BPTT (``tests/oracles.py``).
"""

from __future__ import annotations

import warnings

import brainstate
import jax
import jax.numpy as jnp
import pytest

import etp_viz
import etp_viz.nn as enn
from etp_viz._compat import Primitive, ShapedArray, ad, mlir
from etp_viz.compiler import DiagnosticKind, compile_etrace_graph
from etp_viz.compiler._positions import is_position_preserving
from etp_viz.compiler._primitive_probe import _CACHE, judge_primitive
from etp_viz.ops import _registry, matmul
from tests.learn.helpers import online_gradients, sequence_loss
from tests.oracles import assert_tree_allclose, bptt_gradients, relative_error

ALPHA = 4.0


def _surrogate_grad(x):
    sig = jax.nn.sigmoid(ALPHA * x)
    return ALPHA * sig * (1.0 - sig)


def _heaviside(x):
    return (x >= 0).astype(x.dtype)


def _primitive(name, impl, jvp=None):
    """A plain primitive with an abstract eval, an impl, a lowering and (optionally) a JVP."""
    prim = Primitive(name)
    prim.def_impl(impl)
    prim.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(prim, mlir.lower_fun(impl, multiple_results=False))
    if jvp is not None:
        ad.primitive_jvps[prim] = jvp
    return prim


#: a hand-made surrogate spike: Heaviside forward, sigmoid surrogate derivative
spike_p = _primitive(
    "test_probe_spike",
    _heaviside,
    lambda primals, tangents: (
        spike_p.bind(primals[0]),
        _surrogate_grad(primals[0]) * tangents[0],
    ),
)
#: position-mixing: each position reads its left neighbour (the JVP rolls the tangent)
roll_p = _primitive(
    "test_probe_roll",
    lambda x: jnp.roll(x, 1, axis=-1),
    lambda primals, tangents: (roll_p.bind(primals[0]), jnp.roll(tangents[0], 1, axis=-1)),
)
#: element-wise and linear, but its JVP applies the primitive itself: structure cannot decide
scale_p = _primitive(
    "test_probe_scale",
    lambda x: 0.5 * x,
    lambda primals, tangents: (scale_p.bind(primals[0]), scale_p.bind(tangents[0])),
)
ad.primitive_transposes[scale_p] = lambda cotangent, x: [scale_p.bind(cotangent)]
#: no JVP rule at all
opaque_p = _primitive("test_probe_opaque", jnp.tanh)


@jax.custom_jvp
def jvp_spike(x):
    return _heaviside(x)


@jvp_spike.defjvp
def _jvp_spike_rule(primals, tangents):
    (x,), (t,) = primals, tangents
    return jvp_spike(x), _surrogate_grad(x) * t


@jax.custom_vjp
def vjp_spike(x):
    return _heaviside(x)


vjp_spike.defvjp(lambda x: (_heaviside(x), x), lambda x, g: (_surrogate_grad(x) * g,))


def _braintools_spike():
    braintools = pytest.importorskip("braintools", reason="braintools is not installed")
    return braintools.surrogate.Sigmoid(alpha=ALPHA)


SPIKES = {
    "custom_jvp": lambda: jvp_spike,
    "custom_vjp": lambda: vjp_spike,
    "primitive": lambda: spike_p.bind,
    "braintools": _braintools_spike,
}


# -- the probe on single equations ---------------------------------------------------------
def _last_eqn(fn, *args):
    """The last equation ``fn`` binds on an inexact value, looking through ``jnp``'s ``jit``
    wrappers (``jnp.fft.fft`` casts to complex first)."""
    eqns = jax.make_jaxpr(fn)(*args).jaxpr.eqns
    while eqns[-1].primitive.name in ("jit", "pjit", "convert_element_type"):
        if eqns[-1].primitive.name == "convert_element_type":
            eqns = eqns[:-1]
        else:
            eqns = eqns[-1].params["jaxpr"].jaxpr.eqns
    return eqns[-1]


X = jnp.linspace(0.1, 0.9, 10).reshape(2, 5)
ELEMENTWISE = {
    "tanh": jnp.tanh,
    "logistic": jax.nn.sigmoid,
    "mul": lambda x: x * x,
    "max": lambda x: jnp.maximum(x, 0.3),
    "bessel_i1e": jax.lax.bessel_i1e,
    "erf_inv": jax.lax.erf_inv,
    "igamma": lambda x: jax.lax.igamma(x, x),
    "spike": spike_p.bind,
}
MIXING = {
    "cumsum": lambda x: jax.lax.cumsum(x, axis=1),
    "cumprod": lambda x: jax.lax.cumprod(x, axis=1),
    "sort": lambda x: jnp.sort(x, axis=-1),
    "fft": lambda x: jnp.fft.fft(x),
    "rev": lambda x: x[:, ::-1],
    "dot_general": lambda x: x @ jnp.ones((5, 5)),
    "reduce_sum": lambda x: jnp.sum(x, axis=1),
    "top_k": lambda x: jax.lax.top_k(x, 5)[0],
    "roll_p": roll_p.bind,
}


@pytest.mark.parametrize("name", list(ELEMENTWISE))
def test_the_probe_calls_element_wise_primitives_element_wise(name):
    eqn = _last_eqn(ELEMENTWISE[name], X)
    # the operands of the output's shape are hidden-derived; a scalar one would be broadcast
    dependent = [v.aval.shape == X.shape for v in eqn.invars]
    judgement = judge_primitive(eqn, dependent, is_position_preserving)
    assert judgement.elementwise, judgement
    assert judgement.how == "jvp structure"
    if not all(dependent):  # a hidden-derived scalar reaches every position
        assert not judge_primitive(eqn, [True] * len(dependent), is_position_preserving).elementwise


@pytest.mark.parametrize("name", list(MIXING))
def test_the_probe_never_calls_a_mixing_primitive_element_wise(name):
    eqn = _last_eqn(MIXING[name], X)
    judgement = judge_primitive(eqn, [True] * len(eqn.invars), is_position_preserving)
    assert not judgement.elementwise, judgement
    assert not is_position_preserving(eqn, [True] * len(eqn.invars))


def test_structure_that_cannot_decide_cuts_and_says_how_to_declare():
    for prim, why in ((scale_p, "applies the primitive itself"), (opaque_p, "could not")):
        eqn = _last_eqn(prim.bind, X)
        judgement = judge_primitive(eqn, [True], is_position_preserving)
        assert (judgement.elementwise, judgement.how) == (False, "undecided")
        assert why in judgement.reason
        assert f"declare_elementwise('{prim.name}')" in judgement.reason


def test_a_declaration_wins_over_the_probe(monkeypatch):
    monkeypatch.setattr(_registry, "DECLARED_ELEMENTWISE", {})
    scale, spike = _last_eqn(scale_p.bind, X), _last_eqn(spike_p.bind, X)
    etp_viz.ops.declare_elementwise(scale_p)
    etp_viz.ops.declare_elementwise("test_probe_spike", False)
    assert judge_primitive(scale, [True], is_position_preserving).how == "declared"
    assert is_position_preserving(scale, [True])
    assert not is_position_preserving(spike, [True])
    with pytest.raises(TypeError, match="a jax Primitive or its name"):
        etp_viz.ops.declare_elementwise(3)
    with pytest.raises(TypeError, match="ETP primitives"):
        etp_viz.ops.declare_elementwise(etp_viz.ops.etp_mm_p)


def test_a_judgement_is_made_once_per_signature(monkeypatch):
    from etp_viz.compiler import _primitive_probe

    calls = []
    original = _primitive_probe._judge_structure
    monkeypatch.setattr(
        _primitive_probe,
        "_judge_structure",
        lambda *args: calls.append(args[0].primitive.name) or original(*args),
    )
    _CACHE.clear()
    eqn = _last_eqn(spike_p.bind, X)
    for _ in range(3):
        judge_primitive(eqn, [True], is_position_preserving)
    judge_primitive(_last_eqn(spike_p.bind, X[0]), [True], is_position_preserving)
    assert calls == ["test_probe_spike", "test_probe_spike"]  # two shapes, two probes


# -- models -------------------------------------------------------------------------------
class Recurrent(brainstate.nn.Module):
    """``h = 0.5 h + 0.3 f(h) + x W``: exact under D-RTRL when ``f`` keeps positions."""

    def __init__(self, f, n=5):
        super().__init__()
        self.f = f
        self.W = brainstate.ParamState(0.4 * jax.random.normal(jax.random.PRNGKey(0), (3, n)))
        self.h = brainstate.HiddenState(jnp.linspace(-0.5, 0.5, n))

    def update(self, x):
        self.h.value = 0.5 * self.h.value + 0.3 * self.f(self.h.value) + matmul(x, self.W.value)
        return self.h.value


class Spiking(brainstate.nn.Module):
    """An LIF layer (soft reset ``-V_th s(V)``) and a linear readout."""

    def __init__(self, spike_fn):
        super().__init__()
        brainstate.random.seed(0)
        self.lif = enn.LIF(3, 5, tau_mem=5.0, spike_fn=spike_fn)
        self.out = enn.Linear(5, 2)

    def update(self, x):
        return self.out(self.lif(x))


class ConvIF(brainstate.nn.Module):
    """A 1-D convolution driving integrate-and-fire neurons ``V = V - s(V) + K * x``."""

    def __init__(self, spike_fn, length=6, channels=2):
        super().__init__()
        self.spike_fn = spike_fn
        self.K = brainstate.ParamState(0.6 * jax.random.normal(jax.random.PRNGKey(2), (3, 3, 2)))
        self.shape = (length, channels)

    def init_state(self, batch_size=None, **kwargs):
        self.V = brainstate.HiddenState(jnp.zeros((batch_size or 1, *self.shape)))

    def update(self, x):
        spikes = self.spike_fn(self.V.value - 1.0)
        drive = etp_viz.conv(
            x, self.K.value, strides=(1,), padding="SAME", dimension_numbers=("NWC", "WIO", "NWC")
        )
        self.V.value = self.V.value - spikes + drive
        return self.spike_fn(self.V.value - 1.0)


def _graph(model, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compile_etrace_graph(model, x)


def _judged(graph):
    return [r for r in graph.diagnostics if r.kind == DiagnosticKind.PRIMITIVE_JUDGED]


def _online(model, xs, make=etp_viz.D_RTRL):
    alg = make(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alg.compile_graph(xs[0])
    return online_gradients(alg, xs)


def test_an_element_wise_primitive_stays_in_the_transition_and_the_record_says_why(x64):
    model = Recurrent(lambda h: spike_p.bind(h) + jnp.tanh(h))
    graph = _graph(model, jnp.ones(3))
    assert graph.hidden_groups[0].cut_eqn_indices == ()
    (record,) = _judged(graph)
    assert record.primitive is spike_p and record.context["elementwise"]
    assert "test_probe_spike" in record.message and "kept" in record.message
    xs = jax.random.normal(jax.random.PRNGKey(1), (5, 3))
    expected = bptt_gradients(model, xs, sequence_loss)
    assert graph.gradient_claims("d_rtrl")["W"].kind == "exact"
    assert_tree_allclose(_online(model, xs), expected, rtol=1e-10)


@pytest.mark.parametrize("prim", [roll_p, scale_p], ids=["mixing", "undecided"])
def test_a_primitive_not_shown_element_wise_is_cut_with_its_reason(x64, prim):
    model = Recurrent(prim.bind)
    with pytest.warns(UserWarning, match=f"{prim.name}.*judged by structure"):
        graph = compile_etrace_graph(model, jnp.ones(3))
    assert graph.hidden_groups[0].cut_eqn_indices
    (record,) = _judged(graph)
    assert not record.context["elementwise"] and "cut" in record.message
    assert graph.gradient_claims("d_rtrl")["W"].kind == "approximate"
    xs = jax.random.normal(jax.random.PRNGKey(1), (4, 3))
    expected = bptt_gradients(model, xs, sequence_loss)
    assert relative_error(_online(model, xs), expected) > 1e-3  # the cut term is real


@pytest.mark.parametrize("spike", list(SPIKES))
def test_a_surrogate_spike_keeps_the_soft_reset_and_d_rtrl_equals_bptt(x64, spike):
    spike_fn = SPIKES[spike]()
    model = Spiking(spike_fn)
    brainstate.nn.init_all_states(model, batch_size=2)
    xs = 2.0 * jax.random.normal(jax.random.PRNGKey(1), (5, 2, 3))
    graph = _graph(model, xs[0])
    assert graph.hidden_groups[0].cut_eqn_indices == ()
    assert graph.gradient_claims("d_rtrl")["lif.W"].kind == "exact"
    expected = bptt_gradients(model, xs, sequence_loss)
    assert_tree_allclose(_online(model, xs), expected, rtol=1e-10)


@pytest.mark.parametrize(
    "cls,make",
    [(Spiking, lambda m: etp_viz.ES_D_RTRL(m, 0.9)), (ConvIF, etp_viz.D_RTRL)],
    ids=["lif-es_d_rtrl", "conv_if-d_rtrl"],
)
def test_braintools_spikes_learn_like_the_same_spike_written_as_custom_jvp(x64, cls, make):
    surrogate = _braintools_spike()

    @jax.custom_jvp
    def same_spike(x):
        return _heaviside(x)

    same_spike.defjvp(lambda p, t: (same_spike(p[0]), surrogate.surrogate_grad(p[0]) * t[0]))
    xs = 2.0 * jax.random.normal(jax.random.PRNGKey(1), (6, 2, *(6,) * (cls is ConvIF), 3))
    grads, expected = [], []
    for spike_fn in (surrogate, same_spike):
        model = cls(spike_fn)
        brainstate.nn.init_all_states(model, batch_size=2)
        expected.append(bptt_gradients(model, xs, sequence_loss))  # before the run moves V
        grads.append(_online(model, xs, make))
    assert_tree_allclose(grads[0], grads[1], rtol=1e-9)
    assert_tree_allclose(expected[0], expected[1], rtol=1e-12)
    if make is etp_viz.D_RTRL:  # an element-wise recurrence: D-RTRL is exact
        assert_tree_allclose(grads[0], expected[0], rtol=1e-10)
