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
 * every algorithm; `live_status.knobs` gives a slider per learner knob (./knobs.js). A saved
 * compare page has `live_history.compare`: `{algorithm: history}`.
 *
 * The scrubber (./scrubber.js) replays the run: at a picked step the graph is coloured by the
 * trace magnitudes there (compare mode: of the learner chosen beside it) and every panel
 * marks the step; `overview/trace/…` messages (or the saved history) give the whole run.
 */
import { h } from "../dom.js";
import { LINE_COLOURS } from "./colormap.js";
import { drawLines, drawHeatmap, drawFidelity, drawRamp, drawCompare, formatNumber, drawOverview, overviewSeries } from "./plots.js";
import { drawLayer, drawReadout, drawSynapse, mostActiveUnit } from "./activity.js";
import { windowMean, windowMeanRows, relationMagnitudes, seriesFromHistory, compareSeriesFromHistory, staticOverviews, relationOf } from "./series.js";
import { colourGraph, grownMax } from "./graph-colour.js";
import { renderLesson, compilingText } from "./lesson.js";
import { LIVE_CSS } from "./style.js";
import { SMOOTHING_CHOICES, TRIMS, defaultSmoothing, smoothingWindow, panelOf, constantValue, explainConstant, formatBytes, firstStepOf, drawWaiting, compareRows, drawConstantPanel, learnerText } from "./panel-helpers.js";
import { Scrubber, magnitudesAt, runMaxMagnitude, drawCursor, clearCursor, cursorText, seriesSpan } from "./scrubber.js";
import { KnobSliders } from "./knobs.js";

export { SMOOTHING_CHOICES, defaultSmoothing, smoothingWindow, panelOf, constantValue, explainConstant, formatBytes, learnerText };

/** @typedef {import("../types.js").LivePanelSpec} LivePanelSpec */
/** @typedef {import("./series.js").Series} Series */

const WIDTH = 360, HEIGHT = 170;
/** The recent-window strip under a whole-run loss / accuracy panel. */
const DETAIL_HEIGHT = 80;
/** Panels that show the whole run (downsampled in Python) with the recent window below. */
const WHOLE_RUN = new Set(["loss", "accuracy", "traces"]);
/** Activity panels (raster, readout, synapse) are wider and taller: a whole episode. */
const ACTIVITY_WIDTH = 440, ACTIVITY_HEIGHT = 220;
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
    /** @type {number | null} the step the scrubber picked (null: live, follow the run) */
    this.scrubStep = null;
    /** compare mode: the learner whose traces colour the graph (index into the labels) */
    this.traceLearner = 0;
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
    // compare mode: a slider per learner knob (live_status.knobs), see ./knobs.js
    this.knobSliders = new KnobSliders((name, value) => this.send("live_set", { [name]: value }));
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
    this.scrubber = new Scrubber((step) => { this.scrubStep = step; this.redrawAll(); });
    this.controls = h("div", { class: "etp-live-controls" }, this.buttons.step, this.buttons.run, this.buttons.continue, this.buttons.pause, this.buttons.reset, this.buttons.verify,
      h("label", { title: "steps between two UI frames" }, "steps/frame", this.framesInput), this.decayLabel, this.knobSliders.el, this.recordBox,
      this.trimSelect, this.legendEl, this.scrubber.el, this.statusEl, this.noteEl);
    this.errorEl = h("div", { class: "etp-live-error", role: "alert", "data-live-error": "", hidden: true });
    this.grid = h("div", { class: "etp-live-grid" });
    this.container.replaceChildren(h("style", {}, LIVE_CSS), this.controls, this.errorEl, this.lessonEl, this.compareTable, this.grid);
    if (this.isStatic) for (const el of this.controls.querySelectorAll("button, input, select")) {
      if (el !== this.trimSelect && !this.scrubber.el.contains(el)) /** @type {HTMLInputElement} */ (el).disabled = true;
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
      this.overviews = staticOverviews(this.history, this.specs, WHOLE_RUN);
    }
    this.updateScrubber();
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
    const cursor = h("span", { class: "etp-live-cursor", "data-live-cursor": id, hidden: true });
    return h("div", { class: "etp-live-panel-head" }, h("span", { class: "etp-subtitle", "data-live-title": id }, title), cursor, h("span", {}, extra));
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
    if (typeof whole === "string") { // the whole run of a panel or trace, downsampled (History.overview)
      this.overviews.set(whole, { data, shape: shape || [0, 4], width: Number(/** @type {any} */ (meta).width) || 1 });
      if (relationOf(whole)) { this.updateScrubber(); this.redraw("traces"); this.colourGraph(); } else this.redraw(whole);
      return;
    }
    const spec = this.specs.find((s) => s.name === name);
    if (!spec) throw new Error(`live data for unknown panel '${name}'`);
    this.series.set(name, { data, shape: shape || [data.length], lastStep: meta.step ?? -1, steps: Array.isArray(meta.steps) ? meta.steps : undefined });
    if (name === "loss") this.updateScrubber();
    this.redraw(panelOf(spec));
    if (panelOf(spec) === "traces") this.colourGraph();
  }

  /** The scrubber's range: the run's first to last step (from the loss); the learner picker. */
  updateScrubber() {
    const loss = seriesSpan(this.series.get("loss")), overview = this.overviews.get("loss");
    let first = loss ? loss.first : 0;
    if (overview && overview.data.length && Number.isFinite(overview.data[0])) first = Math.min(first, overview.data[0]);
    this.scrubber.setRange(first, loss ? loss.last : -1);
    const spec = /** @type {any} */ (this.specs.find((s) => s.name === "loss"));
    const labels = this.compareMode && spec && [...this.overviews.keys()].some((n) => relationOf(n)) ? spec.labels || [] : [];
    if (labels.length !== (this.scrubber.learnerSelect ? this.scrubber.learnerSelect.options.length : 0)) {
      this.traceLearner = this.firstLearnerWithTraces(labels.length);
      this.scrubber.setLearners(labels, (i) => { this.traceLearner = i; this.traceMax = 0; this.colourGraph(); });
      if (this.scrubber.learnerSelect) this.scrubber.learnerSelect.value = String(this.traceLearner);
    }
  }

  /** Compare mode: the first learner with a recorded trace (BPTT keeps none). */
  firstLearnerWithTraces(/** @type {number} */ k) {
    for (let i = 0; i < k; i++) {
      for (const [name, o] of this.overviews) {
        if (!relationOf(name) || o.shape.length !== 3) continue;
        const m = o.shape[1];
        for (let r = 0; r < m; r++) if (Number.isFinite(o.data[(i * m + r) * 4 + 1])) return i;
      }
    }
    return 0;
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

  /** Draw one panel from the current series; mark the scrubber's step on it. */
  redraw(/** @type {string} */ id) {
    this.drawPanel(id);
    const panel = this.panels.get(id);
    if (!panel) return;
    const step = this.scrubStep, label = /** @type {HTMLElement | null} */ (panel.box.querySelector("[data-live-cursor]"));
    for (const c of [panel.canvas, panel.detail]) if (c) { if (step == null || c.hidden) clearCursor(c); else drawCursor(c, step); }
    const text = step == null ? "" : cursorText(this, id, step, this.traceNames(), (n) => this.traceLabel(n));
    if (label) { label.textContent = text; label.hidden = !text; }
  }

  /** The trace series the traces panel shows (unticked ones left out). */
  traceNames() {
    return this.specs.filter((s) => panelOf(s) === "traces" && !(this.hiddenSeries && this.hiddenSeries.has(s.name))).map((s) => s.name);
  }

  traceLabel(/** @type {string} */ n) {
    const spec = /** @type {any} */ (this.specs.find((s) => s.name === n));
    return (spec && spec.label) || n.split("/")[1] + (n.startsWith("trace_") ? ` (${n.slice(6, 7)})` : "");
  }

  drawPanel(/** @type {string} */ id) {
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
      const names = this.traceNames(), colour = (/** @type {string} */ n) => LINE_COLOURS[names.indexOf(n) % LINE_COLOURS.length];
      const lines = names.filter((n) => this.series.has(n)).map((n) => ({
        values: /** @type {Series} */ (this.series.get(n)).data, colour: colour(n), label: this.traceLabel(n) }));
      const recent = this.series.get(names.find((n) => this.series.has(n)) || "");
      const last = recent ? recent.lastStep : -1;
      // the whole run above (bucket mean and min/max band per trace), the recent window below
      const whole = names.filter((n) => this.overviews.has(n) && this.overviews.get(n)?.shape.length === 2);
      if (panel.detail) panel.detail.hidden = !whole.length;
      const target = whole.length && panel.detail ? panel.detail : canvas;
      if (whole.length) {
        const overviews = whole.map((n) => /** @type {import("./series.js").Overview} */ (this.overviews.get(n)));
        const width = Math.max(...overviews.map((o) => o.width)), key = `traces:${this.settings.traceLog}`;
        if (!this.ranges.has(key)) this.ranges.set(key, { min: Infinity, max: -Infinity });
        drawOverview(canvas, overviews.map((o, k) => ({ rows: o.data, count: o.shape[0], colour: colour(whole[k]), label: this.traceLabel(whole[k]) })),
          { width, logY: this.settings.traceLog, grow: this.ranges.get(key), detail: recent && last >= 0 ? last - recent.shape[0] + 1 : null,
            xTitle: `step (whole run${width > 1 ? `, ${width} steps a point` : ""})`, yTitle: "‖ε‖" });
        canvas.dataset.overview = "true";
      }
      drawLines(target, lines, { logY: this.settings.traceLog, lastStep: last >= 0 ? last : undefined, marker, ...(target === canvas ? { xTitle: "step", yTitle: "‖ε‖" } : {}) });
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
      if (value != null) { drawConstantPanel(panel, spec, value, series); return; }
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
    // live: the latest values (compare mode: the last bucket of the chosen learner's whole
    // run); scrubbed: the values at the picked step. The scale holds for the whole run.
    const step = this.scrubStep, hidden = this.hiddenSeries, learner = this.compareMode ? this.traceLearner : 0;
    const magnitudes = step == null && !this.compareMode ? relationMagnitudes(this.visibleSeries())
      : magnitudesAt(this.visibleSeries(), this.overviews, step ?? Infinity, learner, hidden);
    this.traceMax = Math.max(grownMax(magnitudes, this.traceMax), runMaxMagnitude(this.overviews, learner, hidden));
    this.legendCanvas.dataset.step = step == null ? "live" : String(step);
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
    this.scrubber.stop();
    this.scrubStep = null;
    this.scrubber.step = null;
    this.updateScrubber();
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
      this.scrubber.stop();
      this.scrubStep = this.scrubber.step = null;
      this.updateScrubber();
      this.ranges.clear();
      this.traceMax = 0;
      this.failureStep = null;
      this.redrawAll();
    }
    this.status = status || {};
    const meta = (this.history && this.history.meta) || {};
    const device = this.status.device || meta.device || "?";
    const algorithm = learnerText(this.status.algorithm || meta.algorithm || "", this.status.learner_options ?? meta.learner_options);
    const step = this.isStatic && !this.history.compare ? (this.history.steps || []).length : this.status.step ?? 0;
    const state = this.isStatic ? "recorded" : this.status.halted ? "halted" : this.status.running ? "running" : "paused";
    const budget = typeof this.status.budget === "number" ? ` of ${this.status.budget}` : "";
    this.updateCompiling();
    const compiling = compilingText(this.status.compiling, this.compileStarted);
    this.statusEl.textContent = `step ${step}${budget} · ${algorithm} · device ${device} · ${compiling || state}`;
    this.statusEl.dataset.compiling = compiling ? "true" : "false";
    // a saved page shows the summary its run reached too
    renderLesson(this.lessonEl, this.status.lesson, (/** @type {string} */ path) => {
      if (this.app && typeof this.app.select === "function") this.app.select({ kind: "weight", id: path }, true);
    });
    const decay = this.status.decay ?? (meta.algorithm === "es_d_rtrl" ? meta.decay : null);
    this.decayLabel.hidden = decay == null || Boolean(this.compareMode);
    this.renderCompare(Array.isArray(this.status.compare) ? this.status.compare : null);
    this.knobSliders.render(this.status.knobs, this.isStatic || Boolean(this.status.running));
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
    if (rows && rows.length) this.compareTable.replaceChildren(...compareRows(rows));
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
    this.scrubber.dispose();
    if (this.compileTimer) clearInterval(this.compileTimer);
    if (this.model) for (const [event, cb] of this.listeners) this.model.off(event, cb);
    if (this.app && this.app.el) this.app.el.removeEventListener("etp-rendered", this.onRendered);
  }
}
