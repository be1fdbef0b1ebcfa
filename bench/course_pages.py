"""Each course lesson's offline page at its full budget: bytes and export time.

    nice -n 10 .venv/bin/python bench/course_pages.py            # every lesson (~10 min, 2 cores)
    nice -n 10 .venv/bin/python bench/course_pages.py --lessons fall_behind --steps 40
    .venv/bin/python bench/course_pages.py --table bench/results/course_pages-<date>.json

Per lesson of :func:`etp_viz.course.lessons`, in its own process, one after the other: the
page :meth:`~etp_viz.course.lessons.Lesson.export` writes, built by
:func:`etp_viz.course.page.lesson_page` (the same call: record every run ``steps`` steps,
``None`` = the lesson's budget, then render), timed from the call to the page's text
(training, recording and rendering; ``seconds``), its size in UTF-8 bytes against
:data:`~etp_viz.course.page.MAX_PAGE_BYTES` (``fits``), and where the bytes go: each
``<script>`` element of the page (the bundle, the runs, the exercises) and, in the runs'
JSON, each run's largest keys (three levels deep, keys of at least 1 % of the run).

Writes ``bench/results/course_pages-<date>.json`` (machine, versions, date, commit).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _machine import machine

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
SCRIPT = re.compile(r"<script([^>]*)>(.*?)</script>", re.S)


def json_bytes(value: Any) -> int:
    """Bytes of ``value`` as the page stores it (compact JSON, UTF-8)."""
    return len(json.dumps(value, separators=(",", ":")).encode("utf-8"))


def breakdown(value: Any, depth: int = 3, share: float = 0.01) -> Any:
    """``{key: {"bytes": n, "keys": ...}}`` of a JSON object's keys of at least ``share``
    of its size, ``depth`` levels deep.

    >>> breakdown({"a": [1] * 100, "b": 1}, depth=1)
    {'a': {'bytes': 301}}
    """
    if not isinstance(value, dict) or depth == 0:
        return None
    total = json_bytes(value)
    rows = {}
    for key, item in sorted(value.items(), key=lambda kv: -json_bytes(kv[1])):
        size = json_bytes(item)
        if size < share * total:
            break
        rows[key] = {"bytes": size}
        inner = breakdown(item, depth - 1, share)
        if inner:
            rows[key]["keys"] = inner
    return rows


def page_parts(page: str) -> dict[str, Any]:
    """The bytes of each ``<script>`` element of ``page`` and the runs' JSON by key."""
    scripts, runs = [], None
    for attributes, text in SCRIPT.findall(page):
        name = re.search(r'id="([^"]+)"', attributes)
        scripts.append({"id": name[1] if name else "", "bytes": len(text.encode("utf-8"))})
        if name and name[1] == "etp-runs":
            runs = json.loads(text)
    per_run = {label: {"bytes": json_bytes(s), "keys": breakdown(s)} for label, s in runs.items()}
    return {"scripts": scripts, "runs": per_run}


def measure(name: str, steps: int | None) -> dict[str, Any]:
    """One lesson's page, built as ``lesson.export`` builds it, measured."""
    from etp_viz.course import get_lesson
    from etp_viz.course.page import MAX_PAGE_BYTES, lesson_page

    lesson = get_lesson(name)
    start = time.perf_counter()
    page = lesson_page(lesson, steps)
    seconds = time.perf_counter() - start
    size = len(page.encode("utf-8"))
    return {
        "lesson": name,
        "steps": lesson.budget if steps is None else steps,
        "runs": list(lesson.recorded),
        "bytes": size,
        "fits": size <= MAX_PAGE_BYTES,
        "seconds": round(seconds, 1),
        "parts": page_parts(page),
    }


def table(record: dict[str, Any]) -> str:
    """The README's table of a result file."""
    lines = [
        "| lesson | steps | runs | bytes | MB | seconds | fits |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in record["lessons"]:
        lines.append(
            f"| {row['lesson']} | {row['steps']} | {len(row['runs'])} | {row['bytes']:,} | "
            f"{row['bytes'] / 1e6:.2f} | {row['seconds']} | {'yes' if row['fits'] else 'NO'} |"
        )
    return "\n".join(lines)


def commit() -> str:
    done = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, text=True,
                          capture_output=True)  # fmt: skip
    return done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lessons", nargs="*", help="lesson names (default: every lesson)")
    parser.add_argument("--steps", type=int, help="steps per run (default: each budget)")
    parser.add_argument("--out", help="result file (default: results/course_pages-<date>.json)")
    parser.add_argument("--table", help="print the table of a result file")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process: one lesson
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return
    if args.one:
        print(json.dumps(measure(args.one, args.steps)))
        return
    from etp_viz.course import lessons

    names = args.lessons or [lesson.name for lesson in lessons()]
    record = {
        "date": datetime.date.today().isoformat(),
        "commit": commit(),
        "machine": machine(),
        "lessons": [],
    }
    out = Path(args.out) if args.out else RESULTS / f"course_pages-{record['date']}.json"
    for name in names:
        command = [sys.executable, __file__, "--one", name]
        command += ["--steps", str(args.steps)] if args.steps else []
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        if done.returncode:
            sys.exit(f"{name} failed:\n{done.stderr[-4000:]}")
        record["lessons"].append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(table({"lessons": record["lessons"][-1:]}).splitlines()[-1], flush=True)
        out.write_text(json.dumps(record, indent=1))  # partial results survive
    record["machine"]["load_after"] = os.getloadavg()
    out.write_text(json.dumps(record, indent=1))
    print(table(record))


if __name__ == "__main__":
    main()
