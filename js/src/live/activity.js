// @ts-check
/**
 * Activity views of the live region, over the last episode: a spiking layer's raster and
 * membrane potentials (or a rate layer's hidden values), the readout against its target, and
 * one synapse's eligibility trace with its neuron's learning signal and its online gradient
 * (the e-prop paper's figure 1, live).
 *
 * Data (pushed by etp_viz/explorer/live_panels.py, `panel_values`): `activity/spikes` and
 * `activity/hidden` `[T, k]`, `activity/output` / `activity/target` `[T, m]`,
 * `activity/synapse` `[T, 3, K]` (rows: trace ε_0j, learning signal L_j, gradient g_0j for
 * the first K units j), each with `steps` (the global step of every row).
 */
import { LINE_COLOURS } from "./colormap.js";
import { axisTitles, formatNumber } from "./plots.js";
import { extent } from "./series.js";

const M = { left: 58, right: 8, top: 6, bottom: 30 };
const FONT = "11px sans-serif";

/** @param {HTMLCanvasElement} canvas */
function begin(canvas) {
  const ctx = canvas.getContext("2d");
  if (!ctx) return null;
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  ctx.font = FONT;
  return { ctx, box: { x: M.left, y: M.top, w: canvas.width - M.left - M.right, h: canvas.height - M.top - M.bottom } };
}

/** Column `u` of a `[T, k]` array. */
export function column(/** @type {Float32Array} */ data, /** @type {number} */ rows, /** @type {number} */ k, /** @type {number} */ u) {
  const out = new Float32Array(rows);
  for (let t = 0; t < rows; t++) out[t] = data[t * k + u];
  return out;
}

/**
 * The unit a synapse view shows by default: the one that spiked most in the window (ties: the
 * lowest index), else the one with the largest total |gradient|; deterministic.
 * @param {{data: Float32Array, shape: number[]} | undefined} spikes
 * @param {{data: Float32Array, shape: number[]} | undefined} synapse
 */
export function mostActiveUnit(spikes, synapse) {
  const score = (/** @type {(u: number) => number} */ f, /** @type {number} */ k) => {
    let best = 0, bestScore = -Infinity;
    for (let u = 0; u < k; u++) { const s = f(u); if (s > bestScore + 1e-12) { best = u; bestScore = s; } }
    return { best, bestScore };
  };
  if (spikes && spikes.shape.length === 2 && spikes.shape[0]) {
    const [rows, k] = spikes.shape;
    const r = score((u) => column(spikes.data, rows, k, u).reduce((a, v) => a + (v > 0.5 ? 1 : 0), 0), k);
    if (r.bestScore > 0) return r.best;
  }
  if (synapse && synapse.shape.length === 3 && synapse.shape[0]) {
    const [rows, , k] = synapse.shape;
    return score((u) => { let a = 0; for (let t = 0; t < rows; t++) a += Math.abs(synapse.data[(t * 3 + 2) * k + u] || 0); return a; }, k).best;
  }
  return 0;
}

/** x position of row `t` of `n` in the box. */
const xAt = (/** @type {any} */ box, /** @type {number} */ t, /** @type {number} */ n) => box.x + (n > 1 ? (t / (n - 1)) * box.w : box.w / 2);

/** Step labels of the first and last row, and the axis titles. */
function frame(/** @type {CanvasRenderingContext2D} */ ctx, /** @type {any} */ box, /** @type {number[]} */ steps, /** @type {string} */ yTitle) {
  ctx.fillStyle = "#555";
  ctx.textBaseline = "top";
  if (steps.length) {
    ctx.textAlign = "left";
    ctx.fillText(`step ${steps[0]}`, box.x, box.y + box.h + 2);
    ctx.textAlign = "right";
    ctx.fillText(`step ${steps[steps.length - 1]}`, box.x + box.w, box.y + box.h + 2);
  }
  axisTitles(ctx, box, "step of the last episode", yTitle);
}

/**
 * One polyline of `values` inside `[y, y + h]` on the scale `[lo, hi]`.
 * @param {CanvasRenderingContext2D} ctx @param {any} box @param {ArrayLike<number>} values
 * @param {number} y @param {number} h @param {number} lo @param {number} hi
 */
function polyline(ctx, box, values, y, h, lo, hi) {
  const span = hi - lo || 1;
  ctx.beginPath();
  let pen = false;
  for (let t = 0; t < values.length; t++) {
    const v = values[t];
    if (!Number.isFinite(v)) { pen = false; continue; }
    const px = xAt(box, t, values.length), py = y + h - ((Math.min(Math.max(v, lo), hi) - lo) / span) * h;
    if (pen) ctx.lineTo(px, py); else ctx.moveTo(px, py);
    pen = true;
  }
  ctx.stroke();
}

/**
 * The spiking layer (raster on top, membrane potentials below) or a rate layer's hidden values.
 * Returns the raster's geometry so a click can pick a unit: `{top, rowHeight, units}` (null
 * without spikes).
 * @param {HTMLCanvasElement} canvas
 * @param {{data: Float32Array, shape: number[], steps?: number[]} | undefined} spikes
 * @param {{data: Float32Array, shape: number[], steps?: number[]} | undefined} hidden
 * @param {number} selected  the unit whose synapse is shown (highlighted)
 */
export function drawLayer(canvas, spikes, hidden, selected) {
  const f = begin(canvas);
  if (!f) return null;
  const { ctx, box } = f;
  const main = hidden || spikes;
  if (!main || !main.shape[0]) {
    ctx.fillStyle = "#999"; ctx.textAlign = "center";
    ctx.fillText("no activity yet", box.x + box.w / 2, box.y + box.h / 2);
    return null;
  }
  const steps = main.steps || [];
  let raster = null;
  let lineTop = box.y, lineHeight = box.h;
  if (spikes && spikes.shape[0]) {
    const [rows, k] = spikes.shape;
    const height = Math.round(box.h * 0.45), rowHeight = height / k;
    raster = { top: box.y, rowHeight, units: k, height };
    ctx.fillStyle = "#fbf3e4";
    ctx.fillRect(box.x, box.y + selected * rowHeight, box.w, rowHeight);
    ctx.fillStyle = "#222";
    const w = Math.max(box.w / Math.max(rows, 1) * 0.7, 1.5);
    for (let t = 0; t < rows; t++) {
      for (let u = 0; u < k; u++) {
        if (spikes.data[t * k + u] > 0.5) ctx.fillRect(xAt(box, t, rows) - w / 2, box.y + u * rowHeight + 1, w, Math.max(rowHeight - 2, 1));
      }
    }
    ctx.fillStyle = "#555"; ctx.textAlign = "right"; ctx.textBaseline = "middle";
    ctx.fillText("spikes", box.x - 3, box.y + height / 2);
    lineTop = box.y + height + 4;
    lineHeight = box.h - height - 4;
  }
  if (hidden && hidden.shape[0]) {
    const [rows, k] = hidden.shape;
    const { min, max } = extent(hidden.data);
    for (let u = 0; u < k; u++) {
      ctx.strokeStyle = LINE_COLOURS[u % LINE_COLOURS.length];
      ctx.lineWidth = u === selected ? 2.2 : 1;
      ctx.globalAlpha = u === selected || !spikes ? 1 : 0.45;
      polyline(ctx, box, column(hidden.data, rows, k, u), lineTop, lineHeight, min, max);
    }
    ctx.globalAlpha = 1;
    ctx.fillStyle = "#555"; ctx.textAlign = "right";
    ctx.textBaseline = "top"; ctx.fillText(formatNumber(max), box.x - 3, lineTop);
    ctx.textBaseline = "bottom"; ctx.fillText(formatNumber(min), box.x - 3, lineTop + lineHeight);
  }
  ctx.strokeStyle = "#bbb"; ctx.lineWidth = 1;
  ctx.strokeRect(box.x + 0.5, box.y + 0.5, box.w, box.h);
  frame(ctx, box, steps, spikes ? "unit · V" : "hidden value");
  return raster;
}

/**
 * The readout (solid) against its target (dashed), one colour per output; a classification's
 * target is drawn only on its labelled steps.
 * @param {HTMLCanvasElement} canvas
 * @param {{data: Float32Array, shape: number[], steps?: number[]} | undefined} output
 * @param {{data: Float32Array, shape: number[]} | undefined} target
 * @param {boolean} classes
 */
export function drawReadout(canvas, output, target, classes) {
  const f = begin(canvas);
  if (!f) return;
  const { ctx, box } = f;
  if (!output || !output.shape[0]) {
    ctx.fillStyle = "#999"; ctx.textAlign = "center";
    ctx.fillText("no activity yet", box.x + box.w / 2, box.y + box.h / 2);
    return;
  }
  const [rows, m] = output.shape;
  let tgt = target && target.shape[0] === rows ? Float32Array.from(target.data) : null;
  if (tgt && classes) {
    for (let t = 0; t < rows; t++) {
      let sum = 0;
      for (let c = 0; c < m; c++) sum += tgt[t * m + c];
      if (sum <= 0) for (let c = 0; c < m; c++) tgt[t * m + c] = NaN;
    }
  }
  let { min, max } = extent(output.data);
  if (tgt) { const e = extent(tgt); min = Math.min(min, e.min); max = Math.max(max, e.max); }
  if (classes) { min = 0; max = 1; }
  if (!(max > min)) { min -= 0.5; max += 0.5; }
  for (let c = 0; c < m; c++) {
    ctx.strokeStyle = LINE_COLOURS[c % LINE_COLOURS.length];
    ctx.lineWidth = 1.8;
    polyline(ctx, box, column(output.data, rows, m, c), box.y, box.h, min, max);
    if (tgt) {
      ctx.setLineDash([5, 3]);
      ctx.lineWidth = 1.4;
      polyline(ctx, box, column(tgt, rows, m, c), box.y, box.h, min, max);
      ctx.setLineDash([]);
    }
  }
  ctx.strokeStyle = "#bbb"; ctx.lineWidth = 1;
  ctx.strokeRect(box.x + 0.5, box.y + 0.5, box.w, box.h);
  ctx.fillStyle = "#555"; ctx.textAlign = "right";
  ctx.textBaseline = "top"; ctx.fillText(formatNumber(max), box.x - 3, box.y);
  ctx.textBaseline = "bottom"; ctx.fillText(formatNumber(min), box.x - 3, box.y + box.h);
  ctx.textAlign = "right"; ctx.textBaseline = "top";
  ctx.fillText("— output   - - target", box.x + box.w - 3, box.y + 2);
  frame(ctx, box, output.steps || [], classes ? "probability" : "output");
}

/** Strips of the synapse view: trace, learning signal, and their product beside the gradient. */
export const SYNAPSE_ROWS = [
  { label: "trace ε", unit: "∂h/∂w", colour: "#2ca02c" },
  { label: "signal L", unit: "∂loss/∂h", colour: "#d62728" },
  { label: "L · ε", unit: "∂loss/∂w", colour: "#1f77b4" },
];

/**
 * The three strips of one synapse over the episode (`[T, 3, K]` rows: trace ε, signal L,
 * recorded gradient g; unit `u`): ε, L and their product L·ε computed here, with g (the online
 * gradient the optimizer received: the batch's, so it can differ from batch element 0's L·ε).
 * @param {Float32Array} data @param {number} rows @param {number} k @param {number} u
 */
export function synapseStrips(data, rows, k, u) {
  const trace = new Float32Array(rows), signal = new Float32Array(rows), product = new Float32Array(rows), grad = new Float32Array(rows);
  for (let t = 0; t < rows; t++) {
    trace[t] = data[(t * 3) * k + u];
    signal[t] = data[(t * 3 + 1) * k + u];
    grad[t] = data[(t * 3 + 2) * k + u];
    product[t] = trace[t] * signal[t];
  }
  return { trace, signal, product, grad };
}

/** `[min, max]` of a strip's values with 0 inside (a strip is read against its zero line). */
function stripRange(/** @type {ArrayLike<number>[]} */ values) {
  let min = 0, max = 0;
  for (const v of values) { const e = extent(v); if (Number.isFinite(e.min)) { min = Math.min(min, e.min); max = Math.max(max, e.max); } }
  if (!(max > min)) { min -= 1; max += 1; }
  return [min, max];
}

/**
 * One synapse over the episode: its eligibility trace ε, its neuron's learning signal L and
 * their product L·ε, the synapse's update direction in the gradient's units, drawn on ONE
 * scale with the recorded online gradient g (dashed), so "trace × signal = update" can be
 * read off. Each strip prints its scale and units.
 * @param {HTMLCanvasElement} canvas
 * @param {{data: Float32Array, shape: number[], steps?: number[]} | undefined} synapse  `[T, 3, K]`
 * @param {number} unit
 */
export function drawSynapse(canvas, synapse, unit) {
  const f = begin(canvas);
  if (!f) return;
  const { ctx, box } = f;
  if (!synapse || synapse.shape.length !== 3 || !synapse.shape[0]) {
    ctx.fillStyle = "#999"; ctx.textAlign = "center";
    ctx.fillText("no activity yet", box.x + box.w / 2, box.y + box.h / 2);
    return;
  }
  const [rows, , k] = synapse.shape;
  const u = Math.min(Math.max(unit, 0), k - 1);
  const { trace, signal, product, grad } = synapseStrips(synapse.data, rows, k, u);
  const strip = box.h / 3;
  const strips = [[trace], [signal], [product, grad]];
  SYNAPSE_ROWS.forEach((row, r) => {
    const [min, max] = stripRange(strips[r]);
    const top = box.y + r * strip + 2, h = strip - 4;
    const zero = top + h - ((0 - min) / (max - min)) * h;
    ctx.strokeStyle = "#ddd"; ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(box.x, zero); ctx.lineTo(box.x + box.w, zero); ctx.stroke();
    ctx.strokeStyle = row.colour; ctx.lineWidth = 1.8;
    polyline(ctx, box, strips[r][0], top, h, min, max);
    if (r === 2) { // the recorded gradient on the same scale
      ctx.setLineDash([4, 3]); ctx.strokeStyle = "#555"; ctx.lineWidth = 1.2;
      polyline(ctx, box, grad, top, h, min, max);
      ctx.setLineDash([]);
    }
    ctx.fillStyle = row.colour; ctx.textAlign = "right"; ctx.textBaseline = "middle";
    ctx.fillText(row.label, box.x - 3, top + h / 2);
    ctx.fillStyle = "#777"; ctx.textAlign = "left"; ctx.textBaseline = "top";
    const note = r === 2 ? "   - - g, the online gradient (whole batch)" : "";
    ctx.fillText(`±${formatNumber(Math.max(Math.abs(min), Math.abs(max)))} ${row.unit}${note}`, box.x + 2, top);
  });
  ctx.strokeStyle = "#bbb"; ctx.lineWidth = 1;
  ctx.strokeRect(box.x + 0.5, box.y + 0.5, box.w, box.h);
  frame(ctx, box, synapse.steps || [], "");
}
