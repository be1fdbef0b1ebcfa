// @ts-check
/**
 * Light and dark themes. The colours come from the view model's palette (etp_viz/view/palette.py
 * `palette_json()`: every colour by name, the dark theme's as `dark.<name>`); the page follows
 * JupyterLab's theme (`body[data-jp-theme-light="false"]` in a dark theme) unless the `theme`
 * option names one. The page's own colours (panels, chips, highlights) are CSS variables
 * `--etp-c-<name>` set here from the same palette, so a colour is defined once.
 */
import { COLORS } from "./graph.js";

/**
 * The colours of one theme, by name.
 * @param {Record<string, string>} palette  a view model's palette (light names, `dark.<name>`)
 * @param {boolean} dark
 * @returns {Record<string, string>}
 */
export function themeColours(palette, dark) {
  /** @type {Record<string, string>} */
  const out = {};
  for (const [name, colour] of Object.entries({ ...COLORS, ...palette })) if (!name.startsWith("dark.")) out[name] = colour;
  if (dark) for (const [name, colour] of Object.entries(palette)) if (name.startsWith("dark.")) out[name.slice(5)] = colour;
  return out;
}

/**
 * light hex -> this theme's hex (one light colour maps to one dark colour: checked in
 * tests/view/test_palette_cvd.py), for legend swatches, whose entries carry light colours.
 * @param {Record<string, string>} palette
 * @param {boolean} dark
 * @returns {(colour: string | null | undefined) => string | null | undefined}
 */
export function themeHex(palette, dark) {
  if (!dark) return (c) => c;
  const light = themeColours(palette, false);
  const themed = themeColours(palette, true);
  const map = new Map(Object.keys(light).map((name) => [light[name].toLowerCase(), themed[name]]));
  return (c) => (c ? map.get(c.toLowerCase()) || c : c);
}

/**
 * Whether the page is dark: the `theme` option ("light" | "dark"), or with "auto" (default)
 * JupyterLab's theme attribute on <body> (VS Code's `vscode-dark` class too).
 * @param {string | undefined} option
 */
export function isDark(option) {
  if (option === "dark") return true;
  if (option === "light" || typeof document === "undefined" || !document.body) return false;
  const body = document.body;
  return body.getAttribute("data-jp-theme-light") === "false" || body.classList.contains("vscode-dark");
}

/**
 * Call `onChange` when JupyterLab switches theme (its attribute on <body> changes).
 * @param {() => void} onChange
 * @returns {() => void}  stops watching
 */
export function watchPageTheme(onChange) {
  if (typeof MutationObserver !== "function" || typeof document === "undefined" || !document.body) return () => {};
  const observer = new MutationObserver(onChange);
  observer.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light", "class"] });
  return () => observer.disconnect();
}

/**
 * Set the theme's colours as CSS variables `--etp-c-<name>` on `root` (chips, highlights,
 * the focus ring, backgrounds read them in ./style.css).
 * @param {HTMLElement} root
 * @param {Record<string, string>} colours
 */
export function setColourVariables(root, colours) {
  for (const [name, colour] of Object.entries(colours)) root.style.setProperty(`--etp-c-${name}`, colour);
}
