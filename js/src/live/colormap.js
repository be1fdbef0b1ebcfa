// @ts-check
/** Colour maps of the live panels: diverging (heatmaps, centred at 0) and sequential (graph). */

/** RdBu-like diverging stops, from -1 (blue) through 0 (white) to +1 (red). */
const DIVERGING = [[33, 102, 172], [103, 169, 207], [209, 229, 240], [247, 247, 247], [253, 219, 199], [239, 138, 98], [178, 24, 43]];
/** Viridis stops (perceptually uniform, colour-blind safe). */
const SEQUENTIAL = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];

/** @param {number[][]} stops @param {number} t in [0, 1] @returns {[number, number, number]} */
function interpolate(stops, t) {
  const x = Math.min(Math.max(Number.isFinite(t) ? t : 0, 0), 1) * (stops.length - 1);
  const i = Math.min(Math.floor(x), stops.length - 2);
  const f = x - i;
  const a = stops[i], b = stops[i + 1];
  return [0, 1, 2].map((k) => Math.round(a[k] + (b[k] - a[k]) * f));
}

/** Colour of a value already scaled to [-1, 1] (0 is white; NaN is grey). */
export function diverging(/** @type {number} */ t) {
  if (!Number.isFinite(t)) return /** @type {[number, number, number]} */ ([150, 150, 150]);
  return interpolate(DIVERGING, (t + 1) / 2);
}

/** Colour of a value in [0, 1] on the sequential map. */
export function sequential(/** @type {number} */ t) {
  return interpolate(SEQUENTIAL, t);
}

/** CSS colour of an rgb triple. */
export function css(/** @type {number[]} */ rgb) {
  return `rgb(${rgb[0]},${rgb[1]},${rgb[2]})`;
}

/** Distinct line colours (tab10). */
export const LINE_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
