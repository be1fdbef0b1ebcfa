"""The structural patterns the influence learners share: which entries of the step's
Jacobians can be non-zero (``J_h``, ``J_θ``), the influence entries RTRL can fill, and the
step's layers (the blocks of ``J_h``). Read off the step's jaxpr
(:func:`.sparsity.jacobian_sparsity`); nothing here depends on a learner class."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import jax
import numpy as np

from .sparsity import jacobian_sparsity

__all__ = [
    "bool_matmul",
    "closed_pattern",
    "hidden_components",
    "line_classes",
    "one_more_step",
    "silent_columns",
    "state_layers",
    "step_patterns",
    "window_pattern",
    "zero_claims",
]


def bool_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The boolean product ``(a @ b) > 0`` through BLAS: float32 counts are exact below 2**24
    terms (an int64 matmul has no BLAS path and took tens of seconds on a batched task)."""
    return (np.asarray(a, np.float32) @ np.asarray(b, np.float32)) > 0


def step_patterns(learner: Any) -> tuple[np.ndarray, np.ndarray]:
    """Boolean structural sparsity of ``J_h`` (n, n) and ``J_θ`` (n, p), read off the step's
    jaxpr (:func:`.sparsity.jacobian_sparsity`): a superset of the non-zeros at every point,
    spikes that never fired and ReLUs that were off included."""
    cache = _cache(learner)
    if "step" not in cache:
        reach_theta, reach_h = jacobian_sparsity(
            lambda t, h, *args: learner.pure_step(t, h, *args)[0],
            learner.theta_vec,
            learner.hidden_vec,
            inputs=learner.example_args,  # unknown values: no pattern from the example's token ids
        )
        cache["step"] = (reach_h, reach_theta)
    return cache["step"]


def flat_outputs(out: Any) -> Any:
    """The floating leaves of a step's output, raveled into one vector."""
    import jax.numpy as jnp

    leaves = [
        jnp.ravel(leaf)
        for leaf in jax.tree.leaves(out)
        if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact)
    ]
    return jnp.concatenate(leaves) if leaves else jnp.zeros((0,))


@runtime_checkable
class PatternHolder(Protocol):
    """A learner that keeps the structural patterns of its compiled step (an influence
    learner: :meth:`~.learner.InfluenceLearner.pattern_cache`)."""

    def pattern_cache(self) -> dict: ...


def _cache(learner: Any) -> dict:
    """The learner's pattern cache, emptied by each ``compile_graph``; a fresh one where
    there is no holder."""
    return learner.pattern_cache() if isinstance(learner, PatternHolder) else {}


def one_more_step(reach_h: np.ndarray, pattern: np.ndarray) -> np.ndarray:
    """The entries reachable one step later (boolean products, one per component of
    :math:`J_h`: a batch of 8 is 8 times fewer operations)."""
    component = hidden_components(reach_h)
    wider = pattern.copy()
    for c in range(int(component.max(initial=-1)) + 1):
        rows = np.flatnonzero(component == c)
        wider[rows] |= bool_matmul(reach_h[np.ix_(rows, rows)], pattern[rows])
    return wider


def hidden_components(reach_h: np.ndarray) -> np.ndarray:
    """Per hidden entry, its connected component of :math:`J_h`'s pattern, directions
    ignored (a batch element: the batch never mixes in one step)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    return connected_components(csr_matrix(reach_h), directed=True, connection="weak")[1]


def line_classes(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first line of each class, class of each line)`` of the rows of ``keys`` (equal
    rows: one class, numbered in order of first appearance); a hash per row, where
    ``np.unique(axis=0)`` sorts long byte rows slowly."""
    seen: dict[bytes, int] = {}
    inverse = np.fromiter(
        (seen.setdefault(row.tobytes(), len(seen)) for row in np.ascontiguousarray(keys)),
        np.int64,
        count=len(keys),
    )
    first = np.full(len(seen), len(keys), np.int64)
    np.minimum.at(first, inverse, np.arange(len(keys)))
    return first, inverse


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
    hidden = [s for s, p in zip(learner.step_states, learner.state_is_param) if not p]
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


def window_pattern(reach_h: np.ndarray, reach_theta: np.ndarray, steps: int) -> np.ndarray:
    """The entries of ``∂h/∂θ`` accumulated over the last ``steps`` steps (a parameter's
    effect through at most ``steps`` updates, ``steps = 0``: none): ``R_θ ∪ R_h R_θ ∪ ...``,
    stopping early where the pattern closes."""
    pattern = np.zeros_like(reach_theta)
    if steps < 1:
        return pattern
    pattern = reach_theta
    for _ in range(steps - 1):
        wider = one_more_step(reach_h, pattern)
        if (wider == pattern).all():
            break
        pattern = wider
    return pattern


def silent_columns(learner: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(silent, support)``: ``(p,)`` the parameter entries whose online gradient is zero by
    structure, and ``(n, p)`` where the learner's influence can be non-zero.

    An influence learner's gradient of entry ``k`` is the output's direct ``∂y/∂θ_k`` plus the
    learning signal -- the output's ``∂y/∂h^{t-1}`` (and, for SnAp, ``∂y/∂h^t`` of the cut
    step) -- contracted with column ``k`` of the influence it keeps
    (``learner.influence_support()``). Where neither pattern meets the column, the entry gets
    0 for every input: a readout of a state's pre-update value, a stack whose upper layer
    reads the lower one's old state, a SnAp mask that keeps no entry the output reads. The
    learning signal is the *outputs'* (a loss that reads a state after the step is not
    assumed), as for the ETP learners' "zero by structure".
    """
    cache = _cache(learner)
    cut = bool(learner.mask_same_step)
    key = ("outputs", cut)
    if key not in cache:
        theta, hidden = learner.theta_vec, learner.hidden_vec
        if cut:  # SnAp: the direct Jacobians of the output, new reads apart
            readout, *signal = jacobian_sparsity(
                lambda t, h, r, *a: flat_outputs(learner.cut_step(t, h, r, *a)[1]),
                theta,
                hidden,
                hidden,
                inputs=learner.example_args,
            )
        else:
            readout, *signal = jacobian_sparsity(
                lambda t, h, *a: flat_outputs(learner.pure_step(t, h, *a)[1]),
                theta,
                hidden,
                inputs=learner.example_args,
            )
        rows = np.zeros(hidden.size, bool)
        for part in signal:
            rows |= part.any(axis=0)
        cache[key] = (readout.any(axis=0), rows)
    readout, rows = cache[key]
    support = np.asarray(learner.influence_support(), bool)
    met = bool_matmul(rows[None, :], support)[0]
    return ~(readout | met), support


def zero_claims(learner: Any, claims: Any) -> Any:
    """``claims`` with ``none`` for each leaf all of whose entries :func:`silent_columns`
    finds zero by structure, the reason naming the states its influence is kept on."""
    import dataclasses

    silent, support = silent_columns(learner)
    names = _hidden_names(learner)
    label = learner.claim_label()
    columns = learner.param_columns()
    for key, claim in list(claims.items()):
        start, stop = columns.get(key, (0, 0))
        if stop <= start or not silent[start:stop].all():
            continue
        states = sorted({names[i] for i in np.flatnonzero(support[:, start:stop].any(axis=1))})
        if states:
            why = (
                f"{label} keeps its influence on {', '.join(states)} only, which the output "
                "reads only through another state, a step later"
            )
        else:
            why = f"under {label} it reaches no state whose influence is kept"
        reason = (
            f"zero by structure: {why}, and no output reads the weight directly: no learning "
            "signal ever meets it"
        )
        claims[key] = dataclasses.replace(
            claim, kind="none", reason=reason, dropped=(), online=True
        )
    return claims


def _hidden_names(learner: Any) -> list[str]:
    """Per entry of the flat ``h``, the dotted path of its state."""
    import brainstate

    path_of = {id(s): tuple(p) for p, s in brainstate.graph.states(learner.model).items()}
    names: list[str] = []
    for state in (s for s, p in zip(learner.step_states, learner.state_is_param) if not p):
        size = sum(int(np.size(leaf)) for leaf in jax.tree.leaves(state.value))
        names += [".".join(map(str, path_of.get(id(state), ("?",))))] * size
    return names
