"""Which equations keep every position of a hidden value in place.

An equation is *position-preserving* when output position ``p`` depends on its hidden-derived
inputs only at position ``p``. Only then is the per-position block of the h -> h Jacobian
obtained from one vector-Jacobian product per state (a column sum equals the diagonal).

JAX's own primitives have rules here (element-wise math, shape ops that keep positions,
reductions over unit axes; call and custom-derivative equations through their bodies);
``dot_general``, ``conv_general_dilated``, reductions, ``cumsum``, control flow ... couple
positions. A primitive with no rule here (a library's surrogate spike) is judged from its own
JVP by :mod:`etp_viz.compiler._primitive_probe` (a declaration in the ETP registry wins), and
every such judgement is logged on a :class:`PositionCache` for the diagnostics.
"""

from __future__ import annotations

from typing import Any

from etp_viz import _compat

from ._jaxpr import (
    CALL_PRIMITIVE_NAMES,
    CONTROL_FLOW_PRIMITIVE_NAMES,
    CUSTOM_CALL_PRIMITIVE_NAMES,
    sub_jaxprs,
)
from ._primitive_probe import PrimitiveJudgement, judge_primitive

__all__ = [
    "PositionCache",
    "carries_no_derivative",
    "has_builtin_rule",
    "is_position_preserving",
    "is_tail_position_preserving",
]

ELEMENTWISE_PRIMITIVE_NAMES = frozenset(
    """
    neg sign floor ceil round is_finite exp exp2 log log1p expm1 tanh logistic sin cos tan
    asin acos atan sinh cosh asinh acosh atanh sqrt rsqrt cbrt abs not integer_pow pow square
    reciprocal add sub mul div rem max min atan2 nextafter and or xor eq ne lt le gt ge
    select_n convert_element_type clamp erf erfc erf_inv lgamma digamma add_any copy copy_p
    real imag conj reduce_precision shift_left shift_right_logical shift_right_arithmetic
    population_count stop_gradient sharding_constraint optimization_barrier
    """.split()
)

_REDUCTIONS = frozenset(
    "reduce_sum reduce_max reduce_min reduce_prod reduce_and reduce_or argmax argmin".split()
)
_CUMULATIVE = frozenset({"cumsum", "cumprod", "cummax", "cummin"})
#: JAX primitives known to move or mix positions (cut without a probe: their JVPs apply the
#: primitive itself to the tangent, which structure alone cannot decide)
MIXING_PRIMITIVE_NAMES = frozenset(
    """
    dot_general conv_general_dilated concatenate pad slice dynamic_slice dynamic_update_slice
    gather scatter scatter-add scatter_add scatter-mul scatter_mul scatter-min scatter_min
    scatter-max scatter_max rev sort fft cumlogsumexp reduce_window reduce_window_sum
    reduce_window_max reduce_window_min select_and_scatter_add select_and_gather_add argsort
    top_k split triangular_solve cholesky custom_linear_solve linear_solve qr svd eig eigh lu
    reduce_and reduce_xor reduce_or all_gather all_to_all psum pmax pmin ppermute
    """.split()
)
_SHAPE_OPS = frozenset({"broadcast_in_dim", "reshape", "squeeze", "expand_dims", "transpose"})
_BUILTIN = (
    ELEMENTWISE_PRIMITIVE_NAMES
    | _REDUCTIONS
    | _CUMULATIVE
    | _SHAPE_OPS
    | MIXING_PRIMITIVE_NAMES
    | CALL_PRIMITIVE_NAMES
    | CUSTOM_CALL_PRIMITIVE_NAMES
    | CONTROL_FLOW_PRIMITIVE_NAMES
)


class PositionCache(dict):
    """Memo of one pass's call-body verdicts (``id(body) -> bool``) that also logs, in
    :attr:`judged`, every judgement of a primitive with no built-in rule (in order, repeats
    included, so a pass can attribute them to its equations).

    Examples
    --------
    >>> cache = PositionCache()
    >>> cache.judged
    []
    """

    def __init__(self) -> None:
        super().__init__()
        self.judged: list[PrimitiveJudgement] = []


def has_builtin_rule(primitive: Any) -> bool:
    """True for JAX primitives with a rule here and for ETP primitives; False for the rest
    (judged by :func:`~etp_viz.compiler._primitive_probe.judge_primitive`)."""
    from etp_viz.ops import is_etp_primitive

    return primitive.name in _BUILTIN or is_etp_primitive(primitive)


def _non_unit(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


def _shape(atom: Any) -> tuple[int, ...]:
    return tuple(getattr(getattr(atom, "aval", None), "shape", ()))


def carries_no_derivative(eqn: Any) -> bool:
    """Every output is boolean or integer (a comparison, a cast to int): no derivative passes,
    so no dependency does either (the condition of a ``jnp.where`` that reads the state)."""
    import numpy as np

    dtypes = [getattr(getattr(v, "aval", None), "dtype", None) for v in eqn.outvars]
    return bool(dtypes) and all(d is not None and not np.issubdtype(d, np.inexact) for d in dtypes)


def is_position_preserving(eqn: Any, dependent: list[bool], cache: dict | None = None) -> bool:
    """True when ``eqn`` maps each position of its ``dependent`` inputs to the same position.

    ``dependent[i]`` says whether ``eqn.invars[i]`` carries a hidden-derived value.
    """
    name = eqn.primitive.name
    if name in ELEMENTWISE_PRIMITIVE_NAMES:
        out = _shape(eqn.outvars[0])
        # an implicit broadcast of a dependent operand would copy one position to many
        return all(_shape(v) == out or not dep for v, dep in zip(eqn.invars, dependent))
    if name in ("broadcast_in_dim", "reshape", "squeeze", "expand_dims"):
        return _non_unit(_shape(eqn.invars[0])) == _non_unit(_shape(eqn.outvars[0]))
    if name == "transpose":
        shape = _shape(eqn.invars[0])
        order = [axis for axis in eqn.params["permutation"] if shape[axis] != 1]
        return order == sorted(order)
    if name in _REDUCTIONS or name in _CUMULATIVE:
        shape = _shape(eqn.invars[0])
        axes = eqn.params.get("axes", (eqn.params.get("axis", 0),))
        return all(shape[a] == 1 for a in axes)
    if name in CUSTOM_CALL_PRIMITIVE_NAMES or name in CALL_PRIMITIVE_NAMES:
        return all(_body_preserving(body, cache) for _, body in sub_jaxprs(eqn))
    if not has_builtin_rule(eqn.primitive):
        return _judged(eqn, dependent, cache, tail=False)
    return _is_gradient_enabled_etp(eqn.primitive)


def _judged(eqn: Any, dependent: list[bool], cache: dict | None, tail: bool) -> bool:
    """The structural judgement of a primitive with no built-in rule, logged on ``cache``."""
    rule = is_tail_position_preserving if tail else is_position_preserving
    judgement = judge_primitive(eqn, dependent, rule)
    if isinstance(cache, PositionCache):
        cache.judged.append(judgement)
    if judgement.how != "declared" or not judgement.elementwise:
        return judgement.elementwise
    # declared element-wise: an implicit broadcast of a dependent operand still copies
    out = _shape(eqn.outvars[0])
    fits = _broadcasts if tail else (lambda shape, out: shape == out)
    return all(fits(_shape(v), out) or not dep for v, dep in zip(eqn.invars, dependent))


def _body_preserving(body: Any, cache: dict | None) -> bool:
    key = id(body)
    if cache is not None and key in cache:
        return cache[key]
    dependent: dict[Any, bool] = dict.fromkeys(body.invars, True)
    ok = True
    for eqn in body.eqns:
        flags = [_compat.is_var(v) and dependent.get(v, False) for v in eqn.invars]
        if not any(flags):
            continue
        if not is_position_preserving(eqn, flags, cache):
            ok = False
            break
        dependent.update(dict.fromkeys(eqn.outvars, True))
    if cache is not None:
        cache[key] = ok
    return ok


def _is_gradient_enabled_etp(primitive: Any) -> bool:
    from etp_viz.ops import is_etp_enable_gradient_primitive

    return is_etp_enable_gradient_primitive(primitive)


def is_tail_position_preserving(eqn: Any, dependent: list[bool], cache: dict | None = None) -> bool:
    """:func:`is_position_preserving` for a relation's ``y -> h`` tail, where *broadcasting*
    ``y`` also keeps positions: each position of ``h`` still reads one position of ``y``, so
    ``dh/dy`` stays one number per hidden position. Along new leading axes (a per-neuron
    ``(N,)`` value added to a ``(B, N)`` batch) or along unit axes anywhere (a per-module
    ``(G, 1)`` gain on a ``(G, N)`` state): the trace of each hidden position carries its own
    ``df`` and the gradient sums the positions that share a ``y`` entry. What couples is the
    other direction: one ``h`` position reading several ``y`` positions (a sum, a matmul, a
    shift)."""
    name = eqn.primitive.name
    if name == "broadcast_in_dim":
        in_shape, out_shape = _shape(eqn.invars[0]), _shape(eqn.outvars[0])
        dims = tuple(eqn.params["broadcast_dimensions"])
        if list(dims) == sorted(dims) and all(
            size in (1, out_shape[d]) for size, d in zip(in_shape, dims)
        ):
            return True
    if name in ELEMENTWISE_PRIMITIVE_NAMES:
        out = _shape(eqn.outvars[0])
        return all(_broadcasts(_shape(v), out) or not dep for v, dep in zip(eqn.invars, dependent))
    if not has_builtin_rule(eqn.primitive):
        return _judged(eqn, dependent, cache, tail=True)
    return is_position_preserving(eqn, dependent, cache)


def _broadcasts(shape: tuple[int, ...], out: tuple[int, ...]) -> bool:
    """``shape`` broadcasts to ``out`` (numpy rules: right-aligned, each axis 1 or equal)."""
    if len(shape) > len(out):
        return False
    tail = out[len(out) - len(shape) :]
    return all(a in (1, b) for a, b in zip(shape, tail))


# -- a y -> h tail whose all-ones JVP vanishes by structure ----------------------------------
#: structural linear maps: a linear combination of them applied to an input keeps its form
_LINEAR_MAPS = _SHAPE_OPS | {"reduce_sum", "convert_element_type", "copy", "copy_p"}
_ADDITIVE = {"add": 1.0, "add_any": 1.0, "sub": -1.0}


def ones_tangent_vanishes(tail: Any, const_avals: list, y_aval: Any) -> bool:
    r"""Is the JVP of a relation's ``y -> h`` tail with an all-ones tangent identically zero?

    That JVP is the executor's :math:`D_f = (\partial h/\partial y)\,\mathbf 1`. A tail that
    mixes positions can be *shift invariant*: a layer normalisation :math:`(y - \bar y)/
    \sigma(y)` maps :math:`y + c\mathbf 1` to the same value, so :math:`D_f = 0` for every
    input and so is every trace of the relation. Decided on the traced JVP (no input value):
    each Var is a value computed from constants alone (evaluated), or a linear combination
    of structural linear maps (reductions, shape ops) of opaque Vars; a subtraction whose
    terms cancel, a product with an exact zero and a linear map of zero are zero. Anything
    the rules do not cover is opaque, so a True answer is a proof and False means unknown.
    """
    import jax
    import jax.numpy as jnp

    from ._jaxpr import eval_jaxpr

    def tangent(consts, y):
        return jax.jvp(lambda v: eval_jaxpr(tail, consts, v), (y,), (jnp.ones_like(y),))[1]

    try:
        structs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in const_avals]
        closed = jax.make_jaxpr(tangent)(structs, jax.ShapeDtypeStruct(y_aval.shape, y_aval.dtype))
        with jax.ensure_compile_time_eval():
            outs = _symbolic(closed.jaxpr, list(closed.consts), None)
    except Exception:  # noqa: BLE001 -- structure could not decide: not a proof
        return False
    return bool(outs) and all(_is_zero(v) for v in outs)


def _is_zero(value: Any) -> bool:
    import numpy as np

    if isinstance(value, dict):
        return not value
    if isinstance(value, _Opaque | _Scaled) or value is None:
        return False
    arr = np.asarray(value)
    return arr.dtype.kind == "V" or not np.any(arr)  # float0 (an integer's tangent) or zeros


class _Opaque:
    """A Var the rules cannot express (its own atom)."""


class _Scaled:
    """An unknown scalar times a value the rules express (an array or a linear combination):
    what if-conversion makes of a tangent, ``select_n(p, 0, T)`` with a scalar predicate
    ``p`` (a top-level ``cond``). ``gate`` names the scalar (the predicate and which cases hold
    ``T``); an equation homogeneous in the gate's values maps them to the gate times the
    equation on ``T`` (a normalisation's ``T - mean(T)`` is still seen to vanish)."""

    def __init__(self, gate: Any, value: Any):
        self.gate, self.value = gate, value


def _symbolic(jaxpr: Any, consts: list, args: list | None) -> list:
    """Values of ``jaxpr``'s outvars: arrays (concrete), ``{(atom, maps): coeff}`` (a linear
    combination) or ``_Opaque``. ``args`` None: every invar is an atom."""
    env: dict = {}
    for var, value in zip(jaxpr.constvars, consts):
        env[var] = value
    for k, var in enumerate(jaxpr.invars):
        env[var] = {(id(var), ()): 1.0} if args is None else args[k]

    def read(atom: Any) -> Any:
        return atom.val if isinstance(atom, _compat.Literal) else env[atom]

    for eqn in jaxpr.eqns:
        vals = [read(a) for a in eqn.invars]
        outs = _symbolic_eqn(eqn, vals)
        for var, value in zip(eqn.outvars, outs):
            env[var] = {(id(var), ()): 1.0} if isinstance(value, _Opaque) else value
    return [read(a) for a in jaxpr.outvars]


def _symbolic_eqn(eqn: Any, vals: list) -> list:
    import numpy as np

    name = eqn.primitive.name
    if any(isinstance(v, _Scaled) for v in vals):
        return _scaled_eqn(eqn, vals)
    concrete = [not isinstance(v, dict) for v in vals]
    if name == "select_n" and not concrete[0] and not eqn.invars[0].aval.shape:
        gated = _gated_select(vals)
        if gated is not None:
            return [gated]
    if all(concrete):
        out = eqn.primitive.bind(*vals, **eqn.params)
        return list(out) if eqn.primitive.multiple_results else [out]
    if name in CALL_PRIMITIVE_NAMES and "jaxpr" in eqn.params:
        closed = eqn.params["jaxpr"]
        return _symbolic(closed.jaxpr, list(closed.consts), vals)
    opaque = [_Opaque() for _ in eqn.outvars]
    if name == "custom_lin" and all(_is_zero(v) for v in vals[eqn.params["num_res"] :]):
        return [{} for _ in eqn.outvars]  # a custom_vjp's tangent map: linear in the tangents
    if len(eqn.outvars) != 1:
        return opaque
    out_shape = tuple(eqn.outvars[0].aval.shape)
    zeros = [_is_zero(v) for v in vals]
    if name in ("mul", "dot_general") and any(zeros):
        return [{}]
    if name == "div" and zeros[0]:
        return [{}]
    if name == "select_n" and all(zeros[1:]):
        return [{}]
    if name in _LINEAR_MAPS and isinstance(vals[0], dict):
        key = (name, repr(sorted(eqn.params.items())), tuple(eqn.invars[0].aval.shape))
        return [{(atom, (*maps, key)): c for (atom, maps), c in vals[0].items()}]
    if name == "neg":
        return [{k: -c for k, c in vals[0].items()}]
    if name in _ADDITIVE and all(isinstance(v, dict) or z for v, z in zip(vals, zeros)):
        if any(tuple(v.aval.shape) != out_shape for v in eqn.invars):
            return opaque
        total = dict(vals[0]) if isinstance(vals[0], dict) else {}
        for k, c in (vals[1] if isinstance(vals[1], dict) else {}).items():
            total[k] = total.get(k, 0.0) + _ADDITIVE[name] * c
        return [{k: c for k, c in total.items() if c != 0.0}]
    if name in ("mul", "div") and concrete.count(True) == 1:
        at = concrete.index(False)  # the linear combination; the other operand is concrete
        arr = np.asarray(vals[1 - at])
        uniform = arr.size > 0 and bool(np.all(arr == arr.reshape(-1)[0]))
        scale = float(arr.reshape(-1)[0]) if uniform else 0.0
        same = tuple(eqn.invars[at].aval.shape) == out_shape
        if uniform and same and (name == "mul" or (at == 0 and scale != 0.0)):
            factor = scale if name == "mul" else 1.0 / scale
            return [{k: c * factor for k, c in vals[at].items()}]
    return opaque


def _gated_select(vals: list) -> Any:
    """``select_n(p, *cases)`` with an unknown scalar ``p`` and cases that are zero or one value
    ``T`` (an array or a linear combination): ``T`` times an unknown scalar (``None`` for
    other cases)."""
    import numpy as np

    cases = vals[1:]
    if any(isinstance(v, _Scaled) for v in cases):
        return None
    live = [k for k, v in enumerate(cases) if not _is_zero(v)]
    if not live:
        return cases[0]
    first = cases[live[0]]

    def same(value: Any) -> bool:
        if isinstance(first, dict) or isinstance(value, dict):
            return isinstance(first, dict) and isinstance(value, dict) and value == first
        return bool(np.array_equal(np.asarray(value), np.asarray(first)))

    if not all(same(cases[k]) for k in live[1:]):
        return None
    return _Scaled((tuple(sorted(vals[0].items())), tuple(live)), first)


def _scaled_eqn(eqn: Any, vals: list) -> list:
    """An equation on ``_Scaled`` values of one gate, homogeneous of degree one in them (a
    linear map of one, a sum of several, a product or quotient of one by an unscaled value):
    the gate times the equation on their values; anything else is opaque."""
    name = eqn.primitive.name
    scaled = [k for k, v in enumerate(vals) if isinstance(v, _Scaled)]
    if len(eqn.outvars) != 1 or len({vals[k].gate for k in scaled}) != 1:
        return [_Opaque() for _ in eqn.outvars]
    if name in _ADDITIVE or name == "select_n":  # terms / cases: the gate's or zero
        first = 1 if name == "select_n" else 0  # a select's predicate is not a case
        homogeneous = all(k in scaled or _is_zero(v) for k, v in enumerate(vals) if k >= first)
        homogeneous &= 0 not in scaled or first == 0
    elif name in ("mul", "dot_general"):
        homogeneous = len(scaled) == 1
    elif name == "div":
        homogeneous = scaled == [0]
    else:
        homogeneous = name in _LINEAR_MAPS or name == "neg"
    if not homogeneous:
        return [_Opaque()]
    gate = vals[scaled[0]].gate
    out = _symbolic_eqn(eqn, [v.value if isinstance(v, _Scaled) else v for v in vals])[0]
    if isinstance(out, _Opaque) or _is_zero(out):
        return [out]
    return [_Scaled(gate, out)]
