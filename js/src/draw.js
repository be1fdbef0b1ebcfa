// @ts-check
/**
 * SVG elements from layout draw lists (./xdot.js): one `<g>` per node, edge or cluster, their
 * bounds, and the levels of a graph laid out level by level (./hierarchy.js), each drawn in a
 * group of its own so that a later layout that keeps the level keeps its elements (./view.js).
 */

import { afterFrame } from "./frames.js";

export const SVG_NS = "http://www.w3.org/2000/svg";

/**
 * @typedef {import("./xdot.js").Item & {o?: {x: number, y: number}, b?: [number, number, number, number] | null}} DrawnItem
 *   a draw-list item as drawn: `o`, the shift of its level since its elements were made
 *   (`DrawnLevel.shift`); `b`, its bounds where it was drawn (kept by `itemBounds`)
 */

/**
 * @typedef {object} DrawnLevel  a level's group in the SVG
 * @property {string} key  the level's key (./hierarchy.js)
 * @property {number} depth  its boxes' nesting depth (its group goes in that depth's group)
 * @property {SVGGElement} g
 * @property {DrawnItem[]} items
 * @property {Element[]} elements  each item's element
 * @property {{x: number, y: number}} shift  where the level is now, less where its elements
 *   were drawn (the group's transform; zero when drawn in place)
 * @property {{x: number, y: number}} at  where its elements were drawn
 */

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

/** Numbers of an "x,y x,y" or SVG path text. */
const PAIR = /(-?\d*\.?\d+(?:e[-+]?\d+)?),(-?\d*\.?\d+(?:e[-+]?\d+)?)/gi;
const round = (/** @type {number} */ v) => Math.round(v * 100) / 100;

/**
 * Move a draw-list item by (dx, dy) in place: a level's items are laid out from its own top
 * left and drawn where the level goes, so the elements hold the graph's coordinates.
 * @param {import("./xdot.js").Item} item
 * @param {number} dx
 * @param {number} dy
 */
export function shiftItem(item, dx, dy) {
  if (!dx && !dy) return item;
  const move = (/** @type {string} */ text) => text.replace(PAIR, (_, x, y) => `${round(Number(x) + dx)},${round(Number(y) + dy)}`);
  for (const s of item.s) {
    if (s.c) s.c = [round(s.c[0] + dx), round(s.c[1] + dy), s.c[2], s.c[3]];
    else if (s.p) s.p = move(s.p);
    else if (s.d) s.d = move(s.d);
  }
  for (const t of item.t) { t.x = round(t.x + dx); t.y = round(t.y + dy); }
  return item;
}

/**
 * Move a drawn level to (x, y) without touching its elements: a transform on its group by
 * the difference from where they were drawn (its items' `o`, read by `itemBounds`).
 * @param {DrawnLevel} level
 * @param {number} x
 * @param {number} y
 */
export function moveLevel(level, x, y) {
  const dx = round(x - level.at.x), dy = round(y - level.at.y);
  if (dx === level.shift.x && dy === level.shift.y) return;
  level.shift.x = dx;
  level.shift.y = dy;
  if (dx || dy) level.g.setAttribute("transform", `translate(${dx} ${dy})`);
  else level.g.removeAttribute("transform");
}

/**
 * Bounds `[left, top, right, bottom]` of a draw-list item in SVG user units, from its shapes
 * (polygon points, path data, ellipses) and text anchors, moved by its level's shift (`o`,
 * see `DrawnLevel`); null when it has none.
 * @param {import("./xdot.js").Item} item
 * @returns {[number, number, number, number] | null}
 */
export function itemBounds(item) {
  // drawn items keep their bounds (a first view or the keyboard reads every node's)
  const own = item.b !== undefined ? item.b : (item.b = shapeBounds(item));
  if (!own || !item.o || (!item.o.x && !item.o.y)) return own;
  const { x, y } = item.o;
  return [own[0] + x, own[1] + y, own[2] + x, own[3] + y];
}

/** @param {DrawnItem} item @returns {[number, number, number, number] | null} */
function shapeBounds(item) {
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

/**
 * Build the elements of one level into `g` (in slices: `run.budget` ms of work between
 * frames), drawn at the level's place; false when `run.isCurrent()` turned false.
 * @param {SVGGElement} g
 * @param {{key: string, depth: number, x: number, y: number, layout: {chunks: string[]}}} level
 * @param {{isCurrent: () => boolean, budget: number, tooltip: (id: string) => string, start: number, fontUnits: number}} run
 * @param {Map<string, Element>} elements  filled with the level's elements by DOT id
 * @param {Map<string, DrawnItem>} drawn  filled with its items
 * @returns {Promise<DrawnLevel | null>}
 */
export async function buildLevel(g, level, run, elements, drawn) {
  g.setAttribute("class", "etp-layout-level");
  /** @type {DrawnLevel} */
  const made = { key: level.key, depth: level.depth, g, items: [], elements: [], shift: { x: 0, y: 0 }, at: { x: level.x, y: level.y } };
  // each slice in its own <g>: the next frame lays out that group and the root's bounds
  // over one group per slice, not over every element built so far
  let part = g.appendChild(document.createElementNS(SVG_NS, "g"));
  for (const chunk of level.layout.chunks) {
    for (const item of /** @type {DrawnItem[]} */ (JSON.parse(chunk))) {
      if (!run.fontUnits && item.t.length) run.fontUnits = item.t[0].z;
      shiftItem(item, level.x, level.y);
      item.o = made.shift;
      const element = buildItem(item, run.tooltip);
      part.append(element);
      elements.set(item.id, element);
      drawn.set(item.id, item);
      made.items.push(item);
      made.elements.push(element);
      if (performance.now() - run.start > run.budget) {
        await afterFrame();
        if (!run.isCurrent()) return null;
        part = g.appendChild(document.createElementNS(SVG_NS, "g"));
        run.start = performance.now();
      }
    }
  }
  return made;
}

/**
 * The box opened or closed by a new layout: a drawn box (`s<i>`) in a new level that was a
 * collapsed node (`k<i>`) before, or the other way round, with where it was drawn.
 * @param {DrawnLevel[]} fresh  the new levels, parents first
 * @param {Map<string, DrawnItem>} drawn  the items drawn before
 */
export function anchorOf(fresh, drawn) {
  for (const level of [...fresh].reverse()) {
    for (const item of level.items) {
      if (!/^[ks]\d+$/.test(item.id)) continue;
      const before = drawn.get(`${item.id[0] === "s" ? "k" : "s"}${item.id.slice(1)}`);
      if (before) return { item, before: itemBounds(before) };
    }
  }
  return null;
}
