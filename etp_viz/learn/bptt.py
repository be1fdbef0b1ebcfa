r"""Reference gradients by backpropagation through time (BPTT).

The explorer's fidelity meter and the benchmarks compare the online learners with this: the
model step is traced once as a pure function of its state values (brainstate
``StatefulFunction``), scanned over the sequence with :func:`jax.lax.scan`, and differentiated
with :func:`jax.grad`:

.. math::

    \nabla_\theta \mathcal{L} = \frac{\partial}{\partial\theta}
    \mathcal{L}\big(y^1(\theta), \dots, y^T(\theta)\big),
    \qquad (h^t, y^t) = f_\theta(h^{t-1}, x^t).

The model's states are read (initial values) but never written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import brainstate
import jax

from etp_viz import _compat

__all__ = ["bptt_gradients", "make_bptt_gradient_fn"]


def make_bptt_gradient_fn(
    model: Any, x0: Any, loss_fn: Callable[[Any], Any]
) -> Callable[[dict, dict, Any], dict]:
    """``grad_fn(params, others, xs) -> {path: grad}`` (pure, jittable).

    ``params`` / ``others`` are ``{path: value}`` of the ``ParamState``\\ s and the other
    states (see :func:`state_values`); ``xs`` has the time axis first; ``loss_fn`` maps the
    stacked outputs to a scalar.

    Examples
    --------
    >>> grad_fn = jax.jit(make_bptt_gradient_fn(model, xs[0], loss))   # doctest: +SKIP
    >>> grads = grad_fn(*state_values(model, xs[0]), xs)                # doctest: +SKIP
    """
    function = _compat.get_stateful_function_class()(model, return_only_write=False)
    function.make_jaxpr(x0)
    states = tuple(function.get_states(x0))
    paths = _paths(model, states)

    def loss_of(params: dict, others: dict, xs: Any) -> Any:
        values = {**others, **params}

        def step(flat, x):
            new_flat, y = _compat.stateful_function_call(function, flat, x)
            return new_flat, y

        _, ys = jax.lax.scan(step, [values[p] for p in paths], xs)
        return loss_fn(ys)

    return jax.grad(loss_of)


def state_values(model: Any, x0: Any) -> tuple[dict, dict]:
    """``(params, others)``: current values of the states one step reads, by path."""
    function = _compat.get_stateful_function_class()(model, return_only_write=False)
    function.make_jaxpr(x0)
    states = tuple(function.get_states(x0))
    params: dict[Any, Any] = {}
    others: dict[Any, Any] = {}
    for path, state in zip(_paths(model, states), states):
        target = params if isinstance(state, brainstate.ParamState) else others
        target[path] = state.value
    return params, others


def bptt_gradients(model: Any, xs: Any, loss_fn: Callable[[Any], Any]) -> dict:
    """BPTT gradients of ``loss_fn(stacked outputs)`` from the model's current states.

    Examples
    --------
    >>> grads = bptt_gradients(model, xs, lambda ys: jnp.sum(ys ** 2))   # doctest: +SKIP
    """
    params, others = state_values(model, xs[0])
    return jax.jit(make_bptt_gradient_fn(model, xs[0], loss_fn))(params, others, xs)


def _paths(model: Any, states: tuple) -> list:
    path_of = {id(st): tuple(p) for p, st in brainstate.graph.states(model).items()}
    return [path_of.get(id(st), ("<external>", str(i))) for i, st in enumerate(states)]
