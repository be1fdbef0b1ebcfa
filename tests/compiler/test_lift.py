"""Lifting plain ops (issue 32): ``compile_etrace_graph(model, x, lift=True)`` rewrites each
plain op on a parameter (``x @ W``, ``W * h``, ``y + b``, ``conv``, ``einsum``) into the ETP
op computing it, so the graph equals the one of the model's twin written with
``etp_viz.ops`` / ``etp_viz.nn``: the same relations, the same claims. Ops that do not lift
say why. Gradients: ``tests/learn/test_lift_learning.py``."""

from __future__ import annotations

import warnings

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import saiunit

import etp_viz
from etp_viz.compiler import DiagnosticKind, DiagnosticLevel, compile_etrace_graph
from etp_viz.compiler.lift import lifted_text

#: the learners whose claims the compiled graph derives (compared between twins)
CLAIM_LEARNERS = ("d_rtrl", "es_d_rtrl", "eprop")


class Body(brainstate.nn.Module):
    """``h = tanh(body(self, x, h))`` with the given ParamStates (float64 values)."""

    def __init__(self, body, params, hidden_shape, readout=None):
        super().__init__()
        for name, value in params.items():
            setattr(self, name, brainstate.ParamState(jnp.asarray(value)))
        self.body, self.hidden_shape, self.readout = body, hidden_shape, readout

    def init_state(self, *args, **kwargs):
        self.h = brainstate.HiddenState(jnp.full(self.hidden_shape, 0.1))

    def update(self, x):
        self.h.value = jnp.tanh(self.body(self, x, self.h.value))
        return self.h.value if self.readout is None else self.readout(self, self.h.value)


class LinearRNN(brainstate.nn.Module):
    """A leaky RNN: ``Linear`` in, ``h @ W + b`` recurrence, a gain, ``Linear`` out. ``plain``
    writes it with brainstate / jnp, else with etp_viz.nn / etp_viz.ops (its twin)."""

    def __init__(self, plain: bool, seed: int = 0):
        super().__init__()
        rng = np.random.default_rng(seed)
        layer = brainstate.nn.Linear if plain else etp_viz.nn.Linear
        self.plain = plain
        self.inp = layer(3, 4)
        self.out = layer(4, 2)
        for lin, (n_in, n_out) in ((self.inp, (3, 4)), (self.out, (4, 2))):
            lin.weight.value = {
                "weight": jnp.asarray(0.5 * rng.standard_normal((n_in, n_out))),
                "bias": jnp.asarray(0.2 * rng.standard_normal(n_out)),
            }
        self.W = brainstate.ParamState(jnp.asarray(0.4 * rng.standard_normal((4, 4))))
        self.b = brainstate.ParamState(jnp.asarray(0.1 * rng.standard_normal(4)))
        self.g = brainstate.ParamState(jnp.asarray(rng.uniform(0.3, 0.9, 4)))

    def init_state(self, batch_size=None, **kwargs):
        shape = (4,) if batch_size is None else (batch_size, 4)
        self.h = brainstate.HiddenState(jnp.full(shape, 0.1))

    def update(self, x):
        h = self.h.value
        if self.plain:
            rec = h @ self.W.value + self.b.value
            leak = self.g.value * h
        else:
            rec = etp_viz.matmul(h, self.W.value, self.b.value)
            leak = etp_viz.element_wise(self.g.value) * h
        self.h.value = leak + jnp.tanh(self.inp(x) + rec)
        return self.out(self.h.value)


def compile_quiet(model, x, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compile_etrace_graph(model, x, **options)


def relation_signature(graph) -> list:
    """Per relation what a learner consumes: the primitive, its trainable leaves by key, the
    hidden paths it drives and how, the shapes of ``x`` and ``y``."""
    out = []
    for rel in graph.hidden_param_op_relations:
        keys = tuple(
            (k, rel.trainable_paths[k], rel.trainable_leaf_indices[k], rel.trainable_is_leaf[k])
            for k in sorted(rel.trainable_paths)
        )
        out.append(
            (
                rel.primitive.name,
                keys,
                tuple(sorted(map(tuple, rel.connected_hidden_paths))),
                tuple(sorted(rel.path_classification.items())),
                None if rel.x_var is None else tuple(rel.x_var.aval.shape),
                tuple(rel.y_var.aval.shape),
                rel.tail_position_preserving,
            )
        )
    return sorted(out, key=repr)


def claim_kinds(graph) -> dict:
    return {
        name: {k: (c.kind, c.online, c.readout) for k, c in graph.gradient_claims(name).items()}
        for name in CLAIM_LEARNERS
    }


def assert_twins(lifted, twin) -> None:
    assert relation_signature(lifted) == relation_signature(twin)
    assert claim_kinds(lifted) == claim_kinds(twin)
    assert lifted.weight_status == twin.weight_status


@pytest.mark.parametrize("batch", [None, 2])
def test_a_plain_brainstate_rnn_equals_its_etp_twin(x64, batch):
    x = jnp.ones(3) if batch is None else jnp.ones((batch, 3))
    plain, twin = LinearRNN(plain=True), LinearRNN(plain=False)
    for model in (plain, twin):
        brainstate.nn.init_all_states(model, batch_size=batch)
    lifted = compile_quiet(plain, x, lift=True)
    assert_twins(lifted, compile_quiet(twin, x))
    sources = {op.source for op in lifted.module_info.lifting.lifted}
    assert sources == {
        "x @ inp.weight + inp.weight.bias",
        "x @ W + b",
        "g * x",
        "x @ out.weight + out.weight.bias",
    }
    assert lifted.module_info.lifting.not_lifted == ()
    # the same step: outputs and new states on random states and inputs
    unlifted = compile_quiet(plain, x).module_info
    rng = np.random.default_rng(1)
    states = [
        jax.tree.map(lambda v: jnp.asarray(rng.standard_normal(v.shape)), s.value)
        for s in unlifted.compiled_model_states
    ]
    x_val = jnp.asarray(rng.standard_normal(x.shape))
    want = unlifted.jaxpr_call(states, x_val)
    got = lifted.module_info.jaxpr_call(states, x_val)
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-14, atol=1e-14)


def test_without_lift_nothing_changes(x64):
    model = LinearRNN(plain=True)
    brainstate.nn.init_all_states(model)
    default = compile_quiet(model, jnp.ones(3))
    off = compile_quiet(model, jnp.ones(3), lift=False)
    assert str(default.module_info.jaxpr) == str(off.module_info.jaxpr)
    assert default.module_info.lifting is None
    assert default.hidden_param_op_relations == ()
    kinds = {r.kind for r in default.diagnostics}
    assert not kinds & {DiagnosticKind.OP_LIFTED, DiagnosticKind.OP_NOT_LIFTED}
    claims = default.gradient_claims("d_rtrl")
    assert claims["W"].kind == "none" and "feeds no ETP primitive" in claims["W"].reason


def test_models_written_with_etp_ops_are_left_alone(x64):
    class Net(brainstate.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = etp_viz.nn.GRUCell(3, 4)
            self.out = etp_viz.nn.Linear(4, 2)

        def update(self, x):
            return self.out(self.rnn(x))

    model = Net()
    brainstate.nn.init_all_states(model)
    lifted = compile_quiet(model, jnp.ones(3), lift=True)
    plain = compile_quiet(model, jnp.ones(3))
    assert lifted.module_info.lifting == ((), ()), lifted.module_info.lifting
    assert str(lifted.module_info.jaxpr) == str(plain.module_info.jaxpr)
    assert relation_signature(lifted) == relation_signature(plain)


RNG = np.random.default_rng(0)
DN = ("NWC", "WIO", "NWC")


def _conv_plain(s, x, h):
    y = jax.lax.conv_general_dilated(x, s.K.value, (1,), "SAME", dimension_numbers=DN)
    return y + s.b.value + 0.5 * h


def _conv_twin(s, x, h):
    y = etp_viz.conv(x, s.K.value, s.b.value, strides=(1,), padding="SAME", dimension_numbers=DN)
    return y + 0.5 * h


#: name -> (plain body, twin body, params, hidden shape, example input, lifted sources)
TWINS = {
    "conv with a bias": (
        _conv_plain,
        _conv_twin,
        {"K": RNG.normal(size=(3, 2, 4)), "b": RNG.normal(size=4)},
        (2, 5, 4),
        jnp.ones((2, 5, 2)),
        {"conv(x, K) + b"},
    ),
    "einsum with a batch axis": (
        lambda s, x, h: jnp.einsum("gi,gio->go", x, s.W.value) + 0.5 * h,
        lambda s, x, h: etp_viz.einsum("gi,gio->go", x, s.W.value) + 0.5 * h,
        {"W": RNG.normal(size=(2, 3, 4))},
        (2, 4),
        jnp.ones((2, 3)),
        {"einsum('ab,abe->ae', x, W)"},
    ),
    "W @ x and V.T @ h": (
        lambda s, x, h: s.W.value @ x + s.V.value.T @ h,
        lambda s, x, h: etp_viz.matmul(x, s.W.value.T) + etp_viz.matmul(h, s.V.value),
        {"W": RNG.normal(size=(4, 3)), "V": RNG.normal(size=(4, 4))},
        (4,),
        jnp.ones(3),
        {"W @ x", "V.T @ x"},
    ),
    "a weight through softplus and a mask": (
        lambda s, x, h: x @ (jax.nn.softplus(s.W.value) * MASK) + h,
        lambda s, x, h: etp_viz.matmul(x, jax.nn.softplus(s.W.value) * MASK) + h,
        {"W": RNG.normal(size=(3, 4))},
        (4,),
        jnp.ones(3),
        {"x @ f(W)"},
    ),
    "a batched product inside a jit": (
        lambda s, x, h: jax.jit(jnp.matmul)(x, s.W.value) + h,
        lambda s, x, h: etp_viz.matmul(x, s.W.value) + h,
        {"W": RNG.normal(size=(3, 4))},
        (2, 4),
        jnp.ones((2, 3)),
        {"x @ W"},
    ),
    "sigmoid gain, a bias per batch entry": (
        lambda s, x, h: jax.nn.sigmoid(s.a.value) * h + s.c.value + x,
        lambda s, x, h: (
            (etp_viz.element_wise(s.a.value, jax.nn.sigmoid) * h + etp_viz.element_wise(s.c.value))
            + x
        ),
        {"a": RNG.normal(size=4), "c": RNG.normal(size=(2, 4))},
        (2, 4),
        jnp.ones((2, 4)),
        {"f(a) * x", "x + c"},
    ),
}
MASK = (RNG.uniform(size=(3, 4)) > 0.3).astype(np.float64)


@pytest.mark.parametrize("name", list(TWINS))
def test_lifted_ops_equal_their_etp_twins(x64, name):
    plain, twin, params, hidden, x, sources = TWINS[name]
    params = {k: jnp.asarray(v, jnp.float64) for k, v in params.items()}
    graphs = []
    for body, lift in ((plain, True), (twin, False)):
        model = Body(body, params, hidden)
        brainstate.nn.init_all_states(model)
        graphs.append(compile_quiet(model, jnp.asarray(x, jnp.float64), lift=lift))
    lifted, wired = graphs
    assert_twins(lifted, wired)
    assert {op.source for op in lifted.module_info.lifting.lifted} == sources
    assert lifted.hidden_param_op_relations, "nothing was lifted into a relation"
    # a model already written with ETP ops: lift=True finds nothing to do
    model = Body(twin, params, hidden)
    brainstate.nn.init_all_states(model)
    assert compile_quiet(model, jnp.asarray(x, jnp.float64), lift=True).module_info.lifting == (
        (),
        (),
    )


def test_each_lifted_op_is_an_info_record_at_its_etp_equation(x64):
    model = LinearRNN(plain=True)
    brainstate.nn.init_all_states(model)
    graph = compile_quiet(model, jnp.ones(3), lift=True)
    report = graph.module_info.lifting
    records = [r for r in graph.diagnostics if r.kind is DiagnosticKind.OP_LIFTED]
    assert len(records) == len(report.lifted) == 4
    for op, record in zip(report.lifted, records):
        eqn = graph.module_info.jaxpr.eqns[op.eqn_index]
        assert eqn.primitive.name == op.primitive == record.context["lifted_into"]
        assert record.context["eqn_indices"] == (op.eqn_index,)
        assert record.level is DiagnosticLevel.INFO
        assert f"`{op.source}`" in record.message
        assert report.lifted_at(op.eqn_index) == op
    rec = next(op for op in report.lifted if op.source == "x @ W + b")
    assert rec.replaced == ("dot_general", "add")
    assert lifted_text(rec) == "lifted from `x @ W + b` (etp_viz.matmul)"
    gain = next(op for op in report.lifted if op.primitive == "etp_elemwise")
    assert lifted_text(gain) == "lifted from `g * x` (etp_viz.element_wise)"
    assert graph.verdicts("d_rtrl")[("W",)].status == "online"


def _refused(body, params, x, hidden=(4,)):
    model = Body(body, {k: jnp.asarray(v, jnp.float64) for k, v in params.items()}, hidden)
    brainstate.nn.init_all_states(model)
    return compile_quiet(model, x, lift=True)


REFUSALS = {
    # a row lookup lifts (tests/learn/test_lift_library_layers.py); a column lookup does not
    "an embedding lookup": (
        lambda s, x, h: jnp.take(s.E.value, x.astype(jnp.int32), axis=1).sum(1) + h,
        {"E": RNG.normal(size=(4, 5))},
        "E",
        "gather(x, E)",
        "a lookup `W[ids]` is an embedding: use etp_viz.embedding(ids, W)",
    ),
    "a weight chosen at run time": (
        lambda s, x, h: jnp.where(h > 0, s.V.value, 0.0) + x @ jnp.ones((3, 4)),
        {"V": RNG.normal(size=4)},
        "V",
        "select_n(x, V)",
        "a weight chosen by a runtime condition is not a fixed weight operand",
    ),
    "a weight concatenated with the state": (
        lambda s, x, h: jnp.concatenate([h, s.V.value])[2:6] + x @ jnp.ones((3, 4)),
        {"V": RNG.normal(size=4)},
        "V",
        "concatenate(x, V)",
        "a weight concatenated with runtime values is not a fixed weight operand",
    ),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_ops_that_do_not_lift_say_why(x64, name):
    body, params, weight, source, reason = REFUSALS[name]
    graph = _refused(body, params, jnp.ones(3))
    (miss,) = graph.module_info.lifting.not_lifted
    assert (miss.source, miss.reason, miss.leaves) == (source, reason, (((weight,), 0),))
    (record,) = [r for r in graph.diagnostics if r.kind is DiagnosticKind.OP_NOT_LIFTED]
    assert record.level is DiagnosticLevel.WARNING and record.weight_path == (weight,)
    assert record.context["eqn_indices"] == (miss.eqn_index,)
    eqn = graph.module_info.jaxpr.eqns[miss.eqn_index]
    assert eqn.primitive.name == miss.primitive
    expected = f"ParamState {weight}: `{source}` ({miss.primitive}) was not lifted: {reason}."
    # a change to try (the op's line is named where jax kept it: tests/learn/test_zoo.py)
    assert "etp_viz.what_if(model, x, change=" in record.message
    for learner in CLAIM_LEARNERS:
        claim = graph.gradient_claims(learner)[weight]
        assert claim.kind == "none" and claim.reason.startswith(expected), claim.reason
    verdict = graph.verdicts("d_rtrl")[(weight,)]
    assert verdict.status == "not_learned" and verdict.reason.startswith(expected)


def test_the_refusal_is_raised_as_a_warning_naming_the_op(x64):
    body, params, *_ = REFUSALS["an embedding lookup"]
    model = Body(body, {k: jnp.asarray(v) for k, v in params.items()}, (4,))
    brainstate.nn.init_all_states(model)
    with pytest.warns(UserWarning, match=r"`gather\(x, E\)` \(gather\) was not lifted"):
        compile_etrace_graph(model, jnp.ones(3), lift=True)


def test_a_bias_not_along_the_output_axis_is_not_fused(x64):
    """``x @ W + C`` with ``C`` of the output's shape: ``C`` is an element-wise parameter."""
    graph = _refused(
        lambda s, x, h: x @ s.W.value + s.C.value + h,
        {"W": RNG.normal(size=(3, 4)), "C": RNG.normal(size=(2, 4))},
        jnp.ones((2, 3)),
        hidden=(2, 4),
    )
    ops = {(op.primitive, op.source) for op in graph.module_info.lifting.lifted}
    assert ops == {("etp_mm", "x @ W"), ("etp_elemwise", "x + C")}
    claims = graph.gradient_claims("d_rtrl")
    assert claims["W"].kind == claims["C"].kind == "exact"


def test_mixed_dtypes_are_cast_like_the_plain_product():
    """A float32 weight applied to a float64 input (``preferred_element_type=float64``): the
    lifted product casts both, as the plain one computed."""
    previous = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    try:
        graph = _refused(
            lambda s, x, h: x @ s.W.value.astype(jnp.float32) + h,
            {"W": RNG.normal(size=(3, 4))},
            jnp.ones(3, jnp.float64),
        )
    finally:
        jax.config.update("jax_enable_x64", previous)
    (op,) = graph.module_info.lifting.lifted
    assert op.primitive == "etp_mv"
    assert graph.gradient_claims("d_rtrl")["W"].kind == "exact"


class _LibraryLayer(brainstate.nn.Module):
    """brainstate's SparseLinear on a batch (saiunit's csr_matmat: no lifting rule yet) as the
    recurrent map."""

    def __init__(self):
        super().__init__()
        dense = np.where(np.arange(16).reshape(4, 4) % 3 == 0, 0.3, 0.0)
        self.rec = brainstate.nn.SparseLinear(saiunit.sparse.CSR.fromdense(dense))

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.zeros((batch_size, 4)))

    def update(self, x):
        self.h.value = jnp.tanh(x + self.rec(self.h.value))
        return self.h.value


def test_an_op_in_a_library_layer_names_both_lines_and_offers_a_what_if():
    model = _LibraryLayer()
    brainstate.nn.init_all_states(model, batch_size=2)
    graph = compile_quiet(model, jnp.ones((2, 4)), lift=True)
    reason = graph.gradient_claims("d_rtrl")["rec.weight"].reason
    assert "was not lifted" in reason and "csr_matmat" in reason
    # the library's line, then the user's line that called it
    assert "saiunit" in reason and "called from" in reason and "test_lift.py:" in reason
    # no advice to rewrite a layer the user did not write: a what-if instead
    assert "Write it with" not in reason and "etp_viz.what_if(model, x" in reason
