"""Linear cost on a long chain, and a property test over random small architectures."""

from __future__ import annotations

import brainstate
import jax.numpy as jnp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import etp_viz.nn as enn
from etp_viz.compiler import compile_etrace_graph
from etp_viz.compiler._jaxpr import VISITS
from etp_viz.ops import element_wise, matmul


class Chain(brainstate.nn.Module):
    """A leaky cell whose update runs through ``depth`` element-wise equations."""

    def __init__(self, depth):
        super().__init__()
        self.depth = depth
        self.W = brainstate.ParamState(0.1 * jnp.ones((3, 4)))
        self.R = brainstate.ParamState(0.1 * jnp.ones((4, 4)))
        self.h = brainstate.HiddenState(jnp.zeros(4))

    def update(self, x):
        v = matmul(x, self.W.value) + matmul(self.h.value, self.R.value)
        for i in range(self.depth):
            v = v * 0.999 if i % 2 else v + 0.001
        self.h.value = 0.5 * self.h.value + v
        return self.h.value


def _visits(depth):
    model = Chain(depth)
    VISITS.reset()
    graph = compile_etrace_graph(model, jnp.ones(3), warn=False)
    return VISITS.count, len(graph.module_info.jaxpr.eqns), graph


def test_visit_count_is_linear_in_equations():
    small, n_small, _ = _visits(1250)
    large, n_large, graph = _visits(5000)
    assert n_large > 5000
    assert len(graph.hidden_param_op_relations) == 2
    # a quadratic pass would grow ~16x; allow slack for the constant part
    assert large / small < 1.2 * n_large / n_small
    assert large < 40 * n_large


CELLS = [enn.ValinaRNNCell, enn.GRUCell, enn.LSTMCell, enn.MGUCell, enn.MiniGRU, enn.LIF]


class Random(brainstate.nn.Module):
    def __init__(self, layers, readout, plain):
        super().__init__()
        self.layers = [cls(n_in, n_out) for cls, n_in, n_out in layers]
        self.readout = enn.Linear(layers[-1][2], 2) if readout else None
        self.plain = brainstate.ParamState(jnp.ones(layers[-1][2])) if plain else None
        self.gain = brainstate.ParamState(jnp.ones(layers[0][2]))

    def update(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i == 0:
                x = x * element_wise(self.gain.value)
        if self.plain is not None:
            x = x * self.plain.value
        return self.readout(x) if self.readout is not None else x


@st.composite
def architectures(draw):
    depth = draw(st.integers(1, 3))
    sizes = [draw(st.integers(2, 5)) for _ in range(depth + 1)]
    layers = [(draw(st.sampled_from(CELLS)), sizes[i], sizes[i + 1]) for i in range(depth)]
    return (
        layers,
        draw(st.booleans()),
        draw(st.booleans()),
        draw(st.sampled_from(["diagonal", "coupled"])),
    )


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(architectures())
def test_random_architectures_compile_and_account_for_every_param(arch):
    layers, readout, plain, recurrence = arch
    model = Random(layers, readout, plain)
    brainstate.nn.init_all_states(model)
    graph = compile_etrace_graph(model, jnp.ones(layers[0][1]), recurrence=recurrence, warn=False)
    in_relation = {p for r in graph.hidden_param_op_relations for p in r.trainable_paths.values()}
    named = {d.weight_path for d in graph.diagnostics if d.weight_path is not None}
    for path in graph.module_info.weight_path_to_invars:
        assert path in in_relation or path in graph.readout_params or path in named, path
    assert set(graph.weight_status) == set(graph.module_info.weight_path_to_invars)
