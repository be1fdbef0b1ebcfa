"""ES-D-RTRL against a hand-written reference with *unequal* decays (issue 23, item 10 c).

The reference is written out from the update equations of Wang et al. (``pp_prop``'s
docstring) for a leaky tanh cell, with ``D`` and ``D_f`` by hand: no etp_viz code computes
it. Equal decays cannot tell ``alpha_x`` from ``alpha_f``; (0.5, 0.9) and (0.9, 0.5) can.
"""

from __future__ import annotations

import brainstate
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
from tests.learn.helpers import online_gradients

N_IN, N, N_OUT, T = 3, 4, 2, 7


class Leaky(brainstate.nn.Module):
    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(5)
        self.W = brainstate.ParamState(jnp.asarray(0.7 * rng.standard_normal((N_IN, N))))
        self.Wo = brainstate.ParamState(jnp.asarray(rng.standard_normal((N, N_OUT))))
        self.a = jnp.asarray(rng.uniform(0.3, 0.9, N))

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.full((N,), 0.2))

    def update(self, x):
        self.h.value = self.a * self.h.value + jnp.tanh(etp_viz.matmul(x, self.W.value))
        return etp_viz.matmul(self.h.value, self.Wo.value)


def reference(model, xs, alpha_x, alpha_f):
    W, Wo, a = (np.asarray(v, np.float64) for v in (model.W.value, model.Wo.value, model.a))
    h = np.full(N, 0.2)
    eps_x, eps_f, grad = np.zeros(N_IN), np.zeros(N), np.zeros_like(W)
    for t, x in enumerate(np.asarray(xs, np.float64)):
        pre = np.tanh(x @ W)
        h = a * h + pre
        eps_x = alpha_x * eps_x + x
        eps_f = alpha_f * a * eps_f + (1 - alpha_f) * (1 - pre**2)
        dl_dh = 2 * (h @ Wo) @ Wo.T
        grad += np.outer(eps_x, eps_f / (1 - alpha_f ** (t + 1)) * dl_dh)
    return grad


@pytest.mark.parametrize("decays", [(0.5, 0.9), (0.9, 0.5)])
def test_es_d_rtrl_follows_the_reference_with_unequal_decays(x64, decays):
    model = Leaky()
    brainstate.nn.init_all_states(model)
    xs = jnp.asarray(np.random.default_rng(6).standard_normal((T, N_IN)))
    want = reference(model, xs, *decays)
    alg = etp_viz.ES_D_RTRL(model, decays)
    alg.compile_graph(xs[0])
    got = np.asarray(online_gradients(alg, xs, jit=False)[("W",)])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    swapped = reference(model, xs, *decays[::-1])
    assert np.linalg.norm(swapped - want) > 1e-2 * np.linalg.norm(want)  # the case can tell
