"""Learning through inner loops (issue 32, "Inner loops"): an LTC-style cell whose hidden state
is updated by 6 Euler sub-steps in a loop inside one model step.

The compiler unrolls the loop (tests/compiler/test_inner_loops.py), so D-RTRL and ES-D-RTRL
learn the looped model exactly as its twin written out by hand (float64, several steps), and
D-RTRL equals BPTT where the claim is exact (an element-wise recurrence inside the loop).
"""

from __future__ import annotations

import warnings

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
from tests.compiler.loop_models import WHILE_SHAPES, build, inputs
from tests.learn.helpers import online_gradients, shared, step_loss
from tests.oracles import bptt_gradients, relative_error

T = 6
TWIN_ATOL = 1e-9
EXACT_RTOL = 1e-10
LOOPS = ("fori", "scan", "for_loop", "fori_array_bounds", "while_literal", *WHILE_SHAPES)


def _online(model, xs, algorithm, *args):
    alg = getattr(etp_viz, algorithm)(model, *args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        alg.compile_graph(xs[0])
    grads = online_gradients(alg, xs, loss=step_loss, jit=False)
    claims = {k: c.kind for k, c in alg.graph.gradient_claims(alg.claim_family).items()}
    return grads, claims


# every (loop shape, learner, recurrence) run once for the module: the twin's is the oracle of
# all the loop shapes, and a loop's run serves the exact-claim tests below too
@shared
def _learned(loop, algorithm, args, recurrence):
    """``_online`` on a fresh ``build(loop, recurrence)`` over ``inputs(T)``."""
    return _online(build(loop, recurrence=recurrence), inputs(T), algorithm, *args)


def _max_difference(got, want):
    assert set(got) == set(want)
    return max(float(jnp.max(jnp.abs(got[k] - want[k]))) for k in got)


@pytest.mark.parametrize("recurrence", ["dense", "diagonal"])
@pytest.mark.parametrize(
    "algorithm, args", [("D_RTRL", ()), ("ES_D_RTRL", ((0.6, 0.8),))], ids=["d_rtrl", "es"]
)
@pytest.mark.parametrize("loop", LOOPS)
def test_online_gradients_equal_the_hand_unrolled_twins(x64, loop, algorithm, args, recurrence):
    got, claims = _learned(loop, algorithm, args, recurrence)
    want, twin_claims = _learned("twin", algorithm, args, recurrence)
    assert claims == twin_claims
    assert _max_difference(got, want) <= TWIN_ATOL
    assert max(float(jnp.max(jnp.abs(g))) for g in got.values()) > 1e-3  # the case can tell


@pytest.mark.parametrize("loop", ["fori", "for_loop"])
def test_d_rtrl_equals_bptt_where_the_claim_is_exact(x64, loop):
    model = build(loop, recurrence="diagonal")
    xs = inputs(T)
    want = bptt_gradients(model, xs, lambda ys: jnp.sum(ys**2))
    got, claims = _learned(loop, "D_RTRL", (), "diagonal")
    assert claims == {"W_in": "exact", "tau": "exact"}
    for path in (("W_in",), ("tau",)):
        assert relative_error(got[path], want[path]) <= EXACT_RTOL, path


def test_dense_recurrence_in_the_loop_is_approximate_and_said_so(x64):
    model = build("fori", recurrence="dense")
    xs = inputs(T)
    want = bptt_gradients(model, xs, lambda ys: jnp.sum(ys**2))
    got, claims = _learned("fori", "D_RTRL", (), "dense")
    assert set(claims.values()) == {"approximate"}
    error = relative_error(got[("W_rec",)], want[("W_rec",)])
    assert 1e-6 < error < 1.0


def test_the_jitted_learner_runs_the_unrolled_step(x64):
    xs = inputs(3)
    alg = etp_viz.D_RTRL(build("fori", recurrence="diagonal"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        alg.compile_graph(xs[0])
    got = online_gradients(alg, xs, loss=step_loss, jit=True)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(got))


class NestedCell(brainstate.nn.Module):
    """``h`` updated by ``style``: ``'nested'`` (a fori_loop of 3 around one of 2), ``'jit'`` (a
    fori_loop inside ``jax.jit``), ``'lift'`` (plain ``x @ W`` in the loop, ``lift=True``)."""

    def __init__(self, style):
        super().__init__()
        self.W = brainstate.ParamState(jnp.asarray(np.random.default_rng(1).normal(size=(3, 4))))
        self.style = style

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.full(4, 0.1))

    def update(self, x):
        def sub(i, v):
            plain = self.style == "lift"
            product = x @ self.W.value if plain else etp_viz.matmul(x, self.W.value)
            return v + 0.2 * (-v + jnp.tanh(product))

        if self.style == "nested":
            v = jax.lax.fori_loop(0, 3, lambda i, v: jax.lax.fori_loop(0, 2, sub, v), self.h.value)
        elif self.style == "jit":
            v = jax.jit(lambda v: jax.lax.fori_loop(0, 3, sub, v))(self.h.value)
        else:
            v = jax.lax.fori_loop(0, 3, sub, self.h.value)
        self.h.value = v
        return v


@pytest.mark.parametrize("style", ["nested", "jit", "lift"])
def test_nested_jitted_and_lifted_loops_are_unrolled_and_exact(x64, style):
    model = NestedCell(style)
    brainstate.nn.init_all_states(model)
    xs = inputs(T)
    want = bptt_gradients(model, xs, lambda ys: jnp.sum(ys**2))
    alg = etp_viz.D_RTRL(model, lift=style == "lift")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        alg.compile_graph(xs[0])
    names = [e.primitive.name for e in alg.graph.module_info.jaxpr.eqns]
    assert "scan" not in names and names.count("etp_mv") == (6 if style == "nested" else 3)
    assert alg.graph.gradient_claims(alg.claim_family)["W"].kind == "exact"
    got = online_gradients(alg, xs, loss=step_loss, jit=False)
    assert relative_error(got[("W",)], want[("W",)]) <= EXACT_RTOL
