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
};

export function legendPanel(/** @type {Index} */ index) {
  const entries = index.vm.legend && index.vm.legend.length ? index.vm.legend : LEGEND_DEFAULT;
  return h("div", { class: "etp-legend" }, ...entries.map((e) =>
    h("div", { class: "etp-legend-item", "data-key": e.key },
      h("span", { class: "etp-swatch", style: SWATCH[/** @type {keyof SWATCH} */ (e.key)] || {} }), e.label)));
}

const STATUS_TEXT = { online: "online", exact: "exact", not_learned: "not learned" };

/**
 * @param {Index} index
 * @param {Selection} selected
 * @param {(s: Selection) => void} select
 */
export function weightsPanel(index, selected, select) {
  const rows = [...index.weights.values()].map((w) => weightRow(index, w, selected, select));
  return h("div", { class: "etp-list" }, rows.length ? rows : [h("div", { class: "etp-dim" }, "no weights")]);
}

/**
 * One weight's row.
 * @param {Index} _index
 * @param {any} w
 * @param {Selection} selected
 * @param {(s: Selection) => void} select
 */
export function weightRow(_index, w, selected, select) {
  const active = selected && selected.kind === "weight" && selected.id === w.path;
  const groups = (w.groups || []).length ? ` · groups ${w.groups.join(", ")}` : "";
  return h("div", { class: `etp-row etp-weight${active ? " active" : ""}`, "data-weight": w.path,
    onclick: () => select({ kind: "weight", id: w.path }) },
  h("span", { class: `etp-status status-${w.status}` }, STATUS_TEXT[/** @type {keyof STATUS_TEXT} */ (w.status)] || w.status),
  h("span", { class: "etp-path" }, w.path), h("span", { class: "etp-dim" }, groups),
  active ? weightDetail(w) : null);
}

/**
 * Append one row per item to `list` in slices of about `budgetMs`, awaiting `pause()` between
 * slices (hundreds of rows at once are a long DOM + style/layout task). Resolves to false when
 * `isCurrent()` turns false (a newer view model or selection took over).
 * @template T
 * @param {Element} list
 * @param {T[]} items
 * @param {(item: T) => Element} makeRow
 * @param {() => Promise<any>} pause
 * @param {{isCurrent?: () => boolean, budgetMs?: number}} [control]
 */
export async function fillListSliced(list, items, makeRow, pause, control = {}) {
  const budget = control.budgetMs ?? 6;
  let start = performance.now();
  let batch = document.createDocumentFragment();
  for (const item of items) {
    batch.append(makeRow(item));
    if (performance.now() - start > budget) {
      list.append(batch);
      batch = document.createDocumentFragment();
      await pause();
      if (control.isCurrent && !control.isCurrent()) return false;
      start = performance.now();
    }
  }
  list.append(batch);
  return true;
}

/** The reason and suggested fix shown under the selected weight's row. */
export function weightDetail(/** @type {any} */ w) {
  return h("div", { class: "etp-detail" },
    w.reason ? h("div", { class: "etp-reason" }, w.reason) : null,
    w.fix ? h("div", { class: "etp-fix" }, h("b", {}, "Suggested fix: "), w.fix) : null);
}

/**
 * Mark the selected row in the already built weights/groups/diagnostics lists (a selection
 * change must not rebuild hundreds of rows: that is a long style/layout task on big models).
 * @param {Index} index
 * @param {Selection} selected
 * @param {Element} root  element holding the lists
 */
export function markSelectedRows(index, selected, root) {
  for (const row of root.querySelectorAll(".etp-row.active")) row.classList.remove("active");
  for (const detail of root.querySelectorAll(".etp-weight > .etp-detail")) detail.remove();
  const kind = selected && selected.kind;
  const id = selected && selected.id != null ? String(selected.id) : "";
  const attr = { weight: "data-weight", group: "data-group", diagnostic: "data-diagnostic" }[/** @type {string} */ (kind)];
  if (!attr) return;
  for (const row of root.querySelectorAll(`[${attr}]`)) {
    if (row.getAttribute(attr) !== id) continue;
    row.classList.add("active");
    if (kind === "weight" && index.weights.has(id)) row.append(weightDetail(index.weights.get(id)));
  }
}

export function groupsPanel(/** @type {Index} */ index, /** @type {Selection} */ selected, /** @type {(s: Selection) => void} */ select) {
  const rows = [...index.groups.values()].map((g) => groupRow(index, g, selected, select));
  return h("div", { class: "etp-list" }, rows.length ? rows : [h("div", { class: "etp-dim" }, "no hidden groups")]);
}

/** One hidden group's row. @param {Index} _index @param {any} g @param {Selection} selected @param {(s: Selection) => void} select */
export function groupRow(_index, g, selected, select) {
  const active = selected && selected.kind === "group" && selected.id === String(g.index);
  return h("div", { class: `etp-row etp-group${active ? " active" : ""}`, "data-group": String(g.index),
    onclick: () => select({ kind: "group", id: String(g.index) }) },
  h("b", {}, `group ${g.index}`), " ", (g.hidden_paths || []).join(" + "),
  h("span", { class: "etp-dim" }, ` · ${g.num_state} state${g.num_state === 1 ? "" : "s"}` +
    (g.varshape ? ` · [${g.varshape.join(", ")}]` : "")));
}

export function diagnosticsPanel(/** @type {Index} */ index, /** @type {Selection} */ selected, /** @type {(s: Selection) => void} */ select) {
  const rows = [...index.diagnostics.values()].map((d) => diagnosticRow(index, d, selected, select));
  return h("div", { class: "etp-list" }, rows.length ? rows : [h("div", { class: "etp-dim" }, "no diagnostics")]);
}

/** One diagnostic's row. @param {Index} _index @param {any} d @param {Selection} selected @param {(s: Selection) => void} select */
export function diagnosticRow(_index, d, selected, select) {
  const active = selected && selected.kind === "diagnostic" && selected.id === String(d.index);
  return h("div", { class: `etp-row etp-diag level-${d.level}${active ? " active" : ""}`, "data-diagnostic": String(d.index),
    onclick: () => select({ kind: "diagnostic", id: String(d.index) }) },
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
      table([["status", STATUS_TEXT[/** @type {keyof STATUS_TEXT} */ (w.status)] || w.status], ["groups", (w.groups || []).join(", ")],
        ["reason", w.reason], ["suggested fix", w.fix], ["boundary", (w.boundary_nodes || []).join(", ")]]));
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
