// @ts-check
/**
 * The live region of the explorer: controls (Step, Run, Pause, Reset, steps per frame,
 * ES-D-RTRL decay, which series to record, device shown) and canvas panels fed float32
 * buffers (loss, trace magnitudes per relation, dh/dy and dh/dh heatmaps, fidelity), plus
 * graph nodes coloured by current trace magnitude with a legend.
 *
 * Python side: `LiveExplorer` in etp_viz/explorer/live_explorer.py (contract in docs/view-model.md,
 * "Live session"): `live_panels` declares panels, `{type: "live", name, shape, step}`
 * messages carry the recent window of a series, `live_status` the session state, requests
 * `live_step/run/pause/reset/set` drive it, `error` holds failures. A saved page (no kernel)
 * has `live_history` in its state: the recorded run is drawn statically, controls disabled.
 *
 * Compare mode (`CompareExplorer` in etp_viz/explorer/compare.py): panels of kind "compare"
 * overlay one line per algorithm (`labels`), `live_status.compare` fills the cost table (step,
 * loss, fidelity, ms per step, learner-state memory per algorithm); Step/Run/Pause/Reset act on
 * every algorithm. A saved compare page has `live_history.compare`: `{algorithm: history}`.
 */
import { h } from "../dom.js";
import { LINE_COLOURS } from "./colormap.js";
import { drawLines, drawHeatmap, drawFidelity, drawRamp, drawCompare, drawConstant, formatNumber, drawOverview, overviewSeries, bucketRows } from "./plots.js";
import { drawLayer, drawReadout, drawSynapse, mostActiveUnit } from "./activity.js";
import { windowMean, windowMeanRows, relationMagnitudes, seriesFromHistory, compareSeriesFromHistory, stepValues } from "./series.js";
import { colourGraph, grownMax } from "./graph-colour.js";
import { renderLesson, compilingText } from "./lesson.js";
import { LIVE_CSS } from "./style.js";

/** @typedef {import("../types.js").LivePanelSpec} LivePanelSpec */
/** @typedef {import("./series.js").Series} Series */

const WIDTH = 360, HEIGHT = 170;
/** The recent-window strip under a whole-run loss / accuracy panel. */
const DETAIL_HEIGHT = 80;
/** Panels that show the whole run (downsampled in Python) with the recent window below. */
const WHOLE_RUN = new Set(["loss", "accuracy"]);
/** Activity panels (raster, readout, synapse) are wider and taller: a whole episode. */
const ACTIVITY_WIDTH = 440, ACTIVITY_HEIGHT = 220;
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
const TRIMS = [["0", "no trimming"], ["0.01", "trim 1 %"], ["0.05", "trim 5 %"]];

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

export class LivePanels {
  /**
   * @param {HTMLElement} container  the `[data-region=live]` element
   * @param {any} [app]  the ExplorerApp (model, request, graph view); optional for tests
   */
  constructor(container, app = null) {
    this.container = container;
    this.app = app;
    this.model = app ? app.model : null;
    /** @type {LivePanelSpec[]} */
    this.specs = [];
    /** @type {Map<string, Series>} */
    this.series = new Map();
    /** @type {Map<string, {canvas: HTMLCanvasElement, box: HTMLElement, caption: HTMLElement}>} */
    this.panels = new Map();
    /** @type {Set<string> | null} series not drawn (unticked in "record"); null: all */
    this.hiddenSeries = null;
    this.settings = { smoothing: 1, lossLog: false, traceLog: true, trim: 0.01 };
    /** @type {Map<string, {data: Float32Array, shape: number[], width: number}>} whole-run overviews (`overview/<panel>`) */
    this.overviews = new Map();
    /** @type {Map<string, any>} y ranges that only grow, per panel (reset with the run) */
    this.ranges = new Map();
    /** the top of the graph's trace colour scale: the largest ‖ε‖ of the run so far */
    this.traceMax = 0;
    /** @type {any} the compile ticker (elapsed seconds in the status line and empty panels) */
    this.compileTimer = null;
    /** @type {number | null} the unit whose synapse the activity view shows (null: most active) */
    this.synapseUnit = null;
    this.history = this.model ? this.model.get("live_history") || null : null;
    this.isStatic = Boolean(this.history);
    this.status = /** @type {any} */ ((this.model && this.model.get("live_status")) || {});
    this.failureStep = this.history && this.history.failure ? Number(this.history.failure.step) : null;
    this.listeners = /** @type {[string, Function][]} */ ([]);
    this.build();
    if (this.model) {
      this.listen("change:live_status", () => this.onStatus(this.model.get("live_status") || {}));
      this.listen("change:error", () => this.showError());
    }
    this.onRendered = () => this.colourGraph();
    if (app && app.el) app.el.addEventListener("etp-rendered", this.onRendered);
    this.onStatus(this.status);
    this.showError();
  }

  /** @param {string} event @param {Function} cb */
  listen(event, cb) {
    this.model.on(event, cb);
    this.listeners.push([event, cb]);
  }

  build() {
    this.smoothingSet = false;
    const button = (/** @type {string} */ label, /** @type {string} */ action, /** @type {string} */ title, /** @type {() => void} */ fn) =>
      h("button", { class: "etp-button", "data-live-action": action, title, onclick: () => fn() }, label);
    this.buttons = {
      step: button("Step", "step", "one online step", () => this.send("live_step", { n: 1 })),
      run: button("Run", "run", "run until paused (frames of `steps per frame` steps)", () => this.send("live_run", { n_steps: null })),
      pause: button("Pause", "pause", "pause before the next step", () => this.send("live_pause")),
      continue: button("Continue ▸", "continue", "the lesson ended at its step budget: run past it, until paused", () => this.send("live_run", { n_steps: null, past_budget: true })),
      reset: button("Reset", "reset", "restore the initial weights, states and traces; clear the history", () => this.send("live_reset")),
      verify: button("Verify", "verify", "measure each weight's online gradient against BPTT on the last steps of the data, beside its claim", () => this.send("live_verify", { steps: 32 })),
    };
    this.framesInput = /** @type {HTMLInputElement} */ (h("input", { type: "number", min: 1, step: 1, value: 20, "data-live-input": "steps_per_frame",
      onchange: () => this.send("live_set", { steps_per_frame: Number(this.framesInput.value) }) }));
    this.decayInput = /** @type {HTMLInputElement} */ (h("input", { type: "number", min: 0, max: 0.999, step: 0.01, value: 0.9, "data-live-input": "decay",
      onchange: () => this.send("live_set", { decay: Number(this.decayInput.value) }) }));
    this.decayLabel = h("label", { title: "ES-D-RTRL trace decay (α_x = α_f); recompiles the next frame", hidden: true }, "decay", this.decayInput);
    this.recordList = h("div", { hidden: true });
    const recordToggle = h("button", { class: "etp-button", "data-live-action": "record", title: "which relations and groups to record",
      onclick: () => { this.recordList.hidden = !this.recordList.hidden; } }, "Record ▾");
    this.recordBox = h("span", { class: "etp-live-record" }, recordToggle, this.recordList);
    this.trimSelect = /** @type {HTMLSelectElement} */ (h("select", { "data-live-input": "trim", title: "heatmap colour range: outliers above this quantile of |v| saturate",
      onchange: () => { this.settings.trim = Number(this.trimSelect.value); this.redrawAll(); } },
    TRIMS.map(([value, text]) => h("option", { value, selected: Number(value) === this.settings.trim }, text))));
    this.statusEl = h("span", { class: "etp-live-status", "data-live-status": "" });
    this.compareTable = h("table", { class: "etp-live-compare", "data-live-compare": "", hidden: true });
    this.noteEl = h("span", { class: "etp-live-note", "data-live-note": "", hidden: !this.isStatic },
      "Recorded run (saved page, no kernel): controls are disabled.");
    this.legendCanvas = /** @type {HTMLCanvasElement} */ (h("canvas", { width: 120, height: 22, "data-live-legend": "" }));
    this.legendEl = h("span", { class: "etp-live-legend", hidden: true, title: "graph nodes: each relation's ETP equation coloured by its current trace magnitude, on a scale from 0 to the largest magnitude of the run so far (fixed: a colour means the same value in every frame)" },
      "‖ε‖ on graph", this.legendCanvas);
    this.buttons.continue.hidden = true;
    this.lessonEl = h("div", { class: "etp-live-lesson", "data-live-lesson": "", hidden: true });
    this.controls = h("div", { class: "etp-live-controls" }, this.buttons.step, this.buttons.run, this.buttons.continue, this.buttons.pause, this.buttons.reset, this.buttons.verify,
      h("label", { title: "steps between two UI frames" }, "steps/frame", this.framesInput), this.decayLabel, this.recordBox,
      this.trimSelect, this.legendEl, this.statusEl, this.noteEl);
    this.errorEl = h("div", { class: "etp-live-error", role: "alert", "data-live-error": "", hidden: true });
    this.grid = h("div", { class: "etp-live-grid" });
    this.container.replaceChildren(h("style", {}, LIVE_CSS), this.controls, this.errorEl, this.lessonEl, this.compareTable, this.grid);
    if (this.isStatic) for (const el of this.controls.querySelectorAll("button, input, select")) {
      if (el !== this.trimSelect) /** @type {HTMLInputElement} */ (el).disabled = true;
    }
  }

  /** @param {LivePanelSpec[]} specs */
  setPanels(specs) {
    this.specs = specs || [];
    const lossSpec = this.specs.find((s) => s.name === "loss");
    if (lossSpec && !this.smoothingSet) this.settings.smoothing = defaultSmoothing(lossSpec);
    this.panels.clear();
    const boxes = [];
    for (const spec of this.specs) {
      const id = panelOf(spec);
      if (this.panels.has(id)) continue;
      const title = id === "traces" ? "eligibility-trace size ‖ε‖ per weight" : spec.title || spec.name;
      const activity = spec.kind === "activity";
      const canvas = /** @type {HTMLCanvasElement} */ (h("canvas", { width: activity ? ACTIVITY_WIDTH : WIDTH, height: activity ? ACTIVITY_HEIGHT : HEIGHT, "data-live": id }));
      const caption = h("div", { class: "etp-live-caption", "data-live-caption": id, hidden: true });
      const tooltip = /** @type {any} */ (spec).tooltip || "";
      const detail = WHOLE_RUN.has(id) ? /** @type {HTMLCanvasElement} */ (h("canvas", { width: WIDTH, height: DETAIL_HEIGHT, "data-live-detail": id,
        title: "the recent steps in detail (the shaded part of the whole run above)" })) : null;
      const box = h("div", { class: "etp-live-panel", "data-live-panel": id, title: tooltip }, this.panelHead(id, title), canvas, ...(detail ? [detail] : []), caption);
      if (id === "activity/layer") canvas.addEventListener("click", (event) => this.pickUnit(canvas, event));
      this.panels.set(id, { canvas, box, caption, detail });
      boxes.push(box);
    }
    this.grid.replaceChildren(...boxes);
    this.container.hidden = this.specs.length === 0;
    this.compareMode = this.specs.some((s) => s.kind === "compare");
    this.buildRecordList();
    // compare mode: no single algorithm to verify, no decay to set, nothing to (de)select
    this.buttons.verify.hidden = this.compareMode;
    if (this.compareMode) { this.recordBox.hidden = true; this.decayLabel.hidden = true; }
    if (this.isStatic) {
      this.series = this.history && this.history.compare
        ? compareSeriesFromHistory(this.history, this.specs) : seriesFromHistory(this.history, this.specs);
      this.overviews = staticOverviews(this.history, this.specs);
    }
    this.onStatus(this.status);
    this.redrawAll();
  }

  /** A panel's title with its own settings (loss: smoothing + log-y; traces: log-y). */
  panelHead(/** @type {string} */ id, /** @type {string} */ title) {
    const extra = [];
    if (id === "loss") {
      const select = /** @type {HTMLSelectElement} */ (h("select", { "data-live-input": "smoothing",
        onchange: () => { this.settings.smoothing = Number(select.value); this.smoothingSet = true; this.redraw("loss"); this.redraw("accuracy"); } },
      SMOOTHING_CHOICES.map(([value, text]) => h("option", { value, selected: value === this.settings.smoothing }, text))));
      extra.push(h("label", { title: "the thick line: the trailing mean of the loss (and accuracy) over this many of the task's episodes; the faint line is every step" }, select));
    }
    if (id === "loss" || id === "traces") {
      const key = id === "loss" ? "lossLog" : "traceLog";
      const box = /** @type {HTMLInputElement} */ (h("input", { type: "checkbox", checked: this.settings[key], "data-live-input": `${id}-log`,
        onchange: () => { this.settings[key] = box.checked; this.redraw(id); } }));
      extra.push(h("label", {}, box, "log-y"));
    }
    return h("div", { class: "etp-live-panel-head" }, h("span", { class: "etp-subtitle", "data-live-title": id }, title), h("span", {}, extra));
  }

  buildRecordList() {
    const names = this.specs.filter((s) => s.kind !== "compare" && s.kind !== "activity").map((s) => s.name).filter((n) => n !== "loss" && n !== "accuracy");
    this.recordBox.hidden = names.length === 0;
    this.recordList.replaceChildren(...names.map((name) => {
      const box = /** @type {HTMLInputElement} */ (h("input", { type: "checkbox", "data-record": name, checked: !this.hiddenSeries || !this.hiddenSeries.has(name),
        disabled: this.isStatic, onchange: () => this.onRecordChange() }));
      return h("div", {}, h("label", {}, box, name));
    }));
  }

  onRecordChange() {
    const boxes = /** @type {HTMLInputElement[]} */ ([...this.recordList.querySelectorAll("input[data-record]")]);
    const hidden = boxes.filter((b) => !b.checked).map((b) => String(b.dataset.record));
    this.setHidden(hidden.length ? new Set(hidden) : null);
    const record = hidden.length ? ["loss", ...boxes.filter((b) => b.checked).map((b) => String(b.dataset.record))] : null;
    this.send("live_set", { record });
  }

  /** @param {Set<string> | null} hidden */
  setHidden(hidden) {
    this.hiddenSeries = hidden;
    for (const [id, panel] of this.panels) {
      panel.box.hidden = id !== "traces" && id !== "loss" && Boolean(hidden && hidden.has(id));
    }
    this.redrawAll();
  }

  /**
   * New data for a series (a live message).
   * @param {string} name
   * @param {Float32Array} data
   * @param {number[]} [shape]
   * @param {{step?: number, steps?: number[]}} [meta]  the message (`step`: global step of the last
   *   row; heatmaps: `steps`, the global step of each measured row)
   */
  update(name, data, shape, meta = {}) {
    const whole = /** @type {any} */ (meta).overview;
    if (typeof whole === "string") { // the whole run of a panel, downsampled (History.overview)
      this.overviews.set(whole, { data, shape: shape || [0, 4], width: Number(/** @type {any} */ (meta).width) || 1 });
      this.redraw(whole);
      return;
    }
    const spec = this.specs.find((s) => s.name === name);
    if (!spec) throw new Error(`live data for unknown panel '${name}'`);
    this.series.set(name, { data, shape: shape || [data.length], lastStep: meta.step ?? -1, steps: Array.isArray(meta.steps) ? meta.steps : undefined });
    this.redraw(panelOf(spec));
    if (panelOf(spec) === "traces") this.colourGraph();
  }

  redrawAll() {
    for (const id of this.panels.keys()) this.redraw(id);
    this.colourGraph();
  }

  /** True when a panel has something to draw (a series of it arrived). */
  hasData(/** @type {string} */ id) {
    for (const spec of this.specs) if (panelOf(spec) === id && this.series.has(spec.name)) return true;
    return this.overviews.has(id);
  }

  /** Draw one panel from the current series. */
  redraw(/** @type {string} */ id) {
    const panel = this.panels.get(id);
    if (!panel) return;
    const { canvas } = panel;
    const marker = this.failureStep;
    const compiling = compilingText(this.status.compiling, this.compileStarted);
    if (compiling && !this.hasData(id)) { // before the first frame: say what is happening
      drawWaiting(canvas, compiling);
      if (panel.detail) drawWaiting(panel.detail, "");
      canvas.dataset.compiling = "true";
      return;
    }
    delete canvas.dataset.compiling;
    if (id === "traces") {
      const names = this.specs.filter((s) => panelOf(s) === "traces" && !(this.hiddenSeries && this.hiddenSeries.has(s.name))).map((s) => s.name);
      const labelOf = (/** @type {string} */ n) => {
        const spec = /** @type {any} */ (this.specs.find((s) => s.name === n));
        return (spec && spec.label) || n.split("/")[1] + (n.startsWith("trace_") ? ` (${n.slice(6, 7)})` : "");
      };
      const lines = names.filter((n) => this.series.has(n)).map((n, k) => ({
        values: /** @type {Series} */ (this.series.get(n)).data, colour: LINE_COLOURS[k % LINE_COLOURS.length], label: labelOf(n) }));
      const last = lines.length ? /** @type {Series} */ (this.series.get(names.find((n) => this.series.has(n)) || "")).lastStep : -1;
      drawLines(canvas, lines, { logY: this.settings.traceLog, lastStep: last >= 0 ? last : undefined, marker, xTitle: "step", yTitle: "‖ε‖" });
      return;
    }
    if (id.startsWith("activity/")) { this.redrawActivity(id); return; }
    const spec = /** @type {any} */ (this.specs.find((s) => s.name === id));
    const series = this.series.get(id);
    if (!spec) return;
    const lastStep = series && series.lastStep >= 0 ? series.lastStep : undefined;
    const titles = { xTitle: spec.x_label, yTitle: spec.y_label };
    const chance = typeof spec.chance === "number" ? spec.chance : undefined;
    const smoothing = spec.smooth && this.settings.smoothing ? smoothingWindow(spec, this.settings.smoothing) : 0;
    const logY = id === "loss" && this.settings.lossLog;
    panel.caption.hidden = true;
    panel.box.removeAttribute("data-constant");
    const overview = panel.detail ? this.overviews.get(id) : undefined;
    // with the whole run drawn above, the recent window goes to the detail strip below it
    const recent = overview && panel.detail ? panel.detail : canvas;
    if (panel.detail) panel.detail.hidden = !overview;
    if (overview) this.drawWholeRun(canvas, spec, overview, smoothing, logY, chance, series);
    const floor = id === "loss" && !logY ? { yMin: 0 } : {}; // a loss axis starts at 0
    if (spec.kind === "compare") {
      const data = series ? (smoothing ? windowMeanRows(series.data, series.shape, smoothing) : series.data) : new Float32Array(0);
      const raw = series && smoothing ? series.data : undefined;
      const drawn = drawCompare(recent, data, series ? series.shape : [0, 0, 2], spec.labels || [],
        { colours: LINE_COLOURS, logY, raw, chance, ...floor, ...(recent === canvas ? titles : {}) });
      if (!overview) canvas.dataset.lines = String(drawn ? drawn.lines : 0);
    } else if (spec.kind === "heatmap") {
      const value = series && series.data.length ? constantValue(series.data) : null;
      if (value != null) { this.drawConstantPanel(panel, spec, value, series); return; }
      drawHeatmap(canvas, series ? series.data : new Float32Array(0), series ? series.shape : [0, 0], { trim: this.settings.trim, lastStep, steps: series ? series.steps : undefined, ...titles });
    } else if (spec.kind === "fidelity") {
      drawFidelity(canvas, series ? series.data : new Float32Array(0), series ? series.shape : [0, 3], titles);
    } else {
      const raw = series ? series.data : new Float32Array(0);
      const values = smoothing ? windowMean(raw, smoothing) : raw;
      const lastFinite = [...values].reverse().find(Number.isFinite);
      const label = spec.smooth && lastFinite !== undefined ? `${smoothing ? `mean of ${smoothing} steps ` : "last "}${formatNumber(lastFinite)}` : undefined;
      const lines = [{ values, colour: "#1f77b4", label, width: 2.2 }];
      if (smoothing) lines.unshift({ values: raw, colour: "#1f77b4", label: undefined, width: 1, alpha: 0.22, scale: false, dots: spec.masked });
      const range = id === "accuracy" ? { yMin: 0, yMax: 1 } : floor;
      drawLines(recent, lines, { logY, lastStep, marker, chance, ...range, ...(recent === canvas ? titles : {}) });
      canvas.dataset.smoothed = String(smoothing);
      if (chance !== undefined) canvas.dataset.chance = String(chance);
    }
  }

  /**
   * The whole run of a loss / accuracy panel (`overview/<id>`: per bucket the first step,
   * mean, min, max): min/max band and smoothed mean, from step 0, on a y range that only
   * grows; the recent window is shaded (it is drawn in detail below).
   * @param {HTMLCanvasElement} canvas @param {any} spec
   * @param {{data: Float32Array, shape: number[], width: number}} overview
   * @param {number} smoothing @param {boolean} logY @param {number | undefined} chance @param {Series | undefined} recent
   */
  drawWholeRun(canvas, spec, overview, smoothing, logY, chance, recent) {
    const colours = spec.kind === "compare" ? LINE_COLOURS : ["#1f77b4"];
    const series = overviewSeries(overview.data, overview.shape, colours, spec.kind === "compare" ? spec.labels : undefined);
    const key = `${spec.name}:${logY}`;
    if (!this.ranges.has(key)) this.ranges.set(key, { min: Infinity, max: -Infinity });
    const accuracy = spec.name === "accuracy" ? { yMin: 0, yMax: 1 } : {};
    let detail = null;
    if (recent && recent.shape.length === 1 && recent.lastStep >= 0) detail = recent.lastStep - recent.shape[0] + 1;
    if (recent && recent.shape.length === 3) detail = firstStepOf(recent);
    const drawn = drawOverview(canvas, series, { width: overview.width, smoothSteps: smoothing, logY, chance, grow: this.ranges.get(key),
      detail, xTitle: `step (whole run${overview.width > 1 ? `, ${overview.width} steps a point` : ""})`, yTitle: spec.y_label, ...accuracy });
    canvas.dataset.lines = String(drawn ? series.filter((s) => s.count > 0).length : 0);
    canvas.dataset.overview = "true";
  }

  /**
   * A heatmap whose values are one constant over units and steps: the value, where it comes
   * from (`spec.constants`, from the model's time constants) and that it is constant.
   * @param {{canvas: HTMLCanvasElement, box: HTMLElement, caption: HTMLElement}} panel
   * @param {any} spec @param {number} value @param {Series | undefined} series
   */
  drawConstantPanel(panel, spec, value, series) {
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

  /** The activity views: the spiking layer, the readout, the synapse. */
  redrawActivity(/** @type {string} */ id) {
    const panel = this.panels.get(id);
    if (!panel) return;
    const spikes = this.series.get("activity/spikes"), hidden = this.series.get("activity/hidden");
    const synapse = this.series.get("activity/synapse");
    const unit = this.synapseUnit ?? mostActiveUnit(spikes, synapse);
    if (id === "activity/layer" || id === "activity/hidden") {
      this.raster = drawLayer(panel.canvas, spikes, hidden, unit);
    } else if (id === "activity/readout") {
      const spec = /** @type {any} */ (this.specs.find((s) => s.name === "activity/output"));
      drawReadout(panel.canvas, this.series.get("activity/output"), this.series.get("activity/target"), Boolean(spec && spec.y_label === "probability"));
    } else if (id === "activity/synapse") {
      drawSynapse(panel.canvas, synapse, unit);
      const spec = /** @type {any} */ (this.specs.find((s) => s.name === "activity/synapse"));
      const title = panel.box.querySelector("[data-live-title]");
      if (spec && title) {
        const picked = this.synapseUnit == null ? (spikes ? "most active unit" : "largest gradient") : "clicked";
        title.textContent = `synapse ${spec.weight}[${spec.input}, ${unit}] (input ${spec.input} → unit ${unit}, ${picked}): trace ε × learning signal L = update L·ε (beside the gradient g)`;
      }
      panel.canvas.dataset.unit = String(unit);
    }
    panel.canvas.dataset.drawn = String(Boolean(this.series.get(id === "activity/readout" ? "activity/output" : id === "activity/synapse" ? id : "activity/hidden")));
  }

  /** A click on the raster picks the unit whose synapse the synapse view shows. */
  pickUnit(/** @type {HTMLCanvasElement} */ canvas, /** @type {MouseEvent} */ event) {
    if (!this.raster) return;
    const rect = canvas.getBoundingClientRect();
    const y = (event.clientY - rect.top) * (canvas.height / Math.max(rect.height, 1));
    const unit = Math.floor((y - this.raster.top) / this.raster.rowHeight);
    if (unit < 0 || unit >= this.raster.units) return;
    this.synapseUnit = unit;
    this.redraw("activity/layer");
    this.redraw("activity/synapse");
  }

  /** Colour the graph's relation nodes by current trace magnitude; update the legend. */
  colourGraph() {
    const magnitudes = relationMagnitudes(this.visibleSeries());
    this.traceMax = grownMax(magnitudes, this.traceMax);
    const drawn = colourGraph(this.app, magnitudes, this.traceMax);
    this.legendEl.hidden = !drawn;
    if (drawn) drawRamp(this.legendCanvas, "0", formatNumber(drawn.max));
    this.legendCanvas.dataset.max = String(this.traceMax);
  }

  /** The graph's trace colour range (formatted): 0 to the largest ‖ε‖ of the run so far. */
  traceRange() {
    return this.traceMax > 0 ? { min: "0", max: formatNumber(this.traceMax) } : null;
  }

  visibleSeries() {
    if (!this.hiddenSeries) return this.series;
    const hidden = this.hiddenSeries;
    return new Map([...this.series].filter(([name]) => !hidden.has(name)));
  }

  /** Send a request; errors are already shown by the app (here only swallowed). */
  send(/** @type {string} */ method, params = {}) {
    if (!this.app || this.isStatic) return Promise.resolve(null);
    return this.app.request(method, params).then((/** @type {any} */ result) => {
      if (method === "live_reset") this.clear();
      if (result && typeof result.step === "number") this.onStatus({ ...this.status, step: result.step, running: result.running });
      return result;
    }, () => null);
  }

  clear() {
    this.series.clear();
    this.overviews.clear();
    this.ranges.clear();
    this.traceMax = 0;
    this.failureStep = null;
    this.redrawAll();
    this.showError();
  }

  /** `live_status` from Python (or the saved history's meta). */
  onStatus(/** @type {any} */ status) {
    if (typeof status.step === "number" && typeof this.status.step === "number" && status.step < this.status.step && status.step === 0) {
      this.series.clear();
      this.overviews.clear();
      this.ranges.clear();
      this.traceMax = 0;
      this.failureStep = null;
      this.redrawAll();
    }
    this.status = status || {};
    const meta = (this.history && this.history.meta) || {};
    const device = this.status.device || meta.device || "?";
    const algorithm = this.status.algorithm || meta.algorithm || "";
    const step = this.isStatic && !this.history.compare ? (this.history.steps || []).length : this.status.step ?? 0;
    const state = this.isStatic ? "recorded" : this.status.halted ? "halted" : this.status.running ? "running" : "paused";
    const budget = typeof this.status.budget === "number" ? ` of ${this.status.budget}` : "";
    this.updateCompiling();
    const compiling = compilingText(this.status.compiling, this.compileStarted);
    this.statusEl.textContent = `step ${step}${budget} · ${algorithm} · device ${device} · ${compiling || state}`;
    this.statusEl.dataset.compiling = compiling ? "true" : "false";
    renderLesson(this.lessonEl, this.isStatic ? null : this.status.lesson, (/** @type {string} */ path) => {
      if (this.app && typeof this.app.select === "function") this.app.select({ kind: "weight", id: path }, true);
    });
    const decay = this.status.decay ?? (meta.algorithm === "es_d_rtrl" ? meta.decay : null);
    this.decayLabel.hidden = decay == null || Boolean(this.compareMode);
    this.renderCompare(Array.isArray(this.status.compare) ? this.status.compare : null);
    if (decay != null && document.activeElement !== this.decayInput) this.decayInput.value = String(Number(decay));
    if (this.status.steps_per_frame && document.activeElement !== this.framesInput) this.framesInput.value = String(this.status.steps_per_frame);
    if (Array.isArray(this.status.record) && !this.isStatic) {
      const record = new Set(this.status.record);
      const hidden = this.specs.map((s) => s.name).filter((n) => n !== "loss" && !record.has(n));
      this.hiddenSeries = hidden.length ? new Set(hidden) : null;
    }
    if (!this.isStatic) {
      const running = Boolean(this.status.running);
      const ended = typeof this.status.budget === "number" && Number(this.status.step) >= this.status.budget;
      this.buttons.step.disabled = running || Boolean(this.status.halted);
      this.buttons.run.disabled = running || Boolean(this.status.halted) || ended;
      this.buttons.run.title = typeof this.status.budget === "number"
        ? (ended ? `the lesson ended at step ${this.status.budget} (the recipe's budget); Continue runs past it` : `run to the lesson's end (step ${this.status.budget}, the recipe's budget); Pause stops earlier`)
        : "run until paused (frames of `steps per frame` steps)";
      this.buttons.continue.hidden = !ended;
      this.buttons.continue.disabled = running || Boolean(this.status.halted);
      this.buttons.pause.disabled = !running;
      this.buttons.verify.disabled = running;
    }
  }

  /**
   * Compare mode's cost table: one row per algorithm, its colour the one of its lines.
   * @param {import("../types.js").CompareRow[] | null} rows
   */
  renderCompare(rows) {
    this.compareTable.hidden = !rows || !rows.length;
    if (!rows || !rows.length) return;
    const fmt = (/** @type {any} */ v) => (v == null || !Number.isFinite(Number(v)) ? "–" : formatNumber(Number(v)));
    const head = h("tr", {}, ...["algorithm", "step", "loss (last 50)", "cosine vs BPTT", "rel. error", "ms / step", "learner state"].map((t) => h("th", {}, t)));
    const body = rows.map((row, i) => h("tr", { "data-compare-row": row.algorithm, class: row.halted ? "halted" : "", title: row.failure || "" },
      h("td", {}, h("span", { class: "etp-swatch-line", style: { background: LINE_COLOURS[i % LINE_COLOURS.length] } }), row.algorithm, row.halted ? " (halted)" : ""),
      h("td", {}, String(row.step)), h("td", {}, fmt(row.loss)), h("td", {}, fmt(row.cosine)), h("td", {}, fmt(row.rel_error)),
      h("td", { "data-compare-ms": row.algorithm }, fmt(row.ms_per_step)), h("td", {}, formatBytes(row.state_bytes))));
    this.compareTable.replaceChildren(head, ...body);
  }

  /** A failure (non-finite step, user-code error) shown in the live region, with the step. */
  showError() {
    const failure = this.history && this.history.failure;
    const message = (this.model && !this.isStatic && this.model.get("error")) || (failure && failure.message) || "";
    const match = /Step (\d+)/.exec(message);
    if (match) this.failureStep = Number(match[1]);
    this.errorEl.textContent = message ? `⚠ ${message}` : "";
    this.errorEl.hidden = !message;
    if (match) for (const id of ["loss", "traces"]) this.redraw(id);
  }

  /** Start or stop the ticker that counts the seconds of a compilation. */
  updateCompiling() {
    const c = this.status.compiling;
    const key = c ? `${c.label}/${c.index}/${c.total}` : "";
    if (key !== this.compileKey) this.compileStarted = Date.now() - 1000 * Number((c && c.elapsed) || 0);
    this.compileKey = key;
    if (c && !this.compileTimer) {
      this.compileTimer = setInterval(() => { this.onStatus(this.status); for (const id of this.panels.keys()) if (!this.hasData(id)) this.redraw(id); }, 1000);
    } else if (!c && this.compileTimer) {
      clearInterval(this.compileTimer);
      this.compileTimer = null;
      this.redrawAll();
    }
  }

  dispose() {
    if (this.compileTimer) clearInterval(this.compileTimer);
    if (this.model) for (const [event, cb] of this.listeners) this.model.off(event, cb);
    if (this.app && this.app.el) this.app.el.removeEventListener("etp-rendered", this.onRendered);
  }
}

/** `1536` -> "1.5 KiB" (mirrors etp_viz.live.compare.format_bytes). */
export function formatBytes(/** @type {number} */ n) {
  if (n == null || !Number.isFinite(Number(n))) return "–";
  const units = ["B", "KiB", "MiB", "GiB"];
  let value = Number(n), unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit++; }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** First step of the recent window of a compare-mode `[k, m, 2]` series. */
function firstStepOf(/** @type {Series} */ series) {
  let first = Infinity;
  const [k, m] = series.shape;
  for (let i = 0; i < k * m; i++) { const step = series.data[i * 2]; if (Number.isFinite(step) && step < first) first = step; }
  return Number.isFinite(first) ? first : null;
}

/** A panel that waits (compiling): its text in the middle. */
function drawWaiting(/** @type {HTMLCanvasElement} */ canvas, /** @type {string} */ text) {
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
 * The whole-run overviews of a saved page's recorded history (one run or compare mode's
 * `{compare: {label: history}}`), computed here like the live pushes.
 * @param {any} history @param {any[]} specs
 */
function staticOverviews(history, specs) {
  /** @type {Map<string, {data: Float32Array, shape: number[], width: number}>} */
  const out = new Map();
  for (const spec of specs) {
    if (!WHOLE_RUN.has(spec.name)) continue;
    const runs = history && history.compare ? (spec.labels || []).map((/** @type {string} */ l) => history.compare[l] || {}) : [history];
    const rows = runs.map((run) => {
      const steps = (run && run.steps) || [];
      return bucketRows(stepValues((run && run.metrics) || {}, spec.name), steps.length ? Number(steps[0]) : 0);
    });
    if (!rows.some((r) => r.count)) continue;
    const width = Math.max(...rows.map((r) => r.width));
    if (!history.compare) { out.set(spec.name, { data: rows[0].rows, shape: [rows[0].count, 4], width }); continue; }
    // runs of one comparison have the same length: one width
    const m = Math.max(...rows.map((r) => r.count));
    const data = new Float32Array(rows.length * m * 4).fill(NaN);
    rows.forEach((r, i) => data.set(r.rows, i * m * 4));
    out.set(spec.name, { data, shape: [rows.length, m, 4], width });
  }
  return out;
}
