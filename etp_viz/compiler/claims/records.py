"""What a gradient claim is, how several combine, and which algorithm a request names.

The claim words (``exact`` / ``approximate`` / ``none``) are defined once, in
``docs/semantics.md`` ("Verdict"); :data:`CLAIM_KINDS` lists them worst last.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, Protocol, cast

__all__ = [
    "DEFAULT_LEARNER",
    "DERIVATIONS",
    "CLAIM_KINDS",
    "GradientClaim",
    "GradientClaims",
    "claim_algorithm",
    "delegated_claims",
    "install_learner_directory",
    "combine_claims",
    "combine_leaf_claims",
]

#: the learner used when none is named (``etp_viz.learn.registry`` re-exports it)
DEFAULT_LEARNER = "d_rtrl"
#: the claim words, best first
CLAIM_KINDS = ("exact", "approximate", "none")
#: worst first: a ParamState's claim is its leaves' worst
_KIND_ORDER = {"none": 0, "approximate": 1, "exact": 2}

#: the name its claims carry -> the trace the compiler derives them for (e-prop keeps D-RTRL's
#: trace and refines the claims through its instance's ``adjust_claims``; OSTL for
#: feed-forward layers is ES-D-RTRL's factorised trace)
DERIVATIONS = {
    "d_rtrl": "d_rtrl",
    "es_d_rtrl": "es_d_rtrl",
    "eprop": "d_rtrl",
    "ostl_feedforward": "es_d_rtrl",
}


@dataclasses.dataclass(frozen=True)
class GradientClaim:
    """What an online learner's gradient for one weight leaf is.

    Attributes
    ----------
    path : str
        The leaf's dotted path (``"rnn.W.weight"``; a bare-array ``ParamState``: its path).
    kind : str
        ``"exact"`` (equal to the true gradient for every loss and input), ``"approximate"``
        (some Jacobian terms are dropped: ``reason`` names them) or ``"none"`` (no online
        gradient: ``reason`` says why).
    reason : str
        Empty for an exact claim.
    dropped : tuple of int
        Top-level equation indices (``graph.module_info.jaxpr``) of the dropped terms.
    algorithm : str
    online : bool
        Some ETP relation traces it.
    readout : bool
        Some path reaches a model output crossing no new hidden value (exact same-step part).

    Examples
    --------
    >>> claim = GradientClaim("rnn.W.weight", "exact", algorithm="d_rtrl", online=True)
    >>> claim.kind, claim.to_json()["path"]
    ('exact', 'rnn.W.weight')
    """

    path: str
    kind: str
    reason: str = ""
    dropped: tuple = ()
    algorithm: str = DEFAULT_LEARNER
    online: bool = False
    readout: bool = False
    weight_path: tuple = ()
    leaf_index: int = 0
    #: a fused gate weight's claim per block of columns (:class:`.blocks.BlockClaim`)
    blocks: tuple = ()

    def to_json(self) -> dict[str, Any]:
        return {
            **({"blocks": [b.to_json() for b in self.blocks]} if self.blocks else {}),
            "path": self.path,
            "kind": self.kind,
            "reason": self.reason,
            "dropped": [int(i) for i in self.dropped],
            "algorithm": self.algorithm,
            "online": self.online,
            "readout": self.readout,
        }


class GradientClaims(dict):
    """``{leaf path: GradientClaim}``; a ``ParamState`` path answers too (its leaves' worst
    claim), and ``str()`` is one line per leaf."""

    def __getitem__(self, key: Any) -> GradientClaim:
        # a weight leaf is named after its ParamState (``rnn.W.weight``, bias
        # ``rnn.W.weight.bias``): a name with leaves under it is the ParamState's, their worst
        name = key if isinstance(key, str) else ".".join(map(str, key))
        leaves = [c for k, c in self.items() if k.startswith(name + ".")]
        if dict.__contains__(self, name):
            own = dict.__getitem__(self, name)
            return combine_claims(name, [own, *leaves]) if leaves else own
        if not leaves:
            raise KeyError(f"no weight {name!r}; known: {sorted(self)}")
        return combine_claims(name, leaves)

    def leaf(self, name: str) -> GradientClaim | None:
        """The claim of the one leaf called ``name`` (not its ParamState's), or None."""
        return dict.get(self, name)

    def get(self, key: Any, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        # ``key`` is a dotted name or a path of parts (``__contains__`` must accept ``object``).
        name = key if isinstance(key, str) else ".".join(map(str, cast("Iterable[object]", key)))
        return any(k == name or k.startswith(name + ".") for k in self.keys())

    def __str__(self) -> str:
        lines = []
        for path, claim in self.items():
            reason = f" -- {claim.reason}" if claim.reason else ""
            lines.append(f"{path}: {claim.kind}{reason}")
        return "\n".join(lines)


def combine_leaf_claims(leaves: list[tuple[str, Any]]) -> tuple[str, str]:
    """``(kind, reason)`` of a ParamState from its leaves' ``[(leaf path, claim)]``: the worst
    kind (``none`` < ``approximate`` < ``exact``), the reasons of the leaves that have it, and
    each leaf's kind when they differ.

    >>> a = GradientClaim("W.weight", "exact")
    >>> b = GradientClaim("W.bias", "approximate", reason="drops y")
    >>> combine_leaf_claims([("W.weight", a), ("W.bias", b)])
    ('approximate', 'drops y; W.weight: exact, W.bias: approximate')
    """
    kinds = {c.kind for _, c in leaves}
    worst = min(kinds, key=lambda k: _KIND_ORDER.get(k, -1))
    reasons = list(dict.fromkeys(c.reason for _, c in leaves if c.kind == worst and c.reason))
    if len(kinds) > 1:
        reasons.append(", ".join(f"{k}: {c.kind}" for k, c in leaves))
    return worst, "; ".join(reasons)


def combine_claims(name: str, leaves: list) -> GradientClaim:
    """One claim for several leaves (:func:`combine_leaf_claims`), with their dropped
    equations together."""
    kind, reason = combine_leaf_claims([(c.path, c) for c in leaves])
    return GradientClaim(
        path=name,
        kind=kind,
        reason=reason,
        dropped=tuple(sorted({i for c in leaves for i in c.dropped})),
        algorithm=leaves[0].algorithm,
        online=any(c.online for c in leaves),
        readout=any(c.readout for c in leaves),
        weight_path=leaves[0].weight_path,
    )


class LearnerDirectory(Protocol):
    """What the compiler asks the learner registry (``etp_viz.learn.registry`` installs it:
    the compiler never imports the learners)."""

    def family_of(self, name: str) -> str:
        """The claim family of a learner name (aliases and case folded); a ValueError naming
        the valid names for an unknown one."""
        ...

    def learner_for(self, graph: Any, name: str) -> Any:
        """The learner ``name`` built on ``graph``'s model and compiled on its example inputs
        (for a learner whose claims the graph alone does not derive)."""
        ...


_DIRECTORY: list[LearnerDirectory] = []


def install_learner_directory(directory: LearnerDirectory) -> None:
    """Let the compiler resolve learner names through ``directory`` (the registry)."""
    _DIRECTORY[:] = [directory]


def _family_of(name: str) -> str:
    key = name.strip().lower().replace("-", "_")
    return _DIRECTORY[0].family_of(name) if _DIRECTORY else key


def claim_algorithm(algorithm: Any) -> tuple[str, str]:
    """``(name its claims carry, trace derived)`` for a name, a learner class or instance.

    A name resolves through the learner registry (aliases folded); a learner states its family
    in its ``claim_family`` attribute (the registry's ``LearnerSpec.family``); the compiler
    reads that, never the class name. A learner instance whose family the compiler does not
    derive (RTRL, SnAp, UORO, OSTL, BPTT) refines D-RTRL's claims through ``adjust_claims``.

    >>> claim_algorithm("pp_prop")
    ('es_d_rtrl', 'es_d_rtrl')
    """
    if isinstance(algorithm, str):
        family: Any = _family_of(algorithm)
    else:
        family = getattr(algorithm, "claim_family", None)
    if isinstance(family, str) and family in DERIVATIONS:
        return family, DERIVATIONS[family]
    own = not isinstance(algorithm, str | type) and hasattr(algorithm, "adjust_claims")
    if own and isinstance(family, str):
        return family, "d_rtrl"
    hint = "" if isinstance(algorithm, str) else " (a learner names it in `claim_family`)"
    raise ValueError(
        f"the compiled graph derives the claims of {sorted(DERIVATIONS)}{hint}; got "
        f"{algorithm!r}. Other learners state their own: build one and call "
        "learner.gradient_claims()."
    )


def delegated_claims(graph: Any, algorithm: Any) -> Any:
    """The claims of a learner the graph does not derive, from the learner itself (its one
    claim path, ``learner.gradient_claims()``); None where the graph derives them.

    A name (``"rtrl"``, ``"snap2"``, ``"bptt"``) builds that learner on the graph's model and
    compiles it on the graph's example inputs; an instance (RTRL, SnAp, UORO, OSTL, BPTT)
    answers for itself."""
    if isinstance(algorithm, str):
        if _family_of(algorithm) in DERIVATIONS or not _DIRECTORY:
            return None
        return _DIRECTORY[0].learner_for(graph, algorithm).gradient_claims()
    family = getattr(algorithm, "claim_family", None)
    if isinstance(algorithm, type) or family in DERIVATIONS:
        return None
    own = getattr(algorithm, "gradient_claims", None)
    return own() if callable(own) and hasattr(algorithm, "adjust_claims") else None
