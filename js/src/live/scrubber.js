// @ts-check
/**
 * The run as a movie: a scrubber (range input, play/pause, step readout) that picks a past
 * step s; the graph is coloured by the trace magnitudes recorded at (or nearest before) s and
 * every panel marks s (a cursor line, or the heatmap column at s outlined, and the value at s
 * beside the panel's title). At the end of the range the scrubber is "live": the page follows
 * the run as it arrives.
 *
 * The values come from the recent window of each series where s lies in it (exact, as
 * recorded) and from the whole-run overviews otherwise (`overview/<name>`: per bucket of
 * `width` steps the first step, mean, min, max; etp_viz.live.history.History.overview): the
 * bucket mean of the steps around s. Pure functions first (tested in js/tests/scrubber.test.js),
 * then the DOM control.
 */
import { h } from "../dom.js";
import { relationOf } from "./series.js";

/** @typedef {import("./series.js").Series} Series */
/** @typedef {import("./series.js").Overview} Overview */
/**
 * The step axis of a drawn panel: `first..last` spread linearly over `x..x+w`, or (`steps`)
 * one position per listed step (`columns`: heatmap columns, else evenly spaced points).
 * @typedef {{x: number, y: number, w: number, h: number, first?: number, last?: number, steps?: number[], columns?: boolean}} Axis
 */

/** @type {WeakMap<HTMLCanvasElement, Axis | null>} the axis each panel canvas was last drawn with */
const AXES = new WeakMap();

/** Remember the step axis a canvas was drawn with (null: nothing drawn on a step axis). */
export function setAxis(/** @type {HTMLCanvasElement} */ canvas, /** @type {Axis | null} */ axis) {
  AXES.set(canvas, axis);
}

/**
 * The index of the last of the ascending `steps` at or before `step`; -1 when `step` comes
 * before all of them (NaN entries are skipped).
 * @param {ArrayLike<number>} steps @param {number} step
 */
export function columnAt(steps, step) {
  let found = -1;
  for (let i = 0; i < steps.length; i++) {
    if (steps[i] <= step) found = i;
    else if (steps[i] > step) break;
  }
  return found;
}

/**
 * A recent-window series (`[T]`, the last row at `lastStep`) at `step`: the last finite value
 * at or before it, and its step. Null when `step` precedes the window (or nothing is finite
 * in it up to `step`): the caller then reads the whole-run overview.
 * @param {Series | undefined} series @param {number} step
 * @returns {{value: number, step: number} | null}
 */
export function seriesValueAt(series, step) {
  if (!series || series.shape.length !== 1 || !(series.lastStep >= 0)) return null;
  const n = series.data.length, first = series.lastStep - n + 1;
  if (step < first) return null;
  for (let i = Math.min(n - 1, Math.floor(step - first)); i >= 0; i--) {
    const v = series.data[i];
    if (Number.isFinite(v)) return { value: v, step: first + i };
  }
  return null;
}

/**
 * The rows of one series of an overview: learner `learner` of a compare-mode `[k, m, 4]`.
 * @param {Overview} overview @param {number} [learner]
 * @returns {{rows: Float32Array, count: number}}
 */
export function overviewRows(overview, learner = 0) {
  if (overview.shape.length === 2) return { rows: overview.data, count: overview.shape[0] };
  const [k, m] = overview.shape;
  const i = Math.min(Math.max(learner, 0), k - 1);
  return { rows: overview.data.subarray(i * m * 4, (i + 1) * m * 4), count: m };
}

/**
 * An overview at `step`: the mean of the bucket holding it (the nearest earlier bucket with
 * a finite mean when that one has none), with the steps it covers (`from..to`). Null when no
 * bucket at or before `step` holds a value.
 * @param {Float32Array} rows  `count` rows of (first step, mean, min, max)
 * @param {number} count @param {number} width  steps per bucket @param {number} step
 * @returns {{value: number, from: number, to: number} | null}
 */
export function overviewValueAt(rows, count, width, step) {
  for (let b = count - 1; b >= 0; b--) {
    const start = rows[b * 4], mean = rows[b * 4 + 1];
    if (!(start <= step) || !Number.isFinite(mean)) continue;
    return { value: mean, from: start, to: start + width - 1 };
  }
  return null;
}

/**
 * One series at `step`: from its recent window when `step` lies in it (exact), else from its
 * whole-run overview (a bucket mean). `exact` tells which.
 * @param {Series | undefined} series @param {Overview | undefined} overview @param {number} step @param {number} [learner]
 * @returns {{value: number, from: number, to: number, exact: boolean} | null}
 */
export function valueAt(series, overview, step, learner = 0) {
  const recent = seriesValueAt(series, step);
  if (recent) return { value: recent.value, from: recent.step, to: recent.step, exact: true };
  if (!overview) return null;
  const { rows, count } = overviewRows(overview, learner);
  const bucket = overviewValueAt(rows, count, overview.width, step);
  return bucket && { ...bucket, exact: bucket.from === bucket.to };
}

/**
 * Each relation's ‖ε‖ at `step` (the root of the sum of squares of its trace series there,
 * like `relationMagnitudes` for the latest values). `step` Infinity: the latest values.
 * @param {Map<string, Series>} series  recent windows (one session; none in compare mode)
 * @param {Map<string, Overview>} overviews  whole runs (`trace/…` names)
 * @param {number} step @param {number} [learner]  which learner of a compare-mode overview
 * @param {Set<string> | null} [hidden]  series left out
 * @returns {Map<string, number>}
 */
export function magnitudesAt(series, overviews, step, learner = 0, hidden = null) {
  /** @type {Map<string, number>} */
  const sums = new Map();
  const names = new Set([...series.keys(), ...overviews.keys()].filter((n) => relationOf(n) && !(hidden && hidden.has(n))));
  for (const name of names) {
    const at = valueAt(series.get(name), overviews.get(name), step, learner);
    if (!at || !Number.isFinite(at.value)) continue;
    const relation = /** @type {string} */ (relationOf(name));
    sums.set(relation, (sums.get(relation) || 0) + at.value * at.value);
  }
  return new Map([...sums].map(([r, s]) => [r, Math.sqrt(s)]));
}

/**
 * The largest ‖ε‖ of the run per the overviews' bucket maxima (the top of a colour scale that
 * holds for every step of the movie): per bucket, the root of the sum of squares of a
 * relation's series maxima (exact for a relation with one series, an upper bound otherwise).
 * @param {Map<string, Overview>} overviews @param {number} [learner] @param {Set<string> | null} [hidden]
 */
export function runMaxMagnitude(overviews, learner = 0, hidden = null) {
  /** @type {Map<string, Float64Array>} relation -> per-bucket sum of squared maxima */
  const sums = new Map();
  for (const [name, overview] of overviews) {
    const relation = relationOf(name);
    if (!relation || (hidden && hidden.has(name))) continue;
    const { rows, count } = overviewRows(overview, learner);
    const sum = sums.get(relation) || new Float64Array(count);
    for (let b = 0; b < Math.min(count, sum.length); b++) {
      const v = rows[b * 4 + 3];
      if (Number.isFinite(v)) sum[b] += v * v;
    }
    sums.set(relation, sum);
  }
  let max = 0;
  for (const sum of sums.values()) for (const s of sum) if (s > max * max) max = Math.sqrt(s);
  return max;
}

/**
 * Where a panel's cursor goes for `step` on its axis: `{x, index}` (`index`: the column or
 * point at or before `step`; -1 for a linear axis), or null when `step` is off the axis.
 * @param {Axis | null | undefined} axis @param {number} step
 * @returns {{x: number, index: number, width: number} | null}
 */
export function cursorPosition(axis, step) {
  if (!axis || !Number.isFinite(step)) return null;
  if (axis.steps) {
    const n = axis.steps.length, index = columnAt(axis.steps, step);
    if (index < 0 || !n) return null;
    if (axis.columns) return { x: axis.x + ((index + 0.5) * axis.w) / n, index, width: axis.w / n };
    return { x: axis.x + (n > 1 ? (index / (n - 1)) * axis.w : axis.w / 2), index, width: 0 };
  }
  const first = Number(axis.first), last = Number(axis.last);
  if (!(step >= first && step <= last)) return null;
  return { x: axis.x + (last > first ? ((step - first) / (last - first)) * axis.w : axis.w / 2), index: -1, width: 0 };
}

/**
 * Mark `step` on a drawn panel canvas: a vertical cursor line (heatmaps: the column outlined).
 * Sets `data-cursor` (the step) and `data-cursor-x` (pixels; absent when `step` is off the
 * panel's axis, e.g. before a heatmap's recent window).
 * @param {HTMLCanvasElement} canvas @param {number} step
 */
export function drawCursor(canvas, step) {
  const axis = AXES.get(canvas);
  const at = cursorPosition(axis, step);
  canvas.dataset.cursor = String(step);
  if (!at || !axis) { delete canvas.dataset.cursorX; return; }
  canvas.dataset.cursorX = at.x.toFixed(1);
  const ctx = canvas.getContext("2d");
  if (!ctx) return;
  ctx.save();
  ctx.strokeStyle = "#111";
  ctx.lineWidth = 1.5;
  if (at.width > 0) { // a heatmap column: outlined (white inside black, visible on any colour)
    const w = Math.max(at.width, 3), x = at.x - w / 2;
    ctx.strokeRect(x - 1, axis.y - 1, w + 2, axis.h + 2);
    ctx.strokeStyle = "#fff";
    ctx.strokeRect(x, axis.y, w, axis.h);
  } else {
    ctx.beginPath();
    ctx.moveTo(at.x, axis.y); ctx.lineTo(at.x, axis.y + axis.h);
    ctx.stroke();
  }
  ctx.restore();
}

/** Forget a panel's cursor (live: no step picked). */
export function clearCursor(/** @type {HTMLCanvasElement} */ canvas) {
  delete canvas.dataset.cursor;
  delete canvas.dataset.cursorX;
}

/**
 * The rows of a compare-mode `[k, m, 2]` series (rows of (step, value)) at `step`: per
 * learner the last finite value at or before it (null where none).
 * @param {Series | undefined} series @param {number} step
 * @returns {({value: number, step: number} | null)[]}
 */
export function compareValuesAt(series, step) {
  if (!series || series.shape.length !== 3) return [];
  const [k, m] = series.shape;
  return Array.from({ length: k }, (_, i) => {
    /** @type {{value: number, step: number} | null} */
    let found = null;
    for (let r = 0; r < m; r++) {
      const s = series.data[(i * m + r) * 2], v = series.data[(i * m + r) * 2 + 1];
      if (Number.isFinite(s) && s <= step && Number.isFinite(v) && (!found || s >= found.step)) found = { value: v, step: s };
    }
    return found;
  });
}

/**
 * The control: a range over the run's steps, a play/pause button, a readout. `onChange(step)`
 * gets the picked step, or null for "live" (the end of the range: follow the run).
 */
export class Scrubber {
  /** @param {(step: number | null) => void} onChange */
  constructor(onChange) {
    this.onChange = onChange;
    this.first = 0;
    this.last = -1;
    /** @type {number | null} the picked step; null: live */
    this.step = null;
    /** @type {any} */
    this.timer = null;
    this.input = /** @type {HTMLInputElement} */ (h("input", { type: "range", min: 0, max: 0, step: 1, value: 0, "data-live-scrub": "",
      "aria-label": "replay the run: the step whose trace colours the graph shows and the panels mark (End: live)",
      title: "drag to replay the run: the graph's trace colours and every panel at that step (far right: live)",
      oninput: () => this.pick(Number(this.input.value)), onkeydown: (/** @type {KeyboardEvent} */ e) => this.onKey(e) }));
    this.playButton = /** @type {HTMLButtonElement} */ (h("button", { class: "etp-button", "data-live-action": "play", "aria-pressed": "false",
      title: "play the run from the scrubber's step to the end", onclick: () => (this.timer ? this.stop() : this.play()) }, "▶"));
    this.readout = h("output", { class: "etp-live-scrub-readout", "data-live-scrub-readout": "", "aria-live": "polite" }, "live");
    /** @type {HTMLSelectElement | null} compare mode: which learner colours the graph */
    this.learnerSelect = null;
    this.el = h("span", { class: "etp-live-scrub", hidden: true }, this.playButton, this.input, this.readout);
  }

  /** The run now spans `first..last` (last < first: nothing yet). Live stays at the end. */
  setRange(/** @type {number} */ first, /** @type {number} */ last) {
    this.first = first; this.last = last;
    this.el.hidden = !(last >= first);
    this.input.min = String(first); this.input.max = String(Math.max(last, first));
    if (this.step != null && this.step >= last) this.step = null; // reached the end: live again
    this.input.value = String(this.step ?? Math.max(last, first));
    this.showReadout();
  }

  /** Pick `step` (clamped to the run; the end is live) and tell the panels. */
  pick(/** @type {number} */ step) {
    const clamped = Math.min(Math.max(Math.round(step), this.first), this.last);
    this.step = clamped >= this.last ? null : clamped;
    this.input.value = String(clamped);
    this.showReadout();
    this.onChange(this.step);
  }

  showReadout() {
    const text = this.step == null ? `live · step ${Math.max(this.last, 0)}` : `step ${this.step} of ${this.last}`;
    this.readout.textContent = text;
    this.input.setAttribute("aria-valuetext", text);
    this.input.dataset.step = this.step == null ? "live" : String(this.step);
  }

  /** Arrows: one step; Page Up/Down: a twentieth of the run; Home: the first step; End: live. */
  onKey(/** @type {KeyboardEvent} */ event) {
    const now = this.step ?? this.last, page = Math.max(1, Math.round((this.last - this.first) / 20));
    /** @type {Record<string, number>} */
    const moves = { ArrowLeft: now - 1, ArrowDown: now - 1, ArrowRight: now + 1, ArrowUp: now + 1,
      PageDown: now - page, PageUp: now + page, Home: this.first, End: this.last };
    if (!(event.key in moves)) return;
    event.preventDefault();
    event.stopPropagation(); // the graph's keyboard navigation must not see it
    this.pick(moves[event.key]);
  }

  /** Animate from the picked step (the first one when live) to the end, then follow live. */
  play() {
    if (this.last <= this.first) return;
    if (this.step == null) this.pick(this.first);
    const stride = Math.max(1, Math.ceil((this.last - this.first) / 150));
    this.playButton.textContent = "⏸";
    this.playButton.setAttribute("aria-pressed", "true");
    this.timer = setInterval(() => {
      this.pick((this.step ?? this.last) + stride);
      if (this.step == null) this.stop();
    }, 60);
  }

  stop() {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.playButton.textContent = "▶";
    this.playButton.setAttribute("aria-pressed", "false");
  }

  /** Compare mode: a selector of the learner whose traces colour the graph. */
  setLearners(/** @type {string[]} */ labels, /** @type {(i: number) => void} */ onPick) {
    if (!labels.length) { if (this.learnerSelect) this.learnerSelect.remove(); this.learnerSelect = null; return; }
    const select = /** @type {HTMLSelectElement} */ (h("select", { "data-live-input": "trace-learner", "aria-label": "the learner whose eligibility traces colour the graph",
      title: "the learner whose eligibility traces colour the graph", onchange: () => onPick(Number(select.value)) },
    labels.map((label, i) => h("option", { value: i }, `graph: ${label}`))));
    if (this.learnerSelect) this.learnerSelect.replaceWith(select); else this.el.append(select);
    this.learnerSelect = select;
  }

  dispose() { this.stop(); }
}

/**
 * The first and last step of a series: `[T]` (its window ends at `lastStep`) or compare
 * mode's `[k, m, 2]` rows of (step, value). Null when it holds no step.
 * @param {Series | undefined} series
 * @returns {{first: number, last: number} | null}
 */
export function seriesSpan(series) {
  if (!series) return null;
  if (series.shape.length === 1) return series.lastStep >= 0 && series.shape[0] ? { first: series.lastStep - series.shape[0] + 1, last: series.lastStep } : null;
  if (series.shape.length !== 3) return null;
  let first = Infinity, last = -Infinity;
  for (let r = 0; r < series.shape[0] * series.shape[1]; r++) {
    const s = series.data[r * 2];
    if (Number.isFinite(s)) { first = Math.min(first, s); last = Math.max(last, s); }
  }
  return last >= first ? { first, last } : null;
}

/**
 * What a panel says at `step` (beside its title): the value there, per learner in compare
 * mode, the checkpoint of a fidelity panel, the column of a heatmap; "" for panels without a
 * step axis (activity views).
 * @param {{specs: any[], series: Map<string, Series>, overviews: Map<string, Overview>}} live
 * @param {string} id  the panel  @param {number} step  @param {string[]} [traces]  the trace series the traces panel shows
 * @param {(name: string) => string} [labelOf]  a trace series' short label
 */
export function cursorText(live, id, step, traces = [], labelOf = (n) => n) {
  const at = `step ${step}`, fmt = (/** @type {number} */ v) => formatValue(v);
  if (id === "traces") {
    const parts = traces.map((n) => [n, valueAt(live.series.get(n), live.overviews.get(n), step)]).filter(([, v]) => v)
      .map(([n, v]) => `${labelOf(/** @type {string} */ (n))} ${fmt(/** @type {any} */ (v).value)}`);
    return `${at}: ${parts.length ? parts.slice(0, 3).join(" · ") + (parts.length > 3 ? " …" : "") : "not recorded yet"}`;
  }
  const spec = live.specs.find((s) => s.name === id), series = live.series.get(id);
  if (!spec || spec.kind === "activity") return "";
  if (spec.kind === "compare") {
    const values = compareValuesAt(series, step), overview = live.overviews.get(id);
    return `${at}: ${(spec.labels || []).map((/** @type {string} */ label, /** @type {number} */ i) => {
      const v = values[i] ? values[i] : overview ? valueAt(undefined, overview, step, i) : null;
      return `${label} ${v ? fmt(v.value) : "–"}`;
    }).join(" · ")}`;
  }
  if (spec.kind === "heatmap") {
    const steps = (series && series.steps) || [], k = columnAt(steps, step);
    return k < 0 ? `${at}: before the recent window${steps.length ? ` (from step ${steps[0]})` : ""}` : `${at}: column of measured step ${steps[k]}`;
  }
  if (spec.kind === "fidelity") {
    const n = series ? series.shape[0] : 0, data = series ? series.data : new Float32Array(0);
    const k = columnAt(Array.from({ length: n }, (_, i) => data[i * 3]), step);
    return k < 0 ? `${at}: no checkpoint yet` : `${at}: checkpoint ${data[k * 3]}: cosine ${fmt(data[k * 3 + 1])}, rel. error ${fmt(data[k * 3 + 2])}`;
  }
  const v = valueAt(series, live.overviews.get(id), step);
  if (!v) return `${at}: –`;
  return v.exact ? `${at}: ${fmt(v.value)}` : `${at}: ${fmt(v.value)} (mean of steps ${v.from}–${v.to})`;
}

/** A compact number (like plots.js formatNumber; kept here so that this module stands alone). */
function formatValue(/** @type {number} */ v) {
  if (!Number.isFinite(v)) return "–";
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e4 || a < 1e-2)) return v.toExponential(1);
  return Number(v.toPrecision(3)).toString();
}
