"""Approximate cases: cosine similarity of online gradients to BPTT, per parameter.

Run with ``-s`` to see the numbers (quoted in the closing notes of issue 4). Only sane bounds
are asserted: online parameters point the same way as BPTT's gradient (cos > 0), readouts are
exact, and an excluded weight (GRU ``Wr``) is exactly zero.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import etp_viz
import etp_viz.nn as nn
from tests.learn import models
from tests.learn.helpers import online_gradients, sequence_loss
from tests.oracles import bptt_gradients, report_cosine_similarity

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

CELLS = {
    "vanilla_rnn": functools.partial(nn.ValinaRNNCell, models.NUM_IN, 8),
    "gru": functools.partial(nn.GRUCell, models.NUM_IN, 8),
    "lstm": functools.partial(nn.LSTMCell, models.NUM_IN, 8),
}
LEARNERS = {
    "D_RTRL": lambda m: etp_viz.D_RTRL(m),
    "ES_D_RTRL(0.9)": lambda m: etp_viz.ES_D_RTRL(m, decay_or_rank=0.9),
}


@pytest.mark.parametrize("learner", list(LEARNERS))
@pytest.mark.parametrize("cell", list(CELLS))
def test_cosine_similarity_to_bptt(x64, cell, learner):
    model = models.build(CELLS[cell], batch_size=4)
    xs = models.inputs(model, 20, 4)
    expected = bptt_gradients(model, xs, sequence_loss)
    alg = LEARNERS[learner](model)
    alg.compile_graph(xs[0])
    online = online_gradients(alg, xs)
    cosines = report_cosine_similarity(f"{cell} / {learner} (T=20, B=4)", online, expected)
    for path, entry in alg.learning_status.items():
        if entry.kind == "readout":
            assert cosines[path] == pytest.approx(1.0, abs=1e-9), path
        elif entry.kind == "not learned":
            assert all(np.all(np.asarray(v) == 0) for v in _leaves(online[path])), path
        else:
            assert 0.0 < cosines[path] <= 1.0 + 1e-9, (path, cosines[path])


def _leaves(tree):
    import jax

    return jax.tree.leaves(tree)
