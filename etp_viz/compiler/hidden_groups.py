r"""Stage 2: hidden groups and their h -> h transition jaxprs.

A *hidden group* is a set of hidden states whose updates read each other (LSTM ``h`` and ``c``),
stacked on a trailing state axis ``S``. Its transition jaxpr maps
:math:`h^{t-1} \mapsto h^t` with everything that does not depend on :math:`h^{t-1}` supplied
as constvars; :meth:`HiddenGroup.diagonal_jacobian` returns the per-position blocks
:math:`D^t[p, a, b] = \partial h^t[p, a] / \partial h^{t-1}[p, b]` used by D-RTRL.

Two recurrence modes (``docs/semantics.md``, section "compiler"):

``'diagonal'`` (default)
    Every non-gradient-enabled ETP equation is a boundary (its recurrent contribution rides
    on the weight trace), so a vanilla RNN has an empty transition (D = 0) and an element-wise
    leaky/LIF recurrence keeps its exact diagonal. A plain op that couples positions
    (``h @ M`` with a constant ``M``, a reduction, a shift ...) is *cut* (its output becomes a
    constvar) and reported as ``TRANSITION_POSITION_COUPLING_CUT``; what remains is
    position-preserving, so one VJP per state gives the exact diagonal.
``'coupled'``
    Nothing is cut: recurrent ETP ops stay in the transition and the diagonal blocks are taken
    from the full Jacobian (``jax.jacfwd``; cost grows with the square of the state size).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from etp_viz import _compat

from ._jaxpr import REVERSE_ONLY_PRIMITIVE_NAMES, VISITS, binds, eval_jaxpr, slice_jaxpr
from ._positions import PositionCache, carries_no_derivative, is_position_preserving
from ._primitive_probe import PrimitiveJudgement
from .diagnostics import DiagnosticCollector, DiagnosticKind, DiagnosticLevel
from .module_info import ModuleInfo, extract_module_info

__all__ = [
    "HiddenGroup",
    "RECURRENCE_MODES",
    "find_hidden_groups_from_minfo",
    "find_hidden_groups_from_module",
]

RECURRENCE_MODES = ("diagonal", "coupled")


class HiddenGroup(NamedTuple):
    """Hidden states updated together, with their transition jaxpr.

    Attributes
    ----------
    index : int
    hidden_paths : list of paths (compiled-state order)
    hidden_states : list of HiddenState
    hidden_invars, hidden_outvars : list of Var
    transition_jaxpr : Jaxpr
        ``constvars = transition_jaxpr_constvars``, ``invars = hidden_invars``,
        ``outvars = hidden_outvars``.
    transition_jaxpr_constvars : list of Var
    varshape : tuple of int
        Shape of one state (without the state axis).
    state_counts : tuple of int
        States per path (1 for a ``HiddenState``, the last axis for a multi-state class).
    multi_state : tuple of bool
        Whether each path's value carries its own trailing state axis.
    recurrence : str
        ``'diagonal'`` or ``'coupled'``.
    transition_eqn_indices : tuple of int
        Top-level equation indices in the transition.
    cut_eqn_indices : tuple of int
        Position-coupling equations cut out of the transition (``'diagonal'`` mode).
    """

    # a field named like ``tuple.index``: valid at runtime, rejected by mypy's NamedTuple check
    index: int  # type: ignore[assignment]
    hidden_paths: list
    hidden_states: list
    hidden_invars: list
    hidden_outvars: list
    transition_jaxpr: Any
    transition_jaxpr_constvars: list
    varshape: tuple
    state_counts: tuple
    multi_state: tuple
    recurrence: str = "diagonal"
    transition_eqn_indices: tuple = ()
    cut_eqn_indices: tuple = ()

    @property
    def num_state(self) -> int:
        """``S``: the number of states stacked on the trailing axis."""
        return sum(self.state_counts)

    def concat_hidden(self, values: Sequence[Any]) -> jax.Array:
        """Stack per-path values into one array of shape ``(*varshape, S)``."""
        parts = [v if multi else v[..., None] for v, multi in zip(values, self.multi_state)]
        return jnp.concatenate(parts, axis=-1)

    def split_hidden(self, value: jax.Array) -> list:
        """Inverse of :meth:`concat_hidden`."""
        out, start = [], 0
        for count, multi in zip(self.state_counts, self.multi_state):
            part = value[..., start : start + count]
            out.append(part if multi else part[..., 0])
            start += count
        return out

    def transition(self, hidden_vals: Sequence[Any], const_vals: Any) -> list:
        """Evaluate the transition: new values of each path from old ones."""
        return eval_jaxpr(self.transition_jaxpr, self._consts(const_vals), *hidden_vals)

    def diagonal_jacobian(self, hidden_vals: Sequence[Any], const_vals: Any) -> jax.Array:
        """Per-position blocks of dh/dh, shape ``(*varshape, S, S)``.

        Entry ``[p, a, b]`` is :math:`\\partial h^t[p, a] / \\partial h^{t-1}[p, b]`.
        ``'diagonal'`` mode: one VJP per state ``a`` with a cotangent of ones on slice ``a``
        (exact because the transition is position-preserving). ``'coupled'`` mode: the
        position-diagonal of the full ``jax.jacfwd`` Jacobian (``jax.jacrev`` through a
        ``jax.custom_vjp``).
        """
        consts = self._consts(const_vals)

        def step(h_cat: jax.Array) -> jax.Array:
            new = eval_jaxpr(self.transition_jaxpr, consts, *self.split_hidden(h_cat))
            return self.concat_hidden(new).astype(h_cat.dtype)

        h_cat = self.concat_hidden(hidden_vals)
        num = self.num_state
        if self.recurrence == "coupled":
            # a custom_vjp (surrogate spike) in the transition has no forward mode
            reverse = binds(self.transition_jaxpr, REVERSE_ONLY_PRIMITIVE_NAMES)
            full = (jax.jacrev if reverse else jax.jacfwd)(step)(h_cat)
            size = max(1, h_cat.size // num)
            full = full.reshape(size, num, size, num)
            blocks = full[jnp.arange(size), :, jnp.arange(size), :]
            return blocks.reshape(*self.varshape, num, num)
        out, vjp = jax.vjp(step, h_cat)

        def row(a: jax.Array) -> jax.Array:
            return vjp(jnp.zeros_like(out).at[..., a].set(1))[0]

        rows = jax.vmap(row)(jnp.arange(num))
        return jnp.moveaxis(rows, 0, -2)

    def _consts(self, const_vals: Any) -> list:
        if isinstance(const_vals, dict):
            return [const_vals[v] for v in self.transition_jaxpr_constvars]
        return list(const_vals)


def find_hidden_groups_from_minfo(
    minfo: ModuleInfo,
    *,
    recurrence: str = "diagonal",
    diagnostics: DiagnosticCollector | None = None,
) -> tuple[list[HiddenGroup], dict]:
    """Find the hidden groups of a traced model.

    Returns
    -------
    (hidden_groups, hid_path_to_group)
    """
    if recurrence not in RECURRENCE_MODES:
        raise ValueError(f"recurrence={recurrence!r}; expected one of {RECURRENCE_MODES}")
    diagnostics = diagnostics if diagnostics is not None else DiagnosticCollector()
    paths = list(minfo.hidden_path_to_invar)
    coupled = recurrence == "coupled"
    dep, cuts, judged = _forward_dependencies(minfo, paths, coupled)
    members = _merge_connected(minfo, paths, dep, diagnostics)
    needed = _backward_needed(minfo, members, cuts, coupled)
    groups = []
    masks = [sum(1 << i for i in member) for member in members]
    transitions = _transition_eqns(minfo, masks, dep, needed)
    for g_index, member in enumerate(members):
        hidden_mask = masks[g_index]
        cut_here = _relevant_cuts(minfo, g_index, hidden_mask, cuts, needed)
        group = _build_group(minfo, g_index, member, paths, transitions[g_index], recurrence)
        groups.append(group._replace(cut_eqn_indices=cut_here))
        _report_group(minfo, groups[-1], diagnostics, judged)
    _report_judgements(minfo, paths, judged, diagnostics)
    hid_path_to_group = {path: g for g in groups for path in g.hidden_paths}
    return groups, hid_path_to_group


def find_hidden_groups_from_module(
    model: Any, *args: Any, recurrence: str = "diagonal"
) -> tuple[list[HiddenGroup], dict]:
    """Find hidden groups from a model (traces it first). See
    :func:`find_hidden_groups_from_minfo`."""
    return find_hidden_groups_from_minfo(extract_module_info(model, *args), recurrence=recurrence)


def _is_boundary(eqn: Any, coupled: bool) -> bool:
    from etp_viz.ops import is_etp_enable_gradient_primitive, is_etp_primitive

    if coupled:
        return False
    return is_etp_primitive(eqn.primitive) and not is_etp_enable_gradient_primitive(eqn.primitive)


def _forward_dependencies(minfo: ModuleInfo, paths: list, coupled: bool):
    """``dep[var]``: bitmask of hidden states (by position in ``paths``) whose previous value
    reaches ``var`` through transition equations; ``cuts``: coupling eqn index -> mask;
    ``judged``: each judgement of a primitive with no built-in rule -> (equation indices,
    hidden-state mask)."""
    dep: dict[Any, int] = {minfo.hidden_path_to_invar[p]: 1 << i for i, p in enumerate(paths)}
    cuts: dict[int, int] = {}
    cache = PositionCache()
    judged: dict[PrimitiveJudgement, tuple[list, int]] = {}
    for index, eqn in enumerate(minfo.jaxpr.eqns):
        VISITS.count += 1
        masks = [dep.get(v, 0) if _compat.is_var(v) else 0 for v in eqn.invars]
        mask = 0
        for m in masks:
            mask |= m
        if not mask or _is_boundary(eqn, coupled) or carries_no_derivative(eqn):
            continue
        seen = len(cache.judged)
        preserving = coupled or is_position_preserving(eqn, [bool(m) for m in masks], cache)
        for judgement in cache.judged[seen:]:
            indices, old = judged.get(judgement, ([], 0))
            judged[judgement] = (indices + [index], old | mask)
        if not preserving:
            cuts[index] = mask
            continue
        for var in eqn.outvars:
            if _compat.is_var(var):
                dep[var] = mask
    return dep, cuts, judged


def _same_layer(a: tuple, b: tuple) -> bool:
    for x, y in zip(a, b):
        if x != y:
            return not (_is_index(x) and _is_index(y))
    return True


def _is_index(key: Any) -> bool:
    return isinstance(key, int) or (isinstance(key, str) and key.isdigit())


def _varshape(minfo: ModuleInfo, path: tuple) -> tuple:
    shape = tuple(minfo.hidden_path_to_invar[path].aval.shape)
    multi = _is_multi(minfo, path)
    return shape[:-1] if multi else shape


def _is_multi(minfo: ModuleInfo, path: tuple) -> bool:
    import brainstate

    state = minfo.retrieved_model_states.get(path)
    return isinstance(state, getattr(brainstate, "HiddenGroupState", ()))


def _merge_connected(minfo, paths, dep, diagnostics) -> list[list[int]]:
    parent = list(range(len(paths)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for j, path in enumerate(paths):
        outvar = minfo.hidden_path_to_outvar[path]
        mask = dep.get(outvar, 0) if _compat.is_var(outvar) else 0
        for i in range(len(paths)):
            if i == j or not mask >> i & 1:
                continue
            if not _same_layer(paths[i], path):
                continue
            if _varshape(minfo, paths[i]) != _varshape(minfo, path):
                diagnostics.emit(
                    DiagnosticKind.STATE_MISMATCH,
                    DiagnosticLevel.INFO,
                    f"Hidden state {_dot(path)} (shape {_varshape(minfo, path)}) reads "
                    f"{_dot(paths[i])} (shape {_varshape(minfo, paths[i])}); states of different "
                    "shapes cannot share a per-position dh/dh block, so they stay in separate "
                    "groups and this cross-term is dropped from D. Give them the same shape "
                    "(or stack them in a HiddenGroupState) to keep it.",
                    hidden_paths=(paths[i], path),
                    eqn_indices=_producer(minfo, outvar),
                )
                continue
            parent[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(paths)):
        groups.setdefault(find(i), []).append(i)
    return list(groups.values())


def _backward_needed(minfo, members, cuts, coupled) -> dict:
    """``needed[var]``: bitmask of groups whose new value depends on ``var`` via transition
    equations (not crossing boundaries or cuts)."""
    needed: dict[Any, int] = {}
    for g_index, member in enumerate(members):
        for i in member:
            outvar = minfo.hidden_path_to_outvar[list(minfo.hidden_path_to_invar)[i]]
            if _compat.is_var(outvar):
                needed[outvar] = needed.get(outvar, 0) | 1 << g_index
    for index in range(len(minfo.jaxpr.eqns) - 1, -1, -1):
        VISITS.count += 1
        eqn = minfo.jaxpr.eqns[index]
        mask = 0
        for var in eqn.outvars:
            mask |= needed.get(var, 0) if _compat.is_var(var) else 0
        if not mask or index in cuts or _is_boundary(eqn, coupled) or carries_no_derivative(eqn):
            continue
        for var in eqn.invars:
            if _compat.is_var(var):
                needed[var] = needed.get(var, 0) | mask
    return needed


def _transition_eqns(minfo, masks: list, dep: dict, needed: dict) -> list:
    """Per group, the equations of its transition: an output depends on the group's previous
    hidden values (``dep``) and its new values need an output (``needed``). One pass over the
    equations for every group (a deep stack has one group per layer)."""
    found: list = [[] for _ in masks]
    for index, eqn in enumerate(minfo.jaxpr.eqns):
        VISITS.count += 1
        depends, wanted = 0, 0
        for v in eqn.outvars:
            if _compat.is_var(v):
                depends |= dep.get(v, 0)
                wanted |= needed.get(v, 0)
        while wanted:  # each group whose new value needs it (lowest bit first)
            low = wanted & -wanted
            g = low.bit_length() - 1
            if depends & masks[g]:
                found[g].append(index)
            wanted ^= low
    return found


def _build_group(minfo, g_index, member, paths, eqn_indices, recurrence) -> HiddenGroup:
    group_paths = [paths[i] for i in member]
    invars = [minfo.hidden_path_to_invar[p] for p in group_paths]
    outvars = [minfo.hidden_path_to_outvar[p] for p in group_paths]
    jaxpr, constvars = slice_jaxpr(minfo.jaxpr, eqn_indices, invars, outvars)
    multi = tuple(_is_multi(minfo, p) for p in group_paths)
    return HiddenGroup(
        index=g_index,
        hidden_paths=group_paths,
        hidden_states=[minfo.retrieved_model_states[p] for p in group_paths],
        hidden_invars=invars,
        hidden_outvars=outvars,
        transition_jaxpr=jaxpr,
        transition_jaxpr_constvars=constvars,
        varshape=_varshape(minfo, group_paths[0]),
        state_counts=tuple(minfo.hidden_path_to_num_state[p] for p in group_paths),
        multi_state=multi,
        recurrence=recurrence,
        transition_eqn_indices=tuple(eqn_indices),
    )


def _relevant_cuts(minfo, g_index, hidden_mask, cuts, needed) -> tuple:
    """Cut equations that read this group's hidden values and feed its new values."""
    return tuple(
        index
        for index, mask in cuts.items()
        if mask & hidden_mask
        and any(
            needed.get(v, 0) >> g_index & 1
            for v in minfo.jaxpr.eqns[index].outvars
            if _compat.is_var(v)
        )
    )


def _report_group(minfo, group, diagnostics, judged) -> None:
    for index in group.cut_eqn_indices:
        eqn = minfo.jaxpr.eqns[index]
        why = "".join(
            f" (judged by structure: {j.reason})"
            for j, (indices, _) in judged.items()
            if not j.elementwise and index in indices and j.primitive == eqn.primitive.name
        )
        diagnostics.emit(
            DiagnosticKind.TRANSITION_POSITION_COUPLING_CUT,
            DiagnosticLevel.WARNING,
            f"Equation {index} ({eqn.primitive.name}) mixes positions of hidden state(s) "
            f"{', '.join(map(_dot, group.hidden_paths))} on the h -> h path{why}; a column "
            "sum is not a diagonal, so it was cut from the transition (its output is treated "
            "as a constant: dh/dh misses this term). Use an ETP primitive for that weight "
            "(e.g. etp_viz.ops.matmul) so its effect rides on a weight trace, or compile "
            "with recurrence='coupled' for the exact per-position blocks.",
            primitive=eqn.primitive,
            hidden_paths=group.hidden_paths,
            eqn_indices=(index,),
            group_index=group.index,
        )
    if len(group.hidden_paths) > 1:
        diagnostics.emit(
            DiagnosticKind.HIDDEN_GROUP_MERGED,
            DiagnosticLevel.INFO,
            f"Hidden states {', '.join(map(_dot, group.hidden_paths))} read each other and form "
            f"group {group.index} with S={group.num_state} states of shape {group.varshape}.",
            hidden_paths=group.hidden_paths,
            eqn_indices=group.transition_eqn_indices,
            group_index=group.index,
        )


def _report_judgements(minfo, paths, judged, diagnostics) -> None:
    """One INFO record per judgement of a primitive with no built-in rule on the h -> h
    path: which primitive, kept or cut, how it was decided and why."""
    for judgement, (indices, mask) in judged.items():
        hidden = [paths[i] for i in range(len(paths)) if mask >> i & 1]
        verdict = (
            "element-wise: kept in the h -> h transition"
            if judgement.elementwise
            else "position-mixing: cut from the h -> h transition"
        )
        top = [minfo.jaxpr.eqns[i].primitive for i in indices]
        primitive = next((p for p in top if p.name == judgement.primitive), judgement.primitive)
        diagnostics.emit(
            DiagnosticKind.PRIMITIVE_JUDGED,
            DiagnosticLevel.INFO,
            f"Primitive '{judgement.primitive}' (equation(s) {sorted(set(indices))}, on the "
            f"path of {', '.join(map(_dot, hidden))}) has no built-in rule; judged {verdict} "
            f"({judgement.how}): {judgement.reason}.",
            primitive=primitive,
            hidden_paths=hidden,
            eqn_indices=indices,
            elementwise=judgement.elementwise,
            how=judgement.how,
            reason=judgement.reason,
        )


def _producer(minfo: ModuleInfo, var: Any) -> tuple:
    index = minfo.def_use.producer.get(var) if _compat.is_var(var) else None
    return () if index is None else (index,)


def _dot(path: tuple) -> str:
    return ".".join(map(str, path))
