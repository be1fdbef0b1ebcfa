"""Checks of the graph's visual language in a rendered page: every colour drawn on the graph
has a legend entry, the legend is not clipped, node labels are large enough, and the live
graph and the static fallback colour each node alike (etp_viz/view/palette.py)."""

from __future__ import annotations

#: JS: a computed colour ("rgb(1, 2, 3)", "none", "#abc") as "#rrggbb" or null
TO_HEX = """(c) => { if (!c || c === 'none' || c === 'transparent') return null;
  const m = c.match(/^rgba?\\((\\d+),\\s*(\\d+),\\s*(\\d+)(?:,\\s*([\\d.]+))?\\)$/);
  if (m) { if (m[4] !== undefined && Number(m[4]) === 0) return null;
    return '#' + [m[1], m[2], m[3]].map((v) => Number(v).toString(16).padStart(2, '0')).join(''); }
  if (/^#[0-9a-f]{6}$/i.test(c)) return c.toLowerCase();
  if (/^#[0-9a-f]{3}$/i.test(c))
    return '#' + [...c.slice(1)].map((v) => v + v).join('').toLowerCase();
  return c; }"""

#: JS: {colours: {hex: [where]}, traceColoured: n, legend: {key: [colours]}} of the live graph
LIVE_COLOURS = (
    """() => { const hex = """
    + TO_HEX
    + """;
  const svg = document.querySelector('.etp-graph-pane svg.etp-graph:not(.etp-building)');
  const colours = {}; let traceColoured = 0;
  for (const g of svg.querySelectorAll('g.node, g.edge, g.cluster')) {
    const coloured = g.hasAttribute('data-trace-position');
    if (coloured) traceColoured += 1;
    g.querySelectorAll(':scope > polygon, :scope > path, :scope > ellipse, :scope > polyline')
      .forEach((shape, i) => {
        const style = getComputedStyle(shape);
        for (const [what, value] of [['fill', style.fill], ['stroke', style.stroke]]) {
          const c = hex(value);
          // a trace-coloured node's own fill is the colour map's (the legend's colour bar)
          if (!c || (coloured && what === 'fill' && i === 0)) continue;
          (colours[c] = colours[c] || []).push(`${g.id} ${what}`);
        }
      });
  }
  const legend = {};
  for (const item of document.querySelectorAll('[data-legend] .etp-legend-item'))
    legend[item.dataset.key] = (item.dataset.colours || '').split(' ').filter(Boolean);
  return { colours, traceColoured, legend }; }"""
)

#: JS: {vm node id: [fill, stroke]} of the first shape of each live node (its own colours,
#: before any trace colouring)
LIVE_NODE_COLOURS = (
    """() => { const hex = """
    + TO_HEX
    + """;
  const app = document.querySelector('.etp-explorer').parentElement.etpExplorer
    || window.etpEl.etpExplorer;
  const out = {};
  for (const [dotId, el] of app.view.elements) {
    const ref = app.graph.dotToVm.get(dotId);
    if (!ref || ref.type !== 'node' || !dotId.startsWith('n')) continue;
    const shape = el.querySelector(':scope > polygon, :scope > path, :scope > ellipse');
    if (!shape) continue;
    out[ref.id] = [hex(shape.getAttribute('data-etp-fill') || shape.getAttribute('fill')),
      hex(shape.getAttribute('stroke'))];
  }
  return out; }"""
)

#: JS: the same for a Graphviz SVG (static fallback): node ids are "node-<vm id>"
STATIC_NODE_COLOURS = (
    """() => { const hex = """
    + TO_HEX
    + """;
  const out = {};
  for (const g of document.querySelectorAll('svg g.node[id^="node-"]')) {
    const shape = g.querySelector('polygon, path, ellipse');  // Graphviz nests it in <g><a>
    if (!shape) continue;
    out[g.id.slice(5)] = [hex(shape.getAttribute('fill')), hex(shape.getAttribute('stroke'))];
  }
  const colours = {};
  for (const g of document.querySelectorAll('svg g.node, svg g.edge, svg g.cluster'))
    for (const shape of g.querySelectorAll('polygon, path, ellipse, polyline'))
      for (const what of ['fill', 'stroke']) { const c = hex(shape.getAttribute(what));
        if (c) (colours[c] = colours[c] || []).push(`${g.id} ${what}`); }
  const legend = {};
  for (const item of document.querySelectorAll('[data-legend] .etp-legend-item'))
    legend[item.dataset.key] = (item.dataset.colours || '').split(' ').filter(Boolean);
  return { nodes: out, colours, legend }; }"""
)

#: JS: rendered size (px) of every node label of the live graph
LABEL_PX = """() => {
  const svg = document.querySelector('.etp-graph-pane svg.etp-graph:not(.etp-building)');
  return [...svg.querySelectorAll('g.node text')].map((t) => {
    const m = t.getScreenCTM();
    return { px: parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b),
      box: t.getBoundingClientRect().height, text: t.textContent };
  }); }"""

#: JS: the legend's box, its items' boxes, the root's box and the viewport
LEGEND_BOXES = """() => {
  const legend = document.querySelector('[data-legend]');
  const r = legend.getBoundingClientRect();
  const items = [...legend.querySelectorAll('.etp-legend-item')].map((item) => {
    const b = item.getBoundingClientRect();
    return { key: item.dataset.key, left: b.left, right: b.right, top: b.top, bottom: b.bottom };
  });
  return { box: { left: r.left, right: r.right, top: r.top, bottom: r.bottom },
    overflow: [legend.scrollWidth - legend.clientWidth, legend.scrollHeight - legend.clientHeight],
    visible: legend.offsetParent !== null, items,
    viewport: { width: innerWidth, height: innerHeight } }; }"""


def assert_every_colour_in_legend(info: dict) -> None:
    """Every colour drawn on the graph is explained by a legend entry of what is drawn."""
    explained = {c for colours in info["legend"].values() for c in colours}
    missing = {c: where[:3] for c, where in info["colours"].items() if c not in explained}
    assert not missing, f"colours on the graph without a legend entry: {missing}"
    if info.get("traceColoured"):
        assert "trace" in info["legend"], "trace-coloured nodes but no colour bar in the legend"


def assert_legend_not_clipped(boxes: dict) -> None:
    assert boxes["visible"] and boxes["items"], boxes
    assert boxes["overflow"][0] <= 1 and boxes["overflow"][1] <= 1, boxes["overflow"]
    box, view = boxes["box"], boxes["viewport"]
    for item in boxes["items"]:
        inside = (
            item["left"] >= box["left"] - 0.5
            and item["right"] <= box["right"] + 0.5
            and item["top"] >= box["top"] - 0.5
            and item["bottom"] <= box["bottom"] + 0.5
        )
        on_screen = item["right"] <= view["width"] and item["bottom"] <= view["height"]
        assert inside and on_screen, f"legend item {item['key']} clipped: {item} in {box}"
