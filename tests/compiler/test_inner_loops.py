"""Inner loops (issue 32, "Inner loops"): a loop of sub-steps with a static trip count whose body
writes a hidden state or holds an ETP op is unrolled into the flat step.

The flat step then holds the loop body once per iteration (fresh Vars, the carry threaded):
the same relations and claims as the twin written out by hand, and the same values. A loop
with a dynamic trip count that writes a state is still refused, one longer than the cap is
refused with a message naming it, and a loop touching no state and no ETP op stays a loop.
"""

from __future__ import annotations

import warnings

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from etp_viz.compiler import DiagnosticKind, compile_etrace_graph
from etp_viz.compiler._jaxpr import eval_jaxpr, inline_calls
from etp_viz.compiler.loops import MAX_UNROLL_ITERATIONS, LoopIteration
from tests.compiler.loop_models import LOOPS, SUBSTEPS, WHILE_SHAPES, PreprocessCell, build, inputs

UNROLLED = [loop for loop in LOOPS if loop != "twin"]


def _compile(model, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return compile_etrace_graph(model, x)


def _names(graph):
    return [e.primitive.name for e in graph.module_info.jaxpr.eqns]


def _relation_summary(graph):
    """What a relation is, without equation indices (the counter's arithmetic shifts them)."""
    return sorted(
        (
            r.primitive.name,
            tuple(sorted(map(str, r.trainable_paths.values()))),
            tuple(sorted(map(str, r.connected_hidden_paths))),
        )
        for r in graph.hidden_param_op_relations
    )


def _claims(graph):
    return {k: c.kind for k, c in graph.gradient_claims("d_rtrl").items()}


@pytest.mark.parametrize("recurrence", ["dense", "diagonal"])
@pytest.mark.parametrize("loop", UNROLLED)
def test_a_sub_step_loop_compiles_as_its_hand_unrolled_twin(x64, loop, recurrence):
    x = inputs()[0]
    twin = _compile(build("twin", recurrence=recurrence), x)
    graph = _compile(build(loop, recurrence=recurrence), x)
    assert not {"scan", "while"} & set(_names(graph))
    etp = [n for n in _names(graph) if n.startswith("etp_")]
    assert etp == [n for n in _names(twin) if n.startswith("etp_")]
    assert _relation_summary(graph) == _relation_summary(twin)
    assert _claims(graph) == _claims(twin)
    assert len(graph.hidden_groups) == len(twin.hidden_groups) == 1
    records = [r for r in graph.diagnostics if r.kind == DiagnosticKind.LOOP_UNROLLED]
    assert len(records) == 1 and records[0].context["trip_count"] == 6
    if loop != "for_loop":  # (brainstate's for_loop is the frame that made that scan)
        assert "loop_models.py" in records[0].context["source"]
    assert "was unrolled into the step" in records[0].message
    assert DiagnosticKind.PRIMITIVE_INSIDE_CONTROL_FLOW not in {r.kind for r in graph.diagnostics}
    stacks = graph.module_info.nested_jit_eqns.values()
    iterations = {e.iteration for s in stacks for e in s if isinstance(e, LoopIteration)}
    assert iterations == set(range(6))


@pytest.mark.parametrize("loop", UNROLLED)
def test_the_unrolled_step_computes_the_same_values(x64, loop):
    model, twin = build(loop), build("twin")
    graph = _compile(model, inputs()[0])
    minfo = graph.module_info
    states = [s.value for s in minfo.compiled_model_states]
    for x in inputs(3):
        out, _ = minfo.jaxpr_call(states, x)
        np.testing.assert_allclose(np.asarray(out), np.asarray(model(x)), rtol=1e-13)
        np.testing.assert_allclose(np.asarray(out), np.asarray(twin(x)), rtol=1e-13)
        states = [s.value for s in minfo.compiled_model_states]


def test_scanned_inputs_and_outputs_are_sliced_and_stacked(x64):
    """A reversed scan with two scanned inputs and a stacked output, unrolled (every input
    counted as a state so the loop qualifies): the values of ``jax.lax.scan``."""

    def step(c, xs, ys):
        def body(carry, z):
            a, b = z
            new = jnp.sin(carry) * a + b
            return new, (new * 2.0, jnp.sum(new))

        return jax.lax.scan(body, c, (xs, ys), reverse=True)

    args = (jnp.arange(3.0), jnp.linspace(0.1, 0.9, 12).reshape(4, 3), jnp.ones((4, 3)))
    closed = jax.make_jaxpr(step)(*args)
    jaxpr, consts = closed.jaxpr, closed.consts
    flat = inline_calls(jaxpr, consts, state_vars=jaxpr.invars)
    assert "scan" not in [e.primitive.name for e in flat.jaxpr.eqns]
    got = eval_jaxpr(flat.jaxpr, flat.consts, *args)
    want = jax.tree.leaves(step(*args))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-14)


@pytest.mark.parametrize("loop", ["dynamic", "until_small"])
def test_a_dynamic_trip_count_is_still_refused(x64, loop):
    """A trip count read from the input, or a condition on the state itself."""
    with pytest.raises(
        ValueError,
        match=r"State `v` is updated inside `while` .*trip count is not a compile-time constant",
    ):
        compile_etrace_graph(build(loop), inputs()[0])


@pytest.mark.parametrize("loop", WHILE_SHAPES)
def test_other_while_shapes_are_counted_and_unrolled(x64, loop):
    """A ``while`` whose condition reads only counters updated from constants is counted by
    running those counters alone: SUBSTEPS iterations each, spliced like a fori_loop's."""
    graph = _compile(build(loop), inputs()[0])
    assert "while" not in _names(graph)
    unrolled = {str(r.message) for r in graph.diagnostics if r.kind is DiagnosticKind.LOOP_UNROLLED}
    assert len(unrolled) == 1 and f"({SUBSTEPS} iterations) was unrolled" in unrolled.pop()
    assert _claims(graph) == _claims(_compile(build("twin"), inputs()[0]))


def test_a_loop_longer_than_the_cap_is_refused_with_its_name_and_the_fix(x64):
    steps = MAX_UNROLL_ITERATIONS + 1
    with pytest.raises(ValueError) as error:
        compile_etrace_graph(build("long", steps=steps), inputs()[0])
    message = str(error.value)
    assert "The `scan` loop at " in message and "loop_models.py" in message
    assert f"{steps} iterations > {MAX_UNROLL_ITERATIONS}" in message
    assert "Fix: use fewer sub-steps" in message and "BPTT" in message
    # at the cap it compiles
    graph = _compile(build("long", steps=MAX_UNROLL_ITERATIONS), inputs()[0])
    assert "scan" not in _names(graph)


def test_a_loop_touching_no_state_and_no_etp_op_stays_a_loop(x64):
    model = PreprocessCell()
    brainstate.nn.init_all_states(model)
    graph = _compile(model, inputs()[0])
    assert _names(graph).count("scan") == 1
    assert DiagnosticKind.LOOP_UNROLLED not in {r.kind for r in graph.diagnostics}
    assert _claims(graph) == {"W": "exact"}


def test_an_etp_op_in_a_loop_with_a_dynamic_trip_count_is_still_reported():
    class Dynamic(brainstate.nn.Module):
        def __init__(self):
            super().__init__()
            self.W = brainstate.ParamState(jnp.full((3, 4), 0.1))
            self.U = brainstate.ParamState(jnp.full((3, 4), 0.2))

        def init_state(self, batch_size=None, **kwargs):
            self.h = brainstate.HiddenState(jnp.zeros(4))

        def update(self, x):
            import etp_viz

            upper = 2 + (x[0] > 0).astype(jnp.int32)
            extra = jax.lax.fori_loop(
                0, upper, lambda i, c: c + etp_viz.matmul(x, self.U.value), jnp.zeros(4)
            )
            self.h.value = 0.5 * self.h.value + etp_viz.matmul(x, self.W.value) + extra
            return self.h.value

    model = Dynamic()
    brainstate.nn.init_all_states(model)
    graph = _compile(model, jnp.ones(3))
    found = [r for r in graph.diagnostics if r.kind == DiagnosticKind.PRIMITIVE_INSIDE_CONTROL_FLOW]
    assert found and "the loop is not unrolled: its trip count is not" in found[0].message
    assert _claims(graph) == {"U": "none", "W": "exact"}
