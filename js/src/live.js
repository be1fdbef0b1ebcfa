// @ts-check
/**
 * The live region (filled by the next issue: loss, trace magnitudes, heatmaps, fidelity).
 *
 * Contract: Python sends custom messages `{type: "live", name, shape, dtype: "float32",
 * meta?}` with one binary buffer (little-endian float32, C order); `LivePanels.update` draws
 * it. Panels are declared by the `live_panels` trait: `[{name, kind: "line"|"heatmap"|"bars",
 * title}]`. The region stays hidden until a panel is declared.
 */
import { h } from "./dom.js";

/** @typedef {import("./types.js").LivePanelSpec} LivePanelSpec */

export class LivePanels {
  constructor(/** @type {HTMLElement} */ container) {
    this.container = container;
    /** @type {Map<string, {spec: LivePanelSpec, canvas: HTMLCanvasElement, data: Float32Array | null, shape: number[]}>} */
    this.panels = new Map();
  }

  /** @param {LivePanelSpec[]} specs */
  setPanels(specs) {
    this.panels.clear();
    const children = (specs || []).map((spec) => {
      const canvas = /** @type {HTMLCanvasElement} */ (h("canvas", { width: 320, height: 120, "data-live": spec.name }));
      this.panels.set(spec.name, { spec, canvas, data: null, shape: [] });
      return h("div", { class: "etp-live-panel" }, h("div", { class: "etp-subtitle" }, spec.title || spec.name), canvas);
    });
    this.container.replaceChildren(...children);
    this.container.hidden = children.length === 0;
  }

  /**
   * @param {string} name
   * @param {Float32Array} data
   * @param {number[]} [shape]
   */
  update(name, data, shape) {
    const panel = this.panels.get(name);
    if (!panel) throw new Error(`live data for unknown panel '${name}'`);
    panel.data = data;
    panel.shape = shape || [data.length];
    this.draw(panel);
  }

  /** Minimal line drawing; the next issue brings heatmaps and axes. */
  draw(/** @type {{canvas: HTMLCanvasElement, data: Float32Array | null}} */ panel) {
    const ctx = panel.canvas.getContext("2d");
    const data = panel.data;
    if (!ctx || !data || !data.length) return;
    const { width, height } = panel.canvas;
    ctx.clearRect(0, 0, width, height);
    let lo = Infinity, hi = -Infinity;
    for (const v of data) if (Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    if (!Number.isFinite(lo)) return;
    const span = hi - lo || 1;
    ctx.strokeStyle = "#1f77b4";
    ctx.beginPath();
    data.forEach((v, i) => {
      const x = (i / Math.max(data.length - 1, 1)) * (width - 4) + 2;
      const y = height - 2 - ((v - lo) / span) * (height - 4);
      if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
    });
    ctx.stroke();
  }
}

/** Decode a live message's buffer into a Float32Array (copying when unaligned). */
export function decodeFloat32(/** @type {ArrayBuffer | DataView | ArrayBufferView} */ buffer) {
  if (buffer instanceof Float32Array) return buffer;
  if (ArrayBuffer.isView(buffer)) {
    const bytes = new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
    return new Float32Array(bytes.slice().buffer);
  }
  return new Float32Array(buffer);
}
