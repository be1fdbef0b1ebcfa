"""saiunit support for the user ops: bind mantissas, re-attach the unit, convert the bias."""

from __future__ import annotations

from typing import Any

import saiunit as u

__all__ = ["UnitMismatchError", "split_unit", "attach_unit", "bias_mantissa"]


class UnitMismatchError(ValueError):
    """A bias whose physical dimension differs from the unit of ``x * weight``."""


def split_unit(value: Any) -> tuple[Any, Any]:
    """``(mantissa, unit)`` of a Quantity or a plain array (unit: saiunit's unitless)."""
    return u.get_mantissa(value), u.get_unit(value)


def attach_unit(mantissa: Any, unit: Any) -> Any:
    """Re-attach ``unit``; a dimensionless result comes back as a plain array."""
    return u.maybe_decimal(u.Quantity(mantissa, unit=unit))


def bias_mantissa(op: str, bias: Any, out_unit: Any) -> Any:
    """The bias mantissa expressed in ``out_unit`` (the unit of ``x * weight``).

    Raises
    ------
    UnitMismatchError
        When the bias has another physical dimension than ``x * weight``.
    """
    if bias is None:
        return None
    mantissa, unit = split_unit(bias)
    if not unit.has_same_dim(out_unit):
        raise UnitMismatchError(
            f"{op}: the bias has unit '{unit}' (dimension {unit.dim}) but x * weight has unit "
            f"'{out_unit}' (dimension {out_unit.dim}); a sum needs one physical dimension. "
            f"Fix: give the bias in a unit of that dimension, e.g. `bias = values * {out_unit}`"
            " (or drop the units from x and weight)."
        )
    if unit == out_unit:
        return mantissa
    return u.Quantity(mantissa, unit=unit).to_decimal(out_unit)
