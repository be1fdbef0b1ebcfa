r"""Recognise the ETP primitives of **braintrace** (the reference library) in etp_viz.

A model written with ``braintrace.nn`` / ``braintrace.matmul`` binds braintrace's own primitive
objects (``braintrace``'s ``etp_mm``, ``etp_mv``, ``etp_elemwise`` ...), which are not the
objects etp_viz registered, so without this module the compiler sees no ETP equation and every
weight is reported as "feeds no ETP primitive". :func:`register_braintrace_primitives` adopts
each primitive in braintrace's registry **by identity**: it records it in etp_viz's tables
(:mod:`etp_viz.ops._registry`) with an :class:`ETPPrimitiveSpec` whose rules are thin adapters
around braintrace's registered rule functions, looked up in braintrace's own rule tables. No
JAX rule of the primitive is touched (its impl, JVP and batching stay braintrace's) and no
braintrace code is copied.

Rule conventions (etp_viz name <- braintrace name; shapes as in
:mod:`etp_viz.learn.etp.trace_math`):

* ``yw_to_w(g, trace)`` <- ``dt_to_t(g, trace)``, called on the whole slice (batch kept), as
  braintrace's recurrent term does;
* ``xy_to_dw(x, g, weights)`` <- ``xy_to_dw`` (parameter-shaped VJP, summed over the batch);
* ``xy_to_etrace(x, g, weights)`` <- braintrace's instantaneous rule (``instant_drtrl`` where the
  primitive registered one, e.g. LoRA / conv, else ``xy_to_dw``), ``jax.vmap``-ed over the batch
  axis for batched primitives, which yields the trace layout of braintrace's ``init_drtrl``;
* ``etrace_to_dw(trace, dl_dh, weights)`` <- braintrace's solve rule (``solve_drtrl`` where
  registered, else ``dt_to_t``), ``jax.vmap``-ed over the batch for batched primitives, then
  summed down to each trainable operand's shape (braintrace's solve-time batch reduction);
* ``init_drtrl`` / ``init_pp`` <- the rules of the same names (same signature; a rule with an
  ``eqn_params`` keyword, ``etp_conv``'s, gets the equation's params through it).

braintrace's closed-form fast-path kernels are not used: they are optimisations with the same
value as the rule path. Its SnAp-n position rules have no counterpart here.

Activation is lazy and never imports braintrace: the compiler hands every traced step to
:func:`register_braintrace_primitives_in`, which does nothing unless ``braintrace`` is already in
``sys.modules`` (:func:`etp_viz._compat.loaded_braintrace_registry`; a model built from
braintrace layers has imported it) and the jaxpr binds a braintrace ETP primitive etp_viz does
not know yet. Then every primitive in braintrace's registry is adopted, once (primitives a user
registers later with ``braintrace.register_primitive`` are adopted when a model uses them).
:func:`unregister_braintrace_primitives` takes them out of etp_viz's tables again.

Examples
--------
>>> import sys
>>> from etp_viz.ops.braintrace_adapter import register_braintrace_primitives
>>> added = register_braintrace_primitives()  # nothing unless braintrace was imported
>>> "braintrace" in sys.modules or added == ()
True
"""

from __future__ import annotations

import inspect
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from .._compat import loaded_braintrace_registry
from ._registry import (
    BATCHED_COUNTERPARTS,
    BATCHED_PRIMITIVES,
    ETP_PRIMITIVE_SPECS,
    ETP_PRIMITIVES,
    ETP_RULES_ETRACE_TO_DW,
    ETP_RULES_INIT_DRTRL,
    ETP_RULES_INIT_PP,
    ETP_RULES_XY_TO_DW,
    ETP_RULES_XY_TO_ETRACE,
    ETP_RULES_YW_TO_W,
    ETP_TRAINABLE_INVARS_FNS,
    ETP_X_INVAR_INDICES,
    ETP_Y_OUTVAR_INDICES,
    GRADIENT_ENABLED_PRIMITIVES,
    ETPPrimitiveSpec,
    sum_to_shape,
)

__all__ = [
    "braintrace_primitives",
    "register_braintrace_primitives",
    "register_braintrace_primitives_in",
    "spec_from_braintrace",
    "unregister_braintrace_primitives",
]

#: braintrace primitive -> the spec it was adopted with (this module's bookkeeping)
_ADOPTED: dict[Any, ETPPrimitiveSpec] = {}


def braintrace_primitives() -> tuple:
    """The braintrace primitives adopted so far, in adoption order."""
    return tuple(_ADOPTED)


def register_braintrace_primitives() -> tuple:
    """Adopt every braintrace ETP primitive not adopted yet; return the newly adopted ones.

    A no-op (returns ``()``) when braintrace is not imported, or is a version without a
    primitive registry. Idempotent and cheap: call it before every compilation.
    """
    registry = loaded_braintrace_registry()
    if registry is None:
        return ()
    # braintrace keeps its primitives in a set: adopt in name order, counterparts (batched)
    # first so an unbatched primitive's spec can name its adopted counterpart.
    pending = [p for p in registry.ETP_PRIMITIVES if p not in _ADOPTED and p not in ETP_PRIMITIVES]
    pending.sort(key=lambda p: (p not in registry.BATCHED_PRIMITIVES, str(p.name)))
    added = []
    for primitive in pending:
        if (
            primitive not in registry.ETP_RULES_DT_TO_T
            or primitive not in registry.ETP_RULES_XY_TO_DW
        ):
            continue  # a user primitive registered without its rules (yet): retry next time
        _adopt(primitive, spec_from_braintrace(primitive, registry))
        added.append(primitive)
    return tuple(added)


def register_braintrace_primitives_in(jaxpr: Any) -> tuple:
    """The compiler's hook: adopt braintrace's primitives when ``jaxpr`` (or a jaxpr nested in
    its equations) binds one etp_viz does not know; return the newly adopted ones.

    Costs one dict lookup when braintrace is not imported, and one walk over the equations
    otherwise.
    """
    registry = loaded_braintrace_registry()
    if registry is None:
        return ()
    known = registry.ETP_PRIMITIVES
    if not any(p in known and p not in ETP_PRIMITIVES for p in _primitives(jaxpr)):
        return ()
    return register_braintrace_primitives()


def unregister_braintrace_primitives() -> tuple:
    """Take every adopted braintrace primitive out of etp_viz's tables; return them."""
    removed = tuple(_ADOPTED)
    tables = (
        ETP_PRIMITIVES,
        BATCHED_PRIMITIVES,
        GRADIENT_ENABLED_PRIMITIVES,
        ETP_TRAINABLE_INVARS_FNS,
        ETP_X_INVAR_INDICES,
        ETP_Y_OUTVAR_INDICES,
        BATCHED_COUNTERPARTS,
        ETP_RULES_YW_TO_W,
        ETP_RULES_XY_TO_DW,
        ETP_RULES_INIT_DRTRL,
        ETP_RULES_INIT_PP,
        ETP_RULES_XY_TO_ETRACE,
        ETP_RULES_ETRACE_TO_DW,
        ETP_PRIMITIVE_SPECS,
    )
    for primitive in removed:
        for table in tables:
            table.pop(primitive, None)
    _ADOPTED.clear()
    return removed


def _primitives(jaxpr: Any):
    """Every equation's primitive in ``jaxpr`` and in the jaxprs nested in its params."""
    stack = [jaxpr]
    while stack:
        item = stack.pop()
        inner = getattr(item, "jaxpr", item)  # a ClosedJaxpr's open jaxpr (itself on jax 0.12)
        for eqn in getattr(inner, "eqns", ()):
            yield eqn.primitive
            for value in eqn.params.values():
                values = value if isinstance(value, tuple | list) else (value,)
                stack.extend(v for v in values if hasattr(getattr(v, "jaxpr", v), "eqns"))


def spec_from_braintrace(primitive: Any, registry: Any) -> ETPPrimitiveSpec:
    """The etp_viz spec of one braintrace primitive, with its rules read from ``registry``
    (braintrace's ``_op`` package: its rule tables and flag sets)."""
    batched = primitive in registry.BATCHED_PRIMITIVES
    dt_to_t = registry.ETP_RULES_DT_TO_T[primitive]
    xy_to_dw = registry.ETP_RULES_XY_TO_DW[primitive]
    instant = registry.get_instant_drtrl_rule(primitive) or xy_to_dw
    solve = registry.get_solve_drtrl_rule(primitive)
    if solve is None:
        solve = partial(_solve_by_dt_to_t, dt_to_t)
    trainable_fn = registry.ETP_TRAINABLE_INVARS_FNS.get(primitive)
    return ETPPrimitiveSpec(
        name=str(primitive.name),
        impl=partial(_bind, primitive),
        yw_to_w=dt_to_t,
        xy_to_dw=xy_to_dw,
        init_drtrl=_init_rule(registry.ETP_RULES_INIT_DRTRL.get(primitive)),
        init_pp=_init_rule(registry.ETP_RULES_INIT_PP.get(primitive)),
        trainable_invars_fn=None if trainable_fn is None else partial(_trainable, trainable_fn),
        x_invar_index=registry.ETP_X_INVAR_INDICES.get(primitive, 0),
        y_outvar_index=registry.ETP_Y_OUTVAR_INDICES.get(primitive, 0),
        batched=batched,
        gradient_enabled=primitive in registry.GRADIENT_ENABLED_PRIMITIVES,
        xy_to_etrace=partial(_instant_term, instant, batched),
        etrace_to_dw=partial(_solve_to_param, solve, batched),
        batched_counterpart=registry.get_batched_counterpart(primitive),
    )


def _adopt(primitive: Any, spec: ETPPrimitiveSpec) -> None:
    """Record an existing primitive in etp_viz's tables (no JAX rule is (re)defined)."""
    ETP_PRIMITIVES[primitive] = None
    if spec.batched:
        BATCHED_PRIMITIVES[primitive] = None
    if spec.gradient_enabled:
        GRADIENT_ENABLED_PRIMITIVES[primitive] = None
    if spec.trainable_invars_fn is not None:
        ETP_TRAINABLE_INVARS_FNS[primitive] = spec.trainable_invars_fn
    ETP_X_INVAR_INDICES[primitive] = spec.x_invar_index
    ETP_Y_OUTVAR_INDICES[primitive] = spec.y_outvar_index
    if spec.batched_counterpart is not None:
        BATCHED_COUNTERPARTS[primitive] = spec.batched_counterpart
    tables = (
        (spec.yw_to_w, ETP_RULES_YW_TO_W),
        (spec.xy_to_dw, ETP_RULES_XY_TO_DW),
        (spec.init_drtrl, ETP_RULES_INIT_DRTRL),
        (spec.init_pp, ETP_RULES_INIT_PP),
        (spec.xy_to_etrace, ETP_RULES_XY_TO_ETRACE),
        (spec.etrace_to_dw, ETP_RULES_ETRACE_TO_DW),
    )
    for rule, table in tables:
        if rule is not None:
            table[primitive] = rule
    ETP_PRIMITIVE_SPECS[primitive] = spec
    _ADOPTED[primitive] = spec


def _bind(primitive: Any, *args: Any, **params: Any) -> Any:
    """The spec's ``impl``: the braintrace primitive itself (its own impl and JAX rules)."""
    return primitive.bind(*args, **params)


def _init_rule(rule: Any) -> Any:
    """An ``init_drtrl`` / ``init_pp`` rule taking the equation's params as ``**params``.

    braintrace hands some init rules the equation's params as one keyword, ``eqn_params``
    (``etp_conv``: its per-position trace layout depends on them); etp_viz passes them as
    ``**params`` to rules that accept them. Rules without that keyword are called as they are.
    """
    if rule is None:
        return None
    try:
        wants_params = "eqn_params" in inspect.signature(rule).parameters
    except (TypeError, ValueError):  # pragma: no cover - a builtin
        wants_params = False
    return partial(_init_with_params if wants_params else _init_without_params, rule)


def _init_with_params(rule: Any, x_var, y_var, weight_vars, num_state, **params) -> Any:
    return rule(x_var, y_var, weight_vars, num_state, eqn_params=dict(params))


def _init_without_params(rule: Any, x_var, y_var, weight_vars, num_state, **params) -> Any:
    return rule(x_var, y_var, weight_vars, num_state)


def _trainable(fn: Any, params: dict) -> dict[str, int]:
    return dict(fn(dict(params)))


def _solve_by_dt_to_t(dt_to_t: Any, signal: Any, trace: dict, weights: dict, **params) -> dict:
    """braintrace's default solve: its ``dt_to_t`` rule (which takes no weights)."""
    return dt_to_t(signal, trace, **params)


def _instant_term(instant: Any, batched: bool, x: Any, g: Any, weights: dict, **params) -> dict:
    r"""Unreduced :math:`\mathrm{diag}(D_f)\otimes x` of one state slice, per sample when the
    primitive is batched (braintrace's instantaneous term of the param-dim D-RTRL)."""
    if not batched or x is None:
        return dict(instant(x, g, weights, **params))
    return dict(jax.vmap(lambda xb, gb: instant(xb, gb, weights, **params))(x, g))


def _solve_to_param(solve: Any, batched: bool, trace: dict, dl_dh: Any, weights: dict, **params):
    r""":math:`\partial L/\partial W` of one state slice: braintrace's solve rule, per sample
    when batched, summed over the batch (and any axis the operand lacks) to its shape."""
    if batched:
        out = jax.vmap(lambda tb, sb: solve(sb, tb, weights, **params))(trace, dl_dh)
    else:
        out = solve(dl_dh, trace, weights, **params)
    return {
        key: sum_to_shape(jnp.asarray(value), jnp.shape(weights[key])) for key, value in out.items()
    }
