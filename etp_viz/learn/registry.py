"""The learner contract and the one registry of online learners (name → factory, aliases,
claim family, options).

:class:`OnlineLearner` is the one small interface every learner satisfies (the optax way);
the live session, compare mode, ``verify`` and the explorer drive a learner only through it.

Every entry point that takes a learner by name (``Session``, ``show``, compare mode,
``verify``, the CLI) resolves it here, so a name that works in one works in all of them.

>>> from etp_viz.learn.registry import canonical_name, learner_names
>>> canonical_name("SnAp-3"), canonical_name("TBPTT"), canonical_name("pp_prop")
('snap3', 'tbptt', 'es_d_rtrl')
>>> canonical_name("BPTT"), spec_of("bptt").family
('bptt', 'bptt')
>>> "eprop" in learner_names()
True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import brainstate

from etp_viz.compiler.claims import DEFAULT_LEARNER, install_learner_directory

from .contract import (
    ClaimFamilyMember,
    ClaimRefiner,
    DecayingTraces,
    LearnerState,
    OnlineLearner,
    StepRecorder,
    TraceLearner,
    learner_bytes,
    learner_states,
)

__all__ = [
    "DEFAULT_LEARNER",
    "EXACT_LEARNER",
    "LEARNERS",
    "ClaimRefiner",
    "DecayingTraces",
    "LearnerSpec",
    "LearnerState",
    "OnlineLearner",
    "REFERENCE_LEARNER",
    "StepRecorder",
    "TraceLearner",
    "build_learner",
    "canonical_name",
    "graph_claim_names",
    "learner_bytes",
    "learner_names",
    "learner_states",
    "name_of",
    "resolve",
    "spec_of",
    "unbuilt_learner",
]


#: The exact reference a lesson measures every learner against: BPTT over each episode.
REFERENCE_LEARNER = "bptt"
#: the learner whose every online gradient is exact (its influence matrix is hidden x params)
EXACT_LEARNER = "rtrl"

#: The learner used when none is named: :data:`DEFAULT_LEARNER` (``"d_rtrl"``, defined beside
#: the claims so that the compiler's defaults name the same learner).


@dataclasses.dataclass(frozen=True)
class LearnerSpec:
    """What the registry knows about one learner.

    Attributes
    ----------
    name : str
        The canonical name (``"snap"`` stands for every ``"snap<n>"``).
    factory : callable
        ``factory(model, **options) -> learner``.
    family : str
        Whose gradient claims it makes (``"d_rtrl"``, ``"es_d_rtrl"``, ``"eprop"``, ``"rtrl"``,
        ``"snap"``, ``"uoro"``, ``"ostl_recurrent"``, ``"ostl_feedforward"``, ``"tbptt"``,
        ``"bptt"``).
    options : tuple of str
        The keyword options the factory takes (``decay``, ``n``, ``window``, ``mesh``, ...).
    aliases : tuple of str
        Other names that resolve to it.
    kind : str
        ``"etp"`` (eligibility traces on the compiled ETP graph), ``"influence"`` (the step's
        whole influence matrix, or a sparse / rank-1 part of it) or ``"window"`` (a buffer of
        past steps).
    summary : str
        One plain sentence for menus and errors.
    graph_claims : bool
        Whether the compiled graph alone derives its claims (the ETP learners: a static
        ``show(model, x, algorithm=name)`` states them without building the learner); the
        others' claims come from the learner built on the model.
    """

    name: str
    factory: Callable[..., Any]
    family: str
    options: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    kind: str = "etp"
    summary: str = ""
    graph_claims: bool = False


def _learn() -> Any:
    """The learner classes, imported when a learner is built (they import this module's
    package; the registry itself stays import-free)."""
    import types

    from .etp.d_rtrl import D_RTRL
    from .etp.eprop import EProp
    from .etp.es_d_rtrl import ES_D_RTRL, OSTLFeedforward
    from .influence.algorithms import RTRL, UORO, SnAp
    from .influence.ostl import OSTLRecurrent
    from .influence.tbptt import BPTT, TruncatedBPTT

    return types.SimpleNamespace(
        D_RTRL=D_RTRL,
        EProp=EProp,
        ES_D_RTRL=ES_D_RTRL,
        RTRL=RTRL,
        SnAp=SnAp,
        UORO=UORO,
        OSTLRecurrent=OSTLRecurrent,
        OSTLFeedforward=OSTLFeedforward,
        TruncatedBPTT=TruncatedBPTT,
        BPTT=BPTT,
    )


def _es_d_rtrl(model: Any, decay: Any = 0.9, mesh: Any = None, **kw: Any) -> Any:
    return _learn().ES_D_RTRL(model, decay, mesh=mesh, **kw)


def _bptt(model: Any, episode: int | None = None) -> Any:
    if episode is None:
        raise ValueError(
            "'bptt' is full BPTT over each episode, the exact reference: it needs the episode "
            "length. A session or show(..., task=task) takes it from the task (task.n_steps), "
            "verify() from len(xs); elsewhere pass episode=T. On a stream without episodes "
            "use truncated BPTT, 'tbptt' (window=W)."
        )
    return _learn().BPTT(model, episode=episode)


def _ostl_feedforward(model: Any, decay: Any = 0.9, mesh: Any = None, lift: bool = False) -> Any:
    return _learn().OSTLFeedforward(model, decay, mesh=mesh, lift=lift)


LEARNERS: dict[str, LearnerSpec] = {
    spec.name: spec
    for spec in (
        LearnerSpec(
            "d_rtrl",
            lambda model, **kw: _learn().D_RTRL(model, **kw),
            "d_rtrl",
            ("mesh", "vjp_method", "trace_dtype", "lift"),
            ("drtrl", "param_dim"),
            summary="diagonal RTRL: one eligibility trace per weight entry",
            graph_claims=True,
        ),
        LearnerSpec(
            "es_d_rtrl",
            _es_d_rtrl,
            "es_d_rtrl",
            ("decay", "mesh", "vjp_method", "trace_dtype", "lift"),
            ("pp_prop", "esdrtrl", "io_dim"),
            summary="D-RTRL with each trace factorised into input x output decaying averages",
            graph_claims=True,
        ),
        LearnerSpec(
            "eprop",
            lambda model, **kw: _learn().EProp(model, **kw),
            "eprop",
            ("mesh", "feedback", "kappa_filter_decay", "lift"),
            ("e_prop",),
            summary="e-prop (Bellec et al. 2020): D-RTRL traces, learning signal by feedback",
            graph_claims=True,
        ),
        LearnerSpec(
            "rtrl",
            lambda model: _learn().RTRL(model),
            "rtrl",
            kind="influence",
            summary="exact real-time recurrent learning (the whole influence matrix)",
        ),
        LearnerSpec(
            "snap",
            lambda model, n=1: _learn().SnAp(model, n=n),
            "snap",
            ("n",),
            kind="influence",
            summary="SnAp-n: the influence entries a weight reaches in n steps",
        ),
        LearnerSpec(
            "uoro",
            lambda model: _learn().UORO(model),
            "uoro",
            kind="influence",
            summary="UORO: an unbiased rank-1 estimate of the influence matrix",
        ),
        LearnerSpec(
            "ostl_recurrent",
            lambda model: _learn().OSTLRecurrent(model),
            "ostl_recurrent",
            aliases=("ostl",),
            kind="influence",
            summary="OSTL: exact RTRL inside each layer, nothing between layers",
        ),
        LearnerSpec(
            "ostl_feedforward",
            _ostl_feedforward,
            "ostl_feedforward",
            ("decay", "mesh", "lift"),
            summary="OSTL for feed-forward layers: the factorised pre x post trace",
            graph_claims=True,
        ),
        LearnerSpec(
            "bptt",
            _bptt,
            "bptt",
            ("episode",),
            ("full_bptt",),
            kind="window",
            summary="BPTT over each whole episode (the state reset at its start): the exact "
            "reference",
        ),
        LearnerSpec(
            "tbptt",
            lambda model, window=20: _learn().TruncatedBPTT(model, window=window),
            "tbptt",
            ("window",),
            ("truncated_bptt",),
            kind="window",
            summary="truncated BPTT over the last `window` steps (drops older dependencies)",
        ),
    )
}

_ALIASES = {alias: spec.name for spec in LEARNERS.values() for alias in spec.aliases}


def _normalise(name: str) -> str:
    return str(name).strip().lower().replace("-", "_").replace(" ", "_")


def _split_snap(name: str) -> int | None:
    """``n`` of ``"snap<n>"`` / ``"snap_<n>"``; None for anything else."""
    if not name.startswith("snap"):
        return None
    order = name[4:].lstrip("_")
    return int(order) if order.isdigit() and int(order) >= 1 else None


def learner_names() -> tuple[str, ...]:
    """Every canonical name a user can pass (``snap1`` and ``snap2`` standing for ``snap<n>``)."""
    names: list[str] = []
    for spec in LEARNERS.values():
        names.extend(("snap1", "snap2") if spec.name == "snap" else (spec.name,))
    return tuple(names)


def canonical_name(name: str) -> str:
    """The canonical name of ``name`` (case, ``-`` and aliases folded; ``'SnAp-2'`` →
    ``'snap2'``); an unknown name is a ValueError listing the valid ones."""
    key = _normalise(name)
    key = _ALIASES.get(key, key)
    order = _split_snap(key)
    if order is not None:
        return f"snap{order}"
    if key in LEARNERS and key != "snap":
        return key
    if key == "snap":  # e.g. a SnAp learner's claim_family: its claims depend on n
        raise ValueError(
            f"{name!r} names SnAp-n without its n: say 'snap1', 'snap2', ... ('snap<n>'), or "
            "pass the learner itself (`graph.gradient_claims(alg)`), whose n it knows."
        )
    raise ValueError(
        f"Unknown algorithm {name!r}. Valid names: {list(learner_names())} (any 'snap<n>', "
        f"n >= 1; aliases {sorted(_ALIASES)}), or pass an algorithm instance or a factory "
        "`model -> learner`."
    )


def spec_of(name: str) -> LearnerSpec:
    """The :class:`LearnerSpec` a name resolves to."""
    key = canonical_name(name)
    return LEARNERS["snap" if _split_snap(key) is not None else key]


def build_learner(
    model: Any, name: str, options: dict[str, Any] | None = None, **defaults: Any
) -> Any:
    """Build the learner called ``name`` for ``model``.

    ``options`` are the user's explicit options: each must be one the learner takes (else a
    TypeError naming the valid ones). ``defaults`` are an entry point's settings (a session's
    ``decay``, ``window``): used where the learner takes them, ignored elsewhere. A ``mesh``
    that is not None is always explicit: a learner without one refuses it.

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp, etp_viz
    >>> net = etp_viz.nn.GRUCell(2, 3)
    >>> _ = brainstate.nn.init_all_states(net)
    >>> type(build_learner(net, "snap2")).__name__, build_learner(net, "snap2").n
    ('SnAp', 2)
    """
    key = canonical_name(name)
    spec = spec_of(key)
    explicit = dict(options or {})
    if defaults.get("mesh") is not None:
        explicit.setdefault("mesh", defaults.pop("mesh"))
    defaults.pop("mesh", None)
    unknown = sorted(set(explicit) - set(spec.options))
    if unknown:
        valid = list(spec.options) or "none"
        hints = {
            "mesh": " mesh= applies to the ETP learners (d_rtrl, es_d_rtrl, eprop, "
            "ostl_feedforward); this one keeps a whole-step state and runs on one device.",
            "decay": " decay is an ES-D-RTRL option (es_d_rtrl, ostl_feedforward).",
            "window": " window is truncated BPTT's option ('tbptt'); 'bptt' is BPTT over "
            "each whole episode (option episode=).",
            "episode": " episode is the option of 'bptt' (BPTT over each whole episode).",
        }
        raise TypeError(
            f"{key!r} got unknown option(s) {unknown}; it takes {valid}."
            + "".join(hints[k] for k in unknown if k in hints)
        )
    kwargs = {k: v for k, v in defaults.items() if k in spec.options and v is not None}
    kwargs.update(explicit)
    order = _split_snap(key)
    if order is not None:
        kwargs["n"] = order
    return spec.factory(model, **kwargs)


def graph_claim_names() -> tuple[str, ...]:
    """The learners whose claims the compiled graph alone derives (``LearnerSpec.graph_claims``).

    >>> graph_claim_names()
    ('d_rtrl', 'es_d_rtrl', 'eprop', 'ostl_feedforward')
    """
    return tuple(spec.name for spec in LEARNERS.values() if spec.graph_claims)


def name_of(algorithm: Any) -> str | None:
    """The registry's canonical name of a learner given in any form: a name, a learner class or
    instance (its ``claim_family``; SnAp's order from ``n``); None for a factory or anything
    the registry does not know (a user's own learner class).

    >>> import etp_viz
    >>> name_of("pp_prop"), name_of(etp_viz.ES_D_RTRL), name_of(lambda m: None)
    ('es_d_rtrl', 'es_d_rtrl', None)
    """
    if isinstance(algorithm, str):
        return canonical_name(algorithm)
    if not isinstance(algorithm, ClaimFamilyMember):
        return None
    family = algorithm.claim_family
    if family == "snap":
        order = algorithm.n if isinstance(algorithm, _learn().SnAp) else None
        return f"snap{order}" if isinstance(order, int) else None  # the class: no order yet
    return family if isinstance(family, str) and family in LEARNERS else None


def unbuilt_learner(entry: Any, where: str, why: str) -> Any:
    """``entry`` where it is a learner not built yet (a name, a class or a factory ``model ->
    learner``): what an entry point that builds its learners itself takes. A built learner is
    a TypeError saying ``why`` the entry point ``where`` cannot use one and what to pass
    instead; anything else a TypeError naming the forms.

    >>> import etp_viz
    >>> unbuilt_learner(etp_viz.SnAp, "plan(algorithm=)", "it builds each learner")
    <class 'etp_viz.learn.influence.algorithms.SnAp'>
    """
    if isinstance(entry, brainstate.nn.Module):
        raise TypeError(
            f"{where} got a built {type(entry).__name__}: {why}; pass its name, its class or a "
            "factory `model -> learner`, e.g. functools.partial(etp_viz.EProp, "
            "kappa_filter_decay=0.9) or lambda m: etp_viz.SnAp(m, n=3)."
        )
    if not (isinstance(entry, str) or callable(entry)):
        raise TypeError(
            f"{where}: {entry!r} is neither an algorithm name nor a learner class or a function "
            "model -> learner."
        )
    return entry


def _missing_members(candidate: Any) -> list[str]:
    """The :class:`OnlineLearner` members ``candidate`` lacks (names listed, nothing called:
    a property such as an influence learner's ``graph`` is not evaluated)."""
    members: tuple[str, ...] = ("model", "claim_family", "mesh", "graph", "param_states")
    members = (*members, "compile_graph", "reset_state", "reset_traces", "gradient_claims")
    present = set(dir(candidate))
    missing = [m for m in members if m not in present]
    return missing if callable(candidate) else [*missing, "__call__"]


def _check_learner(learner: Any, where: str) -> OnlineLearner:
    """``learner`` when it has every :class:`OnlineLearner` member, else a TypeError naming
    the missing ones."""
    missing = _missing_members(learner)
    if missing:
        raise TypeError(
            f"{where}: {type(learner).__name__} is not an online learner (it lacks {missing}; "
            "see etp_viz.learn.registry.OnlineLearner). Pass one of "
            f"{list(learner_names())} or an etp_viz learner (e.g. etp_viz.D_RTRL(model))."
        )
    return learner


def resolve(
    model: Any,
    algorithm: Any = DEFAULT_LEARNER,
    options: dict[str, Any] | None = None,
    *,
    where: str = "algorithm",
    **defaults: Any,
) -> OnlineLearner:
    """The one way an entry point turns a user's ``algorithm`` into a learner of ``model``.

    Parameters
    ----------
    model : brainstate.nn.Module
    algorithm : str, class, callable or learner
        A registered name (any alias, ``'SnAp-2'``), a learner class (``etp_viz.SnAp``: called
        as ``cls(model, **options)``), a factory ``model -> learner`` (e.g.
        ``functools.partial(etp_viz.EProp, kappa_filter_decay=0.9)``), or a built learner
        (used as is: it must have been built for ``model``, and takes no options).
    options : dict, optional
        The user's explicit options (:func:`build_learner`'s).
    where : str
        The entry point's parameter, named in errors.
    **defaults
        The entry point's settings (a session's ``decay``, ``window``, ``episode``, ``mesh``):
        used where the learner takes them.

    Returns
    -------
    OnlineLearner
        Checked against the contract: a candidate missing a member is a TypeError naming it.

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp, etp_viz
    >>> net = etp_viz.nn.GRUCell(2, 3)
    >>> _ = brainstate.nn.init_all_states(net)
    >>> [type(resolve(net, a)).__name__ for a in ("SnAp-2", etp_viz.RTRL, etp_viz.D_RTRL(net))]
    ['SnAp', 'RTRL', 'D_RTRL']
    """
    options = dict(options or {})
    if isinstance(algorithm, str):
        return build_learner(model, algorithm, options, **defaults)
    mesh = defaults.get("mesh")
    if isinstance(algorithm, type):
        learner = algorithm(model, **({"mesh": mesh} if mesh is not None else {}), **options)
    elif isinstance(algorithm, brainstate.nn.Module):  # a built learner
        built = _check_learner(algorithm, where)
        if options:
            raise TypeError(
                f"{where}: option(s) {sorted(options)} for a built {type(algorithm).__name__}; "
                "pass them when building it (or give the learner by name or class)."
            )
        if built.model is not model:
            raise ValueError(
                f"{where}: the {type(algorithm).__name__} instance was built for another model; "
                "build it on this one, or pass its name or class."
            )
        if mesh is not None and built.mesh is not mesh:
            raise ValueError(
                "mesh= applies to a learner given by name or class; build the instance with "
                "it instead, e.g. etp_viz.D_RTRL(model, mesh=mesh)"
            )
        learner = built
    elif callable(algorithm):
        learner = algorithm(model, **options)
    else:
        raise TypeError(
            f"{where} must be a learner name ({list(learner_names())}), a learner class, a "
            f"factory `model -> learner` or a built learner; got {algorithm!r}."
        )
    _check_learner(learner, where)
    return learner


class _Directory:
    """The registry as the compiler sees it (``install_learner_directory``): a name's claim
    family, and a learner built for the claims the graph does not derive."""

    def family_of(self, name: str) -> str:
        return spec_of(name).family

    def learner_for(self, graph: Any, name: str) -> Any:
        if not graph.example_args:
            raise ValueError(
                f"this graph keeps no example inputs, so {name!r} cannot be built for its "
                "claims; build the learner and call learner.gradient_claims()"
            )
        # claims do not depend on the episode's length ('bptt' is exact over any episode)
        learner = build_learner(graph.module_info.model, name, episode=1)
        learner.compile_graph(*graph.example_args)
        return learner


install_learner_directory(_Directory())
