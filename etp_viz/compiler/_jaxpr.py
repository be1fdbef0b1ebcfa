"""Jaxpr utilities shared by the compiler passes.

Everything here works on *open* jaxprs whose Vars are compared by identity. Passes build the
def/use index (:class:`DefUse`) once per jaxpr and then walk equations in one loop; sets of
Vars are insertion-ordered dicts so results are deterministic.

A module-level :data:`VISITS` counter is bumped once per equation visit by every pass; the
linear-cost test compiles a ~5,000-equation chain and checks the count grows linearly.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Collection, Iterable, Sequence
from typing import Any, NamedTuple, TypeGuard

import jax

from etp_viz import _compat
from etp_viz._compat import Jaxpr, JaxprEqn, Var

from .loops import (
    LoopIteration,
    LoopPlan,
    index_jaxpr,
    loop_source,
    plan_loop,
    stack_jaxpr,
    too_long_error,
    unroll_size_blocker,
)

__all__ = [
    "CALL_PRIMITIVE_NAMES",
    "CONTROL_FLOW_PRIMITIVE_NAMES",
    "CUSTOM_CALL_PRIMITIVE_NAMES",
    "REVERSE_ONLY_PRIMITIVE_NAMES",
    "DefUse",
    "ParamTrace",
    "VISITS",
    "binds",
    "build_jaxpr",
    "cond_conversion_blocker",
    "eval_jaxpr",
    "eval_jaxpr_collect",
    "inline_calls",
    "new_var",
    "slice_jaxpr",
    "sub_jaxprs",
    "trace_to_param",
]

#: Call-like primitives whose bodies are spliced into the caller (``jax.checkpoint`` binds
#: ``remat2`` in jax 0.10, ``checkpoint`` before; splicing it only gives up the recompute).
CALL_PRIMITIVE_NAMES = frozenset(
    {"pjit", "jit", "closed_call", "core_call", "remat", "remat2", "checkpoint"}
)
#: Control flow: ``scan`` / ``while`` bodies are never inlined and ETP ops inside them are
#: reported; a ``cond`` outside any loop is if-converted by :func:`inline_calls` when it can be.
CONTROL_FLOW_PRIMITIVE_NAMES = frozenset({"scan", "while", "cond"})
#: Custom-derivative calls: kept as one equation, analysed through their body.
CUSTOM_CALL_PRIMITIVE_NAMES = frozenset(
    {"custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr", "custom_lin"}
)


class _VisitCounter:
    """Counts equation visits of every compiler pass (read by the linear-cost test)."""

    def __init__(self) -> None:
        self.count = 0

    def reset(self) -> None:
        self.count = 0


VISITS = _VisitCounter()


new_var = _compat.new_var


def _is_var(atom: Any) -> TypeGuard[Var]:
    return _compat.is_var(atom)


split_closed = _compat.split_closed_jaxpr


def sub_jaxprs(eqn: JaxprEqn) -> list[tuple[str, Any]]:
    """``(param_name, open_jaxpr)`` for every jaxpr stored in ``eqn.params`` (incl. branches)."""
    found: list[tuple[str, Any]] = []
    for name, value in eqn.params.items():
        items = value if isinstance(value, (tuple, list)) else (value,)
        for item in items:
            inner, _ = split_closed(item)
            if hasattr(inner, "eqns") and hasattr(inner, "invars"):
                found.append((name, inner))
    return found


class DefUse:
    """Producer and consumer indexes of one jaxpr, built once.

    ``producer[var]`` is the index of the equation that defines ``var``;
    ``consumers[var]`` lists (in order, without repeats) the equations that read it.
    """

    def __init__(self, jaxpr: Jaxpr) -> None:
        self.jaxpr = jaxpr
        self.producer: dict[Var, int] = {}
        self.consumers: dict[Var, list[int]] = {}
        for index, eqn in enumerate(jaxpr.eqns):
            VISITS.count += 1
            for var in eqn.outvars:
                if _is_var(var):
                    self.producer[var] = index
            for var in dict.fromkeys(v for v in eqn.invars if _is_var(v)):
                self.consumers.setdefault(var, []).append(index)

    def eqn(self, index: int) -> JaxprEqn:
        return self.jaxpr.eqns[index]


def build_jaxpr(
    constvars: Sequence[Var],
    invars: Sequence[Var],
    outvars: Sequence[Any],
    eqns: Sequence[JaxprEqn],
) -> Jaxpr:
    """An open jaxpr from its parts, with the union of the equations' effects."""
    effects = frozenset(itertools.chain.from_iterable(e.effects for e in eqns))
    return Jaxpr(list(constvars), list(invars), list(outvars), list(eqns), effects, _debug_info())


def _debug_info() -> Any:
    return _compat.make_debug_info("etp_viz.compiler")


def eval_jaxpr(jaxpr: Jaxpr, consts: Sequence[Any], *args: Any) -> list[Any]:
    """Evaluate an open jaxpr (traceable, differentiable): the values of its outvars."""
    return eval_jaxpr_collect(jaxpr, consts, args)[0]


def eval_jaxpr_collect(
    jaxpr: Jaxpr,
    consts: Sequence[Any],
    args: Sequence[Any],
    *,
    collect: Sequence[Any] = (),
    stop_gradient: Iterable[Var] = (),
) -> tuple[list[Any], list[Any]]:
    """Evaluate an open jaxpr: ``(outvar values, values of the collect Vars)``.

    The one jaxpr interpreter of the package (one loop with an env dict; traceable and
    differentiable). ``collect`` names any Vars of the jaxpr (intermediates included) whose
    values are returned as well; a Var in ``stop_gradient`` is bound to
    ``jax.lax.stop_gradient`` of its value, so every later use (outvars and ``collect``
    included) sees it as a constant under differentiation.

    Inputs bind as ``[*constvars, *invars] <- [*consts, *args]``: jax 0.12 folds constvars
    without attached values into the leading invars, so that list is the same on both stacks
    (:func:`all_inputs`). A count mismatch is an error, never a silent truncation.
    """
    inputs = all_inputs(jaxpr)
    if len(inputs) != len(consts) + len(args):
        raise ValueError(
            f"eval_jaxpr: the jaxpr takes {len(inputs)} inputs ([*constvars, *invars]) but got "
            f"{len(consts)} consts and {len(args)} args"
        )
    stop = dict.fromkeys(stop_gradient)
    env: dict[Var, Any] = {}

    def read(atom: Any) -> Any:
        return env[atom] if _is_var(atom) else atom.val

    def write(var: Any, val: Any) -> None:
        if _is_var(var):
            env[var] = jax.lax.stop_gradient(val) if var in stop else val

    for var, val in zip(inputs, [*consts, *args]):
        write(var, val)
    for eqn in jaxpr.eqns:
        subfuns, bind_params = _compat.eqn_bind_params(eqn)
        outs = eqn.primitive.bind(*subfuns, *map(read, eqn.invars), **bind_params)
        outs = outs if eqn.primitive.multiple_results else [outs]
        for var, val in zip(eqn.outvars, outs):
            write(var, val)
    return [read(v) for v in jaxpr.outvars], [read(v) for v in collect]


def all_inputs(jaxpr: Jaxpr) -> list[Var]:
    """``[*constvars, *invars]`` of a jaxpr built by :func:`build_jaxpr` (both jax stacks)."""
    return [*jaxpr.constvars, *jaxpr.invars]


class InlinedJaxpr(NamedTuple):
    """Result of :func:`inline_calls`."""

    jaxpr: Jaxpr
    consts: list[Any]
    constvars: list[Var]
    invars: list[Var]
    #: top-level equation index -> names of the call primitives it was nested in
    nested_in: dict[int, tuple[str, ...]]


def inline_calls(
    jaxpr: Jaxpr,
    consts: Sequence[Any],
    *,
    if_convert: bool = True,
    unroll: bool = True,
    state_vars: Collection[Var] = (),
    lift_vars: Collection[Var] = (),
) -> InlinedJaxpr:
    """Splice every nested ``jit``/``pjit``/``closed_call`` body into one flat jaxpr.

    Body variables are renamed to fresh Vars of the top level; body constants become extra
    top-level constvars. Custom-derivative calls, ``scan`` and ``while`` stay single equations.

    With ``if_convert`` (default), a ``cond`` outside any loop body is *if-converted* when it
    matters to online learning (a branch holds an ETP primitive, or one of its results is a
    result of the step, e.g. a hidden state written in both branches) and is safe to convert
    (:func:`cond_conversion_blocker`): every branch is spliced in (fresh Vars) and each result
    becomes ``select_n(index, branch_0 result, ..., branch_{n-1} result)``. Same values, same
    derivatives (``select_n``'s JVP selects the tangent, its VJP gives the unselected branches a
    zero cotangent); the only cost is that every branch is computed every step (a dead branch
    that produces inf/NaN derivatives can leak NaN into reverse mode: ``0 * inf``). The spliced
    equations are recorded in ``nested_in`` under ``"cond[branch k]"``. With ``lift_vars`` (the
    parameters' input Vars, under ``lift=True``) a ``cond`` that takes a parameter as an operand
    is converted too, so its branches' plain ops on it can be lifted.

    With ``unroll`` (default), a loop with a static trip count (``scan``, or a ``while`` that
    counts ``i < upper`` with constant bounds: :func:`.loops.plan_loop`) is *unrolled* when it
    matters to online learning: its body holds an ETP primitive, an operand depends on a state
    input of ``state_vars`` (the non-parameter states' input and output Vars of ``jaxpr``), or
    a result is a state's new value. Its body is spliced in once per iteration, the carry
    threaded through, scanned inputs sliced and scanned outputs stacked: the step written out
    by hand. The spliced equations are recorded in ``nested_in`` under a
    :class:`.loops.LoopIteration` (``"fori_loop[iteration k of n]"``). A loop that writes a
    state but is longer than :data:`.loops.MAX_UNROLL_ITERATIONS` is a ``ValueError``; any
    other loop stays one equation.
    """
    eqns: list[JaxprEqn] = []
    constvars = list(jaxpr.constvars)
    const_vals = list(consts)
    nested_in: dict[int, tuple[str, ...]] = {}
    known = dict(zip(jaxpr.constvars, consts))
    #: Vars computed from a state input (an inner loop reading one is unrolled)
    dependent: dict[Var, None] = dict.fromkeys(v for v in jaxpr.invars if v in state_vars)
    loop_ids = itertools.count()

    def splice(body: Jaxpr, env: dict[Var, Any], stack: tuple[str, ...], results: dict) -> None:
        """``results``: the body Vars that are (renamed) results of the whole step, each with
        whether it is a state's new value."""

        def read(atom: Any) -> Any:
            return env.get(atom, atom) if _is_var(atom) else atom

        for index, eqn in enumerate(body.eqns):
            VISITS.count += 1
            invars = [read(v) for v in eqn.invars]
            if if_convert and _should_if_convert(eqn, results, invars, lift_vars):
                splice_cond(eqn, invars, env, stack)
                continue
            loop = plan_loop(eqn, invars, known) if unroll else None
            if loop is not None and should_unroll(eqn, index, loop, invars, results):
                splice_loop(eqn, loop, invars, env, stack, results)
                continue
            body_and_consts = (
                _call_body(eqn) if eqn.primitive.name in CALL_PRIMITIVE_NAMES else None
            )
            if body_and_consts is not None:
                inner, inner_consts = body_and_consts
                inner_env = bind_body(inner, inner_consts, invars)
                inner_results = {
                    i: results[o] for o, i in zip(eqn.outvars, inner.outvars) if o in results
                }
                splice(inner, inner_env, stack + (_call_name(eqn),), inner_results)
                for outer, inner_out in zip(eqn.outvars, inner.outvars):
                    if _is_var(outer):
                        env[outer] = read_inner(inner_env, inner_out)
                continue
            outvars = [v if not stack or not _is_var(v) else _rename(env, v) for v in eqn.outvars]
            emit(eqn.replace(invars=invars, outvars=outvars), stack)

    def emit(eqn: JaxprEqn, stack: tuple[str, ...]) -> None:
        if stack:
            nested_in[len(eqns)] = stack
        eqns.append(eqn)
        if any(_is_var(v) and v in dependent for v in eqn.invars):
            dependent.update(dict.fromkeys(v for v in eqn.outvars if _is_var(v)))

    def bind_body(inner: Jaxpr, inner_consts: Sequence[Any], invars: list) -> dict[Var, Any]:
        inner_env: dict[Var, Any] = {}
        for var, val in zip(inner.constvars, inner_consts):
            fresh = new_var(var.aval)
            constvars.append(fresh)
            const_vals.append(val)
            inner_env[var] = fresh
        inner_env.update(zip(inner.invars, invars))
        return inner_env

    def splice_cond(eqn: JaxprEqn, invars: list, env: dict, stack: tuple[str, ...]) -> None:
        index, operands = invars[0], invars[1:]
        cases: list[list[Any]] = []
        for k, branch in enumerate(eqn.params["branches"]):
            inner, inner_consts = split_closed(branch)
            inner_env = bind_body(inner, inner_consts, operands)
            splice(inner, inner_env, stack + (f"cond[branch {k}]",), {})
            cases.append([read_inner(inner_env, v) for v in inner.outvars])
        for position, outer in enumerate(eqn.outvars):
            if not _is_var(outer):
                continue
            out = _rename(env, outer) if stack else outer
            emit(_select_eqn(index, [c[position] for c in cases], out, eqn), stack)

    def should_unroll(
        eqn: JaxprEqn, index: int, loop: LoopPlan, invars: list, results: dict
    ) -> bool:
        writes = any(results.get(v) for v in eqn.outvars if _is_var(v))
        reads = any(_is_var(v) and v in dependent for v in invars)
        if not (writes or reads or _contains(loop.body, _is_etp_eqn)) or loop.trip_count is None:
            return False
        blocker = unroll_size_blocker(loop)
        if blocker is not None and writes:
            raise too_long_error(eqn, loop, index, blocker)
        return blocker is None

    def splice_loop(
        eqn: JaxprEqn, loop: LoopPlan, invars: list, env: dict, stack: tuple, results: dict
    ) -> None:
        """The loop's body spliced once per iteration (see the docstring)."""
        operands = invars[loop.first_operand :]
        consts, carry = operands[: loop.num_consts], operands[loop.num_consts :]
        carry, xs = carry[: loop.num_carry], carry[loop.num_carry :]
        shared = bind_body(loop.body, loop.body_consts, [])
        trips, loop_id, source = loop.trip_count or 0, next(loop_ids), loop_source(eqn)
        pairs = zip(eqn.outvars[: loop.num_carry], loop.body.outvars)
        last = {i: results[o] for o, i in pairs if o in results}
        ys_at: dict[int, list] = {}
        where = stack
        for step in range(trips):
            at = trips - 1 - step if loop.reverse else step
            where = stack + (LoopIteration(loop_id, loop.name, trips, step, source),)
            sliced = [splice_traced(index_jaxpr(x, at), [x], where)[0] for x in xs]
            inner_env = dict(shared)
            inner_env.update(zip(loop.body.invars, [*consts, *carry, *sliced]))
            splice(loop.body, inner_env, where, last if step == trips - 1 else {})
            outs = [read_inner(inner_env, v) for v in loop.body.outvars]
            carry, ys_at[at] = outs[: loop.num_carry], outs[loop.num_carry :]
        for j, outer in enumerate(eqn.outvars[loop.num_carry :]):
            ys = [ys_at[k][j] for k in range(trips)]
            carry.append(splice_traced(stack_jaxpr(ys, outer), ys, where)[0])
        for outer, value in zip(eqn.outvars, carry):
            if _is_var(outer):
                env[outer] = value

    def splice_traced(closed: Any, args: list, stack: tuple[str, ...]) -> list:
        inner, inner_consts = split_closed(closed)
        inner_env = bind_body(inner, inner_consts, args)
        splice(inner, inner_env, stack, {})
        return [read_inner(inner_env, v) for v in inner.outvars]

    def read_inner(inner_env: dict[Var, Any], atom: Any) -> Any:
        return inner_env.get(atom, atom) if _is_var(atom) else atom

    top_env: dict[Var, Any] = {}
    splice(jaxpr, top_env, (), {v: v in state_vars for v in jaxpr.outvars if _is_var(v)})
    outvars = [top_env.get(v, v) if _is_var(v) else v for v in jaxpr.outvars]
    flat = build_jaxpr(constvars, jaxpr.invars, outvars, eqns)
    return InlinedJaxpr(flat, const_vals, constvars, list(jaxpr.invars), nested_in)


def _should_if_convert(
    eqn: JaxprEqn, results: Collection[Var], invars: list, lift_vars: Collection[Var]
) -> bool:
    """A ``cond`` worth converting (an ETP primitive in a branch, a result of the step among
    its results, or an operand among ``lift_vars``) and safe to convert."""
    if eqn.primitive.name != "cond" or "branches" not in eqn.params:
        return False
    relevant = any(v in results for v in eqn.outvars if _is_var(v)) or any(
        _contains(split_closed(b)[0], _is_etp_eqn) for b in eqn.params["branches"]
    )
    relevant = relevant or any(_is_var(v) and v in lift_vars for v in invars[1:])
    return relevant and cond_conversion_blocker(eqn) is None


def cond_conversion_blocker(eqn: JaxprEqn) -> str | None:
    """Why a ``cond`` equation is not if-converted (``None``: it can be).

    Converting runs every branch every step, so a branch with effects (I/O, ordered or state
    effects) or a ``while`` loop (which may be meant to run only when its branch is taken, and
    has no reverse-mode rule) keeps the ``cond`` opaque.
    """
    if eqn.effects:
        return "the cond has effects"
    for branch in eqn.params.get("branches", ()):
        inner = split_closed(branch)[0]
        if inner.effects:
            return "a branch has effects"
        if _contains(inner, lambda e: e.primitive.name == "while"):
            return "a branch contains a while loop"
    return None


def _is_etp_eqn(eqn: JaxprEqn) -> bool:
    from etp_viz.ops import is_etp_primitive

    return is_etp_primitive(eqn.primitive)


def _contains(jaxpr: Jaxpr, predicate: Any) -> bool:
    """Whether an equation of ``jaxpr`` or of a jaxpr nested in it satisfies ``predicate``."""
    for eqn in jaxpr.eqns:
        VISITS.count += 1
        if predicate(eqn) or any(_contains(inner, predicate) for _, inner in sub_jaxprs(eqn)):
            return True
    return False


#: Primitives with a reverse-mode rule only (``jax.custom_vjp``): no forward mode through them
REVERSE_ONLY_PRIMITIVE_NAMES = frozenset({"custom_vjp_call", "custom_vjp_call_jaxpr"})


def binds(jaxpr: Any, names: Collection[str]) -> bool:
    """Whether ``jaxpr`` (open or closed) or a jaxpr nested in it binds a primitive named in
    ``names``; e.g. ``binds(jaxpr, REVERSE_ONLY_PRIMITIVE_NAMES)``: a ``jax.custom_vjp``, whose
    derivatives must be taken in reverse mode (``jax.jvp`` through it raises)."""
    return _contains(split_closed(jaxpr)[0], lambda eqn: eqn.primitive.name in names)


def _select_eqn(index: Any, cases: list, out: Var, like: JaxprEqn) -> JaxprEqn:
    """``out = select_n(index, *cases)`` with ``like``'s source info."""
    ctx = getattr(like, "ctx", None)
    kwargs = {} if ctx is None else {"ctx": ctx}
    return _compat.new_jaxpr_eqn(
        [index, *cases],
        [out],
        jax.lax.select_n_p,
        {},
        frozenset(),
        getattr(like, "source_info", None),
        **kwargs,
    )


def _rename(env: dict[Var, Any], var: Var) -> Var:
    fresh = new_var(var.aval)
    env[var] = fresh
    return fresh


def _call_body(eqn: JaxprEqn) -> tuple[Jaxpr, list[Any]] | None:
    for key in ("jaxpr", "call_jaxpr"):
        if key in eqn.params:
            return split_closed(eqn.params[key])
    return None


def _call_name(eqn: JaxprEqn) -> str:
    name = eqn.params.get("name")
    return f"{eqn.primitive.name}({name})" if name else eqn.primitive.name


def slice_jaxpr(
    jaxpr: Jaxpr,
    eqn_indices: Iterable[int],
    invars: Sequence[Var],
    outvars: Sequence[Any],
) -> tuple[Jaxpr, list[Var]]:
    """``(jaxpr, constvars)``: the equations ``eqn_indices`` (in order) as a jaxpr mapping
    ``invars`` to ``outvars``.

    Every Var the selected equations (or ``outvars``) read that is neither an invar nor
    produced by a selected equation becomes a constvar, in first-use order.
    """
    selected = [jaxpr.eqns[i] for i in sorted(eqn_indices)]
    known: dict[Var, None] = dict.fromkeys(invars)
    constvars: dict[Var, None] = {}
    for eqn in selected:
        VISITS.count += 1
        for var in eqn.invars:
            if _is_var(var) and var not in known:
                constvars[var] = None
        known.update(dict.fromkeys(v for v in eqn.outvars if _is_var(v)))
    for var in outvars:
        if _is_var(var) and var not in known:
            constvars[var] = None
    return build_jaxpr(list(constvars), invars, outvars, selected), list(constvars)


def aval_str(var: Any) -> str:
    """Short text of a Var's abstract value, e.g. ``f32[3,4]``."""
    aval: Any = getattr(var, "aval", None)
    return aval.str_short() if hasattr(aval, "str_short") else str(aval)


def is_float_dtype(var: Any) -> bool:
    aval = getattr(var, "aval", None)
    return aval is not None and jax.numpy.issubdtype(aval.dtype, jax.numpy.inexact)


# -- backward trace of an ETP trainable input to the ParamState leaf it comes from ---------
class ParamTrace(NamedTuple):
    """Where a trainable input comes from.

    ``jaxpr`` maps every leaf of the ``ParamState`` at ``path`` (``jax.tree.leaves`` order)
    to the input; ``fn(param_value)`` evaluates it (constants of the model are bound).
    """

    path: tuple
    leaf_index: int
    is_leaf: bool
    chain: tuple
    chain_eqn_indices: tuple
    jaxpr: Any
    constvars: list
    fn: Any
    #: every ParamState path / (path, leaf index) the input depends on, first found first
    paths: tuple
    leaf_indices: tuple

    def describe(self) -> list:
        return [".".join(map(str, p)) + f"[{i}]" for p, i in self.leaf_indices]


def trace_to_param(minfo: Any, var: Any, cache: dict) -> ParamTrace | None:
    """Walk producers from ``var`` (breadth first) up to ``ParamState`` leaf invars."""
    if var in cache:
        return cache[var]
    producer = minfo.def_use.producer
    leaves_found: dict[tuple, None] = {}
    chain_eqns: dict[int, None] = {}
    seen: dict[Any, None] = {var: None}
    queue = deque([var])
    while queue:
        current = queue.popleft()
        path = minfo.invar_to_weight_path.get(current)
        if path is not None:
            leaves_found[(path, minfo.weight_path_to_invars[path].index(current))] = None
            continue
        index = producer.get(current)
        if index is None:
            continue
        VISITS.count += 1
        chain_eqns[index] = None
        for inp in minfo.jaxpr.eqns[index].invars:
            if _compat.is_var(inp) and inp not in seen:
                seen[inp] = None
                queue.append(inp)
    if not leaves_found:
        cache[var] = None
        return None
    path, leaf_index = next(iter(leaves_found))
    indices = sorted(chain_eqns)
    leaf_invars = minfo.weight_path_to_invars[path]
    jaxpr, constvars = slice_jaxpr(minfo.jaxpr, indices, leaf_invars, [var])
    result = ParamTrace(
        path=path,
        leaf_index=leaf_index,
        is_leaf=var in minfo.invar_to_weight_path,
        chain=tuple(dict.fromkeys(minfo.jaxpr.eqns[i].primitive for i in indices)),
        chain_eqn_indices=tuple(indices),
        jaxpr=jaxpr,
        constvars=constvars,
        fn=_make_fn(minfo, jaxpr, constvars),
        paths=tuple(dict.fromkeys(p for p, _ in leaves_found)),
        leaf_indices=tuple(leaves_found),
    )
    cache[var] = result
    return result


def _make_fn(minfo: Any, jaxpr: Any, constvars: list):
    top_consts = dict(zip(minfo.constvars, minfo.consts))
    missing = [v for v in constvars if v not in top_consts]

    def fn(param_value: Any, extra_consts: dict | None = None) -> Any:
        """Trainable input from the ParamState value (``extra_consts``: Var -> value for
        runtime inputs of the chain, e.g. a mask held in another state)."""
        values = {**top_consts, **(extra_consts or {})}
        absent = [v for v in missing if v not in values]
        if absent:
            raise ValueError(
                f"The weight processing chain reads runtime values {absent}; pass them as "
                "extra_consts={var: value}."
            )
        consts = [values[v] for v in constvars]
        return eval_jaxpr(jaxpr, consts, *jax.tree.leaves(param_value))[0]

    return fn
