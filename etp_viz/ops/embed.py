r"""Embedding ETP primitive ``etp_emb`` and :func:`embedding`.

Forward: :math:`y_{p,d} = T_{\mathrm{ids}_p, d}` for integer ``ids`` of any shape ``P`` (every
axis of ``ids`` is a position axis, there is no feature axis) and a table ``T`` of shape
``(V, D)``; ``y`` has shape ``(*P, D)``. ``ids`` are integers: no gradient flows to them
(their JVP tangent is ``float0``). Ids in ``[-V, V)`` index like numpy (negative ones count
from the end); ids outside that range give a row of NaN (``jnp.take(mode='fill')``) instead of
being silently clipped.

The rules are those of a dense product with the one-hot input
:math:`x_{p,v} = [\mathrm{ids}_p = v]`, written without ever forming ``x @ T``:

* ``xy_to_etrace``: :math:`\epsilon_{p,v,d} = [\mathrm{ids}_p = v]\, g_{p,d}`;
* ``yw_to_w``: :math:`\epsilon_{p,v,d} \leftarrow \epsilon_{p,v,d}\, g_{p,d}`;
* ``xy_to_dw``: :math:`\sum_p [\mathrm{ids}_p = v]\, g_{p,d}` (a scatter-add, the VJP);
* ``etrace_to_dw``: :math:`\sum_p \epsilon_{p,v,d}\, \partial L/\partial h_{p,d}`.

Trace layout (one state slice): ``(*P, V, D)``, i.e. ``V`` entries per hidden unit
:math:`h_{p,d}` (the trace is diagonal in ``d``, so never ``V x D`` per hidden unit).

Limitation: the trace is *dense in the table's rows*. At one step only row ``ids_p`` is
non-zero, but the recursion :math:`\epsilon^t = D^t \epsilon^{t-1} + \dots` accumulates a
different row at every step, so after ``t`` steps up to ``min(t, V)`` rows per position are
non-zero and no fixed-size row-sparse layout is exact. The registry's trace layout is a fixed
array shape per (relation, hidden group), so the exact layout is the dense ``(*P, V, D)`` one
(the size of a dense ``(V, D)`` weight trace per sample, like ``etp_mm``).

ES-D-RTRL keeps an exponential average of the input; the lookup is linear in the one-hot rows
(:math:`y_p = \mathrm{onehot}(\mathrm{ids}_p)\, T`), so its input trace averages those rows
(``pp_x_repr``): :math:`\bar x^t_{p,v} = \alpha_x \bar x^{t-1}_{p,v} + [\mathrm{ids}^t_p = v]`,
shape ``(*P, V)`` (dense in the rows, for the reason above), and ``xy_to_dw`` takes that float
representation as well as integer ids: :math:`\sum_p \bar x_{p,v}\, g_{p,d}`. With
:math:`\alpha_x = 0` the learner keeps the ids themselves (same gradient, ``V`` times smaller).
"""

from __future__ import annotations

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
from ._registry import ETPPrimitiveSpec, fallback_batching, register_primitive_spec
from .dense import dense_etrace_to_dw, dense_yw_to_w

__all__ = ["etp_emb_p", "embedding"]


def _embedding_impl(ids, table):
    return jnp.take(table, ids, axis=0, mode="fill")


def embedding_trainable_invars(params: dict) -> dict[str, int]:
    """The table is invar 1."""
    return {"weight": 1}


def _one_hot(ids, num_rows: int, dtype):
    """``[ids_p == v]`` with numpy's negative indexing; out-of-range ids give a zero row."""
    ids = jnp.asarray(ids)
    return jax.nn.one_hot(jnp.where(ids < 0, ids + num_rows, ids), num_rows, dtype=dtype)


def embedding_yw_to_w(hidden_dim, trace: dict, **params) -> dict:
    """``trace[..., v, d] * g[..., d]`` (the dense rule: ``expand_dims(g, -2)``)."""
    return dense_yw_to_w(hidden_dim, trace)


def embedding_xy_to_dw(ids, hidden_dim, weights: dict, **params) -> dict:
    """VJP of ``table[ids]`` w.r.t. the table: a scatter-add of ``g`` into the rows ``ids``.

    Float ``ids`` are rows in the :func:`embedding_pp_x_repr` representation (ES-D-RTRL's
    averaged one-hot input trace, ``(*P, V)``): ``Σ_p x[p, v] g[p, d]``, the VJP of
    ``x @ table``."""
    if jnp.issubdtype(jnp.result_type(ids), jnp.inexact):
        rows = jnp.reshape(ids, (-1, ids.shape[-1]))
        g = jnp.reshape(hidden_dim, (-1, hidden_dim.shape[-1])).astype(rows.dtype)
        grad = jnp.einsum("pv,pd->vd", rows, g)
        return {"weight": grad.astype(jnp.result_type(weights["weight"]))}
    return vjp_weights(lambda w: _embedding_impl(ids, w["weight"]), weights, hidden_dim)


def embedding_pp_x_repr(ids, weights: dict) -> Any:
    """ES-D-RTRL's input representation: the one-hot rows ``[ids_p == v]``, ``(*P, V)``, in
    the table's dtype (``weights``: arrays or abstract values)."""
    table = weights["weight"]
    return _one_hot(ids, table.shape[0], table.dtype)


def embedding_xy_to_etrace(ids, hidden_dim, weights: dict, **params) -> dict:
    """Unreduced trace ``one_hot(ids) ⊗ g``: ``(*P, V, D)``."""
    table = weights["weight"]
    dtype = jnp.result_type(table, hidden_dim)
    rows = _one_hot(ids, table.shape[0], dtype)
    return {"weight": jnp.expand_dims(rows, -1) * jnp.expand_dims(hidden_dim, -2).astype(dtype)}


def embedding_etrace_to_dw(trace: dict, dl_dh, weights: dict, **params) -> dict:
    """``Σ_p trace[p, v, d] * dL/dh[p, d]`` (the dense contraction, ``contract_trace``)."""
    return dense_etrace_to_dw(trace, dl_dh, weights)


def embedding_init_drtrl(x_var, y_var, weight_vars: dict, num_hidden_state: int, **params):
    """``(*ids.shape, V, D, S)`` in the output dtype."""
    ids_shape, _ = shape_dtype(x_var)
    _, dtype = shape_dtype(y_var)
    table_shape, _ = shape_dtype(weight_vars["weight"])
    return {"weight": zeros_trace((*ids_shape, *table_shape), num_hidden_state, dtype)}


etp_emb_p = register_primitive_spec(
    ETPPrimitiveSpec(
        name="etp_emb",
        impl=_embedding_impl,
        yw_to_w=embedding_yw_to_w,
        xy_to_dw=embedding_xy_to_dw,
        init_drtrl=embedding_init_drtrl,
        init_pp=init_pp_output_shaped,
        trainable_invars_fn=embedding_trainable_invars,
        x_invar_index=0,
        batched=False,
        xy_to_etrace=embedding_xy_to_etrace,
        etrace_to_dw=embedding_etrace_to_dw,
        pp_x_repr=embedding_pp_x_repr,
    )
)


def _embedding_batcher(args, dims, **params):
    # ids may have any shape: the vmapped axis is one more position axis, in place (output
    # axis k is ids axis k), so no transpose is needed.
    if dims[1] is not None:
        return fallback_batching(etp_emb_p, _embedding_impl, args, dims, **params)
    return etp_emb_p.bind(*args, **params), dims[0]


batching.primitive_batchers[etp_emb_p] = _embedding_batcher


def embedding(ids: Any, table: Any) -> Any:
    r"""ETP-marked embedding lookup :math:`y = T[\mathrm{ids}]`.

    Parameters
    ----------
    ids : integer array, any shape ``P``
        Row indices into ``table``; no gradient flows to them.
    table : array or Quantity, shape ``(V, D)``
        The trainable embedding table (its unit is the output's unit).

    Returns
    -------
    array or Quantity, shape ``(*P, D)``

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> table = jnp.arange(6.0).reshape(3, 2)
    >>> embedding(jnp.array([[2, 0]]), table).tolist()
    [[[4.0, 5.0], [0.0, 1.0]]]
    """
    reject_states(
        "etp_viz.embedding", "etp_viz.embedding(ids, self.table.value)", ids=ids, table=table
    )
    ids_m, ids_unit = split_unit(ids)
    t_m, t_unit = split_unit(table)
    ids_m, t_m = jnp.asarray(ids_m), jnp.asarray(t_m)
    if not ids_unit.is_unitless or not jnp.issubdtype(ids_m.dtype, jnp.integer):
        kind = f"unit '{ids_unit}'" if not ids_unit.is_unitless else f"dtype {ids_m.dtype}"
        raise TypeError(
            f"etp_viz.embedding: ids must be a unitless integer array (row indices), got {kind}."
            " Fix: pass integer ids, e.g. `embedding(tokens.astype(jnp.int32), table)`."
        )
    if t_m.ndim != 2:
        raise ValueError(
            f"etp_viz.embedding: the table has shape {t_m.shape}; expected (V, D) (one row of "
            "D features per id). Example: embedding(jnp.array([0, 2]), jnp.zeros((10, 4)))"
        )
    return attach_unit(etp_emb_p.bind(ids_m, t_m), t_unit)
