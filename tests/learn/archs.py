"""Generated recurrent architectures for the gradient-claim property tests (issue 12 G).

An :class:`Arch` describes a stack of one or two layers of ``N`` units; :class:`ArchNet` builds
it as a brainstate module. Each layer picks

* ``states``: one hidden state, or two that read each other element-wise (a multi-state
  group: ``v`` and an adaptation ``a``);
* ``rec``: the recurrence -- ``none``, ``leaky`` (element-wise decay), ``dense`` (an ETP
  ``matmul`` of ``h^{t-1}``), ``concat`` (one ETP ``matmul`` of ``[x, h^{t-1}]``) or ``mix``
  (a plain ``h^{t-1} @ M`` with a constant ``M``: a position-coupling op);
* ``inp``: the input op, an ETP ``matmul`` or an ETP ``element_wise`` gain; ``embed``
  (first layer only): the layer reads integer token ids (``VOCAB`` of them; :func:`inputs`
  then gives integers) through an ETP ``embedding`` of a ``(VOCAB, N)`` table, which is the
  input op (with ``rec="concat"`` the embedded vector is what the ``[x, h]`` matmul reads);
* ``bias``: none, an ETP ``element_wise`` bias of shape ``(N,)`` (broadcast over the batch)
  or a plain ``ParamState`` added with ``+``;
* ``act``: ``tanh``, a smooth spike (``spike``: a sigmoid) or a Heaviside spike with a
  surrogate derivative: of the pre-activation, at 0, ``relu_grad`` (braintools'
  ``surrogate.ReluGrad``, which binds the non-standard primitive
  ``heaviside_surrogate_gradient``), ``jvp`` (a ``jax.custom_jvp`` Heaviside whose derivative
  is a fast sigmoid's) and ``vjp`` (the same through ``jax.custom_vjp``); or of an LIF
  neuron's membrane, at ``THRESHOLD``, with a soft reset that puts the surrogate derivative on
  the h -> h path (the membrane leaks whatever ``rec`` says): ``lif`` (braintools'
  ``surrogate.sigmoid``; the classic pattern whose unknown primitive the compiler once cut
  from that path) resets by the spike of the new potential, ``v = y + decay * h^{t-1}``,
  ``h = v - THRESHOLD * spike(v)``; ``lif_vjp`` (the ``custom_vjp`` Heaviside) by the
  previous step's spike, as ``etp_viz.nn.LIF`` does,
  ``h = decay * (h^{t-1} - THRESHOLD * spike(h^{t-1})) + y``. (A layer that never fires has a
  state of exact zeros, whose zero gradients the property tests would take for structural
  ones: hence the threshold 0 and the wide surrogates.) A ``custom_vjp`` has no forward-mode
  derivative: the learners take their Jacobian products through it in reverse
  (:mod:`etp_viz.learn.autodiff`);
* ``norm``: a LayerNorm-style normalisation of the pre-activation across the ``N`` units
  (before ``act``): ``ln`` hand-written without parameters, ``affine`` hand-written with a
  learnable gain and bias (ETP ``element_wise``), ``brainstate`` a ``brainstate.nn.LayerNorm``
  (its scale and bias plain ``ParamState`` leaves with ``ops="mixed"``, none otherwise). A
  normalisation cancels a shift of the pre-activation along the units, which can make the
  traces of the weights below it zero by structure (claimed ``none``);
* ``cond``: the pre-activation (input op, recurrence, bias) computed inside a ``cond`` at the
  top level of the update, ``lax`` (``jax.lax.cond``) or ``brainstate``
  (``brainstate.transform.cond``), on a runtime predicate (the sign of the input's sum; for
  token ids their parity); the false branch is ``-0.5 * pre(x, 0.5 * h^{t-1})``, both
  branches with the layer's ETP ops (with ``ops="plain"`` their plain ops, which
  ``lift=True`` lifts once it has if-converted the ``cond``);
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

``Arch.wiring`` (two layers): ``"stack"`` (default) feeds the first layer's output to the
second as its input; ``"siblings"`` gives both layers the model's input and adds the first
layer's output into the second's update through an ETP ``matmul`` with its own weight
``Wlat`` (a second group reading the first through a weight op, issue 41). With top-down
``feedback`` that is two groups each reading the other through a weight op, the output reading
the second only: the first group's weights reach the output only through ``Wlat`` (a first
layer that embeds tokens keeps ``"stack"``: the second cannot read token ids).

``Arch.shared`` makes the second layer reuse the first layer's input matrix and also adds the
first layer's ETP output ``y`` into its update (one weight feeding two layers: two relations
of one ParamState, and one relation feeding two hidden groups).

The output is an ETP or a plain readout of the last layer.

``Arch.ops`` rewrites every op on a parameter at once (the twins of issue 32's lifting):
``"etp"`` writes each one with an ETP op (a plain bias through ``element_wise``, a matrix and
its bias in one ParamState as one ``matmul(x, W, b)``, a plain readout as ``matmul``);
``"plain"`` writes each one in plain jnp (``x @ W``, ``x * gain``, ``y + b``, an embedding as
``one_hot(ids) @ table``), which ``lift=True`` turns back into the ``"etp"`` twin. The default
``"mixed"`` is as described above.
"""

from __future__ import annotations

import dataclasses

import brainstate
import braintools
import jax
import jax.numpy as jnp
import numpy as np

import etp_viz

N = 3
RECS = ("none", "leaky", "dense", "concat", "mix")
FEEDBACKS = ("none", "add", "etp", "mix")
ACTS = ("tanh", "spike", "relu_grad", "jvp", "vjp", "lif", "lif_vjp")
NORMS = ("none", "ln", "affine", "brainstate")
CONDS = ("none", "lax", "brainstate")
#: the LIF neurons' threshold (and their soft reset's size)
THRESHOLD = 0.5
#: the number of token ids of an ``inp="embed"`` layer
VOCAB = 5


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
    norm: str = "none"
    cond: str = "none"


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
    #: two layers: ``"stack"`` or ``"siblings"`` (module docstring)
    wiring: str = "stack"

    @property
    def siblings(self) -> bool:
        """Both layers read the model's input; the first reaches the second through ``Wlat``."""
        return self.wiring == "siblings" and len(self.layers) == 2 and self.layers[0].inp != "embed"

    def describe(self) -> str:
        parts = [
            f"L{i}(S={la.states},rec={la.rec},inp={la.inp},bias={la.bias},act={la.act},"
            f"reads={la.reads},adapt={la.adapt}{',cross' if la.cross else ''}"
            f"{',count' if la.count else ''}"
            f"{f',norm={la.norm}' if la.norm != 'none' else ''}"
            f"{f',cond={la.cond}' if la.cond != 'none' else ''})"
            for i, la in enumerate(self.layers)
        ]
        shared = ", shared Win" if self.shared else ""
        feedback = f", feedback={self.feedback}" if self.feedback != "none" else ""
        ops = f", ops={self.ops}" if self.ops != "mixed" else ""
        ops += ", siblings" if self.siblings else ""
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


def _fast_sigmoid_grad(x):
    return 1.0 / (1.0 + 2.0 * jnp.abs(x)) ** 2


@jax.custom_jvp
def _heaviside_jvp(x):
    return (x >= 0).astype(x.dtype)


@_heaviside_jvp.defjvp
def _heaviside_jvp_rule(primals, tangents):
    (x,), (t,) = primals, tangents
    return _heaviside_jvp(x), t * _fast_sigmoid_grad(x)


@jax.custom_vjp
def _heaviside_vjp(x):
    return (x >= 0).astype(x.dtype)


def _heaviside_vjp_fwd(x):
    return _heaviside_vjp(x), x


def _heaviside_vjp_bwd(x, g):
    return (g * _fast_sigmoid_grad(x),)


_heaviside_vjp.defvjp(_heaviside_vjp_fwd, _heaviside_vjp_bwd)
#: a derivative 0.1 * max(6 - |v|, 0): the default support |v| < 1 leaves whole layers
#: without one (a zero that the property tests would take for a structural one)
_relu_grad = braintools.surrogate.ReluGrad(alpha=0.1, width=6.0)
#: Heaviside spikes with a surrogate derivative, by ``Layer.act``
_HEAVISIDES = {
    "relu_grad": _relu_grad,
    "jvp": _heaviside_jvp,
    "vjp": _heaviside_vjp,
    "lif": braintools.surrogate.sigmoid,
    "lif_vjp": _heaviside_vjp,
}


def _activation(act: str):
    """``Layer.act`` as a function of the pre-activation (an LIF's membrane: it spikes at
    THRESHOLD; any other Heaviside at 0)."""
    if act == "tanh":
        return jnp.tanh
    if act == "spike":
        return _spike
    heaviside = _HEAVISIDES[act]
    threshold = THRESHOLD if act.startswith("lif") else 0.0
    return lambda v: heaviside(v - threshold)


def _layer_norm(y, eps: float = 1e-5):
    """``(y - mean) / sqrt(var + eps)`` across the units (the last axis)."""
    centred = y - jnp.mean(y, axis=-1, keepdims=True)
    return centred / jnp.sqrt(jnp.mean(centred**2, axis=-1, keepdims=True) + eps)


def _predicate(x):
    """The ``cond``'s runtime predicate: the sign of the input's sum (token ids: parity)."""
    if jnp.issubdtype(x.dtype, jnp.integer):
        return jnp.sum(x) % 2 == 0
    return jnp.sum(x) > 0


def _brainstate_layer_norm(rng: np.random.Generator, affine: bool) -> brainstate.nn.LayerNorm:
    """A ``brainstate.nn.LayerNorm`` over the units in the default float dtype (brainstate's
    own is float32, even under x64: its parameters too), with a drawn scale and bias when
    ``affine`` (plain leaves, which no ``ops`` twin would lift alike: none in the twins)."""
    dtype = jnp.result_type(float)
    norm = brainstate.nn.LayerNorm(N, use_scale=affine, use_bias=affine, dtype=dtype)
    if affine:
        norm.weight.value = {
            "scale": jnp.asarray(rng.uniform(0.5, 1.5, N), dtype),
            "bias": jnp.asarray(0.3 * rng.standard_normal(N), dtype),
        }
    return norm


class ArchLayer(brainstate.nn.Module):
    def __init__(self, spec: Layer, num_in: int, rng: np.random.Generator, ops: str = "mixed"):
        super().__init__()
        self.spec = spec
        self.ops = ops
        if spec.inp == "embed":  # the input op; a concat matmul reads the embedded vector
            self.table = _param(rng, (VOCAB, N), 0.8)
            num_in = N
        if spec.rec == "concat":
            self.Wcat = _param(rng, (num_in + N, N), 0.5)
        elif spec.inp == "wnorm":
            self.v = _param(rng, (num_in, N))
            self.g = brainstate.ParamState(jnp.asarray(rng.uniform(0.5, 1.5, N)))
        elif spec.bias == "mixed" and spec.inp != "embed":
            self.Win = brainstate.ParamState(
                {"weight": _param(rng, (num_in, N)).value, "bias": _param(rng, (N,), 0.3).value}
            )
        elif spec.inp == "dense" or num_in != N:
            self.Win = _param(rng, (num_in, N))
        elif spec.inp == "elemwise":
            self.gain = _param(rng, (N,))
        if spec.rec == "dense":
            self.Wrec = _param(rng, (N, N), 0.5)
        elif spec.rec == "mix":
            self.mix = jnp.asarray(0.4 * rng.standard_normal((N, N)))
        if spec.bias in ("etp", "plain"):
            self.b = _param(rng, (N,), 0.3)
        self.decay = jnp.asarray(rng.uniform(0.4, 0.9, N))
        if spec.norm == "affine":
            self.ln_gain = brainstate.ParamState(jnp.asarray(rng.uniform(0.5, 1.5, N)))
            self.ln_bias = _param(rng, (N,), 0.3)
        elif spec.norm == "brainstate":
            self.ln = _brainstate_layer_norm(rng, affine=ops == "mixed")

    def init_state(self, batch_size=None, **kwargs):
        shape = (N,) if batch_size is None else (batch_size, N)
        self.h = brainstate.HiddenState(jnp.full(shape, 0.1))
        if self.spec.states == 2:
            self.a = brainstate.HiddenState(jnp.zeros(shape))
        if self.spec.count:
            self.n = brainstate.HiddenState(jnp.zeros(shape, jnp.int32))

    def reset_state(self, batch_size=None, **kwargs):
        self.init_state(batch_size)

    def _embed(self, ids):
        if self.ops == "plain":
            return jax.nn.one_hot(ids, VOCAB, dtype=self.table.value.dtype) @ self.table.value
        return etp_viz.embedding(ids, self.table.value)

    def _pre(self, x, h_old):
        """The pre-activation: the input op, the recurrence and the bias."""
        spec, ops = self.spec, self.ops
        if spec.inp == "embed":
            x = self._embed(x)
        if spec.rec == "concat":
            y = _mm(ops, jnp.concatenate([x, h_old], axis=-1), self.Wcat.value)
        elif spec.inp == "embed":
            y = x
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
        return y

    def _pre_in_cond(self, x, h_old):
        """:meth:`_pre` inside a top-level ``cond`` (``Layer.cond``)."""
        branches = (
            lambda: self._pre(x, h_old),
            lambda: -0.5 * self._pre(x, 0.5 * h_old),
        )
        if self.spec.cond == "lax":
            return jax.lax.cond(_predicate(x), *branches)
        return brainstate.transform.cond(_predicate(x), *branches)

    def _normalise(self, y):
        """``Layer.norm`` across the units."""
        norm = self.spec.norm
        if norm == "brainstate":
            return self.ln(y)
        y = _layer_norm(y)
        if norm == "affine":
            y = y * _gain(self.ops, self.ln_gain.value) + _gain(self.ops, self.ln_bias.value)
        return y

    def update(self, x, cross=None):
        spec = self.spec
        h_old = self.h.value
        y = self._pre(x, h_old) if spec.cond == "none" else self._pre_in_cond(x, h_old)
        self.last_y = y  # read by the next layer when the arch shares it
        if cross is not None:
            y = y + 0.5 * cross
        if spec.norm != "none":
            y = self._normalise(y)
        act = _activation(spec.act)
        if spec.act == "lif":  # a membrane that leaks, soft reset by its new spike
            new = y + self.decay * h_old
            new = new - THRESHOLD * act(new)
        elif spec.act == "lif_vjp":  # reset by the previous step's spike (etp_viz.nn.LIF)
            new = self.decay * (h_old - THRESHOLD * act(h_old)) + y
        else:
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
        if arch.siblings:
            self.Wlat = _param(rng, (N, N), 0.5)

    def _feedback(self, top_old):
        """The top layer's previous state as the first layer reads it (``Arch.feedback``)."""
        if self.arch.feedback == "add":
            return 0.5 * top_old
        if self.arch.feedback == "etp":
            return _mm(self.arch.ops, top_old, self.Wfb.value)
        return top_old @ self.fb_mix

    def update(self, x):
        olds = [layer.h.value for layer in self.layers]  # before any update of this step
        given = x
        for i, layer in enumerate(self.layers):
            cross = olds[i - 1] if i and layer.spec.cross else None
            if not i and len(olds) > 1 and self.arch.feedback != "none":
                cross = self._feedback(olds[-1])
            if i and self.arch.shared:  # the lower layer's y feeds this layer too
                shared = 0.5 * self.layers[i - 1].last_y
                cross = shared if cross is None else cross + shared
            if i and self.arch.siblings:  # the lower layer through a weight op, x as input
                lateral = _mm(self.arch.ops, x, self.Wlat.value)
                cross = lateral if cross is None else cross + lateral
                x = given
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
    """``num_steps`` inputs: normal floats, or token ids when the first layer embeds them."""
    rng = np.random.default_rng(arch.seed + 1000)
    steps = (num_steps,) if arch.batch is None else (num_steps, arch.batch)
    if arch.layers[0].inp == "embed":
        return jnp.asarray(rng.integers(0, VOCAB, steps), jnp.int32)
    return jnp.asarray(rng.standard_normal((*steps, N)))
