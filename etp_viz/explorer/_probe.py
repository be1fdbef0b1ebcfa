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
        self._jacobian_spec = _record_jacobians(algorithm)
        if not self._jacobian_spec:
            self.unavailable.append(
                "dh/dy and dh/dh heatmaps (the algorithm has no `record_step_data` hook: "
                "use etp_viz.D_RTRL / ES_D_RTRL)"
            )

    def spec(self) -> dict[str, tuple[int, ...]]:
        """Metric name → per-step shape."""
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

    def metrics(self, loss: Any, grads: dict[str, Any], updates: dict[str, Any]) -> dict:
        """The row for this step (traceable)."""
        row = {"loss": jnp.asarray(loss, jnp.float32).reshape(())}
        for name, state in self.trace_states.items():
            row[f"{_trace_kind(name)}/{name}"] = tree_norm(state.value)
        if self._trace_layout:
            traces = self.etrace.value
            for metric, getter in self._trace_layout.items():
                row[metric] = tree_norm(getter(traces))
        if self._jacobian_spec:
            row.update(self.algorithm.step_data_record.value)
        for name in self.param_states:
            row[f"grad_norm/{name}"] = tree_norm(grads[name])
            row[f"update_norm/{name}"] = tree_norm(updates[name])
        return row


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
            name = f"r{key[0]}.g{key[1]}" if isinstance(key, tuple) and len(key) == 2 else key
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


def _record_jacobians(algorithm: Any) -> dict[str, tuple[int, ...]]:
    """Ask an ``etp_viz.learn`` algorithm to keep, every step, per relation a dh/dy summary
    (mean |D_f|) and slice, per hidden group the dh/dh diagonal; returns their metric spec."""
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
