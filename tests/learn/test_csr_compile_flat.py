"""Structural: the compiled step of a user-written CSR model does not grow with the network.

A spiking layer written by hand on a saiunit CSR (``etp_viz.sparse_matmul`` with the CSR's
indices kept in a ``brainstate.State``, as ``bench/sparse_kernels.CSRLIFNet`` does) is learned
online by ES-D-RTRL and D-RTRL. The program of one gradient step must be the same at two sizes
up to the numbers in its shapes: the index arrays and the weights are operands, never constants
baked into the program (a 200k-neuron, fan-in-100 pattern as constants is gigabytes of HLO
text and a compile time that grows with ``n``). The lowered StableHLO is the same text once
every number is replaced by ``N``; XLA's optimised HLO may fuse a little differently at another
size (its heuristics read the shapes), so there it is its size, within 20 %, and neither holds
a constant of more than a few elements. ``bench/csr_compile.py`` times the compile at 20k and
200k neurons.
"""

from __future__ import annotations

import re

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from saiunit import sparse as ss

import etp_viz

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

BATCH, NUM_IN, FAN_IN = 4, 3, 5
#: a constant with more elements than this is data baked into the program
MAX_CONSTANT_ELEMENTS = 64


class CSRLIF(brainstate.nn.Module):
    """Recurrent LIF on a CSR of ``n`` neurons with a fixed fan-in, readout ``Linear(n, 2)``."""

    def __init__(self, n: int, constant_indices: bool = False):
        super().__init__()
        rng = np.random.default_rng(0)
        cols = np.concatenate([rng.choice(n, FAN_IN, replace=False) for _ in range(n)])
        indptr = np.arange(0, n * FAN_IN + 1, FAN_IN)
        self.n, self.constant_indices = n, constant_indices
        self.numpy_conn = (cols.astype(np.int32), indptr.astype(np.int32))
        self.conn = brainstate.State((jnp.asarray(cols, jnp.int32), jnp.asarray(indptr, jnp.int32)))
        self.W_rec = brainstate.ParamState(jnp.asarray(rng.normal(size=n * FAN_IN) * 0.3))
        self.W_in = brainstate.ParamState(jnp.asarray(rng.normal(size=(NUM_IN, n))))
        self.out = etp_viz.nn.Linear(n, 2)

    def init_state(self, batch_size=None, **kwargs):
        self.V = brainstate.HiddenState(jnp.zeros((batch_size, self.n)))

    def update(self, x):
        z_prev = jax.nn.sigmoid(4.0 * (self.V.value - 1.0))
        indices, indptr = self.numpy_conn if self.constant_indices else self.conn.value
        w = self.W_rec.value
        mat = ss.CSR((w, indices, indptr), shape=(self.n, self.n))
        current = etp_viz.matmul(x, self.W_in.value) + etp_viz.sparse_matmul(
            z_prev, w, sparse_mat=mat
        )
        self.V.value = 0.9 * (self.V.value - z_prev) + 0.1 * current
        return self.out(jax.nn.sigmoid(4.0 * (self.V.value - 1.0)))


def _step_texts(algorithm: str, n: int, constant_indices: bool = False) -> tuple[str, str]:
    """(lowered StableHLO, optimised HLO) of one jitted online gradient step."""
    brainstate.random.seed(0)
    model = CSRLIF(n, constant_indices)
    brainstate.nn.init_all_states(model, batch_size=BATCH)
    x = jnp.ones((BATCH, NUM_IN))
    learner = etp_viz.ES_D_RTRL(model, 0.9) if algorithm == "es_d_rtrl" else etp_viz.D_RTRL(model)
    learner.compile_graph(x)
    grad = brainstate.transform.grad(lambda x: jnp.sum(learner(x) ** 2), learner.param_states)
    lowered = brainstate.transform.jit(grad).lower(x)
    return lowered.as_text(), lowered.compile().as_text()


def _without_numbers(text: str) -> str:
    text = re.sub(r"\b(loc|metadata|source_file|source_line|op_name)\b.*", "", text)
    return re.sub(r"\d+", "N", text)


_STABLEHLO_CONSTANT = re.compile(r"stablehlo\.constant dense<(.).*?> : tensor<((?:\d+x)*)[a-z]\w*>")
_HLO_CONSTANT = re.compile(r"= \w+\[([\d,]*)\]\S* constant\(\{")


def _large_constants(text: str) -> list[str]:
    """Constants that hold data (not one splat value) of more than a few elements: StableHLO
    ``dense<"0x...">`` / ``dense<[...]>`` and HLO ``constant({...})``."""
    found = []
    for line in text.splitlines():
        lowered, optimised = _STABLEHLO_CONSTANT.search(line), _HLO_CONSTANT.search(line)
        if lowered and lowered.group(1) in '"[':
            dims = lowered.group(2)
        elif optimised:
            dims = optimised.group(1).replace(",", "x")
        else:
            continue
        if int(np.prod([int(d) for d in dims.split("x") if d])) > MAX_CONSTANT_ELEMENTS:
            found.append(line.strip()[:120])
    return found


@pytest.mark.parametrize("algorithm", ["es_d_rtrl", "d_rtrl"])
def test_the_compiled_step_is_the_same_program_at_two_sizes(algorithm):
    small, large = _step_texts(algorithm, 40), _step_texts(algorithm, 400)
    for text in (*small, *large):
        assert _large_constants(text) == []
    assert _without_numbers(small[0]) == _without_numbers(large[0]), "the program depends on n"
    lines = len(small[1].splitlines()), len(large[1].splitlines())
    assert max(lines) <= 1.2 * min(lines), f"optimised HLO lines at n=40 / 400: {lines}"


def test_the_check_sees_indices_baked_in_as_constants():
    """The same layer with its CSR indices as numpy arrays: they are constants of the program,
    and the check finds them."""
    lowered, _ = _step_texts("es_d_rtrl", 40, constant_indices=True)
    assert _large_constants(lowered)
