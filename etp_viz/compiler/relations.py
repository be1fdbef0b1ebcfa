r"""Stage 3: relations between ETP primitives, their weights and the hidden states they feed.

For every top-level ETP equation :math:`y = f(x, \theta)` the pass

1. traces each trainable input back through its producers to a ``ParamState`` leaf
   (masks, ``weight_fn`` chains), keeping the equations passed as a small pull-back jaxpr;
2. walks forward from ``y`` without crossing another non-gradient-enabled ETP equation
   (those are the *blocking* equations) and collects the hidden outvars reached;
3. drops hidden states whose shape does not broadcast with ``y`` and classifies each kept one
   as ``ALL_DIRECT`` or ``MIXED`` (also reachable through a blocking equation);
4. builds, per connected hidden group, the ``y -> h`` tail jaxpr (forward slice from ``y``
   intersected with the backward slice of the group's new hidden values).

A weight reaching hidden state only through other trainable ETP equations is excluded (the
non-parametric-tail rule), one reaching none is non-temporal; records carry the path drawn.
"""

from __future__ import annotations

from collections import deque
from typing import Any, NamedTuple

import numpy as np

from etp_viz import _compat

from ._jaxpr import VISITS, eval_jaxpr, slice_jaxpr, trace_to_param
from ._positions import is_tail_position_preserving, ones_tangent_vanishes
from .control_flow import report_control_flow_primitives
from .dataflow import bits_by_key, bits_of, hidden_reach, or_all
from .diagnostics import DiagnosticCollector, DiagnosticKind, DiagnosticLevel, weight_op_fix
from .hidden_groups import find_hidden_groups_from_minfo
from .module_info import ModuleInfo, extract_module_info

__all__ = [
    "HiddenParamOpRelation",
    "PathClassification",
    "find_hidden_param_op_relations_from_minfo",
    "find_hidden_param_op_relations_from_module",
]


class PathClassification:
    """Classification of the paths from ``y`` to one hidden outvar."""

    #: no path crosses another non-gradient-enabled ETP equation: included
    ALL_DIRECT = "all_direct"
    #: every path crosses one: excluded (weight -> weight)
    ALL_THROUGH_OTHER_ETP = "all_through_other_etp"
    #: both kinds exist: included, the indirect part is not captured (warning)
    MIXED = "mixed"


class HiddenParamOpRelation(NamedTuple):
    r"""Connection between an ETP equation, its trainable parameters and hidden states.

    The spec's fields, plus: ``eqn_index`` (top-level equation index), ``blocking_eqn_indices``
    (other ETP equations that stopped the forward walk), ``path_eqn_indices`` (equations of the
    y -> h tails), ``tail_position_preserving``, and per trainable key the pull-back from the
    ``ParamState`` value to the input (``trainable_param_jaxprs``, ``trainable_param_fns``,
    ``trainable_is_leaf``, ``trainable_chain_eqn_indices``).
    """

    primitive: Any
    x_var: Any
    y_var: Any
    hidden_groups: list
    y_to_hidden_group_jaxprs: list
    connected_hidden_paths: list
    eqn_params: dict
    path_classification: dict = {}
    trainable_vars: dict = {}
    trainable_paths: dict = {}
    trainable_leaf_indices: dict = {}
    trainable_param_states: dict = {}
    trainable_processing_chains: dict = {}
    eqn_index: int = -1
    blocking_eqn_indices: tuple = ()
    path_eqn_indices: tuple = ()
    tail_position_preserving: bool = True
    trainable_is_leaf: dict = {}
    trainable_param_jaxprs: dict = {}
    trainable_param_fns: dict = {}
    trainable_chain_eqn_indices: dict = {}
    #: constvars of each ``y_to_hidden_group_jaxprs[k]`` (jax 0.12 folds them into invars)
    y_to_hidden_group_constvars: list = []
    trainable_param_constvars: dict = {}
    #: every ``(path, leaf index)`` each trainable input is computed from (weight
    #: normalisation ``g * v / |v|``: ``v`` and ``g``); the learner pulls the relation's
    #: gradient back to all of them
    trainable_all_leaves: dict = {}
    #: indices of the groups whose ``D_f`` (the tail's all-ones JVP) is zero by structure
    #: (a shift-invariant tail: a layer normalisation): their traces stay 0 for every input
    zero_tail_groups: tuple = ()

    @property
    def x(self) -> Any:
        return self.x_var

    @property
    def y(self) -> Any:
        return self.y_var

    @property
    def path(self) -> Any:
        return next(iter(self.trainable_paths.values()), None)

    @property
    def weight_path(self) -> Any:
        """Alias of :attr:`path`."""
        return self.path

    def y_to_hidden_groups(self, y_val: Any, const_vals: Any, concat_hidden_vals: bool = True):
        """Evaluate each y -> h tail. ``const_vals``: dict Var -> value, or one list per group
        (constvar order)."""
        results = []
        pairs = zip(self.y_to_hidden_group_jaxprs, self.hidden_groups)
        for k, (jaxpr, group) in enumerate(pairs):
            if isinstance(const_vals, dict):
                consts = [const_vals[v] for v in self.y_to_hidden_group_constvars[k]]
            else:
                consts = list(const_vals[k])
            hidden = eval_jaxpr(jaxpr, consts, y_val)
            results.append(group.concat_hidden(hidden) if concat_hidden_vals else hidden)
        return results

    def dict(self) -> dict:
        return self._asdict()


def find_hidden_param_op_relations_from_minfo(
    minfo: ModuleInfo,
    hid_path_to_group: dict,
    *,
    diagnostics: DiagnosticCollector | None = None,
) -> tuple:
    """Find the ETP relations of a traced model (see the module docstring)."""
    diagnostics = diagnostics if diagnostics is not None else DiagnosticCollector()
    finder = _RelationFinder(minfo, hid_path_to_group, diagnostics)
    relations = []
    for index, eqn in enumerate(minfo.jaxpr.eqns):
        VISITS.count += 1
        if _is_etp(eqn.primitive):
            relation = finder.relation_for(index)
            if relation is not None:
                relations.append(relation)
    report_control_flow_primitives(minfo, diagnostics)
    return tuple(relations)


def find_hidden_param_op_relations_from_module(
    model: Any, *args: Any, recurrence: str = "diagonal"
) -> tuple:
    """Trace ``model`` and find its ETP relations.

    Examples
    --------
    >>> gru = etp_viz.nn.GRUCell(3, 4)  # doctest: +SKIP
    >>> len(find_hidden_param_op_relations_from_module(gru, jnp.zeros(3)))  # doctest: +SKIP
    2
    """
    minfo = extract_module_info(model, *args)
    _, hid_path_to_group = find_hidden_groups_from_minfo(minfo, recurrence=recurrence)
    return find_hidden_param_op_relations_from_minfo(minfo, hid_path_to_group)


def _is_etp(primitive: Any) -> bool:
    from etp_viz.ops import is_etp_primitive

    return is_etp_primitive(primitive)


def _is_blocking(primitive: Any) -> bool:
    from etp_viz.ops import is_etp_enable_gradient_primitive

    return _is_etp(primitive) and not is_etp_enable_gradient_primitive(primitive)


class _RelationFinder:
    """Shared indexes for all ETP equations of one jaxpr (built once)."""

    def __init__(self, minfo: ModuleInfo, hid_path_to_group: dict, diagnostics) -> None:
        self.minfo = minfo
        self.eqns = minfo.jaxpr.eqns
        self.du = minfo.def_use
        self.groups = hid_path_to_group
        self.diag = diagnostics
        self.paths = list(minfo.hidden_path_to_invar)
        self.outvar_bit = {
            minfo.hidden_path_to_outvar[p]: 1 << i
            for i, p in enumerate(self.paths)
            if _compat.is_var(minfo.hidden_path_to_outvar[p])
        }
        self.reach = hidden_reach(self.eqns, self.outvar_bit)
        self.path_index = {p: i for i, p in enumerate(self.paths)}
        #: new hidden value -> the bits of the paths it is the new value of
        self.outvar_paths = bits_by_key(
            (minfo.hidden_path_to_outvar[p], 1 << i) for i, p in enumerate(self.paths)
        )
        #: hidden group index -> the bits of its paths
        self.group_paths = bits_by_key(
            (hid_path_to_group[p].index, 1 << i)
            for i, p in enumerate(self.paths)
            if p in hid_path_to_group
        )
        self.every_group = sum(1 << g for g in self.group_paths)
        self.every_group_path = or_all(self.group_paths.values())
        self.trace_cache: dict = {}
        #: new hidden value -> the bit of its hidden group
        self.outvar_group_bit = {
            minfo.hidden_path_to_outvar[p]: 1 << hid_path_to_group[p].index
            for p in self.paths
            if _compat.is_var(minfo.hidden_path_to_outvar[p]) and p in hid_path_to_group
        }

    # -- one ETP equation ---------------------------------------------------------------
    def relation_for(self, index: int) -> HiddenParamOpRelation | None:
        from etp_viz.ops import get_trainable_invars, get_x_invar_index, get_y_outvar_index

        eqn = self.eqns[index]
        prim = eqn.primitive
        x_index = get_x_invar_index(prim)
        x_var = eqn.invars[x_index] if x_index is not None else None
        x_var = x_var if _compat.is_var(x_var) else None
        y_var = eqn.outvars[get_y_outvar_index(prim)]
        self._report_eqn_shape(index, eqn)
        keys = get_trainable_invars(prim, eqn.params)
        trainables = self._resolve_trainables(index, eqn, keys)
        if trainables is None:
            return None
        weight_path = next(iter(trainables["paths"].values()))
        reached, path_eqns, masks = self._forward(index, y_var)
        blocking = list(masks)
        connected, classes = self._connect(index, prim, weight_path, y_var, reached, masks)
        if not connected:
            self._report_excluded(index, prim, weight_path, path_eqns, blocking)
            return None
        groups = list({self.groups[p].index: self.groups[p] for p in connected}.values())
        tails, tail_consts, tail_eqns = zip(*(self._tail(y_var, g, path_eqns) for g in groups))
        all_tail = sorted({i for eqns in tail_eqns for i in eqns})
        zero = self._zero_tails(y_var, groups, tails, tail_consts, all_tail)
        preserving = self._check_tail(index, prim, weight_path, y_var, all_tail, connected, zero)
        for path, cls in classes.items():
            if cls == PathClassification.MIXED:
                self._report_mixed(index, prim, weight_path, path, blocking)
        relation = HiddenParamOpRelation(
            primitive=prim,
            x_var=x_var,
            y_var=y_var,
            hidden_groups=groups,
            y_to_hidden_group_jaxprs=list(tails),
            connected_hidden_paths=connected,
            eqn_params=dict(eqn.params),
            path_classification=classes,
            trainable_vars=trainables["vars"],
            trainable_paths=trainables["paths"],
            trainable_leaf_indices=trainables["leaf_indices"],
            trainable_param_states=trainables["states"],
            trainable_processing_chains=trainables["chains"],
            eqn_index=index,
            blocking_eqn_indices=tuple(blocking),
            path_eqn_indices=tuple(all_tail),
            tail_position_preserving=preserving,
            trainable_is_leaf=trainables["is_leaf"],
            trainable_param_jaxprs=trainables["jaxprs"],
            trainable_param_fns=trainables["fns"],
            trainable_chain_eqn_indices=trainables["chain_eqns"],
            y_to_hidden_group_constvars=[list(c) for c in tail_consts],
            trainable_param_constvars=trainables["constvars"],
            trainable_all_leaves=trainables["all_leaves"],
            zero_tail_groups=zero,
        )
        self.diag.emit(
            DiagnosticKind.RELATION_INCLUDED,
            DiagnosticLevel.INFO,
            f"{prim.name}({_dot(weight_path)}) -> group(s) {[g.index for g in groups]}",
            primitive=prim,
            weight_path=weight_path,
            hidden_paths=connected,
            eqn_indices=(index, *all_tail),
            hidden_group_indices=tuple(g.index for g in groups),
            path_classification=dict(classes),
            blocking_eqn_indices=tuple(blocking),
        )
        return relation

    def _report_eqn_shape(self, index: int, eqn: Any) -> None:
        if len(eqn.outvars) > 1:
            self.diag.emit(
                DiagnosticKind.MULTI_OUTPUT_PRIMITIVE_DETECTED,
                DiagnosticLevel.INFO,
                f"ETP primitive {eqn.primitive.name} (equation {index}) has {len(eqn.outvars)} "
                "outputs; its registered y_outvar_index selects y.",
                primitive=eqn.primitive,
                eqn_indices=(index,),
                num_outvars=len(eqn.outvars),
            )
        nested = self.minfo.nested_jit_eqns.get(index)
        if nested:
            self.diag.emit(
                DiagnosticKind.PRIMITIVE_INSIDE_NESTED_JIT,
                DiagnosticLevel.INFO,
                f"ETP primitive {eqn.primitive.name} (equation {index}) was inside "
                f"{' > '.join(nested)}, spliced into the step: analysed as an op of the step "
                "(its weight's claim says whether the gradient is exact).",
                primitive=eqn.primitive,
                eqn_indices=(index,),
                nested_in=nested,
            )

    def _resolve_trainables(self, index: int, eqn: Any, keys: dict) -> dict | None:
        out: dict[str, dict] = {
            k: {}
            for k in (
                "vars paths leaf_indices states chains is_leaf jaxprs fns chain_eqns constvars "
                "all_leaves"
            ).split()
        }
        for key, invar_index in keys.items():
            var = eqn.invars[invar_index]
            found = (
                trace_to_param(self.minfo, var, self.trace_cache) if _compat.is_var(var) else None
            )
            if found is None:
                self.diag.emit(
                    DiagnosticKind.TRAINABLE_INVAR_NOT_PARAMSTATE,
                    DiagnosticLevel.INFO,
                    f"{eqn.primitive.name} (equation {index}): trainable input '{key}' (invar "
                    f"{invar_index}) does not come from a ParamState; it gets no gradient.",
                    primitive=eqn.primitive,
                    eqn_indices=(index,),
                    key=key,
                    invar_index=invar_index,
                )
                continue
            if len(found.paths) > 1 or len(found.leaf_indices) > 1:
                self.diag.emit(
                    DiagnosticKind.PYTREE_WEIGHT_LEAF_AMBIGUOUS,
                    DiagnosticLevel.INFO,
                    f"{eqn.primitive.name} (equation {index}): trainable input '{key}' is "
                    f"computed from several parameter leaves {found.describe()} (e.g. weight "
                    "normalisation); the relation's gradient is pulled back through that "
                    f"computation to each of them (the relation is named after "
                    f"{_dot(found.path)}).",
                    primitive=eqn.primitive,
                    weight_path=found.path,
                    eqn_indices=(index, *found.chain_eqn_indices),
                    key=key,
                    candidate_paths=tuple(found.paths),
                )
            out["vars"][key] = var
            out["paths"][key] = found.path
            out["leaf_indices"][key] = found.leaf_index
            out["states"][key] = self.minfo.retrieved_model_states.get(found.path)
            out["chains"][key] = found.chain
            out["is_leaf"][key] = found.is_leaf
            out["jaxprs"][key] = found.jaxpr
            out["fns"][key] = found.fn
            out["chain_eqns"][key] = found.chain_eqn_indices
            out["constvars"][key] = found.constvars
            out["all_leaves"][key] = tuple(found.leaf_indices)
        if not out["paths"]:
            self.diag.emit(
                DiagnosticKind.RELATION_EXCLUDED_NO_PARAMSTATE,
                DiagnosticLevel.WARNING,
                f"ETP primitive {eqn.primitive.name} (equation {index}) has no trainable input "
                "that comes from a ParamState, so nothing can be learned through it. Store the "
                "weight in a brainstate.ParamState (e.g. `self.W = brainstate.ParamState(w)`).",
                primitive=eqn.primitive,
                eqn_indices=(index,),
            )
            return None
        return out

    def _forward(self, index: int, y_var: Any):
        """Forward walk from ``y`` stopping at other blocking ETP equations, and at the new
        value of a hidden state for every group but that state's own.

        A path through the new value of a state of group ``g`` reaches only states of ``g``
        (an LSTM's ``h`` reading its new ``c``): where it goes on into another group (a
        stacked layer reading the new ``h1`` element-wise), that in-step path belongs to the
        learning signal, which is the total same-step ``dL/dh1`` (``graph.hidden_feeds_hidden``);
        a trace carrying it too would count it twice. ``allowed[var]`` is the bit set of groups
        ``var`` may still reach (all bits: not through any new hidden value yet); sets only
        grow, so an equation is revisited at most once per group.
        """
        path_eqns: dict[int, None] = {}
        blocking: dict[int, int] = {}  # blocking equation -> groups its input may reach
        allowed: dict[Any, int] = {y_var: self.outvar_group_bit.get(y_var, -1)}
        queue = deque([y_var])
        while queue:
            var = queue.popleft()
            for consumer in self.du.consumers.get(var, ()):
                if consumer == index:
                    continue
                VISITS.count += 1
                eqn = self.eqns[consumer]
                if _is_blocking(eqn.primitive):
                    blocking[consumer] = blocking.get(consumer, 0) | allowed.get(var, 0)
                    continue
                path_eqns[consumer] = None
                mask = 0
                for atom in eqn.invars:
                    mask |= allowed.get(atom, 0) if _compat.is_var(atom) else 0
                for out in eqn.outvars:
                    if not _compat.is_var(out):
                        continue
                    group_bit = self.outvar_group_bit.get(out)
                    grown = mask if group_bit is None else mask & group_bit
                    old = allowed.get(out, 0)
                    if grown & ~old:
                        allowed[out] = old | grown
                        queue.append(out)
        found = or_all(self.outvar_paths.get(v, 0) for v, groups in allowed.items() if groups)
        reached = [self.paths[i] for i in bits_of(found)]
        return reached, path_eqns, blocking

    def _connect(self, index, prim, weight_path, y_var, reached, blocking: dict):
        """Keep the reached states whose shape broadcasts with ``y``; MIXED where a blocking
        equation leads to them too (only for the groups its input may reach: a path through
        another group's new value belongs to the learning signal, see :meth:`_forward`)."""
        through = 0
        for b, groups in blocking.items():
            mine = groups & self.every_group  # -1: not through any new hidden value yet
            paths = (
                self.every_group_path
                if mine == self.every_group
                else or_all(self.group_paths.get(g, 0) for g in bits_of(mine))
            )
            for out in self.eqns[b].outvars:
                through |= self.reach.get(out, 0) & paths if _compat.is_var(out) else 0
        connected, classes = [], {}
        for path in reached:
            varshape = self.groups[path].varshape
            try:
                np.broadcast_shapes(tuple(y_var.aval.shape), tuple(varshape))
            except ValueError:
                self.diag.emit(
                    DiagnosticKind.RELATION_EXCLUDED_SHAPE_MISMATCH,
                    DiagnosticLevel.WARNING,
                    f"{prim.name}({_dot(weight_path)}) (equation {index}): y shape "
                    f"{tuple(y_var.aval.shape)} does not broadcast with hidden state "
                    f"{_dot(path)} of shape {tuple(varshape)}; this connection is dropped. Make "
                    "the layer output match the hidden state (one output unit per neuron).",
                    primitive=prim,
                    weight_path=weight_path,
                    hidden_paths=(path,),
                    eqn_indices=(index,),
                    y_shape=tuple(y_var.aval.shape),
                    hidden_shape=tuple(varshape),
                )
                continue
            connected.append(path)
            bit = 1 << self.path_index[path]
            classes[path] = (
                PathClassification.MIXED if through & bit else PathClassification.ALL_DIRECT
            )
        return connected, classes

    def _tail(self, y_var: Any, group: Any, path_eqns: dict):
        """The y -> h jaxpr of one group: forward slice from y within the group's backward
        slice. Another group's new hidden value is a constant there (see :meth:`_forward`)."""
        selected: dict[int, None] = {}
        stack = [v for v in group.hidden_outvars if _compat.is_var(v)]
        seen: dict[Any, None] = dict.fromkeys(stack)
        own = 1 << group.index
        while stack:
            var = stack.pop()
            producer = self.du.producer.get(var)
            if producer is None or producer not in path_eqns or producer in selected:
                continue
            if self.outvar_group_bit.get(var, own) != own:
                continue
            VISITS.count += 1
            selected[producer] = None
            for inp in self.eqns[producer].invars:
                if _compat.is_var(inp) and inp not in seen and inp is not y_var:
                    seen[inp] = None
                    stack.append(inp)
        indices = sorted(selected)
        jaxpr, constvars = slice_jaxpr(self.minfo.jaxpr, indices, [y_var], group.hidden_outvars)
        return jaxpr, constvars, indices

    def _coupling(self, y_var, tail) -> list:
        dependent: dict[Any, None] = {y_var: None}
        coupling = []
        for i in tail:
            eqn = self.eqns[i]
            flags = [_compat.is_var(v) and v in dependent for v in eqn.invars]
            if not any(flags):
                continue
            if not is_tail_position_preserving(eqn, flags):
                coupling.append(i)
            dependent.update(dict.fromkeys(v for v in eqn.outvars if _compat.is_var(v)))
        return coupling

    def _zero_tails(self, y_var, groups, tails, consts, all_tail) -> tuple:
        """Groups whose ``y -> h`` tail's all-ones JVP vanishes by structure (only a tail
        that mixes positions can: see :func:`._positions.ones_tangent_vanishes`)."""
        if not self._coupling(y_var, all_tail):
            return ()
        return tuple(
            g.index
            for g, jaxpr, cvars in zip(groups, tails, consts)
            if ones_tangent_vanishes(jaxpr, [v.aval for v in cvars], y_var.aval)
        )

    def _check_tail(self, index, prim, weight_path, y_var, tail, connected, zero=()) -> bool:
        coupling = self._coupling(y_var, tail)
        if coupling:
            vanish = (
                f" Its all-ones JVP (D_f) is zero by structure for group(s) {list(zero)} (the "
                "tail is invariant to shifting y along the mixed positions, e.g. a layer "
                "normalisation), so the traces there stay 0: no online gradient."
                if zero
                else ""
            )
            self.diag.emit(
                DiagnosticKind.RELATION_TAIL_COUPLES_POSITIONS,
                DiagnosticLevel.WARNING,
                f"{prim.name}({_dot(weight_path)}) (equation {index}): the y -> h tail moves or "
                f"mixes positions at equation(s) {coupling}, so dh/dy is not one number per "
                "position; the relation is kept but marked (tail_position_preserving=False) "
                "and its traces are approximate. Keep element-wise ops between the ETP op and "
                "the hidden state." + vanish,
                primitive=prim,
                weight_path=weight_path,
                hidden_paths=connected,
                eqn_indices=(index, *coupling),
                coupling_eqn_indices=tuple(coupling),
                zero_tail_groups=tuple(zero),
            )
        return not coupling

    def _report_mixed(self, index, prim, weight_path, path, blocking) -> None:
        self.diag.emit(
            DiagnosticKind.RELATION_PARTIAL_PATH,
            DiagnosticLevel.WARNING,
            f"{prim.name}({_dot(weight_path)}) (equation {index}) reaches {_dot(path)} both "
            f"directly and through other ETP equation(s) {blocking}; the relation is kept but "
            "the indirect contribution is not traced (its gradient part is missing).",
            primitive=prim,
            weight_path=weight_path,
            hidden_paths=(path,),
            eqn_indices=(index, *blocking),
            classification=PathClassification.MIXED,
            blocking_eqn_indices=tuple(blocking),
        )

    def _report_excluded(self, index, prim, weight_path, path_eqns, blocking) -> None:
        through = [
            b
            for b in blocking
            if any(self.reach.get(o, 0) for o in self.eqns[b].outvars if _compat.is_var(o))
        ]
        if through:
            route = self._route_to(path_eqns, through)
            names = ", ".join(f"{self.eqns[b].primitive.name}@{b}" for b in through)
            fix, line = weight_op_fix(self.eqns, index)
            self.diag.emit(
                DiagnosticKind.RELATION_EXCLUDED_WEIGHT_TO_WEIGHT,
                DiagnosticLevel.WARNING,
                f"{prim.name}({_dot(weight_path)}) (equation {index}) reaches hidden state only "
                f"through other trainable ETP equation(s) ({names}). By the non-parametric-tail "
                "rule it is not learned online" + fix,
                primitive=prim,
                weight_path=weight_path,
                eqn_indices=(index, *route, *through),
                path_eqn_indices=(index, *route),
                blocking_eqn_indices=tuple(through),
                source_line=line,
            )
            return
        self.diag.emit(
            DiagnosticKind.RELATION_EXCLUDED_NON_TEMPORAL,
            DiagnosticLevel.WARNING,
            f"{prim.name}({_dot(weight_path)}) (equation {index}) has no connected hidden state; "
            "it is a non-temporal parameter (a readout gets its exact same-step gradient).",
            primitive=prim,
            weight_path=weight_path,
            eqn_indices=(index, *path_eqns),
            path_eqn_indices=(index, *path_eqns),
            blocking_eqn_indices=tuple(blocking),
        )

    def _route_to(self, path_eqns: dict, targets: list) -> list:
        """Equations of ``path_eqns`` on a path into any of ``targets``."""
        selected: dict[int, None] = {}
        stack = [v for t in targets for v in self.eqns[t].invars if _compat.is_var(v)]
        while stack:
            producer = self.du.producer.get(stack.pop())
            if producer is None or producer not in path_eqns or producer in selected:
                continue
            selected[producer] = None
            stack.extend(v for v in self.eqns[producer].invars if _compat.is_var(v))
        return sorted(selected)


def _dot(path: Any) -> str:
    return ".".join(map(str, path)) if isinstance(path, tuple) else str(path)
