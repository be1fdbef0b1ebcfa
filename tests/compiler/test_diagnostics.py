"""Every DiagnosticKind is triggered by a small model; bad input gives named errors."""

from __future__ import annotations

import html
import warnings

import brainstate
import jax
import jax.numpy as jnp
import pytest

import etp_viz.nn as enn
from etp_viz._compat import Primitive, ShapedArray, ad
from etp_viz.compiler import DiagnosticKind, DiagnosticLevel, compile_etrace_graph
from etp_viz.ops import matmul

from .models import CoupledPlain, TwoLayerRNN, init

K = DiagnosticKind


def _softsign(x):
    return x / (1.0 + jnp.abs(x))


#: a primitive the compiler has no rule for (judged element-wise from its JVP)
_softsign_p = Primitive("test_diagnostics_softsign")
_softsign_p.def_impl(_softsign)
_softsign_p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))
ad.primitive_jvps[_softsign_p] = lambda p, t: (
    _softsign_p.bind(p[0]),
    t[0] / (1.0 + jnp.abs(p[0])) ** 2,
)


class Cell(brainstate.nn.Module):
    """h = tanh(body(x, h)); ``body`` decides what the test exercises."""

    def __init__(self, body, n=4, n_in=3, extra=None):
        super().__init__()
        self.W = brainstate.ParamState(0.1 * jnp.ones((n_in, n)))
        self.V = brainstate.ParamState(0.1 * jnp.ones((n, n)))
        self.h = brainstate.HiddenState(jnp.full((n,), 0.2))
        for name, value in (extra or {}).items():
            setattr(self, name, value)
        self.body = body

    def update(self, x):
        self.h.value = jnp.tanh(self.body(self, x, self.h.value))
        return self.h.value


class DelayedCell(Cell):
    """Returns ``tanh(h)`` of the state *before* the update (a hidden output bypass)."""

    def update(self, x):
        previous = self.h.value
        super().update(x)
        return jnp.tanh(previous)


def kinds(model, x, **kw):
    graph = compile_etrace_graph(model, x, warn=False, **kw)
    return graph, [d.kind for d in graph.diagnostics]


def records(graph, kind):
    return [d for d in graph.diagnostics if d.kind == kind]


CASES = {
    K.RELATION_INCLUDED: lambda: (Cell(lambda s, x, h: matmul(x, s.W.value) + h), jnp.ones(3)),
    K.RELATION_EXCLUDED_NO_PARAMSTATE: lambda: (
        Cell(lambda s, x, h: matmul(x, jnp.ones((3, 4))) + matmul(x, s.W.value) + h),
        jnp.ones(3),
    ),
    K.RELATION_EXCLUDED_NON_TEMPORAL: lambda: (init(TwoLayerRNN()), jnp.ones(10)),
    K.RELATION_EXCLUDED_SHAPE_MISMATCH: lambda: (
        Cell(
            lambda s, x, h: matmul(x, s.W.value) + h + matmul(x, s.U.value).sum(),
            extra={"U": brainstate.ParamState(jnp.ones((3, 2)))},
        ),
        jnp.ones(3),
    ),
    K.RELATION_EXCLUDED_WEIGHT_TO_WEIGHT: lambda: (init(enn.GRUCell(3, 4)), jnp.ones(3)),
    K.RELATION_PARTIAL_PATH: lambda: (init(enn.MGUCell(3, 4)), jnp.ones(3)),
    K.RELATION_TAIL_COUPLES_POSITIONS: lambda: (
        Cell(lambda s, x, h: jnp.roll(matmul(x, s.W.value), 1) + h),
        jnp.ones(3),
    ),
    K.TRAINABLE_INVAR_NOT_PARAMSTATE: lambda: (
        Cell(lambda s, x, h: matmul(x, s.W.value, jnp.zeros(4)) + h),
        jnp.ones(3),
    ),
    K.PRIMITIVE_INSIDE_CONTROL_FLOW: lambda: (
        Cell(
            lambda s, x, h: (
                matmul(x, s.W.value)
                + h
                # a trip count that depends on the input: the loop is not unrolled
                + jax.lax.fori_loop(
                    0,
                    2 + (x[0] > 0).astype(int),
                    lambda i, c: c + matmul(x, s.U.value),
                    jnp.zeros(4),
                )
            ),
            extra={"U": brainstate.ParamState(jnp.ones((3, 4)))},
        ),
        jnp.ones(3),
    ),
    K.PRIMITIVE_INSIDE_NESTED_JIT: lambda: (
        Cell(lambda s, x, h: jax.jit(matmul)(x, s.W.value) + h),
        jnp.ones(3),
    ),
    K.PYTREE_WEIGHT_LEAF_AMBIGUOUS: lambda: (
        Cell(
            lambda s, x, h: matmul(x, s.P.value["a"] * s.P.value["b"]) + h,
            extra={"P": brainstate.ParamState({"a": jnp.ones((3, 4)), "b": jnp.ones((3, 4))})},
        ),
        jnp.ones(3),
    ),
    K.HIDDEN_GROUP_MERGED: lambda: (init(enn.LSTMCell(3, 4)), jnp.ones(3)),
    K.STATE_MISMATCH: lambda: (init(TwoLayerRNN()), jnp.ones(10)),
    K.OUTPUT_BYPASSES_HIDDEN: lambda: (init(TwoLayerRNN()), jnp.ones(10)),
    K.HIDDEN_OUTPUT_BYPASS: lambda: (
        DelayedCell(lambda s, x, h: matmul(x, s.W.value) + h),
        jnp.ones(3),
    ),
    K.TRANSITION_POSITION_COUPLING_CUT: lambda: (CoupledPlain(), jnp.ones(3)),
    K.PRIMITIVE_JUDGED: lambda: (
        Cell(lambda s, x, h: matmul(x, s.W.value) + _softsign_p.bind(h)),
        jnp.ones(3),
    ),
    K.PARAM_NOT_USED_BY_ETP: lambda: (
        Cell(lambda s, x, h: matmul(x, s.W.value) + h @ s.V.value),
        jnp.ones(3),
    ),
    K.LOOP_UNROLLED: lambda: (
        Cell(lambda s, x, h: jax.lax.fori_loop(0, 3, lambda i, h: matmul(x, s.W.value) + h, h)),
        jnp.ones(3),
    ),
    K.OP_LIFTED: lambda: (Cell(lambda s, x, h: x @ s.W.value + h), jnp.ones(3)),
    K.OP_NOT_LIFTED: lambda: (
        Cell(lambda s, x, h: x @ s.W.value + jnp.where(h > 0, s.V.value[0], 0.0)),
        jnp.ones(3),
    ),
}
#: the kinds that only ``lift=True`` emits
LIFT_KINDS = (K.OP_LIFTED, K.OP_NOT_LIFTED)


@pytest.mark.parametrize("kind", list(CASES), ids=lambda k: k.value)
def test_kind_is_triggered_with_equation_indices(kind):
    model, x = CASES[kind]()
    options = {"recurrence": "coupled"} if kind == K.STATE_MISMATCH else {}
    options.update({"lift": True} if kind in LIFT_KINDS else {})
    graph, found = kinds(model, x, **options)
    assert kind in found, [d.message for d in graph.diagnostics]
    for record in records(graph, kind):
        assert isinstance(record.context["eqn_indices"], tuple)
        if kind not in (K.HIDDEN_GROUP_MERGED, K.STATE_MISMATCH):
            assert record.context["eqn_indices"], record


def test_multi_output_primitive_detected(monkeypatch):
    from etp_viz._compat import Primitive, ShapedArray
    from etp_viz.ops import _registry

    prim = Primitive("test_two_out")
    prim.multiple_results = True
    prim.def_impl(lambda x, w: [x @ w, x @ w])
    prim.def_abstract_eval(lambda x, w: [ShapedArray((w.shape[1],), w.dtype)] * 2)
    monkeypatch.setitem(_registry.ETP_PRIMITIVES, prim, None)
    model = Cell(lambda s, x, h: prim.bind(x, s.W.value)[0] + h)
    graph, found = kinds(model, jnp.ones(3))
    assert K.MULTI_OUTPUT_PRIMITIVE_DETECTED in found
    assert K.RELATION_INCLUDED in found


def test_every_kind_has_a_case():
    covered = set(CASES) | {K.MULTI_OUTPUT_PRIMITIVE_DETECTED}
    assert covered == set(DiagnosticKind)


def test_surprising_warnings_point_at_the_user_line_once():
    model, x = CASES[K.TRANSITION_POSITION_COUPLING_CUT]()
    with pytest.warns(UserWarning, match="transition_position_coupling_cut") as caught:
        graph = compile_etrace_graph(model, x)
    assert all(w.filename == __file__ for w in caught)
    texts = [str(w.message) for w in caught]
    assert len(texts) == len(set(texts))  # each text once per compilation
    (record,) = records(graph, K.TRANSITION_POSITION_COUPLING_CUT)
    assert record.level == DiagnosticLevel.WARNING
    assert DiagnosticLevel.INFO < DiagnosticLevel.WARNING < DiagnosticLevel.ERROR


@pytest.mark.parametrize(
    "model_x",
    [
        lambda: (init(enn.GRUCell(3, 4)), jnp.ones(3)),  # Wr: weight to weight
        lambda: (init(TwoLayerRNN()), jnp.ones(10)),  # a readout
    ],
    ids=["gru_wr", "readout"],
)
def test_normal_situations_are_quiet(model_x):
    """Quiet by default: a GRU's Wr and a readout are in the records (the explorer and
    ``explain()`` show them) but raise no UserWarning."""
    model, x = model_x()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph = compile_etrace_graph(model, x)
    assert graph.diagnostics
    for record in records(graph, K.RELATION_EXCLUDED_NON_TEMPORAL):
        assert record.level == DiagnosticLevel.INFO  # a readout is normal
    for record in records(graph, K.RELATION_EXCLUDED_WEIGHT_TO_WEIGHT):
        assert record.level == DiagnosticLevel.WARNING  # still a warning in the records


# -- bad input ----------------------------------------------------------------------------


def test_not_a_module():
    with pytest.raises(TypeError, match="needs a brainstate.nn.Module"):
        compile_etrace_graph(lambda x: x, jnp.ones(3))


def test_no_hidden_state():
    with pytest.raises(ValueError, match="no HiddenState"):
        compile_etrace_graph(init(enn.Linear(3, 4)), jnp.ones(3))


def test_keyword_arguments():
    class KwOnly(Cell):
        def update(self, x, *, scale):
            return super().update(x * scale)

    model = KwOnly(lambda s, x, h: matmul(x, s.W.value) + h)
    with pytest.raises(TypeError, match="functools.partial"):
        compile_etrace_graph(model, jnp.ones(3))
    with pytest.raises(TypeError, match="keyword model arguments"):
        compile_etrace_graph(Cell(lambda s, x, h: h), jnp.ones(3), scale=2.0)


def test_param_written_in_step():
    class Writes(Cell):
        def update(self, x):
            self.W.value = self.W.value * 0.9
            return super().update(x)

    with pytest.raises(ValueError, match="writes ParamState `W`"):
        compile_etrace_graph(Writes(lambda s, x, h: matmul(x, s.W.value) + h), jnp.ones(3))


def test_hidden_state_updated_inside_a_loop_with_a_dynamic_trip_count():
    """(A loop with a static trip count is unrolled: tests/compiler/test_inner_loops.py.)"""

    class Looped(Cell):
        def update(self, x):
            def body(i, h):
                return jnp.tanh(matmul(x, self.W.value) + h)

            upper = 2 + (x[0] > 0).astype(int)
            self.h.value = jax.lax.fori_loop(0, upper, body, self.h.value)
            return self.h.value

    with pytest.raises(ValueError, match=r"State `h` is updated inside `while`.*trip count"):
        compile_etrace_graph(Looped(lambda s, x, h: h), jnp.ones(3))


def _gru_graph():
    return compile_etrace_graph(init(enn.GRUCell(3, 4)), jnp.ones(3), warn=False)


def test_explain_returns_its_records_and_its_report(capsys):
    graph = _gru_graph()
    report = graph.explain(weight_path="Wr.weight")
    printed = capsys.readouterr().out
    assert report == tuple(d for d in graph.diagnostics if d.weight_path == ("Wr", "weight"))
    assert report.records == tuple(report) and report  # a tuple of records, as before
    assert printed == report.text + "\n" == str(report) + "\n"
    assert "WEIGHTS (1)" in printed and "Wr" in printed
    assert [v.name for v in report.verdicts.values()] == ["Wr.weight"]
    assert "\n" not in repr(report) and "CompilationRecord" not in repr(report)
    assert report._repr_html_() == f"<pre>{html.escape(report.text)}</pre>"


def test_explain_shows_one_report_in_a_notebook_cell(capsys):
    """IPython echoes a cell's last value: the report must not come twice, nor as records."""
    interactive = pytest.importorskip("IPython.core.interactiveshell")
    shell = interactive.InteractiveShell.instance()
    try:
        shell.user_ns["graph"] = _gru_graph()
        capsys.readouterr()
        shell.run_cell("graph.explain()", store_history=True)
        cell = capsys.readouterr().out
        assert cell.count("WEIGHTS (3)") == 1, cell
        assert "CompilationRecord(" not in cell and "Explanation" not in cell, cell
        shell.run_cell("report = graph.explain(file=__import__('io').StringIO())", True)
        shell.run_cell("report", store_history=True)  # not printed before: shown now
        later = capsys.readouterr().out
        assert later.count("WEIGHTS (3)") == 1 and "CompilationRecord(" not in later, later
    finally:
        interactive.InteractiveShell.clear_instance()
