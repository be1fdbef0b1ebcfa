"""Opening a box on a big graph lays out that box and the levels around it, not the whole graph
(issue #32, "big graphs fluid"), in headless Chromium.

The ~2,000-equation stack with every box open but one layer (~2,600 nodes drawn, above
js/src/graph.js LEVEL_LAYOUT_MIN_NODES): a click on the layer's box makes three Graphviz calls
(the layer, its range of layers, the top level), counted by the layout client's test hook
(``layout.calls``: one entry per call, with the nodes it laid out), and the drawn elements of
every other level stay in the page (the same elements). Structural checks only: no timing is
asserted (bench/explorer_render.py --open-box measures it).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

TARGET = "cell:layers.50"
RANGE = "m:layers.48…layers.63"
#: JS: every module cluster open but `closed`
OPEN_ALL_BUT = """(closed) => { const app = window.etpEl.etpExplorer;
  window.bigExpanded = [...app.index.clusters.values()]
    .filter((c) => ['module', 'subjaxpr', 'cell'].includes(c.kind) && c.id !== closed)
    .map((c) => c.id);
  window.etpModel.set('expanded', window.bigExpanded); }"""
#: JS: the drawn box (frame) of a cluster: client rect
FRAME = """(id) => { const app = window.etpEl.etpExplorer;
  const el = document.getElementById(app.graph.clusterToDot.get(id));
  const r = el && el.querySelector('path, polygon').getBoundingClientRect();
  return r && {left: r.left, top: r.top, right: r.right, bottom: r.bottom}; }"""


def rendered(p, count):
    p.wait_for_function(
        f"window.etpEl.etpExplorer.timings.length >= {count}"
        " && !document.querySelector('.etp-graph-pane svg.etp-building')",
        timeout=180000,
    )


def test_opening_a_box_lays_out_its_level_and_the_levels_around_it(harness, stacked_state):
    page = harness(stacked_state, "incremental")
    p = page.page
    rendered(p, 1)
    app = "window.etpEl.etpExplorer"
    # the folded view: one Graphviz call, no levels
    assert p.evaluate(f"{app}.layout.callCount") == 0
    p.evaluate(OPEN_ALL_BUT, TARGET)
    rendered(p, 2)
    nodes = p.evaluate(f"{app}.graph.nodeCount")
    assert nodes > 2000, nodes
    levels = p.evaluate(f"{app}.view.levels.size")
    assert levels > 150, f"{levels} levels drawn"
    # an element of another level, marked: it must still be the one drawn after the click
    frame = f"document.getElementById({app}.graph.clusterToDot.get('cell:layers.10'))"
    p.evaluate(f"{frame}.dataset.probe = 'kept'")
    calls = p.evaluate(f"{app}.layout.callCount")
    dot = p.evaluate(f"{app}.graph.clusterToDot.get('{TARGET}')")
    assert dot.startswith("k")
    p.evaluate(f"{app}.view.center(['{dot}'])")
    p.wait_for_timeout(300)
    p.locator(f"g.node#{dot}").click()
    rendered(p, 3)
    assert p.evaluate(f"{app}.graph.clusterToDot.get('{TARGET}')").startswith("s")
    made = p.evaluate(f"{app}.layout.calls.slice(-({app}.layout.callCount - {calls}) || 1e9)")
    # the opened layer, its range of 16 layers (the layer now a box), the top level (36 nodes)
    assert sorted(str(c["box"]) for c in made) == sorted([TARGET, RANGE, "None"]), made
    assert sum(c["nodes"] for c in made) < 100, made
    assert p.evaluate(f"{app}.graph.nodeCount") > nodes
    assert p.evaluate(f"document.querySelector('[data-probe=kept]') === {frame}"), (
        "another level's elements were drawn again"
    )
    # the opened layer is drawn inside its range's box
    inner, outer = p.evaluate(FRAME, TARGET), p.evaluate(FRAME, RANGE)
    assert outer["left"] <= inner["left"] and inner["right"] <= outer["right"], (inner, outer)
    assert outer["top"] <= inner["top"] and inner["bottom"] <= outer["bottom"], (inner, outer)

    # an edge into the layer from the layer before it: its pieces inside the boxes highlight
    # with it, and a click on one of them selects that edge
    edge = p.evaluate(
        f"""() => {{ const app = {app}; const inside = (id) => {{
          const n = app.index.nodes.get(id); return n && n.cluster && (n.cluster === '{TARGET}'
            || app.index.clusters.get(n.cluster).parent === '{TARGET}'); }};
          for (const [dotId, parts] of app.view.parts) {{
            const e = app.graph.edgeByDot.get(dotId);
            if (e && e.vmIds.some((id) => inside(app.index.edges.get(id).target)))
              return {{dotId, vm: e.vmIds[0], parts}}; }}
          return null; }}"""
    )
    assert edge and len(edge["parts"]) >= 2, edge
    p.evaluate(
        f"window.etpModel.set('highlight', {{kind: 'edge', id: {edge['vm']!r}}}); "
        f"window.etpModel.set('selected', {{kind: 'edge', id: {edge['vm']!r}}})"
    )
    for part in [edge["dotId"], *edge["parts"]]:
        p.wait_for_selector(f"g.edge#{part}.hl-selected", state="attached")
    p.evaluate("window.etpModel.set('highlight', {}); window.etpModel.set('selected', {})")
    p.locator(f"g.edge#{edge['parts'][-1]}").dispatch_event("click")
    assert p.evaluate("window.etpModel.get('selected')")["kind"] == "edge"

    # closing it again: the state was laid out before, no Graphviz call; the elements kept
    calls = p.evaluate(f"{app}.layout.callCount")
    p.evaluate("window.etpModel.set('expanded', window.bigExpanded)")
    rendered(p, 4)
    assert p.evaluate(f"{app}.graph.clusterToDot.get('{TARGET}')").startswith("k")
    assert p.evaluate(f"{app}.layout.callCount") == calls
    assert p.evaluate("Boolean(document.querySelector('[data-probe=kept]'))")
    assert page.errors == [] and page.aborted == [], (page.errors, page.aborted)
