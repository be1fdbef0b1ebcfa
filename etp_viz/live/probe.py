"""What a live session can measure on an algorithm, decided once, computed inside the step.

The probe reads the engine through public objects only: the algorithm's ``param_states`` and,
for the eligibility traces, the algorithm's own states that are not model states (every trace
is a ``brainstate.State`` owned by the algorithm). Quantities that the algorithm does not expose
are listed in :attr:`Probe.unavailable` instead of being made up.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import brainstate
import jax
import jax.numpy as jnp
import numpy as np

from etp_viz.learn.registry import StepRecorder, TraceLearner, learner_states
from etp_viz.tasks.base import Task

__all__ = ["ACTIVITY_UNITS", "Probe", "path_name", "task_accuracy", "tree_norm"]

#: Units of the activity views (spikes, membrane potentials / hidden values): the first ones.
ACTIVITY_UNITS = 8
#: Outputs (and targets) of the readout activity view: the first ones.
ACTIVITY_OUTPUTS = 4


def path_name(path: Any) -> str:
    """``('rnn', 'W')`` → ``'rnn.W'`` (the weight-path spelling used everywhere in the UI)."""
    if isinstance(path, tuple):
        return ".".join(str(p) for p in path)
    return str(path)


def tree_norm(tree: Any) -> jax.Array:
    """Euclidean norm over every leaf of a pytree (0 for an empty tree)."""
    leaves = [jnp.asarray(leaf) for leaf in jax.tree.leaves(tree)]
    if not leaves:
        return jnp.zeros((), jnp.float32)
    return jnp.sqrt(sum(jnp.sum(jnp.abs(leaf).astype(jnp.float32) ** 2) for leaf in leaves))


def _states_of(node: Any) -> dict[str, Any]:
    try:
        return {path_name(p): s for p, s in node.states().items()}
    except Exception:  # noqa: BLE001 - not a brainstate module: no states to read
        return {}


def _trace_kind(name: str) -> str:
    """ES-D-RTRL keeps an input-side (x) and an output-side (f) trace per relation."""
    tail = name.rsplit(".", 1)[-1].lower()
    if tail in ("x", "etrace_x", "eps_x", "xs") or tail.endswith("_x"):
        return "trace_x"
    if tail in ("f", "df", "etrace_f", "eps_f", "dfs") or tail.endswith("_f"):
        return "trace_f"
    return "trace"


class Probe:
    """Decides the per-step metric names for one algorithm and computes them in the step.

    Parameters
    ----------
    algorithm : object
        The compiled algorithm (``param_states``, ``__call__``).
    model : brainstate.nn.Module
        The model it trains (its states are not traces).
    """

    def __init__(self, algorithm: Any, model: Any, task: Task | None = None) -> None:
        self.param_states = {path_name(p): s for p, s in dict(algorithm.param_states).items()}
        self.relation_names: dict[str, list[str]] = {}
        self.etrace = algorithm.etrace if isinstance(algorithm, TraceLearner) else None
        if isinstance(self.etrace, brainstate.State):
            self.trace_states = {}
            self._trace_layout = _etrace_layout(algorithm, self.etrace.value, self.relation_names)
        else:
            self.trace_states = dict(learner_states(algorithm))
            self._trace_layout = {}
        self.unavailable: list[str] = []
        if not self.trace_states and not self._trace_layout:
            self.unavailable.append("trace magnitudes (the algorithm holds no trace states)")
        self.algorithm = algorithm
        model_states = _states_of(model)
        self.hidden_states = {
            n: s for n, s in model_states.items() if isinstance(s, brainstate.HiddenState)
        }
        self.accuracy_fn = task_accuracy(task)
        self.classification = self.accuracy_fn is not None
        self.activity = _activity_plan(algorithm, model, self, task)
        self._jacobian_spec = _record_jacobians(algorithm, self)
        #: True when the algorithm's ``step_data_record`` state feeds the df / dh-dh columns
        self.records_step_data = bool(self._jacobian_spec)
        if not self._jacobian_spec:
            self.unavailable.append(
                "dh/dy and dh/dh heatmaps (the algorithm has no `record_step_data` hook: "
                "use etp_viz.D_RTRL / ES_D_RTRL)"
            )

    def dense_spec(self) -> dict[str, tuple[int, ...]]:
        """The metrics recorded on every step, in row order: the loss, the accuracy counts of
        a classification task (``accuracy/correct``, ``accuracy/labelled``: correct and
        labelled rows of the step) and the activity rows (``activity/*``, a few units of
        batch element 0, see :func:`_activity_plan`)."""
        spec: dict[str, tuple[int, ...]] = {"loss": ()}
        if self.accuracy_fn is not None:
            spec["accuracy/correct"] = ()
            spec["accuracy/labelled"] = ()
        spec.update(self.activity["spec"])
        return spec

    def dense_row(self, loss: Any, output: Any, target: Any, grads: dict) -> jax.Array:
        """This step's :meth:`dense_spec` values as one float32 vector (traceable, cheap:
        slices of a few units, two reductions over one weight column)."""
        parts = [jnp.asarray(loss, jnp.float32).reshape(1)]
        if self.accuracy_fn is not None:
            correct, labelled = self.accuracy_fn(output, target)
            parts.append(
                jnp.stack([jnp.asarray(correct), jnp.asarray(labelled)]).astype(jnp.float32)
            )
        parts += [
            v.astype(jnp.float32).reshape(-1)
            for v in _activity_row(self.activity, self.algorithm, output, target, grads)
        ]
        return jnp.concatenate(parts)

    def spec(self) -> dict[str, tuple[int, ...]]:
        """Metric name → per-step shape (the :meth:`dense_spec` first: measured every step)."""
        spec = self.dense_spec()
        for name in self.trace_states:
            spec[f"{_trace_kind(name)}/{name}"] = ()
        for metric in self._trace_layout:
            spec[metric] = ()
        spec.update(self._jacobian_spec)
        for name in self.param_states:
            spec[f"grad_norm/{name}"] = ()
            spec[f"update_norm/{name}"] = ()
        return spec

    def checks(self) -> list[str]:
        """Names of the finiteness checks made every step besides the loss (not recorded):
        each parameter after the update (``weight/<path>``) and each hidden state
        (``hidden/<path>``)."""
        return [f"weight/{n}" for n in self.param_states] + [
            f"hidden/{n}" for n in self.hidden_states
        ]

    def check_state(self, new_params: dict[str, Any]) -> jax.Array:
        """Every-step finiteness flags, in :meth:`checks` order (traceable; one ``all``
        reduction per array, no arithmetic)."""
        trees = [new_params[n] for n in self.param_states]
        trees += [s.value for s in self.hidden_states.values()]
        return jnp.stack([_all_finite(tree) for tree in trees])

    def row(
        self, loss: Any, grads: dict, updates: dict, measured: Any, dense: Any = None
    ) -> jax.Array:
        """This step's packed row (traceable), in :meth:`spec` order; ``dense``: the step's
        :meth:`dense_row` (default: the loss alone, for a probe recording nothing else
        densely). The heavy metrics (trace,
        gradient and weight-change norms) are computed under ``lax.cond(measured, ...)`` and
        are NaN ("not measured") otherwise; df / dh-dh come from the step-data hook and are
        masked to NaN the same way."""
        traces = [state.value for state in self.trace_states.values()]
        etrace = self.etrace
        if self._trace_layout and etrace is not None:
            traces += [getter(etrace.value) for getter in self._trace_layout.values()]
        operands = (
            traces,
            [grads[n] for n in self.param_states],
            [updates[n] for n in self.param_states],
        )
        if measured is True:
            norms = _heavy_norms(operands)
        else:
            norms = jax.lax.cond(measured, _heavy_norms, _unmeasured_norms, operands)
        if dense is None:
            dense = jnp.asarray(loss, jnp.float32).reshape(1)
        parts = [dense, norms[: len(traces)]]
        if self._jacobian_spec:
            record = self.algorithm.step_data_record.value
            flat = [jnp.asarray(record[n], jnp.float32).reshape(-1) for n in self._jacobian_spec]
            values = jnp.concatenate(flat)
            parts.append(values if measured is True else jnp.where(measured, values, jnp.nan))
        parts.append(norms[len(traces) :])
        return jnp.concatenate(parts)


def _all_finite(tree: Any) -> jax.Array:
    leaves = jax.tree.leaves(tree)
    if not leaves:
        return jnp.ones((), jnp.bool_)
    flags = [jnp.all(jnp.isfinite(leaf)) for leaf in leaves]
    return flags[0] if len(flags) == 1 else jnp.all(jnp.stack(flags))


def _sum_squares(leaf: Any) -> jax.Array:
    # an elementwise square + reduce (fused by XLA), not a `dot`: on CPU every dot is a
    # runtime library call, ~20 of which cost more than the whole training step
    leaf = jnp.asarray(leaf, jnp.float32)
    return jnp.sum(leaf * leaf)


def _heavy_norms(operands: tuple) -> jax.Array:
    """``[‖trace‖..., ‖grad_p‖, ‖update_p‖, ...]``: one reduction per array, gradient and
    weight change of a parameter side by side (XLA fuses the SGD update into its sum)."""
    traces, grads, updates = operands
    squares = [sum(map(_sum_squares, jax.tree.leaves(t)), jnp.float32(0)) for t in traces]
    for grad, update in zip(grads, updates):
        squares.append(sum(map(_sum_squares, jax.tree.leaves(grad)), jnp.float32(0)))
        squares.append(sum(map(_sum_squares, jax.tree.leaves(update)), jnp.float32(0)))
    if not squares:
        return jnp.zeros((0,), jnp.float32)
    return jnp.sqrt(jnp.stack(squares))


def _unmeasured_norms(operands: tuple) -> jax.Array:
    traces, grads, _ = operands
    return jnp.full((len(traces) + 2 * len(grads),), jnp.nan, jnp.float32)


def _etrace_layout(algorithm: Any, traces: Any, relation_names: dict[str, list[str]]) -> dict:
    """Metric name → function(traces) for an ``etp_viz.learn`` algorithm's ``etrace`` pytree.

    D-RTRL keeps ``{(relation, group): {key: ε}}``; ES-D-RTRL keeps ``{"x": {relation: ε_x},
    "f": {(relation, group): ε_f}}``. Relations are named ``r<i>`` (the view model's relation
    ids) and ``r<i>.g<k>`` per hidden group; ``relation_names`` receives their weight paths.
    """
    for relation in _relations(algorithm):
        paths = relation.weight_paths
        relation_names[f"r{relation.index}"] = sorted({path_name(p) for p in paths.values()})
    layout: dict[str, Any] = {}
    if isinstance(traces, dict) and set(traces) == {"x", "f"}:
        for r in traces["x"]:
            layout[f"trace_x/r{r}"] = lambda t, r=r: t["x"][r]
        for r, g in traces["f"]:
            layout[f"trace_f/r{r}.g{g}"] = lambda t, k=(r, g): t["f"][k]
    elif isinstance(traces, dict):
        for key in traces:
            if isinstance(key, tuple) and len(key) in (2, 3):  # (r, g) or (r, g, "kappa")
                name = ".".join([f"r{key[0]}", f"g{key[1]}", *map(str, key[2:])])
            elif isinstance(key, tuple):  # a learner's bookkeeping (a step counter): no trace
                continue
            else:
                name = str(key)
            layout[f"trace/{name}"] = lambda t, k=key: t[k]
    return layout


#: Units kept per relation / group for the heatmaps (the first ones).
HEATMAP_UNITS = 32


def _unit_slice(values: jax.Array, units: int) -> jax.Array:
    """``(*lead, H)`` → the batch-mean of the first ``units`` units, shape ``(units,)``."""
    values = jnp.asarray(values, jnp.float32)
    if values.ndim > 1:
        values = values.reshape(-1, values.shape[-1]).mean(axis=0)
    return values.reshape(-1)[:units]


def _relations(algorithm: Any) -> tuple:
    """The ETP relations of a trace learner's compiled plan (none for other learners)."""
    if not isinstance(algorithm, TraceLearner) or algorithm.graph_executor.plan is None:
        return ()
    return tuple(algorithm.graph_executor.plan.relations)


def _record_jacobians(algorithm: Any, probe: Probe) -> dict[str, tuple[int, ...]]:
    """Ask an ``etp_viz.learn`` algorithm to keep, every step, per relation a dh/dy summary
    (mean |D_f|) and slice, per hidden group the dh/dh diagonal; returns their metric spec.
    The hook summarizes inside the algorithm's step, so this summary (a few small
    reductions and slices) is computed every step; the session records it on measured steps
    only."""
    if not (isinstance(algorithm, StepRecorder) and _relations(algorithm)):
        return {}
    record = algorithm.record_step_data

    def summarize(data: dict) -> dict[str, jax.Array]:
        row = {}
        for (r, g), df in data["df"].items():
            row[f"df_abs/r{r}.g{g}"] = jnp.mean(jnp.abs(df)).astype(jnp.float32)
            row[f"df/r{r}.g{g}"] = _unit_slice(df[..., 0], HEATMAP_UNITS)
        for g, dh_dh in data["dh_dh"].items():
            if dh_dh is None:  # a group without a hidden-to-hidden path: nothing to show
                continue
            for s in range(dh_dh.shape[-1]):
                name = f"dhdh/g{g}" if s == 0 else f"dhdh/g{g}.s{s}"
                row[name] = _unit_slice(dh_dh[..., s, s], HEATMAP_UNITS)
        return row

    try:
        state = record(summarize)
    except Exception:  # noqa: BLE001 - an algorithm whose data lacks df/dh_dh: not recorded
        return {}
    return {name: tuple(value.shape) for name, value in state.value.items()}


# -- accuracy of a classification task -------------------------------------------------------


def masked_accuracy(y_pred: jax.Array, y_target: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(n_correct, n_labelled)`` of one step: rows with a one-hot target (all zeros: no
    label at this step), correct where the arg-max of the prediction is the labelled class."""
    y_pred = jnp.asarray(y_pred).reshape(-1, jnp.shape(y_pred)[-1])
    y_target = jnp.asarray(y_target).reshape(-1, jnp.shape(y_target)[-1])
    labelled = jnp.sum(y_target, axis=-1) > 0
    hit = jnp.argmax(y_pred, axis=-1) == jnp.argmax(y_target, axis=-1)
    return jnp.sum(hit & labelled), jnp.sum(labelled)


def task_accuracy(task: Task | None) -> Any:
    """The per-step ``(n_correct, n_labelled)`` function of a classification task
    (``task.is_classification``): ``task.accuracy``; None for anything else (a regression
    task, custom data)."""
    if task is None or not task.is_classification:
        return None
    return task.accuracy


# -- activity views: a few units, every step --------------------------------------------------


def _first_rows(value: Any, count: int) -> jax.Array:
    """Batch element 0 of a ``(*lead, H)`` array, its first ``count`` entries."""
    value = jnp.asarray(value)
    if value.ndim == 0:
        return value.reshape(1)
    return value.reshape(-1, value.shape[-1])[0, :count]


def module_at(model: Any, parts: Any) -> Any:
    """The module at a state path's module ``parts`` (``("rnn",)`` of ``rnn.V``), None where
    they lead nowhere. Names are attributes of the user's modules; a list of layers is indexed
    (``layers.0.V``: an int part or a digit string)."""
    owner = model
    for part in parts:
        index = part if isinstance(part, int) else int(part) if str(part).isdigit() else None
        try:
            owner = owner[index] if index is not None else getattr(owner, str(part))
        except (AttributeError, IndexError, KeyError, TypeError):
            return None
    return owner


@runtime_checkable
class SpikingLayer(Protocol):
    """A layer whose membrane potential ``V`` crosses a threshold: ``spike()`` gives its
    spikes (:class:`etp_viz.nn.LIF`, ALIF and the user's own)."""

    def spike(self, *args: Any, **kwargs: Any) -> Any: ...


def _activity_plan(algorithm: Any, model: Any, probe: Probe, task: Task | None) -> dict[str, Any]:
    """What the activity views record every step (a handful of numbers):

    - ``activity/hidden``: the first :data:`ACTIVITY_UNITS` units of the first hidden state of
      the model (a spiking layer's membrane potential ``V`` when there is one), batch 0;
    - ``activity/spikes``: the spikes of that spiking layer (``layer.spike()``);
    - ``activity/output`` / ``activity/target``: the readout and its target (first outputs of
      a task; a classification task's readout as softmax probabilities);
    - ``activity/synapse``: the synapses ``W[0, j]`` (input 0 → unit ``j``, the first
      :data:`ACTIVITY_UNITS` units) of the first weight of the first online relation, rows
      ``(ε_0j, L_j, g_0j)``: the eligibility trace (batch 0), the learning signal of unit
      ``j`` and the online gradient this step (the view shows one unit: the most active one,
      or the one clicked). The learning signal is
      ``Σ_i g_ij ε_ij / Σ_i ε_ij²`` over the unit's synapses: exactly ``∂L/∂h_j`` when
      ``g_ij = L_j ε_ij`` (one hidden state per unit, batch 1; with a batch, the trace is
      batch element 0's and the gradient the batch's).
    """
    plan: dict[str, Any] = {"spec": {}, "hidden": None, "layer": None, "synapse": None}
    hidden = probe.hidden_states
    spiking = None
    for path, state in hidden.items():
        layer = module_at(model, path.split(".")[:-1])
        if path.endswith(".V") and isinstance(layer, SpikingLayer):
            spiking = (path, state, layer)
            break
    if spiking is not None:
        plan["hidden"], plan["layer"] = spiking[0], spiking[2]
        plan["hidden_state"] = spiking[1]
    elif hidden:
        plan["hidden"], plan["hidden_state"] = next(iter(hidden.items()))
    if plan["hidden"] is not None:
        units = int(np.prod(jnp.shape(plan["hidden_state"].value)[-1:], dtype=np.int64))
        plan["spec"]["activity/hidden"] = (min(units, ACTIVITY_UNITS),)
        if plan["layer"] is not None:
            plan["spec"]["activity/spikes"] = (min(units, ACTIVITY_UNITS),)
    outputs = task.output_size if task is not None else None
    if isinstance(outputs, int) and outputs > 0:
        plan["spec"]["activity/output"] = (min(outputs, ACTIVITY_OUTPUTS),)
        plan["spec"]["activity/target"] = (min(outputs, ACTIVITY_OUTPUTS),)
        plan["softmax"] = probe.classification
    plan["synapse"] = _pick_synapse(algorithm, probe)
    if plan["synapse"] is not None:
        plan["spec"]["activity/synapse"] = (3, plan["synapse"]["units"])
    return plan


def _pick_synapse(algorithm: Any, probe: Probe) -> dict[str, Any] | None:
    """Synapse ``[0, 0]`` of the first weight of relation 0 whose trace has a per-synapse
    layout (D-RTRL ``(*lead, in, out, S)``; ES-D-RTRL ``ε_x ⊗ ε_f``), else None."""
    traced = isinstance(algorithm, TraceLearner)
    if not traced or not isinstance(algorithm.etrace, brainstate.State):
        return None
    traces_of, etrace = algorithm.traces_of_path, algorithm.etrace
    for relation in _relations(algorithm):
        for leaf, path in sorted(relation.weight_paths.items()):
            name = path_name(path)
            if name not in probe.param_states:
                continue
            value = probe.param_states[name].value
            weight = value.get(leaf) if isinstance(value, dict) else value
            if weight is None or jnp.ndim(weight) != 2:
                continue
            try:
                found = traces_of(etrace.value, path)
            except Exception:  # noqa: BLE001 - a learner whose traces are not per weight
                return None
            for key, trace in found.items():
                if not (isinstance(key, tuple) and len(key) == 2):
                    continue
                shape = tuple(jnp.shape(weight))
                if _trace_column(trace, leaf, shape, 1) is not None:
                    units = min(shape[1], ACTIVITY_UNITS)
                    return {
                        "name": name,
                        "path": path,
                        "leaf": leaf,
                        "key": key,
                        "shape": shape,
                        "i": 0,
                        "units": units,
                    }
    return None


def _trace_column(trace: Any, leaf: Any, shape: tuple, units: int) -> jax.Array | None:
    """The traces ``ε_{:, :units}`` (batch 0, hidden state 0) of every synapse into the first
    ``units`` units: ``(n_in, units)``."""
    n_in, n_out = shape
    if isinstance(trace, dict) and set(trace) == {"x", "f"}:  # ES-D-RTRL: ε_x ⊗ ε_f
        x, f = trace["x"], trace["f"]
        if x is None or jnp.shape(x)[-1:] != (n_in,) or jnp.shape(f)[-2:-1] != (n_out,):
            return None
        x = jnp.reshape(x, (-1, n_in))[0]
        f = jnp.reshape(f, (-1, *jnp.shape(f)[-2:]))[0, :units, 0]
        return x[:, None] * f[None, :]
    if isinstance(trace, dict):
        trace = trace.get(leaf)
    if trace is None or jnp.ndim(trace) < 3 or tuple(jnp.shape(trace)[-3:-1]) != (n_in, n_out):
        return None
    return jnp.reshape(trace, (-1, *jnp.shape(trace)[-3:]))[0, :, :units, 0]


def _activity_row(
    plan: dict[str, Any], algorithm: Any, output: Any, target: Any, grads: dict
) -> list[jax.Array]:
    """The step's activity values in :func:`_activity_plan`'s spec order (traceable)."""
    row = []
    spec = plan["spec"]
    if "activity/hidden" in spec:
        units = spec["activity/hidden"][0]
        row.append(_first_rows(plan["hidden_state"].value, units))
        if "activity/spikes" in spec:
            row.append(_first_rows(plan["layer"].spike(), units))
    if "activity/output" in spec:
        count = spec["activity/output"][0]
        if plan.get("softmax"):
            output = jax.nn.softmax(jnp.asarray(output, jnp.float32), axis=-1)
        row.append(_first_rows(output, count))
        row.append(_first_rows(target, count))
    synapse = plan["synapse"]
    if synapse is not None:
        found = algorithm.traces_of_path(algorithm.etrace.value, synapse["path"])
        units, i = synapse["units"], synapse["i"]
        column = _trace_column(found[synapse["key"]], synapse["leaf"], synapse["shape"], units)
        traces = jnp.asarray(column, jnp.float32)
        grad = grads[synapse["name"]]
        grad = grad[synapse["leaf"]] if isinstance(grad, dict) else grad
        grad = jnp.asarray(grad, jnp.float32)[:, :units]
        energy = jnp.sum(traces * traces, axis=0)
        safe = jnp.where(energy > 0, energy, 1.0)
        signal = jnp.where(energy > 0, jnp.sum(grad * traces, axis=0) / safe, 0.0)
        row.append(jnp.stack([traces[i], signal, grad[i]]))
    return row
