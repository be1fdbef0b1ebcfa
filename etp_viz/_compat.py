"""Every JAX / brainstate / saiunit version quirk lives here, and only here.

Supported stacks: jax 0.10.x with brainstate 0.5.x (Python 3.11) and jax 0.12.x with
brainstate 0.6.x (Python 3.12). On jaxlib 0.10, :func:`avoid_slow_cpu_reductions` (called by
``import etp_viz``) keeps XLA:CPU's reductions out of YNNPACK, whose leading-axis sums are
50-100x slower there. Other modules import jaxpr types and version-dependent helpers
from this module instead of reaching into ``jax._src`` or branching on versions themselves.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import brainstate
import jax
from jax.extend.core import (  # noqa: F401  (re-exported)
    ClosedJaxpr,
    DropVar,
    Jaxpr,
    JaxprEqn,
    Literal,
    Primitive,
    Var,
    jaxpr_as_fun,
    new_jaxpr_eqn,
)
from jax.interpreters import ad, batching, mlir  # noqa: F401  (re-exported)

JAX_VERSION: tuple[int, ...] = tuple(int(p) for p in jax.__version__.split(".")[:3] if p.isdigit())
BRAINSTATE_VERSION: tuple[int, ...] = tuple(
    int(p) for p in brainstate.__version__.split(".")[:3] if p.isdigit()
)

#: jaxlib's version (the XLA runtime), which can differ from jax's in its last digits.
JAXLIB_VERSION: tuple[int, ...] = tuple(
    int(p) for p in importlib.metadata.version("jaxlib").split(".")[:3] if p.isdigit()
)

#: The XLA flag and value that keep YNNPACK's dot fusions on XLA:CPU but not its reductions.
YNN_FUSION_FLAG = "--xla_cpu_experimental_ynn_fusion_type=individual_dot"
#: jaxlib versions whose XLA:CPU hands reductions to YNNPACK at a ~50-100x cost (below):
#: measured on 0.10.2 and 0.11.0; 0.11.1, 0.11.2 and 0.12.0.1 do not have it.
YNN_SLOW_REDUCE = JAXLIB_VERSION < (0, 11, 1)


def avoid_slow_cpu_reductions(environ: Any = None) -> str:
    """On jaxlib < 0.11.1, keep XLA:CPU's reductions out of YNNPACK; returns what was done.

    jaxlib 0.10 (and 0.11.0) fuses a reduction into a YNNPACK call that runs 50-100x slower
    than XLA's own loop (and than jaxlib 0.12's YNNPACK) when it reduces a leading axis of a
    large array:
    ``jnp.sum(g, 0)`` of a float32 ``(100, 288, 256)`` array takes 150-235 ms there, 12 ms
    without the fusion, 1.4-4 ms on jaxlib 0.12; a ``(16, 288, 256)`` batch sum 12 ms vs 0.2 ms.
    That was the "stacked cliff" (ES-D-RTRL's stacked per-step-gradient harness: 88-250 ms on
    jax 0.10.2 vs 16-45 ms on 0.12, same optimised HLO; ``bench/README.md``). The flag
    :data:`YNN_FUSION_FLAG` keeps the dot fusions (the default minus reductions).

    XLA reads ``XLA_FLAGS`` once, when JAX creates its first backend, so this only acts
    before that (``import etp_viz`` does not start a backend). Nothing is changed on other
    jaxlib versions, when ``XLA_FLAGS`` already names the YNN fusion types, or with
    ``ETP_VIZ_XLA_FLAGS=keep``. Returns ``"applied"``, ``"not needed"``, ``"kept"`` (the
    user's flags) or ``"too late"`` (a backend already runs).
    """
    import os

    environ = os.environ if environ is None else environ
    flags = environ.get("XLA_FLAGS", "")
    if not YNN_SLOW_REDUCE:
        return "not needed"
    if (
        "xla_cpu_experimental_ynn_fusion_type" in flags
        or environ.get("ETP_VIZ_XLA_FLAGS") == "keep"
    ):
        return "kept"
    from jax._src import xla_bridge

    if getattr(xla_bridge, "_backends", None):
        return "too late"
    environ["XLA_FLAGS"] = f"{flags} {YNN_FUSION_FLAG}".strip()
    return "applied"


#: What importing etp_viz did about jaxlib 0.10's slow reductions (see the function above).
XLA_CPU_REDUCTIONS = avoid_slow_cpu_reductions()


#: ``jax.core.ShapedArray`` is the abstract value of every array Var on both stacks.
ShapedArray = jax.core.ShapedArray


def get_stateful_function_class() -> type:
    """Return brainstate's ``StatefulFunction`` (moved from ``compile`` to ``transform``)."""
    transform = getattr(brainstate, "transform", None)
    if transform is not None and hasattr(transform, "StatefulFunction"):
        return transform.StatefulFunction
    return brainstate.compile.StatefulFunction  # pragma: no cover - very old brainstate


def split_closed_jaxpr(jaxpr_like: Any) -> tuple[Any, list[Any]]:
    """Return ``(open_jaxpr, consts)`` for a ClosedJaxpr or an open Jaxpr.

    In jax 0.12 ``ClosedJaxpr`` is an alias of ``Jaxpr``: a closed jaxpr is its own ``.jaxpr``
    and still carries its ``consts``. So never tell them apart by ``isinstance``; read the
    attributes, which exist (or are absent) consistently on both stacks.
    """
    return getattr(jaxpr_like, "jaxpr", jaxpr_like), list(getattr(jaxpr_like, "consts", ()))


def new_var(aval: Any) -> Any:
    """A fresh jaxpr ``Var`` of abstract value ``aval`` (constructor differs across jax)."""
    try:
        return Var(aval)
    except TypeError:  # pragma: no cover - older jax: Var(suffix, aval)
        return Var("", aval)


def make_debug_info(name: str) -> Any:
    """A minimal ``DebugInfo`` for a hand-built Jaxpr (jax warns when one is missing)."""
    try:
        from jax._src.core import DebugInfo
    except ImportError:  # pragma: no cover - jax without DebugInfo
        return None
    return DebugInfo(name, name, None, None)


def eqn_bind_params(eqn: Any) -> tuple[list[Any], dict[str, Any]]:
    """``(subfuns, params)`` to re-bind ``eqn.primitive`` (older jax returns a tuple)."""
    bind_params = eqn.primitive.get_bind_params(eqn.params)
    if isinstance(bind_params, tuple):
        subfuns, bind_params = bind_params
        return list(subfuns), bind_params
    return [], bind_params


def close_jaxpr(jaxpr: Any, consts: list[Any] | tuple[Any, ...] = ()) -> Any:
    """Build a closed jaxpr from an open one and its constants (both stacks)."""
    return ClosedJaxpr(jaxpr, list(consts))


def is_var(atom: Any) -> bool:
    """True for a jaxpr ``Var`` (not a ``Literal``, not a ``DropVar``)."""
    return isinstance(atom, Var) and not isinstance(atom, DropVar)


def is_literal(atom: Any) -> bool:
    """True for a jaxpr ``Literal``."""
    return isinstance(atom, Literal)


def eqn_user_frame(eqn: Any) -> tuple[str, int, str] | None:
    """``(file_name, line, function_name)`` of the user code that emitted ``eqn``, or None:
    the innermost of :func:`eqn_user_frames`."""
    frames = eqn_user_frames(eqn)
    return frames[0] if frames else None


def eqn_user_frames(eqn: Any) -> list[tuple[str, int, str]]:
    """Every ``(file_name, line, function_name)`` of non-JAX code on ``eqn``'s stack, innermost
    first (a library's frames, then the user's code that called it); [] when unknown.

    ``source_info_util.user_frames`` takes the traceback (jax 0.10) or the SourceInfo itself
    (some other versions); both are tried and any failure gives [].
    """
    from jax._src import source_info_util

    source_info = getattr(eqn, "source_info", None)
    if source_info is None:
        return []
    for candidate in (getattr(source_info, "traceback", None), source_info):
        if candidate is None:
            continue
        try:
            frames = list(source_info_util.user_frames(candidate))
        except Exception:  # noqa: BLE001 - a version that wants the other argument
            continue
        return [(f.file_name, int(f.start_line), f.function_name) for f in frames]
    return []


def stateful_function_call(function: Any, state_values: list[Any], *args: Any) -> tuple[Any, Any]:
    """Replay a traced ``StatefulFunction`` on explicit state values: ``(new_values, out)``.

    Pure (no ``State`` is written), so raw JAX transformations apply. ``function`` must have
    been traced on ``args`` (``make_jaxpr``) with ``return_only_write=False``.
    """
    new_values, out = function.jaxpr_call(list(state_values), *args)
    return list(new_values), out


def loaded_braintrace_registry() -> Any:
    """braintrace's ETP primitive registry (its ``braintrace._op`` package), or ``None``.

    Never imports braintrace: ``None`` unless ``braintrace`` is already in ``sys.modules``
    (fully imported). braintrace >= 0.2 keeps its primitives and rule tables in ``_op``
    (``ETP_PRIMITIVES``, ``ETP_RULES_DT_TO_T``, ``ETP_RULES_XY_TO_DW`` ...); 0.1.x had no
    primitive registry, which also gives ``None``.
    """
    import sys

    if "braintrace" not in sys.modules:
        return None
    registry = sys.modules.get("braintrace._op")
    needed = ("ETP_PRIMITIVES", "ETP_RULES_DT_TO_T", "ETP_RULES_XY_TO_DW", "BATCHED_PRIMITIVES")
    if registry is None or not all(hasattr(registry, name) for name in needed):
        return None
    for name in ("get_instant_drtrl_rule", "get_solve_drtrl_rule", "get_batched_counterpart"):
        if not hasattr(registry, name):  # pragma: no cover - a braintrace 0.2 without them
            return None
    return registry


#: Primitives whose equation runs one sub-jaxpr on its operands, one to one, and returns its
#: results (``jax.jit`` binds ``pjit`` before jax 0.7 and ``jit`` after; ``jax.checkpoint``
#: binds ``remat2``, older jax ``checkpoint``).
CALL_PRIMITIVES = frozenset(
    {
        "pjit",
        "jit",
        "closed_call",
        "core_call",
        "remat2",
        "checkpoint",
        "custom_jvp_call",
        "custom_vjp_call",
        "custom_vjp_call_jaxpr",
    }
)


def call_jaxpr(eqn: Any) -> tuple[Any, list[Any]] | None:
    """``(open_jaxpr, consts)`` of a call-like equation (:data:`CALL_PRIMITIVES`) whose
    sub-jaxpr maps the equation's operands to its results one to one, else ``None``.

    The sub-jaxpr sits in ``jaxpr`` (jit, remat), ``call_jaxpr`` (closed_call, custom_jvp_call,
    custom_vjp_call) or ``fun_jaxpr`` (older custom_vjp_call_jaxpr), closed or open by version.
    """
    if eqn.primitive.name not in CALL_PRIMITIVES:
        return None
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        inner = eqn.params.get(key)
        if inner is None or callable(inner) and not hasattr(inner, "eqns"):
            continue
        jaxpr, consts = split_closed_jaxpr(inner)
        if not hasattr(jaxpr, "eqns"):
            continue
        if len(jaxpr.invars) == len(eqn.invars) and len(jaxpr.outvars) == len(eqn.outvars):
            return jaxpr, consts
    return None


def cond_branches(eqn: Any) -> list[tuple[Any, list[Any]]] | None:
    """``[(open_jaxpr, consts), ...]`` of a ``cond`` equation's branches (operand 0 is the
    branch index, the rest are every branch's operands), else ``None``."""
    if eqn.primitive.name != "cond" or "branches" not in eqn.params:
        return None
    return [split_closed_jaxpr(branch) for branch in eqn.params["branches"]]


def device_memory_stats(device: Any) -> dict | None:
    """``device.memory_stats()`` or None: XLA:CPU returns None (jax 0.10 and 0.12), and some
    runtimes raise instead of reporting."""
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - unsupported on this backend
        return None
    return dict(stats) if stats else None


def compiled_memory(compiled: Any) -> dict | None:
    """XLA's memory analysis of a compiled computation as ``{argument, output, alias, temp,
    peak}`` bytes, or None where the backend reports none. ``peak`` is the runtime's
    ``peak_memory_in_bytes`` where it has one (jax 0.10 and 0.12 on CPU), else
    ``argument + output - alias + temp``."""
    try:
        stats = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - not every backend reports it
        return None
    if stats is None:
        return None
    result = {
        "argument": int(stats.argument_size_in_bytes),
        "output": int(stats.output_size_in_bytes),
        "alias": int(stats.alias_size_in_bytes),
        "temp": int(stats.temp_size_in_bytes),
    }
    fallback = result["argument"] + result["output"] - result["alias"] + result["temp"]
    result["peak"] = int(getattr(stats, "peak_memory_in_bytes", 0) or fallback)
    return result


def scan_operand_counts(params: dict) -> tuple[int, int]:
    """``(num_consts, num_carry)`` of a ``scan`` equation: jax 0.10 stores them as params, jax
    0.12 as the flat trees ``ft_in = (consts, carry, xs)`` (it may also move a carry that the
    body passes through unchanged into the consts)."""
    if "num_consts" in params:
        return int(params["num_consts"]), int(params["num_carry"])
    consts, carry, _ = params["ft_in"].unpack()
    return len(consts), len(carry)
