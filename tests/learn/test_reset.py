"""``reset_state`` of a model that builds new State objects on reset (``self.h =
HiddenState(...)``): the learners compile again, so they step the model's *current* states."""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
from tests.learn.archs import Arch, Layer, build, inputs

LEARNERS = [etp_viz.D_RTRL, lambda m: etp_viz.ES_D_RTRL(m, 0.9), etp_viz.RTRL]


def step_grads(alg, xs):
    out = []
    for x in xs:
        grad = brainstate.transform.grad(lambda x=x: jnp.sum(alg(x) ** 2), alg.param_states)
        out.append(jax.tree.map(np.asarray, grad()))
    return out


@pytest.mark.parametrize("make", LEARNERS, ids=["d_rtrl", "es_d_rtrl", "rtrl"])
def test_reset_that_builds_new_states_steps_the_new_states(make):
    arch = Arch(layers=(Layer(rec="dense"),))
    xs = inputs(arch, 4)
    model = build(arch)
    alg = make(model)
    alg.compile_graph(xs[0])
    first = step_grads(alg, xs)
    old = [id(s) for s in model.states(brainstate.HiddenState).values()]
    alg.reset_state()
    assert old != [id(s) for s in model.states(brainstate.HiddenState).values()]
    again = step_grads(alg, xs)
    # the same sequence from the same reset values: the same gradients, and the model's own
    # (new) hidden states are the ones that moved
    for a, b in zip(first, again):
        jax.tree.map(lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-6, atol=1e-9), a, b)
    h = next(iter(model.states(brainstate.HiddenState).values())).value
    assert not np.allclose(np.asarray(h), 0.1)
