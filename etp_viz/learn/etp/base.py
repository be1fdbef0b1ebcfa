r"""Online-learning algorithms as brainstate Modules: the base classes.

``ETraceAlgorithm`` owns a model and a graph executor; ``ETraceVjpAlgorithm`` turns one call
``y = alg(x)`` into a ``jax.custom_vjp`` function whose forward runs the step and updates the
eligibility traces, and whose backward returns *online* gradients:

.. math::

    \nabla_\theta \mathcal{L}^t = \underbrace{\partial \mathcal{L}^t/\partial \theta
    \big|_{h^t\ \mathrm{fixed}}}_{\text{readouts, exact}} +
    \underbrace{(\partial \mathcal{L}^t/\partial h^t)\cdot \epsilon^t}_{\text{ETP relations}}
    + \underbrace{(\partial \mathcal{L}^t/\partial h^{t-1})\big|_{\mathrm{bypass}}\cdot
    \epsilon^{t-1}}_{\text{hidden output bypass}},

where the last term exists only for groups whose previous value :math:`h^{t-1}` reaches an
output without crossing a new hidden value (``graph.bypass_hidden``; e.g. a spike read from the
membrane potential before the update): :math:`\epsilon^{t-1}\approx\partial h^{t-1}/\partial
\theta` is the trace before this step's update. So
``brainstate.transform.grad(lambda x: loss(alg(x)), alg.param_states)(x)`` is the gradient
of one step. Subclasses supply the trace layout, its update and its contraction
(:mod:`.d_rtrl`, :mod:`.pp_prop`). With ``vjp_method='multi-step'`` a call on
``MultiStepData(xs)`` is differentiated exactly inside the window and the past enters through
the window-entry hidden state: :math:`(\partial\mathcal{L}/\partial h^{t_0})\cdot
\epsilon^{t_0}`.
"""

from __future__ import annotations

from typing import Any

import brainstate
import jax
import jax.numpy as jnp
import numpy as np

from ..contract import LearnerState, state_ids
from .executor import ETraceVjpGraphExecutor, MultiStepData
from .status import learning_status
from .vjp_step import make_multi_step, make_single_step

__all__ = [
    "BATCH_AXIS",
    "ETraceAlgorithm",
    "ETraceVjpAlgorithm",
    "check_mesh",
    "describe_mesh",
    "place_states",
]


class ETraceAlgorithm(brainstate.nn.Module):
    """Base of the online learners: a model, a graph executor, and trace states.

    Parameters
    ----------
    model : brainstate.nn.Module
        The model (states initialised).
    graph_executor : ETraceGraphExecutor
    """

    #: whose gradient claims it makes (the registry's family; each learner class names its own)
    claim_family: str

    def __init__(self, model: Any, graph_executor: Any, name: str | None = None, mesh: Any = None):
        # brainstate declares Module.__init__ only outside TYPE_CHECKING
        super().__init__(name=name)  # type: ignore[call-arg]
        self.model = model
        self.graph_executor = graph_executor
        self.is_compiled = False
        #: the model's State objects the step was compiled on (:meth:`states_replaced`)
        self._compiled_states: tuple[int, ...] = ()
        #: a ``jax.sharding.Mesh`` the batch is split over (``"batch"`` axis), or None
        self.mesh = check_mesh(mesh)

    @property
    def graph(self) -> Any:
        """The compiled ``ETraceGraph`` (``None`` before :meth:`compile_graph`)."""
        return self.graph_executor.graph

    @property
    def param_states(self) -> Any:
        """``{path: ParamState}`` of the model (the ``grad_states`` to differentiate)."""
        return self.model.states(brainstate.ParamState)

    def compile_graph(self, *args: Any) -> None:
        """Compile the model on example inputs of one step and allocate zero traces."""
        self.graph_executor.compile_graph(*args)
        self.learning_status = learning_status(self.graph_executor.plan, self.graph)
        self.init_etrace_state()
        self.is_compiled = True
        self._compiled_states = state_ids(self.model)
        self.place_on_mesh()

    def gradient_claims(self) -> Any:
        """Per weight leaf, this learner's claim (``exact`` / ``approximate`` / ``none`` and
        why): the graph's derivation for :attr:`claim_family`, refined by the learner's own
        ``adjust_claims`` where it has one. Needs :meth:`compile_graph`.

        >>> alg.gradient_claims()["rnn.W.weight"].kind  # doctest: +SKIP
        'approximate'
        """
        self._require_compiled()
        return self.graph.gradient_claims(self)

    def states_replaced(self) -> bool:
        """True when the model no longer holds the State objects the step was compiled on (a
        ``reset_state`` that builds new states): the compiled step would read stale ones."""
        return self.is_compiled and self._compiled_states != state_ids(self.model)

    def place_on_mesh(self) -> None:
        """With ``mesh``: the model's and the learner's states split over the ``"batch"``
        axis (batch-leading leaves) or replicated (see :mod:`etp_viz.learn.etp.base`)."""
        if self.mesh is not None and self.is_compiled:
            place_states(self, self.mesh, _batch_of(self.graph_executor.example_args))

    def init_etrace_state(self, *args: Any, **kwargs: Any) -> None:  # pragma: no cover
        raise NotImplementedError

    def _require_compiled(self) -> None:
        if not self.is_compiled:
            raise RuntimeError(
                f"{type(self).__name__} is not compiled: call `alg.compile_graph(x0)` with an "
                "example input of one step before stepping, e.g.\n"
                "    alg = etp_viz.D_RTRL(model); alg.compile_graph(x[0]); y = alg(x[1])"
            )


class ETraceVjpAlgorithm(ETraceAlgorithm):
    """Base of the VJP-based learners (``jax.custom_vjp`` update).

    Subclasses implement ``init_traces(plan) -> pytree``,
    ``update_traces(traces, data, count) -> pytree`` and
    ``trace_gradients(traces, dl_dh, weights, count) -> {relation: {key: grad}}``, and may
    override ``gradient_residuals`` / ``residual_gradients`` (what a step's backward keeps) and
    ``bypass_residuals`` / ``bypass_gradients`` (the hidden output bypass term).
    ``trace_gradients`` must skip the groups absent from ``dl_dh``.
    """

    def __init__(
        self,
        model: Any,
        vjp_method: str = "single-step",
        name: str | None = None,
        mesh: Any = None,
        lift: bool = False,
    ):
        executor = ETraceVjpGraphExecutor(model, vjp_method, lift=lift)
        super().__init__(model, executor, name=name, mesh=mesh)
        self.vjp_method = vjp_method
        #: the traces and the bias-correction counter (allocated by compile_graph)
        self.etrace: LearnerState | None = None
        self.count: LearnerState | None = None
        self.step_data_record: brainstate.ShortTermState | None = None
        #: the summary :meth:`record_step_data` keeps each step (None: nothing recorded)
        self.step_data_summary: Any = None

    # -- states ----------------------------------------------------------------------------

    def init_etrace_state(self, *args: Any, **kwargs: Any) -> None:
        """(Re)allocate zero traces for the compiled graph."""
        plan = self.graph_executor.plan
        self.etrace = LearnerState(self.init_traces(plan))
        dtype = _float_dtype(plan)
        self.count = LearnerState(jnp.zeros((), dtype))
        self._single = make_single_step(self)
        self._multi = make_multi_step(self)

    def record_step_data(self, summarize: Any) -> Any:
        """Keep ``summarize(data)`` of every single step in :attr:`step_data_record`.

        ``data`` is what the traces consume in that step: ``{"x": {relation: x},
        "df": {(relation, group): D_f of shape (*varshape, S)}, "dh_dh": {group: D of shape
        (*varshape, S, S)}, "weights": ..., "y": ...}`` (see
        :meth:`~etp_viz.learn.ETraceGraphExecutor.step_data`). ``summarize`` must be traceable
        and return a pytree of arrays (keep it small: it is stored every step); it is
        evaluated under ``stop_gradient``. Call after :meth:`compile_graph`; ``None`` stops
        recording. Returns the ``brainstate.ShortTermState`` holding the latest summary.

        Examples
        --------
        >>> alg.record_step_data(lambda d: {g: D[..., 0, 0] for g, D in d["dh_dh"].items()})
        ... # doctest: +SKIP
        >>> alg(x); alg.step_data_record.value        # doctest: +SKIP
        """
        self._require_compiled()
        self.step_data_summary = summarize
        if summarize is None:
            self.step_data_record = None
        else:
            from .vjp_step import StateLayout

            ex, layout = self.graph_executor, StateLayout(self.graph_executor.plan)

            def one_step() -> Any:
                params, others = layout.read()
                args = [jnp.zeros(s.shape, s.dtype) for s in jax.tree.leaves(ex.example_args)]
                return summarize(ex.step_data(layout.assemble(args, params, others))[2])

            shapes = jax.eval_shape(one_step)
            zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
            self.step_data_record = brainstate.ShortTermState(zeros)
        self._single = make_single_step(self)
        return self.step_data_record

    def reset_state(self, batch_size: int | None = None, **kwargs: Any) -> None:
        """Reset the model's states and zero the traces.

        ``batch_size=None`` keeps the compiled batch size. A different ``batch_size`` recompiles
        on zero inputs with that batch size (the traces' shapes depend on it).
        """
        compiled_batch = _batch_of(self.graph_executor.example_args) if self.is_compiled else None
        if batch_size is None:
            batch_size = compiled_batch
        brainstate.nn.reset_all_states(self.model, batch_size, **kwargs)
        if not self.is_compiled:
            return
        if batch_size != compiled_batch or self.states_replaced():
            # new trace shapes, or a reset that built new State objects: compile again
            example = self.graph_executor.example_args
            if batch_size != compiled_batch:
                example = jax.tree.map(
                    lambda s: jnp.zeros((batch_size, *s.shape[1:]), s.dtype), example
                )
            self.compile_graph(*example)
            return
        self.reset_traces()
        self.place_on_mesh()

    def _trace_states(self) -> tuple[LearnerState, LearnerState]:
        """The trace and counter states (allocated by :meth:`compile_graph`)."""
        self._require_compiled()
        if self.etrace is None or self.count is None:
            raise RuntimeError(f"{type(self).__name__} has no traces: call compile_graph(x0).")
        return self.etrace, self.count

    def reset_traces(self) -> None:
        """Zero the traces and the bias-correction counter; the model's states are left as
        they are (a replay from the current hidden states)."""
        etrace, count = self._trace_states()
        plan = self.graph_executor.plan
        etrace.value = self.init_traces(plan)
        count.value = jnp.zeros((), _float_dtype(plan))
        self.place_on_mesh()

    def get_etrace_of(self, weight: Any) -> dict:
        """The traces of one weight: ``{(relation, group): trace}`` (keys as in
        ``learning_status``). ``weight`` is a ``ParamState`` or its path (tuple or dotted)."""
        etrace, _ = self._trace_states()
        path = _resolve_path(self.param_states, weight)
        return self.traces_of_path(etrace.value, path)

    # -- stepping --------------------------------------------------------------------------

    def update(self, *args: Any) -> Any:
        self._require_compiled()
        if len(args) == 1 and isinstance(args[0], MultiStepData):
            if self.vjp_method != "multi-step":
                raise ValueError(
                    f"{type(self).__name__} was built with vjp_method='single-step', so it "
                    "cannot take a MultiStepData window. Build it with "
                    "vjp_method='multi-step', e.g. `etp_viz.D_RTRL(model, "
                    "vjp_method='multi-step')`, or call it once per time step."
                )
            return self._multi(args[0].xs)
        for arg in args:
            if isinstance(arg, MultiStepData):
                raise TypeError("MultiStepData must be the only argument of a multi-step call")
        _check_like(self.graph_executor.example_args, args, self)
        return self._single(args)

    # -- hooks for subclasses --------------------------------------------------------------

    def init_traces(self, plan: Any) -> Any:  # pragma: no cover
        raise NotImplementedError

    def update_traces(self, traces: Any, data: dict, count: Any) -> Any:  # pragma: no cover
        raise NotImplementedError

    def trace_gradients(
        self, traces: Any, dl_dh: dict, weights: dict, count: Any
    ) -> dict:  # pragma: no cover
        raise NotImplementedError

    def traces_of_path(self, traces: Any, path: tuple) -> dict:  # pragma: no cover
        raise NotImplementedError

    def gradient_residuals(self, new_traces: Any, data: dict) -> Any:
        """What a single step's backward keeps to contract with :math:`\\partial L/\\partial
        h^t` (default: the new traces). Override to keep less than the traces."""
        return new_traces

    def residual_gradients(self, residuals: Any, dl_dh: dict, weights: dict, count: Any) -> dict:
        """Gradients from :meth:`gradient_residuals` (default: :meth:`trace_gradients`)."""
        return self.trace_gradients(residuals, dl_dh, weights, count)

    def learning_signal(self, dl_dh: dict, out_cotangents: list, previous: bool = False) -> dict:
        r"""The learning signal each group's traces are contracted with: ``dl_dh`` (the exact
        same-step :math:`\partial L^t/\partial h^t`, or with ``previous`` the bypass signal
        :math:`\partial L^t/\partial h^{t-1}`) unless a learner replaces it (e-prop's random
        feedback); ``out_cotangents`` are :math:`\partial L^t/\partial y^t` per output leaf."""
        return dl_dh

    def bypass_residuals(self, traces: Any, groups: tuple) -> Any:
        r"""What a single step's backward keeps of the *previous* traces
        :math:`\epsilon^{t-1}` for the hidden output bypass of ``groups`` (default: all of
        them). Called only when the graph has bypassing states."""
        return traces

    def bypass_gradients(self, kept: Any, dl_dh_prev: dict, weights: dict, count: Any) -> dict:
        r"""The hidden output bypass term :math:`\sum_g (\partial L^t/\partial
        h_g^{t-1})\cdot\epsilon_g^{t-1}` per relation, from :meth:`bypass_residuals`;
        ``dl_dh_prev`` has the bypassing groups only and ``count`` is the number of trace
        updates that made :math:`\epsilon^{t-1}` (default: :meth:`trace_gradients`)."""
        return self.trace_gradients(kept, dl_dh_prev, weights, count)


def _float_dtype(plan: Any) -> Any:
    for var in plan.module_info.weight_invars:
        if jnp.issubdtype(var.aval.dtype, jnp.floating):
            return var.aval.dtype
    return jnp.result_type(float)


def _batch_of(example: Any) -> int | None:
    leaves = jax.tree.leaves(example)
    return leaves[0].shape[0] if leaves and len(leaves[0].shape) >= 2 else None


def _check_like(example: Any, args: Any, alg: Any) -> None:
    expected = jax.tree.leaves(example)
    got = jax.tree.leaves(args)
    same = len(expected) == len(got) and all(
        tuple(np.shape(g)) == tuple(e.shape) for g, e in zip(got, expected)
    )
    if same:
        return
    shapes = [tuple(np.shape(g)) for g in got]
    compiled = [tuple(e.shape) for e in expected]
    hint = ""
    pairs = list(zip(shapes, compiled)) if len(shapes) == len(compiled) else []
    differ = [(s, c) for s, c in pairs if s != c]
    if differ and all(
        len(s) == len(c) and s[:-1] == c[:-1] and s[-1:] != c[-1:] for s, c in differ
    ):
        given, want = differ[0]
        hint = (
            f" The feature size differs: {given[-1]} given, the model was compiled for {want[-1]}. "
            "Pass inputs of the compiled size (a model's layers fix their input size)."
        )
    elif pairs and all(
        len(c) >= 2 and len(s) == len(c) and s[1:] == c[1:] and s[:1] != c[:1] for s, c in pairs
    ):
        hint = (
            f" The batch size differs from the compiled one ({compiled[0][0]}): call "
            f"`alg.reset_state(batch_size={shapes[0][0]})` (recompiles) or compile on an "
            "input with this batch size."
        )
    elif pairs and all(len(c) >= 2 and s == c[1:] for s, c in pairs):
        hint = (
            f" The batch axis is missing: the model was compiled for a batch of "
            f"{compiled[0][0]}; pass x of shape {compiled[0]} (one step of the batch)."
        )
    elif len(shapes) == len(compiled) and all(
        len(s) == len(c) + 1 for s, c in zip(shapes, compiled)
    ):
        hint = (
            " It looks like a whole sequence: pass `etp_viz.MultiStepData(xs)` to a learner "
            "built with vjp_method='multi-step', or call the learner once per time step."
        )
    raise ValueError(
        f"{type(alg).__name__}: input shapes {shapes} do not match the shapes the graph was "
        f"compiled for {compiled}.{hint}"
    )


def _resolve_path(param_states: Any, weight: Any) -> tuple:
    if isinstance(weight, brainstate.State):
        for path, state in param_states.items():
            if state is weight:
                return tuple(path)
        raise KeyError("this ParamState does not belong to the learner's model")
    if isinstance(weight, str):
        weight = tuple(int(p) if p.isdigit() else p for p in weight.split("."))
    path = tuple(weight)
    if path not in param_states:
        raise KeyError(f"no parameter at path {path}; known: {list(param_states.keys())}")
    return path


# --- Online learning over several devices: the batch split with ``jax.sharding`` ---
#
# "Online learning over several devices: the batch split with ``jax.sharding``.
#
# An algorithm built with ``mesh=`` (a :class:`jax.sharding.Mesh` with an axis named
# ``"batch"``) places every state whose leading axis is the batch -- hidden states, eligibility
# traces, ES-D-RTRL's input and output traces -- as ``NamedSharding(mesh, P("batch"))``: each
# device holds ``1/D`` of every such leaf. Weights and everything else are replicated. JAX's
# SPMD partitioner does the rest inside each jitted step: the per-sample trace updates run where
# their shard lives, and the weight gradient's contraction over the batch becomes a local sum
# plus one all-reduce. No home-made collective, and no host transfer per step.
#

#: the mesh axis the batch is split over
BATCH_AXIS = "batch"


def check_mesh(mesh: Any) -> Any:
    """``mesh`` itself when it is a ``jax.sharding.Mesh`` with a ``"batch"`` axis (or None)."""
    if mesh is None:
        return None
    if not isinstance(mesh, jax.sharding.Mesh):
        raise TypeError(
            f"mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}; e.g. "
            "jax.sharding.Mesh(np.array(jax.devices()), ('batch',))"
        )
    if BATCH_AXIS not in mesh.axis_names:
        raise ValueError(
            f"the mesh needs an axis named {BATCH_AXIS!r} (the batch is split over it); it has "
            f"{tuple(mesh.axis_names)}"
        )
    return mesh


def place_states(owner: Any, mesh: Any, batch: int | None) -> None:
    """Put every state of ``owner`` (a model or an algorithm and its model) on ``mesh``:
    batch-leading leaves split over ``"batch"``, the rest replicated."""
    devices = mesh.shape[BATCH_AXIS]
    if batch is None:
        raise ValueError(
            "mesh= splits the batch over devices, but the model was compiled unbatched: "
            "initialise it with a batch (brainstate.nn.init_all_states(model, batch_size=B)) "
            "and compile on a batched input"
        )
    if batch % devices:
        raise ValueError(
            f"the batch ({batch}) does not split over the mesh's {devices} '{BATCH_AXIS}' "
            f"devices: use a batch that is a multiple of {devices}"
        )
    P = jax.sharding.PartitionSpec
    split = jax.sharding.NamedSharding(mesh, P(BATCH_AXIS))
    replicated = jax.sharding.NamedSharding(mesh, P())

    def put(leaf: Any, is_param: bool) -> Any:
        if not isinstance(leaf, jax.Array | np.ndarray):
            return leaf
        shape = leaf.shape
        sharded = not is_param and len(shape) >= 1 and shape[0] == batch
        return jax.device_put(leaf, split if sharded else replicated)

    for state in brainstate.graph.states(owner).values():
        is_param = isinstance(state, brainstate.ParamState)
        state.value = jax.tree.map(lambda leaf, p=is_param: put(leaf, p), state.value)


def describe_mesh(mesh: Any) -> str:
    """``"8 x cpu (mesh batch=8)"``-style text for the explorer's status line."""
    if mesh is None:
        return str(jax.devices()[0])
    devices = mesh.devices.reshape(-1)
    kinds = sorted({d.platform for d in devices})
    axes = ", ".join(f"{name}={size}" for name, size in mesh.shape.items())
    return f"{len(devices)} x {'/'.join(kinds)} (mesh {axes})"
