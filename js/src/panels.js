// @ts-check
/**
 * Side panels: weights, groups, diagnostics, node inspector (the legend is ./legend.js). DOM
 * built with h(). What a student reads uses weight and state names and plain words (the view
 * model's `summary`, the legend's words); internal codes (equation ids, relation ids, the
 * compiler's diagnostic text) are in `title` attributes, shown on hover.
 */
import { h } from "./dom.js";
import { COLLAPSIBLE, nodeKey } from "./graph.js";

/** @typedef {import("./graph.js").Index} Index */
/** @typedef {import("./types.js").Selection} Selection */

/** Height of one row of the weights/groups/diagnostics lists (px at text scale 1; fixed: the
 * lists are virtual). */
export const ROW_HEIGHT = 20;
let listCount = 0;

/** Whether `el` got the focus from the keyboard (not a click): `:focus-visible`. @param {Element} el */
export function keyboardFocus(el) {
  try {
    return el.matches(":focus-visible");
  } catch {
    return true;
  }
}

/**
 * A virtual list: only the rows in view (plus a few either side) are in the DOM, each at a
 * fixed height, absolutely placed inside a spacer as tall as all rows; a scroll handler (read
 * the scroll position, then build the rows on the next frame) swaps them. The list's height is
 * set here, never read back, so nothing forces a synchronous layout. A model with hundreds of
 * weights and diagnostics costs ~15 rows per list, whatever its size.
 *
 * Keyboard: the list is one Tab stop (a listbox); Up/Down, Page Up/Down, Home/End move the
 * focused row (dashed ring, brought into view), Enter or Space selects it as a click does.
 * Screen readers follow `aria-activedescendant`.
 * @template T
 */
export class VirtualList {
  /**
   * @param {T[]} items
   * @param {(item: T, active: boolean) => Element} makeRow
   * @param {(item: T) => string} keyOf
   * @param {{rowHeight?: number, maxHeight?: number, overscan?: number, empty?: string, label?: string}} [options]
   */
  constructor(items, makeRow, keyOf, options = {}) {
    this.idPrefix = `etp-vlist-${++listCount}`;
    /** row index with the keyboard focus (-1: none yet) */
    this.focusIndex = -1;
    this.items = items;
    this.makeRow = makeRow;
    this.keyOf = keyOf;
    this.rowHeight = options.rowHeight ?? ROW_HEIGHT;
    this.overscan = options.overscan ?? 4;
    this.viewport = Math.min(Math.max(items.length, 1) * this.rowHeight, options.maxHeight ?? 220);
    /** @type {Map<string, number>} */
    this.positions = new Map(items.map((item, i) => [keyOf(item), i]));
    this.activeKey = "";
    this.scrollTop = 0;
    this.first = -1;
    this.last = -1;
    /** @type {Map<number, Element>} */
    this.rows = new Map();
    this.frame = 0;
    this.inner = h("div", { class: "etp-vlist-inner", style: { height: `${items.length * this.rowHeight}px` } });
    this.el = h("div", { class: "etp-list etp-vlist", role: "listbox", tabindex: items.length ? 0 : -1,
      "aria-label": `${options.label || "list"}: arrow keys move, Enter selects`, style: { height: `${this.viewport}px` } },
    items.length ? this.inner : h("div", { class: "etp-dim" }, options.empty || "none"));
    this.el.addEventListener("keydown", (event) => this.onKey(event));
    this.el.addEventListener("focus", () => {
      // a click focuses the list too: only a keyboard focus (Tab) puts the ring on a row
      if (!keyboardFocus(this.el)) return;
      const active = this.positions.get(this.activeKey);
      this.moveFocus(this.focusIndex >= 0 ? this.focusIndex : active ?? 0);
    });
    this.el.addEventListener("scroll", () => {
      this.scrollTop = this.el.scrollTop; // read only: the rows are written on the next frame
      if (!this.frame) this.frame = requestAnimationFrame(() => { this.frame = 0; this.render(); });
    }, { passive: true });
    this.render();
  }

  /** Put the rows of the current scroll window in the DOM (reusing the ones already there). */
  render(force = false) {
    const n = this.items.length;
    if (!n) return;
    const first = Math.max(0, Math.floor(this.scrollTop / this.rowHeight) - this.overscan);
    const last = Math.min(n - 1, Math.ceil((this.scrollTop + this.viewport) / this.rowHeight) + this.overscan);
    if (!force && first === this.first && last === this.last) return;
    /** @type {Map<number, Element>} */
    const rows = new Map();
    for (let i = first; i <= last; i++) {
      let row = force ? undefined : this.rows.get(i);
      if (!row) {
        const item = this.items[i];
        const active = this.keyOf(item) === this.activeKey;
        row = this.makeRow(item, active);
        row.setAttribute("role", "option");
        row.setAttribute("aria-selected", String(active));
        row.id = `${this.idPrefix}-${i}`;
        row.classList.toggle("focused", i === this.focusIndex);
        /** @type {HTMLElement} */ (row).style.top = `${i * this.rowHeight}px`;
      }
      rows.set(i, row);
    }
    this.rows = rows;
    this.first = first;
    this.last = last;
    this.inner.replaceChildren(...rows.values());
  }

  /**
   * Mark the row with this key active (and bring it into view when `reveal`); the DOM holds
   * only the rows in view, so this is a handful of class changes, never a rebuild.
   * @param {string} key
   */
  setActive(key, reveal = false) {
    this.activeKey = key;
    for (const [i, row] of this.rows) {
      const active = this.keyOf(this.items[i]) === key;
      row.classList.toggle("active", active);
      row.setAttribute("aria-selected", String(active));
    }
    const i = this.positions.get(key);
    if (!reveal || i === undefined) return;
    this.scrollTo(i);
  }

  /** Bring row `i` into view (a scroll write; the rows of the new window are built now). */
  scrollTo(/** @type {number} */ i) {
    const top = i * this.rowHeight;
    let scroll = this.scrollTop;
    if (top < scroll) scroll = top;
    else if (top + this.rowHeight > scroll + this.viewport) scroll = top + this.rowHeight - this.viewport;
    if (scroll === this.scrollTop) return;
    this.scrollTop = scroll;
    this.el.scrollTop = scroll; // a write; the scroll event that follows reads the same value
    this.render();
  }

  /** Move the keyboard focus to row `i` (clamped), in view. */
  moveFocus(/** @type {number} */ i) {
    const n = this.items.length;
    if (!n) return;
    this.focusIndex = Math.max(0, Math.min(n - 1, i));
    this.scrollTo(this.focusIndex);
    for (const [j, row] of this.rows) row.classList.toggle("focused", j === this.focusIndex);
    this.el.setAttribute("aria-activedescendant", `${this.idPrefix}-${this.focusIndex}`);
  }

  /** @param {KeyboardEvent} event */
  onKey(event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    const page = Math.max(1, Math.floor(this.viewport / this.rowHeight) - 1);
    const moves = /** @type {Record<string, number>} */ ({ ArrowDown: 1, ArrowUp: -1, PageDown: page, PageUp: -page });
    if (event.key in moves) this.moveFocus(this.focusIndex + moves[event.key]);
    else if (event.key === "Home") this.moveFocus(0);
    else if (event.key === "End") this.moveFocus(this.items.length - 1);
    else if ((event.key === "Enter" || event.key === " ") && this.focusIndex >= 0) {
      const row = /** @type {HTMLElement | undefined} */ (this.rows.get(this.focusIndex));
      if (row) row.click();
    } else return;
    event.preventDefault();
  }

  dispose() {
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
  }
}

/** Height of a weights row in compare mode: the name on its own line, the chips below. */
export const COMPARE_ROW_HEIGHT = 40;

/** The technical text behind a weight's summary (shown on hover). */
function weightCodes(/** @type {any} */ w) {
  return w.detail || [w.reason, w.claim_reason && `${w.claim}: ${w.claim_reason}`].filter(Boolean).join("\n");
}

/** One learner's claim in plain words (its `summary`) and the compiler's codes (its `detail`,
 * shown on hover); JSON without them falls back to the claim word and the reason. @param {any} c */
function claimText(c) {
  return { plain: c.summary || CLAIM_WORDS[/** @type {keyof CLAIM_WORDS} */ (c.claim)] || c.claim, codes: c.detail || c.reason || "" };
}

/**
 * One weight's row (one line; in compare mode two: the name, then one chip per algorithm, so
 * the name is never cut). The reason and fix of the selected weight are shown under the list
 * by `weightDetail`.
 * @param {any} w
 * @param {boolean} active
 * @param {(s: Selection) => void} select
 */
export function weightRow(w, active, select) {
  const status = w.status_text;
  const claim = w.claim ? ` claim-${w.claim}` : "";
  const chips = (w.claims || []).map((/** @type {any} */ c) => h("span", { class: `etp-claim-chip claim-${c.claim}`, "data-algorithm-claim": `${c.algorithm}:${c.claim}`,
    title: [`${c.algorithm}: ${claimText(c).plain}`, claimText(c).codes].filter(Boolean).join("\n") }, `${c.algorithm} ${CLAIM_SIGN[/** @type {keyof CLAIM_SIGN} */ (c.claim)] || "?"}`));
  const mark = w.verified_ok ? "ok" : String(w.verified || "").startsWith("–") ? "untested" : "bad";
  const verified = w.verified ? h("span", { class: `etp-verified-mark ${mark}`, "data-verified-mark": mark,
    title: w.verified }, { ok: "✓", untested: "–", bad: "✗" }[mark]) : null;
  const name = h("span", { class: "etp-path", "data-weight-name": w.path }, w.path);
  const badge = h("span", { class: `etp-status status-${w.status}${claim}` }, status);
  const title = [`${w.path} (${status})`, w.summary, weightCodes(w)].filter(Boolean).join("\n");
  const attrs = { "data-weight": w.path, "data-claim": w.claim || "", title, onclick: () => select({ kind: "weight", id: w.path }) };
  if (chips.length) {
    return h("div", { class: `etp-row etp-weight etp-row-2${active ? " active" : ""}`, ...attrs },
      h("div", { class: "etp-row-line" }, name, verified), h("div", { class: "etp-row-line" }, ...chips));
  }
  return h("div", { class: `etp-row etp-weight${active ? " active" : ""}`, ...attrs }, badge, verified, name);
}

/** Compare mode: the sign of each algorithm's claim on a weight row (the word on hover and
 * in the weight's detail; the legend of the signs is the weights panel's title). */
const CLAIM_SIGN = { exact: "=", approximate: "≈", none: "∅" };

/**
 * What the selected weight's status means (plain words; the compiler's text on hover; left
 * out with `withSummary` false: the inspector already says it), its claims, the measured
 * fidelity and the suggested fix (shown under the weights list).
 * @param {any} w
 */
export function weightDetail(w, withSummary = true) {
  const summary = withSummary ? w.summary || w.reason : "";
  const perAlgorithm = (w.claims || []).length ? h("div", { class: "etp-claims", "data-claims-detail": w.path },
    ...w.claims.map((/** @type {any} */ c) => h("div", { class: "etp-claim", "data-algorithm": c.algorithm, title: claimText(c).codes },
      h("b", {}, `${c.algorithm}: `), claimText(c).plain))) : null;
  const verified = w.verified ? h("div", { class: "etp-verified", "data-verified": w.path },
    h("b", {}, "measured: "), w.verified) : null;
  // compare mode: the dropped term that explains the gap between the learners (its equations
  // are the weight's dropped_nodes, drawn dashed on the graph)
  const gap = w.gap ? h("div", { class: "etp-claim etp-gap", "data-gap": w.path }, h("b", {}, "Why the learners differ: "), w.gap) : null;
  return h("div", { class: "etp-detail", "data-detail": w.path },
    summary ? h("div", { class: "etp-reason", "data-summary": w.path, title: weightCodes(w) }, summary) : null,
    gap, perAlgorithm, verified,
    w.fix ? h("div", { class: "etp-fix" }, h("b", {}, "Suggested fix: "), w.fix) : null);
}

/** Compare mode: each algorithm's claim on the selected weight, in plain words. */
const CLAIM_WORDS = {
  exact: "exact: its online gradient is the true gradient",
  approximate: "approximate: it drops part of the true gradient (hover for which part)",
  none: "no online gradient",
};

/** One hidden group's row. @param {any} g @param {boolean} active @param {(s: Selection) => void} select */
export function groupRow(g, active, select) {
  const text = `${(g.hidden_paths || []).join(" + ")}`;
  const dim = ` · ${g.num_state} state${g.num_state === 1 ? "" : "s"}` + (g.varshape ? ` · [${g.varshape.join(", ")}]` : "");
  return h("div", { class: `etp-row etp-group${active ? " active" : ""}`, "data-group": String(g.index),
    title: `group ${g.index}: ${text}${dim}`, onclick: () => select({ kind: "group", id: String(g.index) }) },
  h("b", {}, `group ${g.index}`), " ", text, h("span", { class: "etp-dim" }, dim));
}

/** One diagnostic's row. @param {any} d @param {boolean} active @param {(s: Selection) => void} select */
export function diagnosticRow(d, active, select) {
  return h("div", { class: `etp-row etp-diag level-${d.level}${active ? " active" : ""}`, "data-diagnostic": String(d.index),
    title: `${d.level} ${d.kind}: ${d.message}`, onclick: () => select({ kind: "diagnostic", id: String(d.index) }) },
  h("span", { class: "etp-level" }, d.level), " ", h("span", { class: "etp-dim" }, d.kind), " ", d.message);
}

function table(/** @type {[string, any, string?][]} */ rows) {
  return h("table", { class: "etp-table" }, ...rows.filter(([, v]) => v != null && v !== "")
    .map(([k, v, title]) => h("tr", { title: title || null }, h("th", {}, k),
      h("td", {}, typeof v === "object" && !(v instanceof Node) ? JSON.stringify(v) : v))));
}

/** A node's name for a student: its weight or state, else its label (the id on hover). */
export function nodeName(/** @type {Index} */ index, /** @type {string} */ id) {
  const n = index.nodes.get(id);
  if (!n) return id;
  if (n.etp && n.weight_path) return `${n.label || n.primitive} (${n.weight_path})`;
  return n.hidden_path || n.state_path || n.label || n.primitive || id;
}

/** A list of node names with their ids on hover. */
function names(/** @type {Index} */ index, /** @type {string[] | undefined} */ ids) {
  const list = ids || [];
  return list.length ? h("span", { title: list.join(", ") }, list.map((id) => nodeName(index, id)).join(", ")) : null;
}

/** The plain-language tooltip of a legend key (the view model's legend, palette.py). */
function legendTitle(/** @type {Index} */ index, /** @type {string} */ key) {
  const entry = (index.vm.legend || []).find((e) => e.key === key);
  return entry ? entry.title || entry.label : "";
}

/** Hidden state names of group indices. */
function groupNames(/** @type {Index} */ index, /** @type {number[] | undefined} */ groups) {
  return (groups || []).map((g) => (index.groups.get(String(g))?.hidden_paths || [`group ${g}`]).join(" + ")).join(", ");
}

/**
 * Inspector for the current selection: a plain-language heading and sentence first, then the
 * details; internal ids and codes in `title` attributes.
 * @param {Index} index
 * @param {Selection} selected
 * @param {{collapse: (id: string) => void, expand: (id: string) => void, expanded: Set<string>, whatIf?: (path: string) => Element | null}} actions
 */
export function inspectorPanel(index, selected, actions) {
  const kind = selected && selected.kind;
  const id = selected && selected.id != null ? String(selected.id) : "";
  if (kind === "node" && index.nodes.has(id)) {
    const n = index.nodes.get(id);
    if (!n) return h("div");
    const params = Object.entries(n.params || {});
    const weight = n.weight_path ? index.weights.get(n.weight_path) : undefined;
    const codes = `node ${n.id}${n.eqn_index != null ? ` · equation ${n.eqn_index}` : ""}${n.cluster ? ` · in ${n.cluster}` : ""}`;
    return h("div", { class: "etp-inspector" },
      h("div", { class: "etp-title", title: codes }, nodeName(index, id)),
      h("div", { class: "etp-plain", "data-plain": nodeKey(n) }, legendTitle(index, nodeKey(n))),
      table([["operation", n.primitive || n.kind, codes], ["weight", n.weight_path],
        ["learned", weight ? weight.status_text : n.status, weight ? weightCodes(weight) : ""],
        ["hidden state", n.hidden_path], ["state", n.state_path], ["group", n.group != null ? groupNames(index, [n.group]) : null, `group ${n.group}`],
        ["reads", (n.in_avals || []).join(", ")], ["gives", (n.out_avals || []).join(", ")], ["source", n.source],
        ["tags", (n.badges || []).map((b) => b.title || b.text).join("; ")]]),
      params.length ? h("div", { class: "etp-subtitle" }, "settings") : null,
      params.length ? table(params.map(([k, v]) => [k, String(v)])) : null);
  }
  if (kind === "cluster" && index.clusters.has(id)) {
    const c = index.clusters.get(id);
    const open = actions.expanded.has(id);
    const key = c.kind === "group" ? "group" : c.kind === "cell" ? "cell" : open ? "subjaxpr" : "collapsed";
    const cellRows = c.kind === "cell" ? [["module", c.module_path], ["class", c.class_name],
      ...(c.ports || []).map((/** @type {string} */ w) => ["weight", `${w}: ${index.weights.get(w)?.status_text || ""}`]),
      ["hidden state", (c.hidden_paths || []).join(", ")]] : [];
    return h("div", { class: "etp-inspector", "data-cluster-kind": c.kind },
      h("div", { class: "etp-title", title: `${c.kind} ${c.id}` }, c.label),
      h("div", { class: "etp-plain" }, legendTitle(index, key)),
      table([...cellRows, ["operations", index.clusterSize.get(id) || 0]]),
      COLLAPSIBLE.has(c.kind) ? h("button", { class: "etp-button", onclick: () => (open ? actions.collapse(id) : actions.expand(id)) },
        open ? "Collapse" : "Expand") : null);
  }
  if (kind === "edge" && index.edges.has(id)) {
    const e = index.edges.get(id);
    return h("div", { class: "etp-inspector" }, h("div", { class: "etp-title", title: `edge ${e.id}` }, `value ${e.var ?? ""}`),
      h("div", { class: "etp-plain" }, legendTitle(index, "edge")),
      table([["shape", e.aval], ["from", names(index, [e.source])], ["to", names(index, [e.target])]]));
  }
  if (kind === "weight" && index.weights.has(id)) {
    const w = index.weights.get(id);
    const blockers = (w.boundary_nodes || []).map((/** @type {string} */ n) => index.nodes.get(n)?.weight_path || nodeName(index, n));
    return h("div", { class: "etp-inspector" }, h("div", { class: "etp-title" }, w.path),
      w.summary ? h("div", { class: "etp-plain", "data-summary": w.path, title: weightCodes(w) }, w.summary) : null,
      table([["learned", w.status_text, weightCodes(w)], ["hidden state", groupNames(index, w.groups), (w.groups || []).map((/** @type {number} */ g) => `group ${g}`).join(", ")],
        ["per learner", (w.claims || []).map((/** @type {any} */ c) => `${c.algorithm}: ${c.claim}`).join("; ")], ["measured", w.verified],
        ["per part", (w.leaf_claims || []).length > 1 ? w.leaf_claims.map((/** @type {any[]} */ c) => `${c[0]}: ${c[1]}`).join("; ") : null],
        // a fused gate weight (brainstate's LSTMCell.W): one row per block of columns
        ...(w.block_claims || []).map((/** @type {any[]} */ b) => [b[0], h("span", { "data-block": b[0], "data-claim": b[1] }, `${b[1]}${b[2] ? ` · ${b[2]}` : ""}`)]),
        ["dropped at", names(index, w.dropped_nodes)],
        ["blocked by", blockers.length ? h("span", { title: (w.boundary_nodes || []).join(", ") }, blockers.join(", ")) : null],
        ["suggested fix", w.fix], ["value", w.aval]]),
      actions.whatIf ? actions.whatIf(w.path) : null);
  }
  if (kind === "group" && index.groups.has(id)) {
    const g = index.groups.get(id);
    return h("div", { class: "etp-inspector" }, h("div", { class: "etp-title", title: `group ${g.index} · ${g.cluster}` },
      `hidden group: ${(g.hidden_paths || []).join(" + ")}`),
      h("div", { class: "etp-plain" }, legendTitle(index, "group")),
      table([["hidden states", (g.hidden_paths || []).join(", ")], ["states", g.num_state],
        ["shape", g.varshape ? `[${g.varshape.join(", ")}]` : null]]));
  }
  if (kind === "diagnostic" && index.diagnostics.has(id)) {
    const d = index.diagnostics.get(id);
    return h("div", { class: "etp-inspector" }, h("div", { class: "etp-title", title: d.kind }, d.weight_path || d.kind),
      table([["level", d.level], ["message", d.message], ["weight", d.weight_path],
        ["hidden", (d.hidden_paths || []).join(", ")], ["nodes", names(index, d.node_ids)]]));
  }
  return h("div", { class: "etp-inspector etp-dim" }, "Click a node, weight, group or diagnostic.");
}

/**
 * Put a `verify()` report (the `verification` trait: `{rows: [{path, claim, cosine,
 * relative_error, contradiction}], contradictions}`) on the weights it measured: each
 * ParamState gets `verified` (its leaves' cosine and relative error, or the contradiction)
 * and `verified_ok`. Rows are per leaf (`rnn.W.weight`); a weight is a ParamState (`rnn.W`).
 * @param {Map<string, any>} weights
 * @param {any} report
 */
export function attachVerification(weights, report) {
  for (const w of weights.values()) { delete w.verified; delete w.verified_ok; }
  if (!report || !Array.isArray(report.rows)) return;
  const fmt = (/** @type {any} */ v) => (v == null || !Number.isFinite(Number(v)) ? "–" : Number(v).toPrecision(3));
  for (const w of weights.values()) {
    const rows = report.rows.filter((/** @type {any} */ r) => r.path === w.path || String(r.path).startsWith(`${w.path}.`));
    if (!rows.length) continue;
    const bad = rows.filter((/** @type {any} */ r) => r.contradiction);
    // a weight BPTT gives no gradient on this window was not tested: never a tick
    const untested = rows.filter((/** @type {any} */ r) => r.verified === false);
    w.verified_ok = !bad.length && !untested.length;
    w.verified = bad.length
      ? `✗ ${bad.map((/** @type {any} */ r) => `${r.path}: ${r.contradiction}`).join("; ")}`
      : untested.length
      ? `– not verified: ${String(untested[0].unverified || "BPTT's gradient is zero here")}`
      : `✓ ${rows.map((/** @type {any} */ r) => `${r.path.slice(w.path.length + 1) || r.path}: cos ${fmt(r.cosine)}, rel. err ${fmt(r.relative_error)}`).join("; ")}`;
  }
}

/**
 * The side column's sections (search results, inspector, weights, groups, diagnostics): each a
 * <details> with a titled summary (its help on hover) and a body the app fills.
 * @returns {{sections: Record<string, HTMLElement>, bodies: Record<string, HTMLElement>, side: HTMLElement}}
 */
export function sidePanels() {
  /** @type {Record<string, HTMLElement>} */
  const sections = {}, bodies = {};
  const section = (/** @type {string} */ name, /** @type {string} */ title, /** @type {string} */ help, open = true) => {
    bodies[name] = h("div", { "data-panel-body": name });
    sections[name] = h("details", { class: "etp-section", "data-panel": name, open }, h("summary", { title: help }, title), bodies[name]);
  };
  section("search", "Search results", "What matches the search; click one to find it on the graph.");
  section("inspector", "Inspector", "What you clicked, in plain words. Hover a line for the technical details.");
  section("weights", "Weights",
    "Every weight of the model and how it is learned: online (from its eligibility trace), as a readout (exact, same step) or not at all. Click one to see its path on the graph.");
  section("groups", "Groups", "Hidden states updated together: the learner keeps one eligibility trace per weight and group.");
  section("diagnostics", "Diagnostics", "The compiler's notes (for developers): why each weight is or is not learned online.", false);
  sections.search.hidden = true;
  const side = h("div", { class: "etp-side" }, ...Object.values(sections));
  return { sections, bodies, side };
}
