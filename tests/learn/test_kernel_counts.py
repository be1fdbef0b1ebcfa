"""Structural: with the accelerator strategy (``fan_in_strategy() == "gather"``, the default off
CPU) the compiled D-RTRL step of a tanh RNN and of ``SparseLIF`` holds no while loop whose trip
count is the fan-in (the fixed fan-in product and its weight correlation are one gather +
reduction pass, not ``fan_in`` sequential passes); on CPU the default is the loop, measured
4-5x faster there (``etp_viz.ops.patterns.fan_in_strategy``). Kernels are counted from the
optimised HLO text by ``bench/sparse_kernels.py``'s :func:`count_kernels`, the helper the
benchmark reports with; the first test checks that it sees such a loop."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import brainstate
import jax
import jax.numpy as jnp
import pytest

import etp_viz

FAN_IN = 7
_PATH = Path(__file__).resolve().parents[2] / "bench" / "sparse_kernels.py"
_SPEC = importlib.util.spec_from_file_location("bench_sparse_kernels", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
sparse_kernels = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sparse_kernels)


def _entry_whiles(fn, *args) -> list:
    return sparse_kernels.compiled_kernels(jax.jit(fn), *args)["module_while_trip_counts"]


def test_counter_sees_a_fan_in_loop():
    def looped(x):
        return jax.lax.fori_loop(0, FAN_IN, lambda k, acc: acc * 0.5 + x, x)

    assert FAN_IN in _entry_whiles(looped, jnp.ones(10))


class Net(brainstate.nn.Module):
    def __init__(self, kind: str):
        super().__init__()
        if kind == "rnn":
            self.cell = etp_viz.nn.ValinaRNNCell(3, 20)
        else:
            self.cell = etp_viz.nn.SparseLIF(3, 50, fan_in=FAN_IN, event_driven=kind == "lif-ev")
        self.out = etp_viz.nn.Linear(self.cell.out_size[0], 2)

    def update(self, x):
        return self.out(self.cell(x))


def _drtrl_counts(kind):
    model = Net(kind)
    brainstate.nn.init_all_states(model, batch_size=4)
    x = jnp.ones((4, 3))
    learner = etp_viz.D_RTRL(model)
    learner.compile_graph(x)
    step = brainstate.transform.grad(lambda x: jnp.sum(learner(x) ** 2), learner.param_states)
    return sparse_kernels.compiled_kernels(brainstate.transform.jit(step), x)


def test_the_strategy_follows_the_backend_and_cpu_keeps_the_loop(monkeypatch):
    from etp_viz.ops import patterns as sparse

    expected = "loop" if jax.default_backend() == "cpu" else "gather"
    assert sparse.fan_in_strategy() == expected
    monkeypatch.setattr(sparse, "FAN_IN_STRATEGY", "loop")
    assert FAN_IN in _drtrl_counts("lif")["module_while_trip_counts"]


@pytest.mark.parametrize("kind", ["rnn", "lif", "lif-ev"])
def test_drtrl_step_has_no_fan_in_loop(kind, monkeypatch):
    from etp_viz.ops import patterns as sparse

    monkeypatch.setattr(sparse, "FAN_IN_STRATEGY", "gather")
    counts = _drtrl_counts(kind)
    assert FAN_IN not in counts["module_while_trip_counts"], counts
    assert counts["fusions"] > 0, counts


def test_both_strategies_give_the_same_product_and_correlation(monkeypatch):
    import numpy as np

    from etp_viz.ops import patterns as sparse

    pattern = sparse.FixedFanIn(40, fan_in=FAN_IN, seed=3)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(2, 3, 40)))  # two leading axes
    data = jnp.asarray(rng.normal(size=pattern.nnz))
    signal = jnp.asarray(rng.normal(size=(2, 3, 40)))
    out = {}
    for strategy in ("loop", "gather"):
        monkeypatch.setattr(sparse, "FAN_IN_STRATEGY", strategy)
        maps = (pattern.product(x, data), pattern.correlate(x, signal, 2))
        out[strategy] = (*maps, pattern.gather_inputs(x))
    for a, b in zip(out["loop"], out["gather"]):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    rows, cols = pattern.to_rows_cols()
    dense = np.zeros((40, 40))
    np.add.at(dense, (rows, cols), np.asarray(data))
    np.testing.assert_allclose(np.asarray(out["loop"][0]), np.asarray(x) @ dense, rtol=1e-4)


@pytest.mark.parametrize("algorithm", ["d_rtrl", "es_d_rtrl"])
def test_every_strategy_gives_the_same_online_gradients(algorithm, monkeypatch):
    """A spiking SparseLIF network's per-step gradients over five steps: the gather against the
    loop."""
    import numpy as np

    from etp_viz.learn.registry import resolve
    from etp_viz.ops import patterns as sparse

    xs = jax.random.normal(jax.random.PRNGKey(0), (5, 3, 3)) * 30.0
    grads = {}
    for strategy in ("loop", "gather"):
        monkeypatch.setattr(sparse, "FAN_IN_STRATEGY", strategy)
        brainstate.random.seed(1)
        model = Net("lif")
        brainstate.nn.init_all_states(model, batch_size=3)
        learner = resolve(model, algorithm, {})
        learner.compile_graph(xs[0])
        step = brainstate.transform.grad(
            lambda x, learner=learner: jnp.sum(learner(x) ** 2), learner.param_states
        )
        grads[strategy] = [step(x) for x in xs]
    flat = {k: np.concatenate([np.ravel(a) for g in v for a in jax.tree.leaves(g)])
            for k, v in grads.items()}  # fmt: skip
    assert np.abs(flat["loop"]).max() > 0
    np.testing.assert_allclose(flat["gather"], flat["loop"], rtol=2e-4, atol=1e-5)


def test_drtrl_trace_update_reads_the_inputs_without_a_synapse_sized_copy(monkeypatch):
    """Under the gather, the D-RTRL step of SparseLIF holds no ``(B, nnz)`` concatenate of the
    shifted inputs (on the GPU a kernel of its own, writing and re-reading 2 x 320 MB per step
    at 100k neurons); the loop's form keeps it (so the check can see one)."""
    from etp_viz.ops import patterns as sparse

    def copies(strategy):
        monkeypatch.setattr(sparse, "FAN_IN_STRATEGY", strategy)
        model = Net("lif")
        brainstate.nn.init_all_states(model, batch_size=4)
        x = jnp.ones((4, 3))
        learner = etp_viz.D_RTRL(model)
        learner.compile_graph(x)
        step = brainstate.transform.grad(lambda x: jnp.sum(learner(x) ** 2), learner.param_states)
        text = brainstate.transform.jit(step).lower(x).compile().as_text()
        nnz = 50 * FAN_IN
        return [ln for ln in text.splitlines() if " concatenate(" in ln and f",{nnz}]" in ln]

    assert copies("loop"), "the check no longer sees the loop's concatenate"
    assert not copies("gather")
