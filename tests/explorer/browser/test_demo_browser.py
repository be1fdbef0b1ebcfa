"""The README's first command end to end: ``python -m etp_viz demo`` writes an offline HTML;
Chromium opens it via file:// with no network and draws the graph and the recorded history
(controls disabled: no kernel). 0 requests, 0 page errors, a screenshot that is not blank."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from .legend_checks import (
    LABEL_PX,
    LEGEND_BOXES,
    LIVE_COLOURS,
    LIVE_NODE_COLOURS,
    STATIC_NODE_COLOURS,
    TO_HEX,
    assert_every_colour_in_legend,
    assert_legend_not_clipped,
)

pytestmark = pytest.mark.browser

STEPS = 48
FIDELITY_EVERY = 12  # the demo measures fidelity by default; make it land inside the run


@pytest.fixture(scope="module")
def demo_html(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "demo.html"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "etp_viz",
            "demo",
            "--steps",
            str(STEPS),
            "--fidelity-every",
            str(FIDELITY_EVERY),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert out.is_file() and f"{STEPS} steps" in result.stdout
    return out


def drawn_pixels(page, name):
    return page.page.evaluate(
        """(name) => { const c = document.querySelector(`canvas[data-live="${name}"]`);
          const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          let n = 0; for (let i = 3; i < d.length; i += 4) n += d[i] > 0; return n; }""",
        name,
    )


def test_demo_html_renders_graph_and_history_offline(open_page, demo_html, tmp_path):
    from PIL import Image

    page = open_page(None)  # file:// only; anything else is aborted and counted
    page.page.goto(demo_html.as_uri())
    # the page's CSP forbids eval: wait with selectors
    page.page.wait_for_selector(".etp-graph-pane svg g.node", timeout=30000)
    page.page.wait_for_selector("[data-region=live]:not([hidden])")
    page.page.wait_for_selector("g.etp-trace-coloured")
    assert page.page.is_visible("[data-live-note]")
    assert "no kernel" in page.page.text_content("[data-live-note]")
    for action in ("step", "run", "pause", "reset"):
        assert page.page.is_disabled(f"button[data-live-action={action}]")
    status = page.page.text_content("[data-live-status]")
    assert f"step {STEPS}" in status and "device cpu" in status.lower(), status
    panels = page.page.eval_on_selector_all(
        "canvas[data-live]", "cs => cs.map(c => c.dataset.live)"
    )
    assert {"loss", "traces"} <= set(panels) and any(p.startswith("df/") for p in panels)
    assert any(p.startswith("dhdh/") for p in panels)
    for name in panels:
        assert drawn_pixels(page, name) > 500, name
    assert page.page.is_visible(".etp-live-legend")
    data = page.page.screenshot(path=str(tmp_path / "demo.png"), full_page=True)
    image = Image.open(io.BytesIO(data)).convert("L")
    low, high = image.getextrema()
    assert high - low > 100 and len(set(image.resize((200, 130)).tobytes())) > 20
    assert page.errors == [], page.errors
    assert page.aborted == [], f"network requests from an offline page: {page.aborted}"


def open_demo(open_page, demo_html, width=1400, height=1000):
    """The demo page at a projector's size, drawn, trace-coloured and with its legend."""
    page = open_page(None)
    page.page.set_viewport_size({"width": width, "height": height})
    page.page.goto(demo_html.as_uri())
    page.page.wait_for_selector(".etp-graph-pane svg g.node", timeout=30000)
    page.page.wait_for_selector("g.etp-trace-coloured")
    page.page.wait_for_selector("[data-legend] [data-key=trace] [data-colour-bar]")
    return page


#: JS: the explorer of a page (the demo's mounts it on the root's parent)
APP = "document.querySelector('.etp-explorer').parentElement.etpExplorer"
#: JS: ids of the graph's nodes drawn (partly) outside the graph pane
OUTSIDE = """() => { const pane = document.querySelector('.etp-graph-pane').getBoundingClientRect();
  return [...document.querySelectorAll('.etp-graph-pane svg.etp-graph g.node')]
    .map((g) => [g.id, g.getBoundingClientRect()])
    .filter(([, r]) => r.left < pane.left - 0.5 || r.right > pane.right + 0.5
      || r.top < pane.top - 0.5 || r.bottom > pane.bottom + 0.5).map(([id]) => id); }"""
#: JS: the graph pane's, the explorer's and the drawn graph's size on screen (px), the part of
#: the drawn graph inside the pane
SIZES = """() => { const pane = document.querySelector('.etp-graph-pane').getBoundingClientRect();
  const root = document.querySelector('.etp-explorer').getBoundingClientRect();
  const g = document.querySelector('.etp-graph-pane svg.etp-graph g.graph')
    .getBoundingClientRect();
  return { pane: pane.width, paneHeight: pane.height, root: root.width,
    drawn: Math.min(g.right, pane.right) - Math.max(g.left, pane.left),
    drawnHeight: Math.min(g.bottom, pane.bottom) - Math.max(g.top, pane.top) }; }"""
#: JS: the view-model ids of the cells the graph draws folded (one node each)
FOLDED_CELLS = (
    """() => { const app = """
    + APP
    + """; return [...app.index.clusters.values()]
  .filter((c) => c.kind === 'cell' && app.graph.clusterToDot.get(c.id)?.startsWith('k'))
  .map((c) => c.id); }"""
)
#: JS: click the drawn node of a folded cell (what a user does to open its equations)
CLICK_CELL = (
    """(id) => { const dot = """
    + APP
    + """.graph.clusterToDot.get(id);
  document.getElementById(dot).dispatchEvent(new MouseEvent('click', {bubbles: true})); }"""
)
#: JS: the graph is laid out and mounted with the cell `id` open
CELL_OPEN = (
    """(id) => { const app = """
    + APP
    + """; return Boolean(app.graph && app.graph.expanded.has(id)
  && !document.querySelector('.etp-graph-pane svg.etp-building')
  && !app.graph.clusterToDot.get(id)?.startsWith('k')); }"""
)


def open_every_cell(page) -> list[str]:
    """Click each folded cell of the demo's graph open, one at a time (each click lays the
    graph out again); the ids of the cells opened."""
    opened = []
    while cells := page.page.evaluate(FOLDED_CELLS):
        page.page.evaluate(CLICK_CELL, cells[0])
        page.page.wait_for_function(CELL_OPEN, arg=cells[0], timeout=30000)
        opened.append(cells[0])
        assert len(opened) < 20, opened
    return opened


def assert_whole_and_readable(page, what):
    """Every node inside the graph pane, nothing said to be off screen (also after Fit), no
    node label under the fitted view's floor (7 px at text scale 1: ./view.js
    firstViewLabelPx); the sizes of the pane and the drawn graph."""
    outside = page.page.evaluate(OUTSIDE)
    assert outside == [], f"{what}: nodes outside the view: {outside}"
    for _ in range(2):  # the view as drawn, then after Fit
        assert "drag to see more" not in page.page.text_content("[data-status]"), what
        page.page.click("[data-action=fit]")
    labels = page.page.evaluate(LABEL_PX)
    assert labels, f"{what}: no node labels drawn"
    smallest = min(labels, key=lambda label: label["px"])
    assert smallest["px"] >= 7, (
        f"{what}: node label {smallest['text']!r} renders at {smallest['px']:.1f} px"
    )
    sizes = page.page.evaluate(SIZES)
    assert sizes["pane"] >= 0.7 * sizes["root"], (what, sizes)
    return sizes


def test_demo_graph_is_whole_in_its_first_view_and_uses_the_width(open_page, demo_html, tmp_path):
    """At 1400x1000, the default view of the demo model shows the whole graph (every node
    inside the graph pane, nothing said to be off screen, also after Fit), its labels no
    smaller than the fitted view's floor (7 px at text scale 1: ./view.js firstViewLabelPx),
    in a graph pane that is most of the explorer's width.

    The first view folds each cell into one node (issue 41): the demo's LIF layer and its
    readout, a short chain laid out in the direction that draws it largest (./index.js
    relayout); it fills the pane along the side that limits it. Opening both cells (a click
    each) draws their ~20 operations: still whole and readable, and that wide graph spans the
    pane's width."""
    page = open_demo(open_page, demo_html)
    folded = page.page.evaluate(FOLDED_CELLS)
    assert set(folded) == {"cell:rnn", "cell:readout"}, folded
    sizes = assert_whole_and_readable(page, "folded cells")
    # fitted: all of the pane along one side but the view's padding (10 layout units a side:
    # ~20 px at the zoom of a 4-node graph, 4 % of the pane's height)
    fills = max(sizes["drawn"] / sizes["pane"], sizes["drawnHeight"] / sizes["paneHeight"])
    assert fills >= 0.85, f"the folded graph uses a part of its pane: {sizes}"
    page.page.screenshot(path=str(tmp_path / "demo-1400-cells.png"))

    folded_nodes = page.page.eval_on_selector_all(".etp-graph-pane svg g.node", "ns => ns.length")
    assert sorted(open_every_cell(page)) == sorted(folded)
    nodes = page.page.eval_on_selector_all(".etp-graph-pane svg g.node", "ns => ns.length")
    assert nodes > 4 * folded_nodes, (folded_nodes, nodes)
    sizes = assert_whole_and_readable(page, "open cells")
    assert sizes["drawn"] >= 0.9 * sizes["pane"], f"the graph uses a part of its pane: {sizes}"
    page.page.screenshot(path=str(tmp_path / "demo-1400.png"))
    assert page.errors == [], page.errors


def test_demo_legend_explains_every_colour_and_is_not_clipped(open_page, demo_html):
    """The legend lists what is drawn (the trace colour bar while weight ops are coloured by
    ‖ε‖), every colour on the graph has an entry, nothing in it is clipped; with a weight
    selected, the highlight colours get entries too."""
    page = open_demo(open_page, demo_html)
    info = page.page.evaluate(LIVE_COLOURS)
    assert info["traceColoured"] > 0 and "trace" in info["legend"]
    assert_every_colour_in_legend(info)
    assert_legend_not_clipped(page.page.evaluate(LEGEND_BOXES))
    # each entry says in plain words what it means (its tooltip)
    titles = page.page.eval_on_selector_all(
        "[data-legend] .etp-legend-item", "items => items.map(i => i.title)"
    )
    assert all(len(t) > 15 for t in titles), titles
    page.page.click("[data-weight] >> nth=0")
    page.page.wait_for_selector("[data-legend] [data-key=hl_selected]")
    assert_every_colour_in_legend(page.page.evaluate(LIVE_COLOURS))
    assert_legend_not_clipped(page.page.evaluate(LEGEND_BOXES))
    assert page.errors == [], page.errors


def test_demo_static_fallback_uses_the_live_palette(open_page, demo_html, tmp_path):
    """The static fallback stored in notebooks (the graph as SVG plus its legend) colours
    every node exactly as the live page does, and its legend explains every colour it draws.

    With every cell opened: the live page's cells are opened (a click each) and the static
    one is made for the same expansion state (``expanded``), so both draw the operations;
    their colours are compared node by node (the folded first view: the next test)."""
    import shutil

    from etp_viz.explorer.widget import Explorer

    if shutil.which("dot") is None:
        pytest.skip("Graphviz `dot` is not installed (the static SVG needs it)")
    page = open_demo(open_page, demo_html)
    opened = open_every_cell(page)
    assert opened, "the demo's first view folds no cell"
    assert sorted(page.page.evaluate(f"() => {APP}.model.get('expanded')")) == sorted(opened)
    live = page.page.evaluate(LIVE_NODE_COLOURS)
    vm = page.page.evaluate(f"() => {APP}.model.get('view_shell')")
    static = Explorer(view_model=vm, expanded=opened).static_html()
    (tmp_path / "static.html").write_text(f"<!DOCTYPE html><meta charset=utf-8>{static}")
    page.page.goto((tmp_path / "static.html").as_uri())
    drawn = page.page.evaluate(STATIC_NODE_COLOURS)
    shared = sorted(set(live) & set(drawn["nodes"]))
    assert len(shared) >= 10, (sorted(live), sorted(drawn["nodes"]))
    differ = {n: (live[n], drawn["nodes"][n]) for n in shared if live[n] != drawn["nodes"][n]}
    assert not differ, f"live vs static (fill, stroke) differ: {differ}"
    assert_every_colour_in_legend({"colours": drawn["colours"], "legend": drawn["legend"]})
    assert page.errors == [], page.errors


#: JS: {cell cluster id: [fill, stroke]} of each folded cell the live graph draws (one node)
LIVE_CELL_COLOURS = (
    """() => { const hex = """
    + TO_HEX
    + """; const app = """
    + APP
    + """; const out = {};
  for (const [dotId, el] of app.view.elements) {
    const ref = app.graph.dotToVm.get(dotId);
    if (!ref || ref.type !== 'cluster' || !dotId.startsWith('k')) continue;
    const shape = el.querySelector(':scope > polygon, :scope > path, :scope > ellipse');
    if (!shape) continue;
    out[ref.id] = [hex(shape.getAttribute('data-etp-fill') || shape.getAttribute('fill')),
      hex(shape.getAttribute('stroke'))];
  }
  return out; }"""
)


def test_demo_static_fallback_draws_the_folded_first_view(open_page, demo_html, tmp_path):
    """The static fallback of the first view (no ``expanded``) draws what the live first
    view draws: each cell folded into one node (etp_viz/view/dot.py, issue 41), the same
    nodes, in the same colours, and a legend that explains them."""
    import shutil

    from etp_viz.explorer.widget import Explorer

    if shutil.which("dot") is None:
        pytest.skip("Graphviz `dot` is not installed (the static SVG needs it)")
    page = open_demo(open_page, demo_html)
    assert sorted(page.page.evaluate(FOLDED_CELLS)) == ["cell:readout", "cell:rnn"]
    live = {**page.page.evaluate(LIVE_NODE_COLOURS), **page.page.evaluate(LIVE_CELL_COLOURS)}
    vm = page.page.evaluate(f"() => {APP}.model.get('view_shell')")
    static = Explorer(view_model=vm).static_html()
    (tmp_path / "static.html").write_text(f"<!DOCTYPE html><meta charset=utf-8>{static}")
    page.page.goto((tmp_path / "static.html").as_uri())
    drawn = page.page.evaluate(STATIC_NODE_COLOURS)
    assert set(drawn["nodes"]) == set(live), (sorted(live), sorted(drawn["nodes"]))
    assert {"cell:rnn", "cell:readout"} <= set(live)
    differ = {n: (live[n], drawn["nodes"][n]) for n in live if live[n] != drawn["nodes"][n]}
    assert not differ, f"live vs static (fill, stroke) differ: {differ}"
    assert "cell" in drawn["legend"]
    assert_every_colour_in_legend({"colours": drawn["colours"], "legend": drawn["legend"]})
    assert page.errors == [], page.errors
