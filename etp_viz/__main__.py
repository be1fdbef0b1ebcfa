"""Command line: ``python -m etp_viz demo`` and ``python -m etp_viz inspect module:factory``.

``demo`` compiles a small recurrent model on a teaching task, runs N online-learning steps with
a progress bar, writes one offline HTML file (the graph + the recorded history) and prints a
summary: relations, exclusions with their reasons, final loss, and gradient fidelity. Parts that
cannot run in this installation are named, never faked.

``check module:factory --claims claims.json`` fails (exit 1), naming the weight, when a
gradient claim differs from the snapshot ``graph.claims_json()`` wrote (``--write`` writes it).

``inspect`` imports ``module:factory`` (a function returning ``model`` or ``(model, x)``),
compiles it and prints ``graph.explain()``; ``--out file.html`` also writes the explorer.

Examples
--------
.. code-block:: console

    $ python -m etp_viz demo --out demo.html    # the task's recipe: optimizer, rate, steps
    $ python -m etp_viz demo --task delayed_recall --algorithm es_d_rtrl
    $ python -m etp_viz inspect mypkg.models:make_gru --out gru.html
"""

from __future__ import annotations

import argparse
import importlib
import io
import sys
import time
import warnings
from collections.abc import Sequence
from typing import Any

from etp_viz.learn.registry import DEFAULT_LEARNER, learner_names

__all__ = ["main"]

#: Every learner the demo runs: the registry's names (one list for every entry point).
ALGORITHMS = learner_names()


def _progress(done: int, total: int, started: float, loss: float | None) -> None:
    width = 30
    filled = int(width * done / max(total, 1))
    rate = done / max(time.perf_counter() - started, 1e-9)
    tail = f" loss {loss:.4g}" if loss is not None else ""
    sys.stderr.write(
        f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} ({rate:.0f} steps/s){tail}"
    )
    sys.stderr.flush()


def _demo_setup(task_name: str) -> tuple[Any, Any, dict[str, Any], str]:
    """``(model, x0, session data options, description)`` for a teaching task's name."""
    from etp_viz import tasks

    try:
        task = tasks.get_task(task_name)
    except (KeyError, ValueError) as error:
        raise SystemExit(str(error)) from None
    model = task.suggested_model()
    return model, task.example_input(), {"task": task}, type(task).__name__


def _print_graph_summary(graph: Any, out: Any, algorithm: str = DEFAULT_LEARNER) -> None:
    status = dict(getattr(graph, "weight_status", {}) or {})
    try:
        claims = graph.gradient_claims(algorithm)
    except (AttributeError, ValueError):  # a graph or algorithm that makes no claims
        claims = {}
    relations = getattr(graph, "hidden_param_op_relations", ()) or ()
    print(
        f"Compiled graph: {len(relations)} relation(s), "
        f"{len(getattr(graph, 'hidden_groups', ()) or ())} hidden group(s).",
        file=out,
    )
    if claims:
        print(f"Gradient claims ({algorithm}; etp_viz.verify checks them against BPTT):", file=out)
    for path, state in status.items():
        name = ".".join(map(str, path))
        claim = claims.get(name) if claims else None
        if claim is None:
            print(f"  weight {name}: {state}", file=out)
            continue
        from etp_viz.view.weights import status_text

        print(f"  weight {name}: {status_text(str(state), claim.kind)}", file=out)
        if claim.kind != "exact" and claim.reason:
            print(f"      {claim.reason}", file=out)
    excluded = [
        r
        for r in getattr(graph, "diagnostics", ())
        if "excluded" in str(r.kind)
        or str(r.kind) in ("param_not_used_by_etp", "trainable_invar_not_paramstate")
    ]
    if excluded:
        print("Exclusions:", file=out)
        for record in excluded:
            print(f"  - [{record.kind}] {record.message}", file=out)
    else:
        print("Exclusions: none.", file=out)


def run_demo(args: argparse.Namespace, out: Any = sys.stdout) -> int:
    """The ``demo`` subcommand; returns the exit status."""
    import etp_viz
    from etp_viz.compiler import compile_etrace_graph

    model, x0, data_options, description = _demo_setup(args.task)
    if args.steps is None:
        args.steps = data_options["task"].recipe().steps
    print(f"etp_viz demo: {description}, {args.algorithm}, {args.steps} steps", file=out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # every compiler decision is printed below
        graph = compile_etrace_graph(model, x0)
    _print_graph_summary(graph, out, args.algorithm)
    # headless without the [explorer] extra
    from etp_viz.explorer.live_explorer import build_explorer

    explorer, failure = None, None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            explorer = build_explorer(
                model,
                x0,
                algorithm=args.algorithm,
                optimizer=args.optimizer,
                learning_rate=args.learning_rate,
                update=args.update,
                fidelity_every=args.fidelity_every,
                **data_options,
            )
    except Exception as error:  # noqa: BLE001 - say what is missing, still write the graph
        failure = f"{type(error).__name__}: {error}"
    if explorer is None:
        print(f"Online learning unavailable: {failure}", file=out)
        print("Writing the static explorer (graph only, no recorded history).", file=out)
        explorer = etp_viz.Explorer(graph)
    else:
        options = explorer.session.options
        print(
            f"Training: {options['optimizer']}, learning rate {options['learning_rate']:g}, "
            f"updates per {options['update']} (the task's recipe unless given)",
            file=out,
        )
        _run_with_progress(explorer.session, args.steps)
        print(explorer.session.summary(), file=out)
        _print_last_episode(explorer.session, data_options["task"], out)
        unavailable = explorer.history.meta.get("unavailable", [])
        if unavailable:
            print("Not recorded: " + "; ".join(unavailable), file=out)
    path = explorer.save_html(args.out)
    print(f"Wrote {path}", file=out)
    return 0 if failure is None and not getattr(explorer, "session", None).error else 1


def _print_last_episode(session: Any, task: Any, out: Any) -> None:
    """The loss averaged over the last episode's labelled steps, with the task's chance."""
    import numpy as np

    loss = np.asarray(session.history.loss, np.float64)[-task.n_steps :]
    labelled = loss[loss > 0] if task.is_classification else loss
    if labelled.size:
        print(
            f"loss over the last episode {labelled.mean():.4g} (chance {task.chance_loss:.4g})",
            file=out,
        )


def _run_with_progress(session: Any, steps: int) -> None:
    started = time.perf_counter()
    done = 0
    frame = max(1, min(session.steps_per_frame, steps))
    while done < steps and not session.halted:
        try:
            session.step(min(frame, steps - done))
        except Exception as error:  # noqa: BLE001 - reported in the summary
            session.error = session.error or f"{type(error).__name__}: {error}"
            break
        done = session.history.num_steps
        loss = float(session.history.loss[-1]) if done else None
        _progress(done, steps, started, loss)
    sys.stderr.write("\n")


def _load_factory(spec: str) -> tuple[Any, tuple]:
    if ":" not in spec:
        raise SystemExit(f"Expected 'module:factory', got {spec!r} (e.g. mypkg.models:make_gru).")
    module_name, attribute = spec.split(":", 1)
    sys.path.insert(0, ".")
    factory = getattr(importlib.import_module(module_name), attribute)
    made = factory()
    if isinstance(made, tuple):
        return made[0], tuple(made[1:])
    raise SystemExit(
        f"{spec} returned a {type(made).__name__}; return `(model, example_input)` so the "
        "model can be traced for one step."
    )


def run_inspect(args: argparse.Namespace, out: Any = sys.stdout) -> int:
    """The ``inspect`` subcommand."""
    import brainstate

    from etp_viz.compiler import compile_etrace_graph

    model, inputs = _load_factory(args.factory)
    if not model.states(brainstate.HiddenState):
        brainstate.nn.init_all_states(model)  # a factory may return an uninitialised model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = compile_etrace_graph(model, *inputs)
    _print_graph_summary(graph, out)
    buffer = io.StringIO()
    graph.explain(file=buffer)
    print(buffer.getvalue(), file=out)
    if args.out:
        import etp_viz

        print(f"Wrote {etp_viz.Explorer(graph).save_html(args.out)}", file=out)
    return 0


def run_check(args: argparse.Namespace, out: Any = None) -> int:
    """The ``check`` subcommand: 1, naming each weight, when a claim differs from the
    snapshot (``--write``: write the snapshot instead)."""
    import brainstate

    out = sys.stdout if out is None else out

    from etp_viz.testing import assert_claims

    model, inputs = _load_factory(args.factory)
    if not model.states(brainstate.HiddenState):
        brainstate.nn.init_all_states(model)
    if args.write:
        from etp_viz.compiler import compile_etrace_graph

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = compile_etrace_graph(model, *inputs)
        graph.claims_json(args.algorithm or [DEFAULT_LEARNER], path=args.claims)
        print(f"Wrote the claims of {args.factory} to {args.claims}", file=out)
        return 0
    algorithm = args.algorithm[0] if args.algorithm and len(args.algorithm) == 1 else None
    try:
        assert_claims(model, inputs, args.claims, algorithm)
    except AssertionError as error:
        print(str(error), file=out)
        return 1
    print(f"The gradient claims of {args.factory} match {args.claims}.", file=out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m etp_viz", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="compile, learn online, write an offline HTML")
    demo.add_argument("--task", default="sine", help="teaching task (default: sine)")
    demo.add_argument("--algorithm", default=DEFAULT_LEARNER, choices=ALGORITHMS)
    demo.add_argument(
        "--steps", type=int, default=None, help="default: the task's recipe's step budget"
    )
    demo.add_argument("--optimizer", default=None, help="optax name (default: the recipe's)")
    demo.add_argument("--learning-rate", type=float, default=None, help="default: the recipe's")
    demo.add_argument(
        "--update", default=None, choices=("step", "episode"), help="default: the recipe's"
    )
    demo.add_argument(
        "--fidelity-every",
        type=int,
        default=50,
        help="measure gradient fidelity vs BPTT every K steps (0: off; default 50)",
    )
    demo.add_argument("--out", default="demo.html")
    inspect = commands.add_parser("inspect", help="compile a user's model and explain it")
    inspect.add_argument("factory", help="module:function returning (model, example_input)")
    inspect.add_argument("--out", default=None, help="also write the explorer HTML")
    check = commands.add_parser("check", help="fail when a weight's gradient claim changes")
    check.add_argument("factory", help="module:function returning (model, example_input)")
    check.add_argument("--claims", required=True, help="the snapshot (graph.claims_json())")
    check.add_argument(
        "--algorithm", action="append", help="check (or write) only this algorithm's claims"
    )
    check.add_argument("--write", action="store_true", help="write the snapshot instead")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m etp_viz`` and the ``etp-viz`` script."""
    args = build_parser().parse_args(argv)
    commands = {"demo": run_demo, "inspect": run_inspect, "check": run_check}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
