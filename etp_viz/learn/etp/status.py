"""Which parameters an online learner learns, and how: ``alg.learning_status``.

Read off the compiler's verdict (``graph.verdicts()``, :mod:`etp_viz.compiler.claims.verdict`;
the words are defined in ``docs/semantics.md``, "Verdict"). Every ``ParamState`` of the model is
in one of three situations (both of the first two may hold for a parameter used twice:
``online+readout``):

``online``
    It feeds an ETP relation: its gradient is ``dL/dh . epsilon`` through the listed groups.
``readout``
    Some path from it to a model output crosses no new hidden value: that part of its gradient
    is exact, from the same step.
``not learned``
    Neither: it gets exactly zero, and ``reason`` is the verdict's (the compiler's diagnostic,
    e.g. a GRU's ``Wr``, which reaches ``h`` only through ``Wh``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from etp_viz.compiler.claims.verdict import STATUS_WORDS


@dataclasses.dataclass(frozen=True)
class ParamLearning:
    """How one ``ParamState`` is learned."""

    path: tuple
    online_groups: tuple  # hidden-group indices its relations feed
    relations: tuple  # relation indices (executor order)
    readout: bool
    reason: str = ""

    @property
    def kind(self) -> str:
        """``'online'``, ``'readout'``, ``'online+readout'`` or ``'not learned'``."""
        kinds = [k for k, on in (("online", bool(self.relations)), ("readout", self.readout)) if on]
        return STATUS_WORDS["+".join(kinds) if kinds else "not_learned"]

    @property
    def learned(self) -> bool:
        return bool(self.relations) or self.readout


class LearningStatus(dict):
    """``{path: ParamLearning}`` with a readable ``str`` (one line per parameter)."""

    def __str__(self) -> str:
        lines = []
        for path, entry in self.items():
            name = ".".join(map(str, path))
            detail = f" groups={list(entry.online_groups)}" if entry.relations else ""
            reason = f" -- {entry.reason}" if entry.reason else ""
            lines.append(f"{name}: {entry.kind}{detail}{reason}")
        return "\n".join(lines)

    def learned_leaf_mask(self, layout: Any, claims: Any = None) -> list:
        """Per parameter leaf (``layout.param_positions`` order): is it learned?

        Without ``claims``: its ``ParamState`` is. With the learner's ``claims``
        (``graph.gradient_claims(alg)``): also not a leaf claimed ``none`` -- a plain bias
        beside an ETP weight in one ``ParamState``, or a traced weight that is zero by
        structure -- so that a multi-step call zeroes exactly the leaves the claims call
        ``none`` (``docs/semantics.md``, "Multi-step zeroes every none leaf").
        """
        minfo = layout.plan.module_info
        state_invars = layout.plan.state_invars
        kinds = {}
        for claim in (claims or {}).values():
            kinds[(tuple(claim.weight_path), claim.leaf_index)] = claim.kind
        mask = []
        for pos in layout.param_positions:
            invar = state_invars[pos]
            path = minfo.invar_to_weight_path[invar]
            index = list(minfo.weight_path_to_invars[path]).index(invar)
            none = kinds.get((tuple(path), index)) == "none"
            mask.append(self[path].learned and not none)
        return mask


def learning_status(plan: Any, graph: Any) -> LearningStatus:
    """Build ``alg.learning_status`` from the compiler's verdicts (``graph.verdicts()``),
    with the relations numbered as the execution plan numbers them."""
    verdicts = graph.verdicts()
    plan_index = {r.graph_index: r.index for r in plan.relations}
    status = LearningStatus()
    for path in plan.module_info.weight_path_to_invars:
        verdict = verdicts[tuple(path)]
        status[tuple(path)] = ParamLearning(
            path=tuple(path),
            online_groups=verdict.groups,
            relations=tuple(plan_index[r] for r in verdict.relations if r in plan_index),
            readout=verdict.readout,
            reason="" if verdict.learned else verdict.reason,
        )
    return status
