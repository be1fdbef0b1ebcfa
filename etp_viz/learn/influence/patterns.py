"""The structural patterns the influence learners share: which entries of the step's
Jacobians can be non-zero (``J_h``, ``J_θ``), the influence entries RTRL can fill, and the
step's layers (the blocks of ``J_h``). Read off the step's jaxpr
(:func:`.sparsity.jacobian_sparsity`); nothing here depends on a learner class."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from .sparsity import jacobian_sparsity

__all__ = ["bool_matmul", "closed_pattern", "one_more_step", "state_layers", "step_patterns"]


def bool_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The boolean product ``(a @ b) > 0`` through BLAS: float32 counts are exact below 2**24
    terms (an int64 matmul has no BLAS path and took tens of seconds on a batched task)."""
    return (np.asarray(a, np.float32) @ np.asarray(b, np.float32)) > 0


def step_patterns(learner: Any) -> tuple[np.ndarray, np.ndarray]:
    """Boolean structural sparsity of ``J_h`` (n, n) and ``J_θ`` (n, p), read off the step's
    jaxpr (:func:`.sparsity.jacobian_sparsity`): a superset of the non-zeros at every point,
    spikes that never fired and ReLUs that were off included."""
    reach_theta, reach_h = jacobian_sparsity(
        lambda t, h, *args: learner.pure_step(t, h, *args)[0],
        learner._theta_vec,
        learner._hidden_vec,
        inputs=learner._example,  # unknown values: no pattern from the example's token ids
    )
    return reach_h, reach_theta


def one_more_step(reach_h: np.ndarray, pattern: np.ndarray) -> np.ndarray:
    """The entries reachable one step later (boolean products)."""
    return pattern | bool_matmul(reach_h, pattern)


def closed_pattern(reach_h: np.ndarray, reach_theta: np.ndarray) -> tuple[np.ndarray, int]:
    """``(pattern, depth)``: every influence entry RTRL can fill, and the steps until the
    pattern stops growing (the n that makes SnAp exact)."""
    pattern, depth = reach_theta, 1
    while True:
        wider = one_more_step(reach_h, pattern)
        if (wider == pattern).all():
            return pattern, depth
        pattern, depth = wider, depth + 1


def state_layers(
    learner: Any, reach_h: np.ndarray | None = None
) -> tuple[np.ndarray, list[list[tuple]]]:
    """``(layer of each entry of the flat h, hidden state paths of each layer)``: the strongly
    connected components of the states' "reads the past of" relation (the blocks of the
    structural :math:`J_h`; see the module docstring), in the order of their first state."""
    import brainstate

    if reach_h is None:
        reach_h = step_patterns(learner)[0]
    path_of = {id(s): tuple(p) for p, s in brainstate.graph.states(learner.model).items()}
    hidden = [s for s, p in zip(learner._states, learner._is_param) if not p]
    sizes = [sum(int(np.size(leaf)) for leaf in jax.tree.leaves(s.value)) for s in hidden]
    bounds = np.cumsum([0, *sizes])
    k = len(hidden)
    reads = np.zeros((k, k), bool)  # reads[i, j]: state i's new value reads j's past
    for i in range(k):
        for j in range(k):
            reads[i, j] = reach_h[bounds[i] : bounds[i + 1], bounds[j] : bounds[j + 1]].any()
    reach = reads | np.eye(k, dtype=bool)
    for _ in range(max(k - 1, 0)):  # transitive closure (a handful of states)
        reach = reach | bool_matmul(reach, reach)
    same = reach & reach.T
    layer_of: list[int] = []
    paths: list[list[tuple]] = []
    for i in range(k):
        first = int(np.argmax(same[i]))
        if first == i:
            paths.append([])
        layer_of.append(len(paths) - 1 if first == i else layer_of[first])
        paths[layer_of[i]].append(path_of.get(id(hidden[i]), ("?",)))
    parts = [np.full(n, g, np.int64) for n, g in zip(sizes, layer_of)]
    units = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return units.astype(np.int64), paths
