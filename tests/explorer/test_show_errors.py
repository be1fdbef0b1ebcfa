"""``etp_viz.show`` at the edges: a wrong input size names the expected one; an unknown
algorithm names the valid ones (static and live)."""

from __future__ import annotations

import brainstate
import jax.numpy as jnp
import pytest

import etp_viz
from tests.compiler.test_input_errors import Net


@pytest.fixture
def net():
    model = Net()
    brainstate.nn.init_all_states(model)
    return model


def test_show_with_a_wrong_feature_size_names_the_expected_size(net):
    with pytest.raises(ValueError, match=r"expects inputs with 3 features.*shape \(5,\)"):
        etp_viz.show(net, jnp.zeros(5))


@pytest.mark.parametrize("live", [False, True])
def test_show_with_an_unknown_algorithm_names_the_valid_ones(net, live):
    options = {"task": etp_viz.tasks.get_task("sine")} if live else {}
    with pytest.raises(ValueError, match=r"Unknown algorithm 'foo'.*'d_rtrl', 'es_d_rtrl'"):
        etp_viz.show(net, jnp.zeros(3), algorithm="foo", **options)
