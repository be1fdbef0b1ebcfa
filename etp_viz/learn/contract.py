"""The learner contract: what every online learner is (:class:`OnlineLearner`), what some can
do besides (the capability Protocols), and the state a learner owns (:class:`LearnerState`).

One file answers "what is a learner, and what can it do": the live session, compare mode,
``verify``, the planner and the explorer drive learners only through these types (``isinstance``
on a runtime-checkable Protocol, never ``getattr`` probing). Which learners exist, by name, is
:mod:`etp_viz.learn.registry`; the two wings implementing them are :mod:`etp_viz.learn.etp`
(eligibility traces on the compiled ETP graph) and :mod:`etp_viz.learn.influence` (the step's
influence matrix, or a window of past steps). The helpers at the end are shared by both wings.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import brainstate
import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "ClaimRefiner",
    "DecayingTraces",
    "LearnerState",
    "OnlineLearner",
    "StepRecorder",
    "TraceLearner",
    "learner_bytes",
    "learner_states",
    "state_ids",
    "zero_cotangent",
]


class LearnerState(brainstate.ShortTermState):
    """A learner's own state: eligibility traces, an influence matrix, a window of past steps,
    a step counter. Every learner allocates its state as ``LearnerState``, so the layers above
    find it by type (:func:`learner_states`), never by subtracting the model's states."""


@runtime_checkable
class OnlineLearner(Protocol):
    """An online learner of ``model``: what every learner has (the optax way: one small
    interface; the live session, compare mode, ``verify``, the planner and the explorer drive a
    learner only through it and the capabilities below).

    Members
    -------
    model
        The ``brainstate`` module it learns.
    claim_family : str
        Whose gradient claims it makes (the registry's ``LearnerSpec.family``).
    mesh
        The ``jax.sharding.Mesh`` it shards the batch over, or None (one device).
    graph
        The model's ``ETraceGraph`` (compiled by :meth:`compile_graph`; influence learners
        compile it on first use, or give a ``StepGraph`` where the ETP compiler refuses).
    param_states
        The model's weights it produces gradients for (``{path: ParamState}``).
    compile_graph(*example_args)
        Prepare for inputs shaped like ``example_args`` (one step).
    __call__(*args)
        One forward step: the model's output, with the learner's state (traces, influence,
        window) advanced so that a gradient of a loss of this output is the online gradient.
    reset_state(batch_size=None)
        The model's hidden states and the learner's own state back to their start.
    reset_traces()
        Only the learner's own state back to zero (a fidelity window's start).
    gradient_claims()
        Per weight leaf, ``exact`` / ``approximate`` / ``none`` and why, decided before any run
        (the one claim path of this learner; ``graph.gradient_claims(learner)`` gives the same).
    """

    model: Any
    claim_family: str
    mesh: Any

    @property
    def graph(self) -> Any: ...

    @property
    def param_states(self) -> Any: ...

    def compile_graph(self, *args: Any) -> None: ...

    def __call__(self, *args: Any) -> Any: ...

    def reset_state(self, batch_size: int | None = None, **kwargs: Any) -> None: ...

    def reset_traces(self) -> None: ...

    def gradient_claims(self) -> Any: ...


# -- capabilities: what some learners can do beyond the contract ----------------------------


@runtime_checkable
class ClaimFamilyMember(Protocol):
    """Names whose gradient claims it makes: every learner, and every learner class (a class
    attribute), so that a class is known by name before it is built."""

    claim_family: str


@runtime_checkable
class TraceLearner(Protocol):
    """Eligibility traces over the compiled ETP graph (D-RTRL, ES-D-RTRL, e-prop, OSTL for
    feed-forward layers): the trace state, its executor and plan, per-weight trace views."""

    graph_executor: Any
    etrace: Any

    def init_traces(self, plan: Any) -> Any: ...

    def traces_of_path(self, traces: Any, path: tuple) -> dict: ...


@runtime_checkable
class StepRecorder(Protocol):
    """Keeps a summary of each step's Jacobians (dh/dy, dh/dh) for the explorer's heatmaps."""

    step_data_record: Any

    def record_step_data(self, summarize: Any) -> Any: ...


@runtime_checkable
class DecayingTraces(Protocol):
    """Traces that decay: ES-D-RTRL's input and output averages (``alpha_x``, ``alpha_f``)."""

    alpha_x: Any
    alpha_f: Any


@runtime_checkable
class ClaimRefiner(Protocol):
    """Refines the claims its graph derives for its trace (e-prop's feedback, the influence
    learners' kept entries, zeros by structure)."""

    def adjust_claims(self, claims: Any) -> Any: ...


def learner_states(learner: Any) -> dict[str, LearnerState]:
    """``{dotted path: LearnerState}``: the learner's own state, found by type.

    >>> import brainstate, jax.numpy as jnp, etp_viz
    >>> net = etp_viz.nn.GRUCell(2, 3)
    >>> _ = brainstate.nn.init_all_states(net)
    >>> alg = etp_viz.D_RTRL(net)
    >>> alg.compile_graph(jnp.zeros(2))
    >>> sorted(learner_states(alg))
    ['count', 'etrace']
    """
    return {
        ".".join(map(str, path)): state
        for path, state in brainstate.graph.states(learner).items()
        if isinstance(state, LearnerState)
    }


def learner_bytes(learner: Any) -> dict[str, int]:
    """``{dotted path: bytes}`` of the learner's own state (:func:`learner_states`): what grows
    with the learner, not the model. The one count compare mode and ``etp_viz.plan`` use.

    >>> import brainstate, jax.numpy as jnp, etp_viz
    >>> net = etp_viz.nn.GRUCell(2, 3)
    >>> _ = brainstate.nn.init_all_states(net)
    >>> alg = etp_viz.RTRL(net)
    >>> alg.compile_graph(jnp.zeros(2))
    >>> size = learner_bytes(alg)["influence"]  # 3 hidden values x 54 parameters
    >>> size == 3 * 54 * alg.influence.value.dtype.itemsize
    True
    """
    return {
        name: sum(int(leaf.size) * leaf.dtype.itemsize for leaf in _leaves(state.value))
        for name, state in learner_states(learner).items()
    }


def _leaves(tree: Any) -> list:
    return [leaf for leaf in jax.tree.leaves(tree) if isinstance(leaf, jax.Array | np.ndarray)]


# -- shared by both wings ------------------------------------------------------------------


def state_ids(model: Any) -> tuple[int, ...]:
    """Identities of a model's State objects, in order (what a compiled step reads)."""
    return tuple(id(state) for state in model.states().values())


def zero_cotangent(x: Any) -> Any:
    """A zero cotangent for ``x`` (``float0`` for integer and boolean values)."""
    dtype = jnp.result_type(x)
    if jnp.issubdtype(dtype, jnp.inexact):
        return jnp.zeros(jnp.shape(x), dtype)
    return np.zeros(jnp.shape(x), dtype=jax.dtypes.float0)
