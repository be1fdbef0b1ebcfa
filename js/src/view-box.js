// @ts-check
/**
 * The geometry of the graph view (./view.js): the CSS transform that shows a box of the layout
 * in the pane, the padded box that fits a layout, and the first view of a layout.
 */
import { itemBounds } from "./draw.js";

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

/**
 * The layer's CSS transform, never "none", the identity included: a box that gains or loses a
 * transform becomes or stops being a containing block and stacking context, and Chromium lays
 * out everything inside it again (every SVG label: 0.4-1.2 s at 10,000 nodes, 2.3 s at 50,000,
 * in the first frame of a wheel gesture that started from the fitted view of a graph laid out
 * in one piece, whose transform is the identity). ./style.css gives the layer an identity
 * transform before its first view, for the same reason.
 * @param {{k: number, tx: number, ty: number}} t
 */
export function transformText(t) {
  return `translate(${t.tx}px, ${t.ty}px) scale(${t.k})`;
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

export function boxText(/** @type {{x: number, y: number, w: number, h: number}} */ box) {
  return `${box.x} ${box.y} ${box.w} ${box.h}`;
}

/**
 * A paused transform animation that changes nothing (an identity translate added to the
 * layer's own transform), held on the layer during a gesture, or null where the browser
 * cannot add one. With it, Chromium hands each new transform of the layer straight to the
 * compositor (a "direct" update: the layer has an active transform animation and the change
 * keeps it axis-aligned); without it every event re-layerizes the whole page (Blink's
 * PaintArtifactCompositor::Update, "Layerize" in a trace), which walks every SVG element's
 * hit-test rectangle (inside the pane's blocking wheel listener): 25-60 ms a frame at 10,000
 * nodes, the most of a frame (bench/README.md, "Pan and zoom").
 * @param {HTMLElement} layer
 * @returns {Animation | null}
 */
export function holdTransform(layer) {
  if (typeof layer.animate !== "function") return null;
  try {
    const still = { transform: "translate(0px, 0px)" };
    const hold = layer.animate([still, still], { duration: 1e9, composite: "add" });
    // where `composite` is not supported the identity would replace the view's transform
    const effect = /** @type {KeyframeEffect | null} */ (hold.effect);
    if (!effect || effect.composite !== "add") { hold.cancel(); return null; }
    hold.pause();
    return hold;
  } catch (e) {
    return null;
  }
}
