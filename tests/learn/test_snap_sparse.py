"""SnAp's and OSTL's influence stored sparsely (``etp_viz.learn.influence.tiles``): only the
pattern's entries, as dense tiles, updated with Jacobian entries from compressed JVPs / VJPs
(``etp_viz.learn.influence.colouring``). The oracle is the dense masked influence (the same
learner with ``storage="dense"``): gradients and influence equal to 1e-12 in float64, step
by step, on a GRU, a LIF layer, a leaky tanh RNN, two-layer stacks and batches; the compressed
Jacobians against ``jax.jacfwd``; the stored bytes against the pattern's size."""

from __future__ import annotations

import warnings

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
from etp_viz import _compat
from etp_viz.learn.contract import learner_bytes
from etp_viz.learn.influence import colouring
from etp_viz.learn.influence.colouring import Linearised, SparseJacobian, colour_lines
from etp_viz.learn.influence.sparsity import jacobian_sparsity
from tests.learn import archs, influence_models
from tests.learn.helpers import online_gradients

STEPS = 6
RTOL = 1e-12


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


class Readout(brainstate.nn.Module):
    def __init__(self, cell, size):
        super().__init__()
        self.cell = cell
        self.out = etp_viz.nn.Linear(size, 2)

    def update(self, x):
        return self.out(self.cell(x))


def _cell(make, batch):
    def build():
        brainstate.random.seed(0)
        model = make()
        brainstate.nn.init_all_states(model, batch_size=batch)
        return model

    def inputs():
        shape = (STEPS, batch, 3) if batch else (STEPS, 3)
        return jnp.asarray(np.random.default_rng(1).standard_normal(shape))

    return build, inputs


def _arch(arch):
    return (lambda: archs.build(arch)), (lambda: archs.inputs(arch, STEPS))


def _named(name):
    return (lambda: influence_models.build(name)), (
        lambda: influence_models.example(name, STEPS)[1]
    )


MODELS = {
    "gru_batch3": _cell(lambda: Readout(etp_viz.nn.GRUCell(3, 5), 5), 3),
    "lif_batch2": _cell(lambda: Readout(etp_viz.nn.LIF(3, 5, recurrent=True), 5), 2),
    "leaky_tanh_batch2": _arch(archs.Arch(layers=(archs.Layer(rec="leaky"),), batch=2, seed=4)),
    "dense_rnn_batch2": _arch(archs.Arch(layers=(archs.Layer(rec="dense"),), batch=2, seed=1)),
    "spiking_stack": _arch(
        archs.Arch(
            layers=(
                archs.Layer(states=2, rec="concat", act="spike", reads="old"),
                archs.Layer(rec="leaky", cross=True),
            ),
            seed=3,
        )
    ),
    "stack_new_state": _named("stack_new"),
    "sparse_ring": _named("sparse_ring"),
    "while_loop": _named("while"),  # no reverse mode: every Jacobian entry by JVPs
}
LEARNERS = {
    "snap1": lambda m, storage: etp_viz.SnAp(m, 1, storage=storage),
    "snap2": lambda m, storage: etp_viz.SnAp(m, 2, storage=storage),
    "ostl": lambda m, storage: etp_viz.OSTLRecurrent(m, storage=storage),
}


def _run(model_name, learner_name, storage):
    build, inputs = MODELS[model_name]
    xs = inputs()
    alg = LEARNERS[learner_name](build(), storage)
    alg.compile_graph(xs[0])
    sums = online_gradients(alg, xs, checkpoints=range(1, STEPS + 1))
    return alg, sums


def _relative(a, b) -> float:
    num = sum(float(np.sum((np.asarray(x) - np.asarray(y)) ** 2)) for x, y in zip(a, b))
    den = sum(float(np.sum(np.asarray(y) ** 2)) for y in b)
    return float(np.sqrt(num / max(den, 1e-300)))


@pytest.mark.parametrize("learner_name", list(LEARNERS))
@pytest.mark.parametrize("model_name", list(MODELS))
def test_sparse_influence_equals_the_dense_masked_one(model_name, learner_name, x64):
    sparse, got = _run(model_name, learner_name, "sparse")
    dense, expected = _run(model_name, learner_name, "dense")
    assert sparse.tiles is not None and dense.tiles is None
    for t in expected:
        flat_got, flat_expected = jax.tree.leaves(got[t]), jax.tree.leaves(expected[t])
        assert _relative(flat_got, flat_expected) < RTOL, (t, model_name, learner_name)
    held, reference = sparse.dense_influence(), dense.dense_influence()
    assert np.abs(reference).max() > 0
    assert np.abs(np.asarray(held) - np.asarray(reference)).max() <= RTOL * np.abs(reference).max()
    # nothing kept off the pattern, and the tiles hold the pattern's entries exactly once
    assert not np.asarray(held)[~np.asarray(sparse.pattern)].any()
    assert sparse.tiles.stored_entries >= int(np.asarray(sparse.pattern).sum())


def test_auto_storage_keeps_tiles_where_they_save_memory(x64):
    """SnAp-1 on a batched GRU: a third of the entries (the reset gate's weights reach every
    unit of their batch element), in tiles; SnAp-2 there is RTRL's full pattern: dense."""
    build, inputs = MODELS["gru_batch3"]
    x0 = inputs()[0]
    snap1 = etp_viz.SnAp(build(), 1)
    snap1.compile_graph(x0)
    full = snap1.num_hidden * snap1.num_params
    itemsize = snap1.theta_vec.dtype.itemsize
    assert snap1.tiles is not None
    assert snap1.tiles.stored_entries == int(np.asarray(snap1.pattern).sum()) < 0.5 * full
    assert learner_bytes(snap1)["influence"] == snap1.tiles.stored_entries * itemsize
    snap2 = etp_viz.SnAp(build(), 2)
    snap2.compile_graph(x0)
    assert snap2.tiles is None and learner_bytes(snap2)["influence"] == full * itemsize


def test_a_custom_vjp_spike_takes_vjps_only(x64):
    """A ``custom_vjp`` spike on the h -> h path has no forward mode: the tiles take every
    entry by VJPs, the dense storage its ``J_h`` by ``jax.jacrev`` (its ``jacfwd`` raised
    before); at the coupling depth SnAp is exact, so BPTT is the oracle of both."""
    from tests.learn.helpers import step_loss
    from tests.oracles import bptt_gradients

    arch = archs.Arch(layers=(archs.Layer(act="vjp", rec="dense"),), batch=2, seed=5)
    xs = archs.inputs(arch, STEPS)
    expected = bptt_gradients(archs.build(arch), xs, lambda ys: sum(step_loss(y) for y in ys))
    flat_expected = [leaf for p in expected for leaf in jax.tree.leaves(expected[p])]
    for storage in ("sparse", "dense"):
        alg = etp_viz.SnAp(archs.build(arch), 2, storage=storage)
        alg.compile_graph(xs[0])
        assert alg.exact and alg.reverse_only
        if storage == "sparse":
            assert not alg.tiles.jac_h.forward
            assert not any(g.jac_theta.forward for g in alg.tiles.groups)
        got = online_gradients(alg, xs)
        flat_got = [leaf for p in expected for leaf in jax.tree.leaves(got[p])]
        assert _relative(flat_got, flat_expected) < 1e-10, storage


def test_bad_storage_names_the_valid_ones():
    with pytest.raises(ValueError, match="storage must be one of"):
        etp_viz.SnAp(MODELS["gru_batch3"][0](), 1, storage="csr")


def test_the_sparse_step_holds_no_hidden_by_parameter_array(monkeypatch, x64):
    """The gradient step of sparse SnAp-1 on a batched GRU has no array as large as the dense
    influence (no dense ``J_θ``, ``J_h M`` or mask); the dense one has several. The VJPs run
    in batches of at most ``CHUNK_ENTRIES`` results (made small here, as on a large model)."""
    monkeypatch.setattr(colouring, "CHUNK_ENTRIES", 4 * 147)
    build, inputs = MODELS["gru_batch3"]
    x0 = inputs()[0]

    def largest(storage):
        alg = etp_viz.SnAp(build(), 1, storage=storage)
        alg.compile_graph(x0)
        step = brainstate.transform.grad(lambda x: jnp.sum(alg(x) ** 2), alg.param_states)
        function = _compat.get_stateful_function_class()(step, return_only_write=False)
        function.make_jaxpr(x0)
        jaxpr = _compat.split_closed_jaxpr(function.get_jaxpr(x0))[0]
        return _largest_var(jaxpr), alg.num_hidden * alg.num_params

    sparse, full = largest("sparse")
    dense, _ = largest("dense")
    assert full == 15 * 147 and dense >= full > sparse


def _largest_var(jaxpr) -> int:
    size = 0
    for eqn in jaxpr.eqns:
        for var in eqn.outvars:
            size = max(size, int(np.prod(getattr(var.aval, "shape", ()))))
        for value in eqn.params.values():
            for item in value if isinstance(value, tuple | list) else (value,):
                if isinstance(item, _compat.Jaxpr | _compat.ClosedJaxpr):
                    size = max(size, _largest_var(_compat.split_closed_jaxpr(item)[0]))
    return size


# -- the compressed Jacobian --------------------------------------------------------------------
def _banded_step(theta, h):
    """A step whose Jacobians are sparse and structured: a ring of neighbours, per-unit
    weights, and a batch of two that never mixes."""
    w = theta[:8].reshape(2, 4)
    gain = theta[8:]
    ring = jnp.roll(h, 1, axis=-1) + jnp.roll(h, -1, axis=-1)
    return jnp.tanh(w[:1] * h + gain * ring + w[1:] * ring**2).reshape(-1)


@pytest.mark.parametrize("modes", [(True, False), (False, True), (True, True)])
def test_compressed_entries_equal_the_dense_jacobian(modes, x64):
    theta = jnp.asarray(np.random.default_rng(0).standard_normal(12))
    h = jnp.asarray(np.random.default_rng(1).standard_normal((2, 4)))
    for fn, x in (
        (lambda t: _banded_step(t, h), theta),
        (lambda v: _banded_step(theta, v.reshape(h.shape)), h.reshape(-1)),
    ):
        reach = jacobian_sparsity(fn, x)[0]
        dense = np.asarray(jax.jacfwd(fn)(x))
        rows, cols = np.arange(reach.shape[0]), np.arange(reach.shape[1])
        plan = SparseJacobian(reach, reach, rows, cols, *reach.shape, *modes)
        assert plan.count < reach.shape[1 - int(not plan.forward)]  # it compressed
        got = plan.entries(plan.compressed(Linearised(fn, x)), rows[None, :], cols[None, :])[0]
        # the needed entries only: an entry off them reads another line's sum
        np.testing.assert_allclose(
            np.where(reach, got, 0.0), np.where(reach, dense, 0.0), atol=1e-15
        )


def test_the_pattern_read_in_column_passes_is_the_whole_one(monkeypatch, x64):
    """Past ``MAX_COLUMNS`` inputs the pattern is read in passes (a GRU of 128 units at batch
    8 had its 55,680 parameters' pattern coarsened to full): the passes' columns are the
    whole's, never coarser."""
    from etp_viz.learn.influence import sparsity

    build, inputs = MODELS["gru_batch3"]
    alg = etp_viz.SnAp(build(), 1, storage="dense")
    alg.compile_graph(inputs()[0])

    def pattern():
        return jacobian_sparsity(
            lambda t, h: alg.pure_step(t, h, *alg.example_args)[0],
            alg.theta_vec,
            alg.hidden_vec,
        )

    whole = pattern()
    monkeypatch.setattr(sparsity, "MAX_COLUMNS", 16)
    for got, expected in zip(pattern(), whole):
        assert (got == expected).all()
    assert 0 < whole[0].mean() < 0.5  # SnAp-1's pattern on a batched GRU is sparse


def test_colouring_never_puts_conflicting_lines_together():
    rng = np.random.default_rng(3)
    for _ in range(20):
        reach = rng.random((12, 30)) < 0.2
        needed = reach & (rng.random(reach.shape) < 0.7)
        colour, count = colour_lines(needed, reach)
        assert count == len(set(colour[colour >= 0]))
        assert ((colour >= 0) == (needed & reach).any(axis=0)).all()
        for c in range(count):
            lines = np.flatnonzero(colour == c)
            for k in lines:
                others = reach[:, lines[lines != k]].any(axis=1)
                assert not (needed[:, k] & others).any()
