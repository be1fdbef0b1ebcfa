"""Models written with braintrace (the reference library) compile and learn in etp_viz.

``etp_viz.ops.braintrace_adapter`` adopts braintrace's ETP primitives by identity, with rules that
call braintrace's own registered rule functions. These tests check, on braintrace-built models,
that etp_viz finds the same relations as braintrace's compiler and that ``etp_viz.D_RTRL``
gives braintrace's ``D_RTRL`` gradients (and BPTT's where D-RTRL is exact), in float64.

braintrace 0.2.8 needs Python >= 3.12 (``pip install 'etp_viz[braintrace]'``): on the 3.11 leg
the whole module is skipped.
"""

from __future__ import annotations

import functools
import sys
import warnings

import pytest

braintrace = pytest.importorskip(
    "braintrace",
    reason="braintrace is not installed (the optional extra etp_viz[braintrace], Python >= 3.12)",
)

import brainstate  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import etp_viz  # noqa: E402
from etp_viz import ops  # noqa: E402
from etp_viz.ops.braintrace_adapter import (  # noqa: E402
    braintrace_primitives,
    register_braintrace_primitives,
    unregister_braintrace_primitives,
)
from tests.learn.test_peer_differences import (  # noqa: E402
    DENSE_MASK,
    GROUPED_MASK,
    ProcessedLeaky,
)
from tests.oracles import bptt_gradients, relative_error  # noqa: E402

# braintrace's own compiler builds jaxprs without a DebugInfo (jax deprecation, not ours)
pytestmark = pytest.mark.filterwarnings("ignore:core.Jaxpr is missing a DebugInfo")

BATCH, STEPS = 4, 6
RTOL = 1e-12  # float64: the two libraries evaluate the same rules in a different order


class GRUNet(brainstate.nn.Module):
    """The issue's model: ``braintrace.nn.GRUCell(3, 8) -> braintrace.nn.Linear(8, 2)``."""

    def __init__(self):
        super().__init__()
        self.rnn = braintrace.nn.GRUCell(3, 8)
        self.out = braintrace.nn.Linear(8, 2)

    def update(self, x):
        return self.out(self.rnn(x))


class VanillaRNNNet(brainstate.nn.Module):
    """``braintrace.nn.ValinaRNNCell`` (its h -> h path crosses only the ETP matmul: D = 0)."""

    def __init__(self):
        super().__init__()
        self.rnn = braintrace.nn.ValinaRNNCell(3, 8, activation="tanh")
        self.out = braintrace.nn.Linear(8, 2)

    def update(self, x):
        return self.out(self.rnn(x))


class LeakyLIFNet(brainstate.nn.Module):
    """A LIF-style layer from braintrace ops (``braintrace.nn`` has no LIF in 0.2.8): a leaky
    membrane with a soft reset, a learnable per-unit leak through ``braintrace.element_wise``
    and a smooth spike read out by ``braintrace.nn.Linear``. Its recurrence is element-wise,
    so D-RTRL equals BPTT."""

    def __init__(self, n_in=3, n=8):
        super().__init__()
        self.n = n
        self.inp = braintrace.nn.Linear(n_in, n)
        self.tau = brainstate.ParamState(jnp.linspace(-1.0, 1.0, n))
        self.out = braintrace.nn.Linear(n, 2)

    def init_state(self, batch_size=None, **kwargs):
        self.v = brainstate.HiddenState(jnp.zeros((batch_size, self.n)))

    def update(self, x):
        decay = braintrace.element_wise(self.tau.value, weight_fn=jax.nn.sigmoid)
        v = self.v.value
        self.v.value = decay * (v - jax.nn.sigmoid(4.0 * (v - 1.0))) + self.inp(x)
        return self.out(jax.nn.sigmoid(4.0 * (self.v.value - 1.0)))


class LeakyNet(brainstate.nn.Module):
    """A leaky integrator ``v = sigmoid(decay) * v + layer(x)`` around one braintrace layer, for
    the primitives with their own trace layout (LoRA's effective-weight trace, conv's
    per-position trace: braintrace's ``instant_drtrl`` / ``solve_drtrl`` rules)."""

    def __init__(self, layer, shape):
        super().__init__()
        self.layer, self.shape = layer, shape
        self.decay = brainstate.ParamState(jnp.full(shape[-1], 0.3))

    def init_state(self, batch_size=None, **kwargs):
        self.v = brainstate.HiddenState(jnp.zeros((batch_size, *self.shape)))

    def update(self, x):
        decay = braintrace.element_wise(self.decay.value, weight_fn=jax.nn.sigmoid)
        self.v.value = decay * self.v.value + self.layer(x)
        return jnp.tanh(self.v.value)


MODELS = {
    "gru": GRUNet,
    "vanilla_rnn": VanillaRNNNet,
    "lif": LeakyLIFNet,
    "lora": lambda: LeakyNet(braintrace.nn.LoRA(3, 2, 8), (8,)),
    "conv": lambda: LeakyNet(braintrace.nn.Conv1d((6, 3), 4, 3, padding="SAME"), (6, 4)),
    "grouped": lambda: LeakyNet(braintrace.nn.GroupedLinear(2, 3, 4, b_init=None), (2, 4)),
}
#: models whose recurrence is element-wise: D-RTRL is exact (equals BPTT)
EXACT = ("lif", "lora", "conv", "grouped")
INPUT_SHAPES = {"conv": (6, 3), "grouped": (2, 3)}
#: models on which braintrace 0.2.8's ES_D_RTRL raises (see test_braintrace_es_d_rtrl_raises_...)
BRAINTRACE_ES_RAISES = ("conv", "grouped")


@pytest.fixture(scope="module", autouse=True)
def _forget_braintrace_primitives_afterwards():
    """The adoption is process-wide: leave etp_viz's registry as the other tests expect it."""
    yield
    unregister_braintrace_primitives()


@pytest.fixture
def f64():
    """float64 model parameters and inputs (brainstate's precision switches jax x64 too)."""
    with brainstate.environ.context(precision=64):
        yield


def _make(name):
    brainstate.random.seed(0)
    model = MODELS[name]()
    brainstate.nn.init_all_states(model, batch_size=BATCH)
    return model


def _inputs(name="gru"):
    shape = INPUT_SHAPES.get(name, (3,))
    return jax.random.normal(jax.random.PRNGKey(1), (STEPS, BATCH, *shape))


def _quiet(fn, *args):
    """braintrace warns about weights it treats as non-temporal (readouts): expected here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return fn(*args)


def _online_gradients(algorithm_class, model, xs):
    """Sum over t of ``grad(sum(alg(x_t) ** 2))`` w.r.t. the model's ParamStates."""
    alg = algorithm_class(model)
    _quiet(alg.compile_graph, xs[0])
    params = model.states(brainstate.ParamState)
    grad_step = brainstate.transform.grad(lambda x: jnp.sum(alg(x) ** 2), params)
    # one compiled step instead of an eager dispatch per op (the conv model's were seconds)
    grad_step = brainstate.transform.jit(grad_step)
    total = None
    for t in range(len(xs)):
        grads = dict(grad_step(xs[t]))
        total = grads if total is None else jax.tree.map(jnp.add, total, grads)
    return total


def _our_d_rtrl_gradients(name):
    """etp_viz's D-RTRL gradients on model ``name`` (seeded, so the same in every test): computed
    once per model and precision for the two tests that compare them, with braintrace's and
    with BPTT's; fresh containers each call (the arrays are immutable)."""
    grads = _our_d_rtrl_gradients_cached(name, brainstate.environ.get_precision())
    return jax.tree.map(lambda leaf: leaf, grads)


@functools.cache
def _our_d_rtrl_gradients_cached(name, precision):
    return _online_gradients(etp_viz.D_RTRL, _make(name), _inputs(name))


def _relations(graph):
    """``{(primitive, trainable key -> path): hidden paths per group}`` of a compiled graph."""
    out = {}
    for rel in graph.hidden_param_op_relations:
        key = (rel.primitive, tuple(sorted(rel.trainable_paths.items())))
        out[key] = sorted(tuple(sorted(g.hidden_paths)) for g in rel.hidden_groups)
    return out


def test_adoption_is_lazy(f64):
    unregister_braintrace_primitives()
    plain = etp_viz.nn.MiniGRU(3, 4)
    brainstate.nn.init_all_states(plain)
    _quiet(etp_viz.compile_etrace_graph, plain, jnp.zeros(3))
    assert braintrace_primitives() == ()  # an etp_viz model adopts nothing
    _quiet(etp_viz.compile_etrace_graph, _make("gru"), _inputs()[0])
    assert sys.modules["braintrace._op"].etp_mm_p in braintrace_primitives()


def test_adapter_adopts_braintrace_primitives_by_identity():
    register_braintrace_primitives()
    registry = sys.modules["braintrace._op"]
    adopted = set(braintrace_primitives())
    assert set(registry.ETP_PRIMITIVES) <= adopted
    for primitive in registry.ETP_PRIMITIVES:
        assert ops.is_etp_primitive(primitive)
        spec = ops.get_primitive_spec(primitive)
        assert spec is not None and spec.name == primitive.name
        assert ops.is_batched_primitive(primitive) == (primitive in registry.BATCHED_PRIMITIVES)
        assert ops.is_etp_enable_gradient_primitive(primitive) == (
            primitive in registry.GRADIENT_ENABLED_PRIMITIVES
        )
        assert ops.get_x_invar_index(primitive) == registry.get_x_invar_index(primitive)
    # etp_viz's own primitives are distinct objects, untouched
    assert ops.etp_mm_p is not registry.etp_mm_p and ops.etp_mm_p not in adopted
    assert register_braintrace_primitives() == ()  # idempotent


@pytest.mark.parametrize("name", sorted(MODELS))
def test_same_relations_as_braintrace(name, f64):
    x0 = _inputs(name)[0]
    ours = _quiet(etp_viz.compile_etrace_graph, _make(name), x0)
    theirs = _quiet(braintrace.compile_etrace_graph, _make(name), x0)
    assert _relations(ours), "no relation found: braintrace primitives not recognised"
    assert _relations(ours) == _relations(theirs)
    assert sorted(sorted(g.hidden_paths) for g in ours.hidden_groups) == sorted(
        sorted(g.hidden_paths) for g in theirs.hidden_groups
    )
    unused = [r.weight_path for r in ours.diagnostics if r.kind.value == "param_not_used_by_etp"]
    assert unused == []


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("algorithm", ["D_RTRL", "ES_D_RTRL"])
def test_online_gradients_equal_braintrace(name, algorithm, f64):
    xs = _inputs(name)
    if algorithm == "D_RTRL":
        ours, theirs_class = _our_d_rtrl_gradients(name), braintrace.D_RTRL
    else:
        if name in BRAINTRACE_ES_RAISES:
            pytest.skip(
                "braintrace 0.2.8's ES_D_RTRL raises on this model (an element-wise weight of "
                "shape (C,) broadcast over a (B, *spatial, C) hidden group): nothing to compare "
                "with; test_braintrace_es_d_rtrl_raises_on_a_leaky_multi_axis_layer"
            )
        ours = _online_gradients(lambda m: etp_viz.ES_D_RTRL(m, 0.9), _make(name), xs)
        theirs_class = lambda m: braintrace.ES_D_RTRL(m, 0.9)  # noqa: E731
    theirs = _online_gradients(theirs_class, _make(name), xs)
    assert set(ours) == set(theirs)
    for path in theirs:
        leaves = jax.tree.leaves(ours[path])
        assert all(leaf.dtype == jnp.float64 for leaf in leaves), path
        assert any(float(jnp.max(jnp.abs(leaf))) > 0 for leaf in leaves) or path == (
            "rnn",
            "Wr",
            "weight",
        ), path
        assert relative_error(ours[path], theirs[path]) <= RTOL, path


@pytest.mark.parametrize("name", EXACT)
def test_d_rtrl_on_element_wise_braintrace_models_equals_bptt(name, f64):
    xs = _inputs(name)
    ours = _our_d_rtrl_gradients(name)
    exact = bptt_gradients(_make(name), xs, lambda ys: jnp.sum(ys**2))
    for path, value in exact.items():
        assert relative_error(ours[path], value) <= 1e-10, path


@pytest.mark.parametrize("name", ["gru", "lif", "conv"])
def test_view_of_a_braintrace_model_builds(name, f64):
    from etp_viz.view import build_view_model

    graph = _quiet(etp_viz.compile_etrace_graph, _make(name), _inputs(name)[0])
    assert build_view_model(graph).check_references() == []


def test_show_a_braintrace_model(f64):
    pytest.importorskip("anywidget", reason="etp_viz.show needs the explorer extra")
    explorer = _quiet(etp_viz.show, _make("gru"), _inputs()[0])
    assert explorer is not None


# -- where braintrace 0.2.8 differs from the referee (docs/semantics.md, "Where we differ from
# braintrace"; the etp_viz side of each is in tests/learn/test_peer_differences.py) -----------


def _processed_leaky(kind):
    """The model of ``tests/learn/test_peer_differences.py`` written with braintrace's ops
    (``W * mask``, a masked ``grouped_matmul`` block weight, ``2 * W`` before the primitive)."""
    return ProcessedLeaky(kind, ops=braintrace)


def _make_processed(kind):
    brainstate.random.seed(0)
    model = _processed_leaky(kind)
    brainstate.nn.init_all_states(model, batch_size=BATCH)
    return model


@pytest.mark.parametrize(
    ("kind", "measured"), [("mask", 0.373), ("grouped_mask", 0.395), ("scale", 0.5)]
)
def test_braintrace_gives_the_processed_operand_gradient_not_the_param_gradient(
    kind, measured, f64
):
    """braintrace 0.2.8's D-RTRL returns the gradient w.r.t. the primitive's weight operand
    (``W * mask``, ``2 * W``) as the ``ParamState``'s, without the pull-back through the
    processing: masked-out entries get a gradient, a scaled weight half of it. BPTT (D-RTRL is
    exact here) and etp_viz agree; braintrace's relative error is the measured one (float64).
    braintrace's own ``nn.Linear(w_mask=...)`` passes the mask as ``weight_fn`` and is right."""
    xs = jax.random.normal(
        jax.random.PRNGKey(1), (STEPS, BATCH, *((2, 3) if "grouped" in kind else (3,)))
    )
    exact = bptt_gradients(_make_processed(kind), xs, lambda ys: jnp.sum(ys**2))[("W",)]
    theirs = _online_gradients(braintrace.D_RTRL, _make_processed(kind), xs)[("W",)]
    ours = _online_gradients(etp_viz.D_RTRL, _make_processed(kind), xs)[("W",)]
    assert relative_error(ours, exact) <= 1e-10
    assert relative_error(theirs, exact) == pytest.approx(measured, abs=5e-3)
    if kind == "scale":
        assert relative_error(2.0 * theirs, exact) <= 1e-12  # the operand's gradient, exactly
    else:
        mask = GROUPED_MASK if kind == "grouped_mask" else DENSE_MASK
        assert relative_error(theirs * mask, exact) <= 1e-12  # right on the mask
        assert float(jnp.max(jnp.abs(theirs * (1 - mask)))) > 1.0  # BPTT: exactly 0 there


@pytest.mark.parametrize("name", BRAINTRACE_ES_RAISES)
def test_braintrace_es_d_rtrl_raises_on_a_leaky_multi_axis_layer(name, f64):
    """A learnable ``(C,)`` leak (``braintrace.element_wise``) broadcast over a conv's
    ``(B, L, C)`` or a grouped layer's ``(B, G, O)`` hidden state: braintrace 0.2.8's
    ``ES_D_RTRL`` raises (it compares the leak's output shape ``(C,)`` with the hidden group's);
    etp_viz's, on the same braintrace model, follows the ES-D-RTRL recursion written out in
    ``tests/learn/test_peer_differences.py`` (kernel and leak)."""
    from tests.learn.test_peer_differences import (
        ALPHA,
        conv1d_same,
        es_d_rtrl_reference,
        grouped_product,
    )

    xs = _inputs(name)
    with pytest.raises(ValueError, match="shape of the hidden states should be the same"):
        _online_gradients(lambda m: braintrace.ES_D_RTRL(m, ALPHA), _make(name), xs)
    model = _make(name)
    weight, decay = model.layer.weight.value["weight"], model.decay.value
    layer_fn = conv1d_same if name == "conv" else grouped_product
    want_w, want_d = es_d_rtrl_reference(layer_fn, weight, decay, xs)
    ours = _online_gradients(lambda m: etp_viz.ES_D_RTRL(m, ALPHA), model, xs)
    assert relative_error(ours[("layer", "weight")]["weight"], want_w) <= 1e-10
    assert relative_error(ours[("decay",)], want_d) <= 1e-10


class LSTMNet(brainstate.nn.Module):
    """``braintrace.nn.LSTMCell(3, 8) -> braintrace.nn.Linear(8, 2)``."""

    def __init__(self):
        super().__init__()
        self.rnn = braintrace.nn.LSTMCell(3, 8)
        self.out = braintrace.nn.Linear(8, 2)

    def update(self, x):
        return self.out(self.rnn(x))


def test_braintrace_counts_the_lstm_in_step_path_twice_and_etp_viz_once(f64):
    """One step of an LSTM (``h = o * tanh(c)``, ``c`` new in the same step): D-RTRL is exact.
    braintrace 0.2.8's D-RTRL gives twice BPTT's gradient on ``Wi`` and ``Wg`` (the ``c -> h``
    path through the trace and again through ``c``'s learning signal); etp_viz's equals BPTT
    (docs/semantics.md, "Where we differ from braintrace")."""
    xs = jax.random.normal(jax.random.PRNGKey(1), (1, BATCH, 3))
    grads = {}
    for lib in (braintrace, etp_viz):
        brainstate.random.seed(0)
        model = LSTMNet()
        brainstate.nn.init_all_states(model, batch_size=BATCH)
        truth = bptt_gradients(model, xs, lambda ys: jnp.sum(ys**2))
        grads[lib.__name__] = _online_gradients(lib.D_RTRL, model, xs)
    for weight in ("Wi", "Wg"):
        key = ("rnn", weight, "weight")
        online = jax.tree.leaves(grads["braintrace"][key])[0]
        reference = jax.tree.leaves(truth[key])[0]
        assert float(jnp.max(jnp.abs(reference))) > 1e-3
        assert relative_error(online, 2 * reference) < 1e-12
        assert relative_error(jax.tree.leaves(grads["etp_viz"][key])[0], reference) < 1e-12
