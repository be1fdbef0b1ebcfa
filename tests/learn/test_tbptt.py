"""Truncated BPTT over a window (etp_viz.learn.TruncatedBPTT) against float64 oracles.

(a) window >= sequence length, θ fixed: the per-step gradients sum to BPTT's gradient of the
summed loss; (b) window < sequence length: each step's gradient is jax.grad of that step's
loss (output and new hidden state) through an explicit unroll of the last W steps from the
recorded state, written here on the traced step (tests.oracles.PureModel), also while θ moves
between steps; (c) outputs and hidden states are the model's own; (d) one compilation under
jit, the same numbers inside a scan; (e) a live session steps and resets with it; the claims.
"""

from __future__ import annotations

import warnings

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

import etp_viz
from etp_viz.learn import TruncatedBPTT
from tests.learn import archs
from tests.learn.helpers import shared, step_loss
from tests.oracles import PureModel, bptt_gradients, relative_error

T = 7


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# -- models ----------------------------------------------------------------------------------
RNN = archs.Arch(layers=(archs.Layer(rec="dense", bias="plain"),), batch=2, seed=1)
TWO_LAYER_SPIKING = archs.Arch(
    layers=(
        archs.Layer(states=2, rec="concat", act="spike", reads="old"),
        archs.Layer(rec="leaky", cross=True),
    ),
    batch=None,
    seed=3,
)


class CellNet(brainstate.nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.cell = cell
        self.out = etp_viz.nn.Linear(4, 2)

    def update(self, x):
        return self.out(self.cell(x))


def _arch_model(arch):
    def make():
        return archs.build(arch), archs.inputs(arch, T)

    return make


def _cell_model(cell_factory, seed):
    def make():
        brainstate.random.seed(seed)
        model = CellNet(cell_factory())
        brainstate.nn.init_all_states(model)
        xs = jnp.asarray(np.random.default_rng(seed).standard_normal((T, 3)))
        return model, xs

    return make


MODELS = {
    "rnn": _arch_model(RNN),
    "gru": _cell_model(lambda: etp_viz.nn.GRUCell(3, 4), 0),
    "two_layer_spiking": _arch_model(TWO_LAYER_SPIKING),
    "lif": _cell_model(lambda: etp_viz.nn.LIF(3, 4, tau_mem=4.0, recurrent=True), 5),
}


def build(name):
    """``(model, xs)`` in float64 (call with x64 on)."""
    model, xs = MODELS[name]()
    return model, jnp.asarray(xs, jnp.float64)


def hidden_term(hidden_values):
    return 0.1 * sum(jnp.sum(jnp.sin(h)) for h in hidden_values)


def full_loss(y, hidden_values):
    """A step loss of the output and of the new hidden state (both cotangents non-zero)."""
    return step_loss(y) + hidden_term(hidden_values)


# -- drivers -----------------------------------------------------------------------------------
def learner_gradients(model, xs, window, loss=full_loss, lr=0.0):
    """Per-step gradients of ``loss(y^t, h^t)`` from the learner (one jitted step); with
    ``lr``, plain SGD on the parameters between steps."""
    alg = TruncatedBPTT(model, window=window)
    alg.compile_graph(xs[0])
    pure = PureModel(model, xs[0])
    hidden = [s for s in pure.states if not isinstance(s, brainstate.ParamState)]
    params = alg.param_states
    grad_fn = brainstate.transform.jit(
        brainstate.transform.grad(lambda x: loss(alg(x), [s.value for s in hidden]), params)
    )
    out = []
    for t in range(len(xs)):
        grads = dict(grad_fn(xs[t]))
        out.append(grads)
        if lr:
            for key, state in params.items():
                state.value = jax.tree.map(lambda p, g: p - lr * g, state.value, grads[key])
    return alg, out


def oracle_gradients(model, xs, window, loss=full_loss, lr=0.0):
    """The same, independently: the traced step as a pure function and the real trajectory
    recorded; per step, the loss's cotangents at the real output and new state, pulled back
    (``jax.vjp``) through the last ``window`` steps re-run with the current parameters from
    the recorded state (a constant). With θ fixed the re-run is the real trajectory and this
    is ``jax.grad`` of the step loss through the window."""
    pure = PureModel(model, xs[0])
    hidden_paths = [p for p in pure.paths if p not in pure.param_paths]
    values = pure.values()
    params = {p: values[p] for p in pure.param_paths}
    before, out = [], []
    for t in range(len(xs)):
        before.append(values)
        values, y = pure.step({**values, **params}, xs[t])
        cotangents = jax.grad(loss, argnums=(0, 1))(y, [values[p] for p in hidden_paths])
        first = max(0, t - window + 1)

        def rerun(params, first=first, t=t):
            v = {**before[first], **params}
            for s in range(first, t + 1):
                v, y = pure.step(v, xs[s])
            return y, [v[p] for p in hidden_paths]

        (grads,) = jax.vjp(rerun, params)[1](cotangents)
        out.append(grads)
        if lr:
            params = {k: jax.tree.map(lambda p, g: p - lr * g, params[k], grads[k]) for k in params}
    return out


def summed(grads):
    return jax.tree.map(lambda *g: sum(g), *grads)


# -- oracles and references that several tests compute on the same model and inputs, once each
@shared
def bptt_of(name):
    """BPTT's gradient of the summed step loss on ``build(name)``."""
    model, xs = build(name)
    return bptt_gradients(model, xs, lambda ys: sum(step_loss(y) for y in ys))


@shared
def window_oracle(name, window):
    """``oracle_gradients`` on ``build(name)`` with θ fixed."""
    return oracle_gradients(*build(name), window)


@shared
def learned_per_step(name, window):
    """The learner's per-step gradients on ``build(name)`` with θ fixed (the full loss)."""
    return learner_gradients(*build(name), window)[1]


# -- (a) the whole sequence in the window: BPTT ------------------------------------------------
@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("extra", [0, 3])
def test_full_window_sums_to_bptt(name, extra, x64):
    model, xs = build(name)
    expected = bptt_of(name)
    _, grads = learner_gradients(model, xs, T + extra, loss=lambda y, h: step_loss(y))
    err = relative_error(summed(grads), expected)
    assert err < 1e-10, err


def test_a_short_window_is_not_bptt(x64):
    """The truncation is real: W = 2 < T differs from BPTT on a recurrent model."""
    model, xs = build("rnn")
    expected = bptt_of("rnn")
    _, grads = learner_gradients(model, xs, 2, loss=lambda y, h: step_loss(y))
    assert relative_error(summed(grads), expected) > 1e-4


# -- (b) each step against an explicit unroll of its window -------------------------------------
@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("window", [1, 3])
def test_each_step_is_its_window_unrolled(name, window, x64):
    expected = window_oracle(name, window)
    got = learned_per_step(name, window)
    errors = [relative_error(g, e) for g, e in zip(got, expected)]
    assert max(errors) < 1e-10, errors


@pytest.mark.parametrize("name", ["rnn", "gru"])
def test_the_window_is_rerun_with_the_current_parameters(name, x64):
    """θ moves between steps (SGD): the stored states come from older θ, the unroll uses the
    current one."""
    model, xs = build(name)
    expected = oracle_gradients(model, xs, 3, lr=0.3)
    model, xs = build(name)
    _, got = learner_gradients(model, xs, 3, lr=0.3)
    errors = [relative_error(g, e) for g, e in zip(got, expected)]
    assert max(errors) < 1e-10, errors
    # the parameters did move: the last step's gradient is not the fixed-θ one
    fixed = window_oracle(name, 3)
    assert relative_error(got[-1], fixed[-1]) > 1e-4


# -- (c) the forward is the model's own --------------------------------------------------------
@pytest.mark.parametrize("name", list(MODELS))
def test_outputs_and_states_are_the_models(name, x64):
    model, xs = build(name)
    reference, _ = build(name)
    alg = TruncatedBPTT(model, window=3)
    alg.compile_graph(xs[0])
    grad_fn = brainstate.transform.jit(
        brainstate.transform.grad(
            lambda x: (step_loss(y := alg(x)), y), alg.param_states, has_aux=True
        )
    )
    hidden = {
        k: s
        for k, s in brainstate.graph.states(model).items()
        if not isinstance(s, brainstate.ParamState)
    }
    ref_hidden = {
        k: s
        for k, s in brainstate.graph.states(reference).items()
        if not isinstance(s, brainstate.ParamState)
    }
    worst = 0.0
    for t in range(T):
        x = xs[t]
        before = ravel_pytree([s.value for s, p in zip(alg._states, alg._is_param) if not p])[0]
        if t % 2:
            _, y = grad_fn(x)
        else:
            y = alg(x)  # a plain call, outside any transformation
        y_ref = reference(x)
        worst = max(worst, float(np.max(np.abs(np.asarray(y) - np.asarray(y_ref)))))
        for k, s in hidden.items():
            diff = np.abs(np.asarray(s.value) - np.asarray(ref_hidden[k].value))
            worst = max(worst, float(np.max(diff)))
        # the window's newest entries: this step's input and the state before it
        windows = alg.influence.value
        np.testing.assert_array_equal(windows["inputs"][0][-1], x)
        np.testing.assert_array_equal(windows["hidden"][-1], before)
        assert int(windows["count"]) == t + 1
    assert worst < 1e-13, worst


# -- (d) one compilation, and inside a scan ----------------------------------------------------
def test_one_compilation_and_a_scan(x64):
    window = 3
    per_step = learned_per_step("gru", window)  # (also test_each_step_is_its_window_unrolled's)

    model, xs = build("gru")
    alg = TruncatedBPTT(model, window=window)
    alg.compile_graph(xs[0])
    traces = []

    def loss(x):
        traces.append(1)
        return step_loss(alg(x))

    grad_fn = brainstate.transform.jit(brainstate.transform.grad(loss, alg.param_states))
    for t in range(T):  # the count goes 1 .. T, past the window: no retrace
        grad_fn(xs[t])
    assert len(traces) == 1 and int(alg.influence.value["count"]) == T

    model, xs = build("gru")
    alg = TruncatedBPTT(model, window=window)
    alg.compile_graph(xs[0])
    hidden = [s for s in PureModel(model, xs[0]).states if not isinstance(s, brainstate.ParamState)]

    def one(x):
        return brainstate.transform.grad(
            lambda: full_loss(alg(x), [s.value for s in hidden]), alg.param_states
        )()

    stacked = brainstate.transform.jit(lambda xs: brainstate.transform.for_loop(one, xs))(xs)
    stacked = dict(stacked)
    errors = [
        relative_error({k: jax.tree.map(lambda a, t=t: a[t], v) for k, v in stacked.items()}, g)
        for t, g in enumerate(per_step)
    ]
    assert max(errors) < 1e-12, errors
    assert int(alg.influence.value["count"]) == T


# -- (e) a live session ----------------------------------------------------------------------
@pytest.mark.slow  # heavy: runs on the 3.11 leg (make test), not the 3.12 one
def test_a_live_session_runs_and_resets():
    from etp_viz.live import Session

    task = etp_viz.tasks.get_task("sine")
    model = task.suggested_model(hidden_size=6)
    alg = TruncatedBPTT(model, window=8)
    session = Session(model, task.example_input(), task=task, algorithm=alg)
    session.step(50)
    assert session.history.num_steps == 50 and np.isfinite(session.history.loss).all()
    assert int(alg.influence.value["count"]) == 50
    session.reset()
    assert int(alg.influence.value["count"]) == 0
    assert not np.any(np.asarray(alg.influence.value["hidden"]))
    session.step(10)
    assert session.history.num_steps == 10 and np.isfinite(session.history.loss).all()


# -- claims, resets, arguments ------------------------------------------------------------------
def test_claims(x64):
    model, xs = build("rnn")
    alg = TruncatedBPTT(model, window=4)
    alg.compile_graph(xs[0])
    claims = alg.graph.gradient_claims(alg)
    assert {c.algorithm for c in claims.values()} == {"tbptt"}
    assert claims["Wo"].kind == "exact" and claims["Wo"].reason == ""
    for key in ("layers.0.Win", "layers.0.Wrec", "layers.0.b"):
        assert claims[key].kind == "approximate", key
        assert "truncated BPTT: dependencies older than W=4 steps are dropped" in (
            claims[key].reason
        )
    report = etp_viz.verify(model, xs, algorithm=TruncatedBPTT(model, window=4))
    assert not report.contradictions
    assert report["Wo"].relative_error < 1e-10


def test_claims_without_recurrence_are_exact(x64):
    """A step that forgets its state (h^t from x^t only): nothing is dropped, even at W = 1,
    and the numbers agree."""
    arch = archs.Arch(layers=(archs.Layer(rec="none"),), batch=None, seed=6)
    model, xs = archs.build(arch), archs.inputs(arch, T)
    alg = TruncatedBPTT(model, window=1)
    alg.compile_graph(xs[0])
    assert {c.kind for c in alg.graph.gradient_claims(alg).values()} == {"exact"}
    expected = bptt_gradients(model, xs, lambda ys: sum(step_loss(y) for y in ys))
    _, grads = learner_gradients(model, xs, 1, loss=lambda y, h: step_loss(y))
    assert relative_error(summed(grads), expected) < 1e-10


def test_resets_and_state_bytes(x64):
    model, xs = build("rnn")
    alg = TruncatedBPTT(model, window=5)
    alg.compile_graph(xs[0])
    for t in range(3):
        alg(xs[t])
    windows = alg.influence.value
    assert int(windows["count"]) == 3 and np.any(np.asarray(windows["hidden"]))
    # 5 x (6 hidden + 6 input) float64 and an int32 count
    assert alg.state_bytes() == 5 * (6 + 6) * 8 + 4
    alg.reset_traces()
    windows = alg.influence.value
    assert int(windows["count"]) == 0 and not np.any(np.asarray(windows["hidden"]))
    alg(xs[0])
    alg.reset_state()
    assert int(alg.influence.value["count"]) == 0
    assert np.allclose(np.asarray(model.layers[0].h.value), 0.1)  # archs' initial state
    assert model.layers[0].h.value.shape == (2, 3)  # the compiled batch size kept


@pytest.mark.parametrize(
    ("window", "error"),
    [(0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError), ("4", TypeError)],
)
def test_bad_window(window, error):
    with pytest.raises(error, match="window must be a positive integer"):
        TruncatedBPTT(archs.build(RNN), window=window)
    assert TruncatedBPTT(archs.build(RNN), window=np.int64(3)).window == 3
