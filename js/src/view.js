// @ts-check
/**
 * The SVG graph view: mounts a Graphviz SVG (sanitised), pan (drag), zoom (wheel, buttons),
 * fit, highlight by CSS class, centre on an element, export of the current view.
 */

const SVG_NS = "http://www.w3.org/2000/svg";
const HIGHLIGHT_CLASSES = ["hl-selected", "hl-path", "hl-boundary", "hl-cluster", "hl-transition", "hl-slice", "hl-search"];

/** CSS embedded into exported SVGs so highlights survive outside the widget. */
export const EXPORT_CSS = `
.hl-selected > polygon, .hl-selected > ellipse, .hl-selected > path { stroke: #000; stroke-width: 3px; }
.hl-path > polygon, .hl-path > ellipse { stroke: #e8710a; stroke-width: 3px; }
.hl-path > path { stroke: #e8710a; stroke-width: 3.5px; }
.hl-boundary > polygon, .hl-boundary > ellipse { stroke: #d62728; stroke-width: 4px; fill: #ffd6d6; }
.hl-cluster > polygon, .hl-cluster > path { stroke: #5b8fd0; stroke-width: 4px; }
.hl-transition > polygon, .hl-transition > ellipse, .hl-transition > path { stroke: #8e44ad; stroke-width: 3px; }
.hl-slice > polygon, .hl-slice > ellipse, .hl-slice > path { stroke: #e8710a; stroke-width: 3px; }
.hl-search > polygon, .hl-search > ellipse { stroke: #ff00aa; stroke-width: 3px; }
`;

/** Remove anything executable or linking out from a parsed SVG document (defence in depth:
 * Graphviz already escapes labels). */
export function sanitizeSvg(/** @type {Element} */ root) {
  for (const el of root.querySelectorAll("script, foreignObject, iframe, image, use")) el.remove();
  for (const el of [root, ...root.querySelectorAll("*")]) {
    for (const attr of [...el.attributes]) {
      const name = attr.name.toLowerCase();
      if (name.startsWith("on") || ((name === "href" || name === "xlink:href") && !attr.value.startsWith("#"))) {
        el.removeAttribute(attr.name);
      }
    }
  }
}

export class GraphView {
  /**
   * @param {HTMLElement} container
   * @param {{onClick: (dotId: string, event: MouseEvent) => void, onBackground: () => void}} handlers
   */
  constructor(container, handlers) {
    this.container = container;
    this.handlers = handlers;
    /** @type {SVGSVGElement | null} */
    this.svg = null;
    this.base = { x: 0, y: 0, w: 1, h: 1 };
    this.box = { x: 0, y: 0, w: 1, h: 1 };
    /** @type {Map<string, Element>} */
    this.elements = new Map();
    /** @type {Element[]} */
    this.highlighted = [];
    this.drag = null;
    this.moved = false;
    container.addEventListener("wheel", (e) => this.onWheel(e), { passive: false });
    container.addEventListener("pointerdown", (e) => this.onPointerDown(e));
    container.addEventListener("pointermove", (e) => this.onPointerMove(e));
    container.addEventListener("pointerup", () => { this.drag = null; });
    container.addEventListener("pointerleave", () => { this.drag = null; });
    container.addEventListener("click", (e) => this.onClick(e));
  }

  /**
   * Mount an SVG produced by Graphviz.
   * @param {string} text
   * @param {(dotId: string) => string} tooltip  plain text for each element's <title>
   */
  setSvg(text, tooltip) {
    this.mount(this.parse(text), tooltip);
    this.setTitles(tooltip, 0, Infinity);
  }

  /** Parse (and sanitise) Graphviz SVG text into an element owned by this document. */
  parse(/** @type {string} */ text) {
    const doc = new DOMParser().parseFromString(text, "image/svg+xml");
    const parsed = doc.documentElement;
    if (!parsed || parsed.nodeName !== "svg") throw new Error("layout produced no SVG");
    sanitizeSvg(parsed);
    return /** @type {SVGSVGElement} */ (document.adoptNode(parsed));
  }

  /**
   * Mount a parsed SVG: parse, mount and titles are separate steps so the caller can yield
   * to the event loop between them (no single long task on large graphs).
   * @param {SVGSVGElement} svg
   * @param {(dotId: string) => string} tooltip
   */
  mount(svg, tooltip) {
    const [x, y, w, h] = (svg.getAttribute("viewBox") || "0 0 100 100").split(/[ ,]+/).map(Number);
    this.base = { x, y, w: Math.max(w, 1), h: Math.max(h, 1) };
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    svg.setAttribute("preserveAspectRatio", "xMidYMid meet");
    svg.classList.add("etp-graph");
    this.elements.clear();
    for (const el of svg.querySelectorAll("g.node, g.edge, g.cluster")) this.elements.set(el.id, el);
    this.tooltip = tooltip;
    if (this.svg) this.svg.replaceWith(svg);
    else this.container.append(svg);
    this.svg = svg;
    this.highlighted = [];
    this.fit();
  }

  /** Replace Graphviz's <title>s (DOT names) by tooltips for elements [start, end). */
  setTitles(/** @type {(dotId: string) => string} */ tooltip, start = 0, end = Infinity) {
    let i = 0;
    for (const [id, el] of this.elements) {
      if (i >= end) break;
      if (i++ < start) continue;
      const title = el.firstElementChild;
      if (title && title.nodeName === "title") title.textContent = tooltip(id);
    }
    return i;
  }

  fit() {
    const pad = 10;
    this.setBox({ x: this.base.x - pad, y: this.base.y - pad, w: this.base.w + 2 * pad, h: this.base.h + 2 * pad });
  }

  /** @param {{x: number, y: number, w: number, h: number}} box */
  setBox(box) {
    this.box = box;
    if (this.svg) this.svg.setAttribute("viewBox", `${box.x} ${box.y} ${box.w} ${box.h}`);
  }

  /** Zoom by `factor` (> 1 zooms in) around a point in client coordinates (default: centre). */
  zoom(factor, clientX, clientY) {
    if (!this.svg) return;
    const rect = this.svg.getBoundingClientRect();
    const scale = Math.max(this.box.w / Math.max(rect.width, 1), this.box.h / Math.max(rect.height, 1));
    const fx = clientX == null ? 0.5 : (clientX - rect.left) / Math.max(rect.width, 1);
    const fy = clientY == null ? 0.5 : (clientY - rect.top) / Math.max(rect.height, 1);
    // point under the cursor in SVG coordinates (meet: content centred in the viewport)
    const cx = this.box.x + this.box.w / 2 + (fx - 0.5) * rect.width * scale;
    const cy = this.box.y + this.box.h / 2 + (fy - 0.5) * rect.height * scale;
    const w = this.box.w / factor;
    const h = this.box.h / factor;
    this.setBox({ x: cx - (cx - this.box.x) / factor, y: cy - (cy - this.box.y) / factor, w, h });
  }

  /** Pixels per SVG unit right now. */
  scale() {
    if (!this.svg) return 1;
    const rect = this.svg.getBoundingClientRect();
    return Math.min(rect.width / this.box.w, rect.height / this.box.h) || 1;
  }

  onWheel(/** @type {WheelEvent} */ event) {
    if (!this.svg) return;
    event.preventDefault();
    this.zoom(Math.exp(-event.deltaY * 0.0015), event.clientX, event.clientY);
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
    const s = this.scale();
    this.setBox({ ...this.drag.box, x: this.drag.box.x - dx / s, y: this.drag.box.y - dy / s });
  }

  onClick(/** @type {MouseEvent} */ event) {
    if (this.moved) { this.moved = false; return; }
    const target = /** @type {Element} */ (event.target);
    const hit = target && target.closest ? target.closest("g.node, g.edge, g.cluster") : null;
    if (hit && hit.id) this.handlers.onClick(hit.id, event);
    else if (target && target.closest && target.closest("svg")) this.handlers.onBackground();
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

  /** Centre the view on the given DOT ids (zooming in if they would be tiny). */
  center(/** @type {string[]} */ dotIds) {
    if (!this.svg) return;
    const els = dotIds.map((id) => this.elements.get(id)).filter(Boolean);
    if (!els.length) return;
    const rect = this.svg.getBoundingClientRect();
    const s = this.scale();
    let left = Infinity, top = Infinity, right = -Infinity, bottom = -Infinity;
    for (const el of els) {
      const r = /** @type {Element} */ (el).getBoundingClientRect();
      left = Math.min(left, r.left); top = Math.min(top, r.top);
      right = Math.max(right, r.right); bottom = Math.max(bottom, r.bottom);
    }
    // client -> svg coordinates with the current box (content centred, "meet")
    const toSvgX = (/** @type {number} */ px) => this.box.x + this.box.w / 2 + (px - rect.left - rect.width / 2) / s;
    const toSvgY = (/** @type {number} */ py) => this.box.y + this.box.h / 2 + (py - rect.top - rect.height / 2) / s;
    const cx = (toSvgX(left) + toSvgX(right)) / 2;
    const cy = (toSvgY(top) + toSvgY(bottom)) / 2;
    let { w, h } = this.box;
    const needW = (right - left) / s * 1.4;
    const needH = (bottom - top) / s * 1.4;
    const minZoomW = Math.min(this.base.w, Math.max(needW, 600));
    if (w > minZoomW * 1.5 && needW < w / 3 && needH < h / 3) { h = h * minZoomW / w; w = minZoomW; }
    if (needW > w || needH > h) { const f = Math.max(needW / w, needH / h); w *= f; h *= f; }
    this.setBox({ x: cx - w / 2, y: cy - h / 2, w, h });
  }

  /** The current view as a standalone SVG document (highlights kept). */
  exportSvg() {
    if (!this.svg) return "";
    const clone = /** @type {SVGSVGElement} */ (this.svg.cloneNode(true));
    clone.setAttribute("xmlns", SVG_NS);
    clone.setAttribute("viewBox", `${this.box.x} ${this.box.y} ${this.box.w} ${this.box.h}`);
    clone.setAttribute("width", String(Math.round(this.box.w)));
    clone.setAttribute("height", String(Math.round(this.box.h)));
    const style = document.createElementNS(SVG_NS, "style");
    style.textContent = EXPORT_CSS;
    clone.insertBefore(style, clone.firstChild);
    return new XMLSerializer().serializeToString(clone);
  }
}
