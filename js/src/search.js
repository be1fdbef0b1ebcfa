// @ts-check
/** Regex search over primitives, labels, var names, weight and state paths (`search`: pure),
 * and the search box's results panel (`searchPanel`). */
import { h, fill } from "./dom.js";

/** @typedef {{kind: string, id: string, node: string | null, text: string}} SearchResult */

/**
 * @param {import("./graph.js").Index} index
 * @param {string} pattern  a JavaScript regular expression (case-insensitive)
 * @param {number} [limit]
 * @returns {SearchResult[]}  throws SyntaxError for an invalid pattern
 */
export function search(index, pattern, limit = 200) {
  if (!pattern) return [];
  const re = new RegExp(pattern, "i");
  /** @type {SearchResult[]} */
  const results = [];
  const seen = new Set();
  const hit = (/** @type {SearchResult} */ r) => {
    const key = `${r.kind}:${r.id}`;
    if (seen.has(key) || results.length >= limit) return;
    seen.add(key);
    results.push(r);
  };
  // a big graph (tens of thousands of nodes and edges): the scan stops at `limit` results
  for (const w of index.weights.values()) {
    if (results.length >= limit) return results;
    if (re.test(w.path)) hit({ kind: "weight", id: w.path, node: (w.node_ids || []).find((n) => index.nodes.get(n)?.kind !== "param") || null, text: `weight ${w.path} (${w.status})` });
  }
  for (const g of index.groups.values()) {
    if (results.length >= limit) return results;
    if ((g.hidden_paths || []).some((p) => re.test(p))) hit({ kind: "group", id: String(g.index), node: (g.transition_nodes || [])[0] || null, text: `group ${g.index}: ${(g.hidden_paths || []).join(", ")}` });
  }
  for (const n of index.vm.nodes) {
    if (results.length >= limit) return results;
    const fields = [n.primitive, n.label, n.weight_path, n.hidden_path].filter((f) => f != null);
    if (fields.some((f) => re.test(String(f)))) {
      hit({ kind: "node", id: n.id, node: n.id, text: `${n.id} ${n.primitive || n.kind} ${n.weight_path || n.hidden_path || ""}`.trim() });
    }
  }
  for (const e of index.vm.edges) {
    if (results.length >= limit) return results;
    if (e.var != null && re.test(String(e.var))) hit({ kind: "edge", id: e.id, node: e.target, text: `var ${e.var}: ${e.aval || ""} (${e.source} → ${e.target})` });
  }
  return results;
}

/**
 * Search for the box's pattern and show the results (a click jumps to one) or why there are
 * none in the search section; returns the results (Enter in the box jumps to the first).
 * @param {any} app  the ExplorerApp (./index.js): index, view, guard, jumpTo
 * @param {HTMLInputElement} input
 * @param {HTMLElement} section
 * @param {HTMLElement} body
 * @returns {SearchResult[]}
 */
export function searchPanel(app, input, section, body) {
  const pattern = input.value;
  input.classList.remove("invalid");
  if (!pattern || !app.index) { section.hidden = true; app.view.highlight(new Map()); return []; }
  let results;
  try {
    results = search(app.index, pattern);
  } catch (error) {
    input.classList.add("invalid");
    fill(body, [h("div", { class: "etp-dim" }, `invalid regular expression: ${/** @type {any} */ (error).message}`)]);
    section.hidden = false;
    return [];
  }
  section.hidden = false;
  fill(body, [h("div", { class: "etp-results" },
    results.length ? results.map((r) => h("div", { class: "etp-row", "data-result": `${r.kind}:${r.id}`,
      onclick: () => app.guard(() => app.jumpTo(r)) }, r.text)) : [h("div", { class: "etp-dim" }, "no match")])]);
  return results;
}
