"""Hidden output bypass in the compiler: ``graph.bypass_hidden`` and its INFO record name the
hidden states whose previous value reaches an output crossing no new hidden value."""

from __future__ import annotations

import functools

import pytest

import etp_viz.nn as nn
from etp_viz.compiler import DiagnosticKind, DiagnosticLevel, compile_etrace_graph
from tests.learn import bypass_models as bm

CASES = [
    (bm.SpikingCell, [("v",)]),
    (functools.partial(bm.DelayedReadout, nn.GRUCell), [("cell", "h")]),
    (functools.partial(bm.StackedSpiking, False), [("top", "v")]),
    (functools.partial(bm.StackedSpiking, True), [("lower", "h"), ("top", "v")]),
]


def _graph(factory):
    model = bm.build(factory)
    return compile_etrace_graph(model, bm.inputs(1)[0], warn=False)


def _records(graph):
    return [r for r in graph.diagnostics if r.kind is DiagnosticKind.HIDDEN_OUTPUT_BYPASS]


@pytest.mark.parametrize("factory,paths", CASES, ids=["spiking", "delayed_gru", "top", "both"])
def test_bypassing_states_are_named(factory, paths):
    graph = _graph(factory)
    assert sorted(graph.bypass_hidden) == sorted(paths)
    (record,) = _records(graph)
    assert record.level is DiagnosticLevel.INFO
    assert sorted(record.hidden_paths) == sorted(paths)
    routes = record.context["path_eqn_indices"]
    assert routes == graph.bypass_eqn_indices
    assert set(record.context["eqn_indices"]) == {i for r in routes.values() for i in r}
    eqns = graph.module_info.jaxpr.eqns
    outputs = set(graph.module_info.out_vars)
    for path, route in routes.items():
        # the route starts at an equation reading h^{t-1} and ends at one producing an output
        assert graph.module_info.hidden_path_to_invar[path] in eqns[route[0]].invars
        assert any(v in outputs for v in eqns[route[-1]].outvars)
        assert list(route) == sorted(route)
    assert "before this step's update" in record.message


def test_spiking_route_is_the_spike_and_the_readout():
    graph = _graph(bm.SpikingCell)
    names = [
        graph.module_info.jaxpr.eqns[i].primitive.name for i in graph.bypass_eqn_indices[("v",)]
    ]
    assert names == ["sub", "mul", "logistic", "dot_general"]


@pytest.mark.parametrize(
    "factory", [bm.PlainGRU, functools.partial(bm.DelayedReadout, nn.GRUCell, False)]
)
def test_an_output_of_the_new_state_is_no_bypass(factory):
    graph = _graph(factory)
    assert graph.bypass_hidden == ()
    assert graph.bypass_eqn_indices == {}
    assert _records(graph) == []
