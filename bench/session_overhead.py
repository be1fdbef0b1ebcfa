"""Cost of a UI-attached session step vs the bare algorithm step (target: <= 10 % more).

bare:    a jitted step doing ``alg(x)`` under ``brainstate.transform.grad`` + the optax SGD update
         (what a user's own training loop does), one dispatch per step, no recording.
session: ``Session.step`` with the recorder (norms of loss, traces, gradients, updates written
         into on-device ring buffers) and one host drain per frame of ``steps_per_frame`` steps.

Both block on the result at the end of each timed block of steps. Writes
bench/results/session_overhead-<host>.json.

    python bench/session_overhead.py [--hidden 64] [--steps 400] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
import warnings
from pathlib import Path

import brainstate
import jax
import jax.numpy as jnp
import optax

from etp_viz.__main__ import _fallback_sine
from etp_viz.explorer.session import Session


def bare_stepper(session: Session):
    alg, params, loss_fn = session.algorithm, session.params, session.loss_fn
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


def time_block(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--algorithm", default="d_rtrl")
    args = parser.parse_args()
    brainstate.random.seed(0)
    model, x0, data = _fallback_sine(args.hidden)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = Session(
            model, x0, algorithm=args.algorithm, data=data, steps_per_frame=20, capacity=1024
        )
    pairs = [tuple(map(jnp.asarray, data(t))) for t in range(args.steps)]
    session.set_data(lambda t: pairs[t % len(pairs)])
    step, opt_state = bare_stepper(session)

    def run_bare():
        nonlocal opt_state
        for x, y in pairs:
            opt_state = step(opt_state, x, y)
        jax.block_until_ready(opt_state)

    def run_session():
        session.step(args.steps)

    run_bare()
    run_session()  # compile both
    results = {}
    for _ in range(2):  # interleave to even out machine noise
        results.setdefault("bare", []).append(time_block(run_bare, args.repeats) / args.steps)
        results.setdefault("session", []).append(time_block(run_session, args.repeats) / args.steps)
    bare, attached = min(results["bare"]), min(results["session"])
    record = {
        "benchmark": "session_overhead",
        "algorithm": args.algorithm,
        "hidden": args.hidden,
        "steps_per_block": args.steps,
        "steps_per_frame": session.steps_per_frame,
        "bare_step_us": bare * 1e6,
        "session_step_us": attached * 1e6,
        "overhead_percent": 100 * (attached / bare - 1),
        "target_percent": 10,
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
    }
    print(json.dumps(record, indent=2))
    out = (
        Path(__file__).parent
        / "results"
        / f"session_overhead-{args.algorithm}-{platform.node()}.json"
    )
    out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
