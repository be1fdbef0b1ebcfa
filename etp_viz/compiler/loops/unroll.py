"""What an inner loop is (:class:`LoopPlan`), whether it can be unrolled, and the small jaxprs
the unrolling splices in (a slice of a scanned input, the stack of a scanned output).

The splicing itself is :func:`.._jaxpr.inline_calls` (one pass over the step, which also
inlines calls and if-converts ``cond``): each iteration inlines the body with fresh Vars, the
carry of iteration ``k`` read by iteration ``k + 1``. The flat step is the one of the same
model written out by hand (same equations in the same order, plus the loop counter's
arithmetic), so its values, derivatives, relations and claims are those of that twin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from etp_viz import _compat
from etp_viz._compat import Jaxpr, JaxprEqn

__all__ = [
    "MAX_UNROLL_EQUATIONS",
    "MAX_UNROLL_ITERATIONS",
    "LoopIteration",
    "LoopPlan",
    "index_jaxpr",
    "loop_not_unrolled_reason",
    "loop_source",
    "non_param_state_vars",
    "plan_loop",
    "stack_jaxpr",
    "too_long_error",
    "unroll_size_blocker",
]

#: the most iterations a loop is unrolled to (an ODE solver's sub-steps: a handful)
MAX_UNROLL_ITERATIONS = 64
#: the most equations one unrolled loop may add to the step (iterations x body equations)
MAX_UNROLL_EQUATIONS = 20_000


class LoopPlan(NamedTuple):
    """A loop equation read as ``carry, ys = loop(consts, carry, xs)`` over ``trip_count``
    iterations of ``body`` (invars ``[*consts, *carry, *x slices]``, outvars
    ``[*carry, *y slices]``); ``trip_count`` is None where it is not a compile-time constant."""

    name: str
    body: Jaxpr
    body_consts: list
    trip_count: int | None
    #: the loop equation's operands are ``eqn.invars[first_operand:]`` (a while skips its
    #: cond consts)
    first_operand: int
    num_consts: int
    num_carry: int
    reverse: bool


class LoopIteration(str):
    """A ``nested_in`` entry of an unrolled equation: ``"fori_loop[iteration 2 of 6]"``.

    A string (read as one by every consumer of ``nested_in``) that also says which loop:
    ``loop_id`` (one per unrolled loop of the step), ``name``, ``trip_count``, ``iteration``
    and ``source`` (the user's ``file:line`` of the loop, or ``""``).
    """

    loop_id: int
    name: str
    trip_count: int
    iteration: int
    source: str

    def __new__(cls, loop_id: int, name: str, trip_count: int, iteration: int, source: str):
        text = super().__new__(cls, f"{name}[iteration {iteration} of {trip_count}]")
        text.loop_id, text.name, text.source = loop_id, name, source
        text.trip_count, text.iteration = trip_count, iteration
        return text


def plan_loop(eqn: JaxprEqn, invars: Sequence[Any], known: Mapping[Any, Any]) -> LoopPlan | None:
    """The :class:`LoopPlan` of a ``scan`` / ``while`` equation (None for any other).

    ``invars``: the equation's operands as the caller sees them; ``known``: Var -> concrete
    value for constants of the step (a ``while``'s bounds may be constants, not literals).
    """
    if eqn.primitive.name == "scan":
        body, body_consts = _compat.split_closed_jaxpr(eqn.params["jaxpr"])
        num_consts, num_carry = _compat.scan_operand_counts(eqn.params)
        length, reverse = int(eqn.params["length"]), bool(eqn.params["reverse"])
        return LoopPlan("scan", body, list(body_consts), length, 0, num_consts, num_carry, reverse)
    if eqn.primitive.name != "while":
        return None
    body, body_consts = _compat.split_closed_jaxpr(eqn.params["body_jaxpr"])
    cond_nconsts, body_nconsts = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
    carry = list(invars[cond_nconsts + body_nconsts :])
    trip = _counted_trips(eqn, body, body_nconsts, carry, known) if cond_nconsts == 0 else None
    name = "fori_loop" if trip is not None else "while"
    if trip is None:
        trip = _simulated_trips(eqn, body, body_consts, invars, known)
    return LoopPlan(
        name, body, list(body_consts), trip, cond_nconsts, body_nconsts, len(carry), False
    )


def _counted_trips(
    eqn: JaxprEqn, body: Jaxpr, nconsts: int, carry: list, known: Mapping[Any, Any]
) -> int | None:
    """Trip count of ``while i < upper: i += 1`` (``fori_loop``'s form, ``upper`` carried or a
    literal of the cond) with constant ``i`` and ``upper``; None for any other ``while``."""
    cond, _ = _compat.split_closed_jaxpr(eqn.params["cond_jaxpr"])
    if len(cond.eqns) != 1 or cond.eqns[0].primitive.name != "lt":
        return None
    lhs, rhs = cond.eqns[0].invars
    if cond.eqns[0].outvars[0] is not cond.outvars[0] or lhs not in cond.invars:
        return None
    counter = cond.invars.index(lhs)
    if not _adds_one(body, body.invars[nconsts + counter], body.outvars[counter]):
        return None
    if _compat.is_literal(rhs):
        upper = _concrete(rhs, known)
    elif rhs in cond.invars:
        bound = cond.invars.index(rhs)
        if body.outvars[bound] is not body.invars[nconsts + bound]:
            return None  # the bound changes inside the loop
        upper = _concrete(carry[bound], known)
    else:
        return None
    lower = _concrete(carry[counter], known)
    if lower is None or upper is None:
        return None
    return max(0, int(upper) - int(lower))


#: the most iterations :func:`_simulated_trips` runs a loop's control part to count them
MAX_SIMULATED_TRIPS = 4096


def _simulated_trips(
    eqn: JaxprEqn, body: Jaxpr, body_consts: list, invars: Sequence[Any], known: Mapping
) -> int | None:
    """Trip count of a ``while`` whose condition reads only a *control* part of the carry:
    entries whose updates read only themselves and constants of the step, all known before
    the loop (a counter counting down, in steps of 2, up to ``<=``, two counters). That part
    is run alone, op by op, until the condition fails; None where the condition reads
    anything else (a tolerance on the state: a dynamic trip count) or it runs past
    :data:`MAX_SIMULATED_TRIPS`."""
    cond, cond_consts = _compat.split_closed_jaxpr(eqn.params["cond_jaxpr"])
    n_cond, n_body = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
    operands = list(invars)
    cond_eqns, cond_reads = _backward_slice(cond, [cond.outvars[0]])
    control = {i - n_cond for i in cond_reads if i >= n_cond}
    needed, frontier = set(cond_reads), list(control)
    body_needed: set = set()
    while frontier:  # close the control part under the body's reads
        i = frontier.pop()
        for j in _backward_slice(body, [body.outvars[i]])[1]:
            body_needed.add(j)
            carry_index = j - n_body
            if carry_index >= 0 and carry_index not in control:
                control.add(carry_index)
                frontier.append(carry_index)
    order = sorted(control)
    body_eqns, _ = _backward_slice(body, [body.outvars[i] for i in order])
    values: dict[int, Any] = {}  # operand index -> concrete value
    wanted = [i for i in needed if i < n_cond] + [n_cond + j for j in body_needed if j < n_body]
    for index in wanted + [n_cond + n_body + i for i in order]:
        value = _value(operands[index], known)
        if value is None:
            return None
        values[index] = value
    carry = {i: values[n_cond + n_body + i] for i in order}
    cond_env = dict(zip(cond.constvars, cond_consts))
    cond_env.update({cond.invars[i]: values[i] for i in needed if i < n_cond})
    body_env = dict(zip(body.constvars, body_consts))
    body_env.update({body.invars[j]: values[n_cond + j] for j in body_needed if j < n_body})
    try:
        for trips in range(MAX_SIMULATED_TRIPS + 1):
            env = {**cond_env, **{cond.invars[n_cond + i]: carry[i] for i in order}}
            if not bool(_run(cond_eqns, env, [cond.outvars[0]])[0]):
                return trips
            env = {**body_env, **{body.invars[n_body + i]: carry[i] for i in order}}
            carry = dict(zip(order, _run(body_eqns, env, [body.outvars[i] for i in order])))
    except Exception:  # noqa: BLE001 - a primitive that cannot run eagerly: not countable
        return None
    return None


def _backward_slice(jaxpr: Jaxpr, outs: Sequence[Any]) -> tuple[list, set]:
    """The equations ``outs`` are computed by (in order) and the indices of the invars they
    read."""
    live = {v for v in outs if _compat.is_var(v)}
    eqns = []
    for eqn in reversed(jaxpr.eqns):
        if any(v in live for v in eqn.outvars):
            eqns.append(eqn)
            live.update(v for v in eqn.invars if _compat.is_var(v))
    return eqns[::-1], {i for i, v in enumerate(jaxpr.invars) if v in live}


def _run(eqns: list, env: dict, outs: Sequence[Any]) -> list:
    """Evaluate ``eqns`` eagerly from ``env`` (Var -> value) and read ``outs``."""

    def read(atom: Any) -> Any:
        return atom.val if _compat.is_literal(atom) else env[atom]

    for eqn in eqns:
        subfuns, params = _compat.eqn_bind_params(eqn)
        result = eqn.primitive.bind(*subfuns, *map(read, eqn.invars), **params)
        env.update(zip(eqn.outvars, result if eqn.primitive.multiple_results else [result]))
    return [read(v) for v in outs]


def _value(atom: Any, known: Mapping[Any, Any]) -> Any:
    """The concrete value of a literal or known constant, else None."""
    if _compat.is_literal(atom):
        return atom.val
    if _compat.is_var(atom) and atom in known:
        try:
            return np.asarray(known[atom])
        except Exception:  # noqa: BLE001 - a tracer: not a compile-time constant
            return None
    return None


def _adds_one(body: Jaxpr, counter_in: Any, counter_out: Any) -> bool:
    for eqn in body.eqns:
        if eqn.outvars and eqn.outvars[0] is counter_out:
            if eqn.primitive.name != "add":
                return False
            a, b = eqn.invars
            return (a is counter_in and _literal_is(b, 1)) or (
                b is counter_in and _literal_is(a, 1)
            )
    return False


def _literal_is(atom: Any, value: int) -> bool:
    return _compat.is_literal(atom) and np.ndim(atom.val) == 0 and int(atom.val) == value


def _concrete(atom: Any, known: Mapping[Any, Any]) -> int | None:
    """The integer value of a literal or known constant scalar, else None."""
    if _compat.is_literal(atom):
        value = atom.val
    elif _compat.is_var(atom) and atom in known:
        value = known[atom]
    else:
        return None
    try:
        array = np.asarray(value)
    except Exception:  # noqa: BLE001 - a tracer: not a compile-time constant
        return None
    if array.ndim != 0 or not np.issubdtype(array.dtype, np.integer):
        return None
    return int(array)


def unroll_size_blocker(plan: LoopPlan) -> str | None:
    """Why a loop is too long to unroll (None: it is short enough, or its trip count is
    unknown)."""
    if plan.trip_count is None:
        return None
    if plan.trip_count > MAX_UNROLL_ITERATIONS:
        return f"{plan.trip_count} iterations > {MAX_UNROLL_ITERATIONS}"
    size = plan.trip_count * _count_eqns(plan.body)
    if size > MAX_UNROLL_EQUATIONS:
        return (
            f"{plan.trip_count} iterations x {size // max(plan.trip_count, 1)} body equations "
            f"> {MAX_UNROLL_EQUATIONS} equations"
        )
    return None


def _count_eqns(jaxpr: Jaxpr) -> int:
    total = 0
    for eqn in jaxpr.eqns:
        total += 1
        for value in eqn.params.values():
            for item in value if isinstance(value, (tuple, list)) else (value,):
                inner, _ = _compat.split_closed_jaxpr(item)
                if isinstance(inner, Jaxpr):
                    total += _count_eqns(inner)
    return total


def loop_not_unrolled_reason(eqn: JaxprEqn) -> str:
    """Why a ``scan`` / ``while`` left in the flat step was not unrolled (for a message)."""
    plan = plan_loop(eqn, eqn.invars, {})
    if plan is None:
        return ""
    if plan.trip_count is None:
        return (
            "its trip count is not a compile-time constant (a while_loop, or a fori_loop with "
            "traced bounds), so it cannot be unrolled"
        )
    blocker = unroll_size_blocker(plan)
    return f"it is too long to unroll ({blocker})" if blocker else ""


def too_long_error(eqn: JaxprEqn, plan: LoopPlan, index: int, blocker: str) -> ValueError:
    """The error for a loop that writes a state but is too long to unroll."""
    return ValueError(
        f"The `{plan.name}` loop{_where(eqn)} (equation {index} of its jaxpr, "
        f"{plan.trip_count} iterations) updates a state of the step; the ETP compiler unrolls "
        f"such loops into the step, but this one is too long ({blocker}). Fix: use fewer "
        f"sub-steps (e.g. `jax.lax.fori_loop(0, 6, euler_step, v)`: at most "
        f"{MAX_UNROLL_ITERATIONS}), call the model once per sub-step instead of looping inside "
        "it, or learn this model with BPTT."
    )


def loop_source(eqn: JaxprEqn) -> str:
    """``file:line`` of the user code that made the loop, or ``""``."""
    frame = _compat.eqn_user_frame(eqn)
    return f"{frame[0]}:{frame[1]}" if frame else ""


def _where(eqn: JaxprEqn) -> str:
    source = loop_source(eqn)
    return f" at {source}" if source else ""


def non_param_state_vars(states: Sequence[Any], jaxpr: Jaxpr, params: bool = False) -> set:
    """The input and output Vars of ``jaxpr`` (a traced step: state leaves last in its invars
    and outvars, in ``states`` order) of every state that is not a ``ParamState`` (with
    ``params``: of every ``ParamState`` instead)."""
    import brainstate

    found: set = set()
    counts = [len(jax.tree.leaves(st.value)) for st in states]
    for ends in (jaxpr.invars, jaxpr.outvars):
        start = len(ends) - sum(counts)
        for st, count in zip(states, counts):
            if isinstance(st, brainstate.ParamState) == params:
                found.update(v for v in ends[start : start + count] if _compat.is_var(v))
            start += count
    return found


def index_jaxpr(atom: Any, index: int) -> Any:
    """A closed jaxpr ``a -> a[index]`` (static index, leading axis) for ``atom``'s type."""
    return jax.make_jaxpr(lambda a: jax.lax.index_in_dim(a, index, keepdims=False))(_spec(atom))


def stack_jaxpr(atoms: Sequence[Any], like: Any) -> Any:
    """A closed jaxpr stacking ``atoms`` on a new leading axis (zeros of ``like``'s type when
    there are none: a loop of zero iterations)."""
    aval = like.aval
    if not atoms:
        return jax.make_jaxpr(lambda: jax.numpy.zeros(aval.shape, aval.dtype))()

    def stack(*values: Any) -> Any:
        return jax.lax.concatenate([jax.lax.expand_dims(v, (0,)) for v in values], 0)

    return jax.make_jaxpr(stack)(*[_spec(a) for a in atoms])


def _spec(atom: Any) -> jax.ShapeDtypeStruct:
    aval = atom.aval
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type)
