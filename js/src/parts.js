// @ts-check
/**
 * The view model in parts (docs/view-model.md, "Shell and parts"; Python:
 * etp_viz/explorer/parts.py). A big model's page first gets a shell: every node's ids and
 * cluster membership (enough to draw folded boxes, search and highlight), every weight without
 * its card's text. The records of the nodes an opened box draws, and a weight's card, come as
 * parts when needed, from a `PartSource`: the kernel (a `view_part` request) or, in a saved
 * page, the parts embedded beside the shell (`view_parts`). Either way the app asks the same
 * source the same thing, and merges what comes into the index it draws from.
 */
import { COLLAPSIBLE, clusterChain } from "./graph.js";

/** @typedef {import("./graph.js").Index} Index */
/** @typedef {import("./graph.js").VisibleGraph} VisibleGraph */
/** @typedef {{nodes: Record<string, any>, weights: Record<string, any>}} Parts  node id /
 *   weight path -> the fields the shell held back */
/** @typedef {{box?: string | null, nodes?: string[], weights?: string[]}} PartRequest  `box`:
 *   the opened box the nodes are drawn in (null: the top of the graph) */
/** @typedef {{nodes: Set<string>, weights: Set<string>}} Missing  records still to come */

/**
 * The records a view model still lacks: every node and weight of a shell (`vm.parts` set),
 * none of a whole view model.
 * @param {any} vm
 * @returns {Missing}
 */
export function missingRecords(vm) {
  if (!vm || !vm.parts) return { nodes: new Set(), weights: new Set() };
  return {
    nodes: new Set((vm.nodes || []).map((/** @type {any} */ n) => String(n.id))),
    weights: new Set((vm.weights || []).map((/** @type {any} */ w) => String(w.path))),
  };
}

/**
 * Merge a part into the index: each record gets the fields the shell held back, in place (the
 * objects the index, its level layouts and the panels hold), except a field it already has
 * (the viewer's `module` cluster of a node, ./graph.js withModules); its id leaves `missing`.
 * Merging the same part twice changes nothing.
 * @param {Index} index
 * @param {Missing} missing
 * @param {Parts} part
 */
export function mergePart(index, missing, part) {
  for (const [kind, records] of /** @type {const} */ ([["node", index.nodes], ["weight", index.weights]])) {
    const fields = part[kind === "node" ? "nodes" : "weights"] || {};
    for (const [id, held] of Object.entries(fields)) {
      const record = records.get(id);
      if (!record) throw new Error(`a view-model part brought ${kind} '${id}', which this view model lacks`);
      for (const [key, value] of Object.entries(held)) if (!(key in record)) record[key] = value;
      missing[kind === "node" ? "nodes" : "weights"].delete(id);
    }
  }
}

/**
 * What a visible graph draws whose records are still to come, by the opened box that holds
 * each (its innermost expanded `subjaxpr` or `module` cluster; "" for the top of the graph):
 * the drawn nodes and the weights they use (a weight op's tooltip and legend need its card).
 * @param {Index} index
 * @param {VisibleGraph} graph
 * @param {Missing} missing
 * @returns {Map<string, {nodes: string[], weights: string[]}>}
 */
export function missingDrawn(index, graph, missing) {
  /** @type {Map<string, {nodes: string[], weights: string[]}>} */
  const byBox = new Map();
  if (!missing.nodes.size && !missing.weights.size) return byBox;
  for (const item of graph.items) {
    const node = item.node;
    if (!node || !missing.nodes.has(node.id)) continue;
    const box = clusterChain(index.clusters, node.cluster).find((id) => COLLAPSIBLE.has(index.clusters.get(id).kind)) ?? "";
    let ask = byBox.get(box);
    if (!ask) byBox.set(box, ask = { nodes: [], weights: [] });
    ask.nodes.push(node.id);
    if (node.weight_path && missing.weights.has(node.weight_path) && !ask.weights.includes(node.weight_path)) ask.weights.push(node.weight_path);
  }
  return byBox;
}

/**
 * The part a request asks for, from parts the page already holds (a saved page's `view_parts`);
 * an unknown id is an error naming it, as the kernel's answer would be.
 * @param {Parts} parts
 * @param {PartRequest} request
 * @returns {Parts}
 */
export function pickPart(parts, request) {
  /** @type {Parts} */
  const part = { nodes: {}, weights: {} };
  for (const [kind, ids] of /** @type {const} */ ([["nodes", request.nodes || []], ["weights", request.weights || []]])) {
    for (const id of ids) {
      if (!(id in parts[kind])) throw new Error(`no ${kind.slice(0, -1)} '${id}' in this page's view-model parts`);
      part[kind][id] = parts[kind][id];
    }
  }
  return part;
}

/**
 * Where parts come from: `ask` answers a request (the kernel, or `pickPart` over embedded
 * parts). Each node and weight is asked for once: a second load waits on the first ask, and a
 * failed ask is forgotten (the next load asks again).
 */
export class PartSource {
  /** @param {(request: PartRequest) => Promise<Parts>} ask */
  constructor(ask) {
    this.ask = ask;
    /** @type {Map<string, Promise<Parts>>} */
    this.nodes = new Map();
    /** @type {Map<string, Promise<Parts>>} */
    this.weights = new Map();
    /** requests sent (tests count them) */
    this.asked = 0;
  }

  /**
   * The parts holding these nodes and weights (one object: the answers merged).
   * @param {PartRequest} request
   * @returns {Promise<Parts>}
   */
  async load({ box = null, nodes = [], weights = [] }) {
    const newNodes = nodes.filter((id) => !this.nodes.has(id));
    const newWeights = weights.filter((path) => !this.weights.has(path));
    if (newNodes.length || newWeights.length) {
      this.asked++;
      const asked = Promise.resolve().then(() => this.ask({ box, nodes: newNodes, weights: newWeights }));
      for (const [cache, ids] of /** @type {const} */ ([[this.nodes, newNodes], [this.weights, newWeights]])) {
        for (const id of ids) cache.set(id, asked);
        asked.catch(() => { for (const id of ids) if (cache.get(id) === asked) cache.delete(id); });
      }
    }
    const answers = new Set([...nodes.map((id) => this.nodes.get(id)), ...weights.map((path) => this.weights.get(path))]);
    /** @type {Parts} */
    const merged = { nodes: {}, weights: {} };
    for (const part of await Promise.all(answers)) {
      Object.assign(merged.nodes, (part && part.nodes) || {});
      Object.assign(merged.weights, (part && part.weights) || {});
    }
    return merged;
  }
}

/**
 * The page's part source: the parts embedded in a saved page (`view_parts`), else the kernel.
 * @param {Parts | null | undefined} embedded
 * @param {(method: string, params: any) => Promise<any>} request  a request to Python
 */
export function partSource(embedded, request) {
  if (embedded) return new PartSource(async (asked) => pickPart(embedded, asked));
  return new PartSource((asked) => request("view_part", asked));
}

/**
 * Ask for the records the visible graph draws that a shell held back, one part per opened
 * box, and merge them into the index; the boxes that asked are marked as loading
 * (`data-part-loading` on the collapsed box still on screen, and on the page's root with the
 * box ids) and the status line says so until their part is here. Then the inspector and the
 * weight detail are drawn again (a selected node or weight may have come with the box).
 * @param {any} app  the ExplorerApp (./index.js): missing, parts, view, root, statusEl, index
 * @param {Index} index
 * @param {VisibleGraph} graph
 */
export async function loadDrawn(app, index, graph) {
  const wanted = missingDrawn(index, graph, app.missing);
  if (!wanted.size) return;
  const boxes = [...wanted.keys()].filter(Boolean);
  const marked = boxes.map((id) => `k${index.clusterOrdinal.get(id)}`);
  const names = boxes.map((id) => String(index.clusters.get(id).label)).join(", ") || "the graph";
  app.view.markLoading(marked, true);
  app.root.setAttribute("data-part-loading", boxes.join(" ") || "root");
  app.statusEl.textContent = `loading ${names}…`;
  try {
    const parts = await Promise.all([...wanted].map(([box, ask]) => app.parts.load({ box: box || null, ...ask })));
    if (index !== app.index) return;
    for (const part of parts) mergePart(index, app.missing, part);
  } finally {
    app.view.markLoading(marked, false);
    app.root.removeAttribute("data-part-loading");
  }
  app.renderInspector();
  app.markSelection();
}

/**
 * A selected weight's card, or a selected node's record, that the shell held back: asked
 * for, merged, then the inspector and the weight detail are drawn again with it.
 * @param {any} app  the ExplorerApp (./index.js)
 * @param {import("./types.js").Selection} selected
 */
export async function loadSelected(app, selected) {
  const index = app.index, missing = app.missing;
  if (!index || !missing || !selected || selected.id == null) return;
  const id = String(selected.id);
  const ask = selected.kind === "weight" && missing.weights.has(id) ? { weights: [id] }
    : selected.kind === "node" && missing.nodes.has(id) ? { nodes: [id] } : null;
  if (!ask) return;
  const part = await app.parts.load(ask);
  if (index !== app.index) return;
  mergePart(index, missing, part);
  app.renderInspector();
  app.markSelection();
}
