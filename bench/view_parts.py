"""Bytes the explorer sends for a deep stack: the whole view model against its shell and parts
(etp_viz/explorer/parts.py, issue #32 "the view model sent in parts as boxes open").

The model is ``N`` ``etp_viz.nn.GRUCell(8, 8)`` layers in series and a ``Linear`` readout
(bench/deep_stack.py ``make_stack``). For each depth: the view model's JSON bytes (compact
separators, as the page gets them), the shell's, all node parts, all weight cards, and one
layer's share of the parts (what opening one layer's box brings, on average). Sizes only, no
timing: the numbers do not depend on the machine's load. Writes JSON with machine, versions
and date.

    .venv/bin/python bench/view_parts.py [--depths 16 128 256 512] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._machine import machine  # noqa: E402
from bench.deep_stack import make_stack  # noqa: E402


def size(value: object) -> int:
    """Bytes of ``value`` as compact JSON."""
    return len(json.dumps(value, separators=(",", ":")))


def measure(depth: int) -> dict:
    """The sizes of one depth's view model, shell and parts."""
    import etp_viz
    from etp_viz.explorer.parts import WHOLE_MAX_BYTES, split_view_model
    from etp_viz.view.model import build_view_model

    model, x = make_stack(depth)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vm = build_view_model(etp_viz.compile_etrace_graph(model, x)).to_json()
    split = split_view_model(vm)
    full, shell = size(vm), size(split.shell)
    nodes, weights = size(split.nodes), size(split.weights)
    return {
        "depth": depth,
        "nodes": len(vm["nodes"]),
        "view_model_bytes": full,
        "shell_bytes": shell,
        "shell_ratio": round(shell / full, 3),
        "node_parts_bytes": nodes,
        "weight_parts_bytes": weights,
        "per_layer_parts_bytes": round((nodes + weights) / depth),
        "shell_sections_bytes": {k: size(v) for k, v in split.shell.items()},
        "sent_whole": full <= WHOLE_MAX_BYTES,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[16, 128, 256, 512])
    parser.add_argument("--note", default="", help="stored in the JSON")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "view_parts.json"))
    args = parser.parse_args()
    runs = []
    for depth in args.depths:
        run = measure(depth)
        runs.append(run)
        print(
            f"{depth:4d} layers: view model {run['view_model_bytes']:>10,} B  shell "
            f"{run['shell_bytes']:>9,} B ({run['shell_ratio']:.0%})  node parts "
            f"{run['node_parts_bytes']:>10,} B  weight cards {run['weight_parts_bytes']:>9,} B  "
            f"one layer {run['per_layer_parts_bytes']:>7,} B",
            flush=True,
        )
    record = {
        "benchmark": "view_parts",
        "model": "N x etp_viz.nn.GRUCell(8, 8) in series + Linear(8, 2)",
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine(("brainstate",)),
        "note": args.note,
        "runs": runs,
    }
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
