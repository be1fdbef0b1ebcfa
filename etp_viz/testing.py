"""Claims a user's CI can hold: fail, naming the weight, when a weight's gradient claim changes.

A refactor that silently cuts a relation (a weight no longer fed through an ETP primitive, a
new plain op on the state path) turns an ``exact`` weight into ``approximate`` or ``none``
without any error. Pin the claims once, in a test or a JSON snapshot, and the change fails CI.

Examples
--------
.. code-block:: python

    import etp_viz.testing

    def test_gru_claims():
        model, x = make_model()
        etp_viz.testing.assert_claims(
            model, x, {"rnn.Wz": "exact", "rnn.Wh": "approximate", "out.weight": "exact"}
        )

    # or a snapshot: written once with graph.claims_json(path="claims.json"), then
    etp_viz.testing.assert_claims(model, x, "tests/claims.json")
"""

from __future__ import annotations

import json
import os
from typing import Any

from etp_viz.compiler.claims import DEFAULT_LEARNER, gradient_claims
from etp_viz.compiler.graph import SNAPSHOT_FORMAT

__all__ = ["assert_claims", "claim_changes", "load_claims"]

KINDS = ("exact", "approximate", "none")


def load_claims(expected: Any, algorithm: str | None = None) -> dict[str, dict[str, str]]:
    """``{algorithm: {weight path: kind}}`` from a mapping, a snapshot dict, a JSON text or
    the path of a JSON file (``graph.claims_json()``'s format, or a plain ``{path: kind}``)."""
    expected = _read(expected)
    if not isinstance(expected, dict):
        raise TypeError(
            "expected: a {weight path: kind} mapping, a claims snapshot (graph.claims_json()) "
            f"or the path of its JSON file; got {type(expected).__name__}"
        )
    if "claims" in expected:  # a snapshot
        if expected.get("format", SNAPSHOT_FORMAT) != SNAPSHOT_FORMAT:
            raise ValueError(
                f"expected: snapshot format {expected.get('format')!r}, this etp_viz reads "
                f"{SNAPSHOT_FORMAT!r}; re-write it with graph.claims_json()"
            )
        table = dict(expected["claims"])
        if algorithm is not None:
            if algorithm not in table:
                raise KeyError(
                    f"the snapshot has no claims for {algorithm!r}; it has {sorted(table)}"
                )
            table = {algorithm: table[algorithm]}
        return table
    return {algorithm or DEFAULT_LEARNER: dict(expected)}


def claim_changes(
    graph: Any, expected: Any, algorithm: str | None = None, *, strict: bool | None = None
) -> list[str]:
    """One line per weight whose claim differs from ``expected`` (empty: all hold).

    Parameters
    ----------
    graph : ETraceGraph
    expected : mapping, snapshot or path
        See :func:`load_claims`. A path may name a ``ParamState`` (``"rnn.W"``: its leaves'
        worst claim) or a leaf (``"rnn.W.weight"``).
    algorithm : str or learner, optional
        Which algorithm's claims (default ``"d_rtrl"``; a snapshot: all it holds): a name the
        compiler derives (``"d_rtrl"``, ``"es_d_rtrl"``, ``"eprop"``, ``"ostl_feedforward"``)
        or a compiled learner instance, whose own claims are read (RTRL, SnAp-n, OSTL, UORO,
        truncated BPTT, e-prop with random feedback).
    strict : bool, optional
        Also fail on weights ``expected`` does not name (a new weight). Default: on for a
        snapshot, off for a hand-written mapping.
    """
    expected = _read(expected)
    strict = isinstance(expected, dict) and "claims" in expected if strict is None else strict
    changes = []
    own = None
    if algorithm is not None and not isinstance(algorithm, str):
        own = _learner_claims(graph, algorithm)  # an instance: its own claims
        algorithm = next((c.algorithm for c in own.values()), algorithm.claim_family)
    for name, table in load_claims(expected, algorithm).items():
        claims = own if own is not None else gradient_claims(graph, name)
        for path, kind in table.items():
            if kind not in KINDS:
                changes.append(f"{path} [{name}]: expected kind {kind!r} is not one of {KINDS}")
            elif path not in claims:
                changes.append(
                    f"{path} [{name}]: expected {kind}, but the model has no such weight "
                    f"(weights: {', '.join(claims)})"
                )
            elif claims[path].kind != kind:
                got = claims[path]
                why = f" -- {got.reason}" if got.reason else ""
                changes.append(f"{path} [{name}]: expected {kind}, got {got.kind}{why}")
        if strict:
            for path, claim in claims.items():
                if not any(path == p or path.startswith(p + ".") for p in table):
                    changes.append(
                        f"{path} [{name}]: not in the expected claims (it is {claim.kind}); "
                        "add it, or re-write the snapshot with graph.claims_json()"
                    )
    return changes


def assert_claims(
    model: Any,
    x: Any,
    expected: Any,
    algorithm: str | None = None,
    *,
    strict: bool | None = None,
) -> Any:
    """Compile ``model`` on the example input ``x`` and fail if a weight's claim changed.

    Parameters
    ----------
    model : brainstate.nn.Module
        Its states initialised (``brainstate.nn.init_all_states``).
    x : array or tuple of arrays
        One step's example input(s).
    expected : mapping, snapshot, JSON text or path
        ``{"rnn.W": "exact", ...}`` or ``graph.claims_json()``'s output (see
        :func:`claim_changes`).
    algorithm : str or learner, optional
        ``"d_rtrl"`` (default), ``"es_d_rtrl"`` or ``"eprop"``; a snapshot checks every
        algorithm it holds unless one is named. A learner instance
        (``etp_viz.SnAp(model, n=1)``, ``etp_viz.EProp(model, feedback="random")``) is
        compiled on ``x`` (unless it is) and its own claims are checked (snapshot key: the
        name its claims carry, ``"snap1"``).

    Returns
    -------
    ETraceGraph
        The compiled graph (for further checks); with a learner, its ``alg.graph``.

    Raises
    ------
    AssertionError
        Naming each weight whose claim changed, with the new claim's reason.

    Examples
    --------
    >>> etp_viz.testing.assert_claims(model, x, {"rnn.W": "exact"})  # doctest: +SKIP
    """
    import warnings

    from etp_viz.compiler import compile_etrace_graph

    inputs = x if isinstance(x, tuple) else (x,)
    learner = _learner(model, algorithm)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the claims carry every decision the warnings state
        if learner is None:
            graph = compile_etrace_graph(model, *inputs)
        else:
            if not getattr(learner, "is_compiled", False):
                learner.compile_graph(*inputs)
            graph = learner.graph
        target = learner if learner is not None else algorithm
        changes = claim_changes(graph, expected, target, strict=strict)
    if changes:
        raise AssertionError(
            f"{len(changes)} gradient claim(s) of {type(model).__name__} changed:\n  "
            + "\n  ".join(changes)
        )
    return graph


def _learner(model: Any, algorithm: Any) -> Any:
    """A learner instance for ``algorithm`` (None for a name: the graph answers for every
    registered learner, building the ones whose claims it does not derive)."""
    return None if algorithm is None or isinstance(algorithm, str) else algorithm


def _learner_claims(graph: Any, learner: Any) -> Any:
    """A compiled learner's own claims: an influence learner states them from its step
    (``alg.gradient_claims()``), an ETP learner refines the graph's (``adjust_claims``)."""
    if not getattr(learner, "is_compiled", True):
        raise ValueError(
            f"{type(learner).__name__} is not compiled: call `alg.compile_graph(x)` first, or "
            "pass it to assert_claims(model, x, expected, algorithm=alg), which compiles it"
        )
    own = getattr(learner, "gradient_claims", None)
    if callable(own):
        return own()
    return gradient_claims(graph, learner)


def _read(expected: Any) -> Any:
    if isinstance(expected, str | os.PathLike) and not str(expected).lstrip().startswith("{"):
        with open(expected, encoding="utf-8") as file:
            return json.load(file)
    if isinstance(expected, str):
        return json.loads(expected)
    return expected
