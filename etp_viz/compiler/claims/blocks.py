"""Claims per block of a fused weight op (``graph.module_info.blocks``).

A fused gate weight (brainstate's ``GRUCell.Wrz``: reset and update gates in one matrix) is
cut by the compiler into one ETP equation per block (:mod:`..lift.blocks`); each block is a
relation of its own or, when it reaches the hidden state only through another weight (the
GRU's reset gate, read by ``Wh``), no relation at all. The leaf's gradient is assembled from
its blocks, so its claim is the worst of its blocks' under the one rule of
:func:`.records.combine_leaf_claims`, except that a block with no online gradient beside
learned blocks makes the leaf *approximate* (its online gradient is not zero; those columns
are) and names the block in the reason. Each block's own claim is kept on the leaf's claim
(``GradientClaim.blocks``) for the inspector: "columns 0-7 (r): none -- reaches cell.h only
through cell.Wh.weight".
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["BlockClaim", "leaf_block_claims"]


class BlockClaim(NamedTuple):
    """One block's claim: which columns of the leaf, what the learner's gradient on them is.

    Examples
    --------
    >>> BlockClaim(3, 0, 8, "r", "none", "reaches cell.h only through cell.Wh.weight").text()
    'columns 0-7 (r): none, reaches cell.h only through cell.Wh.weight'
    """

    eqn_index: int
    start: int
    stop: int
    label: str
    kind: str
    reason: str = ""

    def where(self) -> str:
        named = "" if self.label.startswith("block ") else f" ({self.label})"
        return f"columns {self.start}-{self.stop - 1}{named}"

    def text(self) -> str:
        return f"{self.where()}: {self.kind}" + (f", {self.reason}" if self.reason else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "eqn_index": int(self.eqn_index),
            "start": int(self.start),
            "stop": int(self.stop),
            "label": self.label,
            "kind": self.kind,
            "reason": self.reason,
        }


def leaf_block_claims(
    graph: Any, flow: Any, path: tuple, uses: list, rel_drops: list, extra: list, drops: list
) -> tuple[tuple, list]:
    """``(block claims, the leaf's drops)`` for weight ``path``'s blocks.

    ``uses``: the relations the leaf's gradient is pulled back from; ``rel_drops[r]``: relation
    ``r``'s dropped terms ``[(text, equation indices)]``; ``extra``: drops every learned block
    carries too (ES-D-RTRL's factorisation); ``drops``: the leaf's plain-op drops. A block that
    no relation traces while another block is learned becomes one drop naming its columns,
    in place of the plain-op paths through its ETP equation (the same term).
    """
    blocks = [b for b in graph.module_info.blocks if tuple(b.weight_path) == tuple(path)]
    if not blocks:
        return (), drops
    claims, unlearned = [], []
    for block in blocks:
        rels = [r for r in uses if flow.rel_eqn[r] == block.eqn_index]
        if rels:
            drops = [*extra, *(d for r in rels for d in rel_drops[r])]
            texts = list(dict.fromkeys(text for text, _ in drops))
            kind = "approximate" if texts else "exact"
            claims.append(_claim(block, kind, "; ".join(texts)))
        else:
            reason = _block_reason(graph, block)
            claims.append(_claim(block, "none", reason))
            unlearned.append(claims[-1])
    if not unlearned or len(unlearned) == len(claims):
        return tuple(claims), drops
    covered = {c.eqn_index for c in unlearned}
    kept = [d for d in drops if not covered & set(d[1])]
    named = [
        (f"{c.where()} of the weight are not learned online: {c.reason}", (c.eqn_index,))
        for c in unlearned
    ]
    return tuple(claims), [*kept, *named]


def _claim(block: Any, kind: str, reason: str) -> BlockClaim:
    return BlockClaim(block.eqn_index, block.start, block.stop, block.label, kind, reason)


def _block_reason(graph: Any, block: Any) -> str:
    """Why a block's ETP equation has no relation, from the first record about it."""
    eqns = graph.module_info.jaxpr.eqns
    for record in graph.diagnostics:
        indices = record.context.get("eqn_indices", ())
        if block.eqn_index not in indices or record.weight_path is None:
            continue
        if tuple(record.weight_path) != tuple(block.weight_path):
            continue
        kind = record.kind.value
        if kind == "relation_excluded_weight_to_weight":
            through = record.context.get("blocking_eqn_indices", ())
            names = ", ".join(_op_name(graph, eqns, i) for i in through) or "another weight op"
            return (
                f"they reach the hidden state only through {names}, and a trace keeps no "
                "path through a second weight op"
            )
        if kind == "relation_excluded_non_temporal":
            return "they reach no hidden state"
        if kind == "relation_excluded_shape_mismatch":
            return "they do not meet the hidden state position by position"
    return "they reach no hidden state and no model output"


def _op_name(graph: Any, eqns: list, index: int) -> str:
    """``cell.Wh.weight (etp_mv, equation 11)``: the weight an ETP equation applies."""
    for rel in graph.hidden_param_op_relations:
        if rel.eqn_index == index and rel.trainable_paths:
            path = next(iter(rel.trainable_paths.values()))
            return f"{'.'.join(map(str, path))} ({eqns[index].primitive.name}, equation {index})"
    return f"{eqns[index].primitive.name} (equation {index})"
