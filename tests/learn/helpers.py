"""Drivers shared by the learn tests: online gradients summed over a sequence."""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp


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
