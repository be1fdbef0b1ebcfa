"""Which equations keep every position of a hidden value in place (the diagonal whitelist).

An equation is *position-preserving* when output position ``p`` depends on its hidden-derived
inputs only at position ``p``. Only then is the per-position block of the h -> h Jacobian
obtained from one vector-Jacobian product per state (a column sum equals the diagonal). Any
primitive not listed here (``dot_general``, ``conv_general_dilated``, reductions, ``cumsum``,
gathers/scatters, ``concatenate``, ``slice``, ``pad``, ``rev``, ``sort``, control flow, ...)
is treated as coupling positions.
"""

from __future__ import annotations

from typing import Any

from etp_viz import _compat

from ._jaxpr import CALL_PRIMITIVE_NAMES, CUSTOM_CALL_PRIMITIVE_NAMES, sub_jaxprs

__all__ = ["carries_no_derivative", "is_position_preserving", "is_tail_position_preserving"]

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
    if name in _REDUCTIONS or name in ("cumsum", "cumprod", "cummax", "cummin"):
        shape = _shape(eqn.invars[0])
        axes = eqn.params.get("axes", (eqn.params.get("axis", 0),))
        return all(shape[a] == 1 for a in axes)
    if name in CUSTOM_CALL_PRIMITIVE_NAMES or name in CALL_PRIMITIVE_NAMES:
        return all(_body_preserving(body, cache) for _, body in sub_jaxprs(eqn))
    return _is_gradient_enabled_etp(eqn.primitive)


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
    return is_position_preserving(eqn, dependent, cache)


def _broadcasts(shape: tuple[int, ...], out: tuple[int, ...]) -> bool:
    """``shape`` broadcasts to ``out`` (numpy rules: right-aligned, each axis 1 or equal)."""
    if len(shape) > len(out):
        return False
    tail = out[len(out) - len(shape) :]
    return all(a in (1, b) for a, b in zip(shape, tail))
