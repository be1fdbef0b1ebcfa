// @ts-check
/** What to highlight for a selection, in view-model ids and then in DOT ids. Pure. */

/** @typedef {import("./graph.js").Index} Index */
/** @typedef {import("./graph.js").VisibleGraph} VisibleGraph */

/**
 * @param {Index} index
 * @param {import("./types.js").Selection | null | undefined} highlight
 * @returns {{nodes: Map<string,string>, edges: Map<string,string>, clusters: Map<string,string>, focus: string[]}}
 */
export function highlightSets(index, highlight) {
  const nodes = new Map();
  const edges = new Map();
  const clusters = new Map();
  const add = (/** @type {Map<string,string>} */ map, /** @type {string[]|undefined} */ ids, /** @type {string} */ cls) => {
    for (const id of ids || []) if (!map.has(id)) map.set(id, cls);
  };
  const kind = highlight && highlight.kind;
  const id = highlight && highlight.id != null ? String(highlight.id) : "";
  if (kind === "weight" && index.weights.has(id)) {
    const w = index.weights.get(id);
    add(nodes, w.boundary_nodes, "hl-boundary");
    add(nodes, w.node_ids, "hl-selected");
    add(nodes, w.path_nodes, "hl-path");
    add(edges, w.path_edges, "hl-path");
  } else if (kind === "group" && index.groups.has(id)) {
    const g = index.groups.get(id);
    if (g.cluster) clusters.set(g.cluster, "hl-cluster");
    add(nodes, g.transition_nodes, "hl-transition");
    add(edges, g.transition_edges, "hl-transition");
  } else if (kind === "relation" && index.relations.has(id)) {
    const r = index.relations.get(id);
    add(nodes, [r.node], "hl-selected");
    add(nodes, r.slice_nodes, "hl-slice");
    add(edges, r.slice_edges, "hl-slice");
  } else if (kind === "diagnostic" && index.diagnostics.has(id)) {
    add(nodes, index.diagnostics.get(id).node_ids, "hl-selected");
  } else if (kind === "node" && index.nodes.has(id)) {
    nodes.set(id, "hl-selected");
  } else if (kind === "cluster" && index.clusters.has(id)) {
    clusters.set(id, "hl-cluster");
  } else if (kind === "edge" && index.edges.has(id)) {
    edges.set(id, "hl-selected");
  } else if (kind === "nodes") {
    add(nodes, (highlight && highlight.node_ids) || [], "hl-selected");
  }
  const focus = [...nodes.keys()].filter((n) => index.nodes.has(n));
  return { nodes, edges, clusters, focus };
}

/**
 * Map highlight sets onto the DOT ids of a visible graph (collapsed clusters stand in for the
 * nodes they hide). The first class wins when several elements share one DOT element.
 * @param {ReturnType<typeof highlightSets>} sets
 * @param {VisibleGraph} graph
 * @returns {Map<string, string>} DOT id -> CSS class
 */
export function highlightDotIds(sets, graph) {
  const result = new Map();
  const put = (/** @type {string|undefined} */ dotId, /** @type {string} */ cls) => {
    if (dotId && !result.has(dotId)) result.set(dotId, cls);
  };
  for (const [id, cls] of sets.nodes) put(graph.nodeToDot.get(id), cls);
  for (const [id, cls] of sets.edges) put(graph.edgeToDot.get(id), cls);
  for (const [id, cls] of sets.clusters) put(graph.clusterToDot.get(id), cls);
  return result;
}
