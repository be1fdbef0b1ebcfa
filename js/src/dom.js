// @ts-check
/**
 * A tiny element builder. Strings always become text nodes (never HTML), so names and params
 * from user code cannot inject markup.
 * @param {string} tag
 * @param {Record<string, any>} [attrs]  `class`, `title`, `data-*`, `style`, `on<event>` handlers
 * @param {...(Node | string | number | null | undefined | false)} children
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value == null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "style" && typeof value === "object") Object.assign(el.style, value);
    else el.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child == null || child === false) continue;
    el.append(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Replace the children of `el`. */
export function fill(/** @type {Element} */ el, /** @type {(Node|string)[]} */ children) {
  el.replaceChildren(...children);
}
