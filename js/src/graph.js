// @ts-check
/**
 * The graph for one expansion state: which nodes are visible (collapsed sub-jaxpr clusters
 * become single nodes), the DOT text for it, and the mapping between DOT ids and view-model
 * ids. Pure functions, no DOM: tested with `node --test`.
 */
import { escapeDot, truncate } from "./escape.js";

/** @typedef {import("./types.js").ViewModel} ViewModel */
/** @typedef {import("./types.js").VMNode} VMNode */

/**
 * The palette (colour name -> colour): the defaults mirror etp_viz/view/palette.py `COLOURS`;
 * a view model's own `palette` (sent by Python) wins, so the live page, the static SVG and the
 * legend draw with the same colours (`index.colours`).
 */
export const COLORS = {
  op_fill: "#ffffff", op_border: "#555555", etp: "#ffe08a", etp_border: "#b8860b",
  online: "#009e73", exact: "#2f6fd0", not_learned: "#cc3311", not_learned_fill: "#f6d0d0",
  hidden: "#cfe8ff", group_fill: "#f1f7ff", group_border: "#5b8fd0", state: "#eeeeee",
  io: "#e6e6e6", param: "#f7f7f7", perturb: "#2f6fd0", perturb_fill: "#d8e9f7",
  collapsed: "#f2f2f2", collapsed_border: "#777777", subjaxpr_border: "#888888",
  boundary: "#cc3311", edge: "#9a9a9a", slice: "#e8710a", transition: "#785ef0",
  readout: "#4a7fd4", bypass: "#a0522d", dropped: "#994f88",
  hl_selected: "#000000", hl_path: "#e8710a", hl_boundary: "#cc3311", hl_boundary_fill: "#ffd6d6",
  hl_cluster: "#5b8fd0", hl_transition: "#785ef0", hl_search: "#ff00aa",
  approximate: "#e69f00", focus: "#00a3c4", text: "#000000", background: "#ffffff",
};

/** Font size (points = SVG units) of node labels; the first view keeps them >= MIN_LABEL_PX. */
export const NODE_FONT_SIZE = 14;
/** Smallest on-screen size (px) of a node label in a first view that shows a part of the
 * graph (a graph too big to fit; at text scale 1). */
export const MIN_LABEL_PX = 10.5;

/** Cluster kinds the viewer collapses to one node ("branch" clusters only with their parent). */
export const COLLAPSIBLE = new Set(["subjaxpr", "module"]);
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
  return { vm, nodes, edges, clusters, clusterSize, weights, groups, relations, diagnostics,
    annotations, palette, colours };
}

/**
 * @typedef {{vm: ViewModel, nodes: Map<string, VMNode>, edges: Map<string, any>,
 *   clusters: Map<string, any>, clusterSize: Map<string, number>, weights: Map<string, any>,
 *   groups: Map<string, any>, relations: Map<string, any>, diagnostics: Map<string, any>,
 *   annotations: {sliceEdges: Set<string>, transitionEdges: Set<string>, readoutEdges: Set<string>, bypassEdges: Set<string>,
 *   boundaryNodes: Set<string>, droppedEdges: Set<string>, perturbNodes: Set<string>},
 *   palette: Record<string, string>, colours: Record<string, string>}} Index  `colours`: the current
 *   theme's (the app sets them with ./theme.js themeColours when the theme changes)
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
  const idOf = (/** @type {string|undefined} */ m) => (m ? `m:${m}` : null);
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
      added.push({ id: `m:${m}`, kind: "module", label: m, parent: rangeId, collapsed: true });
    }
  }
  const clusters = (vm.clusters || []).map((c) => {
    if (c.parent) return c;
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
 * `visibleGraph` as a step generator (see `runSliced`).
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
  let counter = 0;
  for (const node of index.vm.nodes) {
    if (++tick % STEP === 0) yield;
    if (node.kind === "param" && !options.show_params) continue;
    const owner = node.cluster ? ownerOf.get(node.cluster) ?? null : null;
    if (owner) {
      if (!collapsedDot.has(owner)) {
        const dotId = `k${collapsedDot.size}`;
        collapsedDot.set(owner, dotId);
        dotToVm.set(dotId, { type: "cluster", id: owner });
        items.push({ dotId, cluster: index.clusters.get(owner), parent: index.clusters.get(owner).parent });
      }
      nodeToDot.set(node.id, collapsedDot.get(owner));
    } else {
      const dotId = `n${counter++}`;
      nodeToDot.set(node.id, dotId);
      dotToVm.set(dotId, { type: "node", id: node.id });
      items.push({ dotId, node, parent: node.cluster || null });
    }
  }
  /** visible clusters (expanded sub-jaxprs and groups whose ancestors are all expanded) */
  const clusterToDot = new Map();
  let clusterCounter = 0;
  for (const c of index.clusters.values()) {
    if (ownerOf.get(c.id)) continue;
    const dotId = `s${clusterCounter++}`;
    clusterToDot.set(c.id, dotId);
    dotToVm.set(dotId, { type: "cluster", id: c.id });
  }
  for (const [clusterId, dotId] of collapsedDot) clusterToDot.set(clusterId, dotId);
  /** @type {Map<string, {dotId: string, source: string, target: string, vmIds: string[]}>} */
  const edgeByPair = new Map();
  const edgeToDot = new Map();
  for (const edge of index.vm.edges) {
    if (++tick % STEP === 0) yield;
    const source = nodeToDot.get(edge.source);
    const target = nodeToDot.get(edge.target);
    if (!source || !target || source === target) continue;
    const pair = `${source}>${target}`;
    let entry = edgeByPair.get(pair);
    if (!entry) {
      entry = { dotId: `x${edgeByPair.size}`, source, target, vmIds: [] };
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

const STATUS_BORDER = /** @type {Record<string, string>} */ ({ online: "online", exact: "exact", not_learned: "not_learned" });

/**
 * The legend key of a node's own fill and border (mirrors `node_key` in
 * etp_viz/view/palette.py).
 * @param {VMNode} n
 */
export function nodeKey(n) {
  if (n.etp) return n.status && STATUS_BORDER[n.status] ? `etp_${n.status}` : "etp";
  if (n.kind === "hidden_in" || n.kind === "hidden_out") return "hidden";
  if (n.kind === "state_in" || n.kind === "state_out") return "state";
  if (n.kind === "input" || n.kind === "output") return "io";
  if (n.kind === "param" || n.kind === "perturb") return n.kind;
  return "op";
}

/**
 * Shape and colours of a node (mirrors `node_style` in etp_viz/view/palette.py: the static
 * SVG draws every node with the same fill and border).
 * @param {Record<string, string>} c  the palette
 * @param {VMNode} n
 * @param {{perturbed?: boolean, boundary?: boolean}} marks
 */
export function nodeStyle(c, n, marks = {}) {
  const key = nodeKey(n);
  /** @type {Record<string, string>} */
  const attrs = { shape: "box", style: "rounded,filled", fillcolor: c.op_fill, color: c.op_border };
  if (n.etp) {
    Object.assign(attrs, { fillcolor: n.status === "not_learned" ? c.not_learned_fill : c.etp,
      color: c[STATUS_BORDER[n.status || ""] || "etp_border"], penwidth: "2" });
  } else if (key === "hidden") {
    Object.assign(attrs, { shape: "ellipse", style: "filled", fillcolor: c.hidden, color: c.group_border });
  } else if (key === "state") {
    Object.assign(attrs, { shape: "note", style: "filled", fillcolor: c.state });
  } else if (key === "io") {
    Object.assign(attrs, { shape: n.kind === "input" ? "invhouse" : "house", style: "filled", fillcolor: c.io });
  } else if (key === "param") {
    Object.assign(attrs, { shape: "cds", style: "filled", fillcolor: c.param });
  } else if (key === "perturb") {
    Object.assign(attrs, { shape: "diamond", style: "filled", fillcolor: c.perturb_fill, color: c.perturb });
  }
  if (marks.perturbed && n.kind !== "perturb") {
    Object.assign(attrs, { style: `${attrs.style},dashed`, color: c.perturb, penwidth: "2" });
  }
  if (marks.boundary) Object.assign(attrs, { peripheries: "2", color: c.boundary, penwidth: "2" });
  return attrs;
}

/** DOT attributes for one view-model node. */
function nodeAttrs(/** @type {Index} */ index, /** @type {VMNode} */ n) {
  const badges = (n.badges || []).map((b) => b.text).filter(Boolean);
  const perturbed = index.annotations.perturbNodes.has(n.id) && n.kind !== "perturb";
  const attrs = nodeStyle(index.colours, n, { perturbed, boundary: index.annotations.boundaryNodes.has(n.id) });
  let lines = [truncate(n.label || n.primitive || n.id)];
  if (n.etp) {
    // the weight's name first: it is what a student looks for
    lines = [truncate(n.weight_path || n.label || n.id), `${n.label || n.primitive}${n.status ? ` · ${n.status.replace("_", " ")}` : ""}`];
  } else if (badges.length) {
    lines[0] += `  ⟨${badges.join(", ")}⟩`;
  }
  if (n.kind === "hidden_in" || n.kind === "hidden_out") {
    lines = [truncate(n.hidden_path || n.label), n.kind === "hidden_in" ? "h (t-1)" : "h (t)"];
  }
  if (perturbed) lines.push("◆ writes h");
  return { ...attrs, label: lines.join("\n") };
}

/**
 * The legend key of a drawn edge from the view-model edges it stands for (mirrors
 * `edge_key` in etp_viz/view/palette.py: dropped over bypass over the paths).
 * @param {Index} index
 * @param {string[]} vmIds
 */
export function edgeKey(index, vmIds) {
  const a = index.annotations;
  const any = (/** @type {Set<string>} */ set) => vmIds.some((id) => set.has(id));
  if (any(a.droppedEdges)) return "dropped";
  if (any(a.bypassEdges)) return "bypass";
  if (any(a.sliceEdges)) return "slice";
  if (any(a.transitionEdges)) return "transition";
  if (any(a.readoutEdges)) return "readout";
  return "edge";
}

const EDGE_WIDTH = /** @type {Record<string, string>} */ ({ slice: "2", transition: "1.6", readout: "1.6", bypass: "2", dropped: "2" });
const EDGE_LINE = /** @type {Record<string, string>} */ ({ readout: "dashed", bypass: "dotted", dropped: "dashed" });

/**
 * The legend keys of everything a visible graph draws (node fills and borders, boxes, edge
 * colours, tags), in no particular order: the legend shows exactly these.
 * @param {Index} index
 * @param {VisibleGraph} graph
 * @param {(dotId: string) => boolean} [isDrawn]  whether a cluster box is in the layout
 *   (Graphviz draws no box for an empty cluster); default: every visible cluster
 * @returns {Set<string>}
 */
export function drawnKeys(index, graph, isDrawn = () => true) {
  const keys = new Set();
  const a = index.annotations;
  for (const item of graph.items) {
    if (item.cluster) { keys.add("collapsed"); continue; }
    const n = item.node;
    if (!n) continue;
    keys.add(nodeKey(n));
    if (a.perturbNodes.has(n.id) && n.kind !== "perturb") keys.add("perturbed");
    if (a.boundaryNodes.has(n.id)) keys.add("boundary");
    if (!n.etp && (n.badges || []).length) keys.add("badge");
  }
  for (const e of graph.edges) keys.add(edgeKey(index, e.vmIds));
  for (const [clusterId, dotId] of graph.clusterToDot) {
    if (!dotId.startsWith("s") || !isDrawn(dotId)) continue;
    keys.add(index.clusters.get(clusterId)?.kind === "group" ? "group" : "subjaxpr");
  }
  return keys;
}

function formatAttrs(/** @type {Record<string, string>} */ attrs) {
  return Object.entries(attrs).map(([k, v]) => `${k}="${escapeDot(v)}"`).join(" ");
}

/**
 * DOT text for a visible graph. Node names are generated (n0, k0, ...); user strings only
 * appear escaped inside quoted labels.
 * @param {Index} index
 * @param {VisibleGraph} graph
 * @param {{rankdir?: string, large_graph_threshold?: number}} [options]
 */
export function toDot(index, graph, options = {}) {
  return runSteps(toDotSteps(index, graph, options));
}

/**
 * `toDot` as a step generator (yields every STEP nodes or edges): the DOT text of everything
 * expanded (thousands of nodes) took ~80 ms in one task.
 * @param {Index} index
 * @param {VisibleGraph} graph
 * @param {{rankdir?: string, large_graph_threshold?: number, font_size?: number}} [options]
 * @returns {Generator<undefined, {dot: string, large: boolean}>}
 */
export function* toDotSteps(index, graph, options = {}) {
  const large = graph.nodeCount > (options.large_graph_threshold ?? 150);
  const out = ["digraph G {"];
  // one font size for every label (nodes, boxes, edge counts): the text scale's
  const font = String(options.font_size || NODE_FONT_SIZE);
  const text = index.colours.text || "#000000";
  const graphAttrs = { rankdir: options.rankdir === "LR" ? "LR" : "TB", fontname: "Helvetica", fontsize: font, fontcolor: text,
    nodesep: "0.25", ranksep: options.rankdir === "LR" ? "0.25" : "0.35", outputorder: "edgesfirst" };
  if (large) Object.assign(graphAttrs, { nslimit: "1", nslimit1: "1", mclimit: "0.1", splines: "line" });
  out.push(`graph [${formatAttrs(graphAttrs)}];`);
  out.push(`node [fontname="Helvetica" fontsize="${font}" fontcolor="${text}" height="0.3" margin="0.08,0.03"];`);
  out.push(`edge [color="${index.colours.edge}" arrowsize="0.7" fontname="Helvetica" fontsize="${font}" fontcolor="${text}"];`);
  /** @type {Map<string|null, string[]>} lines per visible cluster (null = root) */
  const body = new Map([[null, []]]);
  const parentOf = (/** @type {string|null} */ clusterId) => {
    // innermost visible cluster at or above clusterId
    for (const id of clusterChain(index.clusters, clusterId)) {
      if (graph.clusterToDot.has(id) && graph.clusterToDot.get(id)?.startsWith("s")) return id;
    }
    return null;
  };
  const push = (/** @type {string|null} */ clusterId, /** @type {string} */ line) => {
    const key = parentOf(clusterId);
    if (!body.has(key)) body.set(key, []);
    body.get(key)?.push(line);
  };
  let tick = 0;
  for (const item of graph.items) {
    if (++tick % STEP === 0) yield;
    if (item.node) {
      push(item.parent, `${item.dotId} [id="${item.dotId}" ${formatAttrs(nodeAttrs(index, item.node))}];`);
    } else if (item.cluster) {
      const size = index.clusterSize.get(item.cluster.id) || 0;
      const attrs = { shape: "box3d", style: "filled", fillcolor: index.colours.collapsed, color: index.colours.collapsed_border,
        label: `${truncate(item.cluster.label)}\n${size} eqns ▸` };
      push(item.parent, `${item.dotId} [id="${item.dotId}" ${formatAttrs(attrs)}];`);
    }
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
      if (!dotId || !dotId.startsWith("s")) continue;
      const attrs = c.kind === "group"
        ? { style: "filled,rounded", fillcolor: index.colours.group_fill, color: index.colours.group_border, penwidth: "1.5" }
        : { style: "dashed,rounded", color: index.colours.subjaxpr_border };
      lines.push(`${indent}subgraph cluster_${dotId} {`);
      lines.push(`${indent}  id="${dotId}"; ${Object.entries({ ...attrs, label: truncate(c.label, 60) })
        .map(([k, v]) => `${k}="${escapeDot(v)}";`).join(" ")} fontsize="${font}";`);
      for (const line of body.get(c.id) || []) lines.push(`${indent}  ${line}`);
      lines.push(...emitCluster(c.id, indent + "  "));
      lines.push(`${indent}}`);
    }
    return lines;
  };
  out.push(...(body.get(null) || []));
  out.push(...emitCluster(null, ""));
  const a = index.annotations;
  for (const e of graph.edges) {
    if (++tick % STEP === 0) yield;
    // slice / transition / readout paths; an output reading h^(t-1) (the hidden output bypass:
    // its gradient term is dL/dh^(t-1)·e^(t-1)); a Jacobian term the algorithm drops (the cut
    // h -> h dependency into a recurrent ETP op)
    const key = edgeKey(index, e.vmIds);
    /** @type {Record<string, string>} */
    const attrs = {};
    if (key !== "edge") attrs.color = index.colours[key];
    if (EDGE_WIDTH[key]) attrs.penwidth = EDGE_WIDTH[key];
    if (EDGE_LINE[key]) attrs.style = EDGE_LINE[key];
    if (e.vmIds.length > 1) attrs.label = `×${e.vmIds.length}`;
    out.push(`${e.source} -> ${e.target} [id="${e.dotId}" ${formatAttrs(attrs)}];`);
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
  const meaning = legend(dotId.startsWith("k") ? "collapsed" : c.kind === "group" ? "group" : "subjaxpr");
  return [`${c.label} (${index.clusterSize.get(c.id) || 0} operations)${dotId.startsWith("k") ? " — click to expand" : ""}`,
    meaning ? meaning.title : ""].filter(Boolean).join("\n");
}
