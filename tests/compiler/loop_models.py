"""Models whose hidden state is updated in a loop of sub-steps inside one model step, and their
twins written out by hand (tests/compiler/test_inner_loops.py, tests/learn/test_inner_loops.py).

:class:`LTCCell`: a liquid time-constant style cell, ``SUBSTEPS`` Euler sub-steps per step,
``v <- v + dt/tau * (-v + tanh(x W_in + v W_rec))`` (``recurrence='dense'``, both products ETP
ops inside the loop) or ``v <- v + dt/tau * (-v + tanh(drive + a * v))`` with
``drive = x W_in`` computed once before the loop (``recurrence='diagonal'``: D-RTRL exact).
"""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp
import numpy as np

import etp_viz

N_IN, N, SUBSTEPS, DT = 3, 4, 6, 0.25
#: how the sub-steps are written
LOOPS = ("twin", "fori", "fori_array_bounds", "for_loop", "scan", "while_literal")
#: ``while_loop`` shapes other than ``fori_loop``'s, each with SUBSTEPS iterations: counting
#: down, in steps of two, up to ``<=``, and two counters under one condition
WHILE_SHAPES = ("while_down", "while_step2", "while_le", "while_two_counters")


class LTCCell(brainstate.nn.Module):
    """``loop``: ``'twin'`` (a Python loop: no loop in the jaxpr), ``'fori'``
    (``jax.lax.fori_loop(0, SUBSTEPS, ...)``: a scan), ``'fori_array_bounds'`` (the same with
    array bounds: a while with constant bounds), ``'for_loop'``
    (``brainstate.transform.for_loop`` writing the state inside the body), ``'scan'``
    (``jax.lax.scan`` over a per-sub-step gain, stacking an output), ``'while_literal'``
    (``while_loop(lambda c: c[0] < SUBSTEPS, ...)``), the :data:`WHILE_SHAPES`, ``'dynamic'``
    (a ``fori_loop`` whose trip count depends on the input: refused), ``'until_small'`` (a
    ``while`` that also stops when the state is small: refused), ``'long'`` (``MAX + 1``
    sub-steps: refused)."""

    def __init__(self, loop="fori", recurrence="dense", steps=SUBSTEPS, seed=0):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.W_in = brainstate.ParamState(jnp.asarray(0.8 * rng.standard_normal((N_IN, N))))
        w_rec = jnp.asarray(0.5 * rng.standard_normal((N, N)))
        if recurrence == "dense":
            self.W_rec = brainstate.ParamState(w_rec)
        self.tau = brainstate.ParamState(jnp.asarray(rng.uniform(0.8, 1.6, N)))
        self.a = jnp.asarray(rng.uniform(-0.5, 0.5, N))
        #: per-sub-step gains scanned over by ``loop='scan'`` (all ones: the same dynamics)
        self.gains = jnp.ones(steps)
        self.loop, self.recurrence, self.steps = loop, recurrence, steps

    def init_state(self, batch_size=None, **kwargs):
        self.v = brainstate.HiddenState(jnp.full((N,), 0.1))

    def _substep(self, x, drive, v, gain=1.0):
        if self.recurrence == "dense":
            pre = etp_viz.matmul(x, self.W_in.value) + etp_viz.matmul(v, self.W_rec.value)
        else:
            pre = drive + self.a * v
        rate = DT / etp_viz.element_wise(self.tau.value)
        return v + gain * rate * (-v + jnp.tanh(pre))

    def update(self, x):
        drive = etp_viz.matmul(x, self.W_in.value) if self.recurrence == "diagonal" else None
        v, loop, steps = self.v.value, self.loop, self.steps
        if loop == "twin":
            for _ in range(steps):
                v = self._substep(x, drive, v)
        elif loop in ("fori", "long"):
            v = jax.lax.fori_loop(0, steps, lambda i, v: self._substep(x, drive, v), v)
        elif loop == "fori_array_bounds":
            bounds = jnp.asarray(0), jnp.asarray(steps)
            v = jax.lax.fori_loop(*bounds, lambda i, v: self._substep(x, drive, v), v)
        elif loop == "dynamic":
            upper = steps + (x[0] > 0).astype(jnp.int32)
            v = jax.lax.fori_loop(0, upper, lambda i, v: self._substep(x, drive, v), v)
        elif loop == "while_literal":
            v = jax.lax.while_loop(
                lambda c: c[0] < steps, lambda c: (c[0] + 1, self._substep(x, drive, c[1])), (0, v)
            )[1]
        elif loop in WHILE_SHAPES or loop == "until_small":
            v = _while_shape(loop, steps, lambda v: self._substep(x, drive, v), v)
        elif loop == "scan":

            def body(v, gain):
                new = self._substep(x, drive, v, gain)
                return new, jnp.sum(new)

            v, _ = jax.lax.scan(body, v, self.gains)  # the stacked sums are not used
        elif loop == "for_loop":

            def sub(i):
                self.v.value = self._substep(x, drive, self.v.value)

            brainstate.transform.for_loop(sub, jnp.arange(steps))
            return self.v.value
        self.v.value = v
        return v


def _while_shape(loop, steps, substep, v):
    """``steps`` sub-steps of ``v`` by a ``while_loop`` of the shape ``loop`` names."""
    if loop == "while_down":
        return jax.lax.while_loop(
            lambda c: c[0] > 0, lambda c: (c[0] - 1, substep(c[1])), (steps, v)
        )[1]
    if loop == "while_step2":
        return jax.lax.while_loop(
            lambda c: c[0] < 2 * steps, lambda c: (c[0] + 2, substep(c[1])), (0, v)
        )[1]
    if loop == "while_le":
        return jax.lax.while_loop(
            lambda c: c[0] <= steps, lambda c: (c[0] + 1, substep(c[1])), (1, v)
        )[1]
    if loop == "while_two_counters":  # the second counter never stops it first
        return jax.lax.while_loop(
            lambda c: (c[0] < steps) & (c[1] < 10 * steps),
            lambda c: (c[0] + 1, c[1] + 3, substep(c[2])),
            (0, 0, v),
        )[2]
    return jax.lax.while_loop(  # until_small: the state decides when it stops
        lambda c: (c[0] < steps) & (jnp.max(jnp.abs(c[1])) > 1e-3),
        lambda c: (c[0] + 1, substep(c[1])),
        (0, v),
    )[1]


class PreprocessCell(brainstate.nn.Module):
    """A loop that touches no state and no ETP op (a running sum over the input): left as is."""

    def __init__(self):
        super().__init__()
        self.W = brainstate.ParamState(jnp.full((N_IN, N), 0.3))

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.zeros(N))

    def update(self, x):
        smooth = jax.lax.fori_loop(0, 3, lambda i, c: 0.5 * c + x, jnp.zeros_like(x))
        self.h.value = 0.5 * self.h.value + jnp.tanh(etp_viz.matmul(smooth, self.W.value))
        return self.h.value


def build(loop="fori", **kwargs):
    model = LTCCell(loop, **kwargs)
    brainstate.nn.init_all_states(model)
    return model


def inputs(length=5, seed=4):
    return jnp.asarray(np.random.default_rng(seed).standard_normal((length, N_IN)))
