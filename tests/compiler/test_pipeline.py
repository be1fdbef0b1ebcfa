"""The spec's pipeline on the two-layer RNN, and the recurrent-cell profiles."""

from __future__ import annotations

import warnings

import brainstate
import jax.numpy as jnp
import pytest

import etp_viz.nn as enn
from etp_viz.compiler import (
    DiagnosticKind,
    add_hidden_perturbation_from_minfo,
    compile_etrace_graph,
    extract_module_info,
    find_hidden_groups_from_minfo,
    find_hidden_param_op_relations_from_minfo,
)
from etp_viz.ops import is_etp_primitive

from .models import TwoLayerRNN, init


@pytest.fixture
def rnn():
    return init(TwoLayerRNN())


def test_two_layer_rnn_structure(rnn):
    minfo = extract_module_info(rnn, jnp.zeros(10))
    assert len(minfo.compiled_model_states) == 5
    assert list(minfo.hidden_path_to_invar) == [("rnn1", "h"), ("rnn2", "h")]
    assert list(minfo.weight_path_to_invars) == [
        ("rnn1", "W", "weight"),
        ("rnn2", "W", "weight"),
        ("out", "weight"),
    ]
    assert all(len(v) == 2 for v in minfo.weight_path_to_invars.values())
    etp = [e for e in minfo.jaxpr.eqns if is_etp_primitive(e.primitive)]
    assert [e.primitive.name for e in etp] == ["etp_mv"] * 3
    groups, hid_path_to_group = find_hidden_groups_from_minfo(minfo)
    assert [g.hidden_paths for g in groups] == [[("rnn1", "h")], [("rnn2", "h")]]
    assert all(len(g.transition_jaxpr.eqns) == 0 for g in groups)  # D = 0 by default
    relations = find_hidden_param_op_relations_from_minfo(minfo, hid_path_to_group)
    assert [r.weight_path for r in relations] == [("rnn1", "W", "weight"), ("rnn2", "W", "weight")]
    assert [r.x_var.aval.shape for r in relations] == [(42,), (48,)]
    perturb = add_hidden_perturbation_from_minfo(minfo)
    assert len(perturb.perturb_vars) == 2
    assert perturb.perturb_hidden_paths == [("rnn1", "h"), ("rnn2", "h")]


def test_coupled_mode_keeps_recurrent_etp_ops(rnn):
    minfo = extract_module_info(rnn, jnp.zeros(10))
    groups, _ = find_hidden_groups_from_minfo(minfo, recurrence="coupled")
    for g in groups:
        names = [e.primitive.name for e in g.transition_jaxpr.eqns]
        assert "etp_mv" in names and names[-1] == "tanh"
        assert len(g.transition_jaxpr_constvars) == 3  # x, W, b


def test_compile_graph_fields_and_records(rnn):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a readout is normal: quiet by default
        graph = compile_etrace_graph(rnn, jnp.zeros(10))
    assert list(graph._asdict())[:6] == [
        "module_info",
        "hidden_groups",
        "hid_path_to_group",
        "hidden_param_op_relations",
        "hidden_perturb",
        "diagnostics",
    ]
    kinds = [d.kind for d in graph.diagnostics]
    assert kinds.count(DiagnosticKind.RELATION_INCLUDED) == 2
    excluded = [
        d for d in graph.diagnostics if d.kind == DiagnosticKind.RELATION_EXCLUDED_NON_TEMPORAL
    ]
    assert [d.weight_path for d in excluded] == [("out", "weight")]
    assert list(graph.readout_params) == [("out", "weight")]
    assert graph.weight_status[("out", "weight")] == "exact"
    assert all("eqn_indices" in d.context for d in graph.diagnostics)
    shown = graph.explain(weight_path="out.weight")
    assert {d.weight_path for d in shown} == {("out", "weight")}
    assert graph.explain(kind="relation_included") == tuple(
        d for d in graph.diagnostics if d.kind == DiagnosticKind.RELATION_INCLUDED
    )


def test_gru_profile():
    graph = compile_etrace_graph(init(enn.GRUCell(3, 4)), jnp.ones(3), warn=False)
    assert len(graph.hidden_groups) == 1
    assert [r.weight_path for r in graph.hidden_param_op_relations] == [
        ("Wz", "weight"),
        ("Wh", "weight"),
    ]
    w2w = [
        d for d in graph.diagnostics if d.kind == DiagnosticKind.RELATION_EXCLUDED_WEIGHT_TO_WEIGHT
    ]
    assert [d.weight_path for d in w2w] == [("Wr", "weight")]
    record = w2w[0]
    wr_eqn = record.context["path_eqn_indices"][0]
    assert graph.module_info.jaxpr.eqns[wr_eqn].primitive.name.startswith("etp_")
    blocking = record.context["blocking_eqn_indices"]
    assert blocking and all(b in record.context["eqn_indices"] for b in blocking)


def test_lstm_profile():
    graph = compile_etrace_graph(init(enn.LSTMCell(3, 4)), jnp.ones(3), warn=False)
    (group,) = graph.hidden_groups
    assert group.hidden_paths == [("h",), ("c",)] and group.num_state == 2
    assert len(graph.hidden_param_op_relations) == 4
    assert any(d.kind == DiagnosticKind.HIDDEN_GROUP_MERGED for d in graph.diagnostics)


def test_different_layers_never_merge():
    class Stack(brainstate.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = [enn.ValinaRNNCell(4, 4), enn.ValinaRNNCell(4, 4)]

        def update(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    graph = compile_etrace_graph(init(Stack()), jnp.ones(4), recurrence="coupled", warn=False)
    assert len(graph.hidden_groups) == 2


def test_determinism(rnn):
    def summary(graph):
        rels = [
            (
                r.weight_path,
                r.eqn_index,
                r.path_eqn_indices,
                r.blocking_eqn_indices,
                r.path_classification,
            )
            for r in graph.hidden_param_op_relations
        ]
        recs = [
            (d.kind, d.level, d.message, d.weight_path, d.hidden_paths, repr(d.context))
            for d in graph.diagnostics
        ]
        return rels, recs

    gru = init(enn.GRUCell(3, 4))
    for model, x in ((rnn, jnp.zeros(10)), (gru, jnp.ones(3))):
        first = summary(compile_etrace_graph(model, x, warn=False))
        assert first == summary(compile_etrace_graph(model, x, warn=False))
