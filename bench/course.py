"""Each lesson's claim judged on its recorded runs at its budget, over seeds (issue 42).

A lesson of :mod:`etp_viz.course` states a claim (``lesson.claim``) that must hold at its
budget for any seed a student might draw, not only the notebook's seed 0. This runs
``lesson.evidence(seed=s)`` (the page's runs: the same networks, learners and budget; one
clause per sentence of the claim, each with its numbers) for every lesson and seed, one
lesson at a time, and records every clause::

    python bench/course.py                        # 4 lessons x seeds 0 1 2 -> bench/results/
    python bench/course.py --lessons 4 --seeds 0  # one lesson, one seed
    python bench/course.py --check                # exit 1 if a claim fails on a seed

Writes ``bench/results/course-<date>.json`` (machine, versions, per lesson and seed: holds,
clauses, seconds).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", nargs="*", default=None, help="names or numbers")
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=None, help="default: each budget")
    parser.add_argument("--check", action="store_true", help="exit 1 if a claim fails")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    from _machine import machine

    from etp_viz.course import get_lesson, lessons

    chosen = [get_lesson(n) for n in args.lessons] if args.lessons else lessons()
    date = datetime.date.today().isoformat()
    out = args.out or HERE / "results" / f"course-{date}.json"
    result = {"machine": machine(), "date": date, "records": []}
    for lesson in chosen:
        for seed in args.seeds:
            began = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                evidence = lesson.evidence(args.steps, seed=seed)
            record = evidence.to_dict() | {"seconds": round(time.perf_counter() - began, 1)}
            result["records"].append(record)
            print(evidence, f"({record['seconds']} s)", flush=True)
            out.write_text(json.dumps(result, indent=1, default=float) + "\n")
    failed = [(r["lesson"], r["seed"]) for r in result["records"] if not r["holds"]]
    print(f"wrote {out}; claims failing: {failed or 'none'}")
    return 1 if args.check and failed else 0


if __name__ == "__main__":
    sys.exit(main())
