"""Small hand-written models for the influence learners' tests (issue 23): stacks in both
wirings, an embedding read with ids that change per step, a sparse ring, and cells whose
solver sub-steps run in a loop (``fori_loop``, ``while_loop`` with a fixed trip count,
``jax.checkpoint``). Each takes a ``seed``; ``example(name)`` gives its inputs over time."""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
from saiunit import sparse as ss

import etp_viz

N = 3


def _param(rng: np.random.Generator, *shape: int, scale: float = 0.6) -> brainstate.ParamState:
    return brainstate.ParamState(jnp.asarray(scale * rng.standard_normal(shape)))


class Stack(brainstate.nn.Module):
    """Two tanh RNN layers; layer 2 reads layer 1's ``new`` state (the usual wiring) or its
    ``old`` one (the value from before this step's update)."""

    def __init__(self, reads: str = "new", seed: int = 0):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.U1, self.W1 = _param(rng, 2, N), _param(rng, N, N)
        self.U2, self.W2 = _param(rng, N, N), _param(rng, N, N)
        self.V = _param(rng, N, 2)
        self.reads = reads

    def init_state(self, *args, **kwargs):
        self.h1 = brainstate.HiddenState(jnp.full(N, 0.1))
        self.h2 = brainstate.HiddenState(jnp.full(N, 0.1))

    def update(self, x):
        old = self.h1.value
        self.h1.value = jnp.tanh(x @ self.U1.value + old @ self.W1.value)
        below = self.h1.value if self.reads == "new" else old
        self.h2.value = jnp.tanh(below @ self.U2.value + self.h2.value @ self.W2.value)
        return self.h2.value @ self.V.value


class EmbeddingRNN(brainstate.nn.Module):
    """``h = tanh(E[id] + h W)``: the table row read changes with the step's token id."""

    def __init__(self, vocab: int = 6, seed: int = 0):
        super().__init__()
        rng = np.random.default_rng(seed)
        table = jnp.asarray(0.6 * rng.standard_normal((vocab, N)))
        self.emb = etp_viz.nn.Embedding(vocab, N, embedding_init=table)
        self.W, self.V = _param(rng, N, N, scale=0.5), _param(rng, N, 2, scale=0.5)

    def init_state(self, *args, **kwargs):
        self.h = brainstate.HiddenState(jnp.full(N, 0.1))

    def update(self, ids):
        self.h.value = jnp.tanh(self.emb(ids) + self.h.value @ self.W.value)
        return self.h.value @ self.V.value


class SparseRing(brainstate.nn.Module):
    """A recurrent ``SparseLinear`` ring: unit ``i`` reads unit ``i - 1`` only, so a weight
    reaches one more unit per step (the pattern closes after ``size`` steps)."""

    def __init__(self, size: int = 5, seed: int = 0):
        super().__init__()
        rng = np.random.default_rng(seed)
        ring = np.zeros((size, size))
        ring[np.arange(size), (np.arange(size) + 1) % size] = rng.standard_normal(size)
        self.rec = etp_viz.nn.SparseLinear(ss.CSR.fromdense(jnp.asarray(ring)))
        self.U, self.V = _param(rng, 2, size, scale=0.5), _param(rng, size, 2, scale=0.5)
        self.size = size

    def init_state(self, *args, **kwargs):
        self.h = brainstate.HiddenState(jnp.full(self.size, 0.1))

    def update(self, x):
        self.h.value = jnp.tanh(x @ self.U.value + self.rec(self.h.value))
        return self.h.value @ self.V.value


class SolverCell(brainstate.nn.Module):
    """An ODE-style cell: four Euler sub-steps of ``h' = -h + tanh(x U + h W)`` in a
    ``fori`` loop, a ``while`` loop with a fixed trip count, or two under ``remat``
    (``jax.checkpoint``); the state is written once, at the top level."""

    def __init__(self, loop: str = "fori", seed: int = 0):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.U, self.W, self.V = (_param(rng, *s, scale=0.5) for s in ((2, N), (N, N), (N, 2)))
        self.loop = loop

    def init_state(self, *args, **kwargs):
        self.h = brainstate.HiddenState(jnp.full(N, 0.1))

    def update(self, x):
        drive, w = x @ self.U.value, self.W.value

        def euler(h):
            return h + 0.25 * (-h + jnp.tanh(drive + h @ w))

        h = self.h.value
        if self.loop == "fori":
            h = jax.lax.fori_loop(0, 4, lambda i, h: euler(h), h)
        elif self.loop == "while":
            h = jax.lax.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, euler(c[1])), (0, h))
            h = h[1]
        else:
            h = jax.checkpoint(lambda h: euler(euler(h)))(h)
        self.h.value = h
        return h @ self.V.value


MODELS = {
    "stack_new": lambda seed: Stack("new", seed),
    "stack_old": lambda seed: Stack("old", seed),
    "embedding": lambda seed: EmbeddingRNN(seed=seed),
    "sparse_ring": lambda seed: SparseRing(seed=seed),
    "fori": lambda seed: SolverCell("fori", seed),
    "while": lambda seed: SolverCell("while", seed),
    "remat": lambda seed: SolverCell("remat", seed),
}


def build(name: str, seed: int = 0) -> brainstate.nn.Module:
    model = MODELS[name](seed)
    brainstate.nn.init_all_states(model)
    return model


def example(name: str, steps: int, seed: int = 0):
    """``(x0 to compile with, inputs over time)``: the embedding compiles with id 0 and
    then reads other ids."""
    rng = np.random.default_rng(100 + seed)
    if name == "embedding":
        return jnp.asarray(0), jnp.asarray(rng.integers(1, 6, (steps,)))
    xs = jnp.asarray(rng.standard_normal((steps, 2)))
    return xs[0], xs
