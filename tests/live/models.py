"""Small models and a stand-in algorithm for the session tests.

``OneStepLearner`` is an honest, minimal learner with the etp_viz algorithm API: under
``brainstate.transform.grad`` the previous hidden state is a constant, so its gradient is the
one-step truncated gradient. It holds one trace-like state (a running sum of inputs) so the
probe's trace recording has something real to measure. The session tests use it to exercise
stepping, recording and failure handling independently of ``etp_viz.learn``.
"""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp
import numpy as np

from etp_viz.learn.contract import LearnerState


class TinyRNN(brainstate.nn.Module):
    """h_t = tanh([x_t, h_{t-1}] W); y_t = h_t V."""

    def __init__(self, n_in: int = 2, n_hidden: int = 4, n_out: int = 1, seed: int = 0):
        super().__init__()
        k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
        self.W = brainstate.ParamState(
            {"weight": jax.random.normal(k1, (n_in + n_hidden, n_hidden)) * 0.4}
        )
        self.V = brainstate.ParamState({"weight": jax.random.normal(k2, (n_hidden, n_out)) * 0.4})
        self.n_hidden = n_hidden

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.zeros((self.n_hidden,)))

    def update(self, x):
        xh = jnp.concatenate([x, self.h.value], axis=-1)
        self.h.value = jnp.tanh(xh @ self.W.value["weight"])
        return self.h.value @ self.V.value["weight"]


class OneStepLearner(brainstate.nn.Module):
    """Minimal stand-in for a user's own learner: forward = the model; one state of its own
    (a decaying sum of inputs); the members of the learner contract
    (:class:`etp_viz.learn.contract.OnlineLearner`), no claims it can vouch for."""

    claim_family = "custom"  # not a registered family: its claims are its own

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.graph = None
        self.mesh = None

    def compile_graph(self, x):
        zeros = jnp.zeros_like(jnp.asarray(x, jnp.float32))
        self.input_trace = LearnerState(zeros)

    @property
    def param_states(self):
        return self.model.states(brainstate.ParamState)

    def update(self, x):
        self.input_trace.value = 0.9 * self.input_trace.value + x
        return self.model(x)

    def reset_traces(self):
        self.input_trace.value = jnp.zeros_like(self.input_trace.value)

    def reset_state(self, batch_size=None, **kwargs):
        brainstate.nn.reset_all_states(self.model, batch_size, **kwargs)
        self.reset_traces()

    def gradient_claims(self):
        from etp_viz.compiler.claims import GradientClaim, GradientClaims

        claims = GradientClaims()
        for path in self.param_states:
            name = ".".join(map(str, path))
            claims[name] = GradientClaim(
                name, "approximate", "a user's learner: nothing is claimed", algorithm="custom"
            )
        return claims


def sine_data(t):
    """x_t = (sin t/5, cos t/5), y_t = sin((t+1)/5)."""
    x = np.array([np.sin(t / 5), np.cos(t / 5)], np.float32)
    return x, np.array([np.sin((t + 1) / 5)], np.float32)


class EtpSineRNN(brainstate.nn.Module):
    """A small real ETP model for the session tests: ValinaRNNCell(2, n) + Linear(n, 1)."""

    def __init__(self, num_hidden: int = 4):
        from etp_viz import nn

        super().__init__()
        self.rnn = nn.ValinaRNNCell(2, num_hidden)
        self.out = nn.Linear(num_hidden, 1)

    def update(self, x):
        return self.out(self.rnn(x))


def etp_sine(num_hidden: int = 4):
    """``(model, example input, data function)``: EtpSineRNN (states initialised) on sine_data."""
    model = EtpSineRNN(num_hidden)
    brainstate.nn.init_all_states(model)
    return model, jnp.zeros(2, jnp.float32), sine_data
