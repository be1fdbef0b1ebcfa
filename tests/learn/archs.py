"""Generated recurrent architectures for the gradient-claim property tests (issue 12 G).

An :class:`Arch` describes a stack of one or two layers of ``N`` units; :class:`ArchNet` builds
it as a brainstate module. Each layer picks

* ``states``: one hidden state, or two that read each other element-wise (a multi-state
  group: ``v`` and an adaptation ``a``);
* ``rec``: the recurrence -- ``none``, ``leaky`` (element-wise decay), ``dense`` (an ETP
  ``matmul`` of ``h^{t-1}``), ``concat`` (one ETP ``matmul`` of ``[x, h^{t-1}]``) or ``mix``
  (a plain ``h^{t-1} @ M`` with a constant ``M``: a position-coupling op);
* ``inp``: the input op, an ETP ``matmul`` or an ETP ``element_wise`` gain;
* ``bias``: none, an ETP ``element_wise`` bias of shape ``(N,)`` (broadcast over the batch)
  or a plain ``ParamState`` added with ``+``;
* ``act``: ``tanh`` or a smooth spike;
* ``reads``: whether what follows (the next layer, the output) reads the new value of the
  layer's state or the value from before this step's update;
* ``adapt`` (two states): the adaptation reads the state before (``old``) or after
  (``new``) its update, or is updated first from ``y`` and the state reads its new value
  (``first``: an in-step read of a new value, like an LSTM's ``h`` reading the new ``c``);
* ``cross`` (second layer only): the first layer's previous state added element-wise into
  the second layer's update (a cross-layer, cross-group dependency);
* ``inp="wnorm"``: a weight-normalised input matrix ``g * v / |v|`` (two ParamStates into one
  ETP matmul); ``bias="mixed"``: the input matrix and a plainly added bias as two leaves of
  one ParamState (leaves with different claims);
* ``count``: an integer refractory-like countdown beside the state, gating it through
  ``jnp.where`` (no gradient through it).

``Arch.feedback`` (two layers) feeds the *top* layer's previous state back into the first
layer's update (top-down feedback: a dependency on another group's old value that the first
layer's own weights influence through the stack): ``add`` element-wise, ``etp`` through an ETP
``matmul`` with its own weight ``Wfb`` (a boundary), ``mix`` through a plain constant matmul
(a position-coupling op).

``Arch.shared`` makes the second layer reuse the first layer's input matrix and also adds the
first layer's ETP output ``y`` into its update (one weight feeding two layers: two relations
of one ParamState, and one relation feeding two hidden groups).

The output is an ETP or a plain readout of the last layer.

``Arch.ops`` rewrites every op on a parameter at once (the twins of issue 32's lifting):
``"etp"`` writes each one with an ETP op (a plain bias through ``element_wise``, a matrix and
its bias in one ParamState as one ``matmul(x, W, b)``, a plain readout as ``matmul``);
``"plain"`` writes each one in plain jnp (``x @ W``, ``x * gain``, ``y + b``), which
``lift=True`` turns back into the ``"etp"`` twin. The default ``"mixed"`` is as described
above.
"""

from __future__ import annotations

import dataclasses

import brainstate
import jax
import jax.numpy as jnp
import numpy as np

import etp_viz

N = 3
RECS = ("none", "leaky", "dense", "concat", "mix")
FEEDBACKS = ("none", "add", "etp", "mix")


@dataclasses.dataclass(frozen=True)
class Layer:
    states: int = 1
    rec: str = "leaky"
    inp: str = "dense"
    bias: str = "none"
    act: str = "tanh"
    reads: str = "new"
    cross: bool = False
    #: two states: how the adaptation and the state read each other (module docstring)
    adapt: str = "old"
    count: bool = False


@dataclasses.dataclass(frozen=True)
class Arch:
    layers: tuple = (Layer(),)
    out: str = "etp"
    batch: int | None = None
    seed: int = 0
    shared: bool = False
    #: top-down feedback of the top layer's previous state into the first layer
    feedback: str = "none"
    #: ``"mixed"`` (as each field says), ``"etp"`` or ``"plain"`` (module docstring)
    ops: str = "mixed"

    def describe(self) -> str:
        parts = [
            f"L{i}(S={la.states},rec={la.rec},inp={la.inp},bias={la.bias},act={la.act},"
            f"reads={la.reads},adapt={la.adapt}{',cross' if la.cross else ''}"
            f"{',count' if la.count else ''})"
            for i, la in enumerate(self.layers)
        ]
        shared = ", shared Win" if self.shared else ""
        feedback = f", feedback={self.feedback}" if self.feedback != "none" else ""
        ops = f", ops={self.ops}" if self.ops != "mixed" else ""
        tail = f" -> out={self.out}, batch={self.batch}{shared}{feedback}{ops}, seed={self.seed}"
        return " -> ".join(parts) + tail


def _param(rng: np.random.Generator, shape: tuple, scale: float = 0.6) -> brainstate.ParamState:
    return brainstate.ParamState(jnp.asarray(scale * rng.standard_normal(shape)))


def _mm(ops: str, x, w, b=None):
    """``x @ w (+ b)``: an ETP ``matmul`` unless ``ops == "plain"``."""
    if ops == "plain":
        return x @ w if b is None else x @ w + b
    return etp_viz.matmul(x, w, b)


def _gain(ops: str, w):
    """An element-wise parameter: ETP-marked unless ``ops == "plain"``."""
    return w if ops == "plain" else etp_viz.element_wise(w)


def _spike(v):
    return jax.nn.sigmoid(3.0 * (v - 0.5))


class ArchLayer(brainstate.nn.Module):
    def __init__(self, spec: Layer, num_in: int, rng: np.random.Generator, ops: str = "mixed"):
        super().__init__()
        self.spec = spec
        self.ops = ops
        if spec.rec == "concat":
            self.Wcat = _param(rng, (num_in + N, N), 0.5)
        elif spec.inp == "wnorm":
            self.v = _param(rng, (num_in, N))
            self.g = brainstate.ParamState(jnp.asarray(rng.uniform(0.5, 1.5, N)))
        elif spec.bias == "mixed":
            self.Win = brainstate.ParamState(
                {"weight": _param(rng, (num_in, N)).value, "bias": _param(rng, (N,), 0.3).value}
            )
        elif spec.inp == "dense" or num_in != N:
            self.Win = _param(rng, (num_in, N))
        else:
            self.gain = _param(rng, (N,))
        if spec.rec == "dense":
            self.Wrec = _param(rng, (N, N), 0.5)
        elif spec.rec == "mix":
            self.mix = jnp.asarray(0.4 * rng.standard_normal((N, N)))
        if spec.bias in ("etp", "plain"):
            self.b = _param(rng, (N,), 0.3)
        self.decay = jnp.asarray(rng.uniform(0.4, 0.9, N))

    def init_state(self, batch_size=None, **kwargs):
        shape = (N,) if batch_size is None else (batch_size, N)
        self.h = brainstate.HiddenState(jnp.full(shape, 0.1))
        if self.spec.states == 2:
            self.a = brainstate.HiddenState(jnp.zeros(shape))
        if self.spec.count:
            self.n = brainstate.HiddenState(jnp.zeros(shape, jnp.int32))

    def reset_state(self, batch_size=None, **kwargs):
        self.init_state(batch_size)

    def update(self, x, cross=None):
        spec, ops = self.spec, self.ops
        h_old = self.h.value
        if spec.rec == "concat":
            y = _mm(ops, jnp.concatenate([x, h_old], axis=-1), self.Wcat.value)
        elif spec.inp == "wnorm":
            weight = self.g.value * self.v.value / jnp.linalg.norm(self.v.value, axis=0)
            y = _mm(ops, x, weight)
        elif spec.bias == "mixed" and ops == "mixed":
            y = etp_viz.matmul(x, self.Win.value["weight"]) + self.Win.value["bias"]
        elif spec.bias == "mixed":
            y = _mm(ops, x, self.Win.value["weight"], self.Win.value["bias"])
        elif hasattr(self, "Win"):
            y = _mm(ops, x, self.Win.value)
        else:
            y = x * _gain(ops, self.gain.value)
        if spec.rec == "dense":
            y = y + _mm(ops, h_old, self.Wrec.value)
        elif spec.rec == "mix":
            y = y + h_old @ self.mix
        if spec.bias == "etp":
            y = y + _gain(ops, self.b.value)
        elif spec.bias == "plain":
            y = y + (self.b.value if ops == "mixed" else _gain(ops, self.b.value))
        self.last_y = y  # read by the next layer when the arch shares it
        if cross is not None:
            y = y + 0.5 * cross
        act = jnp.tanh if spec.act == "tanh" else _spike
        new = act(y)
        if spec.rec in ("leaky", "mix"):
            new = new + self.decay * h_old
        if spec.states == 2 and spec.adapt == "first":  # a first; h reads the new a
            self.a.value = 0.7 * self.a.value + 0.3 * act(y)
            new = new - 0.4 * self.a.value
        elif spec.states == 2:
            a_old = self.a.value
            new = new - 0.4 * a_old
            self.a.value = 0.7 * a_old + 0.3 * act(new if spec.adapt == "new" else h_old)
        if spec.count:  # a countdown that holds the state while it runs
            new = jnp.where(self.n.value > 0, h_old, new)
            self.n.value = jnp.where(new > 0.8, 2, jnp.maximum(self.n.value - 1, 0))
        self.h.value = new
        return h_old if spec.reads == "old" else self.h.value


class ArchNet(brainstate.nn.Module):
    def __init__(self, arch: Arch):
        super().__init__()
        rng = np.random.default_rng(arch.seed)
        self.arch = arch
        self.layers = [ArchLayer(spec, N, rng, arch.ops) for spec in arch.layers]
        if arch.shared and len(self.layers) == 2:
            first, second = self.layers
            if _plain_win(first) and _plain_win(second):
                second.Win = first.Win  # one ParamState feeding both layers
        self.Wo = _param(rng, (N, 2))
        if arch.feedback == "etp" and len(self.layers) > 1:
            self.Wfb = _param(rng, (N, N), 0.5)
        elif arch.feedback == "mix":
            self.fb_mix = jnp.asarray(0.5 * rng.standard_normal((N, N)))

    def _feedback(self, top_old):
        """The top layer's previous state as the first layer reads it (``Arch.feedback``)."""
        if self.arch.feedback == "add":
            return 0.5 * top_old
        if self.arch.feedback == "etp":
            return _mm(self.arch.ops, top_old, self.Wfb.value)
        return top_old @ self.fb_mix

    def update(self, x):
        olds = [layer.h.value for layer in self.layers]  # before any update of this step
        for i, layer in enumerate(self.layers):
            cross = olds[i - 1] if i and layer.spec.cross else None
            if not i and len(olds) > 1 and self.arch.feedback != "none":
                cross = self._feedback(olds[-1])
            if i and self.arch.shared:  # the lower layer's y feeds this layer too
                shared = 0.5 * self.layers[i - 1].last_y
                cross = shared if cross is None else cross + shared
            x = layer(x, cross)
        if self.arch.out == "etp" or self.arch.ops != "mixed":
            return _mm(self.arch.ops, x, self.Wo.value)
        return x @ self.Wo.value


def _plain_win(layer: ArchLayer) -> bool:
    return hasattr(layer, "Win") and not isinstance(layer.Win.value, dict)


def build(arch: Arch) -> ArchNet:
    net = ArchNet(arch)
    brainstate.nn.init_all_states(net, batch_size=arch.batch)
    return net


def inputs(arch: Arch, num_steps: int) -> jax.Array:
    shape = (num_steps, N) if arch.batch is None else (num_steps, arch.batch, N)
    rng = np.random.default_rng(arch.seed + 1000)
    return jnp.asarray(rng.standard_normal(shape))
