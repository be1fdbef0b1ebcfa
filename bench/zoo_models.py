"""The zoo: the models people already have, as they write them (issue 41).

Every recurrent cell of ``brainstate.nn``, the linear-like layers people put in recurrent
nets, and spiking neurons with a braintools surrogate, each inside a small recurrent net
written in plain brainstate (no etp_viz op): what ``lift=True`` must make learn online.
``tests/learn/test_zoo.py`` is generated from :data:`CATALOGUE`; ``bench/zoo.py`` measures
the table of ``docs/semantics.md`` ("The zoo") from it, braintrace's number beside ours.

Each entry builds an initialised model and gives one step's input; ``needs`` names an
optional package (the entry is skipped without it, and the table says so).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, NamedTuple

import brainstate
import jax
import jax.numpy as jnp

IN, N = 3, 6


class Entry(NamedTuple):
    """One model of the zoo.

    ``batch``: the batch size the model is run with (brainstate's convolutions take a batch
    axis); ``needs``: optional packages.
    """

    name: str
    build: Callable[[], Any]
    x_shape: tuple
    needs: tuple = ()
    batch: int | None = None

    def available(self) -> str:
        """'' when the entry can be built here, else why not."""
        for package in self.needs:
            try:
                importlib.import_module(package)
            except Exception as error:  # noqa: BLE001 - an optional package that does not import
                return f"{package} does not import here ({type(error).__name__})"
        return ""

    def model(self) -> Any:
        model = self.build()
        brainstate.nn.init_all_states(model, batch_size=self.batch)
        return model

    def inputs(self, steps: int, seed: int = 0) -> Any:
        batch = () if self.batch is None else (self.batch,)
        return jax.random.normal(jax.random.PRNGKey(seed), (steps, *batch, *self.x_shape))


class CellNet(brainstate.nn.Module):
    """``brainstate.nn.<Cell>(IN, N)`` under a ``brainstate.nn.Linear`` readout."""

    def __init__(self, cell: str):
        super().__init__()
        self.cell = getattr(brainstate.nn, cell)(IN, N)
        self.out = brainstate.nn.Linear(N, 2)

    def update(self, x):
        return self.out(self.cell(x))


class Recurrent(brainstate.nn.Module):
    """``h = tanh(inp(x) + rec(h))``: the layer under test as the recurrent map ``rec``."""

    def __init__(self, rec: Any, hidden_shape: tuple = (N,), inp: Any = None):
        super().__init__()
        self.hidden_shape = hidden_shape
        self.inp = inp if inp is not None else brainstate.nn.Linear(IN, N)
        self.rec = rec
        self.out = brainstate.nn.Linear(hidden_shape[-1], 2)

    def init_state(self, batch_size=None, **kwargs):
        shape = self.hidden_shape if batch_size is None else (batch_size, *self.hidden_shape)
        self.h = brainstate.HiddenState(jnp.zeros(shape))

    def update(self, x):
        self.h.value = jnp.tanh(self.inp(x) + self.rec(self.h.value))
        return self.out(self.h.value)


class SurrogateLIF(brainstate.nn.Module):
    """A leaky integrate-and-fire layer written by hand: ``V = a V + x W_in + z W_rec - z``,
    spikes ``z = surrogate(V - 1)`` from braintools, a leaky readout of the spikes."""

    def __init__(self, surrogate: str = "sigmoid"):
        super().__init__()
        import braintools

        self.spike_fn = getattr(braintools.surrogate, surrogate)
        self.w_in = brainstate.nn.Linear(IN, N)
        self.w_rec = brainstate.ParamState(jax.random.normal(jax.random.PRNGKey(4), (N, N)) * 0.3)
        self.out = brainstate.nn.Linear(N, 2)

    def init_state(self, batch_size=None, **kwargs):
        shape = (N,) if batch_size is None else (batch_size, N)
        self.v = brainstate.HiddenState(jnp.zeros(shape))
        self.z = brainstate.HiddenState(jnp.zeros(shape))

    def update(self, x):
        z = self.z.value
        v = 0.9 * self.v.value + self.w_in(x) + z @ self.w_rec.value - z
        self.v.value = v
        self.z.value = self.spike_fn(v - 1.0)
        return self.out(self.z.value)


class BrainpyLIF(brainstate.nn.Module):
    """brainpy's state-based ``LIF`` (``brainpy.state``, saiunit units: ohm, ms, mV), driven by
    a current in mA from an input and a recurrent ``brainstate.nn.Linear`` of its spikes."""

    def __init__(self):
        super().__init__()
        import brainpy.state

        self.w_in = brainstate.nn.Linear(IN, N)
        self.w_rec = brainstate.nn.Linear(N, N)
        self.lif = brainpy.state.LIF(N)
        self.out = brainstate.nn.Linear(N, 2)

    def update(self, x):
        import saiunit as u

        with brainstate.environ.context(dt=1.0 * u.ms):  # the integration step brainpy reads
            z = self.lif.get_spike()
            self.lif((self.w_in(x) + self.w_rec(z)) * (4.0 * u.mA))
            return self.out(self.lif.get_spike())


def _lora():
    return Recurrent(brainstate.nn.LoRA(N, 2, N))


def _event_fixed_prob():
    return Recurrent(brainstate.nn.EventFixedProb(N, N, 0.5, 0.3, seed=1))


def _fixed_num_conn():
    return Recurrent(brainstate.nn.FixedNumConn(N, N, 3, 0.3, seed=1))


def _sparse_linear():
    import numpy as np
    import saiunit

    dense = np.where(np.arange(N * N).reshape(N, N) % 3 == 0, 0.3, 0.0)
    return Recurrent(brainstate.nn.SparseLinear(saiunit.sparse.CSR.fromdense(dense)))


def _conv(dims: int):
    shape = (5,) * dims + (2,)
    cls = brainstate.nn.Conv1d if dims == 1 else brainstate.nn.Conv2d
    inp = cls((*shape[:-1], IN), 2, 3)
    return Recurrent(cls(shape, 2, 3), hidden_shape=shape, inp=inp)


CATALOGUE = (
    *(
        Entry(f"brainstate.nn.{cell}", lambda cell=cell: CellNet(cell), (IN,))
        for cell in ("ValinaRNNCell", "GRUCell", "MGUCell", "LSTMCell", "URLSTMCell")
    ),
    Entry("brainstate.nn.Linear", lambda: Recurrent(brainstate.nn.Linear(N, N)), (IN,)),
    Entry(
        "brainstate.nn.SignedWLinear",
        lambda: Recurrent(brainstate.nn.SignedWLinear(N, N)),
        (IN,),
    ),
    Entry(
        "brainstate.nn.ScaledWSLinear",
        lambda: Recurrent(brainstate.nn.ScaledWSLinear(N, N)),
        (IN,),
    ),
    Entry("brainstate.nn.SparseLinear", _sparse_linear, (IN,)),
    Entry("brainstate.nn.LoRA", _lora, (IN,)),
    # brainevent's CPU kernel for the event product is numba's
    Entry(
        "brainstate.nn.EventFixedProb",
        _event_fixed_prob,
        (IN,),
        needs=("brainevent", "numba"),
    ),
    Entry("brainstate.nn.FixedNumConn", _fixed_num_conn, (IN,), needs=("brainevent",)),
    Entry("brainstate.nn.Conv1d", lambda: _conv(1), (5, IN), batch=1),
    Entry("brainstate.nn.Conv2d", lambda: _conv(2), (5, 5, IN), batch=1),
    Entry("LIF, braintools.surrogate.sigmoid", SurrogateLIF, (IN,), needs=("braintools",)),
    # brainpy (the state-based neurons) installs beside brainstate 0.6 only (the 3.12 stack)
    Entry("brainpy.state.LIF", BrainpyLIF, (IN,), needs=("brainpy.state",)),
    Entry(
        "LIF, braintools.surrogate.relu_grad",
        lambda: SurrogateLIF("relu_grad"),
        (IN,),
        needs=("braintools",),
    ),
)
