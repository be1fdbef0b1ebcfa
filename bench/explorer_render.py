"""Explorer render benchmark in headless Chromium (Debian chromium + Playwright).

    .venv/bin/python bench/explorer_render.py [--repeats 5] [--out FILE.json]

On the REAL view model of the ~2,000-equation stack (tests/view/models.py
``make_deep_stack``: ``build_view_model(compile_etrace_graph(model, x))``; jit bodies are
inlined, so the viewer groups it into module clusters, 16 layers a range) it measures, in the page:
  first_render_ms  widget.render() -> first graph mounted (index + worker start + wasm load +
                   layout + time-sliced SVG build)
  expand_ms        click on a collapsed range, then on a collapsed layer -> each level mounted
                   (the larger of the two)
  longest_task_ms  longest main-thread task (PerformanceObserver 'longtask') from render() to
                   the end of the second expansion (index building included)
and, for information, laying out everything expanded at once (bounded Graphviz options).
Targets (issue 5): first render <= 1000 ms, expand <= 500 ms, no task > 50 ms.

    .venv/bin/python bench/explorer_render.py --pan-zoom [--sizes 1k,10k,50k] [--bundle OLD.js]

measures pan/zoom instead (issue #32, "Big graphs, fluid"): on the same model expanded (part of
its layers: ~1,000 nodes; everything: 2,669) and on copies of the whole expanded graph tiled
side by side (~10,000 and ~50,000 nodes: the copies are cloned SVG, not laid out, since only
the drawing matters here), fitted in the pane, it plays a wheel zoom (one wheel event per
animation frame, in then out) and a drag (one pointer move per frame) through the widget's own
event handlers, and reports frames per second from requestAnimationFrame timestamps, the
median and 95th-percentile frame, the viewBox writes (a MutationObserver), the gesture's ends
(the layer's `will-change` dropped: the graph painted again; one per gesture unless it ended
between two events), the times the layer lost its transform (each lays out every element
again) and the longest frame after the gesture ended (when the graph is painted again at its
new scale). The "-labels"
sizes start zoomed in to 8 px labels (shown) instead of fitted. Targets: >= 55 fps at ~1k
nodes, >= 30 fps at ~10k.

    .venv/bin/python bench/explorer_render.py --open-box [--sizes 1k,8k,50k] [--bundle OLD.js]

measures opening one box on a big graph instead (issue #32, "big graphs fluid": one Graphviz
call over the whole graph took 12 s at 8,000 drawn nodes). Generated deep stacks
(tests/view/models.py ``make_deep_stack``, compiled once and kept as JSON in --cache): the
~2,000-equation stack with 35 % of its layers open (1k: ~1,070 nodes drawn), a
~6,000-equation stack (8k: ~8,100) and a ~37,000-equation one (50k: ~50,000) with every box
open but a layer in the middle (and the last layer, see EXPAND_BUT_ONE). In the page: the
folded first view (first_view_ms), the big graph (big_ms: all of it opened at once), then a
click on the middle layer's box, centred first (open_ms: click -> mounted; open_painted_ms:
-> the next frame painted), the Graphviz calls it made and the nodes they laid out
(`layout.calls`, where the bundle has them), and collapsing it again (close_ms). Target:
open_ms < 2,000 at 8k. --flat lays every graph out in one Graphviz call (the
`level_layout_min_nodes` option, js/src/graph.js).

Results are appended to the JSON file (older entries kept).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from etp_viz.explorer.bundle import BUNDLE  # noqa: E402
from etp_viz.explorer.export import MOCK_MODEL_JS  # noqa: E402
from etp_viz.explorer.widget import Explorer  # noqa: E402

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
PAGE = (
    """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body style="margin:0">
<div id="root"></div><script>"""
    + MOCK_MODEL_JS
    + """</script>
<script type="module">
window.longTasks = [];
new PerformanceObserver((list) => { for (const e of list.getEntries())
  window.longTasks.push({start: e.startTime, ms: e.duration}); }).observe({type: "longtask"});
// where the long frames went (Long Animation Frames API: scripts and style/layout)
window.longFrames = [];
try { new PerformanceObserver((list) => { for (const e of list.getEntries()) {
  if (e.duration <= 50) continue;
  window.longFrames.push({start: Math.round(e.startTime), ms: Math.round(e.duration),
    blocking_ms: Math.round(e.blockingDuration),
    style_layout_ms: e.styleAndLayoutStart
      ? Math.round(e.startTime + e.duration - e.styleAndLayoutStart) : 0,
    scripts: e.scripts.filter((s) => s.duration >= 5).map((s) => ({ms: Math.round(s.duration),
      forced_layout_ms: Math.round(s.forcedStyleAndLayoutDuration || 0),
      what: `${s.invoker || ""} ${s.sourceFunctionName || ""}`.trim()}))}); } })
  .observe({type: "long-animation-frame", buffered: true}); } catch (e) { /* older browser */ }
import widget from "./widget.js";
const name = new URLSearchParams(location.search).get("state") || "state.json";
const state = await (await fetch(`./${name}`)).json();
window.etpModel = etpCreateModel(state);
const el = document.getElementById("root");
window.etpEl = el;
window.renders = [];
el.addEventListener("etp-rendered",
  (e) => window.renders.push({at: performance.now(), ...e.detail}));
window.t0 = performance.now();
widget.render({ model: window.etpModel, el });
</script></body></html>"""
)


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def run_once(browser, base):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    aborted = []
    context.route(
        "**/*",
        lambda r: (
            r.continue_()
            if r.request.url.startswith(base)
            else (aborted.append(r.request.url), r.abort())
        ),
    )
    page = context.new_page()
    page.goto(f"{base}/bench.html")
    page.wait_for_function("window.renders && window.renders.length >= 1", timeout=30000)
    first = page.evaluate("window.renders[0].at - window.t0")
    first_detail = page.evaluate("window.renders[0]")
    page.wait_for_timeout(100)
    expands = []
    for target, count in (("m:layers.48…layers.63", 2), ("m:layers.50", 3)):
        dot_id = page.evaluate(
            f"window.etpEl.etpExplorer.graph.clusterToDot.get({json.dumps(target)})"
        )
        # where to click is found before the timed window: page.click()'s own actionability
        # checks (injected scripts, hit-target tests) ran as ~70 ms main-thread tasks that a
        # person's click does not cause; page.mouse.click() is the same real input event
        box = page.locator(f"g.node[id='{dot_id}']").bounding_box()
        page.wait_for_timeout(100)
        click_at = page.evaluate("performance.now()")
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.wait_for_function(f"window.renders.length >= {count}", timeout=30000)
        expands.append((page.evaluate(f"window.renders[{count - 1}].at") - click_at, count))
    expand, count = max(expands)
    expand_detail = page.evaluate(f"window.renders[{count - 1}]")
    tasks = page.evaluate("window.longTasks")
    t0 = page.evaluate("window.t0")
    frames = page.evaluate("window.longFrames")
    renders = page.evaluate("window.renders")
    # information: everything expanded in one layout
    page.evaluate("""() => window.etpModel.set('expanded',
        [...window.etpEl.etpExplorer.index.clusters.values()]
          .filter(c => c.kind === 'subjaxpr' || c.kind === 'module').map(c => c.id))""")
    page.wait_for_function("window.renders.length >= 4", timeout=300000)
    full = page.evaluate("window.renders[3]")
    context.close()
    return {
        "first_render_ms": round(first, 1),
        "first_render_nodes": first_detail["nodes"],
        "first_render_worker_layout_ms": round(first_detail["workerMs"], 1),
        "first_render_mount_ms": round(first_detail["mountMs"], 1),
        "expand_ms": round(expand, 1),
        "expand_each_ms": [round(e, 1) for e, _ in expands],
        "expand_nodes": expand_detail["nodes"],
        "expand_worker_layout_ms": round(expand_detail["workerMs"], 1),
        "expand_mount_ms": round(expand_detail["mountMs"], 1),
        "longest_task_ms": round(max([t["ms"] for t in tasks] or [0.0]), 1),
        "long_tasks": len(tasks),
        "all_expanded_nodes": full["nodes"],
        "all_expanded_total_ms": round(full["totalMs"], 1),
        "all_expanded_mount_ms": round(full["mountMs"], 1),
        "all_expanded_worker_layout_ms": round(full["workerMs"], 1),
        "tasks_over_50ms": [t["ms"] for t in tasks],
        "tasks_over_50ms_at_ms": [round(t["start"] - t0, 1) for t in tasks],
        "renders_at_ms": [round(r["at"] - t0, 1) for r in renders],
        "long_frames": [{**f, "start": round(f["start"] - t0)} for f in frames],
        "aborted_requests": len(aborted),
    }


#: JS: the expansion with about `frac` of the layers open (every range and sub-jaxpr open)
EXPAND_PART = """(frac) => { const c = [...window.etpEl.etpExplorer.index.clusters.values()]
  .filter((c) => c.kind === 'subjaxpr' || c.kind === 'module');
  const ranges = c.filter((x) => x.id.includes('…') || x.kind === 'subjaxpr');
  const layers = c.filter((x) => !ranges.includes(x));
  window.etpModel.set('expanded', [...ranges, ...layers.slice(0, Math.round(layers.length * frac))]
    .map((x) => x.id)); }"""
#: JS: `n` copies of the drawn graph side by side (cloned, ids dropped; the view's layout box
#: and, for the transform-based view, the SVG's frame as if built at that size), then Fit;
#: returns the number of g.node drawn
TILE = """([n, labelPx]) => { const view = window.etpEl.etpExplorer.view; const svg = view.svg;
  const root = svg.querySelector('g.graph'); const b = view.base; const gap = 50;
  const cols = Math.ceil(Math.sqrt(n * b.h / b.w));
  if (n > 1) { const one = document.createElementNS('http://www.w3.org/2000/svg', 'g');
    for (const c of [...root.childNodes]) one.append(c);
    root.append(one);
    for (let i = 1; i < n; i++) { const g = one.cloneNode(true);
      const dx = (i % cols) * (b.w + gap), dy = Math.floor(i / cols) * (b.h + gap);
      g.setAttribute('transform', `translate(${dx} ${dy})`);
      for (const e of g.querySelectorAll('[id]')) e.removeAttribute('id');
      root.append(g); }
    view.base = {x: 0, y: 0, w: Math.min(n, cols) * (b.w + gap),
      h: Math.ceil(n / cols) * (b.h + gap)}; }
  if (view.frame) { // a graph built at this size: its whole (padded) layout is the SVG's viewBox,
    // with room to grow when laid out level by level (view.js grownFrame: Fit is then no identity)
    const room = view.levels && view.levels.size ? 1.25 : 1;
    const f = {x: view.base.x - 10, y: view.base.y - 10, w: (view.base.w + 20) * room,
      h: (view.base.h + 20) * room};
    view.frame = f; svg.setAttribute('viewBox', `${f.x} ${f.y} ${f.w} ${f.h}`); }
  view.fit(); // then, with labelPx, zoomed in about the centre until labels are that big
  if (labelPx) view.zoom(labelPx / (14 * view.scale()));
  return svg.querySelectorAll('g.node').length; }"""
#: JS: play one gesture ("wheel" or "drag"), one event per animation frame, at most `frames`
#: frames or `maxMs`; then wait `settleMs` (the gesture's end and repaint)
GESTURE = """async ([kind, frames, maxMs, settleMs]) => {
  const view = window.etpEl.etpExplorer.view; const pane = view.container;
  const r = pane.getBoundingClientRect(); const x = r.left + r.width / 2, y = r.top + r.height / 2;
  let writes = 0; const mo = new MutationObserver((m) => { writes += m.length; });
  mo.observe(pane, {subtree: true, attributes: true, attributeFilter: ['viewBox']});
  // the gesture's re-renders: the layer's will-change dropped (the graph painted again at its
  // scale; more than one per gesture: it ended between events) and its transform lost (every
  // element laid out again when it comes back)
  let ends = 0, none = 0; const layer = view.layer;
  const lo = new MutationObserver((m) => { for (const r of m) {
    if ((r.oldValue || '').includes('will-change') && !layer.style.willChange) ends += 1;
    if (getComputedStyle(layer).transform === 'none') none += 1; } });
  if (layer) lo.observe(layer, {attributes: true, attributeFilter: ['style'],
    attributeOldValue: true});
  const loafs = []; let po = null;
  try { po = new PerformanceObserver((l) => { for (const e of l.getEntries()) loafs.push(e); });
    po.observe({type: 'long-animation-frame'}); } catch (e) { po = null; }
  const frame = () => new Promise((done) => requestAnimationFrame(done));
  await frame(); await frame();
  const times = []; const start = performance.now();
  if (kind === 'drag') pane.dispatchEvent(new PointerEvent('pointerdown',
    {bubbles: true, button: 0, clientX: x, clientY: y, pointerId: 1, isPrimary: true}));
  for (let i = 0; i < frames && performance.now() - start < maxMs; i++) {
    times.push(await frame());
    if (kind === 'wheel') pane.dispatchEvent(new WheelEvent('wheel', {bubbles: true,
      cancelable: true, clientX: x + 60, clientY: y + 40, deltaMode: 0,
      deltaY: i < frames / 2 ? -40 : 40}));
    else pane.dispatchEvent(new PointerEvent('pointermove', {bubbles: true, buttons: 1,
      clientX: x + 6 * i, clientY: y + 3 * i, pointerId: 1, isPrimary: true}));
  }
  times.push(await frame());
  const ended = performance.now();
  if (kind === 'drag') pane.dispatchEvent(new PointerEvent('pointerup',
    {bubbles: true, button: 0, clientX: x, clientY: y, pointerId: 1, isPrimary: true}));
  await new Promise((done) => setTimeout(done, settleMs)); await frame();
  mo.disconnect(); lo.disconnect();
  if (po) { for (const e of po.takeRecords()) loafs.push(e); po.disconnect(); }
  const gaps = []; for (let i = 1; i < times.length; i++) gaps.push(times[i] - times[i - 1]);
  gaps.sort((a, b) => a - b);
  const q = (p) => gaps[Math.min(gaps.length - 1, Math.floor(p * gaps.length))];
  const after = loafs.filter((e) => e.startTime + e.duration > ended);
  return {events: gaps.length, fps: gaps.length * 1000 / (times[times.length - 1] - times[0]),
    frame_p50_ms: q(0.5), frame_p95_ms: q(0.95), viewbox_writes: writes, gesture_ends: ends,
    transform_none: none,
    settle_longest_frame_ms: Math.max(0, ...after.map((e) => e.duration)),
    labels_hidden: view.svg.classList.contains('etp-lod-far')}; }"""
#: size name -> (fraction of the layers expanded, copies of the graph, label size on screen
#: (px) to zoom to before the gestures: 0 = fitted, labels hidden below 6 px by the new view)
SIZES = {
    "1k": (0.3, 1, 0),
    "2.7k": (1.0, 1, 0),
    "10k": (1.0, 4, 0),
    "50k": (1.0, 19, 0),
    "1k-labels": (0.3, 1, 8),
    "10k-labels": (1.0, 4, 8),
}


def pan_zoom_once(browser, base, size, frames=60, max_ms=20000):
    """Pan/zoom frame rates at one size (SIZES) in a fresh page."""
    frac, copies, label_px = SIZES[size]
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.route("**/*", lambda r: r.continue_() if r.request.url.startswith(base) else r.abort())
    page = context.new_page()
    page.goto(f"{base}/bench.html")
    page.wait_for_function("window.renders && window.renders.length >= 1", timeout=30000)
    page.evaluate(EXPAND_PART, frac)
    page.wait_for_function("window.renders.length >= 2", timeout=300000)
    nodes = page.evaluate(TILE, [copies, label_px])
    page.wait_for_timeout(1500)
    out = {"size": size, "nodes": nodes}
    for kind in ("wheel", "drag"):
        result = page.evaluate(GESTURE, [kind, frames, max_ms, 600])
        out[kind] = {k: round(v, 1) if isinstance(v, float) else v for k, v in result.items()}
        page.wait_for_timeout(300)
    context.close()
    return out


#: size name -> (maker target equations, fraction of the layers open; 1: all but one)
OPEN_SIZES = {
    "500": (2000, 0.15),
    "1k": (2000, 0.35),
    "2.7k": (2000, 1.0),
    "8k": (6000, 1.0),
    "50k": (37000, 1.0),
}
#: JS: open every range and `frac` of the layers, or (frac = 1) every layer but the middle one
#: and the last one (a box still closed: the legend keeps its entry for closed boxes, whose
#: removal resizes the graph pane, which lays the whole SVG out again, ~0.7 s at 8k, whatever
#: the layout); returns the closed layer to open (window.target)
EXPAND_BUT_ONE = """(frac) => { const app = window.etpEl.etpExplorer;
  const c = [...app.index.clusters.values()]
    .filter((x) => x.kind === 'subjaxpr' || x.kind === 'module');
  const ranges = c.filter((x) => x.id.includes('…') || x.kind === 'subjaxpr');
  const layers = c.filter((x) => !ranges.includes(x));
  const n = frac >= 1 ? layers.length : Math.round(layers.length * frac);
  window.target = layers[frac >= 1 ? Math.floor(layers.length / 2) : n].id;
  window.bigExpanded = [...ranges, ...layers.slice(0, frac >= 1 ? n - 1 : n)]
    .filter((x) => x.id !== window.target).map((x) => x.id);
  window.etpModel.set('expanded', window.bigExpanded); return window.target; }"""
#: JS: resolve after two animation frames and a task (what was drawn is painted)
PAINTED = """() => new Promise((r) =>
  requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(r, 0))))"""


def deep_stack_state(eqns: int, cache: Path) -> Path:
    """The frontend state of ``make_deep_stack(eqns)`` (compiled once, kept in `cache`)."""
    path = cache / f"deep_stack_{eqns}.state.json"
    if path.is_file():
        return path
    import warnings

    from etp_viz.compiler import compile_etrace_graph
    from etp_viz.view.model import build_view_model
    from tests.view.models import make_deep_stack

    cache.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    model, x = make_deep_stack(target_eqns=eqns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        vm = build_view_model(compile_etrace_graph(model, x)).to_json()
    path.write_text(json.dumps(Explorer(vm).frontend_state()))
    print(
        f"deep stack {eqns}: {len(vm['nodes'])} nodes in {time.perf_counter() - start:.0f} s",
        flush=True,
    )
    return path


def open_box_once(browser, base, size, timeout_ms):
    """Open one box on a big graph (OPEN_SIZES) in a fresh page; see the module docstring."""
    _, frac = OPEN_SIZES[size]
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.route("**/*", lambda r: r.continue_() if r.request.url.startswith(base) else r.abort())
    page = context.new_page()
    page.goto(f"{base}/bench.html?state={size}.json")
    page.wait_for_function("window.renders && window.renders.length >= 1", timeout=timeout_ms)
    first = page.evaluate("window.renders[0]")
    out = {
        "size": size,
        "first_view_ms": round(first["at"] - page.evaluate("window.t0"), 1),
        "first_view_nodes": first["nodes"],
    }
    set_at = page.evaluate("performance.now()")
    target = page.evaluate(EXPAND_BUT_ONE, frac)
    try:
        page.wait_for_function(
            "window.renders.length >= 2 || window.etpEl.etpExplorer.lastError",
            timeout=timeout_ms,
            polling=500,
        )
        if page.evaluate("window.renders.length < 2"):
            raise RuntimeError("layout failed")
    except Exception:  # noqa: BLE001 -- the old bundle at 50k: report how it ended
        status = page.evaluate(
            "[document.querySelector('[data-status]')?.textContent,"
            " window.etpEl.etpExplorer.lastError]"
        )
        out["big_ms"] = None
        ran = (page.evaluate("performance.now()") - set_at) / 1000
        out["note"] = (
            f"big graph not drawn after {ran:.0f} s (limit {timeout_ms / 1000:.0f} s);"
            f" status, error: {status}"
        )
        context.close()
        return out
    big = page.evaluate("window.renders[1]")
    out.update(
        big_ms=round(big["at"] - set_at, 1),
        big_nodes=big["nodes"],
        big_worker_layout_ms=round(big["workerMs"], 1),
        big_mount_ms=round(big["mountMs"], 1),
    )
    dot_id = page.evaluate(f"window.etpEl.etpExplorer.graph.clusterToDot.get({json.dumps(target)})")
    page.evaluate(f"window.etpEl.etpExplorer.view.center([{json.dumps(dot_id)}])")
    page.wait_for_timeout(1000)
    page.evaluate(PAINTED)
    box = page.locator(f"g.node[id='{dot_id}']").bounding_box()
    at = (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    # the pointer comes to the box first (a person's does): its first move after the view
    # jumped lays the SVG out for the hit test (0.3-0.9 s at 8k), before any click
    page.mouse.move(*at)
    page.wait_for_timeout(500)
    page.evaluate(PAINTED)
    calls = page.evaluate("window.etpEl.etpExplorer.layout.callCount || 0")
    page.evaluate("window.longTasks = []")
    # the click's own hit tests (~30 ms each at 8k nodes) are part of opening
    click_at = page.evaluate("performance.now()")
    page.mouse.click(*at)
    page.wait_for_function("window.renders.length >= 3", timeout=timeout_ms, polling=100)
    opened = page.evaluate("window.renders[2]")
    page.evaluate(PAINTED)
    painted = page.evaluate("performance.now()")
    made = page.evaluate(
        f"""() => {{ const layout = window.etpEl.etpExplorer.layout; if (!layout.calls) return null;
          return layout.calls.slice(layout.calls.length - (layout.callCount - {calls})); }}"""
    )
    tasks = [t["ms"] for t in page.evaluate("window.longTasks")]
    frames = page.evaluate(f"window.longFrames.filter((f) => f.start + f.ms > {click_at})")
    out.update(
        open_ms=round(opened["at"] - click_at, 1),
        open_painted_ms=round(painted - click_at, 1),
        open_nodes=opened["nodes"],
        open_dot_ms=round(opened["dotMs"], 1),
        open_layout_ms=round(opened["layoutMs"], 1),
        open_worker_layout_ms=round(opened["workerMs"], 1),
        open_mount_ms=round(opened["mountMs"], 1),
        open_longest_task_ms=round(max(tasks or [0.0]), 1),
        open_long_frames=[
            {k: f[k] for k in ("ms", "blocking_ms", "style_layout_ms", "scripts")} for f in frames
        ],
    )
    if made is not None:
        out["open_graphviz_calls"] = [
            {"box": c["box"], "nodes": c["nodes"], "edges": c["edges"]} for c in made
        ]
        out["open_graphviz_nodes"] = sum(c["nodes"] for c in made)
    page.wait_for_timeout(500)
    close_at = page.evaluate("performance.now()")
    page.evaluate("window.etpModel.set('expanded', window.bigExpanded)")
    page.wait_for_function("window.renders.length >= 4", timeout=timeout_ms, polling=100)
    out["close_ms"] = round(page.evaluate("window.renders[3].at") - close_at, 1)
    context.close()
    return out


def each_size(repeats: int, sizes: list[str], once) -> list[dict]:
    """`once(size)` for every size, `repeats` rounds; each run printed as it ends."""
    runs = []
    for _ in range(repeats):
        for size in sizes:
            runs.append(once(size))
            print(json.dumps(runs[-1]), flush=True)
    return runs


def append_result(path: Path, result: dict) -> None:
    """Add `result` to the JSON file at `path`: {"benchmark", "entries": [...]} (an older
    single-run file becomes the first entry)."""
    data = json.loads(path.read_text()) if path.is_file() else {}
    if "entries" not in data:
        data = {"benchmark": "explorer_render", "entries": [data] if data else []}
    data["entries"].append(result)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def machine(version: str) -> dict:
    return {
        "platform": platform.platform(),
        "processor": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "chromium": version,
        "node": subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
        or None,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--note", default="", help="machine load etc., stored in the JSON")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "explorer_render.json"))
    parser.add_argument("--bundle", default=str(BUNDLE), help="widget.js to load (A/B runs)")
    parser.add_argument("--pan-zoom", action="store_true", help="measure pan/zoom fps instead")
    parser.add_argument(
        "--sizes",
        default=None,
        help="pan/zoom sizes (SIZES, default 1k,2.7k,10k,50k); open-box sizes "
        "(OPEN_SIZES, default 1k,8k,50k)",
    )
    parser.add_argument("--label", default="", help="pan/zoom, open-box: what a run measures")
    parser.add_argument("--open-box", action="store_true", help="measure opening one box instead")
    parser.add_argument(
        "--cache",
        default=str(Path(tempfile.gettempdir()) / "etp_viz_bench"),
        help="open-box: where the generated deep stacks are kept",
    )
    parser.add_argument("--timeout", type=float, default=600, help="open-box: seconds per step")
    parser.add_argument("--flat", action="store_true", help="open-box: one Graphviz call a graph")
    args = parser.parse_args()
    load_before = os.getloadavg()
    chromium = shutil.which("chromium")
    bundle = Path(args.bundle)
    if chromium is None or not bundle.is_file():
        sys.exit("needs Debian chromium and the built bundle (run scripts/setup.sh)")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp)
        (site / "bench.html").write_text(PAGE)
        shutil.copy(bundle, site / "widget.js")
        from tests.explorer.browser.real_view_models import real_view_model

        vm = real_view_model("stacked_2000")
        (site / "state.json").write_text(json.dumps(Explorer(vm).frontend_state()))
        default = "1k,8k,50k" if args.open_box else "1k,2.7k,10k,50k"
        sizes = (args.sizes or default).split(",")
        if args.open_box:
            for size in sizes:
                eqns = OPEN_SIZES[size][0]
                state = json.loads(deep_stack_state(eqns, Path(args.cache)).read_text())
                if args.flat:
                    state["options"]["level_layout_min_nodes"] = 10**9
                (site / f"{size}.json").write_text(json.dumps(state))
        handler = functools.partial(Quiet, directory=str(site))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}"
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
            if args.open_box:
                runs = each_size(
                    args.repeats,
                    sizes,
                    lambda size: open_box_once(browser, base, size, args.timeout * 1000),
                )
            elif args.pan_zoom:
                runs = each_size(
                    args.repeats, sizes, lambda size: pan_zoom_once(browser, base, size)
                )
            else:
                runs = [run_once(browser, base) for _ in range(args.repeats)]
            version = browser.version
            browser.close()
        server.shutdown()

    load_after = os.getloadavg()

    def record(benchmark: str, **fields) -> None:
        """Append one A/B-able entry (label, bundle, runs) to --out."""
        result = {
            "benchmark": benchmark,
            "label": args.label,
            "bundle": str(bundle),
            **fields,
            "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "machine": machine(version),
            "runs": runs,
            "load_before": load_before,
            "load_after": load_after,
            "note": args.note,
        }
        append_result(Path(args.out), result)

    if args.open_box:
        record(
            "explorer_open_box",
            flat=args.flat,
            model="generated make_deep_stack(2000 | 6000 | 37000), every box open but one "
            "layer (1k: 30 % of the layers), then that layer opened",
            targets={"open_ms_8k": 2000},
        )
        return
    if args.pan_zoom:
        record(
            "explorer_pan_zoom",
            model="real make_deep_stack(2000), expanded, fitted; 10k/50k: tiled copies",
            targets={"fps_1k": 55, "fps_10k": 30},
        )
        return

    def summary(key):
        values = [r[key] for r in runs]
        return {"median": statistics.median(values), "max": max(values)}

    result = {
        "benchmark": "explorer_render",
        "model": "real make_deep_stack(2000): "
        f"{sum(n['kind'] == 'eqn' for n in vm['nodes'])} equations, {len(vm['nodes'])} nodes",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": machine(version),
        "targets": {"first_render_ms": 1000, "expand_ms": 500, "longest_task_ms": 50},
        "summary": {
            k: summary(k)
            for k in ("first_render_ms", "expand_ms", "longest_task_ms", "all_expanded_total_ms")
        },
        "runs": runs,
        "load_before": load_before,
        "load_after": load_after,
        "note": args.note,
    }
    append_result(Path(args.out), result)
    print(json.dumps(result["summary"], indent=2))


if __name__ == "__main__":
    main()
