"""A compiled learner called with inputs of another shape says which dimension differs."""

from __future__ import annotations

import functools

import jax.numpy as jnp
import pytest

import etp_viz
from tests.learn import models

GRU = functools.partial(etp_viz.nn.GRUCell, models.NUM_IN, models.NUM_HID)


@pytest.mark.parametrize("batch", [None, 2])
def test_feature_size_different_from_compiled_is_not_called_a_batch_size(batch):
    model = models.build(GRU, batch_size=batch)
    alg = etp_viz.D_RTRL(model)
    lead = () if batch is None else (batch,)
    alg.compile_graph(jnp.zeros((*lead, models.NUM_IN)))
    with pytest.raises(ValueError, match=r"feature size differs: 5 given, .* compiled for 3") as e:
        alg(jnp.zeros((*lead, 5)))
    assert "batch size" not in str(e.value)


def test_verify_takes_xs_as_a_nested_list_of_numbers(x64):
    """``xs`` is one array, time first: a nested list is the array it spells (the docstring
    of :func:`etp_viz.verify`), where one step's example input as a list is an error
    (``tests/compiler/test_input_errors.py``)."""
    model = models.build(GRU)
    rows = [[0.1 * (t + i) for i in range(models.NUM_IN)] for t in range(4)]
    from_list = etp_viz.verify(model, rows)
    from_array = etp_viz.verify(model, jnp.asarray(rows))
    assert [r.path for r in from_list.rows] == [r.path for r in from_array.rows]
    assert not from_list.contradictions
