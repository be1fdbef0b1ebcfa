"""A lesson as one offline page: its notebook's text, the recorded runs, the exercises.

:func:`export_lesson` reads the lesson's notebook (markdown cells rendered, code cells shown
with their stored text and image outputs, the hidden grader cell left out), records each run
of the lesson (:meth:`~etp_viz.course.lessons.Lesson.runs`: one live explorer per learner or
knob value) and writes one HTML page that needs no kernel, no install and no network: the
explorer's standalone bundle inlined once in the saved page's shell
(:func:`etp_viz.explorer.export.page_shell`), each run's front-end state as the page draws it
(:func:`page_history`), the notebook's TeX as MathML (:mod:`etp_viz.course.tex`), a selector
that renders the chosen run (graph, panels, scrubber) in place of the notebook's explorer
output, and in place of each answer cell a form whose answer the page checks against a hash
(:func:`etp_viz.course.exercises.digest`).
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from etp_viz.explorer.bundle import STANDALONE_BUNDLE, bundle_text
from etp_viz.explorer.export import json_script, page_shell

from .tex import tex_to_mathml

__all__ = ["MAX_PAGE_BYTES", "export_lesson", "render_markdown"]

#: the course's limit on a lesson page
MAX_PAGE_BYTES = 20_000_000
#: a badge or image from the web (a page may request nothing): dropped with its link
_REMOTE_IMAGE = re.compile(r"\[?!\[[^\]]*\]\(https?://[^)]*\)(?:\]\([^)]*\))?")


#: what the inline markdown reads first, left to right: a code span (kept as written, ``$``
#: included), an escaped dollar, a displayed formula, an inline one (pandoc's rule: no space
#: inside the dollars, no digit after the closing one, so "$5 and $10" is no formula)
_SPANS = re.compile(r"(`[^`]+`)|\\\$|\$\$(.+?)\$\$|\$([^\s$](?:[^$]*?[^\s$])?)\$(?!\d)", re.S)


def _span_html(match: re.Match[str]) -> str:
    code, display, inline = match.groups()
    if code:
        return f"<code>{html.escape(code[1:-1], quote=False)}</code>"
    if display is not None:
        return tex_to_mathml(display, display=True)
    return "$" if inline is None else tex_to_mathml(inline)


def _inline(text: str) -> str:
    kept: list[str] = []

    def keep(match: re.Match[str]) -> str:
        kept.append(_span_html(match))
        return f"\x00{len(kept) - 1}\x00"

    text = html.escape(_SPANS.sub(keep, text.replace("\x00", "")), quote=False)
    text = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)
    text = re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])", r"<em>\1</em>", text)
    text = re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", r'<a href="\2">\1</a>', text)
    return re.sub("\x00(\\d+)\x00", lambda match: kept[int(match[1])], text)


def render_markdown(source: str) -> str:
    """The notebook markdown the lessons use as HTML: headings, paragraphs, bullet lists,
    code spans, bold / italic, links, raw ``<details>`` blocks and TeX math (``$...$``,
    ``$$...$$``) as MathML (:func:`etp_viz.course.tex.tex_to_mathml`).

    >>> render_markdown("## A *b*\\n\\n* one\\n* `two`")
    '<h2>A <em>b</em></h2>\\n<ul><li>one</li><li><code>two</code></li></ul>'
    """
    source = _REMOTE_IMAGE.sub("", source)
    source = re.sub(r"(</?details>(?:<summary>[^<]*</summary>)?)", r"\n\n\1\n\n", source)
    out: list[str] = []
    for block in re.split(r"\n\s*\n", source.strip()):
        lines = block.strip().splitlines()
        if not lines:
            continue
        heading = re.match(r"(#{1,4})\s+(.*)", lines[0])
        if heading and len(lines) == 1:
            level = len(heading[1])
            out.append(f"<h{level}>{_inline(heading[2])}</h{level}>")
        elif all(re.match(r"\s*[*-] |\s{2,}", line) for line in lines):
            items: list[str] = []
            for line in lines:
                if re.match(r"\s*[*-] ", line):
                    items.append(re.sub(r"^\s*[*-] ", "", line))
                else:
                    items[-1] += " " + line.strip()
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + "</ul>")
        elif lines[0].lstrip().startswith(("<details", "</details")):
            head, rest = _details(lines)
            out.append(head + (f"<p>{_inline(' '.join(rest))}</p>" if rest else ""))
        elif heading:
            out.append(f"<h{len(heading[1])}>{_inline(heading[2])}</h{len(heading[1])}>")
            out.append(f"<p>{_inline(' '.join(lines[1:]))}</p>")
        else:
            out.append(f"<p>{_inline(' '.join(lines))}</p>")
    return "\n".join(out)


def _details(lines: list[str]) -> tuple[str, list[str]]:
    """A raw ``<details><summary>…</summary>`` / ``</details>`` line kept as HTML."""
    head = lines[0].strip()
    keep = re.fullmatch(r"(</details>)?\s*(<details><summary>[^<]*</summary>)?", head)
    return (head if keep else html.escape(head)), lines[1:]


def _cell_html(cell: dict[str, Any]) -> str:
    source = "".join(cell.get("source", ""))
    if cell["cell_type"] == "markdown":
        return render_markdown(source)
    parts = [f'<pre class="code">{html.escape(source)}</pre>']
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if "text" in output:
            parts.append(f'<pre class="out">{html.escape("".join(output["text"]))}</pre>')
        elif "image/png" in data:
            png = "".join(data["image/png"]).replace("\n", "")
            base64.b64decode(png, validate=True)  # a data URL of what the notebook stored
            parts.append(f'<img class="out" alt="plot" src="data:image/png;base64,{png}">')
        elif "text/plain" in data and "application/vnd.jupyter.widget-view+json" not in data:
            parts.append(f'<pre class="out">{html.escape("".join(data["text/plain"]))}</pre>')
    return "\n".join(parts)


def _is_hidden(cell: dict[str, Any]) -> bool:
    meta = cell.get("metadata", {})
    return "hide-input" in meta.get("tags", []) or meta.get("jupyter", {}).get("source_hidden")


def _shows_explorer(cell: dict[str, Any]) -> bool:
    return any(
        "application/vnd.jupyter.widget-view+json" in o.get("data", {})
        for o in cell.get("outputs", [])
    )


def _exercise_html(exercise: dict[str, Any]) -> str:
    rows = []
    for q in exercise["questions"]:
        kind = "radio" if q["kind"] == "choice" else "checkbox"
        name = f"ex{exercise['number']}-{q['key']}"
        options = "".join(
            f'<label><input type="{kind}" name="{name}" value="{html.escape(value)}"> '
            f"{html.escape(label)}</label> "
            for label, value in zip(q["options"], q["values"])
        )
        rows.append(
            f'<div class="question" data-question="{html.escape(q["key"])}">'
            f'<p>{_inline(q["prompt"])}</p><div class="options">{options}</div>'
            f'<span class="mark" data-mark></span></div>'
        )
    title = f"Exercise {exercise['number']}" + (
        f" · {exercise['title']}" if exercise["title"] else ""
    )
    return (
        f'<form class="exercise" data-exercise="{exercise["number"]}"><h4>{html.escape(title)}'
        f'</h4>{"".join(rows)}<button type="submit" data-check>Check</button>'
        f'<span class="verdict" data-verdict></span></form>'
    )


def lesson_body(lesson: Any, exercises: list[dict[str, Any]]) -> str:
    """The lesson's text as HTML: one block per notebook cell, the explorer's place and the
    exercise forms put where the notebook shows the explorer and asks for an answer."""
    notebook = json.loads(Path(lesson.notebook_path).read_text(encoding="utf-8"))
    forms = {e.marker: _exercise_html(page) for e, page in zip(lesson.exercises, exercises)}
    blocks, placed = [], False
    for cell in notebook["cells"]:
        source = "".join(cell.get("source", ""))
        if cell["cell_type"] == "code" and _is_hidden(cell):
            continue
        marker = next((m for m in forms if m in source), None)
        if cell["cell_type"] == "code" and marker:
            blocks.append(f'<pre class="code">{html.escape(source)}</pre>')
            blocks.append(forms.pop(marker))
            continue
        blocks.append(_cell_html(cell))
        if cell["cell_type"] == "code" and _shows_explorer(cell) and not placed:
            blocks.append(RUNS_PLACE)
            placed = True
    blocks += list(forms.values())
    if not placed:
        blocks.append(RUNS_PLACE)
    return "\n".join(blocks)


RUNS_PLACE = """<section class="runs"><label>Recorded run: <select data-run-select></select>
</label><div data-run-host></div></section>"""

STYLE = """
body { margin: 0; padding: 8px 16px; font-family: sans-serif; line-height: 1.45; }
main { max-width: 1200px; margin: auto; }
pre { background: #f6f8fa; padding: 6px 8px; overflow-x: auto; font-size: 13px; }
pre.out { background: #fff; border-left: 3px solid #ddd; }
img.out { max-width: 100%; }
.runs { border: 1px solid #ccd; padding: 8px; margin: 12px 0; }
.exercise { border: 1px solid #9ab; background: #f4f8fb; padding: 8px 12px; margin: 12px 0; }
.mark[data-result=right], .verdict[data-result=right] { color: #1a7f37; font-weight: bold; }
.mark[data-result=wrong], .verdict[data-result=wrong] { color: #b3261e; font-weight: bold; }
.claim { border-top: 2px solid #9ab; margin-top: 24px; }
"""

PAGE_JS = """
function etpHash(text) {
  let h = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) {
    h = Math.imul(h ^ byte, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, "0");
}
(function () {
  const runs = JSON.parse(document.getElementById("etp-runs").textContent);
  const select = document.querySelector("[data-run-select]");
  const host = document.querySelector("[data-run-host]");
  let cleanup = null;
  function show(label) {
    if (cleanup) cleanup();
    host.replaceChildren();
    const el = document.createElement("div");
    el.dataset.run = label;
    host.append(el);
    window.etpModel = etpCreateModel(JSON.parse(JSON.stringify(runs[label])));
    window.etpEl = el;
    cleanup = EtpVizExplorer.default.render({ model: window.etpModel, el });
    host.dataset.shown = label;
  }
  for (const label of Object.keys(runs)) select.append(new Option(label, label));
  select.addEventListener("change", () => show(select.value));
  show(select.value);

  const exercises = JSON.parse(document.getElementById("etp-exercises").textContent);
  for (const exercise of exercises) {
    const form = document.querySelector(`form[data-exercise="${exercise.number}"]`);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      let right = 0;
      for (const q of exercise.questions) {
        const box = form.querySelector(`[data-question="${q.key}"]`);
        const chosen = [...box.querySelectorAll("input:checked")].map((i) => i.value).sort();
        const ok = (q.kind === "multi" || chosen.length === 1) &&
          etpHash(q.salt + "|" + chosen.join(",")) === q.digest;
        const mark = box.querySelector("[data-mark]");
        mark.dataset.result = ok ? "right" : "wrong";
        mark.textContent = ok ? "right" + (q.explanation ? ": " + q.explanation : "")
          : (chosen.length ? "not this: try again" : "choose an answer");
        right += ok ? 1 : 0;
      }
      const verdict = form.querySelector("[data-verdict]");
      const all = right === exercise.questions.length;
      verdict.dataset.result = all ? "right" : "wrong";
      verdict.textContent = all ? ` Exercise ${exercise.number}: correct.`
        : ` ${right} of ${exercise.questions.length} right.`;
    });
  }
})();
"""


#: rows of a series the saved page draws (``seriesFromHistory``'s ``window`` in
#: js/src/live/series.js); the whole-run panels read every step
PAGE_WINDOW = 500
#: the metrics the page draws over the whole run: the loss and accuracy panels and the
#: traces the scrubber replays on the graph (``staticOverviews``, js/src/live/series.js)
WHOLE_RUN = re.compile(r"loss$|accuracy/|trace(?:_x|_f)?/")
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _float32(value: Any) -> Any:
    """``value`` (JSON data) with each float written at float32 precision, the precision of
    the page's ``Float32Array`` s (``0.4594047963619232`` -> ``0.4594048``, ``1.0`` -> ``1``)."""
    if isinstance(value, list):
        return [_float32(item) for item in value]
    if not isinstance(value, float) or not abs(value) <= _FLOAT32_MAX:
        return value
    short = float(str(np.float32(value)))
    return int(short) if short.is_integer() and abs(short) < 2**53 else short


def _heatmap_rows(rows: list[Any]) -> list[Any]:
    """A heatmap's rows as the page draws them: its last :data:`PAGE_WINDOW` measured rows
    (a row with a value); every other row ``None`` (not measured), kept for the step index."""
    measured = [i for i, row in enumerate(rows) if isinstance(row, list) and any(
        item is not None for item in row)]  # fmt: skip
    drawn = set(measured[-PAGE_WINDOW:])
    return [row if i in drawn else None for i, row in enumerate(rows)]


def _episode_start(steps: list[int], episode: int) -> int:
    """The first step of the episode an activity panel draws: the last complete one, else the
    last ``episode`` steps (``activityFromHistory``, js/src/live/series.js)."""
    last = steps[-1] + 1
    end = last // episode * episode
    start = end - episode
    return max(steps[0], last - episode) if start < steps[0] or end <= start else start


def _last_episodes(activity: dict[str, Any], episodes: list[int]) -> dict[str, Any]:
    """The activity rows from the first step any activity panel draws on (older rows left
    out; each series keeps its rows' alignment with the tail of ``steps``)."""
    steps, values = activity.get("steps") or [], activity.get("values") or {}
    kept = {}
    for name, rows in values.items():
        own = steps[-len(rows) :] if rows else []
        starts = [_episode_start(own, episode) for episode in episodes] if own else []
        first = min((max(i for i, s in enumerate(own) if s <= start) for start in starts),
                    default=len(rows))  # fmt: skip
        kept[name] = rows[first:]
    most = max((len(rows) for rows in kept.values()), default=0)
    return {**activity, "steps": steps[len(steps) - most :], "values": kept}


def page_history(history: dict[str, Any], panels: list[dict[str, Any]]) -> dict[str, Any]:
    """What a lesson page stores of a run's recorded history (``History.to_json()``): what its
    ``panels`` (``live_panels``) draw, at the precision they draw it (float32).

    The whole-run metrics (:data:`WHOLE_RUN`) and ``steps`` keep every step; a heatmap keeps
    its last :data:`PAGE_WINDOW` measured rows (its unmeasured rows become ``null``), every
    other metric its last :data:`PAGE_WINDOW` rows; the activity the last episode or two.
    The page draws the same panels and scrubber from it as from the whole history, in a
    fraction of the bytes: at the lessons' budgets the whole histories made up 69-94 % of a
    page (15.6 MB for lesson 2's, mostly unmeasured heatmap rows written as lists of ``null``
    and 17-digit numbers); stored this way the pages are 1.3-2.5 MB, the bundle the largest
    part (``bench/course_pages.py``).

    >>> history = {"steps": [0, 1, 2], "metrics": {"loss": [0.1, 0.2, 0.30000001192092896]},
    ...            "activity": {"steps": [], "values": {}}}
    >>> page_history(history, [])["metrics"]["loss"]
    [0.1, 0.2, 0.3]
    """
    if "compare" in history:
        return history
    heatmaps = {panel["name"] for panel in panels if panel.get("kind") == "heatmap"}
    metrics = {}
    for name, rows in history.get("metrics", {}).items():
        if WHOLE_RUN.match(name):
            metrics[name] = _float32(rows)
        else:
            metrics[name] = _float32(
                _heatmap_rows(rows) if name in heatmaps else rows[-PAGE_WINDOW:]
            )
    episodes = {
        int(panel.get("episode") or 100) for panel in panels if panel.get("kind") == "activity"
    }
    activity = _last_episodes(history.get("activity") or {}, sorted(episodes) or [100])
    return {**history, "metrics": metrics, "activity": _float32(activity)}


def page_state(state: dict[str, Any]) -> dict[str, Any]:
    """A run's front-end state as its lesson page stores it (:func:`page_history`)."""
    if "live_history" not in state:
        return state
    history = page_history(state["live_history"], state.get("live_panels") or [])
    return {**state, "live_history": history}


def render_lesson(lesson: Any, states: dict[str, dict[str, Any]], bundle: str) -> str:
    """The page's HTML from the runs' front-end states (stored by :func:`page_state`) and the
    standalone bundle."""
    exercises = [e.to_page(lesson.name) for e in lesson.exercises]
    runs = {label: page_state(state) for label, state in states.items()}
    body = f"""<main data-lesson="{html.escape(lesson.name)}">
<p class="course">etp_viz course · lesson: {html.escape(lesson.name)} · budget {lesson.budget:,}
steps · every run recorded, no kernel needed</p>
{lesson_body(lesson, exercises)}
<section class="claim"><h3>What this lesson shows</h3><p>{_inline(lesson.claim)}</p></section>
</main>
{json_script("etp-runs", runs, compact=True)}
{json_script("etp-exercises", exercises)}"""
    title = f"etp_viz course — {lesson.title}"
    return page_shell(title, body, bundle=bundle, boot=PAGE_JS, style=STYLE)


def lesson_page(lesson: Any, steps: int | None = None) -> str:
    """Record ``lesson``'s runs (``steps`` each, default its budget) and return its page."""
    states = {label: ex.frontend_state() for label, ex in lesson.runs(steps).items()}
    return render_lesson(lesson, states, bundle_text(STANDALONE_BUNDLE))


def export_lesson(lesson: Any, path: str | Path, *, steps: int | None = None) -> Path:
    """Record ``lesson``'s runs (``steps`` each, default its budget) and write its page.

    Raises ``ValueError`` when the page would exceed :data:`MAX_PAGE_BYTES`.
    """
    page = lesson_page(lesson, steps)
    size = len(page.encode("utf-8"))
    if size > MAX_PAGE_BYTES:
        raise ValueError(f"{lesson.name}'s page is {size:,} bytes (limit {MAX_PAGE_BYTES:,})")
    path = Path(path)
    path.write_text(page, encoding="utf-8")
    return path
