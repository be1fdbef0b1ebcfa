r"""Stage 4: hidden perturbations :math:`h = \hat h + p`.

One new invar ``p`` per hidden outvar. The equation producing ``h`` is redirected to a fresh
``ĥ`` and ``h = add ĥ p`` is inserted right after it, so everything downstream (readouts,
later layers, the state output) sees the perturbed value and
:math:`\partial L^t/\partial h^t = \partial L^t/\partial p` at ``p = 0``. A hidden state that
is only read (its outvar is an invar or a literal) gets ``h^{t-1} + p`` in the outputs only.
All other Vars are those of ``module_info.jaxpr``, so relation and group Vars stay valid.

One exception (given the hidden groups): an equation whose every path to the step's outputs
runs into another *new state of the same group* reads ``ĥ``, not ``h`` -- an LSTM's
``h = o * tanh(c)`` reads the unperturbed new ``c``. The group's traces already carry that
in-step path (its ``D_f`` and ``D`` are the total in-step derivatives of each state), so the
learning signal of ``c`` must be the partial :math:`\partial L^t/\partial c^t` with ``h^t``
held: seen through ``h`` as well, the path ``y -> c -> h -> L`` was counted twice (D-RTRL's LSTM
gradients of ``Wi``, ``Wg``, ``Wf`` were 2x BPTT's at ``T = 1``; ``docs/semantics.md``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax

from etp_viz import _compat
from etp_viz._compat import new_jaxpr_eqn

from ._jaxpr import VISITS, build_jaxpr, eval_jaxpr, new_var
from .module_info import ModuleInfo, extract_module_info

__all__ = [
    "HiddenPerturbation",
    "add_hidden_perturbation_from_minfo",
    "add_hidden_perturbation_in_module",
]


class HiddenPerturbation(NamedTuple):
    """The hidden-perturbation information.

    Attributes
    ----------
    perturb_vars : list of Var
        One per hidden state, same aval as the state.
    perturb_hidden_paths : list of paths
    perturb_hidden_states : list of HiddenState
    perturb_jaxpr : Jaxpr
        Invars ``[*module_info.invars, *perturb_vars]``, same outvars layout.
    closed_perturb_jaxpr : ClosedJaxpr
    hidden_producer_eqn_indices : dict
        ``{path: top-level index of the equation producing h}`` (``None`` when read-only).
    in_group_reads : frozenset of paths
        The states read unperturbed by their group's other new states (module docstring).
    """

    perturb_vars: list
    perturb_hidden_paths: list
    perturb_hidden_states: list
    perturb_jaxpr: Any
    closed_perturb_jaxpr: Any
    hidden_producer_eqn_indices: dict
    consts: list
    #: hidden paths whose in-step reads by their group's other new states see them unperturbed
    #: (their learning signal is the partial one; the group's traces carry that path)
    in_group_reads: frozenset = frozenset()

    def call(self, *flat_args: Any) -> list:
        """Evaluate with ``[*arg leaves, *state leaves, *perturbations]``."""
        return eval_jaxpr(self.perturb_jaxpr, self.consts, *flat_args)


def add_hidden_perturbation_from_minfo(
    minfo: ModuleInfo, hid_path_to_group: dict | None = None
) -> HiddenPerturbation:
    """Build the perturbed jaxpr of a traced model (``hid_path_to_group``: the hidden groups,
    whose in-step reads of a new same-group state see it unperturbed; module docstring)."""
    paths = list(minfo.hidden_path_to_outvar)
    perturb_vars = [new_var(minfo.hidden_path_to_outvar[p].aval) for p in paths]
    # producer eqn index -> [(outvar h, p)]
    after: dict[int, list[tuple[Any, Any]]] = {}
    read_only: dict[Any, Any] = {}
    producers: dict[tuple, int | None] = {}
    for path, p in zip(paths, perturb_vars):
        h = minfo.hidden_path_to_outvar[path]
        index = minfo.def_use.producer.get(h) if _compat.is_var(h) else None
        producers[path] = index
        if index is None:
            read_only[path] = p
        else:
            after.setdefault(index, []).append((h, p))
    renamed = {h: new_var(h.aval) for pairs in after.values() for h, _ in pairs}
    inner, in_group = _same_group_reads(minfo, hid_path_to_group or {}, renamed)
    eqns: list = []
    for index, eqn in enumerate(minfo.jaxpr.eqns):
        VISITS.count += 1
        if index in inner:
            swap = inner[index]
            eqn = eqn.replace(
                invars=[swap.get(v, v) if _compat.is_var(v) else v for v in eqn.invars]
            )
        if index not in after:
            eqns.append(eqn)
            continue
        eqns.append(eqn.replace(outvars=[renamed.get(v, v) for v in eqn.outvars]))
        for h, p in after[index]:
            eqns.append(_add_eqn(renamed[h], p, h, eqn))
    outvars = list(minfo.jaxpr.outvars)
    state_start = minfo.num_out_leaves
    for path, p in read_only.items():
        h = minfo.hidden_path_to_outvar[path]
        new_h = new_var(h.aval)
        eqns.append(_add_eqn(h, p, new_h, None))
        for i in range(state_start, len(outvars)):
            if outvars[i] is h:
                outvars[i] = new_h
    jaxpr = build_jaxpr(minfo.constvars, [*minfo.invars, *perturb_vars], outvars, eqns)
    return HiddenPerturbation(
        perturb_vars=perturb_vars,
        perturb_hidden_paths=paths,
        perturb_hidden_states=[minfo.retrieved_model_states.get(p) for p in paths],
        perturb_jaxpr=jaxpr,
        closed_perturb_jaxpr=_compat.close_jaxpr(jaxpr, minfo.consts),
        hidden_producer_eqn_indices=producers,
        consts=list(minfo.consts),
        in_group_reads=in_group,
    )


def _same_group_reads(minfo: ModuleInfo, hid_path_to_group: dict, renamed: dict) -> tuple:
    """``({equation index: {h: ĥ}}, paths)``: the reads of a new hidden value ``h`` by
    equations whose every path onward first reaches another new state of ``h``'s group (a
    search from each reader that stops at new states and outputs), and the hidden paths all
    of whose in-step paths into their group's other new states were so redirected. Only
    groups of two or more states have such reads."""
    outvars = {v for v in minfo.jaxpr.outvars if _compat.is_var(v)}
    hidden = {v for v in minfo.hidden_path_to_outvar.values() if _compat.is_var(v)}
    reads: dict[int, dict] = {}
    clean: set = set()
    for path, group in hid_path_to_group.items():
        h = minfo.hidden_path_to_outvar.get(path)
        if h is None or len(group.hidden_paths) < 2 or h not in renamed:
            continue
        stops = {minfo.hidden_path_to_outvar[p] for p in group.hidden_paths} - {h}
        mixed = False
        for reader in minfo.def_use.consumers.get(h, ()):
            reached, escaped = _paths_onward(minfo, reader, stops, (outvars | hidden) - stops)
            if reached and not escaped:
                reads.setdefault(reader, {})[h] = renamed[h]
            mixed |= reached and escaped
        if not mixed:
            clean.add(tuple(path))
    return reads, frozenset(clean)


def _paths_onward(minfo: ModuleInfo, start: int, stops: set, exits: set) -> tuple[bool, bool]:
    """``(reaches stops, reaches exits)`` from equation ``start``, searching no further than
    either (a new hidden value or an output ends a path)."""
    seen, todo = {start}, [start]
    reached = escaped = False
    while todo:
        eqn = minfo.jaxpr.eqns[todo.pop()]
        VISITS.count += 1
        for var in eqn.outvars:
            if var in stops or var in exits:
                reached |= var in stops
                escaped |= var in exits
                continue
            for reader in minfo.def_use.consumers.get(var, ()):
                if reader not in seen:
                    seen.add(reader)
                    todo.append(reader)
    return reached, escaped


def add_hidden_perturbation_in_module(model: Any, *args: Any) -> HiddenPerturbation:
    """Trace ``model`` and build its perturbed jaxpr."""
    return add_hidden_perturbation_from_minfo(extract_module_info(model, *args))


def _add_eqn(a: Any, b: Any, out: Any, like: Any) -> Any:
    source_info = getattr(like, "source_info", None)
    ctx = getattr(like, "ctx", None)
    kwargs = {} if ctx is None else {"ctx": ctx}
    return new_jaxpr_eqn([a, b], [out], jax.lax.add_p, {}, frozenset(), source_info, **kwargs)
