"""What the compiler sees in each etp_viz.nn layer (cells built as cls(3, 4), unbatched)."""

from __future__ import annotations

import warnings

import brainstate
import jax.numpy as jnp
import pytest

from etp_viz import nn
from etp_viz.compiler import compile_etrace_graph

#: (class, kwargs) -> (hidden paths of each group, related weight attribute names)
PROFILES = [
    (nn.ValinaRNNCell, {}, [["h"]], ["W"]),
    (nn.GRUCell, {}, [["h"]], ["Wz", "Wh"]),
    (nn.LSTMCell, {}, [["h", "c"]], ["Wi", "Wg", "Wf", "Wo"]),
    (nn.MGUCell, {}, [["h"]], ["Wf", "Wh"]),
    (nn.MiniGRU, {}, [["h"]], ["Wz", "Wh"]),
    (nn.LeakyRateReadout, {}, [["r"]], ["W"]),
    (nn.LIF, {}, [["V"]], ["W"]),
    (nn.LIF, {"recurrent": True}, [["V"]], ["W"]),
    (nn.ALIF, {"recurrent": True}, [["V", "a"]], ["W"]),
]


#: The layers whose profile the compiler reports as a lossy wiring (with a UserWarning).
EXPECTED_WARNINGS = {
    # GRUCell: Wr only feeds Wh's product -- recorded (explorer, explain), not warned
    "MGUCell": ["relation_partial_path"],  # Wf also gates h before Wh's product
}


@pytest.mark.parametrize(
    "cls, kwargs, groups, related", PROFILES, ids=lambda v: getattr(v, "__name__", str(v))
)
def test_compiler_profile(cls, kwargs, groups, related):
    model = brainstate.nn.init_all_states(cls(3, 4, **kwargs))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = compile_etrace_graph(model, jnp.ones(3))
    kinds = sorted(str(w.message).split("]")[0].strip("[") for w in caught)
    assert kinds == EXPECTED_WARNINGS.get(cls.__name__, [])
    assert [[path[-1] for path in g.hidden_paths] for g in graph.hidden_groups] == groups
    assert [r.weight_path for r in graph.hidden_param_op_relations] == [
        (name, "weight") for name in related
    ]
