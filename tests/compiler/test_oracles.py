"""Jacobians of the compiled pieces against derivatives of the whole step (float64)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from etp_viz.compiler import PathClassification, compile_etrace_graph
from etp_viz.compiler._jaxpr import all_inputs
from etp_viz.ops import matmul

from .models import CoupledPlain, TwoLayerRNN, cells, init

ATOL = 1e-10


def _step_values(graph, x):
    minfo = graph.module_info
    states = [st.value for st in minfo.compiled_model_states]
    return states, graph.run_step((x,), states)


def _whole_step(minfo, flat_inputs, inject):
    """Evaluate the flat jaxpr; ``inject`` maps a Var to a function applied to its value."""
    env = dict(zip(all_inputs(minfo.jaxpr), [*minfo.consts, *flat_inputs]))
    read = lambda a: env[a] if not hasattr(a, "val") else a.val
    for eqn in minfo.jaxpr.eqns:
        params = eqn.primitive.get_bind_params(eqn.params)
        params = params[1] if isinstance(params, tuple) else params
        outs = eqn.primitive.bind(*map(read, eqn.invars), **params)
        outs = outs if eqn.primitive.multiple_results else [outs]
        for var, val in zip(eqn.outvars, outs):
            env[var] = inject[var](val) if var in inject else val
    return env


@pytest.mark.parametrize("name", [n for n, _, _ in cells()])
def test_relation_tail_jacobian_matches_whole_step(name, x64):
    model, x = next((m, xx) for n, m, xx in cells() if n == name)
    x = x.astype(jnp.float64) * 0.7
    graph = compile_etrace_graph(model, x, warn=False)
    minfo = graph.module_info
    states, res = _step_values(graph, x)
    flat = jax.tree.leaves(((x,), states))
    assert graph.hidden_param_op_relations
    for i, rel in enumerate(graph.hidden_param_op_relations):
        if PathClassification.MIXED in rel.path_classification.values():
            continue  # the indirect part is deliberately not in the tail
        y0 = res.ys[i]
        for k, group in enumerate(rel.hidden_groups):
            consts = res.relation_consts[i]
            tail = jax.jacfwd(lambda y, r=rel, c=consts, k=k: r.y_to_hidden_groups(y, c)[k])(y0)

            def oracle(dy, group=group, y_var=rel.y_var):
                env = _whole_step(minfo, flat, {y_var: lambda v: v + dy})
                return group.concat_hidden([env.get(h, h) for h in group.hidden_outvars])

            expected = jax.jacfwd(oracle)(jnp.zeros_like(y0))
            np.testing.assert_allclose(tail, expected, atol=ATOL)


@pytest.mark.parametrize("name", ["LIF", "Leaky", "GRUCell", "LSTMCell", "MiniGRU"])
def test_diagonal_jacobian_is_the_position_diagonal_of_the_transition(name, x64):
    model, x = next((m, xx) for n, m, xx in cells() if n == name)
    graph = compile_etrace_graph(model, x.astype(jnp.float64) * 0.7, warn=False)
    states, res = _step_values(graph, x.astype(jnp.float64) * 0.7)
    for g, group in enumerate(graph.hidden_groups):
        prev = [jnp.asarray(v) + 0.3 for v in res.hidden_prev[g]]
        diag = group.diagonal_jacobian(prev, res.group_consts[g])
        consts = res.group_consts[g]
        step = lambda h, gr=group, c=consts: gr.concat_hidden(gr.transition(gr.split_hidden(h), c))
        full = jax.jacfwd(step)(group.concat_hidden(prev))
        n, s = int(np.prod(group.varshape)), group.num_state
        full = np.asarray(full).reshape(n, s, n, s)
        expected = full[np.arange(n), :, np.arange(n), :].reshape(*group.varshape, s, s)
        np.testing.assert_allclose(diag, expected, atol=ATOL)
        off = full.copy()
        off[np.arange(n), :, np.arange(n), :] = 0
        assert np.abs(off).max() < ATOL  # position-preserving: nothing off the diagonal


def test_leaky_diagonal_equals_whole_step_jacobian(x64):
    model, x = next((m, xx) for n, m, xx in cells() if n == "Leaky")
    graph = compile_etrace_graph(model, x.astype(jnp.float64), warn=False)
    minfo = graph.module_info
    states, res = _step_values(graph, x.astype(jnp.float64))
    (group,) = graph.hidden_groups
    diag = group.diagonal_jacobian(res.hidden_prev[0], res.group_consts[0])[..., 0, 0]
    h_index = [i for i, v in enumerate(minfo.invars) if v is group.hidden_invars[0]][0]
    flat = jax.tree.leaves(((x.astype(jnp.float64),), states))

    def whole(h):
        inputs = list(flat)
        inputs[h_index] = h
        return _whole_step(minfo, inputs, {})[group.hidden_outvars[0]]

    np.testing.assert_allclose(diag, jnp.diag(jax.jacfwd(whole)(flat[h_index])), atol=ATOL)


def test_vanilla_rnn_default_has_zero_d_and_coupled_mode_is_exact(x64):
    model = init(TwoLayerRNN())
    x = jnp.linspace(-1, 1, 10, dtype=jnp.float64)
    for recurrence in ("diagonal", "coupled"):
        graph = compile_etrace_graph(model, x, recurrence=recurrence, warn=False)
        minfo = graph.module_info
        states, res = _step_values(graph, x)
        flat = jax.tree.leaves(((x,), states))
        group = graph.hidden_groups[0]
        diag = group.diagonal_jacobian(res.hidden_prev[0], res.group_consts[0])[..., 0, 0]
        if recurrence == "diagonal":
            assert not group.transition_jaxpr.eqns and np.all(np.asarray(diag) == 0)
            continue
        h_index = [i for i, v in enumerate(minfo.invars) if v is group.hidden_invars[0]][0]

        def whole(h, h_index=h_index, minfo=minfo, flat=flat, group=group):
            inputs = list(flat)
            inputs[h_index] = h
            return _whole_step(minfo, inputs, {})[group.hidden_outvars[0]]

        full = jax.jacfwd(whole)(flat[h_index])
        np.testing.assert_allclose(diag, jnp.diag(full), atol=ATOL)


@jax.custom_vjp
def _spike(v):
    return (v >= 0).astype(v.dtype)


_spike.defvjp(lambda v: (_spike(v), v), lambda v, g: (g / (1.0 + 2.0 * jnp.abs(v)) ** 2,))


class _CoupledSpike(CoupledPlain):
    """A soft reset by a ``jax.custom_vjp`` spike of the mixed state (no forward mode)."""

    def update(self, x):
        h = self.h.value
        self.h.value = 0.8 * h - 0.5 * _spike(h @ self.M - 0.1) + matmul(x, self.W.value)
        return self.h.value


def test_coupled_mode_takes_a_custom_vjp_transition_in_reverse(x64):
    """``'coupled'`` dh/dh is a dense Jacobian: by ``jax.jacrev`` through a ``custom_vjp``
    (``jax.jacfwd`` raised), equal to the whole step's."""
    model = init(_CoupledSpike())
    model.h.value = jnp.asarray([0.3, -0.2, 0.5, 0.05])
    x = jnp.linspace(-1, 1, 3, dtype=jnp.float64)
    graph = compile_etrace_graph(model, x, recurrence="coupled", warn=False)
    minfo = graph.module_info
    states, res = _step_values(graph, x)
    flat = jax.tree.leaves(((x,), states))
    group = graph.hidden_groups[0]
    diag = group.diagonal_jacobian(res.hidden_prev[0], res.group_consts[0])[..., 0, 0]
    h_index = [i for i, v in enumerate(minfo.invars) if v is group.hidden_invars[0]][0]

    def whole(h):
        inputs = list(flat)
        inputs[h_index] = h
        return _whole_step(minfo, inputs, {})[group.hidden_outvars[0]]

    full = jax.jacrev(whole)(flat[h_index])
    np.testing.assert_allclose(diag, jnp.diag(full), atol=ATOL)
    assert np.any(np.asarray(diag) != 0.8)  # the surrogate is on the path


def test_coupling_plain_op_is_cut_not_summed(x64):
    model = CoupledPlain()
    graph = compile_etrace_graph(model, jnp.ones(3, jnp.float64), warn=False)
    (group,) = graph.hidden_groups
    assert group.cut_eqn_indices
    cut = graph.module_info.jaxpr.eqns[group.cut_eqn_indices[0]]
    assert cut.primitive.name == "dot_general"
    assert all(e.primitive.name != "dot_general" for e in group.transition_jaxpr.eqns)


def test_executor_step_matches_model_step():
    model = init(TwoLayerRNN())
    graph = compile_etrace_graph(model, jnp.zeros(10), warn=False)
    minfo = graph.module_info
    states = [st.value for st in minfo.compiled_model_states]
    x = jnp.linspace(-1, 1, 10)
    outputs, new_states = minfo.jaxpr_call(states, x)
    res = graph.run_step((x,), states)
    np.testing.assert_allclose(res.outputs, outputs, rtol=1e-6)
    for a, b in zip(jax.tree.leaves(res.new_state_vals), jax.tree.leaves(new_states)):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    # dL/dh^t through the perturbations equals the VJP of the readout w.r.t. h^t
    pert = [jnp.zeros(v.aval.shape) for v in graph.hidden_perturb.perturb_vars]
    grads = jax.grad(lambda p: graph.run_step((x,), states, p).outputs.sum())(pert)
    # the oracle: jax.grad of the model's own readout layer at the new rnn2.h (eager, no graph)
    paths = [tuple(p) for p in graph.hidden_perturb.perturb_hidden_paths]
    h2 = dict(zip(_state_paths(minfo), new_states))[("rnn2", "h")]
    want = jax.grad(lambda h: model.out(h).sum())(h2)
    np.testing.assert_allclose(grads[paths.index(("rnn2", "h"))], want, rtol=1e-6, atol=1e-7)
    assert np.abs(np.asarray(want)).sum() > 0  # rnn2.h feeds the readout
    for i, rel in enumerate(graph.hidden_param_op_relations):
        (h_new,) = rel.y_to_hidden_groups(res.ys[i], res.relation_consts[i])
        np.testing.assert_allclose(
            h_new[..., 0], res.hidden_new[rel.hidden_groups[0].index][0], rtol=1e-6
        )


def _state_paths(minfo):
    """The path of each compiled model state, in ``jaxpr_call``'s order of new states."""
    return [minfo.path_of(state) for state in minfo.compiled_model_states]
