"""ETP ops inside ``cond`` (issue 29, part 1): a top-level ``cond`` is if-converted.

The compiler splices every branch of a ``cond`` outside any loop into the step's jaxpr and
picks each result with ``select_n`` on the branch index (same values, same derivatives), so
the ETP equations of both branches get relations and are learned online. Checked in float64
against BPTT (``jax.grad`` through the original model, whose step still runs ``cond``):
D-RTRL exactly where the claim says exact (element-wise recurrence), ES-D-RTRL against a
hand-written recursion and against BPTT at ``T = 1``. A ``cond`` inside a loop body that is not
unrolled (a dynamic trip count; a loop with a static one is unrolled, and its conds with it), or
with a ``while`` loop in a branch, stays opaque and is still reported.
"""

from __future__ import annotations

import warnings

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
from etp_viz.compiler import DiagnosticKind
from tests.learn.helpers import online_gradients, step_loss
from tests.oracles import bptt_gradients, relative_error

N_IN, N, T = 3, 4, 7
EXACT_RTOL = 1e-10


class CondCell(brainstate.nn.Module):
    """``h = cond(flag, a*h + tanh(x A), 0.5*a*h + tanh(x B))``: one weight per branch, the
    hidden state computed in both branches.

    ``flag``: ``'input'`` (``x[0] > 0``), ``'const'`` (a constant array of the model) or
    ``'hidden'`` (``sum(h) > 0``: the branch depends on the state itself). ``style``:
    ``'lax'`` (``jax.lax.cond`` returning the new value) or ``'brainstate'``
    (``brainstate.transform.cond`` writing the state inside each branch). ``dense``: the first
    branch adds a plain (non-ETP) dense recurrence ``h @ U`` (not element-wise).
    """

    def __init__(self, flag="input", style="lax", dense=False, const=True):
        super().__init__()
        rng = np.random.default_rng(3)
        self.A = brainstate.ParamState(jnp.asarray(0.6 * rng.standard_normal((N_IN, N))))
        self.B = brainstate.ParamState(jnp.asarray(0.6 * rng.standard_normal((N_IN, N))))
        self.a = jnp.asarray(rng.uniform(0.3, 0.9, N))
        self.U = jnp.asarray(0.4 * rng.standard_normal((N, N)))
        self.flag, self.style, self.dense = flag, style, dense
        self.mode = jnp.asarray(const)

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.full((N,), 0.1))

    def _first(self, x, h):
        rec = h @ self.U if self.dense else self.a * h
        return rec + jnp.tanh(etp_viz.matmul(x, self.A.value))

    def _second(self, x, h):
        return 0.5 * self.a * h + jnp.tanh(etp_viz.matmul(x, self.B.value))

    def update(self, x):
        h = self.h.value
        flag = {"input": x[0] > 0, "const": self.mode, "hidden": jnp.sum(h) > 0}[self.flag]
        if self.style == "lax":
            self.h.value = jax.lax.cond(flag, self._first, self._second, x, h)
        else:

            def first():
                self.h.value = self._first(x, self.h.value)

            def second():
                self.h.value = self._second(x, self.h.value)

            brainstate.transform.cond(flag, first, second)
        return self.h.value


def _inputs(length=T, seed=4):
    return jnp.asarray(np.random.default_rng(seed).standard_normal((length, N_IN)))


def _model(**kwargs):
    model = CondCell(**kwargs)
    brainstate.nn.init_all_states(model)
    return model


def _learn(model, xs, algorithm="D_RTRL", *args):
    """``(online gradients, BPTT gradients, claims, compiler records)``; BPTT first (the
    oracle starts from the model's current states, which the online run then advances)."""
    want = bptt_gradients(model, xs, lambda ys: jnp.sum(ys**2))
    alg = getattr(etp_viz, algorithm)(model, *args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        alg.compile_graph(xs[0])
    got = online_gradients(alg, xs, loss=step_loss, jit=False)
    claims = alg.graph.gradient_claims(alg.claim_family)
    return got, want, claims, list(alg.graph.diagnostics)


def _kinds(records):
    return {r.kind for r in records}


@pytest.mark.parametrize(
    "flag, style",
    [("input", "lax"), ("input", "brainstate"), ("const", "lax"), ("hidden", "brainstate")],
)
def test_d_rtrl_learns_both_branches_exactly(x64, flag, style):
    model = _model(flag=flag, style=style)
    got, want, claims, records = _learn(model, _inputs())
    assert DiagnosticKind.PRIMITIVE_INSIDE_CONTROL_FLOW not in _kinds(records)
    assert {claims[k].kind for k in ("A", "B")} == {"exact"}
    for path in (("A",), ("B",)):
        assert relative_error(got[path], want[path]) <= EXACT_RTOL, path
    # the case can tell: a branch taken at some step gives its weight a non-zero gradient
    taken = [p for p in (("A",), ("B",)) if float(jnp.abs(want[p]).max()) > 1e-3]
    assert taken == ([("A",)] if flag == "const" else [("A",), ("B",)])
    if flag == "const":  # the branch never taken: zero online gradient, as in BPTT
        assert float(jnp.abs(got[("B",)]).max()) == 0.0


def test_the_executed_step_is_the_if_converted_jaxpr(x64):
    model = _model()
    alg = etp_viz.D_RTRL(model)
    alg.compile_graph(_inputs()[0])
    names = [e.primitive.name for e in alg.graph.module_info.jaxpr.eqns]
    assert "cond" not in names and "select_n" in names
    assert sum(e.primitive.name == "etp_mv" for e in alg.graph.module_info.jaxpr.eqns) == 2


def test_dense_recurrence_in_a_branch_is_approximate_and_said_so(x64):
    model = _model(dense=True)
    got, want, claims, _ = _learn(model, _inputs())
    assert claims["A"].kind == "approximate"
    error = relative_error(got[("A",)], want[("A",)])
    assert 1e-6 < error < 1.0  # the dropped off-diagonal terms show, the sign does not flip
    # B's branch keeps an element-wise recurrence, but the state it reads went through U
    assert claims["B"].kind in ("exact", "approximate")
    if claims["B"].kind == "exact":
        assert relative_error(got[("B",)], want[("B",)]) <= EXACT_RTOL


def _es_reference(model, xs, alpha_x, alpha_f):
    """ES-D-RTRL written out for :class:`CondCell` (input flag): both relations see ``x`` every
    step; ``D_f`` and ``D`` are those of the branch taken (``select_n``'s JVP)."""
    A, B, a = (np.asarray(v, np.float64) for v in (model.A.value, model.B.value, model.a))
    h = np.full(N, 0.1)
    eps_x = {"A": np.zeros(N_IN), "B": np.zeros(N_IN)}
    eps_f = {"A": np.zeros(N), "B": np.zeros(N)}
    grads = {"A": np.zeros_like(A), "B": np.zeros_like(B)}
    for t, x in enumerate(np.asarray(xs, np.float64)):
        first = x[0] > 0
        pre_a, pre_b = np.tanh(x @ A), np.tanh(x @ B)
        h = a * h + pre_a if first else 0.5 * a * h + pre_b
        d = a if first else 0.5 * a
        df = {"A": (1 - pre_a**2) * first, "B": (1 - pre_b**2) * (not first)}
        for k in grads:
            eps_x[k] = alpha_x * eps_x[k] + x
            eps_f[k] = alpha_f * d * eps_f[k] + (1 - alpha_f) * df[k]
            grads[k] += np.outer(eps_x[k], eps_f[k] / (1 - alpha_f ** (t + 1)) * 2 * h)
    return grads


@pytest.mark.parametrize("style", ["lax", "brainstate"])
def test_es_d_rtrl_follows_the_hand_written_recursion(x64, style):
    model = _model(style=style)
    xs = _inputs()
    want = _es_reference(model, xs, 0.5, 0.8)
    got, _, claims, records = _learn(model, xs, "ES_D_RTRL", (0.5, 0.8))
    assert DiagnosticKind.PRIMITIVE_INSIDE_CONTROL_FLOW not in _kinds(records)
    assert {claims[k].kind for k in ("A", "B")} == {"approximate"}
    for k in ("A", "B"):
        np.testing.assert_allclose(np.asarray(got[(k,)]), want[k], rtol=1e-10, atol=1e-12)


def test_es_d_rtrl_is_exact_at_the_first_step(x64):
    xs = _inputs(length=1)
    for flag_sign in (1.0, -1.0):  # each branch once
        model = _model()
        xs1 = xs.at[0, 0].set(flag_sign * abs(float(xs[0, 0])))
        got, want, _, _ = _learn(model, xs1, "ES_D_RTRL", 0.9)
        for path in (("A",), ("B",)):
            assert relative_error(got[path], want[path]) <= EXACT_RTOL, (flag_sign, path)


class LoopCond(brainstate.nn.Module):
    """``kind='scan'``: an ETP op in a cond inside a ``fori_loop`` with a dynamic trip count
    (not unrolled); ``'while'``: an ETP op beside a ``while`` loop in a top-level cond's branch
    (not converted)."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.W = brainstate.ParamState(jnp.full((N_IN, N), 0.1))
        self.U = brainstate.ParamState(jnp.full((N_IN, N), 0.2))

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.zeros(N))

    def update(self, x):
        u = self.U.value
        if self.kind == "scan":

            def body(i, c):
                return c + jax.lax.cond(i > 0, lambda: etp_viz.matmul(x, u), lambda: c)

            extra = jax.lax.fori_loop(0, 2 + (x[0] > 0).astype(int), body, jnp.zeros(N))
        else:

            def branch():
                v = jax.lax.while_loop(lambda v: v[0] < 3.0, lambda v: v + 1.0, jnp.zeros(N))
                return etp_viz.matmul(x, u) + v

            extra = jax.lax.cond(x[0] > 0, branch, lambda: jnp.zeros(N))
        self.h.value = 0.5 * self.h.value + etp_viz.matmul(x, self.W.value) + extra
        return self.h.value


@pytest.mark.parametrize("kind", ["scan", "while"])
def test_a_cond_in_a_loop_or_with_a_while_is_still_reported(kind):
    model = LoopCond(kind)
    brainstate.nn.init_all_states(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        graph = etp_viz.compile_etrace_graph(model, jnp.ones(N_IN))
    found = [r for r in graph.diagnostics if r.kind == DiagnosticKind.PRIMITIVE_INSIDE_CONTROL_FLOW]
    assert found and all(r.weight_path == ("U",) for r in found)
    if kind == "while":
        assert "not if-converted: a branch contains a while loop" in found[0].message
    claims = graph.gradient_claims("d_rtrl")
    assert claims["U"].kind == "none" and claims["W"].kind == "exact"
