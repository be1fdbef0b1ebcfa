// @ts-check
/**
 * The live panels' small helpers (./index.js re-exports the public ones): smoothing choices,
 * which panel draws a series, constant heatmaps explained, byte counts, the waiting text.
 */

import { h } from "../dom.js";
import { LINE_COLOURS } from "./colormap.js";
import { formatNumber, drawConstant } from "./plots.js";

/** @typedef {import("../types.js").LivePanelSpec} LivePanelSpec */
/** @typedef {import("./series.js").Series} Series */

/**
 * Smoothing choices of the loss and accuracy curves: a trailing mean over this many episodes
 * of the task (`spec.episode` steps; 20 steps without episodes). 0: raw.
 */
export const SMOOTHING_CHOICES = [[0, "raw"], [1, "mean of 1 episode"], [10, "mean of 10 episodes"], [50, "mean of 50 episodes"]];

/** The default choice: episodes enough for a window of at least 50 steps (short episodes of a
 * masked task hold a few labelled steps each). */
export function defaultSmoothing(/** @type {any} */ spec) {
  const episode = Number(spec && spec.episode) > 1 ? Number(spec.episode) : 20;
  return episode >= 50 ? 1 : episode >= 5 ? 10 : 50;
}

/** The smoothing window in steps: `episodes` episodes of `spec.episode` steps (20 without). */
export function smoothingWindow(/** @type {any} */ spec, /** @type {number} */ episodes) {
  const episode = Number(spec && spec.episode) > 1 ? Number(spec.episode) : 20;
  return Math.round(episodes * episode);
}
export const TRIMS = [["0", "no trimming"], ["0.01", "trim 1 %"], ["0.05", "trim 5 %"]];

/** Which panel draws a series: loss, all traces together, or the series' own panel. */
export function panelOf(/** @type {LivePanelSpec} */ spec) {
  if (spec.kind === "line" && /^trace(_x|_f)?\//.test(spec.name)) return "traces";
  const panel = /** @type {any} */ (spec).panel;
  return typeof panel === "string" && panel ? panel : spec.name;
}

/**
 * The single value of a series when every finite value is the same (within 1e-6 relative):
 * a constant dh/dy or dh/dh panel; null otherwise.
 * @param {ArrayLike<number>} data
 */
export function constantValue(data) {
  let first = NaN, count = 0;
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    if (!Number.isFinite(v)) continue;
    if (!count) first = v;
    else if (Math.abs(v - first) > 1e-6 * Math.max(1, Math.abs(first))) return null;
    count++;
  }
  return count ? first : null;
}

/** The explanation of a constant (`spec.constants`: `[{value, text}]`) matching `value`. */
export function explainConstant(/** @type {any} */ spec, /** @type {number} */ value) {
  for (const c of (spec && spec.constants) || []) {
    if (Math.abs(Number(c.value) - value) <= 1e-4 * Math.max(1, Math.abs(value))) return String(c.text);
  }
  return "";
}

/** `1536` -> "1.5 KiB" (mirrors etp_viz.live.compare.format_bytes). */
export function formatBytes(/** @type {number} */ n) {
  if (n == null || !Number.isFinite(Number(n))) return "–";
  const units = ["B", "KiB", "MiB", "GiB"];
  let value = Number(n), unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit++; }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/**
 * The learner as the status line names it: its registry name and the options that are not at
 * their defaults (`learner_options`, etp_viz/learn/knobs.py), `eprop (feedback=random)`.
 * @param {string} algorithm
 * @param {Record<string, any> | null | undefined} options
 */
export function learnerText(algorithm, options) {
  const parts = Object.entries(options || {}).map(([k, v]) => `${k}=${Array.isArray(v) ? v.join("/") : v}`);
  return parts.length ? `${algorithm} (${parts.join(", ")})` : algorithm;
}

/** First step of the recent window of a compare-mode `[k, m, 2]` series. */
export function firstStepOf(/** @type {Series} */ series) {
  let first = Infinity;
  const [k, m] = series.shape;
  for (let i = 0; i < k * m; i++) { const step = series.data[i * 2]; if (Number.isFinite(step) && step < first) first = step; }
  return Number.isFinite(first) ? first : null;
}

/** A panel that waits (compiling): its text in the middle. */
export function drawWaiting(/** @type {HTMLCanvasElement} */ canvas, /** @type {string} */ text) {
  const ctx = canvas.getContext("2d");
  if (!ctx) return;
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  ctx.font = "13px sans-serif";
  ctx.fillStyle = "#8a5a00";
  ctx.textAlign = "center";
  ctx.textBaseline = "middle";
  ctx.fillText(text, canvas.width / 2, canvas.height / 2, canvas.width - 8);
  ctx.textBaseline = "alphabetic";
}

/**
 * Compare mode's cost table rows (a head row, then one row per algorithm, its colour the one
 * of its lines).
 * @param {import("../types.js").CompareRow[]} rows
 */
export function compareRows(rows) {
  const fmt = (/** @type {any} */ v) => (v == null || !Number.isFinite(Number(v)) ? "–" : formatNumber(Number(v)));
  const head = h("tr", {}, ...["algorithm", "step", "loss (last 50)", "cosine vs BPTT", "rel. error", "ms / step", "learner state"].map((t) => h("th", {}, t)));
  const body = rows.map((row, i) => h("tr", { "data-compare-row": row.algorithm, class: row.halted ? "halted" : "", title: row.failure || "" },
    h("td", {}, h("span", { class: "etp-swatch-line", style: { background: LINE_COLOURS[i % LINE_COLOURS.length] } }), row.algorithm, row.halted ? " (halted)" : ""),
    h("td", {}, String(row.step)), h("td", {}, fmt(row.loss)), h("td", {}, fmt(row.cosine)), h("td", {}, fmt(row.rel_error)),
    h("td", { "data-compare-ms": row.algorithm }, fmt(row.ms_per_step)), h("td", {}, formatBytes(row.state_bytes))));
  return [head, ...body];
}

/**
 * A heatmap whose values are one constant over units and steps: the value, where it comes
 * from (`spec.constants`, from the model's time constants) and that it is constant.
 * @param {{canvas: HTMLCanvasElement, box: HTMLElement, caption: HTMLElement}} panel
 * @param {any} spec @param {number} value @param {Series | undefined} series
 */
export function drawConstantPanel(panel, spec, value, series) {
  const symbol = spec.symbol || (spec.name.startsWith("dhdh") ? "dh/dh" : "dh/dy");
  const why = explainConstant(spec, value);
  const columns = series ? (series.steps ? series.steps.length : series.shape[0]) : 0;
  const headline = `${symbol} = ${formatNumber(value)}`;
  const lines = [why ? `= ${why}` : "", `constant over units and steps (${columns} measured)`].filter(Boolean);
  drawConstant(panel.canvas, headline, lines);
  panel.caption.textContent = `${headline}${why ? ` = ${why}` : ""} · constant over units and steps`;
  panel.caption.hidden = false;
  panel.box.dataset.constant = String(value);
}

