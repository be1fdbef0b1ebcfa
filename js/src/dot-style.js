// @ts-check
/**
 * How each drawn element looks: the palette, node shapes and colours, edge styles, the legend
 * keys of what is drawn, and the DOT statements that say so (./graph.js writes whole graphs,
 * ./hierarchy.js one level at a time). Pure functions, no DOM.
 */
import { escapeDot, truncate } from "./escape.js";

/** @typedef {import("./types.js").VMNode} VMNode */
/** @typedef {import("./graph.js").Index} Index */
/** @typedef {import("./graph.js").VisibleGraph} VisibleGraph */

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
export function nodeAttrs(/** @type {Index} */ index, /** @type {VMNode} */ n) {
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
    if (item.cluster) { keys.add(item.cluster.kind === "cell" ? "cell" : "collapsed"); continue; }
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
    keys.add(boxKey(index.clusters.get(clusterId)?.kind));
  }
  return keys;
}

/** DOT attribute list text (values escaped). @param {Record<string, string>} attrs */
export function formatAttrs(attrs) {
  return Object.entries(attrs).map(([k, v]) => `${k}="${escapeDot(v)}"`).join(" ");
}

/**
 * The lines before a graph's body: graph, node and edge defaults.
 * @param {Index} index
 * @param {{rankdir?: string, font_size?: number}} options
 * @param {boolean} large  bounded Graphviz effort and straight edges (a big graph)
 */
export function dotHeader(index, options, large) {
  // one font size for every label (nodes, boxes, edge counts): the text scale's
  const font = String(options.font_size || NODE_FONT_SIZE);
  const text = index.colours.text || "#000000";
  const graphAttrs = { rankdir: options.rankdir === "LR" ? "LR" : "TB", fontname: "Helvetica", fontsize: font, fontcolor: text,
    nodesep: "0.25", ranksep: options.rankdir === "LR" ? "0.25" : "0.35", outputorder: "edgesfirst" };
  if (large) Object.assign(graphAttrs, { nslimit: "1", nslimit1: "1", mclimit: "0.1", splines: "line" });
  return [`graph [${formatAttrs(graphAttrs)}];`,
    `node [fontname="Helvetica" fontsize="${font}" fontcolor="${text}" height="0.3" margin="0.08,0.03"];`,
    `edge [color="${index.colours.edge}" arrowsize="0.7" fontname="Helvetica" fontsize="${font}" fontcolor="${text}"];`];
}

/**
 * The DOT statement of a drawn node or collapsed cluster.
 * @param {Index} index
 * @param {VisibleGraph["items"][number]} item
 */
export function itemStatement(index, item) {
  if (item.node) return `${item.dotId} [id="${item.dotId}" ${formatAttrs(nodeAttrs(index, item.node))}];`;
  if (item.cluster.kind === "cell") return `${item.dotId} [id="${item.dotId}" ${formatAttrs(cellAttrs(index, item.cluster))}];`;
  const size = index.clusterSize.get(item.cluster.id) || 0;
  const attrs = { shape: "box3d", style: "filled", fillcolor: index.colours.collapsed, color: index.colours.collapsed_border,
    label: `${truncate(item.cluster.label)}\n${size} eqns ▸` };
  return `${item.dotId} [id="${item.dotId}" ${formatAttrs(attrs)}];`;
}

/**
 * The attribute statements of a drawn cluster box (inside its `subgraph cluster_<dotId> {`).
 * @param {Index} index
 * @param {any} cluster
 * @param {string} dotId
 * @param {{font_size?: number}} options
 */
export function clusterStatement(index, cluster, dotId, options) {
  const attrs = cluster.kind === "group"
    ? { style: "filled,rounded", fillcolor: index.colours.group_fill, color: index.colours.group_border, penwidth: "1.5" }
    : cluster.kind === "cell" ? { style: "rounded", color: index.colours.group_border, penwidth: "1.5" }
    : { style: "dashed,rounded", color: index.colours.subjaxpr_border };
  return `id="${dotId}"; ${Object.entries({ ...attrs, label: truncate(cluster.label, 60) })
    .map(([k, v]) => `${k}="${escapeDot(v)}";`).join(" ")} fontsize="${options.font_size || NODE_FONT_SIZE}";`;
}

/**
 * The DOT attributes of a drawn edge standing for the view-model edges `vmIds`: slice /
 * transition / readout paths; an output reading h^(t-1) (the hidden output bypass: its
 * gradient term is dL/dh^(t-1)·e^(t-1)); a Jacobian term the algorithm drops (the cut h -> h
 * dependency into a recurrent ETP op); with `counted`, "×n" when it stands for several.
 * @param {Index} index
 * @param {string[]} vmIds
 * @returns {Record<string, string>}
 */
export function edgeAttrs(index, vmIds, counted = true) {
  const key = edgeKey(index, vmIds);
  /** @type {Record<string, string>} */
  const attrs = {};
  if (key !== "edge") attrs.color = index.colours[key];
  if (EDGE_WIDTH[key]) attrs.penwidth = EDGE_WIDTH[key];
  if (EDGE_LINE[key]) attrs.style = EDGE_LINE[key];
  if (counted && vmIds.length > 1) attrs.label = `×${vmIds.length}`;
  return attrs;
}

/** The legend key of a drawn box (an opened cluster) of this kind. @param {string|undefined} kind */
export function boxKey(kind) {
  return kind === "group" ? "group" : kind === "cell" ? "cell" : "subjaxpr";
}

/** Record-label text: the record syntax's own characters become look-alikes. @param {string} text */
function recordText(text) {
  return String(text).replace(/[{<]/g, "(").replace(/[}>]/g, ")").replace(/[|]/g, "/");
}

/**
 * A weight's name on its cell's port: its path below the cell, without a Linear's trailing
 * `.weight` (`cell.W.weight` in cell `cell` -> `W`).
 * @param {string} cellPath
 * @param {string} weightPath
 */
export function portName(cellPath, weightPath) {
  const below = weightPath.startsWith(`${cellPath}.`) ? weightPath.slice(cellPath.length + 1) : weightPath;
  const parts = below.split(".");
  return parts.length > 1 && parts[parts.length - 1] === "weight" ? parts.slice(0, -1).join(".") : below;
}

/**
 * The DOT attributes of a folded cell (a collapsed `cell` cluster): one record node, its name
 * and class on top, one port per weight (port `w<i>`, the weight's name), its hidden states
 * at the bottom.
 * @param {Index} index
 * @param {any} cell  the cluster
 * @returns {Record<string, string>}
 */
export function cellAttrs(index, cell) {
  const ports = (cell.ports || []).map((/** @type {string} */ w, /** @type {number} */ i) =>
    `<w${i}> ${recordText(truncate(portName(cell.module_path || "", w), 24))}`);
  const hidden = (cell.hidden_paths || []).map((/** @type {string} */ h) => portName(cell.module_path || "", h));
  const fields = [`${recordText(truncate(cell.label, 40))} ▸`];
  if (ports.length) fields.push(`{${ports.join("|")}}`);
  if (hidden.length) fields.push(recordText(truncate(hidden.join(", "), 40)));
  return { shape: "Mrecord", style: "filled", fillcolor: index.colours.group_fill, color: index.colours.group_border,
    penwidth: "1.5", label: `{${fields.join("|")}}` };
}
