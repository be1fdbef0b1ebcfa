"""Backward trace of an ETP trainable input to the ``ParamState`` leaf it comes from."""

from __future__ import annotations

from collections import deque
from typing import Any, NamedTuple

import jax

from etp_viz import _compat

from ._jaxpr import VISITS, eval_jaxpr, slice_jaxpr

__all__ = ["ParamTrace", "trace_to_param"]


class ParamTrace(NamedTuple):
    """Where a trainable input comes from.

    ``jaxpr`` maps every leaf of the ``ParamState`` at ``path`` (``jax.tree.leaves`` order)
    to the input; ``fn(param_value)`` evaluates it (constants of the model are bound).
    """

    path: tuple
    leaf_index: int
    is_leaf: bool
    chain: tuple
    chain_eqn_indices: tuple
    jaxpr: Any
    constvars: list
    fn: Any
    #: every ParamState path / (path, leaf index) the input depends on, first found first
    paths: tuple
    leaf_indices: tuple

    def describe(self) -> list:
        return [".".join(map(str, p)) + f"[{i}]" for p, i in self.leaf_indices]


def trace_to_param(minfo: Any, var: Any, cache: dict) -> ParamTrace | None:
    """Walk producers from ``var`` (breadth first) up to ``ParamState`` leaf invars."""
    if var in cache:
        return cache[var]
    producer = minfo.def_use.producer
    leaves_found: dict[tuple, None] = {}
    chain_eqns: dict[int, None] = {}
    seen: dict[Any, None] = {var: None}
    queue = deque([var])
    while queue:
        current = queue.popleft()
        path = minfo.invar_to_weight_path.get(current)
        if path is not None:
            leaves_found[(path, minfo.weight_path_to_invars[path].index(current))] = None
            continue
        index = producer.get(current)
        if index is None:
            continue
        VISITS.count += 1
        chain_eqns[index] = None
        for inp in minfo.jaxpr.eqns[index].invars:
            if _compat.is_var(inp) and inp not in seen:
                seen[inp] = None
                queue.append(inp)
    if not leaves_found:
        cache[var] = None
        return None
    path, leaf_index = next(iter(leaves_found))
    indices = sorted(chain_eqns)
    leaf_invars = minfo.weight_path_to_invars[path]
    jaxpr, constvars = slice_jaxpr(minfo.jaxpr, indices, leaf_invars, [var])
    result = ParamTrace(
        path=path,
        leaf_index=leaf_index,
        is_leaf=var in minfo.invar_to_weight_path,
        chain=tuple(dict.fromkeys(minfo.jaxpr.eqns[i].primitive for i in indices)),
        chain_eqn_indices=tuple(indices),
        jaxpr=jaxpr,
        constvars=constvars,
        fn=_make_fn(minfo, jaxpr, constvars),
        paths=tuple(dict.fromkeys(p for p, _ in leaves_found)),
        leaf_indices=tuple(leaves_found),
    )
    cache[var] = result
    return result


def _make_fn(minfo: Any, jaxpr: Any, constvars: list):
    top_consts = dict(zip(minfo.constvars, minfo.consts))
    missing = [v for v in constvars if v not in top_consts]

    def fn(param_value: Any, extra_consts: dict | None = None) -> Any:
        """Trainable input from the ParamState value (``extra_consts``: Var -> value for
        runtime inputs of the chain, e.g. a mask held in another state)."""
        values = {**top_consts, **(extra_consts or {})}
        absent = [v for v in missing if v not in values]
        if absent:
            raise ValueError(
                f"The weight processing chain reads runtime values {absent}; pass them as "
                "extra_consts={var: value}."
            )
        consts = [values[v] for v in constvars]
        return eval_jaxpr(jaxpr, consts, *jax.tree.leaves(param_value))[0]

    return fn
