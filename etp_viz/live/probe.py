"""What a live session can measure on an algorithm, decided once, computed inside the step.

The probe reads the engine through public objects only: the algorithm's ``param_states`` and,
for the eligibility traces, the algorithm's own states that are not model states (every trace
is a ``brainstate.State`` owned by the algorithm). Quantities that the algorithm does not expose
are listed in :attr:`Probe.unavailable` instead of being made up.
"""

from __future__ import annotations

from typing import Any

import brainstate
import jax
import jax.numpy as jnp

__all__ = ["Probe", "path_name", "tree_norm"]


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

    def __init__(self, algorithm: Any, model: Any) -> None:
        self.param_states = {path_name(p): s for p, s in dict(algorithm.param_states).items()}
        self.relation_names: dict[str, list[str]] = {}
        self.etrace = getattr(algorithm, "etrace", None)
        if isinstance(self.etrace, brainstate.State):
            self.trace_states = {}
            self._trace_layout = _etrace_layout(algorithm, self.etrace.value, self.relation_names)
        else:
            model_ids = {id(s) for s in _states_of(model).values()}
            self.trace_states = {
                name: state
                for name, state in _states_of(algorithm).items()
                if id(state) not in model_ids and not isinstance(state, brainstate.ParamState)
            }
            self._trace_layout = {}
        self.unavailable: list[str] = []
        if not self.trace_states and not self._trace_layout:
            self.unavailable.append("trace magnitudes (the algorithm holds no trace states)")
        self.algorithm = algorithm
        model_states = _states_of(model)
        self.hidden_states = {
            n: s for n, s in model_states.items() if isinstance(s, brainstate.HiddenState)
        }
        self._jacobian_spec = _record_jacobians(algorithm, self)
        #: True when the algorithm's ``step_data_record`` state feeds the df / dh-dh columns
        self.records_step_data = bool(self._jacobian_spec)
        if not self._jacobian_spec:
            self.unavailable.append(
                "dh/dy and dh/dh heatmaps (the algorithm has no `record_step_data` hook: "
                "use etp_viz.D_RTRL / ES_D_RTRL)"
            )

    def spec(self) -> dict[str, tuple[int, ...]]:
        """Metric name → per-step shape (``loss`` first: the only metric measured every step)."""
        spec: dict[str, tuple[int, ...]] = {"loss": ()}
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

    def row(self, loss: Any, grads: dict, updates: dict, measured: Any) -> jax.Array:
        """This step's packed row (traceable), in :meth:`spec` order. The heavy metrics (trace,
        gradient and weight-change norms) are computed under ``lax.cond(measured, ...)`` and
        are NaN ("not measured") otherwise; df / dh-dh come from the step-data hook and are
        masked to NaN the same way."""
        traces = [state.value for state in self.trace_states.values()]
        if self._trace_layout:
            traces += [getter(self.etrace.value) for getter in self._trace_layout.values()]
        operands = (
            traces,
            [grads[n] for n in self.param_states],
            [updates[n] for n in self.param_states],
        )
        if measured is True:
            norms = _heavy_norms(operands)
        else:
            norms = jax.lax.cond(measured, _heavy_norms, _unmeasured_norms, operands)
        parts = [jnp.asarray(loss, jnp.float32).reshape(1), norms[: len(traces)]]
        if self._jacobian_spec:
            record = self.algorithm.step_data_record.value
            values = [jnp.asarray(record[n], jnp.float32).reshape(-1) for n in self._jacobian_spec]
            values = jnp.concatenate(values)
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
    plan = getattr(getattr(algorithm, "graph_executor", None), "plan", None)
    for relation in getattr(plan, "relations", ()) or ():
        paths = getattr(relation, "weight_paths", {}) or {}
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


def _record_jacobians(algorithm: Any, probe: Probe) -> dict[str, tuple[int, ...]]:
    """Ask an ``etp_viz.learn`` algorithm to keep, every step, per relation a dh/dy summary
    (mean |D_f|) and slice, per hidden group the dh/dh diagonal; returns their metric spec.
    The hook summarizes inside the algorithm's step, so this summary (a few small
    reductions and slices) is computed every step; the session records it on measured steps
    only."""
    record = getattr(algorithm, "record_step_data", None)
    plan = getattr(getattr(algorithm, "graph_executor", None), "plan", None)
    if record is None or plan is None:
        return {}

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
