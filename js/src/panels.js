// @ts-check
/** Side panels: legend, weights, groups, diagnostics, node inspector. DOM built with h(). */
import { h } from "./dom.js";
import { COLORS, COLLAPSIBLE } from "./graph.js";

/** @typedef {import("./graph.js").Index} Index */
/** @typedef {import("./types.js").Selection} Selection */

const LEGEND_DEFAULT = [
  { key: "etp", label: "ETP primitive" }, { key: "hidden", label: "hidden state" },
  { key: "group", label: "hidden group cluster" }, { key: "slice", label: "y → h transition slice" },
  { key: "transition", label: "h → h transition" }, { key: "boundary", label: "blocking boundary" },
  { key: "perturb", label: "perturbation point" }, { key: "readout", label: "readout path" },
];

const SWATCH = {
  etp: { background: COLORS.etp, border: `2px solid ${COLORS.etpBorder}` },
  hidden: { background: COLORS.hidden, border: `1px solid ${COLORS.groupBorder}`, borderRadius: "50%" },
  group: { background: COLORS.groupFill, border: `2px solid ${COLORS.groupBorder}` },
  slice: { borderTop: `3px solid ${COLORS.slice}`, height: "0", marginTop: "6px" },
  transition: { borderTop: `3px solid ${COLORS.transition}`, height: "0", marginTop: "6px" },
  boundary: { background: "#fff", border: `3px double ${COLORS.boundary}` },
  perturb: { background: "#fff", border: `2px dashed ${COLORS.perturb}` },
  readout: { borderTop: `3px dashed ${COLORS.readout}`, height: "0", marginTop: "6px" },
  dropped: { borderTop: `3px dashed ${COLORS.dropped}`, height: "0", marginTop: "6px" },
  bypass: { borderTop: `3px dotted ${COLORS.bypass}`, height: "0", marginTop: "6px" },
};

export function legendPanel(/** @type {Index} */ index) {
  const entries = index.vm.legend && index.vm.legend.length ? index.vm.legend : LEGEND_DEFAULT;
  return h("div", { class: "etp-legend" }, ...entries.map((e) =>
    h("div", { class: "etp-legend-item", "data-key": e.key },
      h("span", { class: "etp-swatch", style: SWATCH[/** @type {keyof SWATCH} */ (e.key)] || {} }), e.label)));
}

const STATUS_TEXT = { online: "online", exact: "exact", not_learned: "not learned" };
const CLAIM_WORD = { online: "online", exact: "readout" };

/**
 * What a weight's status says, with its gradient claim when the view model carries one:
 * "online · exact", "online · approximate", "readout · exact", "not learned".
 * Mirrors `status_text` in etp_viz/view/weights.py.
 * @param {any} w
 */
export function statusText(w) {
  if (w.status === "not_learned") return "not learned";
  if (!w.claim || w.claim === "none") return STATUS_TEXT[/** @type {keyof STATUS_TEXT} */ (w.status)] || w.status;
  return `${CLAIM_WORD[/** @type {keyof CLAIM_WORD} */ (w.status)] || w.status} · ${w.claim}`;
}

/** Height of one row of the weights/groups/diagnostics lists (px; fixed: the lists are virtual). */
export const ROW_HEIGHT = 20;

/**
 * A virtual list: only the rows in view (plus a few either side) are in the DOM, each at a
 * fixed height, absolutely placed inside a spacer as tall as all rows; a scroll handler (read
 * the scroll position, then build the rows on the next frame) swaps them. The list's height is
 * set here, never read back, so nothing forces a synchronous layout. A model with hundreds of
 * weights and diagnostics costs ~15 rows per list, whatever its size.
 * @template T
 */
export class VirtualList {
  /**
   * @param {T[]} items
   * @param {(item: T, active: boolean) => Element} makeRow
   * @param {(item: T) => string} keyOf
   * @param {{rowHeight?: number, maxHeight?: number, overscan?: number, empty?: string}} [options]
   */
  constructor(items, makeRow, keyOf, options = {}) {
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
    this.el = h("div", { class: "etp-list etp-vlist", role: "list", style: { height: `${this.viewport}px` } },
      items.length ? this.inner : h("div", { class: "etp-dim" }, options.empty || "none"));
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
        row = this.makeRow(item, this.keyOf(item) === this.activeKey);
        row.setAttribute("role", "listitem");
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
    for (const [i, row] of this.rows) row.classList.toggle("active", this.keyOf(this.items[i]) === key);
    const i = this.positions.get(key);
    if (!reveal || i === undefined) return;
    const top = i * this.rowHeight;
    let scroll = this.scrollTop;
    if (top < scroll) scroll = top;
    else if (top + this.rowHeight > scroll + this.viewport) scroll = top + this.rowHeight - this.viewport;
    if (scroll === this.scrollTop) return;
    this.scrollTop = scroll;
    this.el.scrollTop = scroll; // a write; the scroll event that follows reads the same value
    this.render();
  }

  dispose() {
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
  }
}

/**
 * One weight's row (one line; the reason and fix of the selected weight are shown under the
 * list by `weightDetail`).
 * @param {any} w
 * @param {boolean} active
 * @param {(s: Selection) => void} select
 */
export function weightRow(w, active, select) {
  const groups = (w.groups || []).length ? ` · groups ${w.groups.join(", ")}` : "";
  const status = statusText(w);
  const claim = w.claim ? ` claim-${w.claim}` : "";
  return h("div", { class: `etp-row etp-weight${active ? " active" : ""}`, "data-weight": w.path,
    "data-claim": w.claim || "", title: `${w.path} (${status})${groups}`, onclick: () => select({ kind: "weight", id: w.path }) },
  h("span", { class: `etp-status status-${w.status}${claim}` }, status),
  ...(w.claims || []).map((/** @type {any} */ c) => h("span", { class: `etp-claim-chip claim-${c.claim}`, "data-algorithm-claim": `${c.algorithm}:${c.claim}`,
    title: `${c.algorithm}: ${c.claim}${c.reason ? ` — ${c.reason}` : ""}` }, `${c.algorithm} ${CLAIM_MARK[/** @type {keyof CLAIM_MARK} */ (c.claim)] || "?"}`)),
  w.verified ? h("span", { class: `etp-verified-mark ${w.verified_ok ? "ok" : "bad"}`, "data-verified-mark": w.verified_ok ? "ok" : "bad",
    title: w.verified }, w.verified_ok ? "✓" : "✗") : null,
  h("span", { class: "etp-path" }, w.path), h("span", { class: "etp-dim" }, groups));
}

/** Compare mode: the mark of each algorithm's claim on a weight row. */
const CLAIM_MARK = { exact: "= exact", approximate: "≈ approx.", none: "∅ none" };

/** The reason and suggested fix of the selected weight (shown under the weights list). */
export function weightDetail(/** @type {any} */ w) {
  const claim = w.claim && w.claim !== "none" && w.claim_reason
    ? h("div", { class: "etp-claim", "data-claim-detail": w.claim }, h("b", {}, `${w.claim}: `), w.claim_reason) : null;
  const perAlgorithm = (w.claims || []).length ? h("div", { class: "etp-claims", "data-claims-detail": w.path },
    ...w.claims.map((/** @type {any} */ c) => h("div", { class: "etp-claim", "data-algorithm": c.algorithm },
      h("b", {}, `${c.algorithm}: ${c.claim}`), c.reason ? ` — ${c.reason}` : ""))) : null;
  const verified = w.verified ? h("div", { class: "etp-verified", "data-verified": w.path },
    h("b", {}, "measured: "), w.verified) : null;
  return h("div", { class: "etp-detail", "data-detail": w.path },
    w.reason ? h("div", { class: "etp-reason" }, w.reason) : null, claim, perAlgorithm, verified,
    w.fix ? h("div", { class: "etp-fix" }, h("b", {}, "Suggested fix: "), w.fix) : null);
}

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

function table(/** @type {[string, any][]} */ rows) {
  return h("table", { class: "etp-table" }, ...rows.filter(([, v]) => v != null && v !== "")
    .map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, typeof v === "object" && !(v instanceof Node) ? JSON.stringify(v) : v))));
}

/**
 * Inspector for the current selection.
 * @param {Index} index
 * @param {Selection} selected
 * @param {{collapse: (id: string) => void, expand: (id: string) => void, expanded: Set<string>}} actions
 */
export function inspectorPanel(index, selected, actions) {
  const kind = selected && selected.kind;
  const id = selected && selected.id != null ? String(selected.id) : "";
  if (kind === "node" && index.nodes.has(id)) {
    const n = index.nodes.get(id);
    if (!n) return h("div");
    const params = Object.entries(n.params || {});
    return h("div", { class: "etp-inspector" },
      h("div", { class: "etp-title" }, n.primitive || n.kind, " ", h("span", { class: "etp-dim" }, n.id)),
      table([["kind", n.kind], ["equation", n.eqn_index], ["weight", n.weight_path], ["status", n.status],
        ["hidden", n.hidden_path], ["group", n.group], ["inputs", (n.in_avals || []).join(", ")],
        ["outputs", (n.out_avals || []).join(", ")], ["source", n.source],
        ["badges", (n.badges || []).map((b) => b.title || b.text).join("; ")]]),
      params.length ? h("div", { class: "etp-subtitle" }, "params") : null,
      params.length ? table(params.map(([k, v]) => [k, String(v)])) : null);
  }
  if (kind === "cluster" && index.clusters.has(id)) {
    const c = index.clusters.get(id);
    const open = actions.expanded.has(id);
    return h("div", { class: "etp-inspector" },
      h("div", { class: "etp-title" }, c.label),
      table([["kind", c.kind], ["nodes", index.clusterSize.get(id) || 0]]),
      COLLAPSIBLE.has(c.kind) ? h("button", { class: "etp-button", onclick: () => (open ? actions.collapse(id) : actions.expand(id)) },
        open ? "Collapse" : "Expand") : null);
  }
  if (kind === "edge" && index.edges.has(id)) {
    const e = index.edges.get(id);
    return h("div", { class: "etp-inspector" }, h("div", { class: "etp-title" }, `var ${e.var ?? ""}`),
      table([["aval", e.aval], ["from", e.source], ["to", e.target]]));
  }
  if (kind === "weight" && index.weights.has(id)) {
    const w = index.weights.get(id);
    return h("div", { class: "etp-inspector" }, h("div", { class: "etp-title" }, w.path),
      table([["status", statusText(w)], ["groups", (w.groups || []).join(", ")],
        ["reason", w.reason], ["claim", w.claim_reason],
        ["claims", (w.claims || []).map((/** @type {any} */ c) => `${c.algorithm}: ${c.claim}`).join("; ")], ["measured", w.verified],
        ["per leaf", (w.leaf_claims || []).map((/** @type {any[]} */ c) => `${c[0]}: ${c[1]}`).join("; ")],
        ["dropped terms", (w.dropped_nodes || []).join(", ")],
        ["suggested fix", w.fix], ["boundary", (w.boundary_nodes || []).join(", ")]]));
  }
  if (kind === "group" && index.groups.has(id)) {
    const g = index.groups.get(id);
    return h("div", { class: "etp-inspector" }, h("div", { class: "etp-title" }, `group ${g.index}`),
      table([["hidden states", (g.hidden_paths || []).join(", ")], ["states", g.num_state],
        ["shape", g.varshape ? `[${g.varshape.join(", ")}]` : null]]));
  }
  if (kind === "diagnostic" && index.diagnostics.has(id)) {
    const d = index.diagnostics.get(id);
    return h("div", { class: "etp-inspector" }, h("div", { class: "etp-title" }, d.kind),
      table([["level", d.level], ["message", d.message], ["weight", d.weight_path],
        ["hidden", (d.hidden_paths || []).join(", ")], ["nodes", (d.node_ids || []).join(", ")]]));
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
    w.verified_ok = !bad.length;
    w.verified = bad.length
      ? `✗ ${bad.map((/** @type {any} */ r) => `${r.path}: ${r.contradiction}`).join("; ")}`
      : `✓ ${rows.map((/** @type {any} */ r) => `${r.path.slice(w.path.length + 1) || r.path}: cos ${fmt(r.cosine)}, rel. err ${fmt(r.relative_error)}`).join("; ")}`;
  }
}
