"""Command line: ``python -m etp_viz demo``, ``inspect`` and ``check``.

``demo`` compiles a small recurrent model on a teaching task, runs N online-learning steps with
a progress bar, writes one offline HTML file (the graph + the recorded history) and prints a
summary: relations, exclusions with their reasons, final loss, and gradient fidelity with what
it means. Parts that cannot run in this installation are named, never faked. Without ``--out``
it writes ``demo.html`` in the current directory and refuses to replace an existing one
(``--force`` replaces it; an explicit ``--out`` names the file to write, existing or not).

``inspect`` imports ``module:factory`` (a function returning ``(model, example_input)``),
compiles it and prints ``graph.explain()``; ``--out file.html`` also writes the explorer.

``check module:factory --claims claims.json`` fails (exit 1), naming the weight, when a
gradient claim differs from the snapshot ``graph.claims_json()`` wrote (``--write`` writes it).

Examples
--------
.. code-block:: console

    $ python -m etp_viz demo --out demo.html    # the task's recipe: optimizer, rate, steps
    $ python -m etp_viz demo --task delayed_recall --algorithm es_d_rtrl --out recall.html
    $ python -m etp_viz inspect mypkg.models:make_gru --out gru.html
    $ python -m etp_viz check mypkg.models:make_gru --claims tests/claims.json
"""

from __future__ import annotations

import argparse
import importlib
import io
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from etp_viz.compiler.graph import ETraceGraph
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


def _claims_of(graph: Any, algorithm: str) -> Any:
    """``graph.gradient_claims(algorithm)`` (a mapping leaf name → claim whose ``get`` also
    takes a weight's path), or ``{}`` for a graph or learner without claims."""
    try:
        return graph.gradient_claims(algorithm)
    except (AttributeError, ValueError):
        return {}


def _print_graph_summary(graph: ETraceGraph, out: Any, algorithm: str = DEFAULT_LEARNER) -> None:
    status = dict(graph.weight_status or {})
    claims = _claims_of(graph, algorithm)
    relations = graph.hidden_param_op_relations
    from etp_viz.compiler.claims.plain import graph_names, plain_reason

    names = graph_names(graph)  # an op is named by its weight, not its equation number
    print(
        f"Compiled graph: {len(relations)} relation(s), "
        f"{len(graph.hidden_groups)} hidden group(s).",
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
            print(f"      {plain_reason(claim.reason, names).summary}", file=out)
    excluded = [
        r
        for r in graph.diagnostics
        if "excluded" in str(r.kind)
        or str(r.kind) in ("param_not_used_by_etp", "trainable_invar_not_paramstate")
    ]
    if excluded:
        print("Exclusions (graph.explain(codes=True) has the compiler's records):", file=out)
        for record in excluded:
            print(f"  - {plain_reason(record.message, names).summary}", file=out)
    else:
        print("Exclusions: none.", file=out)


def output_path(requested: str | None, force: bool, default: str = "demo.html") -> Path:
    """Where ``demo`` writes its page, refusing to replace a file nobody named.

    ``--out PATH`` names the file: it is written, replacing one that is there (the run says
    so). Without ``--out`` the page is ``default`` in the current directory, and an existing
    file there is kept (``SystemExit`` before anything runs) unless ``force``.

    >>> output_path("run.html", force=False).name
    'run.html'
    """
    if requested is not None:
        return Path(requested)
    path = Path(default)
    if path.exists() and not force:
        raise SystemExit(
            f"{path.resolve()} already exists and the demo replaces a file only when told to: "
            f"pass --out {default} (or --force) to overwrite it, or --out another.html."
        )
    return path


def _weight_name(claim: Any, leaf: str) -> str:
    """The weight (``ParamState``) a leaf's claim belongs to, as a dotted name."""
    path = claim.weight_path or leaf
    return ".".join(map(str, path)) if isinstance(path, tuple) else str(path)


def _kind(claim: Any) -> str | None:
    return claim.kind if claim is not None else None


def fidelity_explanation(
    record: dict[str, Any], algorithm: str, claims: Any, reference: str | None = None
) -> str:
    """Plain words for the last fidelity record: which learner, against what reference, and
    why its cosine is (or is not) close to 1, from the learner's gradient claims.

    ``reference`` names the meter's gradient (default: BPTT over the record's window).

    >>> fidelity_explanation({"cosine": 1.0, "window": 20}, "rtrl", {})[:36]
    "What the cosine means: rtrl's online"
    """
    cosine = record["cosine"]
    reference = reference or f"BPTT over the last {record.get('window', '?')} steps"
    lines = [
        f"What the cosine means: {algorithm}'s online gradient against {reference}, both "
        "replayed over the same steps from the same state with the same weights; 1 = the same "
        "direction, 0 = unrelated."
    ]
    inexact = sorted(
        {_weight_name(claim, leaf) for leaf, claim in claims.items() if claim.kind != "exact"}
    )
    if cosine >= 0.99:
        small = " (the terms its claims say it drops are small here)" if inexact else ""
        lines.append(f"Close to 1: {algorithm} follows the reference{small}.")
        return "\n".join(lines)
    per_param = {
        name: scores["cosine"]
        for name, scores in (record.get("per_param") or {}).items()
        if scores.get("cosine") is not None
    }
    worst = min(per_param, key=per_param.__getitem__) if per_param else None
    if inexact:
        lines.append(
            f"It is below 1 because {algorithm} drops terms of the exact gradient on "
            f"{', '.join(inexact)} (their claims above say which); the dropped terms bend the "
            "whole gradient's direction."
        )
    else:
        lines.append(
            f"It is below 1 although every claim of {algorithm} is exact: that is "
            "unexpected (please report it with this output)."
        )
    if worst is not None:
        why = "; not learned online: its online gradient is 0"
        why = why if _kind(claims.get(worst)) == "none" else ""
        lines.append(
            f"The weight furthest from BPTT in this window: {worst} "
            f"(cosine {per_param[worst]:.3f}{why})."
        )
    return "\n".join(lines)


def _reference_words(session: Any, record: dict[str, Any]) -> str:
    """What the session's fidelity meter compared with, in the meter's own words."""
    from etp_viz.live.fidelity import reference_text

    episodes = session.episodes
    window = record.get("window") or session.fidelity_window
    return reference_text(episodes.length if episodes is not None else None, window)


def run_demo(args: argparse.Namespace, out: Any = sys.stdout) -> int:
    """The ``demo`` subcommand; returns the exit status."""
    import etp_viz
    from etp_viz.compiler import compile_etrace_graph

    target = output_path(args.out, args.force)
    replacing = target.exists()
    model, x0, data_options, description = _demo_setup(args.task)
    if args.steps is None:
        args.steps = data_options["task"].recipe().steps
    print(f"etp_viz demo: {description}, {args.algorithm}, {args.steps} steps", file=out)
    print(
        f"Writes {target.resolve()} at the end"
        + (" (replacing the file there)." if replacing else "."),
        file=out,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # every compiler decision is printed below
        graph = compile_etrace_graph(model, x0)
    _print_graph_summary(graph, out, args.algorithm)
    # headless without the [explorer] extra
    from etp_viz.explorer.live_explorer import LiveExplorer, build_explorer

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
        fidelity = explorer.session.history.fidelity
        if fidelity and fidelity[-1]["cosine"] is not None:
            claims = _claims_of(graph, args.algorithm)
            reference = _reference_words(explorer.session, fidelity[-1])
            print(fidelity_explanation(fidelity[-1], args.algorithm, claims, reference), file=out)
        unavailable = explorer.history.meta.get("unavailable", [])
        if unavailable:
            print("Not recorded: " + "; ".join(unavailable), file=out)
    path = explorer.save_html(str(target))
    print(f"{'Overwrote' if replacing else 'Wrote'} {path}", file=out)
    error = explorer.session.error if isinstance(explorer, LiveExplorer) else None
    return 0 if failure is None and not error else 1


def _run_with_progress(session: Any, steps: int) -> None:
    started = time.perf_counter()
    done = 0
    while done < steps and not session.halted:
        # one frame a call (read each time: 'auto' grows it to ~50 ms of work)
        frame = max(1, session.steps_per_frame)
        try:
            session.step(min(frame, steps - done))
        except Exception as error:  # noqa: BLE001 - reported in the summary
            session.error = session.error or f"{type(error).__name__}: {error}"
            break
        done = session.history.num_steps
        loss = float(session.history.loss[-1]) + 0.0 if done else None  # no "-0"
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

        verb = "Overwrote" if Path(args.out).exists() else "Wrote"
        print(f"{verb} {etp_viz.Explorer(graph).save_html(args.out)}", file=out)
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


_DESCRIPTION = """\
etp_viz: online learning for recurrent and spiking networks by eligibility-trace
propagation (D-RTRL, ES-D-RTRL, e-prop, ...), with an explorer page that shows which
weights learn online, how well, and why."""

_EPILOG = """\
examples:
  python -m etp_viz demo                      # writes ./demo.html (never replaces one: --force)
  python -m etp_viz demo --task delayed_recall --algorithm es_d_rtrl --out recall.html
  python -m etp_viz inspect mypkg.models:make_gru --out gru.html
  python -m etp_viz check mypkg.models:make_gru --claims tests/claims.json

'python -m etp_viz COMMAND --help' describes a command's options."""


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser: ``demo``, ``inspect`` and ``check``, each with one line of
    help, in plain text (no reST).

    >>> build_parser().parse_args(["demo", "--steps", "5"]).steps
    5
    """
    plain = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="python -m etp_viz", description=_DESCRIPTION, epilog=_EPILOG, formatter_class=plain
    )
    commands = parser.add_subparsers(
        dest="command", required=True, title="commands", metavar="COMMAND"
    )
    demo = commands.add_parser(
        "demo",
        help="train on a teaching task, write an offline HTML page",
        description="Compile a teaching task's network, learn online for the task's step "
        "budget, print what each weight's gradient claim is and how close the online gradient "
        "came to BPTT's, and write one offline HTML page (the graph and the recorded run). "
        "Without --out it writes ./demo.html and keeps an existing file (--force replaces it).",
    )
    demo.add_argument("--task", default="sine", help="teaching task (default: sine)")
    demo.add_argument(
        "--algorithm",
        default=DEFAULT_LEARNER,
        choices=ALGORITHMS,
        metavar="NAME",
        help=f"the online learner (default: {DEFAULT_LEARNER}); one of {', '.join(ALGORITHMS)}",
    )
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
    demo.add_argument(
        "--out",
        default=None,
        help="the page to write, replaced if it exists (default: demo.html, kept if it exists)",
    )
    demo.add_argument(
        "--force", action="store_true", help="without --out: replace an existing ./demo.html"
    )
    inspect = commands.add_parser(
        "inspect",
        help="explain which weights of your model learn online",
        description="Import module:factory (a function returning (model, example_input)), "
        "compile it and print graph.explain(): every weight's status and gradient claim.",
    )
    inspect.add_argument("factory", help="module:function returning (model, example_input)")
    inspect.add_argument("--out", default=None, help="also write the explorer HTML")
    check = commands.add_parser(
        "check",
        help="exit 1 when a weight's gradient claim changes",
        description="Compare the gradient claims of module:factory with a snapshot written by "
        "graph.claims_json() (or by --write); exit 1 naming each weight that changed.",
    )
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
