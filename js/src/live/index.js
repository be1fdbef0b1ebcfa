// @ts-check
/**
 * The live region of the explorer: controls (Step, Run, Pause, Reset, steps per frame,
 * ES-D-RTRL decay, which series to record, device shown) and canvas panels fed float32
 * buffers (loss, trace magnitudes per relation, dh/dy and dh/dh heatmaps, fidelity), plus
 * graph nodes coloured by current trace magnitude with a legend.
 *
 * Python side: `LiveExplorer` in etp_viz/explorer/show.py (contract in docs/view-model.md,
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
import { drawLines, drawHeatmap, drawFidelity, drawRamp, drawCompare, formatNumber } from "./plots.js";
import { smooth, smoothRows, relationMagnitudes, seriesFromHistory, compareSeriesFromHistory } from "./series.js";
import { colourGraph } from "./graph-colour.js";
import { LIVE_CSS } from "./style.js";

/** @typedef {import("../types.js").LivePanelSpec} LivePanelSpec */
/** @typedef {import("./series.js").Series} Series */

const WIDTH = 300, HEIGHT = 120;
const TRIMS = [["0", "no trimming"], ["0.01", "trim 1 %"], ["0.05", "trim 5 %"]];

/** Which panel draws a series: loss, all traces together, or the series' own panel. */
export function panelOf(/** @type {LivePanelSpec} */ spec) {
  if (spec.kind === "line" && /^trace(_x|_f)?\//.test(spec.name)) return "traces";
  return spec.name;
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
    /** @type {Map<string, {canvas: HTMLCanvasElement, box: HTMLElement}>} */
    this.panels = new Map();
    /** @type {Set<string> | null} series not drawn (unticked in "record"); null: all */
    this.hiddenSeries = null;
    this.settings = { smoothing: 0, lossLog: false, traceLog: true, trim: 0.01 };
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
    const button = (/** @type {string} */ label, /** @type {string} */ action, /** @type {string} */ title, /** @type {() => void} */ fn) =>
      h("button", { class: "etp-button", "data-live-action": action, title, onclick: () => fn() }, label);
    this.buttons = {
      step: button("Step", "step", "one online step", () => this.send("live_step", { n: 1 })),
      run: button("Run", "run", "run until paused (frames of `steps per frame` steps)", () => this.send("live_run", { n_steps: null })),
      pause: button("Pause", "pause", "pause before the next step", () => this.send("live_pause")),
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
    this.legendEl = h("span", { class: "etp-live-legend", hidden: true, title: "graph nodes: each relation's ETP equation coloured by its current trace magnitude (log scale)" },
      "‖ε‖ on graph", this.legendCanvas);
    this.controls = h("div", { class: "etp-live-controls" }, this.buttons.step, this.buttons.run, this.buttons.pause, this.buttons.reset, this.buttons.verify,
      h("label", { title: "steps between two UI frames" }, "steps/frame", this.framesInput), this.decayLabel, this.recordBox,
      this.trimSelect, this.legendEl, this.statusEl, this.noteEl);
    this.errorEl = h("div", { class: "etp-live-error", role: "alert", "data-live-error": "", hidden: true });
    this.grid = h("div", { class: "etp-live-grid" });
    this.container.replaceChildren(h("style", {}, LIVE_CSS), this.controls, this.errorEl, this.compareTable, this.grid);
    if (this.isStatic) for (const el of this.controls.querySelectorAll("button, input, select")) {
      if (el !== this.trimSelect) /** @type {HTMLInputElement} */ (el).disabled = true;
    }
  }

  /** @param {LivePanelSpec[]} specs */
  setPanels(specs) {
    this.specs = specs || [];
    this.panels.clear();
    const boxes = [];
    for (const spec of this.specs) {
      const id = panelOf(spec);
      if (this.panels.has(id)) continue;
      const title = id === "traces" ? "trace magnitude per relation ‖ε‖" : spec.title || spec.name;
      const canvas = /** @type {HTMLCanvasElement} */ (h("canvas", { width: WIDTH, height: HEIGHT, "data-live": id }));
      const box = h("div", { class: "etp-live-panel", "data-live-panel": id }, this.panelHead(id, title), canvas);
      this.panels.set(id, { canvas, box });
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
    }
    this.onStatus(this.status);
    this.redrawAll();
  }

  /** A panel's title with its own settings (loss: smoothing + log-y; traces: log-y). */
  panelHead(/** @type {string} */ id, /** @type {string} */ title) {
    const extra = [];
    if (id === "loss") {
      const slider = /** @type {HTMLInputElement} */ (h("input", { type: "range", min: 0, max: 0.99, step: 0.01, value: this.settings.smoothing, "data-live-input": "smoothing",
        oninput: () => { this.settings.smoothing = Number(slider.value); this.redraw("loss"); } }));
      extra.push(h("label", { title: "exponential moving average" }, "smooth", slider));
    }
    if (id === "loss" || id === "traces") {
      const key = id === "loss" ? "lossLog" : "traceLog";
      const box = /** @type {HTMLInputElement} */ (h("input", { type: "checkbox", checked: this.settings[key], "data-live-input": `${id}-log`,
        onchange: () => { this.settings[key] = box.checked; this.redraw(id); } }));
      extra.push(h("label", {}, box, "log-y"));
    }
    return h("div", { class: "etp-live-panel-head" }, h("span", { class: "etp-subtitle" }, title), h("span", {}, extra));
  }

  buildRecordList() {
    const names = this.specs.filter((s) => s.kind !== "compare").map((s) => s.name).filter((n) => n !== "loss");
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

  /** Draw one panel from the current series. */
  redraw(/** @type {string} */ id) {
    const panel = this.panels.get(id);
    if (!panel) return;
    const { canvas } = panel;
    const marker = this.failureStep;
    if (id === "traces") {
      const names = this.specs.filter((s) => panelOf(s) === "traces" && !(this.hiddenSeries && this.hiddenSeries.has(s.name))).map((s) => s.name);
      const lines = names.filter((n) => this.series.has(n)).map((n, k) => ({
        values: /** @type {Series} */ (this.series.get(n)).data, colour: LINE_COLOURS[k % LINE_COLOURS.length], label: n.split("/")[1] + (n.startsWith("trace_") ? ` (${n.slice(6, 7)})` : "") }));
      const last = lines.length ? /** @type {Series} */ (this.series.get(names.find((n) => this.series.has(n)) || "")).lastStep : -1;
      drawLines(canvas, lines, { logY: this.settings.traceLog, lastStep: last >= 0 ? last : undefined, marker });
      return;
    }
    const spec = this.specs.find((s) => s.name === id);
    const series = this.series.get(id);
    if (!spec) return;
    const lastStep = series && series.lastStep >= 0 ? series.lastStep : undefined;
    if (spec.kind === "compare") {
      const data = series ? (id === "loss" ? smoothRows(series.data, series.shape, this.settings.smoothing) : series.data) : new Float32Array(0);
      const drawn = drawCompare(canvas, data, series ? series.shape : [0, 0, 2], spec.labels || [],
        { colours: LINE_COLOURS, logY: id === "loss" && this.settings.lossLog });
      canvas.dataset.lines = String(drawn ? drawn.lines : 0);
    } else if (spec.kind === "heatmap") {
      drawHeatmap(canvas, series ? series.data : new Float32Array(0), series ? series.shape : [0, 0], { trim: this.settings.trim, lastStep, steps: series ? series.steps : undefined });
    } else if (spec.kind === "fidelity") {
      drawFidelity(canvas, series ? series.data : new Float32Array(0), series ? series.shape : [0, 3]);
    } else {
      const values = series ? (id === "loss" ? smooth(series.data, this.settings.smoothing) : series.data) : new Float32Array(0);
      const label = id === "loss" && series && series.data.length ? `last ${formatNumber(series.data[series.data.length - 1])}` : undefined;
      drawLines(canvas, [{ values, colour: "#1f77b4", label }], { logY: id === "loss" && this.settings.lossLog, lastStep, marker });
    }
  }

  /** Colour the graph's relation nodes by current trace magnitude; update the legend. */
  colourGraph() {
    const drawn = colourGraph(this.app, relationMagnitudes(this.visibleSeries()));
    this.legendEl.hidden = !drawn;
    if (drawn) drawRamp(this.legendCanvas, formatNumber(drawn.min), formatNumber(drawn.max));
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
    this.failureStep = null;
    this.redrawAll();
    this.showError();
  }

  /** `live_status` from Python (or the saved history's meta). */
  onStatus(/** @type {any} */ status) {
    if (typeof status.step === "number" && typeof this.status.step === "number" && status.step < this.status.step && status.step === 0) {
      this.series.clear();
      this.failureStep = null;
      this.redrawAll();
    }
    this.status = status || {};
    const meta = (this.history && this.history.meta) || {};
    const device = this.status.device || meta.device || "?";
    const algorithm = this.status.algorithm || meta.algorithm || "";
    const step = this.isStatic && !this.history.compare ? (this.history.steps || []).length : this.status.step ?? 0;
    const state = this.isStatic ? "recorded" : this.status.halted ? "halted" : this.status.running ? "running" : "paused";
    this.statusEl.textContent = `step ${step} · ${algorithm} · device ${device} · ${state}`;
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
      this.buttons.step.disabled = running || Boolean(this.status.halted);
      this.buttons.run.disabled = running || Boolean(this.status.halted);
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

  dispose() {
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
