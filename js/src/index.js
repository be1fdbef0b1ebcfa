// @ts-check
/**
 * etp_viz explorer front end (anywidget ESM entry).
 *
 * The Python side is `Explorer` in etp_viz/explorer/widget.py; its synced traits are mirrored
 * by `WidgetTraits` in ./types.js. Traits are the source of truth: everything shown here is
 * derived from `view_shell`, `expanded`, `selected`, `highlight` and `options`, so the view can
 * be rebuilt without a kernel (saved HTML, nbviewer-less reloads). A big model's `view_shell` is
 * a shell: the records an opened box draws and a clicked weight's card come as parts
 * (./parts.js), from the kernel or from the parts a saved page embeds.
 */
import css from "./style.css";
import { h, fill } from "./dom.js";
import { indexSteps, visibleGraphSteps, runSliced, toDotSteps, layoutKey, expandedToShow, tooltipFor, resolveRankdir, COLORS } from "./graph.js";
import { highlightSets, highlightDotIds } from "./highlight.js";
import { searchPanel } from "./search.js";
import { LayoutClient } from "./layout.js";
import { GraphView, afterFrame, yieldToEventLoop } from "./view.js";
import { weightRow, groupRow, diagnosticRow, weightDetail, VirtualList, inspectorPanel, attachVerification, sidePanels, COMPARE_ROW_HEIGHT, ROW_HEIGHT } from "./panels.js";
import { graphLegend } from "./legend.js";
import { logPositions } from "./live/graph-colour.js";
import { decodeFloat32, relationMagnitudes } from "./live/series.js";
import { formatNumber } from "./live/plots.js";
import { warmFonts } from "./fonts.js";
import { LivePanels } from "./live/index.js";
import { Appearance, buildToolbar, graphScales, stepScale } from "./appearance.js";
import { watchPageTheme } from "./theme.js";
import { GraphKeyboard } from "./keyboard.js";
import { checkViewModel } from "./types.js";
import { WhatIfPanel, whatIfOffer } from "./whatif.js";
import { missingRecords, partSource, loadDrawn, loadSelected } from "./parts.js";

/** Graphs of at most this many drawn nodes are laid out both ways when `rankdir` is "auto":
 * the direction whose whole graph comes out larger on screen wins. */
const BOTH_DIRECTIONS_MAX = 150;

/** @typedef {import("./types.js").Selection} Selection */

/**
 * @typedef {object} AnyModel  The slice of the anywidget model API used here.
 * @property {(name: string) => any} get
 * @property {(name: string, value: any) => void} set
 * @property {() => void} save_changes
 * @property {(event: string, cb: Function) => void} on
 * @property {(event: string, cb: Function) => void} off
 * @property {(content: any, callbacks?: any, buffers?: any[]) => void} send
 */

const REQUEST_TIMEOUT_MS = 15000;

export class ExplorerApp {
  /** @param {AnyModel} model @param {HTMLElement} el */
  constructor(model, el) {
    this.model = model;
    this.el = el;
    this.layout = new LayoutClient();
    /** @type {{key: string, nodes: number, cached: boolean, dotMs: number, layoutMs: number, workerMs: number, mountMs: number, totalMs: number}[]} */
    this.timings = [];
    this.generation = 0;
    this.rebuildGeneration = 0;
    this.panelsGeneration = 0;
    this.requests = new Map();
    this.nextRequest = 1;
    this.index = null;
    this.graph = null;
    this.listeners = [];
    this.buildDom();
    this.listen("change:view_shell", () => this.rebuild());
    // the inspector of a box says Expand or Collapse: redraw it when boxes open or fold
    this.listen("change:expanded", () => { this.relayout(); this.guard(() => this.renderInspector()); });
    this.listen("change:options", () => { this.applyOptions(); this.relayout(); });
    this.listen("change:scale", () => this.guard(() => this.applyScale(true)));
    this.stopThemeWatch = watchPageTheme(() => this.guard(() => this.applyTheme(true)));
    this.listen("change:highlight", () => this.guard(() => this.onHighlightChange()));
    this.listen("change:selected", () => this.guard(() => this.onSelectedChange()));
    this.listen("change:error", () => this.showPythonError());
    this.listen("change:live_panels", () => this.guard(() => this.live.setPanels(model.get("live_panels") || [])));
    this.listen("change:verification", () => this.guard(() => this.applyVerification(true)));
    this.listen("change:what_if", () => this.guard(() => this.whatIf.render()));
    this.listen("change:what_if_changes", () => this.guard(() => this.renderInspector()));
    this.listen("msg:custom", (/** @type {any} */ msg, /** @type {any[]} */ buffers) => this.guard(() => this.onMessage(msg, buffers)));
    this.applyOptions();
    this.applyScale(false);
    this.disposed = false;
    this.guard(() => this.start());
  }

  /**
   * Start-up after the frame is in the page, one short task per step (render() itself only
   * builds the empty frame): the layout worker (a blob of the wasm bundle) and its wasm
   * loading, font warm-up (./fonts.js: one face a frame, in the background), the live region,
   * then the view model (index built in slices).
   */
  async start() {
    const steps = [
      () => this.layout.warm(),
      () => { warmFonts(this.root, () => !this.disposed); },
      () => { this.live.setPanels(this.model.get("live_panels") || []); this.showPythonError(); this.whatIf.render(); },
      () => this.rebuild(),
    ];
    for (const step of steps) {
      await yieldToEventLoop();
      if (this.disposed) return;
      this.guard(step);
    }
  }

  /** @param {string} event @param {Function} cb */
  listen(event, cb) {
    this.model.on(event, cb);
    this.listeners.push([event, cb]);
  }

  buildDom() {
    const style = h("style", {}, css);
    const toolbar = buildToolbar(this);
    this.graphPane = h("div", { class: "etp-graph-pane" });
    this.loadingEl = h("div", { class: "etp-loading" }, "laying out…");
    this.graphPane.append(this.loadingEl);
    this.view = new GraphView(this.graphPane, {
      onClick: (dotId) => this.guard(() => this.onGraphClick(dotId)),
      onBackground: () => this.guard(() => this.select({})),
      onView: () => this.showViewStatus(),
    });
    this.keyboard = new GraphKeyboard(this.graphPane, this.view, {
      select: (dotId) => this.guard(() => this.onGraphClick(dotId)),
      clear: () => this.guard(() => this.select({})),
      start: () => this.selectedDotId(),
      changed: () => this.scheduleLegend(),
    });
    // the legend: under the graph (always in view beside it), entries of what is drawn
    this.legendEl = h("div", { class: "etp-legend-bar", "data-panel": "legend", "data-legend": "" });
    this.graphCol = h("div", { class: "etp-graph-col" }, this.graphPane, this.legendEl);
    // the live session colours weight ops by trace size (./live/graph-colour.js marks them with
    // data-trace-position): the legend follows what is drawn
    if (typeof MutationObserver === "function") {
      this.colourObserver = new MutationObserver(() => this.scheduleLegend());
      this.colourObserver.observe(this.graphPane, { subtree: true, attributes: true, attributeFilter: ["data-trace-position"] });
    }
    const { sections, bodies, side } = sidePanels();
    this.sections = { ...sections, legend: this.legendEl };
    this.bodies = { ...bodies, legend: this.legendEl };
    this.side = side;
    this.errorEl = h("div", { class: "etp-error", role: "alert", hidden: true });
    // The live region: its own element and API (LivePanels), filled by the live session.
    this.liveEl = h("div", { class: "etp-live", "data-region": "live", hidden: true });
    this.live = new LivePanels(this.liveEl, this);
    // the "What if…" result (./whatif.js): below the graph area, above a live run's panels
    this.whatIf = new WhatIfPanel(this);
    // the graph area (toolbar, graph, legend, side panels) is `height` tall; a live run's
    // panels come below it
    this.top = h("div", { class: "etp-top" }, toolbar, h("div", { class: "etp-main" }, this.graphCol, this.side));
    this.root = h("div", { class: "etp-explorer" }, style, this.top, this.whatIf.el, this.liveEl, this.errorEl);
    this.appearance = new Appearance(this.root);
    this.el.append(this.root);
  }

  applyOptions() {
    const options = this.model.get("options") || {};
    this.top.style.height = `${Number(options.height) || 600}px`;
    this.applyTheme(false);
    const panels = options.panels;
    if (Array.isArray(panels)) {
      for (const [name, sec] of Object.entries(this.sections)) if (name !== "search") sec.hidden = !panels.includes(name);
    }
  }

  /** The `scale` trait: text sizes, then (`relayout`) the graph at its new font size and the panels' rows. */
  applyScale(relayout = true) {
    const scale = this.appearance.setScale(this.model.get("scale"));
    this.scaleEl.textContent = `${Math.round(scale * 100)} %`;
    const { minScale, fitMinScale } = graphScales(scale);
    Object.assign(this.view, { minScale, fitMinScale });
    if (!relayout) return;
    this.relayout();
    if (this.index) this.renderPanels();
  }

  /** A- / A+: the next text scale, written to the `scale` trait (Python sees it). @param {1 | -1} direction */
  setScale(direction) {
    this.model.set("scale", stepScale(this.appearance.scale, direction));
    this.model.save_changes();
  }

  /** The theme (option or JupyterLab's) and its colours; a change of theme redraws the graph. */
  applyTheme(relayout = true) {
    const before = this.appearance.dark;
    const palette = this.index ? this.index.palette : { ...COLORS, ...((this.model.get("view_shell") || {}).palette || {}) };
    const colours = this.appearance.setTheme((this.model.get("options") || {}).theme, palette);
    if (this.index) this.index.colours = colours;
    if (relayout && before !== this.appearance.dark) { this.legendSignature = ""; this.relayout(); }
  }

  /** The DOT id of the selected node (where keyboard focus starts), null when none is drawn. */
  selectedDotId() {
    const selected = this.model.get("selected") || {};
    return this.graph && selected.kind === "node" ? this.graph.nodeToDot.get(String(selected.id)) || null : null;
  }

  /** The status line's note on a view that shows part of the graph (after fit, zoom, drag). */
  showViewStatus() {
    if (!this.graph || !this.statusBase) return;
    const partial = this.view.isPartial();
    this.root.toggleAttribute("data-partial-view", partial);
    this.statusEl.textContent = this.statusBase + (partial ? " · part of the graph: drag to see more, Fit shows all" : "");
  }

  /** Run `fn`, showing any error in the widget instead of dying. */
  guard(/** @type {() => any} */ fn) {
    try {
      const result = fn();
      if (result && typeof result.catch === "function") result.catch((/** @type {any} */ e) => this.showError(e));
      return result;
    } catch (error) {
      this.showError(error);
      return undefined;
    }
  }

  showError(/** @type {any} */ error, source = "front end") {
    const message = error && error.message ? error.message : String(error);
    this.lastError = message;
    fill(this.errorEl, [`${source}: ${message}`, h("button", { class: "etp-button", onclick: () => { this.errorEl.hidden = true; } }, "dismiss")]);
    this.errorEl.hidden = false;
    if (source === "front end") {
      try { this.model.send({ type: "frontend_error", message }); } catch { /* no kernel */ }
    }
  }

  showPythonError() {
    const error = this.model.get("error");
    if (error) this.showError(error, "python");
  }

  /**
   * A new view model: index (built in short slices: thousands of nodes plus the viewer's
   * module grouping), layout, then the side panels (rows appended in slices), all in short
   * tasks so the UI thread never blocks for long.
   */
  rebuild() {
    const generation = ++this.rebuildGeneration;
    const isCurrent = () => generation === this.rebuildGeneration;
    return this.guard(async () => {
      const vm = this.model.get("view_shell");
      this.index = null;
      checkViewModel(vm);  // another version: an error in the widget, nothing drawn from it
      const index = vm ? await runSliced(indexSteps(vm), yieldToEventLoop, { isCurrent }) : null;
      if (!isCurrent()) return;
      // a shell's records come as parts: from the kernel, or embedded in a saved page
      this.missing = missingRecords(vm);
      this.parts = partSource(this.model.get("view_parts"), (method, params) => this.request(method, params));
      // the legend in a task and a frame of its own (not after the last index slice)
      await yieldToEventLoop();
      if (!isCurrent()) return;
      this.index = index || null;
      this.applyTheme(false);
      this.applyVerification(false);
      this.titleEl.textContent = this.index ? String(this.index.vm.title || "etp_viz") : "etp_viz (no graph)";
      // each step in its own task and frame: together (last index slice, legend, first graph
      // slice, inspector) they made one task of 20-30 ms, and their layouts one frame
      await afterFrame();
      if (!isCurrent()) return;
      if (this.revealSelection()) this.centrePending = true;
      const layout = this.relayout();
      await yieldToEventLoop();
      if (!isCurrent()) return layout;
      await this.renderPanels();
      return layout;
    });
  }

  expanded() {
    return new Set(/** @type {string[]} */ (this.model.get("expanded") || []));
  }

  /** Lay out the current expansion state (cached) and mount it. */
  async relayout() {
    if (!this.index) return;
    const generation = ++this.generation;
    const isCurrent = () => generation === this.generation;
    const start = performance.now();
    const synced = this.model.get("options") || {};
    const pane = this.view.paneSize();
    const common = { ...synced, font_size: graphScales(this.appearance.scale).font, theme: this.appearance.dark ? "dark" : "light" };
    const index = this.index;
    const graph = await runSliced(visibleGraphSteps(index, this.expanded(), common), yieldToEventLoop, { isCurrent });
    if (!graph || !isCurrent() || index !== this.index) return;
    // the records of what this state draws, before its layout (badges are in node labels)
    await this.loadDrawn(index, graph);
    if (!isCurrent() || index !== this.index) return;
    // "auto": the direction whose whole graph is drawn larger in this pane (a small graph is
    // laid out both ways), else left to right in a wide pane, top to bottom in a tall one
    const preferred = resolveRankdir(synced.rankdir, pane);
    const fixed = synced.rankdir === "TB" || synced.rankdir === "LR" || graph.nodeCount > BOTH_DIRECTIONS_MAX;
    const directions = fixed ? [preferred] : [preferred, preferred === "LR" ? "TB" : "LR"];
    let best = null, cached = true, dotDone = start;
    for (const rankdir of directions) {
      const options = { ...common, rankdir };
      const key = layoutKey(graph.expanded, options);
      cached = cached && this.layout.cache.has(key);
      const dotText = await runSliced(toDotSteps(index, graph, options), yieldToEventLoop, { isCurrent });
      if (!dotText || !isCurrent() || index !== this.index) return;
      dotDone = performance.now();
      this.statusEl.textContent = `laying out ${graph.nodeCount} nodes…`;
      this.loadingEl.hidden = false;
      let result;
      try {
        result = await this.layout.layout(key, dotText.dot);
      } catch (error) {
        if (isCurrent()) { this.loadingEl.hidden = true; this.statusEl.textContent = "layout failed"; }
        throw error;
      }
      if (!isCurrent()) return;
      const fit = Math.min(pane.width / (result.layout.width + 20), pane.height / (result.layout.height + 20));
      // the other direction must be clearly better (5 %) to beat the pane's own preference
      if (!best || fit > best.fit * 1.05) best = { key, options, result, fit };
    }
    if (!best) return;
    const { key, options, result } = best;
    const layoutDone = performance.now();
    const tooltip = (/** @type {string} */ dotId) => this.index ? tooltipFor(this.index, graph, dotId) : "";
    // Built in short slices (GraphView.build): the UI thread never blocks for long.
    this.statusBase = "";
    const mounted = await this.view.build(result.layout, tooltip, { isCurrent, rankdir: options.rankdir });
    if (!mounted || !isCurrent()) return;
    this.graph = graph;
    this.graphPane.setAttribute("data-rankdir", options.rankdir);
    this.applyHighlight(Boolean(this.centrePending));
    this.keyboard.refresh();
    this.renderLegend();
    this.centrePending = false;
    this.loadingEl.hidden = true;
    const end = performance.now();
    this.statusBase = `${graph.nodeCount} nodes · ${graph.edges.length} edges · ${Math.round(end - start)} ms`;
    this.showViewStatus();
    this.timings.push({ key, nodes: graph.nodeCount, cached, dotMs: dotDone - start, layoutMs: layoutDone - dotDone,
      workerMs: result.ms, mountMs: end - layoutDone, totalMs: end - start });
    this.el.dispatchEvent(new CustomEvent("etp-rendered", { detail: this.timings[this.timings.length - 1] }));
  }

  /** The records the visible graph draws that a shell held back (./parts.js loadDrawn). */
  loadDrawn(/** @type {any} */ index, /** @type {any} */ graph) {
    return loadDrawn(this, index, graph);
  }

  applyHighlight(centre = false) {
    if (!this.index || !this.graph) return;
    const sets = highlightSets(this.index, this.model.get("highlight"));
    const classes = highlightDotIds(sets, this.graph);
    this.view.highlight(classes);
    this.highlightClasses = new Set(classes.values());
    this.scheduleLegend();
    if (centre && classes.size) this.view.center([...classes.keys()].filter((id) => !id.startsWith("x") && !id.startsWith("s")));
  }

  /** Rebuild the legend on the next frame (several changes in one task make one rebuild). */
  scheduleLegend() {
    if (this.legendFrame) return;
    this.legendFrame = requestAnimationFrame(() => { this.legendFrame = 0; this.guard(() => this.renderLegend()); });
  }

  /** The legend of what is on screen (./legend.js graphLegend). */
  renderLegend() {
    graphLegend(this);
  }

  /** The range of the live trace colouring (formatted), from the live panels' series. */
  traceRange() {
    const live = /** @type {any} */ (this.live);
    if (live && typeof live.traceRange === "function") return live.traceRange(); // 0 … run max
    if (!live || typeof live.visibleSeries !== "function") return null;
    const { min, max } = logPositions(relationMagnitudes(live.visibleSeries()));
    return Number.isFinite(min) ? { min: formatNumber(min), max: formatNumber(max) } : null;
  }

  onSelectedChange() {
    this.renderPanels(false);
    this.revealSelection();
  }

  onHighlightChange() {
    // a highlight that arrives with a new expansion state (Python's select(node=...)) is
    // centred once that level is mounted
    const stale = !this.graph || layoutKey(this.graph.expanded) !== layoutKey(this.expanded());
    if (stale) this.centrePending = true;
    this.applyHighlight(!stale);
  }

  /**
   * A node selected inside collapsed boxes (e.g. by Python's `Explorer.select(node=...)`):
   * expand what hides it, the viewer-made `module` clusters included (Python does not know
   * them). Returns true when the expansion state changed.
   */
  revealSelection() {
    const selected = this.model.get("selected") || {};
    if (!this.index || selected.kind !== "node" || !this.index.nodes.has(String(selected.id))) return false;
    const current = this.expanded();
    const wanted = expandedToShow(this.index, String(selected.id), current);
    if (wanted.length === current.size) return false;
    this.setExpanded(wanted);
    return true;
  }

  /**
   * Build the side panels (`full`, on a new view model) or only mark the selection. The
   * weights/groups/diagnostics lists are virtual (./panels.js VirtualList): only the rows in
   * view are in the DOM, so a model with hundreds of each costs a few dozen rows; each list is
   * made in its own short task.
   */
  async renderPanels(full = true) {
    const index = this.index;
    if (!index) return;
    this.renderInspector();
    if (!full && this.panelsIndex === index) {
      this.markSelection(true);
      return;
    }
    this.panelsIndex = index;
    const generation = ++this.panelsGeneration;
    const select = (/** @type {Selection} */ s) => this.guard(() => this.select(s, true));
    const specs = /** @type {[ "weights" | "groups" | "diagnostics", any[], Function, (x: any) => string, string][]} */ ([
      ["weights", [...index.weights.values()], weightRow, (w) => String(w.path), "no weights"],
      ["groups", [...index.groups.values()], groupRow, (g) => String(g.index), "no hidden groups"],
      ["diagnostics", [...index.diagnostics.values()], diagnosticRow, (d) => String(d.index), "no diagnostics"]]);
    for (const list of Object.values(this.lists || {})) list.dispose();
    /** @type {Record<string, VirtualList<any>>} */
    this.lists = {};
    for (const [name, items, row, keyOf, empty] of specs) {
      // each list laid out in a frame of its own (with scheduler.yield they shared one)
      await afterFrame();
      if (generation !== this.panelsGeneration || index !== this.index) return;
      // compare mode: a weight's name on its own line above its claim chips (never cut)
      const twoLines = name === "weights" && items.some((w) => (w.claims || []).length);
      const scale = this.appearance.scale;
      const height = (twoLines ? COMPARE_ROW_HEIGHT : ROW_HEIGHT) * scale;
      const list = new VirtualList(items, (/** @type {any} */ item, /** @type {boolean} */ active) => row(item, active, select),
        keyOf, { empty, label: name, rowHeight: height, maxHeight: twoLines ? 6 * height : 220 * scale });
      this.lists[name] = list;
      const parts = [list.el];
      if (name === "weights") parts.push(this.weightDetailEl = h("div", { class: "etp-detail-slot" }));
      if (twoLines) parts.unshift(h("div", { class: "etp-dim", "data-claim-key": "" }, "= exact (solid outline) · ≈ approximate (dashed) · ∅ no online gradient (dotted)"));
      fill(this.bodies[name], parts);
    }
    this.markSelection(true);
  }

  /** Mark the selected row in the virtual lists (scrolled into view) and show a weight's fix. */
  /**
   * The `verification` trait (a `verify()` report) beside each weight's claim: sets
   * `verified` (text) and `verified_ok` on the index's weights, then redraws the panels.
   */
  applyVerification(redraw = true) {
    if (!this.index) return;
    attachVerification(this.index.weights, this.model.get("verification"));
    if (redraw) this.renderPanels();
  }

  markSelection(reveal = false) {
    const index = this.index;
    if (!index || !this.lists) return;
    const selected = this.model.get("selected") || {};
    const id = selected.id != null ? String(selected.id) : "";
    for (const [name, kind] of [["weights", "weight"], ["groups", "group"], ["diagnostics", "diagnostic"]]) {
      const list = this.lists[name];
      if (list) list.setActive(selected.kind === kind ? id : "", reveal && selected.kind === kind);
    }
    if (this.weightDetailEl) {
      const w = selected.kind === "weight" ? index.weights.get(id) : undefined;
      // the inspector says what the weight's status means; the detail adds the rest
      const withSummary = Boolean(this.sections.inspector.hidden);
      const detail = w ? weightDetail(w, withSummary) : null;
      fill(this.weightDetailEl, detail && detail.childNodes.length ? [detail] : []);
    }
  }

  /** The inspector for the current selection (its card asked for when the shell held it back). */
  renderInspector() {
    const index = this.index;
    if (!index) return;
    const selected = this.model.get("selected") || {};
    const kind = selected.kind === "weight" ? "weights" : selected.kind === "node" ? "nodes" : "";
    const loading = kind && this.missing && this.missing[kind].has(String(selected.id));
    if (loading) this.guard(() => loadSelected(this, selected));
    const note = loading ? [h("div", { class: "etp-dim", "data-loading-card": String(selected.id) }, "loading its details…")] : [];
    fill(this.bodies.inspector, [...note, inspectorPanel(index, selected, {
      expanded: this.expanded(),
      expand: (id) => this.guard(() => this.setExpanded([...this.expanded(), id])),
      collapse: (id) => this.guard(() => this.collapse(id)),
      whatIf: (path) => whatIfOffer(path, (this.model.get("what_if_changes") || {})[path],
        (weight, offer) => this.guard(() => this.whatIf.run(weight, offer))),
    })]);
  }

  /**
   * Select something: sets `selected` and `highlight` (both synced to Python). With `jump`,
   * expands the clusters hiding the nodes it names and centres on them.
   * @param {Selection} selection
   */
  select(selection, jump = false) {
    let expanded = [...this.expanded()];
    if (jump && this.index && selection.kind === "diagnostic") {
      const d = this.index.diagnostics.get(String(selection.id));
      for (const id of (d && d.node_ids) || []) expanded = expandedToShow(this.index, id, expanded);
    } else if (jump && this.index && selection.kind === "node") {
      expanded = expandedToShow(this.index, String(selection.id), expanded);
    }
    this.model.set("selected", selection);
    this.model.set("highlight", selection);
    if (expanded.length !== this.expanded().size) this.model.set("expanded", expanded);
    this.model.save_changes();
  }

  /** @param {string[]} ids */
  setExpanded(ids) {
    this.model.set("expanded", [...new Set(ids)]);
    this.model.save_changes();
  }

  collapse(/** @type {string} */ id) {
    if (!this.index) return;
    // collapsing a cluster also forgets expansions inside it
    const inside = (/** @type {string} */ c) => {
      for (let p = this.index?.clusters.get(c)?.parent; p; p = this.index?.clusters.get(p)?.parent) if (p === id) return true;
      return false;
    };
    this.setExpanded([...this.expanded()].filter((c) => c !== id && !inside(c)));
  }

  onGraphClick(/** @type {string} */ dotId) {
    if (!this.graph) return;
    const ref = this.graph.dotToVm.get(dotId);
    if (!ref) return;
    if (ref.type === "cluster" && dotId.startsWith("k")) {
      this.model.set("selected", { kind: "cluster", id: ref.id });
      this.setExpanded([...this.expanded(), ref.id]);
      return;
    }
    this.select({ kind: /** @type {any} */ (ref.type), id: ref.id });
  }

  runSearch() {
    this.searchResults = searchPanel(this, this.searchInput, this.sections.search, this.bodies.search);
  }

  jumpToFirstResult() {
    if (this.searchResults && this.searchResults.length) this.jumpTo(this.searchResults[0]);
  }

  /** @param {import("./search.js").SearchResult} result */
  jumpTo(result) {
    if (result.kind === "weight" || result.kind === "group") this.select({ kind: result.kind, id: result.id }, true);
    else if (result.node) this.select({ kind: "node", id: result.node }, true);
  }

  exportSvg() {
    return this.view.exportSvg(this.index ? this.index.colours : COLORS);
  }

  downloadSvg() {
    const text = this.exportSvg();
    if (!text) throw new Error("nothing to export yet");
    const url = URL.createObjectURL(new Blob([text], { type: "image/svg+xml" }));
    const a = h("a", { href: url, download: `${this.index ? this.index.vm.title || "graph" : "graph"}.svg` });
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }

  /**
   * A request to Python (custom message with an id; the reply carries the same id and
   * either `result` or `error`).
   * @param {string} method
   * @param {any} [params]
   * @param {number} [timeoutMs]
   */
  request(method, params = {}, timeoutMs = REQUEST_TIMEOUT_MS) {
    const id = this.nextRequest++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => { this.requests.delete(id); reject(new Error(`no reply to '${method}' (is the kernel running?)`)); }, timeoutMs);
      this.requests.set(id, { resolve, reject, timer });
      this.model.send({ type: "request", id, method, params });
    });
  }

  /** @param {any} msg @param {any[]} buffers */
  onMessage(msg, buffers) {
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "response") {
      const entry = this.requests.get(msg.id);
      if (!entry) return;
      this.requests.delete(msg.id);
      clearTimeout(entry.timer);
      if (msg.error) { entry.reject(new Error(msg.error)); this.showError(msg.error, "python"); }
      else entry.resolve(msg.result);
    } else if (msg.type === "live") {
      if (!buffers || !buffers.length) throw new Error(`live message '${msg.name}' without a buffer`);
      this.live.update(msg.name, decodeFloat32(buffers[0]), msg.shape, msg);
    } else if (msg.type === "error") {
      this.showError(msg.message, "python");
    }
  }

  dispose() {
    this.disposed = true;
    this.stopThemeWatch();
    if (this.colourObserver) this.colourObserver.disconnect();
    if (this.legendFrame) cancelAnimationFrame(this.legendFrame);
    this.rebuildGeneration++;
    this.panelsGeneration++;
    this.generation++;
    for (const list of Object.values(this.lists || {})) list.dispose();
    this.view.dispose();
    for (const [event, cb] of this.listeners) this.model.off(event, cb);
    for (const entry of this.requests.values()) clearTimeout(entry.timer);
    this.live.dispose();
    this.layout.dispose();
  }
}

/** anywidget entry point. */
function render({ model, el }) {
  let app;
  try {
    app = new ExplorerApp(model, el);
  } catch (error) {
    el.append(h("div", { class: "etp-error" }, `etp_viz explorer failed to start: ${error && error.message ? error.message : error}`));
    return () => {};
  }
  Object.defineProperty(el, "etpExplorer", { value: app, configurable: true });
  return () => app.dispose();
}

export default { render };
