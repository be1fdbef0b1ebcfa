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
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "DEFAULT_LEARNER",
    "LEARNERS",
    "LearnerSpec",
    "OnlineLearner",
    "build_learner",
    "canonical_name",
    "learner_names",
    "spec_of",
]


@runtime_checkable
class OnlineLearner(Protocol):
    """An online learner of ``model``.

    Members
    -------
    model
        The ``brainstate`` module it learns.
    compile_graph(*example_args)
        Prepare for inputs shaped like ``example_args`` (one step).
    param_states
        The model's weights it produces gradients for (``{path: ParamState}``).
    __call__(*args)
        One forward step: the model's output, with the learner's state (traces, influence,
        window) advanced so that a gradient of a loss of this output is the online gradient.
    reset_state(batch_size=None)
        The model's hidden states and the learner's own state back to their start.
    reset_traces()
        Only the learner's own state back to zero (a fidelity window's start).
    """

    model: Any

    def compile_graph(self, *args: Any) -> None: ...

    @property
    def param_states(self) -> Any: ...

    def __call__(self, *args: Any) -> Any: ...

    def reset_state(self, batch_size: int | None = None, **kwargs: Any) -> None: ...

    def reset_traces(self) -> None: ...


#: The learner used when none is named.
DEFAULT_LEARNER = "d_rtrl"


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
    """

    name: str
    factory: Callable[..., Any]
    family: str
    options: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    kind: str = "etp"
    summary: str = ""


def _learn() -> Any:
    """The learner classes, imported when a learner is built (they import this module's
    package; the registry itself stays import-free)."""
    import types

    from .d_rtrl import D_RTRL
    from .eprop import EProp
    from .es_d_rtrl import ES_D_RTRL
    from .influence.algorithms import RTRL, UORO, SnAp
    from .influence.ostl import OSTLFeedforward, OSTLRecurrent
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


def _ostl_feedforward(model: Any, decay: Any = 0.9, mesh: Any = None) -> Any:
    return _learn().OSTLFeedforward(model, decay, mesh=mesh)


LEARNERS: dict[str, LearnerSpec] = {
    spec.name: spec
    for spec in (
        LearnerSpec(
            "d_rtrl",
            lambda model, **kw: _learn().D_RTRL(model, **kw),
            "d_rtrl",
            ("mesh", "vjp_method", "trace_dtype"),
            ("drtrl", "param_dim"),
            summary="diagonal RTRL: one eligibility trace per weight entry",
        ),
        LearnerSpec(
            "es_d_rtrl",
            _es_d_rtrl,
            "es_d_rtrl",
            ("decay", "mesh", "vjp_method", "trace_dtype"),
            ("pp_prop", "esdrtrl", "io_dim"),
            summary="D-RTRL with each trace factorised into input x output decaying averages",
        ),
        LearnerSpec(
            "eprop",
            lambda model, **kw: _learn().EProp(model, **kw),
            "eprop",
            ("mesh", "feedback", "kappa_filter_decay"),
            ("e_prop",),
            summary="e-prop (Bellec et al. 2020): D-RTRL traces, learning signal by feedback",
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
            ("decay", "mesh"),
            summary="OSTL for feed-forward layers: the factorised pre x post trace",
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
