// @ts-check
/**
 * The SVG graph view: builds the SVG from a layout draw list in short slices, pan (drag), zoom (wheel, buttons),
 * fit, highlight by CSS class, centre on an element, the keyboard focus ring, export of the current view.
 *
 * Pan and zoom never touch the SVG: its `viewBox` is written once, when it is built (the
 * `frame`: the whole graph), and the view (`box`, in SVG units) is shown by a CSS transform
 * on the `<div>` that holds the SVG (`viewTransform`). A new `viewBox` makes Chromium lay out every
 * element again (below 10 fps at ~1,000 nodes); a transform on an HTML box does not. During a
 * wheel or drag gesture the box is a composited layer (`will-change: transform`): each event
 * only moves that layer (no style, layout or paint of the graph); when the gesture ends the
 * hint is dropped and the graph is painted once, sharp, at its new scale. Labels smaller than
 * LOD_LABEL_PX on screen are hidden (one class on the SVG, ./style.css), switched when a
 * gesture ends or the view jumps (fit, buttons, keys, centre), never per event.
 */

const SVG_NS = "http://www.w3.org/2000/svg";
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

/**
 * Resolve after the next frame (or after 100 ms where frames are not running: hidden tab), to
 * true when a frame ran.
 * @returns {Promise<boolean>}
 */
export function afterFrame() {
  return new Promise((resolve) => {
    let done = false;
    const finish = (/** @type {boolean} */ framed) => { if (!done) { done = true; resolve(framed); } };
    requestAnimationFrame(() => setTimeout(() => finish(true), 0));
    setTimeout(() => finish(false), 100);
  });
}

/** Work longer than this without a rendered frame waits for one (see yieldToEventLoop). */
export const FRAME_GAP_MS = 16;
const frames = { last: -1, watching: false, stalled: false };

/** Note the time of the next animation frame (one request at a time). */
function watchFrames() {
  if (frames.watching) return;
  frames.watching = true;
  requestAnimationFrame(() => {
    frames.watching = false;
    frames.stalled = false;
    frames.last = performance.now();
  });
}

/**
 * Resolve in a new task as soon as possible (no 4 ms timer clamp): lets input in between
 * while sliced work (index, panel rows) goes on. `scheduler.yield()` continuations run before
 * rendering, so back-to-back slices would hold a frame back for up to ~100 ms: when no frame
 * has run for FRAME_GAP_MS, this waits for one instead (not where frames are not running).
 */
export async function yieldToEventLoop() {
  const now = performance.now();
  if (frames.last < 0) frames.last = now;
  watchFrames();
  if (!frames.stalled && now - frames.last > FRAME_GAP_MS) {
    frames.stalled = !(await afterFrame());
    return;
  }
  const scheduler = /** @type {any} */ (globalThis).scheduler;
  if (scheduler && typeof scheduler.yield === "function") return scheduler.yield();
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => { channel.port1.close(); resolve(undefined); };
    channel.port2.postMessage(null);
  });
}

/**
 * One <g> (node, edge or cluster) from a draw-list item, shaped like Graphviz's own SVG
 * (`g.node#n3 > title, polygon|path|ellipse, text`) so CSS highlight rules apply.
 * @param {import("./xdot.js").Item} item
 * @param {(dotId: string) => string} tooltip
 */
export function buildItem(item, tooltip) {
  const g = document.createElementNS(SVG_NS, "g");
  g.setAttribute("id", item.id);
  g.setAttribute("class", item.k);
  const title = document.createElementNS(SVG_NS, "title");
  title.textContent = tooltip(item.id);
  g.append(title);
  if (item.k === "node") {
    // keyboard and screen readers (./keyboard.js): each node is a button named by its
    // tooltip's first line (what it is, in plain words)
    g.setAttribute("role", "button");
    g.setAttribute("aria-label", (title.textContent || item.id).split("\n")[0]);
  }
  for (const s of item.s) {
    const el = document.createElementNS(SVG_NS, s.e);
    if (s.e === "polygon") el.setAttribute("points", s.p || "");
    else if (s.e === "path") el.setAttribute("d", s.d || "");
    else if (s.c) {
      el.setAttribute("cx", String(s.c[0])); el.setAttribute("cy", String(s.c[1]));
      el.setAttribute("rx", String(s.c[2])); el.setAttribute("ry", String(s.c[3]));
    }
    el.setAttribute("fill", s.f || "none");
    el.setAttribute("stroke", s.s);
    if (s.w) el.setAttribute("stroke-width", String(s.w));
    if (s.a) el.setAttribute("stroke-dasharray", s.a);
    g.append(el);
  }
  for (const t of item.t) {
    const el = document.createElementNS(SVG_NS, "text");
    el.setAttribute("x", String(t.x));
    el.setAttribute("y", String(t.y));
    el.setAttribute("text-anchor", t.a);
    el.setAttribute("font-family", `${t.f},sans-serif`);
    el.setAttribute("font-size", String(t.z));
    if (t.c !== "#000000") el.setAttribute("fill", t.c);
    el.textContent = t.v;
    g.append(el);
  }
  return g;
}

/** Labels smaller than this on screen (px) are hidden: the level of detail of a zoomed-out
 * graph (the class `LOD_CLASS` on the SVG). Never above the first view's own label size. */
export const LOD_LABEL_PX = 6;
/** Class on the SVG while its labels are hidden (./style.css). */
export const LOD_CLASS = "etp-lod-far";
/** A wheel gesture ends this long after its last event (ms). */
export const GESTURE_END_MS = 150;

/**
 * The CSS transform (translate, then scale about the top left corner) that shows `box` in a
 * pane of `size` px when the SVG's own `viewBox` is `frame`: both fitted into the pane
 * (`xMidYMid meet`: scaled to fit, centred), so a point p of the layout drawn at
 * q0 = (p - centre(frame)) * s0 + pane / 2 must come to q = (p - centre(box)) * s + pane / 2,
 * that is q = k * q0 + t with k = s / s0 and t = pane / 2 * (1 - k) + (centre(frame) - centre(box)) * s.
 * @param {{x: number, y: number, w: number, h: number}} frame
 * @param {{x: number, y: number, w: number, h: number}} box
 * @param {{width: number, height: number}} size
 * @returns {{k: number, tx: number, ty: number}}
 */
export function viewTransform(frame, box, size) {
  if (!(size.width > 0 && size.height > 0)) return { k: 1, tx: 0, ty: 0 };
  const s0 = Math.min(size.width / frame.w, size.height / frame.h);
  const s = Math.min(size.width / box.w, size.height / box.h);
  const k = s / s0;
  return {
    k,
    tx: (size.width / 2) * (1 - k) + (frame.x + frame.w / 2 - box.x - box.w / 2) * s,
    ty: (size.height / 2) * (1 - k) + (frame.y + frame.h / 2 - box.y - box.h / 2) * s,
  };
}

/** @param {{k: number, tx: number, ty: number}} t */
function transformText(t) {
  return t.k === 1 && t.tx === 0 && t.ty === 0 ? "" : `translate(${t.tx}px, ${t.ty}px) scale(${t.k})`;
}

/** The padded box that fits a layout. @param {{x: number, y: number, w: number, h: number}} base */
export function fitBox(base, pad = 10) {
  return { x: base.x - pad, y: base.y - pad, w: base.w + 2 * pad, h: base.h + 2 * pad };
}

/** Pixels per SVG unit below which the first view stops fitting the whole graph (a point is
 * a pixel at 1: Graphviz's 14 pt labels read as ~8 px text at 0.6). The explorer passes its
 * own (./graph.js firstViewScales: they follow the text scale). */
export const MIN_FIT_SCALE = 0.6;

/** Smallest on-screen label (px) of a first view that fits the whole graph, at text scale 1. */
export const FIT_LABEL_PX = 7;
/** On-screen label size (px) of a first view that shows a part of a graph too big to fit, at
 * text scale 1 (what the explorer used before text scales). */
export const WINDOW_LABEL_PX = 10.5;

/**
 * The first view's label sizes in px on screen at text scale `scale`: the whole graph when its
 * labels come out at `fit` px or more, else a window on the graph's start at `window` px. At
 * scale 1 (a desk) the overview wins: the graph is fitted down to 7 px labels (zoom in with
 * the wheel or +). Above 1 (a projector) the floor rises by 19 px per unit of scale, to
 * 16.5 px at 1.5: labels readable from the back of a room, the rest a drag (or Fit) away.
 * @param {number} scale
 * @returns {{fit: number, window: number}}
 */
export function firstViewLabelPx(scale) {
  const s = Number.isFinite(scale) && scale > 0 ? scale : 1;
  const fit = s <= 1 ? FIT_LABEL_PX * s : FIT_LABEL_PX + 19 * (s - 1);
  return { fit, window: Math.max(fit, WINDOW_LABEL_PX * s) };
}

/**
 * The first view of a layout: the whole graph when it fits the pane at `fitMinScale` pixels
 * per SVG unit or more (default `minScale`); otherwise a pane-sized window at `minScale`
 * along the start of the graph (its top, or its left side for a left-to-right layout: where
 * its inputs and first ETP ops are), centred across on the nodes drawn there.
 * @param {{x: number, y: number, w: number, h: number}} base
 * @param {{width: number, height: number}} rect  the pane's size in pixels
 * @param {Iterable<import("./xdot.js").Item>} [items]
 * @param {string} [rankdir]  "TB" (default) or "LR"
 * @param {number} [fitMinScale]
 */
export function initialBox(base, rect, items = [], minScale = MIN_FIT_SCALE, pad = 10, rankdir = "TB", fitMinScale = minScale) {
  const fit = fitBox(base, pad);
  if (!(rect.width > 0 && rect.height > 0)) return fit;
  if (Math.min(rect.width / fit.w, rect.height / fit.h) >= fitMinScale) return fit;
  const w = Math.min(fit.w, rect.width / minScale);
  const h = Math.min(fit.h, rect.height / minScale);
  const across = rankdir === "LR" ? 1 : 0; // 0: centre x on the top nodes; 1: centre y on the left ones
  let sum = 0, count = 0;
  for (const item of items) {
    const b = item.k === "node" ? itemBounds(item) : null;
    if (!b) continue;
    const near = across ? b[0] < fit.x + w / 2 : b[1] < fit.y + h / 2;
    if (near) { sum += across ? (b[1] + b[3]) / 2 : (b[0] + b[2]) / 2; count += 1; }
  }
  if (across) {
    const centre = count ? sum / count : fit.y + fit.h / 2;
    return { x: fit.x, y: Math.max(fit.y, Math.min(centre - h / 2, fit.y + fit.h - h)), w, h };
  }
  const centre = count ? sum / count : fit.x + fit.w / 2;
  const x = Math.max(fit.x, Math.min(centre - w / 2, fit.x + fit.w - w));
  return { x, y: fit.y, w, h };
}

function boxText(/** @type {{x: number, y: number, w: number, h: number}} */ box) {
  return `${box.x} ${box.y} ${box.w} ${box.h}`;
}

/**
 * Bounds `[left, top, right, bottom]` of a draw-list item in SVG user units, from its shapes
 * (polygon points, path data, ellipses) and text anchors; null when it has none.
 * @param {import("./xdot.js").Item} item
 * @returns {[number, number, number, number] | null}
 */
export function itemBounds(item) {
  let left = Infinity, top = Infinity, right = -Infinity, bottom = -Infinity;
  const add = (/** @type {number} */ x, /** @type {number} */ y) => {
    if (!Number.isFinite(x) || !Number.isFinite(y)) return;
    if (x < left) left = x; if (x > right) right = x;
    if (y < top) top = y; if (y > bottom) bottom = y;
  };
  for (const s of item.s || []) {
    if (s.c) { add(s.c[0] - s.c[2], s.c[1] - s.c[3]); add(s.c[0] + s.c[2], s.c[1] + s.c[3]); continue; }
    const numbers = (s.p || s.d || "").match(/-?\d*\.?\d+(?:e[-+]?\d+)?/gi) || [];
    for (let i = 0; i + 1 < numbers.length; i += 2) add(Number(numbers[i]), Number(numbers[i + 1]));
  }
  for (const t of item.t || []) add(t.x, t.y);
  return right >= left ? [left, top, right, bottom] : null;
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
    /** @type {{rect: DOMRect, timer: any} | null} a wheel or drag gesture in progress */
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
    /** @type {Map<string, import("./xdot.js").Item>} draw-list item of each element (its geometry) */
    this.items = new Map();
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
   * Elements are created directly (no markup parsing); user text only ever goes through
   * `textContent`. Resolves to false when `isCurrent()` turns false (a newer layout started).
   * @param {{width: number, height: number, count: number, chunks: string[]}} layout
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
    const svg = /** @type {SVGSVGElement} */ (document.createElementNS(SVG_NS, "svg"));
    svg.setAttribute("class", "etp-graph etp-building");
    // the SVG's only viewBox (the frame): the whole graph. Views are its zoom (k >= 1) but for
    // zooming out past Fit, so a gesture's composited layer holds the part on screen and a
    // margin around it (Chromium paints a layer's content within an expanded cull rect in
    // its own pixels: with the frame a window on a huge graph, zoomed out, every frame of a
    // gesture painted and layerized the graph again, 9 fps at 10,000 nodes)
    const base = { x: 0, y: 0, w: Math.max(layout.width, 1), h: Math.max(layout.height, 1) };
    const frame = fitBox(base);
    const first = initialBox(base, this.paneSize(), [], this.minScale, 10, rankdir, this.fitMinScale);
    svg.setAttribute("viewBox", boxText(frame));
    svg.setAttribute("preserveAspectRatio", "xMidYMid meet");
    const root = document.createElementNS(SVG_NS, "g");
    root.setAttribute("class", "graph");
    svg.append(root);
    const layer = /** @type {HTMLDivElement} */ (document.createElement("div"));
    layer.className = "etp-graph-layer";
    layer.append(svg);
    if (this.layer && this.layer.parentNode === this.container) this.container.insertBefore(layer, this.layer);
    else this.container.append(layer);
    let fontUnits = 0;
    /** @type {Map<string, Element>} */
    const elements = new Map();
    /** @type {Map<string, import("./xdot.js").Item>} */
    const drawn = new Map();
    // each slice in its own <g>: the next frame lays out that group and the root's bounds
    // over one group per slice, not over every element built so far
    const newPart = () => root.appendChild(document.createElementNS(SVG_NS, "g"));
    let part = newPart();
    let sliceStart = performance.now();
    for (const chunk of layout.chunks) {
      const items = JSON.parse(chunk);
      for (const item of items) {
        if (!fontUnits && item.t.length) fontUnits = item.t[0].z;
        const g = buildItem(item, tooltip);
        part.append(g);
        elements.set(item.id, g);
        drawn.set(item.id, item);
        if (performance.now() - sliceStart > budget) {
          await afterFrame();
          if (!isCurrent()) { layer.remove(); return false; }
          part = newPart();
          sliceStart = performance.now();
        }
      }
    }
    if (!isCurrent()) { layer.remove(); return false; }
    this.endGesture(false);
    this.base = base;
    this.frame = frame;
    this.elements = elements;
    this.items = drawn;
    this.fontUnits = fontUnits;
    if (this.layer) this.layer.remove();
    // the level of detail of the first view set with the swap (one restyle, not two)
    this.labelsHidden = this.hidesLabels(first);
    svg.classList.toggle(LOD_CLASS, this.labelsHidden);
    svg.classList.remove("etp-building");
    this.svg = svg;
    this.layer = layer;
    this.highlighted = [];
    this.rankdir = rankdir;
    this.ring = null;
    this.showFirstView();
    return true;
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
    this.gesture = { rect: this.container.getBoundingClientRect(), timer: 0 };
    if (this.layer) this.layer.style.willChange = "transform";
    return this.gesture;
  }

  /** The gesture ended: the layer is painted again at its scale (sharp), the labels' level of
   * detail and the status (`onView`) follow the view. @param {boolean} [notify] */
  endGesture(notify = true) {
    const gesture = this.gesture;
    if (!gesture) return;
    clearTimeout(gesture.timer);
    this.gesture = null;
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
    clearTimeout(gesture.timer);
    gesture.timer = setTimeout(() => { if (!(this.drag && this.moved)) this.endGesture(); }, GESTURE_END_MS);
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
    if (hit && hit.id) this.handlers.onClick(hit.id, event);
    // the pane itself is background too (around a zoomed-out or dragged graph)
    else if (target && (target === this.container || (target.closest && target.closest("svg")))) this.handlers.onBackground();
  }

  /** @param {Map<string, string>} classes  DOT id -> highlight class */
  highlight(classes) {
    for (const el of this.highlighted) el.classList.remove(...HIGHLIGHT_CLASSES);
    this.highlighted = [];
    if (this.svg) this.svg.classList.toggle("has-highlight", classes.size > 0);
    for (const [dotId, cls] of classes) {
      const el = this.elements.get(dotId);
      if (!el) continue;
      el.classList.add(cls);
      this.highlighted.push(el);
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
    let { w, h } = this.box;
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
