"""Inner loops of a model step with a static trip count, unrolled into the flat step.

A ``scan`` (``jax.lax.scan``, ``brainstate.transform.for_loop`` / ``scan``, a
``jax.lax.fori_loop`` with Python-int bounds) or a ``while`` that is a counted loop with
constant bounds (``fori_loop`` with array bounds, ``while_loop(lambda c: c[0] < 6, ...)``)
whose body reads or writes a hidden state, or holds an ETP primitive, is replaced in the flat
step by its body inlined once per iteration (:func:`.._jaxpr.inline_calls`), up to
:data:`MAX_UNROLL_ITERATIONS` iterations. See ``docs/semantics.md``, "Inner loops".
"""

from __future__ import annotations

from .unroll import (
    MAX_UNROLL_EQUATIONS,
    MAX_UNROLL_ITERATIONS,
    LoopIteration,
    LoopPlan,
    index_jaxpr,
    loop_not_unrolled_reason,
    loop_source,
    non_param_state_vars,
    plan_loop,
    stack_jaxpr,
    too_long_error,
    unroll_size_blocker,
)

__all__ = [
    "MAX_UNROLL_EQUATIONS",
    "MAX_UNROLL_ITERATIONS",
    "LoopIteration",
    "LoopPlan",
    "index_jaxpr",
    "loop_not_unrolled_reason",
    "plan_loop",
    "loop_source",
    "non_param_state_vars",
    "stack_jaxpr",
    "too_long_error",
    "unroll_size_blocker",
]
