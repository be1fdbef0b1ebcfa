// @ts-check
/**
 * The SVG graph view: builds the SVG from a layout draw list in short slices, pan (drag), zoom (wheel, buttons),
 * fit, highlight by CSS class, centre on an element, the keyboard focus ring, export of the current view.
 *
 * Pan and zoom never touch the SVG: its `viewBox` is written once, when it is built (the
 * `frame`: the whole graph; laid out level by level, with room to grow), and the view (`box`,
 * in SVG units) is shown by a CSS transform on the `<div>` that holds the SVG
 * (`viewTransform`). A new `viewBox` makes Chromium lay out every
 * element again (below 10 fps at ~1,000 nodes); a transform on an HTML box does not. During a
 * wheel or drag gesture the box is a composited layer (`will-change: transform`) holding a
 * do-nothing transform animation (`holdTransform`), so that each event only hands the layer's
 * new transform to the compositor (no style, layout, paint or re-layerizing of the graph); when the gesture ends the
 * hint is dropped and the graph is painted once, sharp, at its new scale. Labels smaller than
 * LOD_LABEL_PX on screen are hidden (one class on the SVG, ./style.css), switched when a
 * gesture ends or the view jumps (fit, buttons, keys, centre), never per event.
 *
 * A graph laid out level by level (./layout.js LevelsLayout) is drawn one group per level
 * (./draw.js DrawnLevel). The next layout of it keeps the groups of the levels it keeps
 * (moved by a transform when their box moved) and builds only the new ones: opening a box
 * builds that box and the levels around it, whatever the size of the graph.
 */

import { SVG_NS, itemBounds, moveLevel, buildLevel, anchorOf } from "./draw.js";
import { afterFrame } from "./frames.js";
import { viewTransform, transformText, fitBox, initialBox, boxText, holdTransform, MIN_FIT_SCALE } from "./view-box.js";

export { buildItem, itemBounds } from "./draw.js";
export { afterFrame, yieldToEventLoop, FRAME_GAP_MS } from "./frames.js";
export { viewTransform, fitBox, initialBox, firstViewLabelPx, holdTransform, MIN_FIT_SCALE, FIT_LABEL_PX, WINDOW_LABEL_PX } from "./view-box.js";

const HIGHLIGHT_CLASSES = ["hl-selected", "hl-path", "hl-boundary", "hl-cluster", "hl-transition", "hl-slice", "hl-search"];

/**
 * CSS embedded into exported SVGs so highlights survive outside the widget, in the theme's
 * colours (./theme.js; the widget itself draws them from CSS variables, ./style.css).
 * @param {Record<string, string>} c  colours by name
 */
export function exportCss(c) {
  return `
.hl-selected > polygon, .hl-selected > ellipse, .hl-selected > path { stroke: ${c.hl_selected}; stroke-width: 3px; }
.hl-path > polygon, .hl-path > ellipse { stroke: ${c.hl_path}; stroke-width: 3px; }
.hl-path > path { stroke: ${c.hl_path}; stroke-width: 3.5px; }
.hl-boundary > polygon, .hl-boundary > ellipse { stroke: ${c.hl_boundary}; stroke-width: 4px; fill: ${c.hl_boundary_fill}; }
.hl-cluster > polygon, .hl-cluster > path { stroke: ${c.hl_cluster}; stroke-width: 4px; }
.hl-transition > polygon, .hl-transition > ellipse, .hl-transition > path { stroke: ${c.hl_transition}; stroke-width: 3px; }
.hl-slice > polygon, .hl-slice > ellipse, .hl-slice > path { stroke: ${c.slice}; stroke-width: 3px; }
.hl-search > polygon, .hl-search > ellipse { stroke: ${c.hl_search}; stroke-width: 3px; }
`;
}

/** Labels smaller than this on screen (px) are hidden: the level of detail of a zoomed-out
 * graph (the class `LOD_CLASS` on the SVG). Never above the first view's own label size. */
export const LOD_LABEL_PX = 6;
/** Class on the SVG while its labels are hidden (./style.css). */
export const LOD_CLASS = "etp-lod-far";
/** A wheel gesture ends this long after its last event (ms), at the next frame without a
 * new one (`GraphView.endAfterQuietFrame`). */
export const GESTURE_END_MS = 150;

/** Levels of at most this many new items (./xdot.js draw-list items) are drawn into the SVG
 * shown (`GraphView.update`); a layout with more is built beneath it like a new graph. */
export const UPDATE_MAX_ITEMS = 3000;
/** Items of the levels kept aside after updates (their elements, not in the page). */
const SPARE_MAX_ITEMS = 30000;
/** Ids of the pieces of edges inside boxes (./hierarchy.js). */
const PIECE = /^p[ijou]_/;

/** The frame of a graph laid out level by level has this much room to grow (per side). */
const FRAME_ROOM = 1.25;

/**
 * The SVG's frame (viewBox) for a graph laid out level by level: the fitted box with room to
 * grow right and down, so that opening a box seldom needs a new viewBox (`update`).
 * @param {{x: number, y: number, w: number, h: number}} base
 */
function grownFrame(base) {
  const fit = fitBox(base);
  return { ...fit, w: fit.w * FRAME_ROOM, h: fit.h * FRAME_ROOM };
}

/**
 * The group of the levels at `depth` under `root` (made when missing): levels at the same
 * depth never overlap, and deeper ones are painted over the ones around them.
 * @param {SVGGElement} root
 * @param {number} depth
 */
function depthGroup(root, depth) {
  while (root.childElementCount <= depth) root.append(document.createElementNS(SVG_NS, "g"));
  return /** @type {SVGGElement} */ (root.children[depth]);
}

export class GraphView {
  /**
   * @param {HTMLElement} container
   * @param {{onClick: (dotId: string, event: MouseEvent) => void, onBackground: () => void, onView?: () => void}} handlers
   *   `onView`: the view box changed (fit, zoom, drag, centre)
   * @param {{minScale?: number, fitMinScale?: number}} [options]  pixels per SVG unit of the
   *   first view: `fitMinScale` the least at which it fits the whole graph, `minScale` that of
   *   a window on a graph too big to fit (./graph.js firstViewScales)
   */
  constructor(container, handlers, options = {}) {
    this.container = container;
    this.handlers = handlers;
    this.minScale = options.minScale ?? MIN_FIT_SCALE;
    this.fitMinScale = options.fitMinScale ?? this.minScale;
    /** @type {SVGRectElement | null} the keyboard focus ring (./keyboard.js) */
    this.ring = null;
    this.rankdir = "TB";
    /** @type {SVGSVGElement | null} */
    this.svg = null;
    /** @type {HTMLDivElement | null} the box holding the SVG: pan and zoom transform it */
    this.layer = null;
    this.base = { x: 0, y: 0, w: 1, h: 1 };
    /** the view: the part of the layout shown (SVG units, fitted into the pane) */
    this.box = { x: 0, y: 0, w: 1, h: 1 };
    /** the SVG's own viewBox, written once when it is built (the view is a transform of it) */
    this.frame = { x: 0, y: 0, w: 1, h: 1 };
    /** the labels' font size (SVG units) and whether they are hidden (level of detail) */
    this.fontUnits = 0;
    this.labelsHidden = false;
    /** the layer's scale (./view.js viewTransform `k`) */
    this.zoomFactor = 1;
    /** @type {{rect: DOMRect, timer: any, events: number, hold: Animation | null} | null} a
     * wheel or drag gesture in progress (`events`: its wheel events; `hold`: see holdTransform) */
    this.gesture = null;
    /** @type {Map<string, Element>} */
    this.elements = new Map();
    /** @type {Element[]} */
    this.highlighted = [];
    this.drag = null;
    this.moved = false;
    /** the view is the layout's first view (kept as the pane resizes) until the user moves it */
    this.firstView = false;
    container.addEventListener("wheel", (e) => this.onWheel(e), { passive: false });
    container.addEventListener("pointerdown", (e) => this.onPointerDown(e));
    container.addEventListener("pointermove", (e) => this.onPointerMove(e));
    container.addEventListener("pointerup", () => this.onPointerUp());
    container.addEventListener("pointerleave", () => this.onPointerUp());
    container.addEventListener("click", (e) => this.onClick(e));
    /** @type {Map<string, import("./draw.js").DrawnItem>} draw-list item of each element (its geometry) */
    this.items = new Map();
    /** @type {Map<string, import("./draw.js").DrawnLevel>} the levels drawn, by key (a graph laid out level by level) */
    this.levels = new Map();
    /** @type {Map<string, import("./draw.js").DrawnLevel>} levels taken out by the last updates (oldest first) */
    this.spare = new Map();
    /** @type {Map<string, string[]>} drawn edge -> its pieces inside boxes (./hierarchy.js) */
    this.parts = new Map();
    /** @type {Map<string, string>} piece inside a box -> the first drawn edge it carries */
    this.pieceEdge = new Map();
    /** pane size from a ResizeObserver (null until observed): read without forcing a layout */
    this.size = null;
    if (typeof ResizeObserver === "function") {
      this.resizeObserver = new ResizeObserver((entries) => {
        const r = entries[entries.length - 1].contentRect;
        const changed = !this.size || this.size.width !== r.width || this.size.height !== r.height;
        this.size = { width: r.width, height: r.height };
        // the first view follows the pane (the legend filling in under it, a resized window)
        // until the user zooms, drags or fits; any other view keeps its box in the new pane
        if (changed && this.firstView) this.showFirstView();
        else if (changed) this.applyView();
      });
      this.resizeObserver.observe(container);
    }
  }

  /**
   * Build the SVG for a layout draw list (./xdot.js) in slices of at most `budgetMs` of work,
   * yielding to the event loop (after a frame) between slices, so the UI thread never blocks
   * for long. The new SVG is built beneath the current one, which covers it (both fill the
   * pane, opaque), so each slice is styled, laid out and painted as it is added, and the swap
   * (removing the old SVG) changes no style of the new one: hiding it with an inherited
   * property (`visibility`) and showing it at the end restyled, re-laid out and repainted
   * every element in one frame.
   * A graph laid out level by level whose new levels hold at most UPDATE_MAX_ITEMS items is
   * updated in place instead (`update`).
   * Elements are created directly (no markup parsing); user text only ever goes through
   * `textContent`. Resolves to false when `isCurrent()` turns false (a newer layout started).
   * @param {{width: number, height: number, count: number, chunks: string[]} | import("./layout.js").LevelsLayout} layout
   * @param {(dotId: string) => string} tooltip  plain text for each element's <title>
   * @param {{isCurrent?: () => boolean, budgetMs?: number, rankdir?: string}} [control]
   */
  async build(layout, tooltip, control = {}) {
    const isCurrent = control.isCurrent || (() => true);
    const rankdir = control.rankdir || "TB";
    // a slice's style, layout and paint in the next frame cost about as much again
    const budget = control.budgetMs ?? 6;
    // start after a frame: called from the worker's reply, the first slice (and its layout)
    // would otherwise share that task and frame with whatever else ran there
    await afterFrame();
    if (!isCurrent()) return false;
    const parts = "levels" in layout ? layout.parts : new Map();
    /** @type {Map<string, string>} piece of an edge inside a box -> the first edge it carries */
    const pieceEdge = new Map();
    for (const [edge, pieces] of parts) for (const piece of pieces) if (!pieceEdge.has(piece)) pieceEdge.set(piece, edge);
    const titled = (/** @type {string} */ id) => tooltip(pieceEdge.get(id) || id);
    const run = { isCurrent, budget, tooltip: titled, start: performance.now(), fontUnits: 0 };
    if ("levels" in layout && this.svg && this.levels.size) {
      const fresh = layout.levels.filter((level) => !this.levels.has(level.key) && !this.spare.has(level.key));
      if (fresh.reduce((sum, level) => sum + level.layout.count, 0) <= UPDATE_MAX_ITEMS) {
        const moved = await this.update(layout, run);
        if (moved) this.finish(layout, rankdir, parts, pieceEdge, moved);
        return Boolean(moved);
      }
    }
    const levels = "levels" in layout ? layout.levels : [{ key: "", depth: 0, x: 0, y: 0, layout }];
    const svg = /** @type {SVGSVGElement} */ (document.createElementNS(SVG_NS, "svg"));
    svg.setAttribute("class", "etp-graph etp-building");
    // the SVG's only viewBox (the frame): the whole graph (with room to grow when laid out level
    // by level: opening a box then seldom writes a new one). Views are its zoom (k >= 1) but for
    // zooming out past Fit, so a gesture's composited layer holds the part on screen and a
    // margin around it (Chromium paints a layer's content within an expanded cull rect in
    // its own pixels: with the frame a window on a huge graph, zoomed out, every frame of a
    // gesture painted and layerized the graph again, 9 fps at 10,000 nodes)
    const base = { x: 0, y: 0, w: Math.max(layout.width, 1), h: Math.max(layout.height, 1) };
    const frame = "levels" in layout ? grownFrame(base) : fitBox(base);
    svg.setAttribute("viewBox", boxText(frame));
    svg.setAttribute("preserveAspectRatio", "xMidYMid meet");
    const root = /** @type {SVGGElement} */ (document.createElementNS(SVG_NS, "g"));
    root.setAttribute("class", "graph");
    svg.append(root);
    const layer = /** @type {HTMLDivElement} */ (document.createElement("div"));
    layer.className = "etp-graph-layer";
    layer.append(svg);
    if (this.layer && this.layer.parentNode === this.container) this.container.insertBefore(layer, this.layer);
    else this.container.append(layer);
    /** @type {Map<string, Element>} */
    const elements = new Map();
    /** @type {Map<string, import("./draw.js").DrawnItem>} */
    const drawn = new Map();
    /** @type {Map<string, import("./draw.js").DrawnLevel>} */
    const built = new Map();
    for (const level of levels) {
      const g = depthGroup(root, level.depth).appendChild(/** @type {SVGGElement} */ (document.createElementNS(SVG_NS, "g")));
      const made = await buildLevel(g, level, run, elements, drawn);
      if (!made) { layer.remove(); return false; }
      if (level.key) built.set(level.key, made);
    }
    if (!isCurrent()) { layer.remove(); return false; }
    this.endGesture(false);
    this.elements = elements;
    this.items = drawn;
    this.levels = built;
    this.spare = new Map();
    this.fontUnits = run.fontUnits;
    this.frame = frame;
    if (this.layer) this.layer.remove();
    svg.classList.remove("etp-building");
    this.svg = svg;
    this.layer = layer;
    this.highlighted = [];
    this.ring = null;
    this.finish(layout, rankdir, parts, pieceEdge);
    return true;
  }

  /**
   * A new layout of a graph laid out level by level, into the SVG shown: the new levels are
   * built off screen (slices), then, in one go, the levels it no longer has are taken out
   * (kept aside: going back is as quick), the others moved where they now go and the new
   * ones put in. Resolves to how far the box opened or closed moved (NaN: none found), null
   * when `run.isCurrent()` turned false first.
   * @param {import("./layout.js").LevelsLayout} layout
   * @param {{isCurrent: () => boolean, budget: number, tooltip: (id: string) => string, start: number, fontUnits: number}} run
   * @returns {Promise<{x: number, y: number} | null>}
   */
  async update(layout, run) {
    const elements = new Map(), drawn = new Map();
    /** @type {Map<string, import("./draw.js").DrawnLevel>} */
    const fresh = new Map();
    for (const level of layout.levels) {
      if (this.levels.has(level.key) || this.spare.has(level.key)) continue;
      const made = await buildLevel(/** @type {SVGGElement} */ (document.createElementNS(SVG_NS, "g")), level, run, elements, drawn);
      if (!made) return null;
      fresh.set(level.key, made);
    }
    if (!run.isCurrent() || !this.svg) return null;
    this.endGesture(false);
    if (run.fontUnits) this.fontUnits = run.fontUnits;
    const anchor = anchorOf([...fresh.values()], this.items);
    const wanted = new Set(layout.levels.map((level) => level.key));
    for (const [key, level] of this.levels) {
      if (wanted.has(key)) continue;
      level.g.remove();
      for (const item of level.items) {
        if (this.items.get(item.id) === item) { this.items.delete(item.id); this.elements.delete(item.id); }
      }
      this.levels.delete(key);
      this.spare.set(key, level);
    }
    const root = /** @type {SVGGElement} */ (this.svg.querySelector("g.graph"));
    for (const level of layout.levels) {
      let mounted = this.levels.get(level.key);
      if (!mounted) {
        mounted = fresh.get(level.key) || this.spare.get(level.key);
        if (!mounted) continue;
        this.spare.delete(level.key);
        this.levels.set(level.key, mounted);
        depthGroup(root, level.depth).append(mounted.g);
        mounted.items.forEach((item, i) => { this.items.set(item.id, item); this.elements.set(item.id, mounted.elements[i]); });
      }
      moveLevel(mounted, level.x, level.y);
      // the edge that a piece inside a box shows first may be another one now
      mounted.items.forEach((item, i) => {
        if (item.k === "edge" && PIECE.test(item.id) && mounted.elements[i].firstChild) {
          mounted.elements[i].firstChild.textContent = run.tooltip(item.id);
        }
      });
    }
    let kept = 0;
    for (const [key, level] of [...this.spare].reverse()) {
      kept += level.items.length;
      if (kept > SPARE_MAX_ITEMS) this.spare.delete(key);
    }
    // a new viewBox lays out every element again (0.6-0.9 s at 8,000 nodes): only when the
    // graph outgrew the frame, which then grows with room to spare
    const base = { x: 0, y: 0, w: Math.max(layout.width, 1), h: Math.max(layout.height, 1) };
    const fit = fitBox(base);
    if (fit.x < this.frame.x || fit.y < this.frame.y || fit.x + fit.w > this.frame.x + this.frame.w
      || fit.y + fit.h > this.frame.y + this.frame.h) {
      this.frame = grownFrame(base);
      this.svg.setAttribute("viewBox", boxText(this.frame));
    }
    if (this.ring) this.ring.remove();
    this.ring = null;
    const moved = anchor && itemBounds(anchor.item);
    return moved && anchor.before ? { x: moved[0] - anchor.before[0], y: moved[1] - anchor.before[1] } : { x: NaN, y: NaN };
  }

  /**
   * The new layout is drawn: its frame, the edge pieces of each drawn edge (highlighted with
   * it), the labels' level of detail, the view: the first view, or, after an update when the
   * user had moved away from it, the same view moved with the box opened or closed (`moved`),
   * so it stays where it was on screen.
   * @param {{width: number, height: number}} layout
   * @param {string} rankdir
   * @param {Map<string, string[]>} parts
   * @param {Map<string, string>} pieceEdge
   * @param {{x: number, y: number}} [moved]
   */
  finish(layout, rankdir, parts, pieceEdge, moved) {
    this.base = { x: 0, y: 0, w: Math.max(layout.width, 1), h: Math.max(layout.height, 1) };
    this.parts = parts;
    this.pieceEdge = pieceEdge;
    this.rankdir = rankdir;
    if (!this.svg) return;
    if (moved && !this.firstView && Number.isFinite(moved.x) && Number.isFinite(moved.y)) {
      this.setBox({ ...this.box, x: this.box.x + moved.x, y: this.box.y + moved.y });
      return;
    }
    // the level of detail of the first view set with the swap (one restyle, not two)
    const first = initialBox(this.base, this.paneSize(), [], this.minScale, 10, rankdir, this.fitMinScale);
    this.labelsHidden = this.hidesLabels(first);
    this.svg.classList.toggle(LOD_CLASS, this.labelsHidden);
    this.showFirstView();
  }

  /** The first view of the current layout (./view.js initialBox) for the pane's size now. */
  showFirstView() {
    if (!this.svg) return;
    this.firstView = true;
    this.setBox(initialBox(this.base, this.paneSize(), this.items.values(), this.minScale, 10, this.rankdir, this.fitMinScale));
  }

  fit() {
    this.firstView = false;
    this.setBox(fitBox(this.base));
  }

  /**
   * Show `box` (SVG units). The SVG itself is not touched (its viewBox stays the frame): the
   * layer holding it is transformed. Outside a gesture the labels' level of detail follows and
   * `onView` is called; during one, both wait for its end.
   * @param {{x: number, y: number, w: number, h: number}} box
   */
  setBox(box) {
    this.box = box;
    this.applyView();
    if (this.gesture) return;
    this.updateDetail();
    if (this.handlers.onView) this.handlers.onView();
  }

  /** Write the layer's transform for the current box and pane. */
  applyView() {
    if (!this.layer) return;
    const t = viewTransform(this.frame, this.box, this.rect());
    this.zoomFactor = t.k;
    const text = transformText(t);
    if (this.layer.style.transform !== text) this.layer.style.transform = text;
    if (!this.gesture) this.sizeRing();
  }

  /** The focus ring's stroke (non-scaling in the SVG) undoes the layer's scale too: its
   * width and dashes are divided by it (./style.css `--etp-ring-k`). */
  sizeRing() {
    if (this.ring) this.ring.style.setProperty("--etp-ring-k", String(this.zoomFactor || 1));
  }

  /** Whether labels are too small to read when `box` is shown (./view.js LOD_LABEL_PX).
   * @param {{x: number, y: number, w: number, h: number}} box */
  hidesLabels(box) {
    if (!this.fontUnits) return false;
    const rect = this.rect();
    const s = Math.min(rect.width / box.w, rect.height / box.h);
    if (!(s > 0)) return false;
    // never hidden in a first view that fits the whole graph (its labels may be smaller at a
    // text scale below 1)
    const floor = Math.min(LOD_LABEL_PX, 0.9 * this.fontUnits * this.fitMinScale);
    return this.fontUnits * s < floor;
  }

  /** Hide or show the labels for the current view: one class on the SVG, switched only when
   * the answer changes. */
  updateDetail() {
    if (!this.svg) return;
    const hidden = this.hidesLabels(this.box);
    if (hidden === this.labelsHidden) return;
    this.labelsHidden = hidden;
    this.svg.classList.toggle(LOD_CLASS, hidden);
  }

  /** A wheel or drag gesture starts (or goes on): the layer becomes a composited layer that
   * each event only moves; the pane's position is read once. */
  startGesture() {
    if (this.gesture) return this.gesture;
    this.gesture = { rect: this.container.getBoundingClientRect(), timer: 0, events: 0, hold: /** @type {Animation | null} */ (null) };
    if (this.layer) {
      this.layer.style.willChange = "transform";
      this.gesture.hold = holdTransform(this.layer);
    }
    return this.gesture;
  }

  /** The gesture ended: the layer is painted again at its scale (sharp), the labels' level of
   * detail and the status (`onView`) follow the view. @param {boolean} [notify] */
  endGesture(notify = true) {
    const gesture = this.gesture;
    if (!gesture) return;
    clearTimeout(gesture.timer);
    this.gesture = null;
    if (gesture.hold) gesture.hold.cancel();
    if (this.layer) this.layer.style.willChange = "";
    this.sizeRing();
    if (!notify) return;
    this.updateDetail();
    if (this.handlers.onView) this.handlers.onView();
  }

  /** The part of the layout on screen (SVG units): the view box widened to the pane's shape
   * (the SVG keeps its aspect ratio, `meet`). */
  visibleBox() {
    const rect = this.rect();
    const s = Math.min(rect.width / this.box.w, rect.height / this.box.h) || 1;
    const w = rect.width / s, h = rect.height / s;
    return { x: this.box.x + (this.box.w - w) / 2, y: this.box.y + (this.box.h - h) / 2, w, h };
  }

  /** Whether part of the graph is off screen (the status line says so, with "Fit shows all"). */
  isPartial() {
    if (!this.svg) return false;
    const v = this.visibleBox(), b = this.base, eps = 0.5;
    return v.x > b.x + eps || v.y > b.y + eps || v.x + v.w < b.x + b.w - eps || v.y + v.h < b.y + b.h - eps;
  }

  /**
   * Draw the keyboard focus ring (a dashed box, ./style.css `.etp-focus-ring`) around a drawn
   * element, or remove it (null); pans the view when the element is off screen.
   * @param {string | null} dotId
   */
  focusRing(dotId) {
    const item = dotId ? this.items.get(dotId) : undefined;
    const b = item ? itemBounds(item) : null;
    if (!this.svg || !b) {
      if (this.ring) this.ring.remove();
      this.ring = null;
      return;
    }
    if (!this.ring || this.ring.ownerSVGElement !== this.svg) {
      if (this.ring) this.ring.remove();
      this.ring = /** @type {SVGRectElement} */ (document.createElementNS(SVG_NS, "rect"));
      this.ring.setAttribute("class", "etp-focus-ring");
      this.ring.setAttribute("data-focus-ring", "");
      this.svg.append(this.ring);
    }
    const pad = 5;
    this.ring.setAttribute("x", String(b[0] - pad)); this.ring.setAttribute("y", String(b[1] - pad));
    this.ring.setAttribute("width", String(b[2] - b[0] + 2 * pad)); this.ring.setAttribute("height", String(b[3] - b[1] + 2 * pad));
    this.ring.setAttribute("rx", "6");
    this.sizeRing();
    const v = this.visibleBox();
    if (b[0] < v.x || b[1] < v.y || b[2] > v.x + v.w || b[3] > v.y + v.h) {
      const cx = (b[0] + b[2]) / 2, cy = (b[1] + b[3]) / 2;
      this.firstView = false;
      this.setBox({ ...this.box, x: cx - this.box.w / 2, y: cy - this.box.h / 2 });
    }
  }

  /** The pane's size on screen (observed, else read), for the first view. */
  paneSize() {
    if (this.size && this.size.width > 0) return this.size;
    const r = this.container.getBoundingClientRect();
    return { width: r.width, height: r.height };
  }

  /** The SVG's untransformed size on screen (the pane's): the observed size, or (before the
   * first observation) a read. */
  rect() {
    if (this.size && this.size.width > 0) return this.size;
    const r = this.svg ? this.container.getBoundingClientRect() : { width: 1, height: 1 };
    return { width: r.width, height: r.height };
  }

  /** Zoom by `factor` (> 1 zooms in) around a point in client coordinates (default: centre). */
  zoom(factor, clientX, clientY) {
    if (!this.svg) return;
    // buttons: the observed size (no read); wheel: the pane's position read once a gesture
    const at = clientX == null || clientY == null ? { left: 0, top: 0 }
      : this.gesture ? this.gesture.rect : this.container.getBoundingClientRect();
    const rect = { ...this.rect(), left: at.left, top: at.top };
    const scale = Math.max(this.box.w / Math.max(rect.width, 1), this.box.h / Math.max(rect.height, 1));
    const fx = clientX == null ? 0.5 : (clientX - rect.left) / Math.max(rect.width, 1);
    const fy = clientY == null ? 0.5 : (clientY - rect.top) / Math.max(rect.height, 1);
    // point under the cursor in SVG coordinates (meet: content centred in the viewport)
    const cx = this.box.x + this.box.w / 2 + (fx - 0.5) * rect.width * scale;
    const cy = this.box.y + this.box.h / 2 + (fy - 0.5) * rect.height * scale;
    const w = this.box.w / factor;
    const h = this.box.h / factor;
    this.firstView = false;
    this.setBox({ x: cx - (cx - this.box.x) / factor, y: cy - (cy - this.box.y) / factor, w, h });
  }

  /** Pixels per SVG unit right now. */
  scale() {
    if (!this.svg) return 1;
    const rect = this.rect();
    return Math.min(rect.width / this.box.w, rect.height / this.box.h) || 1;
  }

  onWheel(/** @type {WheelEvent} */ event) {
    if (!this.svg) return;
    event.preventDefault();
    const gesture = this.startGesture();
    this.zoom(Math.exp(-event.deltaY * 0.0015), event.clientX, event.clientY);
    gesture.events += 1;
    clearTimeout(gesture.timer);
    gesture.timer = setTimeout(() => this.endAfterQuietFrame(gesture), GESTURE_END_MS);
  }

  /**
   * A wheel gesture ends GESTURE_END_MS after its last event and a frame without a new one:
   * Chromium hands wheel events to the page at the start of a frame, so after a frame slower
   * than GESTURE_END_MS (a loaded machine, a big graph's first raster) the timer fired before
   * the next event came, and the gesture ended between two events of one wheel: the graph was
   * painted again, and again as the next event started a new gesture (bench/README.md).
   * @param {{events: number, timer: any}} gesture
   */
  endAfterQuietFrame(gesture) {
    const seen = gesture.events;
    const check = () => {
      if (this.gesture !== gesture || gesture.events !== seen || (this.drag && this.moved)) return;
      this.endGesture();
    };
    // no fallback timer: when frames wait for a big graph's raster (over a second at 50,000
    // nodes) it ended gestures between events; a hidden page's gesture ends when it is shown
    requestAnimationFrame(check);
  }

  onPointerDown(/** @type {PointerEvent} */ event) {
    if (event.button !== 0) return;
    this.drag = { x: event.clientX, y: event.clientY, box: { ...this.box } };
    this.moved = false;
  }

  onPointerMove(/** @type {PointerEvent} */ event) {
    if (!this.drag) return;
    const dx = event.clientX - this.drag.x;
    const dy = event.clientY - this.drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 4) this.moved = true;
    if (!this.moved) return;
    this.startGesture();
    this.firstView = false;
    const s = this.scale();
    this.setBox({ ...this.drag.box, x: this.drag.box.x - dx / s, y: this.drag.box.y - dy / s });
  }

  onPointerUp() {
    const dragged = this.drag && this.moved;
    this.drag = null;
    if (dragged) this.endGesture();
  }

  onClick(/** @type {MouseEvent} */ event) {
    if (this.moved) { this.moved = false; return; }
    const target = /** @type {Element} */ (event.target);
    const hit = target && target.closest ? target.closest("g.node, g.edge, g.cluster") : null;
    // a piece of an edge inside a box stands for the edge it shows first
    if (hit && hit.id) this.handlers.onClick(this.pieceEdge.get(hit.id) || hit.id, event);
    // the pane itself is background too (around a zoomed-out or dragged graph)
    else if (target && (target === this.container || (target.closest && target.closest("svg")))) this.handlers.onBackground();
  }

  /**
   * Mark drawn elements (collapsed boxes whose records are on their way, ./parts.js) as
   * loading, or unmark them.
   * @param {string[]} dotIds
   * @param {boolean} loading
   */
  markLoading(dotIds, loading) {
    for (const id of dotIds) {
      const el = this.elements.get(id);
      if (!el) continue;
      el.classList.toggle("etp-part-loading", loading);
      el.toggleAttribute("data-part-loading", loading);
    }
  }

  /** @param {Map<string, string>} classes  DOT id -> highlight class (an edge's pieces inside
   * boxes with it) */
  highlight(classes) {
    for (const el of this.highlighted) el.classList.remove(...HIGHLIGHT_CLASSES);
    this.highlighted = [];
    if (this.svg) this.svg.classList.toggle("has-highlight", classes.size > 0);
    for (const [dotId, cls] of classes) {
      for (const id of [dotId, ...(this.parts.get(dotId) || [])]) {
        const el = this.elements.get(id);
        if (!el) continue;
        el.classList.add(cls);
        this.highlighted.push(el);
      }
    }
  }

  /**
   * Centre the view on the given DOT ids (zooming in if they would be tiny). Works on the
   * layout's own coordinates (the draw-list geometry kept by build()), so it reads nothing
   * from the DOM: no synchronous layout right after the highlight classes were written.
   */
  center(/** @type {string[]} */ dotIds) {
    if (!this.svg) return;
    let left = Infinity, top = Infinity, right = -Infinity, bottom = -Infinity;
    for (const id of dotIds) {
      const item = this.items.get(id);
      const b = item ? itemBounds(item) : null;
      if (!b) continue;
      left = Math.min(left, b[0]); top = Math.min(top, b[1]);
      right = Math.max(right, b[2]); bottom = Math.max(bottom, b[3]);
    }
    if (!(right >= left && bottom >= top)) return;
    const cx = (left + right) / 2;
    const cy = (top + bottom) / 2;
    // from the part on screen (the pane's shape), not the box: a fitted graph's box has the
    // graph's shape, and zooming into a long chain's (117,000 x 650 units) kept it: 1 px labels
    let { w, h } = this.visibleBox();
    const needW = (right - left) * 1.4;
    const needH = (bottom - top) * 1.4;
    const minZoomW = Math.min(this.base.w, Math.max(needW, 600));
    if (w > minZoomW * 1.5 && needW < w / 3 && needH < h / 3) { h = h * minZoomW / w; w = minZoomW; }
    if (needW > w || needH > h) { const f = Math.max(needW / w, needH / h); w *= f; h *= f; }
    this.firstView = false;
    this.setBox({ x: cx - w / 2, y: cy - h / 2, w, h });
  }

  dispose() {
    if (this.gesture) clearTimeout(this.gesture.timer);
    if (this.gesture && this.gesture.hold) this.gesture.hold.cancel();
    this.gesture = null;
    if (this.resizeObserver) this.resizeObserver.disconnect();
  }

  /** The current view as a standalone SVG document (highlights kept, in `colours`). */
  exportSvg(colours = {}) {
    if (!this.svg) return "";
    const clone = /** @type {SVGSVGElement} */ (this.svg.cloneNode(true));
    clone.setAttribute("xmlns", SVG_NS);
    clone.setAttribute("viewBox", `${this.box.x} ${this.box.y} ${this.box.w} ${this.box.h}`);
    clone.setAttribute("width", String(Math.round(this.box.w)));
    clone.setAttribute("height", String(Math.round(this.box.h)));
    const style = document.createElementNS(SVG_NS, "style");
    style.textContent = exportCss(colours);
    clone.classList.remove(LOD_CLASS);
    const ring = clone.querySelector(".etp-focus-ring");
    if (ring) ring.remove();
    clone.insertBefore(style, clone.firstChild);
    return new XMLSerializer().serializeToString(clone);
  }
}
