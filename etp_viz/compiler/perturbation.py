r"""Stage 4: hidden perturbations :math:`h = \hat h + p`.

One new invar ``p`` per hidden outvar. The equation producing ``h`` is redirected to a fresh
``ĥ`` and ``h = add ĥ p`` is inserted right after it, so everything downstream (readouts,
later layers, the state output) sees the perturbed value and
:math:`\partial L^t/\partial h^t = \partial L^t/\partial p` at ``p = 0``. A hidden state that
is only read (its outvar is an invar or a literal) gets ``h^{t-1} + p`` in the outputs only.
All other Vars are those of ``module_info.jaxpr``, so relation and group Vars stay valid.
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
    """

    perturb_vars: list
    perturb_hidden_paths: list
    perturb_hidden_states: list
    perturb_jaxpr: Any
    closed_perturb_jaxpr: Any
    hidden_producer_eqn_indices: dict
    consts: list

    def call(self, *flat_args: Any) -> list:
        """Evaluate with ``[*arg leaves, *state leaves, *perturbations]``."""
        return eval_jaxpr(self.perturb_jaxpr, self.consts, *flat_args)


def add_hidden_perturbation_from_minfo(minfo: ModuleInfo) -> HiddenPerturbation:
    """Build the perturbed jaxpr of a traced model."""
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
    eqns: list = []
    for index, eqn in enumerate(minfo.jaxpr.eqns):
        VISITS.count += 1
        if index not in after:
            eqns.append(eqn)
            continue
        renamed = {h: new_var(h.aval) for h, _ in after[index]}
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
    )


def add_hidden_perturbation_in_module(model: Any, *args: Any) -> HiddenPerturbation:
    """Trace ``model`` and build its perturbed jaxpr."""
    return add_hidden_perturbation_from_minfo(extract_module_info(model, *args))


def _add_eqn(a: Any, b: Any, out: Any, like: Any) -> Any:
    source_info = getattr(like, "source_info", None)
    ctx = getattr(like, "ctx", None)
    kwargs = {} if ctx is None else {"ctx": ctx}
    return new_jaxpr_eqn([a, b], [out], jax.lax.add_p, {}, frozenset(), source_info, **kwargs)
