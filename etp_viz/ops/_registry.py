r"""ETP primitives: the :class:`ETPPrimitive` class, :func:`register_primitive` and the registries.

An ETP primitive is a JAX primitive that marks a weight operation ``y = f(x, W)`` so that the
compiler can find it in a jaxpr by *identity* (``eqn.primitive in ETP_PRIMITIVES``). Every
standard JAX rule (impl, abstract eval, lowering, JVP, batching; transpose follows from the JVP)
is derived from one plain-JAX implementation function. Only the online-learning rules are
written by hand, one set per primitive, all keyed by trainable name (``'weight'``, ``'bias'``,
``'lora_b'`` ...):

``yw_to_w(g, trace, **params) -> trace``
    The :math:`y \to W` link of :math:`D^t \epsilon^{t-1}`: multiply a trace slice by
    :math:`g = \partial h/\partial y` broadcast into the trace layout.
``xy_to_dw(x, g, weights, **params) -> dict``
    :math:`\partial (g \cdot y)/\partial W`, i.e. the VJP of the impl with cotangent ``g``.
``init_drtrl(x_var, y_var, weight_vars, S) -> dict`` / ``init_pp(...) -> array``
    Zero traces for D-RTRL (parameter dimension) and ES-D-RTRL (output dimension).
``xy_to_etrace(x, g, weights, **params) -> dict`` (etp_viz extension)
    :math:`\mathrm{diag}(D_f^t) \otimes x^t` *without* any reduction over batch or output
    positions, in the ``init_drtrl`` layout minus the trailing state axis.
``etrace_to_dw(trace, dl_dh, weights, **params) -> dict`` (etp_viz extension)
    Contract one trace slice with the learning signal into parameter-shaped gradients.
``pp_x_repr(x, weights) -> array`` (optional, :class:`ETPPrimitiveSpec` only)
    The input as ES-D-RTRL's input trace averages it, when ``x`` itself cannot be averaged
    (embedding ids: their one-hot rows); ``xy_to_dw`` must accept it as ``x``.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._compat import Primitive, ShapedArray, ad, batching, mlir

__all__ = [
    "ETPPrimitive",
    "ETPPrimitiveSpec",
    "register_primitive",
    "register_primitive_spec",
    "get_primitive_spec",
    "is_etp_primitive",
    "is_etp_enable_gradient_primitive",
    "is_batched_primitive",
    "get_trainable_invars",
    "get_aux_invars",
    "get_batched_counterpart",
    "get_x_invar_index",
    "get_y_outvar_index",
    "get_xy_to_etrace",
    "get_etrace_to_dw",
    "declare_elementwise",
    "get_declared_elementwise",
]

Rule = Callable[..., Any]

# Insertion-ordered dicts used as sets: iteration order is registration order (deterministic),
# membership is by primitive identity (JAX primitives hash by address).
ETP_PRIMITIVES: dict[Primitive, None] = {}
BATCHED_PRIMITIVES: dict[Primitive, None] = {}
GRADIENT_ENABLED_PRIMITIVES: dict[Primitive, None] = {}
ETP_RULES_YW_TO_W: dict[Primitive, Rule] = {}
ETP_RULES_XY_TO_DW: dict[Primitive, Rule] = {}
ETP_RULES_INIT_DRTRL: dict[Primitive, Rule] = {}
ETP_RULES_INIT_PP: dict[Primitive, Rule] = {}
ETP_RULES_XY_TO_ETRACE: dict[Primitive, Rule] = {}
ETP_RULES_ETRACE_TO_DW: dict[Primitive, Rule] = {}
ETP_TRAINABLE_INVARS_FNS: dict[Primitive, Callable[[dict], dict[str, int]]] = {}
#: ``params -> {name: invar_index}`` of non-trainable array operands (a sparse pattern's
#: indices): the learners pass their values to every rule as keyword arguments
ETP_AUX_INVARS_FNS: dict[Primitive, Callable[[dict], dict[str, int]]] = {}
ETP_X_INVAR_INDICES: dict[Primitive, int | None] = {}
ETP_Y_OUTVAR_INDICES: dict[Primitive, int] = {}
ETP_PRIMITIVE_SPECS: dict[Primitive, ETPPrimitiveSpec] = {}
#: unbatched primitive -> the batched primitive its ``jax.vmap`` over ``x`` re-binds
BATCHED_COUNTERPARTS: dict[Primitive, Primitive] = {}
#: plain (non-ETP) primitive, or primitive name -> declared element-wise (True) or
#: position-mixing (False); see :func:`declare_elementwise`
DECLARED_ELEMENTWISE: dict[Primitive | str, bool] = {}

_DEFAULT_TRAINABLE = {"weight": 1}


class ETPPrimitive(Primitive):
    """A JAX primitive that carries ETP rules (returned by :func:`register_primitive`).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from etp_viz.ops import register_primitive
    >>> p = register_primitive("doc_demo_mm", lambda x, w: x @ w, batched=True)
    >>> p.bind(jnp.ones((2, 3)), jnp.ones((3, 4))).shape
    (2, 4)
    """

    def register_yw_to_w(self, fn: Rule) -> None:
        """Install the D-RTRL trace propagation rule ``(g, trace, **params) -> trace``."""
        ETP_RULES_YW_TO_W[self] = fn

    def register_xy_to_dw(self, fn: Rule) -> None:
        """Install the weight-gradient rule ``(x, g, weights, **params) -> dict``."""
        ETP_RULES_XY_TO_DW[self] = fn

    def register_init_drtrl(self, fn: Rule) -> None:
        """Install the D-RTRL trace initialiser ``(x_var, y_var, weight_vars, S) -> dict``."""
        ETP_RULES_INIT_DRTRL[self] = fn

    def register_init_pp(self, fn: Rule) -> None:
        """Install the ES-D-RTRL df-trace initialiser ``(x_var, y_var, weight_vars, S) -> y``."""
        ETP_RULES_INIT_PP[self] = fn

    def register_xy_to_etrace(self, fn: Rule) -> None:
        """Install the unreduced instantaneous trace rule ``(x, g, weights, **params) -> dict``."""
        ETP_RULES_XY_TO_ETRACE[self] = fn

    def register_etrace_to_dw(self, fn: Rule) -> None:
        """Install the trace contraction rule ``(trace, dl_dh, weights, **params) -> dict``."""
        ETP_RULES_ETRACE_TO_DW[self] = fn

    def register_etp_rules(
        self,
        *,
        yw_to_w: Rule | None = None,
        xy_to_dw: Rule | None = None,
        init_drtrl: Rule | None = None,
        init_pp: Rule | None = None,
        xy_to_etrace: Rule | None = None,
        etrace_to_dw: Rule | None = None,
    ) -> None:
        """Install several ETP rules at once; arguments left as ``None`` are skipped."""
        tables = (
            (yw_to_w, ETP_RULES_YW_TO_W),
            (xy_to_dw, ETP_RULES_XY_TO_DW),
            (init_drtrl, ETP_RULES_INIT_DRTRL),
            (init_pp, ETP_RULES_INIT_PP),
            (xy_to_etrace, ETP_RULES_XY_TO_ETRACE),
            (etrace_to_dw, ETP_RULES_ETRACE_TO_DW),
        )
        for fn, table in tables:
            if fn is not None:
                table[self] = fn


def _zeros_like_tangent(primal: Any, tangent: Any) -> Any:
    dtype = jnp.result_type(primal)
    if not jnp.issubdtype(dtype, jnp.inexact):  # integer / bool input (embedding ids)
        return np.zeros(jnp.shape(primal), jax.dtypes.float0)
    if isinstance(tangent, ad.Zero):
        return jnp.zeros(jnp.shape(primal), dtype)
    return tangent


#: Frames in these directories are machinery between the user's op call and the batching rule.
_INTERNAL_DIRS = (os.path.dirname(jax.__file__), os.path.dirname(os.path.abspath(__file__)))


def _user_stacklevel() -> int:
    """``warnings.warn`` stacklevel of the first frame outside JAX and ``etp_viz.ops``.

    Level 1 is the caller of this function's caller's ``warn``; the depth of JAX's batching
    machinery differs between versions, so it is counted, not hard-coded.
    """
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL_DIRS):
        frame, level = frame.f_back, level + 1
    return level if frame is not None else 2


def fallback_batching(prim: Primitive, impl_fn: Callable, args, dims, **params):
    """Batch by ``vmap(impl)``: correct numbers, but the ETP marker disappears. Warns loudly.

    The warning points at the user's line that called the op (the first frame outside JAX and
    ``etp_viz.ops``).
    """
    warnings.warn(
        f"jax.vmap over ETP primitive '{prim.name}' with batch dims {tuple(dims)} has no ETP "
        "counterpart: it is replaced by plain JAX ops, so the ETP compiler will NOT recognise "
        "its weight (it will get no eligibility trace). Batch only the input x (not the "
        "weights), use the batched form of the op directly, or, for a custom unbatched "
        "primitive, register it with `batched_counterpart=<its batched primitive>`.",
        UserWarning,
        stacklevel=_user_stacklevel(),
    )
    return jax.vmap(partial(impl_fn, **params), in_axes=tuple(dims))(*args), 0


def _check_counterpart_shape(source, target, args, x_index, y, **params) -> None:
    """The counterpart's output must be the source's output with a leading batch axis."""
    specs = [jax.ShapeDtypeStruct(jnp.shape(a), jnp.result_type(a)) for a in args]
    specs[x_index] = jax.ShapeDtypeStruct(specs[x_index].shape[1:], specs[x_index].dtype)
    single = jax.eval_shape(partial(source.bind, **params), *specs)
    batch = jnp.shape(args[x_index])[0]
    if tuple(y.shape) != (batch, *single.shape):
        raise ValueError(
            f"jax.vmap of ETP primitive '{source.name}' re-binds its batched counterpart "
            f"'{target.name}', which returned shape {tuple(y.shape)} for a batch of "
            f"{batch}; expected {(batch, *single.shape)} ('{source.name}' gives "
            f"{tuple(single.shape)} per sample). Fix: the counterpart must take x with a "
            "leading batch axis, the same other operands and params, and return the "
            f"per-sample outputs stacked on axis 0; or register '{source.name}' without "
            "`batched_counterpart` (vmap then falls back to plain JAX, with a warning)."
        )


def counterpart_batcher(source: Primitive, target: Primitive, impl: Callable) -> Callable:
    """Batching rule keeping an ETP marker when only ``x`` is batched.

    ``source`` unbatched (``mv``-like): bind ``target`` (its batched counterpart) with the
    vmapped axis as the leading batch axis of ``x``. ``source is target`` (already batched,
    built-ins only): fold the vmapped axis into the batch axis, bind, and unfold. Anything else
    (a weight batched) falls back to ``vmap(impl)`` with a loud warning.
    """

    def rule(args, dims, **params):
        x_index = ETP_X_INVAR_INDICES.get(source, 0)
        if x_index is None or any(d is not None for i, d in enumerate(dims) if i != x_index):
            return fallback_batching(source, impl, args, dims, **params)
        args = list(args)
        args[x_index] = x = jnp.moveaxis(args[x_index], dims[x_index], 0)
        if source is not target:
            y = target.bind(*args, **params)
            _check_counterpart_shape(source, target, args, x_index, y, **params)
            return y, 0
        lead = x.shape[:-1]
        args[x_index] = x.reshape(-1, x.shape[-1])
        y = target.bind(*args, **params)
        return y.reshape(*lead, y.shape[-1]), 0

    return rule


def _check_counterpart_choice(name: str, batched: bool, x_invar_index, counterpart) -> None:
    fix = (
        "Fix: register the batched form first, e.g. `mm = register_primitive('my_mm', impl, "
        "batched=True)`, then `register_primitive('my_mv', impl, batched_counterpart=mm)`."
    )
    if batched:
        raise ValueError(
            f"register_primitive('{name}'): `batched_counterpart` is for unbatched primitives "
            "(its x has no batch axis); this one is `batched=True`. " + fix
        )
    if x_invar_index is None:
        raise ValueError(
            f"register_primitive('{name}'): `batched_counterpart` needs an input x to batch, "
            "but `x_invar_index` is None. " + fix
        )
    if counterpart not in BATCHED_PRIMITIVES:
        kind = "an ETP primitive registered with batched=True"
        raise TypeError(
            f"register_primitive('{name}'): `batched_counterpart` must be {kind}; got "
            f"{getattr(counterpart, 'name', counterpart)!r}. " + fix
        )


def register_primitive(
    name: str,
    impl_fn: Callable,
    *,
    batched: bool = False,
    gradient_enabled: bool = False,
    trainable_invars_fn: Callable[[dict], dict[str, int]] | None = None,
    x_invar_index: int | None = 0,
    y_outvar_index: int = 0,
    batched_counterpart: Primitive | None = None,
) -> ETPPrimitive:
    r"""Create an :class:`ETPPrimitive` whose JAX rules are all derived from ``impl_fn``.

    * impl: ``impl_fn`` itself; abstract eval: ``jax.eval_shape(impl_fn)``;
      lowering: ``mlir.lower_fun(impl_fn)``.
    * JVP: the primal is re-bound through the primitive (so the ETP marker survives
      ``jax.grad`` / ``jax.linearize``), the tangent is ``jax.jvp(impl_fn)``. The tangent map is
      made of plain linear JAX ops, so JAX derives the transpose itself.
    * batching: with ``batched_counterpart``, a ``jax.vmap`` that batches only ``x`` re-binds
      the counterpart with the vmapped axis as its leading batch axis, so the equation stays
      an ETP primitive the compiler can see. Otherwise (or when a weight is batched)
      ``jax.vmap(impl_fn)`` with a :class:`UserWarning` (the marker is lost).

    Parameters
    ----------
    name : str
        Primitive name, e.g. ``'etp_mm'``.
    impl_fn : callable
        ``impl_fn(*arrays, **params) -> array``; params must be hashable.
    batched : bool
        Whether ``x`` carries a leading batch axis.
    gradient_enabled : bool
        Identity-like primitive the compiler may walk through on ``y -> h`` (``etp_elemwise``).
    trainable_invars_fn : callable, optional
        ``params -> {trainable_name: invar_index}``; ``None`` means ``{'weight': 1}``.
    x_invar_index : int or None
        Position of ``x`` in the equation's invars (``None``: no input, e.g. elemwise).
    y_outvar_index : int
        Position of ``y`` in the equation's outvars.
    batched_counterpart : ETPPrimitive, optional
        For an unbatched primitive: the batched primitive (``batched=True``) computing the same
        thing for ``x`` with a leading batch axis, the same other operands and params, and
        the per-sample outputs stacked on axis 0 (like ``etp_mv`` -> ``etp_mm``).

    Returns
    -------
    ETPPrimitive

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> p = register_primitive("doc_scaled", lambda x, w, *, s=2.0: s * (x @ w), batched=True)
    >>> float(p.bind(jnp.ones((1, 2)), jnp.ones((2, 1)), s=3.0)[0, 0])
    6.0

    An unbatched primitive that stays ETP under ``jax.vmap``:

    >>> import jax
    >>> mv = register_primitive("doc_scaled_mv", lambda x, w, *, s=2.0: s * (x @ w),
    ...                         batched_counterpart=p)
    >>> w = jnp.ones((2, 1))
    >>> jaxpr = jax.make_jaxpr(jax.vmap(lambda x: mv.bind(x, w, s=3.0)))(jnp.ones((4, 2)))
    >>> [eqn.primitive.name for eqn in jaxpr.eqns]
    ['doc_scaled']
    """
    if batched_counterpart is not None:
        _check_counterpart_choice(name, batched, x_invar_index, batched_counterpart)
    p = ETPPrimitive(name)
    ETP_PRIMITIVES[p] = None
    if batched:
        BATCHED_PRIMITIVES[p] = None
    if gradient_enabled:
        GRADIENT_ENABLED_PRIMITIVES[p] = None
    if trainable_invars_fn is not None:
        ETP_TRAINABLE_INVARS_FNS[p] = trainable_invars_fn
    ETP_X_INVAR_INDICES[p] = x_invar_index
    ETP_Y_OUTVAR_INDICES[p] = y_outvar_index

    p.def_impl(impl_fn)

    def abstract_eval(*avals, **params):
        specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]
        out = jax.eval_shape(partial(impl_fn, **params), *specs)
        return ShapedArray(out.shape, out.dtype)

    p.def_abstract_eval(abstract_eval)
    mlir.register_lowering(p, mlir.lower_fun(impl_fn, multiple_results=False))

    def jvp(primals, tangents, **params):
        tangents = tuple(_zeros_like_tangent(x, t) for x, t in zip(primals, tangents))
        _, tangent_out = jax.jvp(partial(impl_fn, **params), tuple(primals), tangents)
        return p.bind(*primals, **params), tangent_out

    ad.primitive_jvps[p] = jvp
    if batched_counterpart is None:
        batching.primitive_batchers[p] = partial(fallback_batching, p, impl_fn)
    else:
        BATCHED_COUNTERPARTS[p] = batched_counterpart
        batching.primitive_batchers[p] = counterpart_batcher(p, batched_counterpart, impl_fn)
    return p


@dataclasses.dataclass(frozen=True)
class ETPPrimitiveSpec:
    """Everything the compiler needs to know about one ETP primitive, in one record.

    Pass it to :func:`register_primitive_spec`; recover it with :func:`get_primitive_spec`.
    ``xy_to_etrace`` / ``etrace_to_dw`` are etp_viz extensions (see ``docs/semantics.md``);
    when left ``None`` the defaults of :func:`get_xy_to_etrace` / :func:`get_etrace_to_dw` apply.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> spec = ETPPrimitiveSpec(name="doc_spec_mm", impl=lambda x, w: x @ w, batched=True,
    ...                         trainable_invars_fn=lambda params: {"weight": 1})
    >>> p = register_primitive_spec(spec)
    >>> get_primitive_spec(p) is spec, spec.weight_invar_index
    (True, 1)
    """

    name: str
    impl: Callable
    yw_to_w: Rule | None = None
    xy_to_dw: Rule | None = None
    init_drtrl: Rule | None = None
    init_pp: Rule | None = None
    trainable_invars_fn: Callable[[dict], dict[str, int]] | None = None
    x_invar_index: int | None = 0
    y_outvar_index: int = 0
    batched: bool = False
    gradient_enabled: bool = False
    xy_to_etrace: Rule | None = None
    etrace_to_dw: Rule | None = None
    batched_counterpart: Primitive | None = None
    #: ``(x, weights) -> array``: the representation ES-D-RTRL's input trace averages (same
    #: name and signature as braintrace's ``pp_x_repr``); ``None``: ``x`` itself
    pp_x_repr: Rule | None = None

    def resolve_trainable_invars(self, params: dict | None = None) -> dict[str, int]:
        """``{trainable_name: invar_index}`` for an equation with these static params."""
        if self.trainable_invars_fn is None:
            return dict(_DEFAULT_TRAINABLE)
        return dict(self.trainable_invars_fn(dict(params or {})))

    @property
    def weight_invar_index(self) -> int:
        """Invar index of the first trainable input under default params."""
        return next(iter(self.resolve_trainable_invars({}).values()))


def register_primitive_spec(spec: ETPPrimitiveSpec) -> ETPPrimitive:
    """Create the primitive described by ``spec``, install its rules and record the spec."""
    p = register_primitive(
        spec.name,
        spec.impl,
        batched=spec.batched,
        gradient_enabled=spec.gradient_enabled,
        trainable_invars_fn=spec.trainable_invars_fn,
        x_invar_index=spec.x_invar_index,
        y_outvar_index=spec.y_outvar_index,
        batched_counterpart=spec.batched_counterpart,
    )
    p.register_etp_rules(
        yw_to_w=spec.yw_to_w,
        xy_to_dw=spec.xy_to_dw,
        init_drtrl=spec.init_drtrl,
        init_pp=spec.init_pp,
        xy_to_etrace=spec.xy_to_etrace,
        etrace_to_dw=spec.etrace_to_dw,
    )
    ETP_PRIMITIVE_SPECS[p] = spec
    return p


def get_primitive_spec(primitive: Primitive) -> ETPPrimitiveSpec | None:
    """The spec a primitive was registered with, or ``None`` (class-style registration)."""
    return ETP_PRIMITIVE_SPECS.get(primitive)


def is_etp_primitive(primitive: Any) -> bool:
    """True when ``primitive`` (by identity) is a registered ETP primitive."""
    return primitive in ETP_PRIMITIVES


def is_etp_enable_gradient_primitive(primitive: Any) -> bool:
    """True for identity-like ETP primitives the compiler walks through (``etp_elemwise``)."""
    return primitive in GRADIENT_ENABLED_PRIMITIVES


def is_batched_primitive(primitive: Any) -> bool:
    """True when the primitive's ``x`` carries a leading batch axis."""
    return primitive in BATCHED_PRIMITIVES


def get_trainable_invars(primitive: Primitive, params: dict) -> dict[str, int]:
    """``{trainable_name: invar_index}`` for one equation (``{'weight': 1}`` by default)."""
    fn = ETP_TRAINABLE_INVARS_FNS.get(primitive)
    return dict(_DEFAULT_TRAINABLE) if fn is None else dict(fn(dict(params)))


def get_aux_invars(primitive: Primitive, params: dict) -> dict[str, int]:
    """``{name: invar_index}`` of the equation's non-trainable operands (``{}`` by default)."""
    fn = ETP_AUX_INVARS_FNS.get(primitive)
    return {} if fn is None else dict(fn(dict(params)))


def get_batched_counterpart(primitive: Primitive) -> Primitive | None:
    """The batched primitive ``jax.vmap`` over ``x`` re-binds, or ``None``."""
    return BATCHED_COUNTERPARTS.get(primitive)


def get_x_invar_index(primitive: Primitive) -> int | None:
    """Position of ``x`` in the invars (``None`` for primitives without an input)."""
    return ETP_X_INVAR_INDICES.get(primitive, 0)


def get_y_outvar_index(primitive: Primitive) -> int:
    """Position of ``y`` in the outvars."""
    return ETP_Y_OUTVAR_INDICES.get(primitive, 0)


def sum_to_shape(value: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Sum ``value`` down to ``shape`` (extra leading axes, then broadcast size-1 axes)."""
    extra = value.ndim - len(shape)
    if extra > 0:
        value = jnp.sum(value, axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and value.shape[i] != 1)
    if axes:
        value = jnp.sum(value, axis=axes, keepdims=True)
    return value


def _require(table: dict, primitive: Primitive, rule: str) -> Rule:
    fn = table.get(primitive)
    if fn is None:
        raise KeyError(
            f"ETP primitive '{getattr(primitive, 'name', primitive)}' has no '{rule}' rule. "
            f"Register one with `prim.register_etp_rules({rule}=...)` or an ETPPrimitiveSpec."
        )
    return fn


def get_xy_to_etrace(primitive: Primitive) -> Rule:
    r"""The registered ``xy_to_etrace`` rule, or the default built from ``xy_to_dw``.

    Default: for batched primitives, ``xy_to_dw`` applied to each sample
    ``(x[b:b+1], g[b:b+1])`` and stacked on a leading batch axis; for unbatched ones,
    ``xy_to_dw`` itself (there is no batch axis to keep).
    """
    fn = ETP_RULES_XY_TO_ETRACE.get(primitive)
    if fn is not None:
        return fn
    xy_to_dw = _require(ETP_RULES_XY_TO_DW, primitive, "xy_to_dw")
    if primitive not in BATCHED_PRIMITIVES:
        return xy_to_dw

    def per_sample(x, hidden_dim, weights, **params):
        def one(xb, gb):
            return xy_to_dw(xb[None], gb[None], weights, **params)

        return jax.vmap(one)(x, hidden_dim)

    return per_sample


def get_etrace_to_dw(primitive: Primitive) -> Rule:
    r"""The registered ``etrace_to_dw`` rule, or the default built from ``yw_to_w``.

    Default: :math:`\partial L/\partial W = \mathrm{sum\_to\_shape}(\mathrm{yw\_to\_w}
    (\partial L/\partial h, \epsilon), W.\mathrm{shape})` per trainable key.
    """
    fn = ETP_RULES_ETRACE_TO_DW.get(primitive)
    if fn is not None:
        return fn
    yw_to_w = _require(ETP_RULES_YW_TO_W, primitive, "yw_to_w")

    def contract(trace, dl_dh, weights, **params):
        weighted = yw_to_w(dl_dh, trace, **params)
        return {k: sum_to_shape(v, jnp.shape(weights[k])) for k, v in weighted.items()}

    return contract


def declare_elementwise(primitive: Primitive | str, elementwise: bool = True) -> None:
    """Declare whether a plain JAX primitive keeps positions (overrides the compiler's probe).

    The compiler judges a primitive it has no rule for from its JVP (``docs/semantics.md``,
    "Primitives the compiler does not know"); when structure cannot decide (a JVP that applies
    the primitive itself to the tangent, one that cannot be traced) it cuts the primitive from
    the h -> h transition and says so. Declare it here to decide yourself: ``True`` when
    output position ``p`` has a derivative with respect to operand position ``p`` only (operands
    of the output's shape; a broadcast operand still copies), ``False`` to always cut it.

    Parameters
    ----------
    primitive : Primitive or str
        The primitive (matched by identity) or its name (matched when no identity entry does).
    elementwise : bool
        The declaration; a later call replaces an earlier one.

    Examples
    --------
    >>> from etp_viz.ops import declare_elementwise, get_declared_elementwise
    >>> declare_elementwise("doc_my_spike")
    >>> get_declared_elementwise("doc_my_spike")
    True
    """
    if isinstance(primitive, ETPPrimitive) or primitive in ETP_PRIMITIVES:
        raise TypeError(
            f"declare_elementwise({getattr(primitive, 'name', primitive)!r}): ETP primitives "
            "are judged by their registration; pass `gradient_enabled=True` to "
            "register_primitive for an identity-like ETP op instead."
        )
    if not isinstance(primitive, (Primitive, str)):
        raise TypeError(
            "declare_elementwise expects a jax Primitive or its name (a str); got "
            f"{type(primitive).__name__}. Example: declare_elementwise(my_spike_p) or "
            "declare_elementwise('my_spike')."
        )
    DECLARED_ELEMENTWISE[primitive] = bool(elementwise)


def get_declared_elementwise(primitive: Any) -> bool | None:
    """The declaration made with :func:`declare_elementwise` (identity first, then name), or
    ``None`` when there is none."""
    if primitive in DECLARED_ELEMENTWISE:
        return DECLARED_ELEMENTWISE[primitive]
    name = getattr(primitive, "name", None)
    return DECLARED_ELEMENTWISE.get(name) if isinstance(name, str) else None
