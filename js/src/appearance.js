// @ts-check
/**
 * How the page looks: its text scale (the `scale` trait, etp_viz/explorer/widget.py; the
 * toolbar's A- / A+) and its theme (./theme.js). Every text size in ./style.css is a multiple
 * of `--etp-scale`; the graph's labels are laid out at `NODE_FONT_SIZE x scale` points and the
 * first view keeps them at least ./view.js `firstViewLabelPx(scale)` px on screen; the live
 * panels' canvases are zoomed by the same factor (./style.css `.etp-live-grid`).
 */
import { h } from "./dom.js";
import { NODE_FONT_SIZE } from "./graph.js";
import { firstViewLabelPx } from "./view.js";
import { isDark, themeColours, themeHex, setColourVariables } from "./theme.js";

/** Steps of the A- / A+ buttons. */
export const SCALE_STEPS = [0.75, 0.9, 1, 1.25, 1.5, 1.75, 2, 2.5, 3];
/** The range of the `scale` trait (etp_viz/explorer/widget.py SCALE_RANGE). */
export const SCALE_MIN = 0.5, SCALE_MAX = 3;

/** A valid text scale from a trait value (1 when it is not a number). @param {any} value */
export function clampScale(value) {
  const s = Number(value);
  return Number.isFinite(s) && s > 0 ? Math.min(SCALE_MAX, Math.max(SCALE_MIN, s)) : 1;
}

/**
 * The next step of the A- (`direction` -1) / A+ (+1) buttons from `scale`.
 * @param {number} scale
 * @param {1 | -1} direction
 */
export function stepScale(scale, direction) {
  const steps = direction > 0 ? SCALE_STEPS : [...SCALE_STEPS].reverse();
  const next = steps.find((s) => (direction > 0 ? s > scale + 1e-9 : s < scale - 1e-9));
  return next ?? scale;
}

/**
 * The graph's font size (SVG units) and the first view's pixels per SVG unit at `scale`.
 * @param {number} scale
 */
export function graphScales(scale) {
  const font = NODE_FONT_SIZE * scale;
  const px = firstViewLabelPx(scale);
  return { font, fitMinScale: px.fit / font, minScale: px.window / font };
}

export class Appearance {
  /**
   * @param {HTMLElement} root  the explorer's root element
   */
  constructor(root) {
    this.root = root;
    this.scale = 1;
    this.dark = false;
    /** @type {Record<string, string>} */
    this.palette = {};
  }

  /** Apply a text scale (the CSS variable; the caller relays out the graph). @param {any} value */
  setScale(value) {
    this.scale = clampScale(value);
    this.root.style.setProperty("--etp-scale", String(this.scale));
    this.root.setAttribute("data-scale", String(this.scale));
    return this.scale;
  }

  /**
   * Apply the theme (the `theme` option, or JupyterLab's) and the palette's colours; returns
   * the current theme's colours by name.
   * @param {string | undefined} option
   * @param {Record<string, string>} palette
   */
  setTheme(option, palette) {
    this.dark = isDark(option);
    this.palette = palette;
    this.root.classList.toggle("etp-dark", this.dark);
    this.root.setAttribute("data-theme", this.dark ? "dark" : "light");
    this.root.toggleAttribute("data-theme-auto", option !== "light" && option !== "dark");
    const colours = themeColours(palette, this.dark);
    setColourVariables(this.root, colours);
    return colours;
  }

  /** light hex -> this theme's (legend swatches). */
  hex() {
    return themeHex(this.palette, this.dark);
  }
}

/**
 * The toolbar: title, search box, Fit / zoom / Collapse all / Export SVG, the text size (A- /
 * A+ and the current scale) and the status line; sets the app's `searchInput`, `titleEl`,
 * `statusEl` and `scaleEl`.
 * @param {any} app  the ExplorerApp (./index.js)
 */
export function buildToolbar(app) {
  app.searchInput = /** @type {HTMLInputElement} */ (h("input", { class: "etp-search", type: "search",
    placeholder: "search (regex): primitive, var, weight, state", "aria-label": "search" }));
  app.searchInput.addEventListener("input", () => app.guard(() => app.runSearch()));
  app.searchInput.addEventListener("keydown", (/** @type {KeyboardEvent} */ e) => { if (e.key === "Enter") app.guard(() => app.jumpToFirstResult()); });
  app.titleEl = h("span", { class: "etp-title" });
  app.statusEl = h("span", { class: "etp-status-text", "data-status": "" });
  app.scaleEl = h("span", { class: "etp-scale-value", "data-scale-value": "", "aria-live": "polite" });
  const button = (/** @type {string} */ label, /** @type {string} */ action, /** @type {() => void} */ fn, title = label) =>
    h("button", { class: "etp-button", "data-action": action, title, "aria-label": title, onclick: () => app.guard(fn) }, label);
  return h("div", { class: "etp-toolbar", role: "toolbar", "aria-label": "explorer" }, app.titleEl, app.searchInput,
    button("Fit", "fit", () => app.view.fit(), "Fit: show the whole graph"),
    button("+", "zoom-in", () => app.view.zoom(1.25), "zoom in"),
    button("−", "zoom-out", () => app.view.zoom(0.8), "zoom out"),
    button("Collapse all", "collapse-all", () => app.setExpanded([])),
    button("Export SVG", "export-svg", () => app.downloadSvg()),
    h("span", { class: "etp-text-size", role: "group", "aria-label": "text size" },
      button("A−", "text-smaller", () => app.setScale(-1), "smaller text"), app.scaleEl,
      button("A+", "text-larger", () => app.setScale(1), "larger text (a projector: 150 %)")),
    app.statusEl);
}
