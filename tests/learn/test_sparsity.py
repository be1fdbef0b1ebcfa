"""The structural Jacobian sparsity of SnAp / OSTL (etp_viz.learn.influence.sparsity).

Sound: on generated architectures (dense tanh, ReLU, diagonal, two-layer, GRU, LSTM, the
spiking sine-task model, ETP-op models) the pattern contains the non-zeros of the dense
Jacobians at many random points. Tight where it is cheap to say: a diagonal recurrence gives a
diagonal J_h, an input weight reaches one unit, layer 1 never reads layer 2. And the bug it
fixes: on the sine task's spiking model the readout's d r / d W_out[j] = spike_j is zero at most
points, a sampled pattern dropped it and SnAp-2 claimed exact with a relative error of 0.0375;
now verify() finds no contradiction and SnAp at the closed depth is RTRL step by step.
"""

from __future__ import annotations

import warnings

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
from etp_viz.learn.influence.patterns import step_patterns as _patterns
from etp_viz.learn.influence.sparsity import jacobian_sparsity
from tests.learn import archs

POINTS = 12


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# -- models ----------------------------------------------------------------------------------
class Plain(brainstate.nn.Module):
    """Small recurrent nets with plain ``jnp`` ops (no ETP primitive)."""

    def __init__(self, kind: str, n_in: int = 3, n: int = 4, seed: int = 0):
        super().__init__()
        rng = np.random.default_rng(seed)

        def param(*shape):
            return brainstate.ParamState(jnp.asarray(0.7 * rng.standard_normal(shape)))

        self.kind, self.n = kind, n
        self.Win = param(n_in, n)
        if kind in ("tanh", "relu", "stack"):
            self.Wrec = param(n, n)
        if kind == "tanh":
            self.b = param(n)
        if kind == "diag":
            self.decay = param(n)
        if kind == "stack":
            self.W2, self.R2 = param(n, n), param(n, n)
        self.Wo = param(n, 2)

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.zeros(self.n))
        if self.kind == "stack":
            self.h2 = brainstate.HiddenState(jnp.zeros(self.n))

    def update(self, x):
        h = self.h.value
        if self.kind == "tanh":
            self.h.value = jnp.tanh(x @ self.Win.value + h @ self.Wrec.value + self.b.value)
        elif self.kind == "relu":
            self.h.value = jax.nn.relu(x @ self.Win.value + h @ self.Wrec.value)
        elif self.kind == "diag":
            self.h.value = self.decay.value * h + jnp.tanh(x @ self.Win.value)
        else:  # a two-layer stack: layer 2 reads layer 1's new value
            self.h.value = jnp.tanh(x @ self.Win.value + h @ self.Wrec.value)
            self.h2.value = jnp.tanh(self.h.value @ self.W2.value + self.h2.value @ self.R2.value)
            return self.h2.value @ self.Wo.value
        return self.h.value @ self.Wo.value


def plain(kind):
    model = Plain(kind)
    brainstate.nn.init_all_states(model)
    return model


def cell(make):
    with brainstate.random.seed_context(0):
        model = etp_viz.tasks.RecurrentNet(make(), etp_viz.nn.Linear(4, 2))
    return brainstate.nn.init_all_states(model)


def sine_model(hidden_size=32):
    return etp_viz.tasks.get_task("sine").suggested_model(hidden_size=hidden_size)


MODELS = {
    "tanh": lambda: plain("tanh"),
    "relu": lambda: plain("relu"),
    "diag": lambda: plain("diag"),
    "stack": lambda: plain("stack"),
    "gru": lambda: cell(lambda: etp_viz.nn.GRUCell(3, 4)),
    "lstm": lambda: cell(lambda: etp_viz.nn.LSTMCell(3, 4)),
    "spiking_sine": lambda: sine_model(12),
    "etp_spike_stack": lambda: archs.build(
        archs.Arch(
            layers=(
                archs.Layer(states=2, rec="concat", act="spike", reads="old"),
                archs.Layer(rec="mix", cross=True, bias="plain"),
            ),
            batch=2,
            seed=3,
        )
    ),
}


def compiled(model):
    alg = etp_viz.RTRL(model)
    x0 = jnp.zeros(model.rnn.in_size if hasattr(model, "rnn") else 3)
    if isinstance(model, archs.ArchNet) and model.arch.batch is not None:
        x0 = jnp.zeros((model.arch.batch, archs.N))
    alg.compile_graph(x0)
    return alg


def hidden_rows(alg) -> dict:
    """``{state name: rows of the flat h}``."""
    rows, start = {}, 0
    path_of = {id(s): ".".join(map(str, p)) for p, s in brainstate.graph.states(alg.model).items()}
    for state, is_param in zip(alg._states, alg._is_param):
        if not is_param:
            size = int(np.size(state.value))
            rows[path_of[id(state)]] = np.arange(start, start + size)
            start += size
    return rows


def columns(alg, prefix) -> np.ndarray:
    """The parameter columns of the leaves whose dotted path starts with ``prefix``."""
    cols = [np.arange(a, b) for k, (a, b) in alg.param_columns().items() if k.startswith(prefix)]
    return np.concatenate(cols)


def numeric_union(alg, points=POINTS):
    """The union of the dense Jacobians' non-zeros at random points (random inputs too)."""

    def jac(t, h, x):
        def fn(t, h):
            return alg.pure_step(t, h, x)[0]

        return jax.jacfwd(fn, argnums=1)(t, h) != 0, jax.jacfwd(fn, argnums=0)(t, h) != 0

    jac = jax.jit(jac)
    theta, hidden = alg._theta_vec, alg._hidden_vec
    (x0,) = alg._example
    union_h = np.zeros((alg.num_hidden, alg.num_hidden), bool)
    union_t = np.zeros((alg.num_hidden, alg.num_params), bool)
    rng = np.random.default_rng(7)
    for point in range(points):
        spread = (0.3, 1.0, 3.0)[point % 3]
        t = theta + 0.2 * spread * rng.standard_normal(theta.shape)
        h = hidden + spread * rng.standard_normal(hidden.shape)
        x = x0 + spread * rng.standard_normal(x0.shape)
        dh, dt = jac(t, h, x)
        union_h |= np.asarray(dh)
        union_t |= np.asarray(dt)
    return union_h, union_t


# -- (1) soundness ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(MODELS))
def test_the_structural_pattern_contains_every_sampled_non_zero(name, x64):
    alg = compiled(MODELS[name]())
    fallbacks: set = set()
    reach_theta, reach_h = jacobian_sparsity(
        lambda t, h: alg.pure_step(t, h, *alg._example)[0],
        alg._theta_vec,
        alg._hidden_vec,
        fallbacks=fallbacks,
    )
    assert not fallbacks, fallbacks  # every primitive of these models has a precise rule
    num_h, num_t = numeric_union(alg)
    assert not (num_h & ~reach_h).any() and not (num_t & ~reach_theta).any()
    # smooth, generic weights: nothing structural is zero at every point (the pattern is tight)
    if name in ("tanh", "diag", "stack", "gru", "lstm"):
        assert (num_h == reach_h).all() and (num_t == reach_theta).all()


# -- (2) tightness ---------------------------------------------------------------------------
def test_a_diagonal_recurrence_has_a_diagonal_jh(x64):
    alg = compiled(plain("diag"))
    reach_h, reach_theta = _patterns(alg)
    assert (reach_h == np.eye(alg.num_hidden, dtype=bool)).all()
    decay = columns(alg, "decay")
    assert (reach_theta[:, decay] == np.eye(4, dtype=bool)).all()


def test_an_input_weight_reaches_one_unit(x64):
    alg = compiled(plain("tanh"))
    reach_h, reach_theta = _patterns(alg)
    assert reach_h.all()  # a dense recurrence
    w_in = columns(alg, "Win")
    assert (reach_theta[:, w_in].sum(axis=0) == 1).all()
    # W_in[i, j] (row-major) drives unit j
    assert (reach_theta[:, w_in].argmax(axis=0) == np.tile(np.arange(4), 3)).all()
    assert not reach_theta[:, columns(alg, "Wo")].any()  # the readout is no state


def test_layer_one_never_reads_layer_two(x64):
    alg = compiled(plain("stack"))
    reach_h, reach_theta = _patterns(alg)
    rows = hidden_rows(alg)
    one, two = rows["h"], rows["h2"]
    assert not reach_h[np.ix_(one, two)].any() and reach_h[np.ix_(two, one)].all()
    assert not reach_theta[np.ix_(one, columns(alg, "W2"))].any()
    assert not reach_theta[np.ix_(one, columns(alg, "R2"))].any()
    assert reach_theta[np.ix_(two, columns(alg, "Win"))].any(axis=0).all()
    snap1 = etp_viz.SnAp(plain("stack"), n=1)
    snap1.compile_graph(jnp.zeros(3))
    assert snap1.depth == 2  # W_rec[i, j] drives h1_j in one step, every unit in two


def test_the_spiking_readout_reads_every_spike(x64):
    """The bug: d r / d W_out[j] = spike_j is structural, even where no spike fired."""
    alg = compiled(sine_model())
    reach_h, reach_theta = _patterns(alg)
    rows = hidden_rows(alg)
    (readout,) = [r for k, r in rows.items() if k.startswith("readout")]
    lif = np.concatenate([r for k, r in rows.items() if not k.startswith("readout")])
    assert reach_theta[np.ix_(readout, columns(alg, "readout"))].all()
    assert not reach_h[np.ix_(lif, readout)].any()  # the readout does not feed back


# -- rules one by one ------------------------------------------------------------------------
def _superset(fn, *args, points=4):
    """The pattern of ``fn``'s Jacobian w.r.t. its arguments, checked against jacfwd."""
    fallbacks: set = set()
    pattern = jacobian_sparsity(fn, *args, fallbacks=fallbacks)
    rng = np.random.default_rng(0)
    for _ in range(points):
        point = [a + rng.standard_normal(a.shape) for a in args]
        jacs = jax.jacfwd(fn, argnums=tuple(range(len(args))))(*point)
        for p, j in zip(pattern, jacs):
            assert not ((np.asarray(j).reshape(p.shape) != 0) & ~p).any()
    return pattern, fallbacks


def test_rules(x64):
    v, m = jnp.arange(1.0, 7.0), jnp.ones((2, 3))
    (p,), fb = _superset(lambda v: jnp.cumsum(v[::-1])[::2], v)
    assert not fb and (p == np.eye(6, dtype=bool)[::-1].cumsum(0).astype(bool)[::2]).all()
    (p,), fb = _superset(lambda v: jnp.take(v, jnp.array([4, -1])), v)  # folded indices
    assert not fb and (p.sum(axis=1) == 1).all() and p[0, 4] and p[1, 5]
    (p,), fb = _superset(lambda v: jnp.take(v, jnp.argmax(v)) * v, v)  # data-dependent
    assert not fb and p.all()  # the index may be any position
    (p,), fb = _superset(lambda m: jnp.einsum("bi,bj->bij", m, m).sum(-1), m)
    assert not fb and (p == np.kron(np.eye(2), np.ones((3, 3))).astype(bool)).all()
    (p,), fb = _superset(lambda v: jax.lax.scan(lambda c, a: (c * a, c), 1.0, v)[1], v)
    assert "scan" in fb and p.all()
    (p,), fb = _superset(lambda v: jax.lax.cond(v[0] > 0, jnp.sin, jnp.flip, v), v)
    assert not fb and (p == (np.eye(6) + np.eye(6)[::-1]).astype(bool)).all()
    (p,), fb = _superset(lambda v: jnp.pad(jax.checkpoint(jnp.sin)(v[1:3]), 1), v)
    assert not fb and p[1, 1] and p[2, 2] and p.sum() == 2


def test_a_gather_pattern_does_not_depend_on_the_ids(x64):
    """Token ids are an input: unit j of ``table[id]`` reads the column ``table[:, j]`` for
    every id (was: only the example's row, so later rows were missed)."""
    table = jnp.arange(12.0).reshape(4, 3)
    for ids in (jnp.asarray(0), jnp.asarray(3)):
        (p,) = jacobian_sparsity(lambda t, i: jnp.take(t, i, axis=0), table, inputs=(ids,))
        assert (p == np.tile(np.eye(3, dtype=bool), (1, 4))).all()
    # a constant index is still read as it is
    (p,) = jacobian_sparsity(lambda t: jnp.take(t, 2, axis=0), table)
    assert p.sum() == 3 and (p[:, 6:9] == np.eye(3, dtype=bool)).all()
    v = jnp.arange(5.0)
    (p,), fb = _superset(lambda v: jax.lax.dynamic_slice(v, (jnp.argmax(v),), (2,)), v)
    assert not fb and p.all()


def test_a_scatter_with_known_indices_keeps_its_structure(x64):
    """``y.at[cols].add(c)`` (SparseLinear's product): output k reads the operand's k and
    the updates scattered into k only (was: everything)."""
    cols = np.array([0, 2, 2, 4])

    def fn(y, c):
        return y.at[cols].add(c)

    (py, pc), fb = _superset(fn, jnp.ones(5), jnp.ones(4))
    assert not fb and (py == np.eye(5, dtype=bool)).all()
    assert (pc == (np.arange(5)[:, None] == cols[None, :])).all()


def test_a_custom_jvp_is_read_through_its_rule(x64):
    """The tangent program is analysed: a surrogate that couples elements is seen, although
    the primal (a comparison) carries no derivative at all."""

    @jax.custom_jvp
    def step(v):
        return (v > 0).astype(v.dtype)

    step.defjvp(lambda primals, tangents: (step(primals[0]), jnp.sum(tangents[0]) + 0 * primals[0]))
    (p,), _ = _superset(step, jnp.arange(3.0))
    assert p.all()


def test_a_size_bound_coarsens_soundly(x64):
    w, h = jnp.ones((3, 3)), jnp.ones(3)
    with pytest.warns(UserWarning, match="size bound"):
        warnings.simplefilter("always")
        coarse = jacobian_sparsity(lambda w, h: jnp.tanh(h @ w) * h, w, h, max_entries=8 * 12)
    exact = jacobian_sparsity(lambda w, h: jnp.tanh(h @ w) * h, w, h)
    for c, e in zip(coarse, exact):
        assert (c | ~e).all()
    # the spiking model with its parameters' dependency rows over the bound: coarser, sound
    alg = compiled(sine_model(12))

    def fn(t, h):
        return alg.pure_step(t, h, *alg._example)[0]

    coarse = jacobian_sparsity(fn, alg._theta_vec, alg._hidden_vec, max_entries=8 * 5000)
    exact = jacobian_sparsity(fn, alg._theta_vec, alg._hidden_vec)
    for c, e in zip(coarse, exact):
        assert (c | ~e).all() and c.sum() >= e.sum()
    assert coarse[0].sum() > exact[0].sum()


# -- (3), (4) the sine task under verify ------------------------------------------------------
@pytest.fixture(scope="module")
def sine_data():
    task = etp_viz.tasks.get_task("sine")
    data = [task.step_data(t) for t in range(12)]
    return task, np.stack([d[0] for d in data]), np.stack([d[1] for d in data])


LEARNERS = {
    "snap1": lambda m: etp_viz.SnAp(m, n=1),
    "snap2": lambda m: etp_viz.SnAp(m, n=2),
    "snap3": lambda m: etp_viz.SnAp(m, n=3),
    "ostl": etp_viz.OSTLRecurrent,
}


@pytest.mark.parametrize("name", list(LEARNERS))
def test_no_contradictions_on_the_spiking_sine_task(name, sine_data, x64):
    task, xs, ys = sine_data
    model = task.suggested_model()
    report = etp_viz.verify(model, xs, ys, algorithm=LEARNERS[name](model), loss=task.loss)
    assert not report.contradictions, report.table()
    if name not in ("snap1", "ostl"):  # SnAp-2 and deeper are at the closed depth
        assert report["rnn.W.weight"].relative_error < 1e-10
    else:  # OSTL: the leaky readout state is a layer of its own, which rnn.W feeds only
        # through the spikes' new value: its effect on the readout's future is dropped
        assert report["rnn.W.weight"].claim == "approximate"
    if name == "ostl":
        assert report["readout.W.weight"].relative_error < 1e-10
    for row in report.rows:
        assert row.claim != "exact" or row.relative_error < 1e-10


def _per_step_gradients(alg, task, xs, ys):
    alg.compile_graph(jnp.asarray(xs[0]))
    grad = brainstate.transform.jit(
        brainstate.transform.grad(lambda x, y: task.loss(alg(x), y), alg.param_states)
    )
    return [jax.tree.leaves(dict(grad(jnp.asarray(x), jnp.asarray(y)))) for x, y in zip(xs, ys)]


def test_snap_at_the_closed_depth_is_rtrl_step_by_step(sine_data, x64):
    task, xs, ys = sine_data
    probe = etp_viz.SnAp(task.suggested_model(), n=1)
    probe.compile_graph(jnp.asarray(xs[0]))
    snap = _per_step_gradients(etp_viz.SnAp(task.suggested_model(), n=probe.depth), task, xs, ys)
    rtrl = _per_step_gradients(etp_viz.RTRL(task.suggested_model()), task, xs, ys)
    assert probe.depth == 2
    for got, want in zip(snap, rtrl):
        for g, w in zip(got, want):
            assert np.abs(np.asarray(g) - np.asarray(w)).max() <= 1e-10 * max(
                1.0, np.abs(np.asarray(w)).max()
            )
    assert any(np.abs(np.asarray(w)).max() > 0 for step in rtrl for w in step)


def test_an_etp_primitive_is_entered_through_its_impl(x64):
    """Where an ETP primitive itself carries dependencies (a tangent rule that re-binds it,
    as braintrace's do), its ``impl`` is traced: ``x @ W`` row by row, not all-to-all."""
    from etp_viz.learn.influence.sparsity import _Analysis

    x, w = jnp.ones((2, 3)), jnp.ones((3, 4))
    closed = jax.make_jaxpr(etp_viz.matmul)(x, w)
    assert any(e.primitive.name.startswith("etp") for e in closed.jaxpr.eqns)
    analysis = _Analysis(18, 10**8)
    (out,) = analysis.run(
        closed.jaxpr,
        closed.consts,
        [analysis.identity((2, 3), 0), analysis.identity((3, 4), 6)],
        [None, None],
    )
    bits = np.unpackbits(out.reshape(8, -1), axis=-1, count=18, bitorder="little").astype(bool)
    assert not analysis.fallbacks
    for b in range(2):
        for j in range(4):
            expected = np.zeros(18, bool)
            expected[3 * b : 3 * b + 3] = True  # x[b, :]
            expected[6 + j : 18 : 4] = True  # W[:, j]
            assert (bits[4 * b + j] == expected).all()
