// @ts-check
/**
 * Keyboard navigation of the graph. The graph pane is one Tab stop; inside it the arrow keys
 * move a focus (drawn as a dashed ring, ./view.js `focusRing`, in the legend as "keyboard
 * focus") to the nearest node in that direction, Enter or Space selects the focused node (as a
 * click does: a folded box opens), Escape clears the selection, + / - zoom and 0 fits the
 * graph. Screen readers hear the focused node's name (`aria-activedescendant` pointing at the
 * node, whose `aria-label` is its tooltip's first line, ./view.js `buildItem`). The side
 * panels' lists have their own keys (./panels.js `VirtualList`).
 */
import { itemBounds } from "./view.js";
import { keyboardFocus } from "./panels.js";

/** Arrow key -> unit direction (x right, y down). */
export const DIRECTIONS = /** @type {Record<string, [number, number]>} */ ({
  ArrowRight: [1, 0], ArrowLeft: [-1, 0], ArrowDown: [0, 1], ArrowUp: [0, -1],
});

/**
 * The node nearest to `from` in direction `dir`: among the nodes whose centre lies ahead
 * (more along `dir` than across it, within 60 degrees either side), the one with the smallest
 * distance along plus twice the distance across; null when there is none.
 * @param {Map<string, [number, number]>} centres  node id -> centre
 * @param {string} from
 * @param {[number, number]} dir
 * @returns {string | null}
 */
export function nextNode(centres, from, dir) {
  const start = centres.get(from);
  if (!start) return null;
  let best = null, bestScore = Infinity;
  for (const [id, c] of centres) {
    if (id === from) continue;
    const dx = c[0] - start[0], dy = c[1] - start[1];
    const along = dx * dir[0] + dy * dir[1];
    const across = Math.abs(dx * dir[1] - dy * dir[0]);
    if (along <= 0 || across > along * 1.8) continue;
    const score = along + 2 * across;
    if (score < bestScore) { bestScore = score; best = id; }
  }
  return best;
}

/** The first node in reading order (top, then left). @param {Map<string, [number, number]>} centres */
export function firstNode(centres) {
  let best = null, key = [Infinity, Infinity];
  for (const [id, c] of centres) {
    if (c[1] < key[1] - 1 || (Math.abs(c[1] - key[1]) <= 1 && c[0] < key[0])) { best = id; key = [c[0], c[1]]; }
  }
  return best;
}

export class GraphKeyboard {
  /**
   * @param {HTMLElement} pane  the graph pane (made focusable here)
   * @param {import("./view.js").GraphView} view
   * @param {{select: (dotId: string) => void, clear: () => void, start: () => string | null, changed: () => void}} actions
   *   `start`: the node to focus first (the selection's), `changed`: the ring appeared, moved or went
   */
  constructor(pane, view, actions) {
    this.pane = pane;
    this.view = view;
    this.actions = actions;
    /** @type {string | null} */
    this.focused = null;
    /** whether the ring is drawn (a new layout draws it again) */
    this.ringShown = false;
    pane.tabIndex = 0;
    pane.setAttribute("role", "application");
    pane.setAttribute("aria-roledescription", "graph");
    pane.setAttribute("aria-label", "The model's graph. Arrow keys move between nodes, Enter selects, Escape clears, + and - zoom, 0 fits.");
    pane.addEventListener("keydown", (event) => this.onKey(event));
    // a click focuses the pane too: only a keyboard focus (Tab) shows the ring
    pane.addEventListener("focus", () => { if (keyboardFocus(pane)) this.show(); });
    pane.addEventListener("blur", () => { this.ringShown = false; this.view.focusRing(null); this.actions.changed(); });
  }

  /** Node centres of the drawn graph (SVG units). */
  centres() {
    /** @type {Map<string, [number, number]>} */
    const out = new Map();
    for (const [id, item] of this.view.items) {
      if (item.k !== "node") continue;
      const b = itemBounds(item);
      if (b) out.set(id, [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2]);
    }
    return out;
  }

  /** Show the ring on the focused node (after a new layout too, while the pane has focus). */
  show() {
    const centres = this.centres();
    if (!this.focused || !centres.has(this.focused)) {
      const start = this.actions.start();
      this.focused = start && centres.has(start) ? start : firstNode(centres);
    }
    this.moveTo(this.focused);
  }

  /** After a new layout: the ring again, when the pane has the focus. */
  refresh() {
    if (document.activeElement === this.pane && this.ringShown) this.show();
  }

  /** @param {string | null} id */
  moveTo(id) {
    this.focused = id;
    this.ringShown = Boolean(id);
    this.view.focusRing(id);
    if (id) this.pane.setAttribute("aria-activedescendant", id);
    else this.pane.removeAttribute("aria-activedescendant");
    this.actions.changed();
  }

  /** @param {KeyboardEvent} event */
  onKey(event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    const dir = DIRECTIONS[event.key];
    if (dir) {
      if (!this.focused) this.show();
      const next = this.focused ? nextNode(this.centres(), this.focused, dir) : null;
      if (next) this.moveTo(next);
    } else if ((event.key === "Enter" || event.key === " ") && this.focused) {
      this.actions.select(this.focused);
    } else if (event.key === "Escape") {
      this.actions.clear();
    } else if (event.key === "+" || event.key === "=") {
      this.view.zoom(1.25);
    } else if (event.key === "-") {
      this.view.zoom(0.8);
    } else if (event.key === "0") {
      this.view.fit();
    } else {
      return;
    }
    event.preventDefault();
  }
}
