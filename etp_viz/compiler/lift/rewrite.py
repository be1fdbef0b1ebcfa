"""Apply the lifting plans to the flat step jaxpr: splice each replacement's equations in.

A replacement is the public ``etp_viz.ops`` call (:func:`etp_viz.matmul`, ``einsum``,
``conv``, ``element_wise``) traced with ``jax.make_jaxpr`` on the operands' abstract values
and spliced where the plain equation was, its result bound to the plain result's Var: every
later equation and every output of the step is unchanged, and the values and derivatives are
the same (the ETP primitives compute the plain op). The spliced equations keep the plain
equation's source line. Equations a plan leaves without a use (a fused bias's broadcast) are
dropped.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax

from etp_viz import _compat

from .._jaxpr import InlinedJaxpr, build_jaxpr, inline_calls, split_closed
from .plans import PARAM, Plan, Refusal, find_plans, flag_vars

__all__ = ["LiftReport", "LiftedOp", "NotLifted", "lift_plain_ops"]


class LiftedOp(NamedTuple):
    """A plain op rewritten into an ETP primitive."""

    #: index of the ETP equation in the lifted step jaxpr (``module_info.jaxpr``)
    eqn_index: int
    #: the ETP primitive's name (``etp_mv``, ``etp_mm``, ``etp_einsum``, ``etp_conv``,
    #: ``etp_elemwise``)
    primitive: str
    #: the plain op it replaces, as text (``x @ rnn.W``, ``x @ lin.weight + lin.weight.bias``)
    source: str
    #: the plain primitive(s) it replaces (``('dot_general', 'add')``)
    replaced: tuple
    #: the weight operand's parameter leaves (``(path, leaf index)``)
    leaves: tuple
    #: a fused gate cut into blocks (:mod:`.blocks`): every block's ETP equation
    block_eqn_indices: tuple = ()


class NotLifted(NamedTuple):
    """A plain op that reads a parameter and a runtime value but was not lifted."""

    eqn_index: int
    primitive: str
    source: str
    reason: str
    leaves: tuple


class LiftReport(NamedTuple):
    """What ``lift=True`` did (``graph.module_info.lifting``)."""

    lifted: tuple
    not_lifted: tuple

    def lifted_at(self, eqn_index: int) -> LiftedOp | None:
        """The lifted op whose ETP equation is ``eqn_index`` (a block's too; None: not a
        lifted one)."""
        return next(
            (
                op
                for op in self.lifted
                if op.eqn_index == eqn_index or eqn_index in op.block_eqn_indices
            ),
            None,
        )

    def moved(self, new_index: dict, blocks: tuple) -> LiftReport:
        """The report on the step with its fused ops cut into ``blocks`` (``new_index``: old
        equation index -> new)."""
        groups: dict = {}  # first block's equation -> every block's (blocks come per op)
        first = -1
        for block in blocks:
            first = block.eqn_index if block.position == 0 else first
            groups.setdefault(first, []).append(block.eqn_index)

        def moved_op(op: LiftedOp) -> LiftedOp:
            at = new_index.get(op.eqn_index, -1)
            return op._replace(eqn_index=at, block_eqn_indices=tuple(groups.get(at, ())))

        return LiftReport(
            tuple(moved_op(op) for op in self.lifted),
            tuple(m._replace(eqn_index=new_index.get(m.eqn_index, -1)) for m in self.not_lifted),
        )


def lift_plain_ops(
    flat: InlinedJaxpr, invar_to_weight_path: dict, weight_path_to_invars: dict, names: dict
) -> tuple[InlinedJaxpr, LiftReport]:
    """Rewrite the liftable plain ops of the flat step (see :mod:`.plans`).

    ``names``: ``{parameter leaf invar: dotted leaf name}`` (the texts say ``x @ rnn.W``).
    """
    jaxpr = flat.jaxpr
    params = set(invar_to_weight_path)
    runtime = [v for v in flat.invars if v not in params]
    flags = flag_vars(jaxpr, params, runtime)
    leaves_of = _LeafFinder(jaxpr, invar_to_weight_path, weight_path_to_invars)

    def text(var: Any) -> str:
        base, suffix = leaves_of.plain_read(var)
        if base in names:
            return names[base] + suffix
        found = leaves_of(var)
        labels = [names.get(weight_path_to_invars[p][i], ".".join(map(str, p))) for p, i in found]
        return f"f({', '.join(labels) or '?'})"

    plans, refusals = find_plans(jaxpr, flags, text)
    splicer = _Splicer(flat)
    kept: list[Plan] = []
    for plan in plans:
        problem = splicer.prepare(plan)
        if problem:
            refusals.append(Refusal(plan.at, plan.source, problem, plan.weight))
        else:
            kept.append(plan)
    lifted_flat, where = splicer.emit(kept)
    lifted = tuple(
        LiftedOp(
            where[id(plan)],
            lifted_flat.jaxpr.eqns[where[id(plan)]].primitive.name,
            plan.source,
            tuple(jaxpr.eqns[i].primitive.name for i in plan.drop) or ("marker",),
            tuple(
                dict.fromkeys(
                    leaf for a in plan.args if flags.get(a) == PARAM for leaf in leaves_of(a)
                )
            ),
        )
        for plan in kept
    )
    not_lifted = tuple(
        NotLifted(
            splicer.new_index.get(r.eqn, -1),
            jaxpr.eqns[r.eqn].primitive.name,
            r.source,
            r.reason,
            leaves_of(r.weight),
        )
        for r in refusals
    )
    return lifted_flat, LiftReport(lifted, not_lifted)


#: single-input ops that only re-read a parameter (its name is kept in the texts)
_READS = frozenset(
    {"convert_element_type", "broadcast_in_dim", "reshape", "squeeze", "copy", "transpose"}
)


class _LeafFinder:
    """``(path, leaf index)`` of every parameter leaf a Var is computed from (cached)."""

    def __init__(self, jaxpr: Any, invar_to_path: dict, path_to_invars: dict) -> None:
        self.eqns = jaxpr.eqns
        self.producer = {o: i for i, e in enumerate(jaxpr.eqns) for o in e.outvars}
        self.invar_to_path = invar_to_path
        self.path_to_invars = path_to_invars
        self.cache: dict = {}

    def plain_read(self, var: Any) -> tuple[Any, str]:
        """``(leaf invar, '.T' or '')`` when ``var`` only re-reads one (a cast, a broadcast,
        a transpose); else ``(var, '')``."""
        suffix = ""
        while var not in self.invar_to_path:
            index = self.producer.get(var)
            eqn = None if index is None else self.eqns[index]
            if eqn is None or eqn.primitive.name not in _READS or len(eqn.invars) != 1:
                return var, ""
            if eqn.primitive.name == "transpose":
                suffix = "" if suffix else ".T"
            var = eqn.invars[0]
        return var, suffix

    def __call__(self, var: Any) -> tuple:
        if var in self.cache:
            return self.cache[var]
        found: dict = {}
        seen, stack = {var}, [var]
        while stack:
            current = stack.pop()
            path = self.invar_to_path.get(current)
            if path is not None:
                found[(path, self.path_to_invars[path].index(current))] = None
                continue
            index = self.producer.get(current)
            for atom in () if index is None else self.eqns[index].invars:
                if _compat.is_var(atom) and atom not in seen:
                    seen.add(atom)
                    stack.append(atom)
        self.cache[var] = tuple(sorted(found, key=str))
        return self.cache[var]


class _Splicer:
    """Traces each plan's replacement, then rebuilds the equation list once."""

    def __init__(self, flat: InlinedJaxpr) -> None:
        self.flat = flat
        self.traced: dict = {}
        self.new_index: dict = {}
        #: ``{id(plan): [indices of its ETP equations]}`` (a fused gate's blocks: several)
        self.etp_rows: dict = {}

    def prepare(self, plan: Plan) -> str:
        """Trace ``plan.fn``; a reason when it cannot replace the plain op (else '')."""
        avals = [jax.ShapeDtypeStruct(a.aval.shape, a.aval.dtype) for a in plan.args]
        try:
            closed = jax.make_jaxpr(plan.fn)(*avals)
        except (TypeError, ValueError) as error:
            return f"the ETP op refused its operands ({error})"
        inner, consts = split_closed(closed)
        inner_flat = inline_calls(inner, consts, if_convert=False)
        got = [_shape_dtype(v) for v in inner_flat.jaxpr.outvars]
        want = [_shape_dtype(v) for v in plan.outs or (plan.args[0],)]
        if got != want:
            return f"the ETP op's result {got} differs from the plain op's {want}"
        self.traced[id(plan)] = inner_flat
        return ""

    def emit(self, plans: list) -> tuple[InlinedJaxpr, dict]:
        """The lifted flat jaxpr and ``{id(plan): index of its ETP equation}``."""
        from etp_viz.ops import is_etp_primitive

        flat = self.flat
        jaxpr = flat.jaxpr
        at: dict = {}
        for plan in plans:
            at.setdefault(plan.at, []).append(plan)
        dropped = {i for p in plans for i in p.drop}
        maybe_dead = {i for p in plans for i in p.maybe_dead}
        constvars, consts = list(flat.constvars), list(flat.consts)
        # (equation, original index or None, nested_in stack, plan whose ETP equation it is)
        rows: list = []
        for index, eqn in enumerate(jaxpr.eqns):
            stack = flat.nested_in.get(index)
            invars = list(eqn.invars)
            for plan in at.get(index, ()):
                spliced = self._splice(plan, eqn, constvars, consts)
                for new in spliced:
                    owner = plan if is_etp_primitive(new.primitive) else None
                    rows.append((new, None, stack, owner))
                if plan.kind == "elemwise":
                    invars[plan.operand] = spliced[-1].outvars[0]
            if index in dropped:
                continue
            if invars != list(eqn.invars):
                eqn = eqn.replace(invars=invars)
            rows.append((eqn, index, stack, None))
        rows = _drop_dead(rows, jaxpr.outvars, maybe_dead)
        eqns: list = []
        nested_in: dict = {}
        where: dict = {}
        for new_index, (eqn, old, stack, owner) in enumerate(rows):
            eqns.append(eqn)
            if stack:
                nested_in[new_index] = stack
            if old is not None:
                self.new_index[old] = new_index
            if owner is not None:
                where.setdefault(id(owner), new_index)
                self.etp_rows.setdefault(id(owner), []).append(new_index)
        lifted = build_jaxpr(constvars, flat.invars, jaxpr.outvars, eqns)
        return InlinedJaxpr(lifted, consts, constvars, list(flat.invars), nested_in), where

    def _splice(self, plan: Plan, like: Any, constvars: list, consts: list) -> list:
        inner_flat = self.traced[id(plan)]
        inner = inner_flat.jaxpr
        env: dict = dict(zip(inner.invars, plan.args))
        for var, value in zip(inner_flat.constvars, inner_flat.consts):
            fresh = _compat.new_var(var.aval)
            constvars.append(fresh)
            consts.append(value)
            env[var] = fresh
        env.update(zip(inner.outvars, plan.outs))
        source_info = like.source_info
        eqns = []
        for eqn in inner.eqns:
            invars = [env.get(a, a) if _compat.is_var(a) else a for a in eqn.invars]
            outvars = []
            for out in eqn.outvars:
                if out not in env:
                    env[out] = _compat.new_var(out.aval)
                outvars.append(env[out])
            eqns.append(eqn.replace(invars=invars, outvars=outvars, source_info=source_info))
        for index in plan.chain:  # the marked value re-broadcast as the plain op read it
            chain_eqn = self.flat.jaxpr.eqns[index]
            fresh = _compat.new_var(chain_eqn.outvars[0].aval)
            eqns.append(chain_eqn.replace(invars=[eqns[-1].outvars[0]], outvars=[fresh]))
        return eqns


def _shape_dtype(var: Any) -> tuple:
    aval: Any = var.aval
    return tuple(aval.shape), aval.dtype


def _drop_dead(rows: list, outvars: Any, candidates: set) -> list:
    """Drop the candidate equations (original indices) whose results nothing reads."""
    used = {v for v in outvars if _compat.is_var(v)}
    keep = []
    for row in reversed(rows):
        eqn, old = row[0], row[1]
        dead = old in candidates and not eqn.effects and not any(o in used for o in eqn.outvars)
        if dead:
            continue
        used.update(a for a in eqn.invars if _compat.is_var(a))
        keep.append(row)
    return keep[::-1]
