// @ts-check
/** Escaping for every string that came from user code (paths, names, params). */

/** @param {unknown} value */
export function escapeHtml(value) {
  return String(value)
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}

/**
 * A DOT double-quoted string body. Backslashes are doubled so Graphviz's escString sequences
 * (\N, \G, \l, ...) cannot be smuggled in; newlines become the centred line break `\n`.
 * @param {unknown} value
 */
export function escapeDot(value) {
  return String(value)
    .replace(/\\/g, "\\\\")
    .replace(/"/g, '\\"')
    .replace(/\r?\n/g, "\\n")
    .replace(/[\u0000-\u001f\u007f]/g, " ");
}

/** Shorten long labels for the graph (the full text stays in tooltips and the inspector). */
export function truncate(text, max = 40) {
  const s = String(text);
  return s.length > max ? s.slice(0, max - 1) + "…" : s;
}
