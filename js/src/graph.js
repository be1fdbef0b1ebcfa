// @ts-check
/**
 * The graph for one expansion state: which nodes are visible (collapsed sub-jaxpr clusters
 * become single nodes), the DOT text for it, and the mapping between DOT ids and view-model
 * ids. Pure functions, no DOM: tested with `node --test`.
 */
import { COLORS, NODE_FONT_SIZE, formatAttrs, dotHeader, itemStatement, clusterStatement, edgeAttrs, nodeKey, edgeKey, boxKey } from "./dot-style.js";

export { COLORS, NODE_FONT_SIZE, nodeKey, nodeStyle, edgeKey, drawnKeys } from "./dot-style.js";

/** @typedef {import("./types.js").ViewModel} ViewModel */
/** @typedef {import("./types.js").VMNode} VMNode */

/** Smallest on-screen size (px) of a node label in a first view that shows a part of the
 * graph (a graph too big to fit; at text scale 1). */
export const MIN_LABEL_PX = 10.5;

/** Cluster kinds the viewer collapses to one node ("branch" clusters only with their parent). */
export const COLLAPSIBLE = new Set(["subjaxpr", "module", "cell"]);
const MODULES_PER_RANGE = 16;

/**
 * Index a view model once: maps by id, cluster tree, annotation sets. When the top level
 * would draw more than `moduleThreshold` nodes (a big flat model: jit bodies are inlined),
 * the viewer adds collapsible `module` clusters `m:<module path>` (see `withModules`).
 * @param {ViewModel} vm
 * @param {{moduleThreshold?: number}} [options]
 */
export function indexViewModel(vm, options = {}) {
  return runSteps(indexSteps(vm, options));
}

/**
 * `indexViewModel` as a step generator: it yields every few dozen items so that
 * `runSliced` can spread the work of a big model (thousands of nodes) over short tasks.
 * @param {ViewModel} vm
 * @param {{moduleThreshold?: number}} [options]
 * @returns {Generator<undefined, Index>}
 */
export function* indexSteps(vm, options = {}) {
  if (!vm || !Array.isArray(vm.nodes) || !Array.isArray(vm.edges)) {
    throw new Error("view model: expected an object with 'nodes' and 'edges' arrays");
  }
  const index = yield* buildIndexSteps(vm);
  const threshold = options.moduleThreshold ?? 150;
  if ((yield* visibleGraphSteps(index, [])).nodeCount <= threshold) return index;
  const grouped = yield* withModulesSteps(index);
  return grouped ? yield* buildIndexSteps(grouped) : index;
}

/** Items a step generator handles between two yields. */
const STEP = 64;

/** Run a step generator to completion on the spot. */
export function runSteps(/** @type {Generator<any, any>} */ steps) {
  let next = steps.next();
  while (!next.done) next = steps.next();
  return next.value;
}

/**
 * Run a step generator in slices of at most about `budgetMs`, awaiting `pause()` (e.g. the
 * next frame) between slices, so the UI thread never blocks for long.
 * @template T
 * @param {Generator<any, T>} steps
 * @param {() => Promise<any>} pause
 * @param {{budgetMs?: number, isCurrent?: () => boolean}} [control]
 * @returns {Promise<T | undefined>} undefined when `isCurrent()` turned false
 */
export async function runSliced(steps, pause, control = {}) {
  const budget = control.budgetMs ?? 8;
  let start = performance.now();
  let next = steps.next();
  while (!next.done) {
    if (performance.now() - start > budget) {
      await pause();
      if (control.isCurrent && !control.isCurrent()) return undefined;
      start = performance.now();
    }
    next = steps.next();
  }
  return next.value;
}

/** @param {ViewModel} vm */
function* buildIndexSteps(vm) {
  const nodes = new Map(vm.nodes.map((n) => [n.id, n]));
  const edges = new Map(vm.edges.map((e) => [e.id, e]));
  const clusters = new Map((vm.clusters || []).map((c) => [c.id, c]));
  yield;
  /** @type {Map<string, number>} eqn count under each cluster (for collapsed labels) */
  const clusterSize = new Map();
  let tick = 0;
  for (const n of vm.nodes) {
    if (++tick % STEP === 0) yield;
    for (const c of clusterChain(clusters, n.cluster)) {
      clusterSize.set(c, (clusterSize.get(c) || 0) + 1);
    }
  }
  const weights = new Map((vm.weights || []).map((w) => [w.path, w]));
  const groups = new Map((vm.groups || []).map((g) => [String(g.index), g]));
  const relations = new Map((vm.relations || []).map((r) => [r.id, r]));
  const diagnostics = new Map((vm.diagnostics || []).map((d) => [String(d.index), d]));
  const union = (/** @type {any[]} */ items, /** @type {string} */ key) =>
    new Set(items.flatMap((item) => item[key] || []));
  const annotations = {
    sliceEdges: union(vm.relations || [], "slice_edges"),
    transitionEdges: union(vm.groups || [], "transition_edges"),
    readoutEdges: union(vm.readouts || [], "path_edges"),
    bypassEdges: union(vm.bypasses || [], "path_edges"),
    boundaryNodes: union(vm.weights || [], "boundary_nodes"),
    droppedEdges: union(vm.weights || [], "dropped_edges"),
    perturbNodes: new Set((vm.perturbations || []).map((p) => p.node)),
  };
  const palette = { ...COLORS, ...(vm.palette || {}) };
  // the light theme's colours (the app switches `colours` with ./theme.js when the theme is dark)
  const colours = Object.fromEntries(Object.entries(palette).filter(([name]) => !name.startsWith("dark.")));
  const clusterOrdinal = new Map([...clusters.keys()].map((id, i) => [id, i]));
  return { vm, nodes, edges, clusters, clusterOrdinal, clusterSize, weights, groups, relations, diagnostics,
    annotations, palette, colours };
}

/**
 * @typedef {{vm: ViewModel, nodes: Map<string, VMNode>, edges: Map<string, any>,
 *   clusters: Map<string, any>, clusterOrdinal: Map<string, number>, clusterSize: Map<string, number>, weights: Map<string, any>,
 *   groups: Map<string, any>, relations: Map<string, any>, diagnostics: Map<string, any>,
 *   annotations: {sliceEdges: Set<string>, transitionEdges: Set<string>, readoutEdges: Set<string>, bypassEdges: Set<string>,
 *   boundaryNodes: Set<string>, droppedEdges: Set<string>, perturbNodes: Set<string>},
 *   palette: Record<string, string>, colours: Record<string, string>}} Index  `colours`: the current
 *   theme's (the app sets them with ./theme.js themeColours when the theme changes);
 *   `clusterOrdinal`: each cluster's position (its DOT ids `k<i>` / `s<i>`)
 */

/** The module path owning a state path (`layers.3.h` -> `layers.3`). */
function parentPath(/** @type {string} */ path, drop = 1) {
  const parts = path.split(".");
  return parts.slice(0, Math.max(parts.length - drop, 0)).join(".");
}

/**
 * A copy of the view model with viewer-made `module` clusters: every top-level unit (a node
 * outside sub-jaxprs, or a top-level sub-jaxpr cluster) goes to the module of the state paths
 * it touches (hidden/state nodes by their path, ETP equations by their weight's path), other
 * equations to the latest module among their inputs (else the earliest among their
 * consumers). Group clusters and top-level sub-jaxpr clusters nest inside their module.
 * Returns null when fewer than two modules are found (nothing to gain).
 * @param {Index} index
 */
export function withModules(index) {
  return runSteps(withModulesSteps(index));
}

/** `withModules` as a step generator (see `runSliced`). @param {Index} index */
function* withModulesSteps(index) {
  const vm = index.vm;
  let tick = 0;
  const hiddenModules = new Set();
  for (const n of vm.nodes) {
    if (++tick % STEP === 0) yield;
    const path = n.hidden_path || /** @type {any} */ (n).state_path;
    if (path) hiddenModules.add(parentPath(path));
  }
  const moduleOfWeight = (/** @type {string} */ path) => {
    for (let m = parentPath(path); m; m = parentPath(m)) if (hiddenModules.has(m)) return m;
    return parentPath(path, 2);
  };
  /** top unit of a node: its outermost cluster when that is a sub-jaxpr, else itself */
  const topCluster = new Map();
  for (const c of index.clusters.values()) {
    if (++tick % STEP === 0) yield;
    const chain = clusterChain(index.clusters, c.id);
    const top = index.clusters.get(chain[chain.length - 1]);
    topCluster.set(c.id, top.kind !== "group" ? top.id : null);
  }
  const unitOf = (/** @type {VMNode} */ n) => (n.cluster && topCluster.get(n.cluster)) || n.id;
  /** @type {Map<string, string>} unit -> module path */
  const module = new Map();
  /** @type {Map<string, number>} unit -> order (top-level equation index) */
  const order = new Map();
  const SOURCES = new Set(["input", "hidden_in", "state_in", "param"]);
  const rank = (/** @type {VMNode} */ n) => n.eqn_index ?? (SOURCES.has(n.kind) ? -1 : Infinity);
  /** @type {Map<string, number>} */
  const ranks = new Map();
  for (const n of vm.nodes) {
    if (++tick % STEP === 0) yield;
    ranks.set(n.id, rank(n));
  }
  const sorted = [...vm.nodes].sort((a, b) => (ranks.get(a.id) ?? 0) - (ranks.get(b.id) ?? 0));
  yield;
  for (const n of sorted) {
    if (++tick % STEP === 0) yield;
    const unit = unitOf(n);
    if (!order.has(unit)) order.set(unit, ranks.get(n.id) ?? 0);
    if (module.has(unit)) continue;
    const path = n.hidden_path || /** @type {any} */ (n).state_path;
    if (path) module.set(unit, parentPath(path));
    else if (n.etp && n.weight_path) module.set(unit, moduleOfWeight(n.weight_path));
    else if (n.kind === "param") module.set(unit, moduleOfWeight(n.id.slice(2)));
  }
  const moduleOrder = new Map();
  for (const [unit, m] of module) moduleOrder.set(m, Math.min(moduleOrder.get(m) ?? Infinity, order.get(unit) ?? Infinity));
  const preds = new Map();
  const succs = new Map();
  for (const e of vm.edges) {
    if (++tick % STEP === 0) yield;
    const s = index.nodes.get(e.source), t = index.nodes.get(e.target);
    if (!s || !t) continue;
    const su = unitOf(s), tu = unitOf(t);
    if (su === tu) continue;
    if (!preds.has(tu)) preds.set(tu, []);
    preds.get(tu).push(su);
    if (!succs.has(su)) succs.set(su, []);
    succs.get(su).push(tu);
  }
  const units = [...order.keys()].sort((a, b) => (order.get(a) ?? 0) - (order.get(b) ?? 0));
  const pick = (/** @type {string[]} */ others, /** @type {number} */ sign) => {
    let best = null;
    for (const u of others) {
      const m = module.get(u);
      if (m == null) continue;
      if (best == null || sign * ((moduleOrder.get(m) ?? 0) - (moduleOrder.get(best) ?? 0)) > 0) best = m;
    }
    return best;
  };
  yield;
  for (const u of units) {
    if (++tick % STEP === 0) yield;
    if (!module.has(u)) { const m = pick(preds.get(u) || [], 1); if (m != null) module.set(u, m); }
  }
  for (const u of [...units].reverse()) {
    if (++tick % STEP === 0) yield;
    if (!module.has(u)) { const m = pick(succs.get(u) || [], -1); if (m != null) module.set(u, m); }
  }
  const names = [...new Set([...module.values()].filter(Boolean))];
  if (names.length < 2) return null;
  /** a module the view model already folds as a top-level cell is its own box */
  const cellOf = new Map();
  for (const c of index.clusters.values()) if (c.kind === "cell" && !c.parent && c.module_path) cellOf.set(c.module_path, c.id);
  const idOf = (/** @type {string|undefined} */ m) => (m ? cellOf.get(m) ?? `m:${m}` : null);
  yield;
  const nodes = [];
  for (const n of vm.nodes) {
    if (++tick % STEP === 0) yield;
    nodes.push(n.cluster ? n : { ...n, cluster: idOf(module.get(n.id)) });
  }
  /** @type {Map<string, Set<string|undefined>>} group cluster -> modules of its members */
  const groupModules = new Map();
  for (const n of vm.nodes) {
    if (++tick % STEP === 0) yield;
    if (!n.cluster || index.clusters.get(n.cluster)?.kind !== "group") continue;
    if (!groupModules.has(n.cluster)) groupModules.set(n.cluster, new Set());
    groupModules.get(n.cluster)?.add(module.get(n.id));
  }
  names.sort((a, b) => (moduleOrder.get(a) ?? 0) - (moduleOrder.get(b) ?? 0));
  // Many modules (a deep stack): ranges of MODULES_PER_RANGE modules, one more level.
  /** @type {Map<string, string|null>} */
  const rangeOf = new Map();
  /** @type {any[]} */
  const added = [];
  const perRange = names.length > MODULES_PER_RANGE * 2 ? MODULES_PER_RANGE : Infinity;
  for (let i = 0; i < names.length; i += perRange) {
    const part = names.slice(i, i + perRange);
    const rangeId = perRange === Infinity ? null : `m:${part[0]}…${part[part.length - 1]}`;
    if (rangeId) added.push({ id: rangeId, kind: "module", label: `${part[0]} … ${part[part.length - 1]} (${part.length} modules)`, parent: null, collapsed: true });
    for (const m of part) {
      rangeOf.set(m, rangeId);
      if (!cellOf.has(m)) added.push({ id: `m:${m}`, kind: "module", label: m, parent: rangeId, collapsed: true });
    }
  }
  const clusters = (vm.clusters || []).map((c) => {
    if (c.parent) return c;
    if (c.kind === "cell" && cellOf.get(c.module_path) === c.id) return { ...c, parent: rangeOf.get(c.module_path) ?? null };
    if (c.kind === "group") {
      const members = [...(groupModules.get(c.id) || [])];
      return { ...c, parent: members.length === 1 ? idOf(members[0]) : null };
    }
    return { ...c, parent: idOf(module.get(c.id)) };
  });
  return { ...vm, nodes, clusters: [...clusters, ...added] };
}

/** Cluster ids from the innermost outwards. */
export function clusterChain(/** @type {Map<string, any>} */ clusters, /** @type {string|null|undefined} */ id) {
  const chain = [];
  const seen = new Set();
  while (id && clusters.has(id) && !seen.has(id)) {
    seen.add(id);
    chain.push(id);
    id = clusters.get(id).parent;
  }
  return chain;
}

/** The initial expansion state: sub-jaxpr clusters the view model marks as not collapsed. */
export function initialExpanded(/** @type {ViewModel} */ vm) {
  return (vm.clusters || [])
    .filter((c) => c.kind === "subjaxpr" && c.collapsed === false)
    .map((c) => c.id);
}

/** A pane at least this much wider than tall lays "auto" graphs out left to right. */
export const WIDE_PANE = 1.3;

/**
 * The layout direction for `rankdir` ("TB" | "LR" | "auto", default "auto"): "auto" is "LR"
 * in a wide pane (graphs are chains of operations: along the pane's long side they are drawn
 * larger) and "TB" otherwise.
 * @param {string | undefined} rankdir
 * @param {{width: number, height: number}} pane
 */
export function resolveRankdir(rankdir, pane) {
  if (rankdir === "TB" || rankdir === "LR") return rankdir;
  return pane.width > WIDE_PANE * pane.height ? "LR" : "TB";
}

/** A stable cache key for an expansion state plus the options that change the layout. */
export function layoutKey(/** @type {Iterable<string>} */ expanded, /** @type {any} */ options = {}) {
  return JSON.stringify([[...expanded].sort(), options.rankdir || "TB", !!options.show_params,
    options.font_size || NODE_FONT_SIZE, options.theme || "light"]);
}

/** The outermost collapsed sub-jaxpr cluster hiding `clusterId` (or null when visible). */
function collapsedOwner(/** @type {Index} */ index, /** @type {string|null|undefined} */ clusterId, /** @type {Set<string>} */ expanded) {
  let owner = null;
  for (const id of clusterChain(index.clusters, clusterId)) {
    const c = index.clusters.get(id);
    if (COLLAPSIBLE.has(c.kind) && !expanded.has(id)) owner = id;
  }
  return owner;
}

/** Expansion state that makes `nodeId` visible. */
export function expandedToShow(/** @type {Index} */ index, /** @type {string} */ nodeId, /** @type {Iterable<string>} */ expanded) {
  const result = new Set(expanded);
  const node = index.nodes.get(nodeId);
  const start = node ? node.cluster : index.clusters.has(nodeId) ? index.clusters.get(nodeId).parent : null;
  for (const id of clusterChain(index.clusters, start)) {
    if (COLLAPSIBLE.has(index.clusters.get(id).kind)) result.add(id);
  }
  return [...result];
}

/**
 * The visible graph for an expansion state.
 * @param {Index} index
 * @param {Iterable<string>} expandedIds
 * @param {{show_params?: boolean}} [options]
 */
export function visibleGraph(index, expandedIds, options = {}) {
  return runSteps(visibleGraphSteps(index, expandedIds, options));
}

/**
 * `visibleGraph` as a step generator (see `runSliced`). DOT ids are the same in every
 * expansion state: `n<i>` for the i-th view-model node, `k<i>` / `s<i>` for the i-th cluster
 * (collapsed / drawn as a box), `x<i>` for the drawn edge whose first view-model edge is the
 * i-th; a level laid out once (./hierarchy.js) keeps its ids when the rest of the graph changes.
 * @param {Index} index
 * @param {Iterable<string>} expandedIds
 * @param {{show_params?: boolean}} [options]
 */
export function* visibleGraphSteps(index, expandedIds, options = {}) {
  const expanded = new Set(expandedIds);
  let tick = 0;
  /** @type {Map<string, string>} view-model node id -> DOT id of what represents it */
  const nodeToDot = new Map();
  /** @type {Map<string, {type: string, id: string}>} DOT id -> view-model element */
  const dotToVm = new Map();
  /** @type {{dotId: string, node?: VMNode, cluster?: any, parent: string|null}[]} */
  const items = [];
  const collapsedDot = new Map();
  /** @type {Map<string, string|null>} cluster -> outermost collapsed cluster hiding it */
  const ownerOf = new Map();
  for (const c of index.clusters.keys()) {
    if (++tick % STEP === 0) yield;
    ownerOf.set(c, collapsedOwner(index, c, expanded));
  }
  const vmNodes = index.vm.nodes;
  for (let i = 0; i < vmNodes.length; i++) {
    const node = vmNodes[i];
    if (++tick % STEP === 0) yield;
    if (node.kind === "param" && !options.show_params) continue;
    const owner = node.cluster ? ownerOf.get(node.cluster) ?? null : null;
    if (owner) {
      if (!collapsedDot.has(owner)) {
        const dotId = `k${index.clusterOrdinal.get(owner)}`;
        collapsedDot.set(owner, dotId);
        dotToVm.set(dotId, { type: "cluster", id: owner });
        items.push({ dotId, cluster: index.clusters.get(owner), parent: index.clusters.get(owner).parent });
      }
      nodeToDot.set(node.id, collapsedDot.get(owner));
    } else {
      const dotId = `n${i}`;
      nodeToDot.set(node.id, dotId);
      dotToVm.set(dotId, { type: "node", id: node.id });
      items.push({ dotId, node, parent: node.cluster || null });
    }
  }
  /** visible clusters (expanded sub-jaxprs and groups whose ancestors are all expanded) */
  const clusterToDot = new Map();
  for (const c of index.clusters.values()) {
    if (ownerOf.get(c.id)) continue;
    const dotId = `s${index.clusterOrdinal.get(c.id)}`;
    clusterToDot.set(c.id, dotId);
    dotToVm.set(dotId, { type: "cluster", id: c.id });
  }
  for (const [clusterId, dotId] of collapsedDot) clusterToDot.set(clusterId, dotId);
  /** @type {Map<string, {dotId: string, source: string, target: string, vmIds: string[]}>} */
  const edgeByPair = new Map();
  const edgeToDot = new Map();
  const vmEdges = index.vm.edges;
  for (let i = 0; i < vmEdges.length; i++) {
    const edge = vmEdges[i];
    if (++tick % STEP === 0) yield;
    const source = nodeToDot.get(edge.source);
    const target = nodeToDot.get(edge.target);
    if (!source || !target || source === target) continue;
    const pair = `${source}>${target}`;
    let entry = edgeByPair.get(pair);
    if (!entry) {
      entry = { dotId: `x${i}`, source, target, vmIds: [] };
      edgeByPair.set(pair, entry);
      dotToVm.set(entry.dotId, { type: "edge", id: edge.id });
    }
    entry.vmIds.push(edge.id);
    edgeToDot.set(edge.id, entry.dotId);
  }
  const edgeByDot = new Map([...edgeByPair.values()].map((e) => [e.dotId, e]));
  return { expanded, items, edges: [...edgeByPair.values()], edgeByDot, nodeToDot, edgeToDot, clusterToDot,
    dotToVm, nodeCount: items.length };
}

/**
 * @typedef {{expanded: Set<string>, items: {dotId: string, node?: VMNode, cluster?: any, parent: string|null}[],
 *   edges: {dotId: string, source: string, target: string, vmIds: string[]}[],
 *   edgeByDot: Map<string, {dotId: string, source: string, target: string, vmIds: string[]}>,
 *   nodeToDot: Map<string, string>, edgeToDot: Map<string, string>, clusterToDot: Map<string, string>,
 *   dotToVm: Map<string, {type: string, id: string}>, nodeCount: number}} VisibleGraph
 */

/**
 * Drawn graphs with more nodes than this are laid out level by level (./hierarchy.js: each
 * opened box on its own, cached, placed in its box) instead of in one Graphviz call. Measured
 * with bench/explorer_render.py --open-box (make_deep_stack models, headless Chromium on a
 * loaded 2-core VM; bench/results/explorer_render.json, "threshold" entries): opening a box
 * took 0.46-0.82 s at 565 drawn nodes in one call; at 1,065 nodes 0.79-1.06 s in one call and
 * 0.06-0.14 s level by level; at 8,000 nodes 10-11 s in one call and 0.3-0.4 s level by level.
 * Level by level, a drawing is less compact (ranks are not aligned across boxes, each box has
 * a rank for the edges crossing its border) and laying everything out at once costs more at
 * this size (1.8-2.7 s against 1.3-1.9 s at 1,065 nodes; 4.7-5.3 s against 12-37 s at 8,000):
 * below it, one call and the drawing as it was (a first folded view is far below).
 * The `level_layout_min_nodes` option (JS only: benchmarks, tests) moves the threshold.
 */
export const LEVEL_LAYOUT_MIN_NODES = 1000;

/**
 * @typedef {{levels: true, index: Index, graph: VisibleGraph, options: any}} LevelsInput
 *   what ./layout.js LayoutClient.layout lays out level by level (see LEVEL_LAYOUT_MIN_NODES)
 */

/**
 * DOT text for a visible graph, laid out in one Graphviz call. Node names are generated (n0,
 * k0, ...); user strings only appear escaped inside quoted labels.
 * @param {Index} index
 * @param {VisibleGraph} graph
 * @param {{rankdir?: string, large_graph_threshold?: number}} [options]
 */
export function toDot(index, graph, options = {}) {
  return runSteps(flatDotSteps(index, graph, options));
}

/**
 * The layout input for a visible graph as a step generator (yields every STEP nodes or edges:
 * the DOT text of thousands of nodes took ~80 ms in one task): `dot` is the DOT text of the
 * whole graph (`toDot`), or, above LEVEL_LAYOUT_MIN_NODES drawn nodes, a `LevelsInput` that
 * ./layout.js lays out level by level.
 * @param {Index} index
 * @param {VisibleGraph} graph
 * @param {{rankdir?: string, large_graph_threshold?: number, font_size?: number, level_layout_min_nodes?: number}} [options]
 * @returns {Generator<undefined, {dot: string | LevelsInput, large: boolean}>}
 */
export function* toDotSteps(index, graph, options = {}) {
  if (graph.nodeCount > (options.level_layout_min_nodes ?? LEVEL_LAYOUT_MIN_NODES)) {
    return { dot: { levels: true, index, graph, options }, large: true };
  }
  return yield* flatDotSteps(index, graph, options);
}

/**
 * `toDot` as a step generator.
 * @param {Index} index
 * @param {VisibleGraph} graph
 * @param {{rankdir?: string, large_graph_threshold?: number, font_size?: number}} options
 * @returns {Generator<undefined, {dot: string, large: boolean}>}
 */
function* flatDotSteps(index, graph, options) {
  const large = graph.nodeCount > (options.large_graph_threshold ?? 150);
  const out = ["digraph G {", ...dotHeader(index, options, large)];
  /** @type {Map<string|null, string[]>} lines per visible cluster (null = root) */
  const body = new Map([[null, []]]);
  const parentOf = (/** @type {string|null} */ clusterId) => {
    // innermost visible cluster at or above clusterId
    for (const id of clusterChain(index.clusters, clusterId)) {
      if (graph.clusterToDot.has(id) && graph.clusterToDot.get(id)?.startsWith("s")) return id;
    }
    return null;
  };
  let tick = 0;
  for (const item of graph.items) {
    if (++tick % STEP === 0) yield;
    const key = parentOf(item.parent);
    if (!body.has(key)) body.set(key, []);
    body.get(key)?.push(itemStatement(index, item));
  }
  /** @type {Map<string|null, any[]>} visible clusters under each cluster (null = root), in index order */
  const children = new Map();
  for (const c of index.clusters.values()) {
    const dotId = graph.clusterToDot.get(c.id);
    if (!dotId || !dotId.startsWith("s")) continue;
    const parent = c.parent || null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent)?.push(c);
  }
  yield;
  const emitCluster = (/** @type {string|null} */ clusterId, /** @type {string} */ indent) => {
    const lines = [];
    for (const c of children.get(clusterId) || []) {
      const dotId = graph.clusterToDot.get(c.id);
      if (!dotId) continue;
      lines.push(`${indent}subgraph cluster_${dotId} {`, `${indent}  ${clusterStatement(index, c, dotId, options)}`);
      for (const line of body.get(c.id) || []) lines.push(`${indent}  ${line}`);
      lines.push(...emitCluster(c.id, indent + "  "));
      lines.push(`${indent}}`);
    }
    return lines;
  };
  out.push(...(body.get(null) || []));
  out.push(...emitCluster(null, ""));
  for (const e of graph.edges) {
    if (++tick % STEP === 0) yield;
    out.push(`${e.source} -> ${e.target} [id="${e.dotId}" ${formatAttrs(edgeAttrs(index, e.vmIds))}];`);
  }
  out.push("}");
  return { dot: out.join("\n"), large };
}

/** Tooltip text (plain; the caller sets it with textContent) for a DOT id. */
export function tooltipFor(/** @type {Index} */ index, /** @type {VisibleGraph} */ graph, /** @type {string} */ dotId) {
  const ref = graph.dotToVm.get(dotId);
  if (!ref) return "";
  const legend = (/** @type {string} */ key) => (index.vm.legend || []).find((e) => e.key === key);
  if (ref.type === "node") {
    const n = index.nodes.get(ref.id);
    if (!n) return "";
    const entry = legend(nodeKey(n));
    const name = n.weight_path || n.hidden_path || n.state_path || n.label || n.primitive || n.id;
    const weight = n.weight_path ? index.weights.get(n.weight_path) : undefined;
    const avals = `${(n.in_avals || []).join(", ")} → ${(n.out_avals || []).join(", ")}`;
    // plain words first, then the codes (primitive, node id, shapes, source line)
    return [`${entry ? entry.label : n.kind}: ${name}`, weight && weight.summary, entry && entry.title, "",
      `${n.primitive || n.kind} · ${n.id}`, avals, n.source].filter((x) => x != null && x !== undefined).join("\n").replace(/\n{3,}/g, "\n\n");
  }
  if (ref.type === "edge") {
    const entry = graph.edgeByDot.get(dotId);
    const ids = entry ? entry.vmIds : [ref.id];
    const meaning = legend(edgeKey(index, ids));
    return [meaning ? `${meaning.label}: ${meaning.title || ""}` : "", ...ids.map((id) => {
      const e = index.edges.get(id);
      return e ? `value ${e.var ?? ""}: ${e.aval ?? ""}` : "";
    })].filter(Boolean).join("\n");
  }
  const c = index.clusters.get(ref.id);
  if (!c) return "";
  const folded = dotId.startsWith("k");
  const meaning = legend(c.kind === "cell" ? "cell" : folded ? "collapsed" : boxKey(c.kind));
  const cellLines = c.kind === "cell" ? [
    ...(c.ports || []).map((/** @type {string} */ w) => `weight ${w}: ${index.weights.get(w)?.status_text || ""}`),
    (c.hidden_paths || []).length ? `hidden state: ${(c.hidden_paths || []).join(", ")}` : ""] : [];
  return [`${c.label} (${index.clusterSize.get(c.id) || 0} operations)${folded ? " — click to expand" : ""}`,
    ...cellLines, meaning ? meaning.title : ""].filter(Boolean).join("\n");
}
