// @ts-check
/**
 * Canvas plots of the live panels, fed float32 buffers: lines (loss, trace magnitudes,
 * fidelity) and heatmaps (units × recent time, diverging colours centred at 0, outliers
 * trimmed by quantile). Plain 2D canvas: no dependency, cheap enough for 20 redraws a second.
 */
import { diverging, css, sequential } from "./colormap.js";
import { extent, quantile, symmetricRange, windowMean } from "./series.js";
import { setAxis } from "./scrubber.js";

const MARGIN = { left: 58, right: 8, top: 6, bottom: 30 };
const AXIS = "#888";
const FONT = "11px sans-serif";
/** Colour and dash of the chance line (a guess that ignores the input). */
export const CHANCE_COLOUR = "#777";

/** A compact number label. */
export function formatNumber(/** @type {number} */ v) {
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e4 || a < 1e-2)) return v.toExponential(1);
  return Number(v.toPrecision(3)).toString();
}

/** Clear the canvas and return its context and plot box (null without a 2D context). */
function begin(/** @type {HTMLCanvasElement} */ canvas, right = MARGIN.right) {
  const ctx = canvas.getContext("2d");
  if (!ctx) return null;
  const { width, height } = canvas;
  ctx.clearRect(0, 0, width, height);
  ctx.font = FONT;
  setAxis(canvas, null); // set again by a plot drawn on a step axis (the scrubber's cursor)
  const box = { x: MARGIN.left, y: MARGIN.top, w: width - MARGIN.left - right, h: height - MARGIN.top - MARGIN.bottom };
  return { ctx, box };
}

function emptyMessage(/** @type {CanvasRenderingContext2D} */ ctx, /** @type {any} */ box, text = "no data yet") {
  ctx.fillStyle = "#999";
  ctx.textAlign = "center";
  ctx.fillText(text, box.x + box.w / 2, box.y + box.h / 2);
}

/**
 * Axis titles: the y title rotated along the left edge, the x title under the x labels.
 * @param {CanvasRenderingContext2D} ctx @param {any} box @param {string} [xTitle] @param {string} [yTitle]
 */
export function axisTitles(ctx, box, xTitle, yTitle) {
  ctx.fillStyle = "#333";
  if (xTitle) {
    ctx.textAlign = "center";
    ctx.textBaseline = "bottom";
    ctx.fillText(xTitle, box.x + box.w / 2, box.y + box.h + MARGIN.bottom);
  }
  if (yTitle) {
    ctx.save();
    ctx.translate(11, box.y + box.h / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    ctx.fillText(yTitle, 0, 0);
    ctx.restore();
  }
  ctx.textBaseline = "alphabetic";
}

/** A dashed horizontal line at `y` (pixels) with a label at its right end (the chance level). */
export function chanceLine(/** @type {CanvasRenderingContext2D} */ ctx, /** @type {any} */ box, /** @type {number} */ y, /** @type {string} */ label) {
  if (!(y >= box.y - 0.5 && y <= box.y + box.h + 0.5)) return;
  ctx.save();
  ctx.strokeStyle = CHANCE_COLOUR;
  ctx.lineWidth = 1.2;
  ctx.setLineDash([5, 4]);
  ctx.beginPath();
  ctx.moveTo(box.x, y); ctx.lineTo(box.x + box.w, y);
  ctx.stroke();
  ctx.setLineDash([]);
  ctx.fillStyle = CHANCE_COLOUR;
  ctx.textAlign = "left";
  ctx.textBaseline = y < box.y + 14 ? "top" : "bottom";
  ctx.fillText(label, box.x + 3, y + (y < box.y + 14 ? 2 : -2));
  ctx.restore();
}

/** Axes frame with y labels (top/bottom) and x labels (first/last step). */
function axes(/** @type {CanvasRenderingContext2D} */ ctx, /** @type {any} */ box, /** @type {string[]} */ y, /** @type {string[]} */ x, middle = "") {
  ctx.strokeStyle = AXIS;
  ctx.lineWidth = 1;
  ctx.strokeRect(box.x + 0.5, box.y + 0.5, box.w, box.h);
  ctx.fillStyle = "#555";
  ctx.textAlign = "right";
  ctx.textBaseline = "top";
  ctx.fillText(y[0], box.x - 3, box.y);
  ctx.textBaseline = "bottom";
  ctx.fillText(y[1], box.x - 3, box.y + box.h);
  ctx.textBaseline = "top";
  ctx.textAlign = "left";
  ctx.fillText(x[0], box.x, box.y + box.h + 2);
  ctx.textAlign = "right";
  ctx.fillText(x[1], box.x + box.w, box.y + box.h + 2);
  if (middle) {
    ctx.textAlign = "center";
    ctx.fillText(middle, box.x + box.w / 2, box.y + box.h + 2);
  }
  ctx.textBaseline = "alphabetic";
}

/**
 * Line plot of one or more series sharing the step axis (aligned on their last step).
 * @param {HTMLCanvasElement} canvas
 * @param {{values: ArrayLike<number>, colour: string, label?: string, width?: number, alpha?: number, dots?: boolean, scale?: boolean}[]} lines
 * @param {{logY?: boolean, lastStep?: number, marker?: number | null, yMin?: number, yMax?: number, xLabels?: string[],
 *   chance?: number, xTitle?: string, yTitle?: string}} [options]
 * @returns {{min: number, max: number} | null}  the y range drawn
 */
export function drawLines(canvas, lines, options = {}) {
  const frame = begin(canvas);
  if (!frame) return null;
  const { ctx, box } = frame;
  const n = Math.max(0, ...lines.map((l) => l.values.length));
  const logY = Boolean(options.logY);
  const transform = (/** @type {number} */ v) => (logY ? (v > 0 ? Math.log10(v) : NaN) : v);
  let min = Infinity, max = -Infinity;
  for (const line of lines) {
    if (line.scale === false) continue; // a faint raw line does not set the range (clipped)
    const e = extent(Array.from(line.values, transform));
    min = Math.min(min, e.min); max = Math.max(max, e.max);
  }
  if (options.yMin !== undefined) min = Math.min(min, transform(options.yMin));
  if (options.yMax !== undefined) max = Math.max(max, transform(options.yMax));
  const chance = options.chance != null && Number.isFinite(transform(options.chance)) ? transform(options.chance) : null;
  if (chance != null && Number.isFinite(min)) { min = Math.min(min, chance); max = Math.max(max, chance); }
  axisTitles(ctx, box, options.xTitle, options.yTitle);
  if (!n || !Number.isFinite(min)) {
    emptyMessage(ctx, box, n ? (logY ? "no positive values (log-y)" : "no finite values") : "no data yet");
    return null;
  }
  const [dataMin, dataMax] = [min, max];
  if (max - min < 1e-12) { min -= 0.5; max += 0.5; }
  const pad = (max - min) * 0.05;
  min -= pad; max += pad;
  const lastStep = options.lastStep ?? n - 1;
  const firstStep = lastStep - n + 1;
  const xOf = (/** @type {number} */ step) => box.x + (n > 1 ? ((step - firstStep) / (n - 1)) * box.w : box.w / 2);
  const yOf = (/** @type {number} */ v) => box.y + box.h - ((v - min) / (max - min)) * box.h;
  const label = (/** @type {number} */ v) => formatNumber(logY ? 10 ** v : v);
  axes(ctx, box, [label(dataMax), label(dataMin)], options.xLabels || [String(firstStep), String(lastStep)]);
  setAxis(canvas, { ...box, first: firstStep, last: lastStep });
  if (options.marker != null && options.marker >= firstStep && options.marker <= lastStep + 1) {
    ctx.strokeStyle = "#d62728";
    ctx.setLineDash([3, 3]);
    ctx.beginPath();
    const x = Math.min(xOf(options.marker), box.x + box.w - 1);
    ctx.moveTo(x, box.y); ctx.lineTo(x, box.y + box.h);
    ctx.stroke();
    ctx.setLineDash([]);
  }
  if (chance != null) chanceLine(ctx, box, yOf(chance), `chance ${label(chance)}`);
  let labelled = 0;
  lines.forEach((line) => {
    const offset = n - line.values.length;
    ctx.strokeStyle = line.colour;
    ctx.fillStyle = line.colour;
    ctx.lineWidth = line.width ?? 1.5;
    ctx.globalAlpha = line.alpha ?? 1;
    ctx.beginPath();
    let pen = false;
    for (let i = 0; i < line.values.length; i++) {
      const v = transform(line.values[i]);
      // NaN = "not measured" (heavy metrics are recorded every record_every steps): join the
      // measured points rather than breaking the line at every gap
      if (!Number.isFinite(v)) continue;
      const x = xOf(firstStep + offset + i), y = yOf(Math.min(Math.max(v, min), max));
      if (pen) ctx.lineTo(x, y); else ctx.moveTo(x, y);
      pen = true;
      if (line.values.length === 1 || line.dots) ctx.fillRect(x - 1.5, y - 1.5, 3, 3);
    }
    ctx.stroke();
    ctx.globalAlpha = 1;
    if (line.label && lines.length > 1) {
      ctx.textAlign = "right";
      ctx.fillText(line.label, box.x + box.w - 3, box.y + 12 + 12 * labelled++);
    }
  });
  return { min, max };
}

/**
 * Heatmap of `[k, units]` measured rows (time left to right, one column per measured step,
 * units top to bottom), diverging colours centred at 0; the colour range is the `1 - trim`
 * quantile of |v| (outliers saturate). Heavy metrics are measured every `record_every` steps:
 * the rows are the measured steps only, and `steps` (their global step numbers) label the time
 * axis. A row that is NaN throughout ("not measured", e.g. from an older sender) is skipped,
 * so no column is ever a grey gap.
 * @param {HTMLCanvasElement} canvas
 * @param {Float32Array} data
 * @param {number[]} shape
 * @param {{trim?: number, lastStep?: number, steps?: number[], xTitle?: string, yTitle?: string}} [options]
 * @returns {number | null}  the colour range (±) used
 */
export function drawHeatmap(canvas, data, shape, options = {}) {
  const frame = begin(canvas, 46);
  if (!frame) return null;
  const { ctx, box } = frame;
  axisTitles(ctx, box, options.xTitle, options.yTitle);
  const [rows, units] = shape.length === 2 ? shape : [data.length, 1];
  const lastStep = options.lastStep ?? rows - 1;
  const allSteps = options.steps && options.steps.length === rows ? options.steps : Array.from({ length: rows }, (_, t) => lastStep - rows + 1 + t);
  const kept = measuredRows(data, rows, units);
  if (!kept.length || !units) { emptyMessage(ctx, box, rows ? "no measured step yet" : "no data yet"); return null; }
  const values = new Float32Array(kept.length * units);
  kept.forEach((t, k) => values.set(data.subarray(t * units, (t + 1) * units), k * units));
  // a quantity that is never negative (dh/dh of leaky units, ...) gets a sequential map from 0;
  // a signed one a diverging map centred at 0
  const nonNegative = extent(values).min >= 0;
  const top = nonNegative ? quantile(values, 1 - (options.trim ?? 0.01)) : NaN;
  const range = nonNegative ? (Number.isFinite(top) && top > 0 ? top : 1) : symmetricRange(values, options.trim ?? 0.01);
  const colourOf = nonNegative ? (/** @type {number} */ v) => sequential(v / range) : (/** @type {number} */ v) => diverging(v / range);
  canvas.dataset.colourMap = nonNegative ? "sequential" : "diverging";
  const columns = kept.length;
  const image = ctx.createImageData(columns, units);
  for (let k = 0; k < columns; k++) {
    for (let u = 0; u < units; u++) {
      const rgb = colourOf(values[k * units + u]);
      const p = (u * columns + k) * 4;
      image.data[p] = rgb[0]; image.data[p + 1] = rgb[1]; image.data[p + 2] = rgb[2]; image.data[p + 3] = 255;
    }
  }
  const tile = document.createElement("canvas");
  tile.width = columns; tile.height = units;
  const tileCtx = tile.getContext("2d");
  if (tileCtx) tileCtx.putImageData(image, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(tile, box.x, box.y, box.w, box.h);
  const first = allSteps[kept[0]], last = allSteps[kept[columns - 1]];
  axes(ctx, box, ["0", `${units - 1}`], [`${first}`, `${last}`], `${columns} measured step${columns === 1 ? "" : "s"}`);
  setAxis(canvas, { ...box, steps: kept.map((t) => Number(allSteps[t])), columns: true });
  if (nonNegative) colourBar(ctx, box.x + box.w + 6, box.y, box.h, (t) => css(sequential(1 - t)), [formatNumber(range), "0"]);
  else colourBar(ctx, box.x + box.w + 6, box.y, box.h, (t) => css(diverging(1 - 2 * t)), [`+${formatNumber(range)}`, `−${formatNumber(range)}`]);
  return range;
}

/** Indices of the rows of a `[rows, units]` array that hold at least one non-NaN value. */
export function measuredRows(/** @type {ArrayLike<number>} */ data, /** @type {number} */ rows, /** @type {number} */ units) {
  const kept = [];
  for (let t = 0; t < rows; t++) {
    for (let u = 0; u < units; u++) {
      if (!Number.isNaN(data[t * units + u])) { kept.push(t); break; }
    }
  }
  return kept;
}

/**
 * A vertical colour bar (top = `colourAt(0)`), labels at top and bottom.
 * @param {CanvasRenderingContext2D} ctx
 * @param {number} x @param {number} y @param {number} height
 * @param {(t: number) => string} colourAt
 * @param {string[]} labels
 */
export function colourBar(ctx, x, y, height, colourAt, labels) {
  for (let i = 0; i < height; i++) {
    ctx.fillStyle = colourAt(i / Math.max(height - 1, 1));
    ctx.fillRect(x, y + i, 8, 1);
  }
  ctx.fillStyle = "#555";
  ctx.textAlign = "left";
  ctx.textBaseline = "top";
  ctx.fillText(labels[0], x - 4, Math.max(y - 6, 0));
  ctx.textBaseline = "bottom";
  ctx.fillText(labels[1], x - 4, y + height + 10);
  ctx.textBaseline = "alphabetic";
}

/** A horizontal sequential colour ramp with min/max labels (the graph legend). */
export function drawRamp(/** @type {HTMLCanvasElement} */ canvas, /** @type {string} */ low, /** @type {string} */ high) {
  const ctx = canvas.getContext("2d");
  if (!ctx) return;
  const { width, height } = canvas;
  ctx.clearRect(0, 0, width, height);
  for (let i = 0; i < width; i++) {
    ctx.fillStyle = css(sequential(i / Math.max(width - 1, 1)));
    ctx.fillRect(i, 0, 1, height - 12);
  }
  ctx.font = FONT;
  ctx.fillStyle = "#555";
  ctx.textBaseline = "bottom";
  ctx.textAlign = "left";
  ctx.fillText(low, 0, height);
  ctx.textAlign = "right";
  ctx.fillText(high, width, height);
}

/**
 * Fidelity panel: cosine and relative error of the online gradient against BPTT, one row
 * per checkpoint (`[n, 3]`: step, cosine, relative error).
 */
export function drawFidelity(/** @type {HTMLCanvasElement} */ canvas, /** @type {Float32Array} */ data, /** @type {number[]} */ shape, titles = {}) {
  const n = shape[0] || 0;
  const cosine = new Float32Array(n), relError = new Float32Array(n);
  for (let i = 0; i < n; i++) { cosine[i] = data[i * 3 + 1]; relError[i] = data[i * 3 + 2]; }
  const xLabels = n ? [`step ${data[0]}`, `step ${data[(n - 1) * 3]}`] : undefined;
  const drawn = drawLines(canvas, [
    { values: cosine, colour: "#1f77b4", label: `cosine ${n ? formatNumber(cosine[n - 1]) : ""}` },
    { values: relError, colour: "#ff7f0e", label: `rel. error ${n ? formatNumber(relError[n - 1]) : ""}` },
  ], { yMin: 0, yMax: 1, xLabels, ...titles });
  // one point per checkpoint, evenly spaced: the cursor goes to the checkpoint at or before a step
  const box = { x: MARGIN.left, y: MARGIN.top, w: canvas.width - MARGIN.left - MARGIN.right, h: canvas.height - MARGIN.top - MARGIN.bottom };
  if (drawn) setAxis(canvas, { ...box, steps: Array.from({ length: n }, (_, i) => data[i * 3]) });
  return drawn;
}

/**
 * Compare mode: one line per algorithm on a shared step axis. `data` is `[k, m, 2]` (for
 * algorithm i, m rows of (step, value); NaN rows are padding or "not measured" and are
 * skipped, the measured points joined). Colours follow `colours`; the legend names each line
 * with its last value.
 * @param {HTMLCanvasElement} canvas
 * @param {Float32Array} data
 * @param {number[]} shape
 * @param {string[]} labels
 * @param {{colours: string[], logY?: boolean, raw?: Float32Array, chance?: number, xTitle?: string, yTitle?: string}} options
 *   `raw`: the unsmoothed values in the same layout, drawn faint under the (smoothed) lines
 * @returns {{min: number, max: number, lines: number} | null}  the y range drawn and the lines with data
 */
export function drawCompare(canvas, data, shape, labels, options) {
  const frame = begin(canvas, 8);
  if (!frame) return null;
  const { ctx, box } = frame;
  axisTitles(ctx, box, options.xTitle, options.yTitle);
  const [k, m] = shape.length === 3 ? shape : [0, 0];
  const logY = Boolean(options.logY);
  const transform = (/** @type {number} */ v) => (logY ? (v > 0 ? Math.log10(v) : NaN) : v);
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  /** @type {{points: [number, number][], colour: string, label: string}[]} */
  const lines = [];
  for (let i = 0; i < k; i++) {
    /** @type {[number, number][]} */
    const points = [];
    for (let r = 0; r < m; r++) {
      const step = data[(i * m + r) * 2], value = transform(data[(i * m + r) * 2 + 1]);
      if (!Number.isFinite(step) || !Number.isFinite(value)) continue;
      points.push([step, value]);
      x0 = Math.min(x0, step); x1 = Math.max(x1, step); y0 = Math.min(y0, value); y1 = Math.max(y1, value);
    }
    const colour = options.colours[i % options.colours.length];
    const last = points.length ? points[points.length - 1][1] : NaN;
    lines.push({ points, colour, label: `${labels[i] ?? `#${i}`} ${Number.isFinite(last) ? formatNumber(logY ? 10 ** last : last) : "–"}` });
  }
  if (!Number.isFinite(y0)) {
    emptyMessage(ctx, box, m ? (logY ? "no positive values (log-y)" : "no finite values yet") : "no data yet");
    return null;
  }
  /** @type {[number, number][][]} */
  const rawLines = [];
  if (options.raw) {
    for (let i = 0; i < k; i++) {
      /** @type {[number, number][]} */
      const points = [];
      for (let r = 0; r < m; r++) {
        const step = options.raw[(i * m + r) * 2], value = transform(options.raw[(i * m + r) * 2 + 1]);
        if (!Number.isFinite(step) || !Number.isFinite(value)) continue;
        points.push([step, value]);
      }
      rawLines.push(points);
    }
  }
  const chance = options.chance != null && Number.isFinite(transform(options.chance)) ? transform(options.chance) : null;
  if (chance != null) { y0 = Math.min(y0, chance); y1 = Math.max(y1, chance); }
  const [dataMin, dataMax] = [y0, y1];
  if (y1 - y0 < 1e-12) { y0 -= 0.5; y1 += 0.5; }
  const pad = (y1 - y0) * 0.05;
  y0 -= pad; y1 += pad;
  const xOf = (/** @type {number} */ s) => box.x + (x1 > x0 ? ((s - x0) / (x1 - x0)) * box.w : box.w / 2);
  const yOf = (/** @type {number} */ v) => box.y + box.h - ((v - y0) / (y1 - y0)) * box.h;
  const label = (/** @type {number} */ v) => formatNumber(logY ? 10 ** v : v);
  axes(ctx, box, [label(dataMax), label(dataMin)], [`${x0}`, `${x1}`]);
  setAxis(canvas, { ...box, first: x0, last: x1 });
  if (chance != null) chanceLine(ctx, box, yOf(chance), `chance ${label(chance)}`);
  rawLines.forEach((points, i) => {
    ctx.strokeStyle = options.colours[i % options.colours.length];
    ctx.globalAlpha = 0.18;
    ctx.lineWidth = 1;
    ctx.beginPath();
    let pen = false;
    for (const [s, v] of points) {
      const y = yOf(Math.min(Math.max(v, y0), y1));
      if (pen) ctx.lineTo(xOf(s), y); else ctx.moveTo(xOf(s), y);
      pen = true;
    }
    ctx.stroke();
    ctx.globalAlpha = 1;
  });
  let drawn = 0;
  lines.forEach((line, i) => {
    ctx.strokeStyle = line.colour;
    ctx.fillStyle = line.colour;
    ctx.lineWidth = 2;
    ctx.beginPath();
    line.points.forEach(([s, v], j) => {
      if (j === 0) ctx.moveTo(xOf(s), yOf(v)); else ctx.lineTo(xOf(s), yOf(v));
      if (line.points.length < 40) ctx.fillRect(xOf(s) - 1.5, yOf(v) - 1.5, 3, 3);
    });
    ctx.stroke();
    if (line.points.length) drawn++;
    ctx.textAlign = "right";
    ctx.fillText(line.label, box.x + box.w - 3, box.y + 12 + 12 * i);
  });
  return { min: y0, max: y1, lines: drawn };
}

/**
 * A panel whose values are one constant: the value in large type and where it comes from
 * (instead of a one-colour heatmap block).
 * @param {HTMLCanvasElement} canvas
 * @param {string} headline  e.g. "dh/dh = 0.905"
 * @param {string[]} lines  e.g. ["= exp(−Δt/τ), τ = 10 (readout)", "constant over units and steps"]
 */
export function drawConstant(canvas, headline, lines) {
  const ctx = canvas.getContext("2d");
  if (!ctx) return;
  const { width, height } = canvas;
  ctx.clearRect(0, 0, width, height);
  setAxis(canvas, null);
  ctx.fillStyle = "#f6f8fb";
  ctx.fillRect(0, 0, width, height);
  ctx.fillStyle = "#222";
  ctx.textAlign = "center";
  ctx.textBaseline = "middle";
  ctx.font = "bold 22px sans-serif";
  ctx.fillText(headline, width / 2, height / 2 - 8 - 8 * lines.length);
  ctx.font = "12px sans-serif";
  ctx.fillStyle = "#444";
  lines.forEach((line, i) => ctx.fillText(line, width / 2, height / 2 + 12 + 16 * i - 8 * (lines.length - 1), width - 8));
  ctx.textBaseline = "alphabetic";
  ctx.font = FONT;
}

/**
 * The whole run of one or more series, downsampled in Python (`History.overview`): per bucket
 * of `width` steps, rows of (first step, mean, min, max). Each series is drawn as its min/max
 * band (faint) and its mean, smoothed over `smoothSteps` steps (a trailing mean over buckets).
 * The x axis starts at the first bucket (step 0 of a run); the y range does not refit to
 * noise: it is anchored at 0 (unless log-y) and only grows (`grow` keeps it across redraws),
 * set by the smoothed means and the chance level (a band beyond it is clipped).
 * @param {HTMLCanvasElement} canvas
 * @param {{rows: Float32Array, count: number, colour: string, label?: string}[]} series  `rows`: `count` x 4
 * @param {{width?: number, smoothSteps?: number, logY?: boolean, chance?: number, yMin?: number, yMax?: number,
 *   grow?: {min: number, max: number}, lastStep?: number, detail?: number | null, xTitle?: string, yTitle?: string}} [options]
 *   `detail`: the first step of the recent window (shaded; it is drawn in detail below)
 * @returns {{min: number, max: number, first: number, last: number} | null}
 */
export function drawOverview(canvas, series, options = {}) {
  const frame = begin(canvas, 8);
  if (!frame) return null;
  const { ctx, box } = frame;
  axisTitles(ctx, box, options.xTitle, options.yTitle);
  const logY = Boolean(options.logY);
  const transform = (/** @type {number} */ v) => (logY ? (v > 0 ? Math.log10(v) : NaN) : v);
  const width = Math.max(Number(options.width) || 1, 1);
  const buckets = Math.max(1, Math.round((options.smoothSteps || 0) / width));
  let first = Infinity, last = -Infinity, min = Infinity, max = -Infinity;
  const drawn = series.map((s) => {
    const steps = new Float64Array(s.count), lo = new Float32Array(s.count), hi = new Float32Array(s.count), mean = new Float32Array(s.count);
    for (let i = 0; i < s.count; i++) {
      steps[i] = s.rows[i * 4]; mean[i] = s.rows[i * 4 + 1]; lo[i] = transform(s.rows[i * 4 + 2]); hi[i] = transform(s.rows[i * 4 + 3]);
    }
    const smooth = Float32Array.from(windowMean(mean, buckets), transform);
    for (let i = 0; i < s.count; i++) {
      if (!Number.isFinite(steps[i])) continue;
      first = Math.min(first, steps[i]); last = Math.max(last, steps[i] + width - 1);
      if (Number.isFinite(smooth[i])) { min = Math.min(min, smooth[i]); max = Math.max(max, smooth[i]); }
    }
    return { ...s, steps, lo, hi, smooth };
  });
  if (!Number.isFinite(min)) {
    emptyMessage(ctx, box, series.length && series[0].count ? (logY ? "no positive values (log-y)" : "no finite values yet") : "no data yet");
    return null;
  }
  if (options.lastStep != null && options.lastStep > last) last = options.lastStep;
  const chance = options.chance != null && Number.isFinite(transform(options.chance)) ? transform(options.chance) : null;
  if (chance != null) { min = Math.min(min, chance); max = Math.max(max, chance); }
  if (!logY && min > 0) min = 0; // a loss axis starts at 0: early noise looks as small as it is
  if (options.yMin !== undefined) min = Math.min(min, transform(options.yMin));
  if (options.yMax !== undefined) max = Math.max(max, transform(options.yMax));
  const grow = options.grow;
  if (grow && grow.logY === logY) { min = Math.min(min, grow.min); max = Math.max(max, grow.max); }
  if (grow) Object.assign(grow, { min, max, logY });
  let [y0, y1] = [min, max];
  if (y1 - y0 < 1e-12) { y0 -= 0.5; y1 += 0.5; }
  const pad = (y1 - y0) * 0.04;
  y0 -= logY || min < 0 ? pad : 0; y1 += pad;
  const xOf = (/** @type {number} */ step) => box.x + (last > first ? ((step - first) / (last - first)) * box.w : box.w / 2);
  const yOf = (/** @type {number} */ v) => box.y + box.h - ((Math.min(Math.max(v, y0), y1) - y0) / (y1 - y0)) * box.h;
  const label = (/** @type {number} */ v) => formatNumber(logY ? 10 ** v : v);
  if (options.detail != null && options.detail > first) {
    ctx.fillStyle = "rgba(0, 0, 0, 0.05)";
    ctx.fillRect(xOf(options.detail), box.y, box.x + box.w - xOf(options.detail), box.h);
  }
  axes(ctx, box, [label(max), label(min)], [String(first), String(last)], width > 1 ? `${width} steps per point` : "");
  setAxis(canvas, { ...box, first, last });
  if (chance != null) chanceLine(ctx, box, yOf(chance), `chance ${label(chance)}`);
  drawn.forEach((s, k) => {
    ctx.fillStyle = s.colour;
    ctx.globalAlpha = 0.16;
    ctx.beginPath();
    let open = false;
    const close = (/** @type {number} */ from, /** @type {number} */ to) => {
      for (let j = to; j >= from; j--) ctx.lineTo(xOf(s.steps[j] + width - 1), yOf(s.lo[j]));
      ctx.closePath();
    };
    let start = 0;
    for (let i = 0; i <= s.count; i++) {
      const ok = i < s.count && Number.isFinite(s.lo[i]) && Number.isFinite(s.hi[i]) && Number.isFinite(s.steps[i]);
      if (ok && !open) { ctx.moveTo(xOf(s.steps[i]), yOf(s.hi[i])); open = true; start = i; }
      if (ok) ctx.lineTo(xOf(s.steps[i] + width - 1), yOf(s.hi[i]));
      if (!ok && open) { close(start, i - 1); open = false; }
    }
    ctx.fill();
    ctx.globalAlpha = 1;
    ctx.strokeStyle = s.colour;
    ctx.lineWidth = 2;
    ctx.beginPath();
    let pen = false;
    for (let i = 0; i < s.count; i++) {
      if (!Number.isFinite(s.smooth[i]) || !Number.isFinite(s.steps[i])) continue;
      const x = xOf(s.steps[i]), y = yOf(s.smooth[i]);
      if (pen) ctx.lineTo(x, y); else ctx.moveTo(x, y);
      pen = true;
    }
    ctx.stroke();
    if (s.label) {
      const lastValue = [...s.smooth].reverse().find(Number.isFinite);
      ctx.textAlign = "right";
      ctx.fillText(`${s.label}${lastValue !== undefined ? ` ${label(lastValue)}` : ""}`, box.x + box.w - 3, box.y + 12 + 12 * k);
    }
  });
  canvas.dataset.firstStep = String(first);
  canvas.dataset.lastStep = String(last);
  canvas.dataset.yRange = `${label(min)} ${label(max)}`;
  return { min, max, first, last };
}

/**
 * Rows of a (k, m, 4) compare-mode overview, or an (m, 4) single one, as `drawOverview` series.
 * @param {Float32Array} data @param {number[]} shape @param {string[]} colours @param {string[]} [labels]
 */
export function overviewSeries(data, shape, colours, labels) {
  if (shape.length === 2) return [{ rows: data, count: shape[0], colour: colours[0] }];
  const [k, m] = shape;
  return Array.from({ length: k }, (_, i) => ({
    rows: data.subarray(i * m * 4, (i + 1) * m * 4), count: m, colour: colours[i % colours.length], label: labels ? labels[i] : undefined,
  }));
}

export { bucketRows } from "./series.js";
