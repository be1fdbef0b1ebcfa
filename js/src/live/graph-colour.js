// @ts-check
/**
 * Graph nodes coloured by the current eligibility-trace magnitude of their relation: each
 * relation's ETP equation node (view model `relations[].node`, or the collapsed cluster that
 * hides it) is filled on a sequential colour map anchored at zero, linear up to the largest
 * magnitude seen so far in the run (a scale that only grows: a node keeps its colour unless
 * its own magnitude changes; 15.2 and 15.8 look alike); the legend prints the range.
 */
import { css, sequential } from "./colormap.js";

const ORIGINAL_FILL = "data-etp-fill";
const MARK = "etp-trace-coloured";

/**
 * Colour position (0..1) of each magnitude on a log scale between the smallest and largest
 * positive magnitude.
 * @param {Map<string, number>} magnitudes
 * @returns {{positions: Map<string, number>, min: number, max: number}}
 */
export function logPositions(magnitudes) {
  const positive = [...magnitudes.values()].filter((v) => Number.isFinite(v) && v > 0);
  const min = positive.length ? Math.min(...positive) : NaN;
  const max = positive.length ? Math.max(...positive) : NaN;
  const span = Math.log10(max) - Math.log10(min);
  const positions = new Map();
  for (const [relation, v] of magnitudes) {
    if (!Number.isFinite(v)) continue;
    positions.set(relation, v > 0 && span > 1e-9 ? (Math.log10(v) - Math.log10(min)) / span : v > 0 ? 1 : 0);
  }
  return { positions, min, max };
}

/**
 * Colour position (0..1) of each magnitude on a linear scale from 0 to `max` (the largest
 * magnitude of the run so far; values above it saturate).
 * @param {Map<string, number>} magnitudes
 * @param {number} max
 * @returns {{positions: Map<string, number>, min: number, max: number}}
 */
export function zeroPositions(magnitudes, max) {
  const positions = new Map();
  for (const [relation, v] of magnitudes) {
    if (!Number.isFinite(v)) continue;
    positions.set(relation, max > 0 ? Math.min(Math.max(v / max, 0), 1) : 0);
  }
  return { positions, min: 0, max };
}

/**
 * The largest finite magnitude of `magnitudes` and `previous` (the fixed scale's top: it
 * only grows during a run).
 * @param {Map<string, number>} magnitudes @param {number} previous
 */
export function grownMax(magnitudes, previous = 0) {
  let max = Number.isFinite(previous) ? previous : 0;
  for (const v of magnitudes.values()) if (Number.isFinite(v) && v > max) max = v;
  return max;
}

/**
 * Fill the drawn node of every relation with its magnitude's colour (restoring nodes that no
 * longer have one). Returns the range drawn, or null when nothing is drawn yet.
 * @param {any} app  the ExplorerApp (index, graph, view)
 * @param {Map<string, number>} magnitudes  relation id -> current trace magnitude
 * @param {number} [max]  the top of the scale (0 ... max; default: the largest of `magnitudes`)
 */
export function colourGraph(app, magnitudes, max) {
  const view = app && app.view, graph = app && app.graph, index = app && app.index;
  if (!view || !graph || !index || !view.svg) return null;
  for (const el of view.svg.querySelectorAll(`g.${MARK}`)) restore(el);
  const top = max ?? grownMax(magnitudes);
  const { positions, min } = zeroPositions(magnitudes, top);
  /** @type {Map<string, number>} DOT id -> position (max over the relations it shows) */
  const byDot = new Map();
  for (const relation of index.vm.relations || []) {
    const position = positions.get(relation.id);
    const dotId = position === undefined ? undefined : graph.nodeToDot.get(relation.node);
    if (dotId === undefined || position === undefined) continue;
    byDot.set(dotId, Math.max(byDot.get(dotId) ?? 0, position));
  }
  for (const [dotId, position] of byDot) {
    const el = view.elements.get(dotId);
    const shape = el && el.querySelector("polygon, ellipse, path");
    if (!el || !shape) continue;
    if (!shape.hasAttribute(ORIGINAL_FILL)) shape.setAttribute(ORIGINAL_FILL, shape.getAttribute("fill") || "none");
    shape.setAttribute("fill", css(sequential(position)));
    el.classList.add(MARK);
    el.setAttribute("data-trace-position", position.toFixed(3));
    for (const t of el.querySelectorAll("text")) {
      if (!t.hasAttribute(ORIGINAL_FILL)) t.setAttribute(ORIGINAL_FILL, t.getAttribute("fill") || "");
      t.setAttribute("fill", position < 0.6 ? "#fff" : "#000");
    }
  }
  return byDot.size ? { min, max: top, count: byDot.size } : null;
}

function restore(/** @type {Element} */ el) {
  el.classList.remove(MARK);
  el.removeAttribute("data-trace-position");
  for (const item of el.querySelectorAll(`[${ORIGINAL_FILL}]`)) {
    const original = item.getAttribute(ORIGINAL_FILL) || "";
    if (original) item.setAttribute("fill", original); else item.removeAttribute("fill");
    item.removeAttribute(ORIGINAL_FILL);
  }
}
