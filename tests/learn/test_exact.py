"""D-RTRL equals BPTT (float64, relative error <= 1e-10) where the recurrence is element-wise."""

from __future__ import annotations

import functools

import pytest

import etp_viz
import etp_viz.nn as nn
from tests.learn import models
from tests.learn.helpers import multi_step_gradients, online_gradients, sequence_loss, shared
from tests.oracles import assert_tree_allclose, bptt_gradients

RTOL = 1e-10

# (id, cell factory, batch size): one model per primitive family; batched -> the *_mm form.
FAMILIES = [
    ("mm", models.LeakyDense, 2),
    ("mv", models.LeakyDense, None),
    ("elemwise", models.LeakyElemwise, 2),
    ("conv", models.LeakyConv, 2),
    ("sp_mm", models.LeakySparse, 2),
    ("sp_mv", models.LeakySparse, None),
    ("lora_mm", models.LeakyLora, 2),
    ("lora_mv", models.LeakyLora, None),
    ("alif_multi_state", functools.partial(nn.ALIF, models.NUM_IN, models.NUM_HID), 2),
]


def _compiled(alg_cls, factory, batch, xs, **kwargs):
    model = models.build(factory, batch_size=batch)
    alg = alg_cls(model, **kwargs)
    alg.compile_graph(xs[0])
    return model, alg


#: checkpoints at which the running online sum is compared with BPTT over the prefix
CHECKPOINTS = (1, 4, 50)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name,factory,batch", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_single_step_d_rtrl_equals_bptt(x64, name, factory, batch):
    checkpoints = CHECKPOINTS  # every family at T = 1, 4 and 50
    model = models.build(factory, batch_size=batch)
    xs = models.inputs(model, checkpoints[-1], batch)
    expected = {t: bptt_gradients(model, xs[:t], sequence_loss) for t in checkpoints}
    alg = etp_viz.D_RTRL(model)
    alg.compile_graph(xs[0])
    online = online_gradients(alg, xs, checkpoints=checkpoints)
    for t in checkpoints:
        got = {p: v for p, v in online[t].items() if p in expected[t]}
        assert_tree_allclose(got, expected[t], rtol=RTOL)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_multi_state_group_is_one_group_of_two(x64):
    model = models.build(functools.partial(nn.ALIF, models.NUM_IN, models.NUM_HID), 2)
    alg = etp_viz.D_RTRL(model)
    alg.compile_graph(models.inputs(model, 1, 2)[0])
    assert [g.num_state for g in alg.graph.hidden_groups] == [2]


@shared
def _bptt_of_six_steps(factory):
    """BPTT on a fresh batch-2 model over 6 steps: the oracle of both learners below."""
    model = models.build(factory, batch_size=2)
    return bptt_gradients(model, models.inputs(model, 6, 2), sequence_loss)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("alg_cls", [etp_viz.D_RTRL, etp_viz.ES_D_RTRL], ids=["d_rtrl", "es"])
@pytest.mark.parametrize(
    "factory",
    [models.LeakyDense, functools.partial(nn.GRUCell, models.NUM_IN, models.NUM_HID)],
    ids=["leaky", "vanilla_gru"],
)
def test_whole_sequence_multi_step_equals_bptt(x64, alg_cls, factory):
    model = models.build(factory, batch_size=2)
    xs = models.inputs(model, 6, 2)
    expected = _bptt_of_six_steps(factory)
    learned = [p for p in expected if "Wr" not in p]  # GRU's Wr is not learned (status)
    alg = alg_cls(model, vjp_method="multi-step")
    alg.compile_graph(xs[0])
    got = multi_step_gradients(alg, xs)
    assert_tree_allclose({p: got[p] for p in learned}, {p: expected[p] for p in learned}, RTOL)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name,factory,batch", FAMILIES[:3] + FAMILIES[6:7], ids=lambda v: str(v))
def test_es_d_rtrl_is_exact_at_the_first_step(x64, name, factory, batch):
    model = models.build(factory, batch_size=batch)
    xs = models.inputs(model, 1, batch)
    expected = bptt_gradients(model, xs, sequence_loss)
    alg = etp_viz.ES_D_RTRL(model, decay_or_rank=0.9)
    alg.compile_graph(xs[0])
    online = {p: v for p, v in online_gradients(alg, xs).items() if p in expected}
    assert_tree_allclose(online, expected, rtol=RTOL)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_multi_step_window_carries_the_past_through_the_entry_trace(x64):
    """Two windows on an element-wise model: exact, because D-RTRL's trace is exact there."""
    model = models.build(models.LeakyDense, batch_size=2)
    xs = models.inputs(model, 8, 2)
    expected = bptt_gradients(model, xs, sequence_loss)
    alg = etp_viz.D_RTRL(model, vjp_method="multi-step")
    alg.compile_graph(xs[0])
    first = multi_step_gradients(alg, xs[:4])
    second = multi_step_gradients(alg, xs[4:])
    import jax

    assert_tree_allclose(jax.tree.map(lambda a, b: a + b, first, second), expected, RTOL)
