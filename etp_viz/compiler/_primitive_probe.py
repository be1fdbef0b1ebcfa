"""Is a primitive the compiler does not know element-wise? Decided from the primitive itself.

A library can bind any primitive inside a model step (braintools' surrogate spikes bind
``heaviside_surrogate_gradient``). Cutting every unknown primitive from the h -> h transition
is sound but drops real terms (an LIF's soft reset :math:`-v_{th}\\,s(V)`), so an unknown
primitive is judged by structure:

1. a declaration in the ETP registry (:func:`etp_viz.ops.declare_elementwise`) wins;
2. otherwise its **JVP is traced** on abstract operands of the equation's shapes and dtypes
   (``jax.make_jaxpr`` of ``jax.jvp`` of ``primitive.bind``; nothing is computed) and the
   path from each hidden-derived operand's *tangent* to each output tangent is walked with the
   compiler's own position rules. The JVP is what ``jax.grad`` (and so BPTT) differentiates
   with, so it states the primitive's Jacobian exactly: when every tangent path keeps
   positions, output position ``p`` has a derivative with respect to operand position ``p``
   only, whatever the primal computation does (a surrogate spike's forward ``x >= 0``
   carries no derivative at all).

When in doubt the primitive is judged *mixing* (cut, as before), with the reason: a JVP that
cannot be traced, one that applies the primitive itself to the tangent (``rev``, ``fft``,
``dot_general`` and every other linear primitive: structure cannot decide), control flow or
another sub-jaxpr, or a nesting deeper than :data:`MAX_DEPTH`. A judgement is cached per
primitive, params, operand types, dependent operands and rule (module level: the same
primitive in a later compilation costs a dictionary lookup).

Examples
--------
>>> import jax, jax.numpy as jnp
>>> from etp_viz._compat import Primitive, ad
>>> from etp_viz.compiler._positions import is_position_preserving
>>> softplus_p = Primitive("doc_softplus")
>>> _ = softplus_p.def_impl(lambda x: jnp.logaddexp(x, 0.0))
>>> _ = softplus_p.def_abstract_eval(lambda x: x)
>>> ad.defjvp(softplus_p, lambda t, x: t * jax.nn.sigmoid(x))
>>> eqn = jax.make_jaxpr(softplus_p.bind)(jnp.ones(3)).jaxpr.eqns[0]
>>> judgement = judge_primitive(eqn, [True], is_position_preserving)
>>> judgement.elementwise, judgement.how
(True, 'jvp structure')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from etp_viz import _compat

from ._jaxpr import CALL_PRIMITIVE_NAMES, CONTROL_FLOW_PRIMITIVE_NAMES, sub_jaxprs

__all__ = ["MAX_DEPTH", "PrimitiveJudgement", "declared_elementwise", "judge_primitive"]

#: Unknown primitives whose JVP uses another unknown primitive are judged recursively, at most
#: this deep (then: mixing).
MAX_DEPTH = 4
#: Cached judgements, at most this many (the cache is emptied when full).
MAX_CACHED = 4096

#: ``rule(eqn, dependent, cache) -> bool``: the compiler's position rule applied inside a JVP.
PositionRule = Callable[[Any, list, Any], bool]


class PrimitiveJudgement(NamedTuple):
    """How the compiler judged one primitive it has no built-in rule for.

    Attributes
    ----------
    primitive : str
        The primitive's name (``'heaviside_surrogate_gradient'``).
    elementwise : bool
        True: output position ``p`` has a derivative with respect to position ``p`` of the
        hidden-derived operands only (kept in the h -> h transition); False: cut.
    how : str
        ``'declared'`` (the ETP registry), ``'jvp structure'`` (its traced JVP) or
        ``'undecided'`` (structure could not decide: cut to stay sound).
    reason : str
        One sentence saying why, naming the operand types and the equation that decided.
    """

    primitive: str
    elementwise: bool
    how: str
    reason: str


_CACHE: dict[Any, PrimitiveJudgement] = {}
_IN_PROGRESS: dict[Any, None] = {}


def declared_elementwise(primitive: Any) -> bool | None:
    """The registry's declaration for ``primitive`` (by identity, then by name), or None."""
    from etp_viz.ops import get_declared_elementwise

    return get_declared_elementwise(primitive)


def judge_primitive(eqn: Any, dependent: Sequence[bool], rule: PositionRule) -> PrimitiveJudgement:
    """Judge ``eqn.primitive`` on this equation's operand types (see the module docstring).

    ``dependent[i]`` says whether operand ``i`` carries a hidden-derived value; ``rule`` is the
    position rule (:func:`~etp_viz.compiler._positions.is_position_preserving` for the h -> h
    transition, the tail rule for a relation's ``y -> h`` path) applied to the JVP's equations.
    """
    name = eqn.primitive.name
    declared = declared_elementwise(eqn.primitive)
    if declared is not None:
        word = "element-wise" if declared else "position-mixing"
        return PrimitiveJudgement(name, declared, "declared", f"declared {word} in the registry")
    key = _cache_key(eqn, dependent, rule)
    if key is not None and key in _CACHE:
        return _CACHE[key]
    guard = key if key is not None else ("unhashable params", eqn.primitive)
    if guard in _IN_PROGRESS:
        return _undecided(name, "its JVP applies the primitive itself to the tangent")
    if len(_IN_PROGRESS) >= MAX_DEPTH:
        return _undecided(name, f"its JVP nests unknown primitives more than {MAX_DEPTH} deep")
    _IN_PROGRESS[guard] = None
    try:
        judgement = _judge_structure(eqn, dependent, rule)
    finally:
        _IN_PROGRESS.pop(guard, None)
    if key is not None:
        if len(_CACHE) >= MAX_CACHED:
            _CACHE.clear()
        _CACHE[key] = judgement
    return judgement


def _judge_structure(eqn: Any, dependent: Sequence[bool], rule: PositionRule) -> PrimitiveJudgement:
    name = eqn.primitive.name
    if name in CONTROL_FLOW_PRIMITIVE_NAMES or sub_jaxprs(eqn):
        return _undecided(name, "it carries sub-jaxprs the compiler does not look into")
    avals = [getattr(v, "aval", None) for v in eqn.invars]
    wanted = [i for i, (a, dep) in enumerate(zip(avals, dependent)) if dep and _inexact(a)]
    signature = ", ".join(_aval_text(a) for a in avals)
    if not wanted:
        return PrimitiveJudgement(
            name, True, "jvp structure", f"no hidden-derived operand of ({signature}) is inexact"
        )
    try:
        jvp_jaxpr, tangents_in, tangents_out = _trace_jvp(eqn, avals)
    except Exception as err:  # noqa: BLE001 - any failure means "cannot decide"
        text = f"{type(err).__name__}: {err}".splitlines()[0][:160]
        return _undecided(name, f"its JVP on ({signature}) could not be traced ({text})")
    if jvp_jaxpr is None:
        return _undecided(name, f"it has an operand or result of ({signature}) with no shape")
    seeds = [tangents_in[i] for i in wanted if tangents_in[i] is not None]
    blocking = _first_mixing_eqn(jvp_jaxpr, seeds, tangents_out, rule)
    if blocking is None:
        return PrimitiveJudgement(
            name,
            True,
            "jvp structure",
            f"its JVP on ({signature}) maps each tangent position of the hidden-derived "
            "operands to the same output position",
        )
    if blocking == name:
        return _undecided(name, f"its JVP on ({signature}) applies the primitive itself")
    return PrimitiveJudgement(
        name,
        False,
        "jvp structure",
        f"its JVP on ({signature}) moves or mixes positions at '{blocking}'",
    )


def _undecided(name: str, why: str) -> PrimitiveJudgement:
    return PrimitiveJudgement(
        name,
        False,
        "undecided",
        f"{why}, so structure cannot show it is element-wise: treated as mixing. If it is "
        f"element-wise, declare it: etp_viz.ops.declare_elementwise({name!r})",
    )


def _trace_jvp(eqn: Any, avals: list) -> tuple[Any, list, list]:
    """``(open jvp jaxpr, tangent invar per operand or None, output tangent Vars)``."""
    if any(a is None or not hasattr(a, "shape") for a in avals):
        return None, [], []
    subfuns, params = _compat.eqn_bind_params(eqn)
    primitive = eqn.primitive
    inexact = [i for i, a in enumerate(avals) if _inexact(a)]
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]

    def primal_and_tangent(operands: list, tangents: list) -> list:
        def bound(*differentiated: Any) -> list:
            args = list(operands)
            for i, value in zip(inexact, differentiated):
                args[i] = value
            out = primitive.bind(*subfuns, *args, **params)
            outs = list(out) if primitive.multiple_results else [out]
            return [o for o in outs if _inexact(o)]

        _, tangent_out = jax.jvp(bound, tuple(operands[i] for i in inexact), tuple(tangents))
        return list(tangent_out)

    closed = jax.make_jaxpr(primal_and_tangent)(specs, [specs[i] for i in inexact])
    jaxpr, _ = _compat.split_closed_jaxpr(closed)
    tangent_invars: list = [None] * len(avals)
    for offset, i in enumerate(inexact):
        tangent_invars[i] = jaxpr.invars[len(avals) + offset]
    return jaxpr, tangent_invars, [v for v in jaxpr.outvars if _compat.is_var(v)]


def _first_mixing_eqn(jaxpr: Any, seeds: list, outs: list, rule: PositionRule) -> str | None:
    """Name of the first equation on a path from ``seeds`` to ``outs`` that moves positions,
    or None (call bodies are walked with their own operands' flags)."""
    dependent: dict[Any, None] = dict.fromkeys(seeds)
    for eqn in jaxpr.eqns:
        flags = [_compat.is_var(v) and v in dependent for v in eqn.invars]
        if not any(flags) or not any(_inexact(v.aval) for v in eqn.outvars):
            continue
        body = _call_body(eqn)
        if body is not None:
            inner_seeds = [v for v, f in zip(body.invars, flags) if f]
            found = _first_mixing_eqn(body, inner_seeds, list(body.outvars), rule)
        else:
            found = None if rule(eqn, flags, None) else eqn.primitive.name
        if found is not None:
            return found
        dependent.update(dict.fromkeys(v for v in eqn.outvars if _compat.is_var(v)))
    return None


def _call_body(eqn: Any) -> Any:
    if eqn.primitive.name not in CALL_PRIMITIVE_NAMES:
        return None
    bodies = sub_jaxprs(eqn)
    if len(bodies) != 1 or len(bodies[0][1].invars) != len(eqn.invars):
        return None
    return bodies[0][1]


def _inexact(aval: Any) -> bool:
    dtype = getattr(getattr(aval, "aval", aval), "dtype", None)
    return dtype is not None and bool(np.issubdtype(dtype, np.inexact))


def _aval_text(aval: Any) -> str:
    if aval is None or not hasattr(aval, "shape"):
        return "?"
    return f"{np.dtype(aval.dtype).name}{list(aval.shape)}"


def _cache_key(eqn: Any, dependent: Sequence[bool], rule: PositionRule) -> Any:
    avals = tuple(
        (tuple(getattr(v.aval, "shape", ())), str(getattr(v.aval, "dtype", ""))) for v in eqn.invars
    )
    key = (
        eqn.primitive,
        tuple(sorted(eqn.params.items())),
        avals,
        tuple(bool(d) for d in dependent),
        getattr(rule, "__qualname__", id(rule)),
    )
    try:
        hash(key)
    except TypeError:  # an unhashable param (an array): judged each time
        return None
    return key
