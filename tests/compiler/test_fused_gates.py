"""The fused-gate rewrite (issue 41): one ETP equation per block of a split weight op.

Structure only (the gradients are tests/learn/test_fused_gates.py): which ops are cut, into
which blocks, named how; the step computes the same values and derivatives; the lifting
report points at the new equations; what is not a clean cut of the last axis is left alone.
"""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
from etp_viz.compiler.module_info import extract_module_info

IN, N = 3, 5


class Net(brainstate.nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.cell = cell
        self.out = brainstate.nn.Linear(N, 2)

    def update(self, x):
        return self.out(self.cell(x))


def _net(kind, batch=None):
    model = Net(getattr(brainstate.nn, kind)(IN, N))
    brainstate.nn.init_all_states(model, batch_size=batch)
    return model


class Gates(brainstate.nn.Module):
    """``y = x @ W`` cut by ``cut(y)`` into the values that update ``h``."""

    def __init__(self, cut, etp=False, width=2 * N):
        super().__init__()
        self.cut, self.etp = cut, etp
        self.W = brainstate.ParamState(jnp.ones((IN, width)) * 0.1)

    def init_state(self, batch_size=None, **kwargs):
        self.h = brainstate.HiddenState(jnp.zeros(N))

    def update(self, x):
        y = etp_viz.matmul(x, self.W.value) if self.etp else x @ self.W.value
        a, b = self.cut(y)
        self.h.value = jax.nn.sigmoid(a) * self.h.value + b
        return self.h.value


def _gates(cut, **kwargs):
    model = Gates(cut, **kwargs)
    brainstate.nn.init_all_states(model)
    return model


@pytest.mark.parametrize(
    "kind, weight, labels",
    [
        ("LSTMCell", ("cell", "W", "weight"), ["i", "g", "f", "o"]),
        ("GRUCell", ("cell", "Wrz", "weight"), ["r", "z"]),
        ("URLSTMCell", ("cell", "W", "weight"), ["f", "r", "u", "o"]),
    ],
)
def test_brainstate_cells_are_cut_into_named_blocks(kind, weight, labels):
    minfo = extract_module_info(_net(kind), jnp.zeros(IN), lift=True)
    blocks = [b for b in minfo.blocks if b.weight_path == weight]
    assert [b.label for b in blocks] == labels
    assert [(b.start, b.stop) for b in blocks] == [(k * N, (k + 1) * N) for k in range(len(labels))]
    assert all(b.source.endswith(".py:" + b.source.rsplit(":", 1)[1]) for b in blocks)
    # the fused product is cut no more: what is split is the weight and bias leaves, each once
    splits = [e for e in minfo.jaxpr.eqns if e.primitive.name == "split"]
    assert splits and all(e.invars[0] in minfo.invar_to_weight_path for e in splits)
    assert len({e.invars[0] for e in splits}) == len(splits)
    for b in blocks:  # each block is a dense ETP op reading a column slice of the weight
        eqn = minfo.jaxpr.eqns[b.eqn_index]
        assert eqn.primitive.name == "etp_mv"
        assert eqn.outvars[0].aval.shape == (N,)
        op = minfo.lifting.lifted_at(b.eqn_index)
        assert op is not None and b.eqn_index in op.block_eqn_indices
    for op in minfo.lifting.lifted:  # the report points at ETP equations of the new step
        assert minfo.jaxpr.eqns[op.eqn_index].primitive.name.startswith("etp_")


@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell", "URLSTMCell"])
@pytest.mark.parametrize("batch", [None, 3])
def test_cut_step_computes_the_same_values_and_derivatives(kind, batch):
    model = _net(kind, batch)
    x = jax.random.normal(jax.random.PRNGKey(0), (IN,) if batch is None else (batch, IN))
    minfo = extract_module_info(model, x, lift=True)
    assert minfo.blocks
    key = iter(jax.random.split(jax.random.PRNGKey(1), 64))
    states = jax.tree.map(
        lambda v: jax.random.normal(next(key), jnp.shape(v)),
        [s.value for s in minfo.compiled_model_states],
    )
    plain = extract_module_info(model, x)  # no lifting: no ETP op, nothing cut

    def out(info, x):
        return info.jaxpr_call(states, x)[0].sum()

    assert not plain.blocks
    np.testing.assert_allclose(out(minfo, x), out(plain, x), rtol=1e-6)
    grads = [jax.grad(out, argnums=1)(info, x) for info in (minfo, plain)]
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-6)


def test_etp_ops_written_by_hand_are_cut_too():
    minfo = extract_module_info(_gates(lambda y: jnp.split(y, 2, axis=-1), etp=True), jnp.zeros(IN))
    # the split's line binds no names (a lambda's body): the blocks are numbered
    assert [b.label for b in minfo.blocks] == ["block 0", "block 1"]
    assert minfo.blocks[1].describe() == f"columns {N}-{2 * N - 1}"
    assert minfo.lifting is None


def test_slices_are_blocks_named_by_their_assignments():
    def cut(y):
        first = y[..., :N]
        second = y[..., N:]
        return first, second

    minfo = extract_module_info(_gates(cut), jnp.zeros(IN), lift=True)
    assert [(b.label, b.start, b.stop) for b in minfo.blocks] == [
        ("first", 0, N),
        ("second", N, 2 * N),
    ]


@pytest.mark.parametrize(
    "cut",
    [
        # overlapping columns: one column would be the y of two relations
        lambda y: (y[..., :N], y[..., 1 : N + 1]),
        # the product is read whole as well as cut
        lambda y: (y[..., :N] + y.sum(), y[..., N:]),
        # the same columns read twice
        lambda y: (y[..., :N], y[..., :N]),
        # a cut along another axis than the last (the reshaped product's rows)
        lambda y: tuple(jnp.split(y.reshape(2, N), 2, axis=0)[k].reshape(N) for k in range(2)),
    ],
)
def test_what_is_not_a_clean_cut_of_the_last_axis_is_left_alone(cut):
    minfo = extract_module_info(_gates(cut), jnp.zeros(IN), lift=True)
    assert minfo.blocks == ()


def test_a_call_in_the_chain_is_cut_with_the_blocks():
    """``jax.nn.relu`` is a ``custom_jvp_call`` around a ``jit``: evaluated per block through
    its body (typed for the whole product, it cannot be bound on a block)."""

    def cut(y):
        a, b = jnp.split(jax.nn.relu(y) * 2.0, 2)
        return a, b

    model = _gates(cut)
    x = jnp.linspace(-1.0, 1.0, IN)
    minfo = extract_module_info(model, x, lift=True)
    assert [b.label for b in minfo.blocks] == ["a", "b"]
    states = [
        jnp.ones(N) if isinstance(s, brainstate.HiddenState) else s.value
        for s in minfo.compiled_model_states
    ]
    want = extract_module_info(model, x).jaxpr_call(states, x)[0]
    np.testing.assert_allclose(minfo.jaxpr_call(states, x)[0], want, rtol=1e-6)


@pytest.mark.parametrize("algorithm", ["d_rtrl", "es_d_rtrl"])
def test_a_fused_weights_gradient_is_assembled_by_one_concatenate_not_a_pad_per_block(algorithm):
    """The blocks read the weight through one ``split``, whose transpose is one
    ``concatenate``: no block gradient is padded to the fused weight's width and added
    (a ``slice`` per block did that: the brainstate LSTM's D-RTRL step ran 34 % slower than
    four separate weights, ``bench/README.md``)."""
    model = _net("LSTMCell", batch=2)
    build = {"d_rtrl": etp_viz.D_RTRL, "es_d_rtrl": lambda m, **k: etp_viz.ES_D_RTRL(m, 0.9, **k)}
    alg = build[algorithm](model, lift=True)
    x = jnp.ones((2, IN))
    alg.compile_graph(x)
    grad = brainstate.transform.grad(lambda x: jnp.sum(alg(x) ** 2), alg.param_states)
    closed = brainstate.transform.make_jaxpr(grad)(x)[0]
    jaxpr = getattr(closed, "jaxpr", closed)  # brainstate 0.5: a ClosedJaxpr; 0.6: a Jaxpr
    width = 4 * N

    def eqns(jaxpr):
        for eqn in jaxpr.eqns:
            yield eqn
            for param in eqn.params.values():
                inner = getattr(param, "jaxpr", param)
                if hasattr(inner, "eqns"):
                    yield from eqns(inner)

    found = list(eqns(jaxpr))
    wide = [e for e in found if e.outvars and getattr(e.outvars[0].aval, "shape", ())[-1:]
            == (width,)]  # fmt: skip
    assert not [e for e in wide if e.primitive.name == "pad"], "a block gradient padded"
    assert [e for e in wide if e.primitive.name == "concatenate"], "no concatenate"
