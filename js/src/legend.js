// @ts-check
/**
 * The graph's legend, generated from what is on screen: one entry per kind of mark the
 * current layout draws (./graph.js `drawnKeys`), the selection's highlight classes, and a
 * colour bar while the live session colours weight ops by their trace size ‖ε‖. Entries
 * (label, plain-language tooltip, swatch, colours) come from the view model's `legend`,
 * defined once in etp_viz/view/palette.py; the static fallback (etp_viz/explorer/widget.py)
 * lists the same entries for what it draws.
 *
 * Each item carries `data-key` and `data-colours` (the colours it explains), so a test can
 * check that every colour on the graph has an entry.
 */
import { h } from "./dom.js";
import { drawnKeys, nodeKey } from "./graph.js";
import { sequential, css } from "./live/colormap.js";

const SVG_NS = "http://www.w3.org/2000/svg";

/**
 * @typedef {{key: string, label: string, title?: string, swatch?: string, fill?: string|null,
 *   stroke?: string|null, line?: string}} LegendEntry
 */

/** highlight class (./view.js) -> its legend key */
export const HIGHLIGHT_KEYS = /** @type {Record<string, string>} */ ({
  "hl-selected": "hl_selected", "hl-path": "hl_path", "hl-boundary": "hl_boundary",
  "hl-cluster": "hl_cluster", "hl-transition": "hl_transition", "hl-slice": "slice", "hl-search": "hl_search",
});

/**
 * The entries of `keys`, in the view model's legend order (a key the view model has no entry
 * for, e.g. in JSON written before the palette existed, is listed by its name).
 * @param {LegendEntry[] | undefined} vmLegend
 * @param {Iterable<string>} keys
 * @returns {LegendEntry[]}
 */
export function legendEntries(vmLegend, keys) {
  const wanted = new Set(keys);
  const known = (vmLegend || []).filter((e) => e.swatch && wanted.has(e.key));
  const missing = [...wanted].filter((k) => !known.some((e) => e.key === k)).sort();
  return [...known, ...missing.map((key) => ({ key, label: key.replace(/_/g, " "), swatch: "box" }))];
}

/** @param {string} tag @param {Record<string, string|number>} attrs */
function svgEl(tag, attrs) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

const DASH = /** @type {Record<string, string>} */ ({ dashed: "5,2", dotted: "1.5,3" });

/**
 * A small SVG drawing of an entry's mark (box, ellipse, line, …) in its own colours.
 * @param {LegendEntry} e
 */
export function swatch(e) {
  const svg = /** @type {SVGSVGElement} */ (svgEl("svg", { width: 28, height: 16, viewBox: "0 0 28 16", class: "etp-swatch", "aria-hidden": "true" }));
  const line = e.line || "solid";
  // fill "ramp": weight ops filled by the live trace colour map (the border keeps its meaning)
  const ramp = e.fill === "ramp";
  const paint = { fill: ramp ? "url(#etp-legend-ramp-swatch)" : e.fill || "none", stroke: e.stroke || "none", "stroke-width": line === "double" ? 1.5 : 2 };
  if (DASH[line]) Object.assign(paint, { "stroke-dasharray": DASH[line] });
  const shape = e.swatch || "box";
  if (ramp) svg.append(rampDefs("etp-legend-ramp-swatch"));
  if (shape === "line") {
    svg.append(svgEl("line", { x1: 1, y1: 8, x2: 27, y2: 8, stroke: e.stroke || "#000", "stroke-width": 3, ...(DASH[line] ? { "stroke-dasharray": DASH[line] } : {}) }));
  } else if (shape === "ellipse") {
    svg.append(svgEl("ellipse", { cx: 14, cy: 8, rx: 12, ry: 6.5, ...paint }));
  } else if (shape === "diamond") {
    svg.append(svgEl("polygon", { points: "14,1 27,8 14,15 1,8", ...paint }));
  } else if (shape === "house") {
    svg.append(svgEl("polygon", { points: "2,6 14,1 26,6 26,15 2,15", ...paint }));
  } else if (shape === "note") {
    svg.append(svgEl("polygon", { points: "2,2 21,2 26,7 26,14 2,14", ...paint }));
  } else if (shape === "text") {
    const t = svgEl("text", { x: 14, y: 12, "text-anchor": "middle", "font-size": 11, fill: "#222" });
    t.textContent = "⟨1⟩";
    svg.append(t);
  } else if (shape === "ramp") {
    svg.append(rampDefs("etp-legend-ramp-swatch"), svgEl("rect", { x: 1, y: 2, width: 26, height: 12, fill: "url(#etp-legend-ramp-swatch)" }));
  } else {
    const rx = shape === "round" ? 4 : shape === "box3d" ? 0 : 2;
    if (shape === "box3d") svg.append(svgEl("polyline", { points: "5,2 5,-1 27,-1 27,11 24,11", fill: "none", stroke: e.stroke || "#777", transform: "translate(0,2)" }));
    svg.append(svgEl("rect", { x: 2, y: shape === "box3d" ? 4 : 2, width: shape === "box3d" ? 21 : 24, height: shape === "box3d" ? 10 : 12, rx, ...paint }));
    if (line === "double") svg.append(svgEl("rect", { x: 5, y: 5, width: 18, height: 6, rx: 2, fill: "none", stroke: e.stroke || "#000", "stroke-width": 1.5 }));
  }
  return svg;
}

/** A horizontal viridis gradient (the live trace colour map, ./live/colormap.js). */
function rampDefs(/** @type {string} */ id) {
  const defs = svgEl("defs", {});
  const gradient = svgEl("linearGradient", { id, x1: 0, x2: 1, y1: 0, y2: 0 });
  for (let i = 0; i <= 8; i++) gradient.append(svgEl("stop", { offset: i / 8, "stop-color": css(sequential(i / 8)) }));
  defs.append(gradient);
  return defs;
}

/**
 * The colour bar of the live trace colouring: low … high over a viridis ramp.
 * @param {{min: string, max: string} | null} range  formatted ends (null: not known)
 */
function colourBar(range) {
  const svg = svgEl("svg", { width: 110, height: 16, viewBox: "0 0 110 16", class: "etp-colour-bar", "data-colour-bar": "" });
  svg.append(rampDefs("etp-legend-ramp"), svgEl("rect", { x: 0, y: 2, width: 110, height: 12, fill: "url(#etp-legend-ramp)", stroke: "#999", "stroke-width": 0.5 }));
  return h("span", { class: "etp-colour-bar-wrap" }, h("span", { class: "etp-dim" }, range ? range.min : "small"), svg,
    h("span", { class: "etp-dim" }, range ? range.max : "large"));
}

/**
 * The legend: one item per entry, its swatch, its label and its tooltip (`title`).
 * @param {LegendEntry[]} entries
 * @param {{traceRange?: {min: string, max: string} | null}} [live]
 */
export function legendPanel(entries, live = {}) {
  return h("div", { class: "etp-legend", role: "list", "aria-label": "legend" }, ...entries.map((e) =>
    h("div", { class: "etp-legend-item", role: "listitem", "data-key": e.key, title: e.title || e.label,
      "data-colours": [e.fill, e.stroke].filter((c) => c && c !== "ramp").join(" ").toLowerCase() },
    e.swatch === "ramp" ? colourBar(live.traceRange || null) : swatch(e), h("span", {}, e.label))));
}

/**
 * The legend of what is on screen, into the app's legend bar: the drawn graph's marks
 * (./graph.js drawnKeys), the selection's highlights, the keyboard focus ring and, while weight
 * ops are coloured by trace size, the colour bar; swatches in the page's theme.
 * @param {any} app  the ExplorerApp (./index.js)
 */
export function graphLegend(app) {
  if (!app.index || !app.graph) return;
  const view = app.view;
  const keys = drawnKeys(app.index, app.graph, (dotId) => view.items.has(dotId));
  // weight ops that lift=True made from plain ops (the view model's `lifted`)
  if (app.graph.items.some((/** @type {any} */ item) => item.node && item.node.lifted)) keys.add("lifted");
  for (const cls of app.highlightClasses || []) if (HIGHLIGHT_KEYS[cls]) keys.add(HIGHLIGHT_KEYS[cls]);
  const coloured = Boolean(view.svg && view.svg.querySelector("[data-trace-position]"));
  if (coloured) keys.add("trace");
  if (view.ring) keys.add("focus");
  const hex = app.appearance.hex();
  let entries = legendEntries(app.index.vm.legend, keys).map((e) => ({ ...e, fill: hex(e.fill), stroke: hex(e.stroke) }));
  if (coloured) {
    // weight ops filled by trace size: their swatch shows the colour map, not the fill they lost
    const plain = uncolouredKeys(app);
    entries = entries.map((e) => (e.key.startsWith("etp") && !plain.has(e.key) ? { ...e, fill: "ramp" } : e));
  }
  const traceRange = coloured ? app.traceRange() : null;
  // live frames recolour the graph ~20 times a second: rebuild only what changed
  const signature = JSON.stringify([entries.map((e) => [e.key, e.fill, e.stroke]), traceRange]);
  if (signature === app.legendSignature && app.legendEl.firstChild) return;
  app.legendSignature = signature;
  app.legendEl.replaceChildren(legendPanel(entries, { traceRange }));
}

/** Legend keys of the drawn nodes that keep their own fill (not coloured by trace size). @param {any} app */
function uncolouredKeys(app) {
  const keys = new Set();
  if (!app.graph || !app.index) return keys;
  for (const item of app.graph.items) {
    const el = item.node ? app.view.elements.get(item.dotId) : null;
    if (el && item.node && !el.hasAttribute("data-trace-position")) keys.add(nodeKey(item.node));
  }
  return keys;
}
