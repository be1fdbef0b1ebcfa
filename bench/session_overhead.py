"""Cost of a UI-attached session step vs the bare algorithm step (target: <= 10 % more).

bare (dispatch): a jitted step doing ``alg(x)`` under ``brainstate.transform.grad`` + the optax
         SGD update (a user's plain training loop), one dispatch per step, no recording; on a
         second copy of the model with its own algorithm (no recording hook).
bare (scan): the same step body scanned over a frame of ``steps_per_frame`` stacked steps in one
         jitted call (the bare algorithm's own best way); no recording. Its frames come from
         the same data function as the session's (called per step on the host, stacked).
session: ``Session.run(background=False)``: per frame, data gathered on the host, one jitted
         scan with the recorder (loss, trace norms, df/dh-dh slices, gradient and update norms,
         kept on the device), one host transfer of the frame's record.
frame only: the session's compiled frame vs the bare scan, both on one frame of data already
         on the device, with no host work between frames (the device part of the overhead).

The overhead is against the faster bare variant. Each timed block ends on a host sync that
waits for the parameters (SGD's optimizer state is empty, so waiting on it alone measured only
the dispatch). The session runs with ``steps_per_frame='auto'`` (its default) and the bare scan
uses the frame length the session settled on. Models (``--model``):

    sine:    the SineRegression task's rate model (GRUCell(20, --hidden) + Linear), unbatched
    rnn256:  ValinaRNNCell(32, 256) + Linear(256, 4), batch 16, random stream
    lif:     the SineRegression task's spiking model (LIF(.., 128) + LeakyRateReadout), batch 16

Writes bench/results/session_overhead-<algorithm>-<model>-<host>.json.

    python bench/session_overhead.py --model rnn256 [--steps N] [--rounds 9] [--note TEXT]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
import warnings
from pathlib import Path

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import optax

from etp_viz.live.session import Session
from etp_viz.live.sources import build_algorithm


def bare_algorithm(args, session: Session):
    """A second copy of the model with its own algorithm, compiled like the session's but
    without the session's per-step recording hook (what a user's own loop would run)."""
    model, x0, _, _ = build(args.model, args.hidden, 1)
    alg = build_algorithm(model, args.algorithm, session.options["decay"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the readout's non-temporal-parameter notice
        alg.compile_graph(x0)
    return alg, dict(alg.param_states), session.loss_fn


def bare_stepper(alg, params, loss_fn):
    optimizer = optax.sgd(1e-2)

    def loss_of(x, y):
        return jnp.asarray(loss_fn(alg(x), y)).reshape(())

    @brainstate.transform.jit
    def step(opt_state, x, y):
        grads = brainstate.transform.grad(loss_of, params)(x, y)
        old = {k: s.value for k, s in params.items()}
        updates, opt_state = optimizer.update(grads, opt_state, old)
        for k, s in params.items():
            s.value = optax.apply_updates(old[k], updates[k])
        return opt_state

    opt_state = optimizer.init({k: s.value for k, s in params.items()})
    return step, opt_state


def bare_scanned(alg, params, loss_fn):
    optimizer = optax.sgd(1e-2)

    def loss_of(x, y):
        return jnp.asarray(loss_fn(alg(x), y)).reshape(())

    grad_fn = brainstate.transform.grad(loss_of, params)

    def body(opt_state, pair):
        grads = grad_fn(*pair)
        old = {k: s.value for k, s in params.items()}
        updates, opt_state = optimizer.update(grads, opt_state, old)
        for k, s in params.items():
            s.value = optax.apply_updates(old[k], updates[k])
        return opt_state, None

    @brainstate.transform.jit
    def frame(opt_state, xs, ys):
        return brainstate.transform.scan(body, opt_state, (xs, ys))[0]

    opt_state = optimizer.init({k: s.value for k, s in params.items()})
    return frame, opt_state


def build(name: str, hidden: int, steps: int):
    """``(model, x0, session data options, host pairs)`` of a benchmark model."""
    from etp_viz import nn, tasks

    if name == "sine":
        task = tasks.SineRegression()  # unbatched
        model = task.suggested_model(hidden, spiking=False)
        pairs = [tuple(np.asarray(a) for a in task.step_data(t)) for t in range(steps)]
        return model, task.example_input(), {"loss": task.loss}, pairs
    if name == "rnn256":
        model = tasks.RecurrentNet(nn.ValinaRNNCell(32, 256), nn.Linear(256, 4))
        brainstate.nn.init_all_states(model, batch_size=16)
        rng = np.random.default_rng(0)
        pairs = [
            (rng.standard_normal((16, 32), np.float32), rng.standard_normal((16, 4), np.float32))
            for _ in range(steps)
        ]
        return model, jnp.zeros((16, 32)), {}, pairs
    task = tasks.SineRegression(batch_size=16)
    model = task.suggested_model(128, spiking=True)
    pairs = [tuple(np.asarray(a) for a in task.step_data(t)) for t in range(steps)]
    return model, task.example_input(), {"loss": task.loss}, pairs


def time_block(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="sine", choices=["sine", "rnn256", "lif"])
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument(
        "--steps", type=int, default=None, help="steps per timed block (default: per model)"
    )
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--algorithm", default="d_rtrl")
    parser.add_argument("--steps-per-frame", default="auto")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--capacity", type=int, default=None, help="Session capacity (default: the session's)"
    )
    parser.add_argument(
        "--record-every", default=None, help="Session record_every (default: the session's)"
    )
    parser.add_argument("--note", default="", help="load note stored in the result")
    args = parser.parse_args()
    if args.steps is None:  # several 'auto' frames per block, a block of ~0.1-1 s
        args.steps = {"sine": 16384, "rnn256": 4096, "lif": 1024}[args.model]
    brainstate.random.seed(0)
    model, x0, options, pairs = build(args.model, args.hidden, args.steps)

    def data(t):  # a user's data function over prepared host pairs
        return pairs[t % len(pairs)]

    spf_option = (
        args.steps_per_frame if args.steps_per_frame == "auto" else int(args.steps_per_frame)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = Session(
            model,
            x0,
            algorithm=args.algorithm,
            data=data,  # the same data function as the bare scan
            steps_per_frame=spf_option,
            **options,
            **({} if args.record_every is None else {"record_every": int(args.record_every)}),
            **({} if args.capacity is None else {"capacity": args.capacity}),
        )
    session.run(args.steps, background=False)  # compile; 'auto' settles its frame length
    session.run(args.steps, background=False)
    spf = session.steps_per_frame
    device_pairs = [tuple(map(jnp.asarray, p)) for p in pairs]
    parts = bare_algorithm(args, session)
    bare_params = parts[1]
    step, opt_state = bare_stepper(*parts)
    frame, scan_opt_state = bare_scanned(*parts)

    def run_bare():
        nonlocal opt_state
        for x, y in device_pairs:
            opt_state = step(opt_state, x, y)
        jax.block_until_ready([s.value for s in bare_params.values()])

    def run_bare_scan():
        nonlocal scan_opt_state
        for start in range(0, args.steps, spf):
            # the host calls the data function per step and stacks each frame, as the session
            chunk = [data(t) for t in range(start, min(start + spf, args.steps))]
            xs = np.stack([p[0] for p in chunk])
            ys = np.stack([p[1] for p in chunk])
            scan_opt_state = frame(scan_opt_state, xs, ys)
        jax.block_until_ready([s.value for s in bare_params.values()])

    def run_session():
        session.run(args.steps, background=False)

    # the device part alone: one frame's data already on the device, no host work between
    # frames (the session's compiled fast frame vs the bare scan on the same frame)
    frame_x = jnp.asarray(np.stack([data(t)[0] for t in range(spf)]))
    frame_y = jnp.asarray(np.stack([data(t)[1] for t in range(spf)]))
    session_frame = session.compiled_frame(False, session.record_every)
    frames = max(1, args.steps // spf)

    def run_frame_only():  # on its own ring and optimizer state (the session's stay put)
        ring, opt = session.ring, session.opt_state
        for _ in range(frames):
            ring, opt, packed = session_frame(ring, opt, frame_x, frame_y, spf)
        jax.block_until_ready(packed)

    def run_bare_frame_only():
        nonlocal scan_opt_state
        for _ in range(frames):
            scan_opt_state = frame(scan_opt_state, frame_x, frame_y)
        jax.block_until_ready([s.value for s in bare_params.values()])

    for fn in (run_bare, run_bare_scan, run_frame_only, run_bare_frame_only):
        fn()  # compile
    runners = {
        "bare_dispatch": run_bare,
        "bare_scan": run_bare_scan,
        "session": run_session,
        "session_frame_only": run_frame_only,
        "bare_frame_only": run_bare_frame_only,
    }
    results: dict[str, list] = {}
    for _ in range(args.rounds):  # interleave to even out machine noise
        for name, fn in runners.items():
            steps = frames * spf if name.endswith("frame_only") else args.steps
            results.setdefault(name, []).append(time_block(fn, args.repeats) / steps)
    best = {name: min(times) for name, times in results.items()}
    bare = min(best["bare_dispatch"], best["bare_scan"])
    attached = best["session"]
    record = {
        "benchmark": "session_overhead",
        "algorithm": args.algorithm,
        "model": args.model,
        "hidden": args.hidden if args.model == "sine" else None,
        "steps_per_block": args.steps,
        "steps_per_frame": spf,
        "steps_per_frame_option": args.steps_per_frame,
        "record_every": session.record_every,
        "capacity": session.recorder.capacity,
        "bare_dispatch_step_us": best["bare_dispatch"] * 1e6,
        "bare_scan_step_us": best["bare_scan"] * 1e6,
        "bare_step_us": bare * 1e6,
        "session_step_us": attached * 1e6,
        "overhead_percent": 100 * (attached / bare - 1),
        # the same per round (session vs the faster bare of that round): the noise in the min
        "overhead_percent_median_round": 100
        * (
            statistics.median(
                s / min(d, c)
                for s, d, c in zip(
                    results["session"], results["bare_dispatch"], results["bare_scan"]
                )
            )
            - 1
        ),
        "target_percent": 10,
        # device part only (data on the device, no host work): the frame vs the bare scan
        "frame_only_step_us": best["session_frame_only"] * 1e6,
        "bare_frame_only_step_us": best["bare_frame_only"] * 1e6,
        "frame_only_overhead_percent": 100
        * (best["session_frame_only"] / best["bare_frame_only"] - 1),
        "machine": {
            "node": platform.node(),
            "processor": platform.processor(),
            "device": str(jax.devices()[0]),
        },
        "versions": {
            "python": platform.python_version(),
            "jax": jax.__version__,
            "brainstate": brainstate.__version__,
        },
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "load_average": list(os.getloadavg()),
        "uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        "cpu_count": os.cpu_count(),
        "note": args.note,
        "all_rounds_us": {k: [t * 1e6 for t in v] for k, v in results.items()},
    }
    print(json.dumps(record, indent=2))
    out = (
        Path(__file__).parent
        / "results"
        / f"session_overhead-{args.algorithm}-{args.model}-{platform.node()}.json"
    )
    out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
