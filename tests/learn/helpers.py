"""Drivers shared by the learn tests: online gradients summed over a sequence."""

from __future__ import annotations

import functools

import brainstate
import jax
import jax.numpy as jnp
import numpy as np


def step_loss(y):
    return jnp.sum(y**2)


def sequence_loss(ys):
    return jnp.sum(ys**2)


def online_gradients(alg, xs, loss=step_loss, jit=True, checkpoints=None):
    """Sum over t of ``grad(loss(alg(x_t)))`` (one compiled step function, states carried).

    With ``checkpoints``, returns ``{t: running sum after t steps}`` instead.
    """
    grad_step = brainstate.transform.grad(lambda x: loss(alg(x)), alg.param_states)
    if jit:
        grad_step = brainstate.transform.jit(grad_step)
    total, sums = None, {}
    for t in range(len(xs)):
        grads = dict(grad_step(xs[t]))
        total = grads if total is None else jax.tree.map(jnp.add, total, grads)
        sums[t + 1] = total
    return total if checkpoints is None else {t: sums[t] for t in checkpoints}


def multi_step_gradients(alg, xs, loss=sequence_loss):
    """One gradient of the whole-window loss through ``alg(MultiStepData(xs))``."""
    from etp_viz import MultiStepData

    grads = brainstate.transform.grad(lambda: loss(alg(MultiStepData(xs))), alg.param_states)()
    return dict(grads)


def _fresh(value):
    """New dicts, lists and tuples (in their order) and numpy arrays; jax arrays as they are."""
    if isinstance(value, dict):
        return type(value)((k, _fresh(v)) for k, v in value.items())
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
        return type(value)(*map(_fresh, value))
    if isinstance(value, list | tuple):
        return type(value)(map(_fresh, value))
    return value.copy() if isinstance(value, np.ndarray) else value


def shared(fn):
    """Compute ``fn(*args)`` once per arguments for every test of a module that asks for it.

    For an oracle (BPTT, a reference learner's gradients) that several parametrized tests
    compute from the same model and inputs: ``fn`` must build the model and inputs itself
    from its (hashable) arguments, so the cached value is what each test would compute. Keyed
    also by jax's x64 flag and brainstate's precision (a float32 test never reads a float64
    result). Each call returns fresh containers (dicts, lists, tuples; numpy arrays copied)
    around the immutable jax arrays: a test that edits its copy cannot change another's.
    Module-level caches suit ``--dist loadscope`` (one module per worker).
    """

    @functools.cache
    def cached(precision, *args, **kwargs):
        return fn(*args, **kwargs)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        precision = (bool(jax.config.read("jax_enable_x64")), brainstate.environ.get_precision())
        value = cached(precision, *args, **kwargs)
        return _fresh(value)

    call.cache_clear = cached.cache_clear
    return call
