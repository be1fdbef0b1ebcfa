"""The models and harnesses of ``vs_braintrace.py``, written once for both libraries.

Everything here goes through the API etp_viz and braintrace 0.2.8 share: ``lib.nn.<Cell>(in,
n)``, ``lib.nn.Linear``, ``lib.matmul``, ``lib.D_RTRL(model)`` / ``lib.ES_D_RTRL(model, decay)``,
``alg.compile_graph(x)``, ``alg(x)``, ``alg.param_states``, ``alg.reset_state()``, on brainstate
modules and transforms. ``lib`` is whichever library module the caller imported.
"""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp

BATCH, NUM_IN, NUM_OUT = 16, 32, 8
LEARNING_RATE = 1e-3
CELLS = ("rnn", "gru", "lstm", "mgu", "minigru", "lif")
#: ``id(model) -> algorithm`` of the last online harness built on that model
ALGORITHMS_OF: dict[int, object] = {}


@jax.custom_jvp
def spike(v):
    """Heaviside spike with a sigmoid surrogate derivative (plain JAX, same in both)."""
    return (v > 0).astype(v.dtype)


@spike.defjvp
def _spike_jvp(primals, tangents):
    (v,), (dv,) = primals, tangents
    sig = jax.nn.sigmoid(4.0 * v)
    return spike(v), 4.0 * sig * (1.0 - sig) * dv


class RecurrentLIF(brainstate.nn.Module):
    """LIF layer, soft reset, input + recurrent spikes through one ``lib.matmul`` weight."""

    def __init__(self, lib, num_in: int, n: int, tau: float = 10.0):
        super().__init__()
        self.lib, self.n, self.alpha = lib, n, float(jnp.exp(-1.0 / tau))
        scale = 1.0 / jnp.sqrt(num_in + n)
        self.W = brainstate.ParamState(brainstate.random.normal(size=(num_in + n, n)) * scale)

    def init_state(self, batch_size=None, **kwargs):
        self.V = brainstate.HiddenState(jnp.zeros((batch_size, self.n)))

    def reset_state(self, batch_size=None, **kwargs):
        self.V.value = jnp.zeros_like(self.V.value)

    def update(self, x):
        v_prev = self.V.value
        z_prev = spike(v_prev - 1.0)
        current = self.lib.matmul(jnp.concatenate([x, z_prev], -1), self.W.value)
        self.V.value = self.alpha * (v_prev - z_prev) + (1.0 - self.alpha) * current
        return spike(self.V.value - 1.0)


class Net(brainstate.nn.Module):
    """``cell(32, n) -> Linear(n, 8)``."""

    def __init__(self, lib, cell: str, n: int):
        super().__init__()
        if cell == "lif":
            self.cell = RecurrentLIF(lib, NUM_IN, n)
        elif cell == "rnn":
            self.cell = lib.nn.ValinaRNNCell(NUM_IN, n, activation="tanh")
        else:
            name = {"gru": "GRUCell", "lstm": "LSTMCell", "mgu": "MGUCell", "minigru": "MiniGRU"}
            self.cell = getattr(lib.nn, name[cell])(NUM_IN, n)
        self.out = lib.nn.Linear(n, NUM_OUT)

    def update(self, x):
        return self.out(self.cell(x))


def make_model(lib, cell: str, n: int) -> Net:
    brainstate.random.seed(0)
    model = Net(lib, cell, n)
    brainstate.nn.init_all_states(model, batch_size=BATCH)
    return model


def make_data(length: int):
    xs = jax.random.normal(jax.random.PRNGKey(0), (length, BATCH, NUM_IN))
    targets = jax.random.normal(jax.random.PRNGKey(1), (length, BATCH, NUM_OUT))
    return xs, targets


def make_algorithm(lib, model, algorithm: str, x0):
    alg = lib.D_RTRL(model) if algorithm == "d_rtrl" else lib.ES_D_RTRL(model, 0.9)
    alg.compile_graph(x0)
    return alg


def _step_loss(y, target):
    return jnp.sum((y - target) ** 2)


def online_harness(lib, model, algorithm: str, harness: str, x0):
    """A ``brainstate.transform.jit`` function ``(xs, targets) -> result`` of T online steps.

    ``online``: per-step gradient, then SGD on every weight (returns the losses); ``stacked``:
    ``for_loop`` returns every step's gradient, summed afterwards; ``summed``: a scan carries the
    running sum.
    """
    alg = make_algorithm(lib, model, algorithm, x0)
    ALGORITHMS_OF[id(model)] = alg  # for the trace floor of vs_braintrace.py
    params = alg.param_states
    grad_t = brainstate.transform.grad(
        lambda x, target: _step_loss(alg(x), target), params, return_value=True
    )
    zeros = {p: jax.tree.map(jnp.zeros_like, s.value) for p, s in params.items()}

    def online_body(x, target):
        grads, loss = grad_t(x, target)
        for path, g in dict(grads).items():
            params[path].value = jax.tree.map(
                lambda w, d: w - LEARNING_RATE * d, params[path].value, g
            )
        return loss

    def summed_body(total, inputs):
        grads, _ = grad_t(*inputs)
        return jax.tree.map(jnp.add, total, dict(grads)), None

    @brainstate.transform.jit
    def run(xs, targets):
        alg.reset_state()
        if harness == "online":
            return brainstate.transform.for_loop(online_body, xs, targets)
        if harness == "stacked":
            grads = brainstate.transform.for_loop(lambda x, t: dict(grad_t(x, t)[0]), xs, targets)
            return jax.tree.map(lambda g: jnp.sum(g, 0), grads)
        return brainstate.transform.scan(summed_body, zeros, (xs, targets))[0]

    return run


def bptt_harness(lib, model):
    """``jit((xs, targets) -> grads)``: ``grad`` of the T-step loss through ``for_loop``."""
    params = model.states(brainstate.ParamState)

    def loss(xs, targets):
        ys = brainstate.transform.for_loop(model, xs)
        return _step_loss(ys, targets)

    grad = brainstate.transform.grad(loss, params)

    @brainstate.transform.jit
    def run(xs, targets):
        brainstate.nn.reset_all_states(model, batch_size=BATCH)
        return grad(xs, targets)

    return run
