"""Runs in a subprocess with 8 host CPU devices (``tests/learn/test_sharding.py`` sets
``XLA_FLAGS=--xla_force_host_platform_device_count=8``); prints one JSON line of measurements.
Not a test module itself (importing it changes nothing).

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python -m tests.learn.sharded_run
"""

from __future__ import annotations

import json
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import etp_viz
from tests.learn import archs
from tests.learn.helpers import online_gradients


def relative(a, b) -> float:
    worst = 0.0
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        worst = max(worst, float(np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-30)))
    return worst


def gradients(mesh) -> dict:
    out = {}
    arch = archs.Arch(
        layers=(archs.Layer(states=2, rec="dense", act="spike"), archs.Layer(rec="leaky")),
        batch=16,
        seed=3,
    )
    xs = archs.inputs(arch, 6).astype(jnp.float32)
    for name, make in (
        ("d_rtrl", etp_viz.D_RTRL),
        ("es_d_rtrl", etp_viz.ES_D_RTRL),
        ("eprop", etp_viz.EProp),
    ):
        plain = make(archs.build(arch))
        plain.compile_graph(xs[0])
        sharded = make(archs.build(arch), mesh=mesh)
        sharded.compile_graph(xs[0])
        expected, got = online_gradients(plain, xs), online_gradients(sharded, xs)
        fractions = [
            leaf.addressable_shards[0].data.size / leaf.size
            for leaf in jax.tree.leaves(sharded.etrace.value)
        ]
        hidden = sharded.model.layers[0].h.value
        out[name] = {
            "rel": relative(got, expected),
            "trace_fractions": sorted(set(fractions)),
            "hidden_fraction": hidden.addressable_shards[0].data.size / hidden.size,
            "weights_replicated": all(
                s.value.sharding.is_fully_replicated for s in sharded.param_states.values()
            ),
        }
    return out


def count_host_reads(run) -> int:
    """Device arrays read on the host while ``run()`` runs: every path to a host value
    (``np.asarray``, ``float``, ``.item()``, ``jax.device_get``) goes through ``_value`` or
    ``__array__`` of ``ArrayImpl``. (Transfer guards do not fire for CPU host devices.)"""
    from jax._src.array import ArrayImpl

    count = [0]
    value = ArrayImpl._value
    array = ArrayImpl.__array__

    def counted_value(self):
        count[0] += 1
        return value.fget(self)

    def counted_array(self, *args, **kwargs):
        count[0] += 1
        return array(self, *args, **kwargs)

    ArrayImpl._value = property(counted_value)
    ArrayImpl.__array__ = counted_array
    try:
        run()
    finally:
        ArrayImpl._value = value
        ArrayImpl.__array__ = array
    return count[0]


def session_losses(mesh, steps_per_frame: int, steps: int) -> tuple[list, str, int]:
    from etp_viz.live import Session

    task = etp_viz.tasks.get_task("sine")
    model = task.suggested_model(hidden_size=8)

    def data(t):  # a batch of 8 phase-shifted sine streams
        x, y = task.step_data(t)
        shifts = jnp.arange(8, dtype=jnp.float32)[:, None] * 0.01
        return x[None, :] + shifts, jnp.broadcast_to(y, (8, *jnp.shape(y)))

    x0, _ = data(0)
    import brainstate

    brainstate.nn.init_all_states(model, batch_size=8)
    session = Session(
        model, x0, data=data, mesh=mesh, steps_per_frame=steps_per_frame, record_every=8
    )
    session.step(steps_per_frame)  # compiles the frame
    reads = count_host_reads(lambda: session.step(steps - steps_per_frame))
    losses = [float(v) for v in session.history.loss]
    return losses, session.history.meta["device"], reads


def main() -> None:
    warnings.simplefilter("ignore")
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("batch",))
    result = {"devices": len(jax.devices()), "gradients": gradients(mesh)}
    plain, _, _ = session_losses(None, 16, 32)
    sharded, device, _ = session_losses(mesh, 16, 32)
    result["session_rel"] = float(
        np.max(np.abs(np.asarray(sharded) - plain) / np.maximum(np.abs(plain), 1e-12))
    )
    result["session_steps"] = len(sharded)
    result["session_device"] = device
    # host reads of one frame of 16 steps and of one frame of 64 steps: equal when nothing
    # is read per step
    result["host_reads"] = [session_losses(mesh, n, 2 * n)[2] for n in (16, 64)]
    arch = archs.Arch(layers=(archs.Layer(),), batch=12, seed=0)
    try:
        etp_viz.D_RTRL(archs.build(arch), mesh=mesh).compile_graph(archs.inputs(arch, 1)[0])
        result["indivisible"] = "no error"
    except ValueError as error:
        result["indivisible"] = str(error)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
