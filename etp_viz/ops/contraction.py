r"""Einsum ETP primitive ``etp_einsum`` and :func:`einsum`: a weight contraction given by an
explicit two-operand einsum string ``'<x>,<w>-><out>'`` (static param ``spec``).

Write :math:`X`, :math:`W`, :math:`O` for the letters of ``x``, the weight and the output.
:math:`y_O = \sum x_X W_W` summed over the letters not in :math:`O`. An output element
:math:`y_O` depends only on the weight entries whose output letters (:math:`W \cap O`) agree
with it, so the D-RTRL trace (one state slice) is indexed by the output letters the weight
does not carry, :math:`P = O \setminus W` (batch, positions), followed by the weight's own
letters:

.. math:: \epsilon_{P,W} = \partial h_{O}/\partial W_{W}, \qquad
   \text{layout } (*P, *W.\mathrm{shape}).

E.g. ``'bi,io->bo'`` gives ``(B, I, O)`` (``etp_mm``'s layout) and ``'bgi,gio->bgo'`` gives
``(B, G, I, O)`` (``etp_gmm``'s). The rules are built from the string:

* ``xy_to_etrace``: :math:`\epsilon_{P,W} = (\sum_{X \setminus (O \cup W)} x_X)\, g_O`
  broadcast into the trace letters :math:`P \cup W`;
* ``yw_to_w``: :math:`\epsilon_{P,W}\, g_O` (``g`` broadcast into the trace letters);
* ``xy_to_dw``: the VJP of the forward;
* ``etrace_to_dw``: ``einsum('<P W>,<O>-><W>')`` (precision ``HIGHEST``).

Every weight letter must appear in ``x`` or in the output (a weight axis summed on its own
would give a trace axis that neither ``x`` nor ``g`` indexes); ``...``, repeated letters within
one operand and implicit output (no ``->``) are rejected with an error naming the problem.
"""

from __future__ import annotations

import functools
import string
from typing import Any

import jax
import jax.numpy as jnp

from .._compat import batching
from ._common import (
    attach_unit,
    init_pp_output_shaped,
    reject_states,
    shape_dtype,
    split_unit,
    vjp_weights,
    zeros_trace,
)
from ._registry import ETPPrimitiveSpec, fallback_batching, register_primitive_spec, sum_to_shape

__all__ = ["etp_einsum_p", "einsum", "parse_spec"]

_HIGHEST = jax.lax.Precision.HIGHEST
_EXAMPLE = "einsum('bi,io->bo', x, w) or einsum('bgi,gio->bgo', x, w)"


def _spec_error(spec: Any, problem: str) -> ValueError:
    return ValueError(
        f"etp_viz.einsum: invalid spec {spec!r}: {problem}. Expected an explicit two-operand "
        f"spec 'x_letters,weight_letters->out_letters', e.g. {_EXAMPLE}."
    )


@functools.lru_cache(maxsize=256)
def parse_spec(spec: str) -> tuple[str, str, str]:
    """``(x_letters, w_letters, out_letters)`` of a valid spec (spaces ignored).

    Raises
    ------
    ValueError
        Naming what is wrong: no ``->``, not two operands, ``...``, a non-letter, a repeated
        letter, an output letter in no operand, or a weight letter in neither ``x`` nor the
        output.
    """
    if not isinstance(spec, str):
        raise TypeError(f"etp_viz.einsum: spec must be a string, got {type(spec).__name__}")
    text = spec.replace(" ", "")
    if "..." in text:
        raise _spec_error(spec, "ellipsis '...' is not supported; name every axis")
    if text.count("->") != 1:
        raise _spec_error(spec, "it needs exactly one '->' (implicit output is not supported)")
    inputs, out = text.split("->")
    operands = inputs.split(",")
    if len(operands) != 2:
        raise _spec_error(spec, f"it has {len(operands)} operand(s), exactly 2 (x, weight) needed")
    xs, ws = operands
    for role, letters in (("x", xs), ("weight", ws), ("output", out)):
        bad = sorted({c for c in letters if c not in string.ascii_letters})
        if bad:
            raise _spec_error(spec, f"the {role} subscripts contain non-letters {bad}")
        repeated = sorted({c for c in letters if letters.count(c) > 1})
        if repeated:
            raise _spec_error(
                spec, f"letter(s) {repeated} repeat within the {role} subscripts (diagonals)"
            )
    missing = sorted(set(out) - set(xs) - set(ws))
    if missing:
        raise _spec_error(spec, f"output letter(s) {missing} appear in neither operand")
    lone = sorted(set(ws) - set(xs) - set(out))
    if lone:
        raise _spec_error(
            spec,
            f"weight letter(s) {lone} appear in neither x nor the output (a weight axis summed "
            "on its own); sum the weight over that axis before the op",
        )
    return xs, ws, out


def _trace_letters(spec: str) -> str:
    """Trace letters: output letters not on the weight (in output order), then the weight's."""
    xs, ws, out = parse_spec(spec)
    return "".join(c for c in out if c not in ws) + ws


def _broadcast_into(value, letters: str, target: str):
    """``value`` (axes named by ``letters`` ⊆ ``target``) transposed and reshaped so that it
    broadcasts against an array whose axes are named by ``target``."""
    order = sorted(range(len(letters)), key=lambda i: target.index(letters[i]))
    value = jnp.transpose(value, order)
    placed = [letters[i] for i in order]
    shape = [value.shape[placed.index(c)] if c in placed else 1 for c in target]
    return value.reshape(shape)


def _einsum_impl(x, weight, *, spec: str):
    return jnp.einsum(spec, x, weight)


def einsum_trainable_invars(params: dict) -> dict[str, int]:
    """The weight is invar 1."""
    return {"weight": 1}


def einsum_yw_to_w(hidden_dim, trace: dict, *, spec: str) -> dict:
    """``trace[P, W] * g[O]`` with ``g`` broadcast into the trace letters (no reduction)."""
    out_letters = parse_spec(spec)[2]
    g = _broadcast_into(jnp.asarray(hidden_dim), out_letters, _trace_letters(spec))
    return {"weight": trace["weight"] * g}


def einsum_xy_to_dw(x, hidden_dim, weights: dict, *, spec: str) -> dict:
    """VJP of the forward w.r.t. the weight with cotangent ``g``."""
    return vjp_weights(lambda w: _einsum_impl(x, w["weight"], spec=spec), weights, hidden_dim)


def einsum_xy_to_etrace(x, hidden_dim, weights: dict, *, spec: str) -> dict:
    """Unreduced trace: ``x`` summed over its letters in neither output nor weight, times
    ``g``, both broadcast into the trace letters (an exact product, no contraction)."""
    xs, ws, out = parse_spec(spec)
    target = _trace_letters(spec)
    dtype = jnp.result_type(x, hidden_dim, weights["weight"])
    x = jnp.asarray(x, dtype)
    summed = tuple(i for i, c in enumerate(xs) if c not in target)
    if summed:
        x = jnp.sum(x, axis=summed)
        xs = "".join(c for c in xs if c in target)
    x_b = _broadcast_into(x, xs, target)
    g_b = _broadcast_into(jnp.asarray(hidden_dim, dtype), out, target)
    return {"weight": x_b * g_b}  # every trace letter is on x or on g: the full layout


def einsum_etrace_to_dw(trace: dict, dl_dh, weights: dict, *, spec: str) -> dict:
    """``einsum('<trace>,<out>-><weight>')``: the output-only letters are summed."""
    xs, ws, out = parse_spec(spec)
    eps = trace["weight"]
    target = _trace_letters(spec)
    y_shape = tuple(eps.shape[target.index(c)] for c in out)
    if jnp.shape(dl_dh) != y_shape:  # h broadcast from y: element-wise, then reduce
        weighted = einsum_yw_to_w(dl_dh, trace, spec=spec)["weight"]
        return {"weight": sum_to_shape(weighted, jnp.shape(weights["weight"]))}
    dl_dh = jnp.asarray(dl_dh, eps.dtype)
    return {"weight": jnp.einsum(f"{target},{out}->{ws}", eps, dl_dh, precision=_HIGHEST)}


def einsum_init_drtrl(x_var, y_var, weight_vars: dict, num_hidden_state: int, **params):
    """``(*P, *W.shape, S)``: ``P`` the output letters the weight does not carry."""
    spec = params.get("spec")
    if spec is None:
        raise ValueError("etp_einsum's init_drtrl needs the equation's `spec` param")
    xs, ws, out = parse_spec(spec)
    y_shape, dtype = shape_dtype(y_var)
    w_shape, _ = shape_dtype(weight_vars["weight"])
    sizes = {**dict(zip(out, y_shape)), **dict(zip(ws, w_shape))}
    shape = tuple(sizes[c] for c in _trace_letters(spec))
    return {"weight": zeros_trace(shape, num_hidden_state, dtype)}


etp_einsum_p = register_primitive_spec(
    ETPPrimitiveSpec(
        name="etp_einsum",
        impl=_einsum_impl,
        yw_to_w=einsum_yw_to_w,
        xy_to_dw=einsum_xy_to_dw,
        init_drtrl=einsum_init_drtrl,
        init_pp=init_pp_output_shaped,
        trainable_invars_fn=einsum_trainable_invars,
        x_invar_index=0,
        batched=False,
        xy_to_etrace=einsum_xy_to_etrace,
        etrace_to_dw=einsum_etrace_to_dw,
    )
)


def _einsum_batcher(args, dims, *, spec: str):
    # Only x batched: the vmapped axis becomes a fresh letter of x (where it is, no transpose)
    # and the leading letter of the output, so the result is again one etp_einsum equation.
    xs, ws, out = parse_spec(spec)
    free = [c for c in string.ascii_letters if c not in xs + ws + out]
    if dims[1] is not None or not free:
        return fallback_batching(etp_einsum_p, _einsum_impl, args, dims, spec=spec)
    new, axis = free[0], dims[0]
    batched_spec = f"{xs[:axis]}{new}{xs[axis:]},{ws}->{new}{out}"
    return etp_einsum_p.bind(*args, spec=batched_spec), 0


batching.primitive_batchers[etp_einsum_p] = _einsum_batcher


def _check_shapes(spec: str, xs: str, ws: str, x_shape, w_shape) -> None:
    for role, letters, shape in (("x", xs, x_shape), ("weight", ws, w_shape)):
        if len(letters) != len(shape):
            raise ValueError(
                f"etp_viz.einsum: spec {spec!r} names {len(letters)} axes for {role} "
                f"('{letters}') but {role} has shape {tuple(shape)} ({len(shape)} axes). Fix: "
                f"give one letter per axis of {role}."
            )
    sizes = dict(zip(xs, x_shape))
    for c, n in zip(ws, w_shape):
        if c in sizes and sizes[c] != n:
            raise ValueError(
                f"etp_viz.einsum: letter '{c}' of spec {spec!r} has size {sizes[c]} in x "
                f"{tuple(x_shape)} but {n} in the weight {tuple(w_shape)}; shared letters need "
                "equal sizes."
            )


def einsum(spec: str, x: Any, weight: Any) -> Any:
    r"""ETP-marked weight contraction ``jnp.einsum(spec, x, weight)``.

    ``spec`` is an explicit two-operand einsum string, ``x`` first and the trainable weight
    second (``'bi,io->bo'``, ``'bgi,gio->bgo'``, ``'bti,io->bto'``...). The D-RTRL trace has
    the output axes the weight does not carry (batch, positions) followed by the weight's axes.
    saiunit quantities are accepted (output unit: ``x``'s times the weight's).

    Parameters
    ----------
    spec : str
        ``'<x letters>,<weight letters>-><output letters>'``; no ``...``, no repeated letter
        within one operand, every weight letter in ``x`` or in the output.
    x : array or Quantity
    weight : array or Quantity

    Returns
    -------
    array or Quantity, shaped by the output letters

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> einsum("bgi,gio->bgo", jnp.ones((4, 2, 3)), jnp.ones((2, 3, 5))).shape
    (4, 2, 5)
    """
    xs, ws, _ = parse_spec(spec)
    reject_states(
        "etp_viz.einsum", "etp_viz.einsum('bi,io->bo', x, self.W.value)", x=x, weight=weight
    )
    x_m, x_unit = split_unit(x)
    w_m, w_unit = split_unit(weight)
    x_m, w_m = jnp.asarray(x_m), jnp.asarray(w_m)
    _check_shapes(spec, xs, ws, x_m.shape, w_m.shape)
    y = etp_einsum_p.bind(x_m, w_m, spec=spec.replace(" ", ""))
    return attach_unit(y, x_unit * w_unit)
