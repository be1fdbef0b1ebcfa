r"""Will it fit? The memory each learning algorithm needs for a model, before running it.

:func:`plan` builds each requested learner on the model (the ETP learners allocate nothing
large: their traces' shapes come from ``jax.eval_shape`` of the learner's own
``init_traces``; the others are built, up to :data:`BUILD_AT_MOST` of state, and their step
compiled, not run), and adds up, per algorithm,

* **weights** -- the ``ParamState``\ s one step reads, and as many bytes of **gradients**;
* **hidden** -- the model's other states (hidden values, counters);
* **learner state** -- what the algorithm carries between steps: D-RTRL's weight-shaped trace
  per (relation, hidden group), ES-D-RTRL's input and output (df) traces, e-prop's (filtered)
  traces, RTRL's influence matrix (hidden values x parameters), SnAp's and OSTL's kept
  entries (only the pattern's, as tiles, where that saves memory: SnAp-1 on a GRU of 128 units
  at batch 8 keeps 77 MB of RTRL's 222 MB), UORO's / a window's buffers;
* **activations** -- full BPTT only: what the backward pass keeps of every step, stacked over
  the ``T`` steps (the residuals of the sequence loss's VJP, read from ``jax.vjp`` under
  ``jax.eval_shape``);
* **workspace** -- the ETP learners: the per-step Jacobians a trace update consumes,
  :math:`D_f` per (relation, hidden group) and :math:`D` per hidden group with a transition;
  the other online learners (RTRL, SnAp, UORO, OSTL, a window): XLA's temporary bytes of their
  compiled gradient step (``memory_analysis()``; for RTRL on a GRU of 128 units at batch 8,
  443 MB beside a 222 MB influence). Where the learner is too large to build here
  (:data:`BUILD_AT_MOST`), the workspace is unknown and ``fits`` is None, never a guess;
* **inputs** -- one step (online learners) or the ``T`` steps (BPTT);

and says which fit in a device's memory (``device.memory_stats()["bytes_limit"]`` on GPU /
TPU; on CPU the host's available memory from ``psutil``). ``tests/test_memory.py`` checks the
totals against XLA's compiled memory analysis of the jitted steps.

Examples
--------
>>> import brainstate, jax.numpy as jnp, etp_viz
>>> net = etp_viz.nn.GRUCell(3, 8)
>>> _ = brainstate.nn.init_all_states(net, batch_size=4)
>>> report = etp_viz.plan(net, jnp.zeros((4, 3)), algorithm=("d_rtrl", "bptt"), T=50)
>>> report.row("d_rtrl").learner_state  # Wz, Wh: 4 x (3 inputs + 8 units + bias) x 8 floats
3072
>>> report.row("d_rtrl").total < report.row("bptt").total
True
>>> print(report)                       # doctest: +SKIP
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import brainstate
import jax
import jax.numpy as jnp
import numpy as np

from . import _compat
from .learn.registry import (
    DEFAULT_LEARNER,
    REFERENCE_LEARNER,
    canonical_name,
    learner_bytes,
    learner_names,
    unbuilt_learner,
)

__all__ = ["AlgorithmMemory", "MemoryPlan", "plan"]

#: the name :func:`plan` gives full backpropagation through time over the ``T`` steps
FULL_BPTT = REFERENCE_LEARNER
#: RTRL's influence matrix is sized by formula above this many bytes, and the learner is not
#: built to compile its step: its workspace (XLA's temporaries) is then unknown
BUILD_AT_MOST = 1 << 30


@dataclasses.dataclass(frozen=True)
class AlgorithmMemory:
    """The bytes one algorithm needs (see :mod:`etp_viz.memory`).

    Attributes
    ----------
    algorithm : str
    weights, gradients, hidden, learner_state, activations, workspace, inputs : int
        Bytes of each part.
    detail : dict
        ``{what: bytes}`` of the learner state (per trace, per relation and hidden group).
    fits : bool or None
        ``total <= device memory``; ``None`` where the device's memory is unknown.
    """

    algorithm: str
    weights: int
    gradients: int
    hidden: int
    learner_state: int
    activations: int
    workspace: int
    inputs: int
    detail: dict[str, int]
    fits: bool | None = None
    #: why a part is not known ("" when every part is): ``fits`` is then None
    unknown: str = ""

    @property
    def total(self) -> int:
        """Every part added up: what must be resident while the algorithm trains."""
        return (
            self.weights
            + self.gradients
            + self.hidden
            + self.learner_state
            + self.activations
            + self.workspace
            + self.inputs
        )

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "total": self.total}


@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    """The answer of :func:`plan`: one :class:`AlgorithmMemory` per algorithm, the device and
    its memory."""

    rows: tuple[AlgorithmMemory, ...]
    T: int
    batch: int | None
    device: str
    device_bytes: int | None
    memory_source: str

    def row(self, algorithm: str) -> AlgorithmMemory:
        """The row of ``algorithm`` (its name as given to :func:`plan`)."""
        for row in self.rows:
            if row.algorithm == algorithm:
                return row
        raise KeyError(f"no row {algorithm!r}; rows: {[r.algorithm for r in self.rows]}")

    def fitting(self) -> tuple[str, ...]:
        """The algorithms that fit (empty where the device memory is unknown)."""
        return tuple(row.algorithm for row in self.rows if row.fits)

    def to_json(self) -> dict[str, Any]:
        return {
            "T": self.T,
            "batch": self.batch,
            "device": self.device,
            "device_bytes": self.device_bytes,
            "memory_source": self.memory_source,
            "rows": [row.to_json() for row in self.rows],
        }

    def __str__(self) -> str:
        columns = (
            "weights",
            "gradients",
            "hidden",
            "learner_state",
            "activations",
            "workspace",
            "inputs",
        )
        header = ["algorithm", *columns, "total", "fits"]
        lines = [header]
        for row in self.rows:
            fits = "?" if row.fits is None else ("yes" if row.fits else "NO")
            sizes = [format_bytes(getattr(row, c)) for c in columns]
            lines.append([row.algorithm, *sizes, format_bytes(row.total), fits])
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        text = [
            "  ".join(
                cell.rjust(w) if i else cell.ljust(w)
                for i, (cell, w) in enumerate(zip(line, widths))
            )
            for line in lines
        ]
        memory = "unknown" if self.device_bytes is None else format_bytes(self.device_bytes)
        text.insert(
            0, f"T={self.T}, batch={self.batch}, {self.device}: {memory} ({self.memory_source})"
        )
        return "\n".join(text)


def plan(
    model: Any,
    x: Any,
    algorithm: Any = DEFAULT_LEARNER,
    T: int = 100,
    batch: int | None = None,
    device: Any = None,
    **options: Any,
) -> MemoryPlan:
    """The memory each algorithm needs to train ``model`` on inputs like ``x``.

    Parameters
    ----------
    model : brainstate.nn.Module
        The model, states initialised (left untouched: a different ``batch`` plans on a copy).
    x : array
        One step's input (batched as the model's states are).
    algorithm : str, class, callable, or a sequence of them
        Learners in the forms every entry point takes (:func:`etp_viz.learn.registry.resolve`):
        a name (``"d_rtrl"``, ``"es_d_rtrl"``, ``"rtrl"``, ...; ``"bptt"`` here is full BPTT
        over ``T`` steps), a learner class or a factory ``model -> learner``; or ``"all"``.
        A built learner is refused (planning builds and compiles the learner: pass its name,
        class or a factory). A row is named by the learner's registered name, else its class.
    T : int
        The sequence length (BPTT keeps every step's activations; the online learners do not
        depend on it).
    batch : int, optional
        Plan for this batch size instead of ``x``'s.
    device : jax.Device, optional
        The device whose memory decides ``fits`` (default: ``jax.devices()[0]``).
    **options
        Learner options where a learner given by name takes them, e.g.
        ``trace_dtype=jnp.bfloat16`` (a class or a factory is called as given).

    Returns
    -------
    MemoryPlan
        ``print(report)`` shows a table; ``report.to_json()`` is JSON-able.

    Examples
    --------
    >>> report = etp_viz.plan(model, x0, algorithm="all", T=1000)   # doctest: +SKIP
    >>> report.fitting()                                            # doctest: +SKIP
    ('d_rtrl', 'es_d_rtrl', 'eprop', 'snap1', 'uoro')
    """
    entries = _algorithm_entries(algorithm)
    if int(T) < 1:
        raise ValueError(f"T must be a positive number of steps, got {T!r}")
    model, x = _with_batch(model, x, batch)
    device = jax.devices()[0] if device is None else device
    device_bytes, source = device_memory(device)
    rows = []
    for entry in entries:
        row = _plan_one(model, x, entry, int(T), options)
        fits = None if device_bytes is None or row.unknown else row.total <= device_bytes
        rows.append(dataclasses.replace(row, fits=fits))
    return MemoryPlan(tuple(rows), int(T), _batch_of(x), str(device), device_bytes, source)


def device_memory(device: Any) -> tuple[int | None, str]:
    """``(bytes, where they come from)``: the device's ``bytes_limit`` where its runtime
    reports one, else for a CPU the host's available memory (``psutil``), else unknown."""
    stats = _compat.device_memory_stats(device)
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"]), "device bytes_limit"
    if getattr(device, "platform", "") == "cpu":
        try:
            import psutil
        except ImportError:  # pragma: no cover - psutil is a dependency
            return None, "unknown (no psutil)"
        return int(psutil.virtual_memory().available), "host memory available (psutil)"
    return None, "unknown (the device reports no bytes_limit)"


def format_bytes(n: int) -> str:
    """``1536`` -> ``'1.5 KiB'``.

    >>> format_bytes(512), format_bytes(3 * 2**20)
    ('512 B', '3.0 MiB')
    """
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover


# -- the parts -----------------------------------------------------------------------------


def _algorithm_entries(algorithm: Any) -> tuple[Any, ...]:
    """The learners to plan: canonical names, classes and factories, in the order given."""
    if isinstance(algorithm, str):
        # "all": every registered learner (etp_viz.learn.registry), BPTT over T included
        return learner_names() if algorithm == "all" else (canonical_name(algorithm),)
    entries = tuple(algorithm) if isinstance(algorithm, (list, tuple)) else (algorithm,)
    if not entries:
        raise TypeError("plan(algorithm=) got an empty sequence: name at least one learner")
    why = "planning builds and compiles each learner, which would reset this one's traces"
    for entry in entries:
        unbuilt_learner(entry, "plan(algorithm=)", why)
    return tuple(canonical_name(e) if isinstance(e, str) else e for e in entries)


def _with_batch(model: Any, x: Any, batch: int | None) -> tuple[Any, Any]:
    if batch is None or batch == _batch_of(x):
        return model, x
    model = copy.deepcopy(model)
    brainstate.nn.init_all_states(model, batch_size=batch)
    x = jax.tree.map(lambda a: jnp.zeros((batch, *jnp.shape(a)[1:]), jnp.result_type(a)), x)
    return model, x


def _batch_of(x: Any) -> int | None:
    leaves = jax.tree.leaves(x)
    return int(jnp.shape(leaves[0])[0]) if leaves and jnp.ndim(leaves[0]) >= 2 else None


def _nbytes(tree: Any) -> int:
    return sum(
        int(np.prod(jnp.shape(v))) * jnp.dtype(v.dtype).itemsize for v in jax.tree.leaves(tree)
    )


def _model_parts(model: Any, x: Any) -> tuple[int, int]:
    """``(weight bytes, other state bytes)`` of the states one step reads."""
    function = _compat.get_stateful_function_class()(model, return_only_write=False)
    function.make_jaxpr(x)
    weights = hidden = 0
    for state in function.get_states(x):
        if isinstance(state, brainstate.ParamState):
            weights += _nbytes(state.value)
        else:
            hidden += _nbytes(state.value)
    return weights, hidden


def _plan_one(model: Any, x: Any, entry: Any, T: int, options: dict) -> AlgorithmMemory:
    weights, hidden = _model_parts(model, x)
    name = entry if isinstance(entry, str) else ""
    if name == FULL_BPTT:
        activations = bptt_activation_bytes(model, x, T)
        state, detail, workspace, inputs = 0, {}, 0, _nbytes(x) * T
    else:
        state, detail, workspace, name = learner_state_bytes(model, x, entry, options)
        activations, inputs = 0, _nbytes(x)
    unknown = ""
    if workspace is None:
        unknown = (
            f"workspace: the learner's state ({format_bytes(state)}) is above "
            f"{format_bytes(BUILD_AT_MOST)}, so its step was not compiled to ask XLA"
        )
    return AlgorithmMemory(
        name,
        weights,
        weights,
        hidden,
        state,
        activations,
        workspace or 0,
        inputs,
        detail,
        unknown=unknown,
    )


def learner_state_bytes(
    model: Any, x: Any, learner: Any, options: dict | None = None
) -> tuple[int, dict, int | None, str]:
    """``(bytes, {what: bytes}, workspace bytes, row name)``: the state the learner (a name,
    class or factory, built by :func:`etp_viz.learn.registry.resolve`) carries between
    steps, read from the learner itself after compiling its graph (ETP traces by
    ``jax.eval_shape`` of its ``init_traces``, nothing allocated), and the workspace: for the
    ETP learners the per-step Jacobians its trace update consumes (:func:`etp_workspace_bytes`),
    for the others XLA's temporaries of the compiled step (:func:`compiled_step_temp`; None
    above :data:`BUILD_AT_MOST`, where the learner is not built)."""
    from .learn.etp.base import ETraceVjpAlgorithm
    from .learn.influence.algorithms import RTRL, PatternedRTRL
    from .learn.registry import name_of, resolve

    # the options as defaults: used where a learner given by name takes them (a class or a
    # factory is called as given)
    alg = resolve(model, learner, None, where="plan(algorithm=)", **dict(options or {}))
    name = learner if isinstance(learner, str) else name_of(alg) or type(alg).__name__
    if isinstance(alg, ETraceVjpAlgorithm):
        alg.graph_executor.compile_graph(x)
        plan_ = alg.graph_executor.plan
        shapes = jax.eval_shape(lambda: alg.init_traces(plan_))
        return _nbytes(shapes), _trace_detail(shapes, plan_), etp_workspace_bytes(plan_), name
    if type(alg) is RTRL:
        size = _rtrl_influence_bytes(model, x)
        if size > BUILD_AT_MOST:
            return size, {"influence (hidden x parameters)": size}, None, name
    alg.compile_graph(x)
    detail = learner_bytes(alg)
    tiles = alg.tiles if isinstance(alg, PatternedRTRL) else None
    if tiles is not None and "influence" in detail:
        what = (
            f"influence (tiles: {tiles.stored_entries:,} of {alg.num_hidden:,} hidden x "
            f"{alg.num_params:,} parameter entries)"
        )
        detail = {what: detail.pop("influence"), **detail}
    return sum(detail.values()), detail, compiled_step_temp(alg, x), name


def compiled_step_temp(learner: Any, x: Any) -> int:
    """XLA's temporary bytes of one jitted online gradient step of ``learner`` (compiled,
    not run; 0 where the backend reports no memory analysis)."""

    def loss(x: Any) -> Any:
        return sum(jnp.sum(y) for y in jax.tree.leaves(learner(x)))

    step = brainstate.transform.grad(loss, learner.param_states)
    stats = _compat.compiled_memory(brainstate.transform.jit(step).lower(x).compile())
    return 0 if stats is None else int(stats["temp"])


def etp_workspace_bytes(plan_: Any) -> int:
    r"""Bytes of one step's :math:`D_f` (``(*varshape, S)`` per relation and hidden group) and
    :math:`D` (``(*varshape, S, S)`` per group whose transition is not empty), in the model's
    float dtype: what an ETP step materialises for its trace update besides the traces."""
    from .learn.etp.base import _float_dtype

    itemsize = jnp.dtype(_float_dtype(plan_)).itemsize
    total = 0
    for rel in plan_.relations:
        for g in rel.group_indices:
            group = plan_.groups[g]
            total += int(np.prod(group.varshape)) * group.num_state * itemsize
    for group in plan_.groups:
        if group.transition_jaxpr.eqns:
            total += int(np.prod(group.varshape)) * group.num_state**2 * itemsize
    return total


def _trace_detail(shapes: dict, plan_: Any) -> dict[str, int]:
    """``{what: bytes}`` per trace, named by the relation's weight paths and the hidden group:
    ES-D-RTRL's ``{'x': {r: .}, 'f': {(r, g): .}}`` or the weight-shaped
    ``{(r, g[, 'kappa']): {key: .}}`` of D-RTRL and e-prop."""
    names = {
        rel.index: "+".join(sorted({".".join(map(str, p)) for p in rel.weight_paths.values()}))
        for rel in plan_.relations
    }
    if set(shapes) == {"x", "f"}:
        detail = {f"input trace of {names[r]}": _nbytes(v) for r, v in shapes["x"].items()}
        for (r, g), v in shapes["f"].items():
            detail[f"df trace of {names[r]} -> group {g}"] = _nbytes(v)
        return detail
    return {
        f"trace of {names[key[0]]} -> group {key[1]}{' (filtered)' if len(key) > 2 else ''}": (
            _nbytes(v)
        )
        for key, v in shapes.items()
    }


def _rtrl_influence_bytes(model: Any, x: Any) -> int:
    """RTRL's influence matrix: every hidden value (batch included) x every parameter."""
    function = _compat.get_stateful_function_class()(model, return_only_write=False)
    function.make_jaxpr(x)
    params = hidden = 0
    dtype = jnp.dtype(jnp.result_type(float))
    for state in function.get_states(x):
        count = sum(int(np.prod(jnp.shape(v))) for v in jax.tree.leaves(state.value))
        if isinstance(state, brainstate.ParamState):
            params += count
            dtype = jax.tree.leaves(state.value)[0].dtype
        else:
            hidden += count
    return params * hidden * jnp.dtype(dtype).itemsize


def bptt_activation_bytes(model: Any, x: Any, T: int) -> int:
    """Bytes BPTT keeps for its backward pass over ``T`` steps: the residuals of the
    sequence loss's VJP that are stacked over time (shape ``(T, ...)``), read with
    ``jax.eval_shape`` (nothing is computed). Residuals that are the inputs themselves or the
    weights are not counted again."""
    function = _compat.get_stateful_function_class()(model, return_only_write=False)
    function.make_jaxpr(x)
    states = tuple(function.get_states(x))
    values = [s.value for s in states]
    is_param = [isinstance(s, brainstate.ParamState) for s in states]

    def loss(params: list, xs: Any) -> Any:
        it = iter(params)
        flat = [next(it) if p else v for v, p in zip(values, is_param)]

        def step(flat: list, x_t: Any) -> Any:
            return _compat.stateful_function_call(function, flat, x_t)

        _, ys = jax.lax.scan(step, flat, xs)
        return sum(jnp.sum(y.astype(jnp.float32)) for y in jax.tree.leaves(ys))

    params = [v for v, p in zip(values, is_param) if p]
    xs = jax.tree.map(lambda a: jax.ShapeDtypeStruct((T, *jnp.shape(a)), jnp.result_type(a)), x)
    residuals = jax.eval_shape(lambda p, xs: jax.vjp(lambda p: loss(p, xs), p)[1], params, xs)
    x_shapes = {(tuple(s.shape), s.dtype) for s in jax.tree.leaves(xs)}
    total = 0
    for leaf in jax.tree.leaves(residuals):
        shape = tuple(leaf.shape)
        if len(shape) >= 1 and shape[0] == T and (shape, leaf.dtype) not in x_shapes:
            total += _nbytes(leaf)
    return total
