"""Gradient oracles shared by the whole suite: BPTT, exact RTRL, finite differences.

A gradient test compares the code under test with one of these, never with a stored number.
Every oracle treats the model as a pure function of its state values, traced once with
brainstate's ``StatefulFunction``, so the oracles share no code with ``etp_viz.learn``.

Conventions
-----------
* ``xs`` is a time-major array ``(T, *input_shape)``; the model is called once per step.
* ``loss_fn(ys)`` maps the stacked outputs ``(T, *output_shape)`` to a scalar. Online learners
  are compared on a loss that is a sum over steps, ``loss_fn(ys) = sum_t l(ys[t])``.
* Gradients are ``{param_path: value}`` dicts keyed like ``model.states(brainstate.ParamState)``.
* The model's state values are left untouched by every oracle.

Example
-------
>>> grads = bptt_gradients(model, xs, lambda ys: jnp.sum(ys**2))        # doctest: +SKIP
>>> assert_tree_allclose(online_grads, grads)                            # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import brainstate
import jax
import jax.numpy as jnp
import numpy as np

from etp_viz import _compat

#: Relative tolerance per dtype, used where a test does not pass its own. float64 is where
#: exactness is claimed (issue 4: relative error <= 1e-10).
DEFAULT_RTOL = {np.dtype("float64"): 1e-10, np.dtype("float32"): 1e-4, np.dtype("float16"): 1e-2}


class PureModel:
    """A brainstate model as the pure function ``(state values, x) -> (new values, y)``.

    Traced once (on ``x0``); ``step`` replays the traced jaxpr, so the model's states are never
    written and raw ``jax.grad`` / ``jax.jacfwd`` apply.
    """

    def __init__(self, model: brainstate.nn.Module, x0: Any):
        self.model = model
        self.function = _compat.get_stateful_function_class()(model, return_only_write=False)
        self.function.make_jaxpr(x0)
        self.states = tuple(self.function.get_states(x0))
        path_of = {id(state): path for path, state in brainstate.graph.states(model).items()}
        self.paths = tuple(
            path_of.get(id(state), (f"<state {i}>",)) for i, state in enumerate(self.states)
        )
        self.param_paths = tuple(
            path
            for path, state in zip(self.paths, self.states)
            if isinstance(state, brainstate.ParamState)
        )

    def values(self) -> dict:
        """Current state values, keyed by path."""
        return {path: state.value for path, state in zip(self.paths, self.states)}

    def step(self, values: dict, x: Any) -> tuple[dict, Any]:
        """One model call on explicit state values; returns ``(new_values, y)``."""
        flat = [values[path] for path in self.paths]
        new_flat, y = _compat.stateful_function_call(self.function, flat, x)
        return dict(zip(self.paths, new_flat)), y

    def run(self, values: dict, xs: Any, unroll: bool = False) -> tuple[dict, Any]:
        """Loop over the leading axis of ``xs``; outputs stacked on axis 0.

        ``jax.lax.scan`` by default (one compiled step, cheap on CI); ``unroll=True`` is the
        literal Python loop.
        """
        if not unroll:
            return jax.lax.scan(lambda v, x: self.step(v, x), values, xs)
        ys = []
        for t in range(len(xs)):
            values, y = self.step(values, xs[t])
            ys.append(y)
        return values, jax.tree.map(lambda *leaves: jnp.stack(leaves), *ys)


def _split(pure: PureModel, params: Sequence | None) -> tuple[dict, dict]:
    values = pure.values()
    wanted = tuple(params) if params is not None else pure.param_paths
    trainable = {path: values[path] for path in wanted}
    return trainable, values


def bptt_gradients(
    model: brainstate.nn.Module,
    xs: Any,
    loss_fn: Callable[[Any], Any],
    params: Sequence | None = None,
) -> dict:
    """Backpropagation through time: ``jax.grad`` of ``loss_fn`` through the loop over steps
    (``jax.lax.scan`` of the traced step; jitted).

    Starts from the model's current state values and leaves them unchanged.
    """
    pure = PureModel(model, xs[0])
    trainable, values = _split(pure, params)

    def loss_of(trainable):
        _, ys = pure.run({**values, **trainable}, xs)
        return loss_fn(ys)

    return jax.jit(jax.grad(loss_of))(trainable)


def rtrl_gradients(
    model: brainstate.nn.Module,
    xs: Any,
    loss_fn: Callable[[Any], Any],
    params: Sequence | None = None,
) -> dict:
    """Exact real-time recurrent learning: forward-mode ``jax.jacfwd`` of every output with
    respect to every parameter (the full sensitivity ``dy^t/dtheta`` carried forward in time),
    contracted with ``dL/dy^t``. Independent of BPTT's reverse sweep; tiny models only.
    """
    pure = PureModel(model, xs[0])
    trainable, values = _split(pure, params)

    def outputs_of(trainable):
        return pure.run({**values, **trainable}, xs)[1]

    ys = outputs_of(trainable)
    dl_dys = jax.grad(loss_fn)(ys)
    jacobian = jax.jacfwd(outputs_of)(trainable)
    return {
        path: jax.tree.map(lambda jac: jnp.tensordot(dl_dys, jac, axes=dl_dys.ndim), jac_tree)
        for path, jac_tree in jacobian.items()
    }


def finite_difference_gradients(
    model: brainstate.nn.Module,
    xs: Any,
    loss_fn: Callable[[Any], Any],
    path: tuple,
    indices: Sequence[tuple[int, ...]],
    eps: float = 1e-6,
    leaf: Callable[[Any], Any] = lambda value: value,
) -> np.ndarray:
    """Central differences of the sequence loss for a few coordinates of one parameter.

    ``leaf`` selects the array inside a pytree-valued parameter (e.g. ``lambda v: v['weight']``).
    Use float64; returns one derivative per index.
    """
    pure = PureModel(model, xs[0])
    values = pure.values()

    def loss_at(value):
        return float(loss_fn(pure.run({**values, path: value}, xs)[1]))

    out = []
    for index in indices:
        shifted = []
        for sign in (1.0, -1.0):
            value = jax.tree.map(jnp.array, values[path])
            target = leaf(value)
            bumped = target.at[index].add(sign * eps)
            shifted.append(loss_at(_replace_leaf(value, target, bumped)))
        out.append((shifted[0] - shifted[1]) / (2 * eps))
    return np.asarray(out)


def _replace_leaf(tree: Any, old: Any, new: Any) -> Any:
    return jax.tree.map(lambda leaf: new if leaf is old else leaf, tree)


def relative_error(actual: Any, expected: Any) -> float:
    """Largest ``||a - e|| / ||e||`` over the leaves (absolute error where ``e`` is all zero)."""
    errors = jax.tree.leaves(
        jax.tree.map(
            lambda a, e: float(
                np.linalg.norm(np.asarray(a, np.float64) - np.asarray(e, np.float64))
                / max(np.linalg.norm(np.asarray(e, np.float64)), 1e-300)
                if np.any(np.asarray(e) != 0)
                else np.max(np.abs(np.asarray(a, np.float64)), initial=0.0)
            ),
            actual,
            expected,
        )
    )
    return max(errors, default=0.0)


def tree_allclose(actual: Any, expected: Any, rtol: float | None = None, atol: float = 0.0) -> bool:
    """The suite's one closeness test for pytrees: same tree structure, same leaf shapes, and
    per leaf ``||a - e|| <= atol + rtol * ||e||`` (norm-wise).

    The default ``rtol`` is per dtype (``DEFAULT_RTOL``, the loosest dtype in ``expected``);
    pass looser ones explicitly where a test needs them.
    """
    if jax.tree.structure(actual) != jax.tree.structure(expected):
        return False
    leaves_a, leaves_e = jax.tree.leaves(actual), jax.tree.leaves(expected)
    if any(np.shape(a) != np.shape(e) for a, e in zip(leaves_a, leaves_e)):
        return False
    if rtol is None:
        dtypes = {np.dtype(jnp.asarray(leaf).dtype) for leaf in leaves_e}
        rtol = max((DEFAULT_RTOL.get(dtype, 1e-4) for dtype in dtypes), default=1e-4)
    return all(
        _norm(np.asarray(a, np.float64) - np.asarray(e, np.float64)) <= atol + rtol * _norm(e)
        for a, e in zip(leaves_a, leaves_e)
    )


def _norm(value: Any) -> float:
    return float(np.linalg.norm(np.ravel(np.asarray(value, np.float64))))


def assert_tree_allclose(
    actual: Any, expected: Any, rtol: float | None = None, atol: float = 0.0
) -> None:
    """``assert tree_allclose(...)`` with the per-leaf relative errors in the message."""
    if tree_allclose(actual, expected, rtol, atol):
        return
    if jax.tree.structure(actual) != jax.tree.structure(expected):
        raise AssertionError(
            f"tree structures differ:\n{jax.tree.structure(actual)}\n{jax.tree.structure(expected)}"
        )
    per_leaf = jax.tree.map(lambda a, e: relative_error(a, e), actual, expected)
    raise AssertionError(f"relative errors above rtol={rtol}: {per_leaf}")


def cosine_similarity_per_param(actual: dict, expected: dict) -> dict:
    """``{path: cos(actual, expected)}`` over all leaves of each parameter (flattened).

    1.0 means the same direction; an all-zero side gives 0.0 (``nan`` when both are zero).
    """
    result = {}
    for path, value in expected.items():
        a = np.concatenate([np.ravel(leaf) for leaf in jax.tree.leaves(actual[path])])
        e = np.concatenate([np.ravel(leaf) for leaf in jax.tree.leaves(value)])
        norms = np.linalg.norm(a) * np.linalg.norm(e)
        result[path] = (
            float(np.dot(a, e) / norms)
            if norms > 0
            else (float("nan") if not (a.any() or e.any()) else 0.0)
        )
    return result


def report_cosine_similarity(name: str, actual: dict, expected: dict) -> dict:
    """Print (for the closing notes: run pytest with ``-s``) and return the per-parameter
    cosine similarities of an approximate learner's gradients to an oracle's."""
    similarities = cosine_similarity_per_param(actual, expected)
    cells = ", ".join(f"{'.'.join(map(str, p))}={c:.4f}" for p, c in similarities.items())
    print(f"[cosine vs BPTT] {name}: {cells}")
    return similarities
