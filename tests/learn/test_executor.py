"""``ETraceGraphExecutor`` on its own: per-step outputs, x, D_f and D against the oracles.

The oracle is the model step as a pure function (``tests.oracles.PureModel``): outputs and new
states from replaying it, ``D_f = dh/dy`` and ``D = dh/dh`` from ``jax.jacfwd`` of it (float64).
``LeakyDense`` computes ``h = a*h + tanh(x W + b)``, so ``dh/db`` is diagonal with entries
``D_f`` and ``dh^t/dh^{t-1}`` is diagonal with entries ``D``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from etp_viz.learn import ETraceGraphExecutor
from tests.learn import models
from tests.oracles import PureModel, assert_tree_allclose

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

BATCH, STEPS = 2, 3
HIDDEN = ("cell", "h")
WEIGHT, BIAS = ("cell", "W"), ("cell", "b")


def _setup():
    model = models.build(models.LeakyDense, batch_size=BATCH)
    xs = models.inputs(model, STEPS, BATCH)
    executor = ETraceGraphExecutor(model)
    executor.compile_graph(xs[0])
    return model, xs, executor, PureModel(model, xs[0])


def _invals(executor, x, values):
    minfo = executor.graph.module_info
    states = [values[minfo.state_id_to_path[id(st)]] for st in minfo.compiled_model_states]
    return [x, *jax.tree.leaves(states)]


def _values_from(executor, new_states, values):
    minfo = executor.graph.module_info
    it = iter(new_states)
    new = dict(values)
    for st in minfo.compiled_model_states:
        treedef = jax.tree.structure(st.value)
        leaves = [next(it) for _ in range(treedef.num_leaves)]
        new[minfo.state_id_to_path[id(st)]] = jax.tree.unflatten(treedef, leaves)
    return new


def test_step_data_matches_the_pure_step_and_its_jacobians(x64):
    model, xs, executor, pure = _setup()
    values = pure.values()
    assert len(executor.plan.relations) == 1
    for t in range(STEPS):
        outs, new_states, data = executor.step_data(_invals(executor, xs[t], values))
        expected_values, expected_y = pure.step(values, xs[t])
        assert_tree_allclose(outs[0], expected_y, rtol=1e-12)
        assert_tree_allclose(_values_from(executor, new_states, values), expected_values, 1e-12)
        assert_tree_allclose(data["x"][0], xs[t], rtol=0.0)

        def new_hidden(bias, h, values=values, x=xs[t]):
            return pure.step({**values, BIAS: bias, HIDDEN: h}, x)[0][HIDDEN]

        bias, h = values[BIAS], values[HIDDEN]
        dh_db = jax.jacfwd(new_hidden, argnums=0)(bias, h)  # (B, H, H)
        dh_dh = jax.jacfwd(new_hidden, argnums=1)(bias, h)  # (B, H, B, H)
        expected_df = jnp.einsum("boo->bo", dh_db)[..., None]
        expected_d = jnp.einsum("bobo->bo", dh_dh)[..., None, None]
        assert_tree_allclose(data["df"][(0, 0)], expected_df, rtol=1e-12)
        assert_tree_allclose(data["dh_dh"][0], expected_d, rtol=1e-12)
        # nothing off the diagonal: the per-position blocks are the whole Jacobian here
        off = dh_dh - jnp.einsum("bo,bc,od->bocd", expected_d[..., 0, 0], np.eye(BATCH), np.eye(4))
        assert float(jnp.max(jnp.abs(off))) == 0.0
        values = expected_values


def test_plain_run_and_perturbed_step_agree_with_the_model(x64):
    _, xs, executor, pure = _setup()
    values = pure.values()
    invals = _invals(executor, xs[0], values)
    expected_values, expected_y = pure.step(values, xs[0])
    outs, new_states = executor.run(invals)
    assert_tree_allclose(outs[0], expected_y, rtol=1e-12)
    zeros = [jnp.zeros(v.aval.shape, v.aval.dtype) for v in executor.plan.hidden_outvars]
    perturbed, operands = executor.perturbed_outputs(invals, zeros)
    assert_tree_allclose(perturbed[0], expected_y, rtol=1e-12)
    assert_tree_allclose(operands[0]["weight"], values[WEIGHT], rtol=0.0)
    # dL/dp through the perturbation equals dL/dh^t of the readout (h^t -> y is linear)
    readout = values[("readout", "weight")]["weight"]
    grad_p = jax.grad(lambda p: jnp.sum(executor.perturbed_outputs(invals, p)[0][0]))(zeros)
    np.testing.assert_allclose(grad_p[0], np.broadcast_to(readout.sum(1), (BATCH, 4)), 1e-12)
