"""Online learning over 1, 2, 4, 8 devices (``mesh=``): steps per second and state bytes per
device, strong scaling (fixed batch) and weak scaling (batch grows with the devices).

    python bench/scaling.py                  # CPU host devices (XLA_FLAGS set per process)
    python bench/scaling.py --platform gpu   # the visible GPUs, when lent one

Each device count runs in its own process (``--xla_force_host_platform_device_count`` must be set
before jax starts). One measurement: ``GRUCell(32, n) -> Linear(n, 8)``, D-RTRL, one jitted
``lax.scan`` over T steps of (online gradient, SGD update), timed after a warm-up call
(median of 3). "State bytes per device" is the sum over every state leaf of its first
addressable shard (what one device holds of hidden states, traces and weights); peak device
memory is recorded too where the platform reports it (GPUs; host CPU devices do not).

On the 2-core CPU VM all host "devices" share the same two cores, so the numbers there show
the overhead of splitting, not a speed-up; the memory column is what scales.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def measure(devices: int, batch: int, hidden: int, steps: int) -> dict:
    import brainstate
    import jax
    import jax.numpy as jnp
    import numpy as np

    import etp_viz

    class Net(brainstate.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = etp_viz.nn.GRUCell(32, hidden)
            self.out = etp_viz.nn.Linear(hidden, 8)

        def update(self, x):
            return self.out(self.rnn(x))

    brainstate.random.seed(0)
    model = Net()
    brainstate.nn.init_all_states(model, batch_size=batch)
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:devices]), ("batch",))
    alg = etp_viz.D_RTRL(model, mesh=mesh)
    xs = jax.random.normal(jax.random.PRNGKey(0), (steps, batch, 32))
    alg.compile_graph(xs[0])
    params = alg.param_states

    def one(x):
        grads = brainstate.transform.grad(lambda: jnp.mean(alg(x) ** 2), params)()
        for key, state in params.items():
            state.value = jax.tree.map(lambda w, g: w - 1e-3 * g, state.value, grads[key])

    @brainstate.transform.jit
    def run(xs):
        brainstate.transform.for_loop(one, xs)

    run(xs)
    jax.block_until_ready(jax.tree.leaves(alg.etrace.value))
    times = []
    for _ in range(3):
        start = time.perf_counter()
        run(xs)
        jax.block_until_ready(jax.tree.leaves(alg.etrace.value))
        times.append(time.perf_counter() - start)
    per_device = 0
    for state in brainstate.graph.states(alg).values():
        for leaf in jax.tree.leaves(state.value):
            shards = getattr(leaf, "addressable_shards", None)
            per_device += shards[0].data.nbytes if shards else leaf.nbytes
    stats = jax.devices()[0].memory_stats() or {}
    return {
        "devices": devices,
        "batch": batch,
        "hidden": hidden,
        "steps": steps,
        "seconds": statistics.median(times),
        "steps_per_second": steps / statistics.median(times),
        "state_bytes_per_device": per_device,
        "peak_bytes_device0": stats.get("peak_bytes_in_use"),
        "platform": jax.devices()[0].platform,
    }


def child(args: argparse.Namespace) -> None:
    print(json.dumps(measure(args.devices, args.batch, args.hidden, args.steps)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platform", default="cpu", choices=["cpu", "gpu"])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch", type=int, default=64, help="strong scaling batch")
    parser.add_argument("--per-device", type=int, default=16, help="weak scaling batch/device")
    parser.add_argument("--counts", default="1,2,4,8")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--devices", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    rows = []
    for mode in ("strong", "weak"):
        for devices in (int(c) for c in args.counts.split(",")):
            batch = args.batch if mode == "strong" else args.per_device * devices
            env = dict(os.environ)
            if args.platform == "cpu":
                env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
                env["JAX_PLATFORMS"] = "cpu"
            command = [sys.executable, __file__, "--child", "--devices", str(devices)]
            command += ["--batch", str(batch), "--hidden", str(args.hidden)]
            command += ["--steps", str(args.steps)]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            row = {"mode": mode, **json.loads(done.stdout.strip().splitlines()[-1])}
            print(json.dumps(row), flush=True)
            rows.append(row)
    import jax

    record = {
        "date": datetime.date.today().isoformat(),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "versions": {"python": platform.python_version(), "jax": jax.__version__},
        "rows": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"scaling-{args.platform}-{record['date']}.json"
    out.write_text(json.dumps(record, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
