// @ts-check
/**
 * Level-by-level layout of a big graph (issue #32: one Graphviz call over 8,000 drawn nodes
 * took 12 s, and opening a box paid all of it again).
 *
 * Every opened box (an expanded `module` or `subjaxpr` cluster) is a level: a small graph of
 * what the box holds directly (nodes, collapsed boxes, group and branch clusters) in which
 * each opened box inside it is one node of that box's laid-out size (`boxLabel`: an HTML-like
 * label with a port where each edge crosses its border). The root level holds the top of the
 * graph. A level's layout depends only on what is inside its box, so it is cached by the box
 * and the expansion state within it (`Level.key`): opening a box lays out that box and the
 * levels around it, nothing else (./layout.js), and the page draws each level translated into
 * its box (./view.js).
 *
 * An edge that crosses a box's border is drawn in pieces that meet on it. Outside the box it
 * ends at a port of the box's node: `i_<leaf>` on the top side (left side left to right) for
 * edges into the drawn node or collapsed box `<leaf>`, `o_<leaf>` on the bottom side for edges
 * out of it; an edge back up the program (a layer reading the next layer's state) leaves by
 * `u_<leaf>` on the top and enters by `j_<leaf>` on the bottom, so it stays short. Inside, a
 * piece runs from an invisible port node on the level's first rank (`pi_<leaf>`, `pu_<leaf>`;
 * the last rank for `po_`, `pj_`) to the leaf, or on to the next box's port. A port node sits
 * on the box's border where the outer piece ends, so the pieces join (./xdot.js
 * `levelToDrawList` puts both ends on the same point); only the piece that ends at the leaf
 * has an arrowhead. The pieces inside a box are shared by every edge through the same port:
 * they belong to the box (ids `pi_<box>_<leaf>`, ...) and are highlighted with each drawn edge
 * they carry (`LevelPlan.parts`). Which side a port is on depends only on the view model (the
 * order of the two boxes, or nodes, under the level holding both ends), so a level's ports, and
 * its layout, do not change with the expansion state outside its box.
 */
import { COLLAPSIBLE, clusterChain, runSteps } from "./graph.js";
import { dotHeader, itemStatement, clusterStatement, edgeAttrs, formatAttrs } from "./dot-style.js";

/** @typedef {import("./graph.js").Index} Index */
/** @typedef {import("./graph.js").VisibleGraph} VisibleGraph */
/** @typedef {{node: string, port?: string}} End  a node, or a port of a box node */
/**
 * @typedef {{id: string, tail: End, head: End, vmIds: string[], counted: boolean, back: boolean}} LevelEdge
 *   `back`: written head to tail for Graphviz (ranked the other way), drawn tail to head
 */

/**
 * @typedef {object} Level
 * @property {string|null} id  the box's cluster id (null: the root level)
 * @property {string} dotId  the box's DOT id (`s<i>`), "root" for the root level
 * @property {Level|null} parent
 * @property {number} depth
 * @property {VisibleGraph["items"]} items  drawn nodes and collapsed boxes it holds directly
 * @property {Level[]} boxes  opened boxes it holds directly (each one node here)
 * @property {string[]} clusters  group and branch clusters drawn in it (as Graphviz clusters)
 * @property {LevelEdge[]} edges  edges between what it holds, from its in-ports, to its out-ports
 * @property {Map<string, string[]>} ports  port (`i_<leaf>`, `j_`, `o_`, `u_`, see portPiece) ->
 *   the view-model edges through it
 * @property {string[]} inside  the opened boxes within it (its expansion state)
 * @property {number} order  where its first node is in the view model (an order that no
 *   expansion state changes)
 * @property {string} key  cache key: the box, the expansion state within it, the options
 */

/**
 * @typedef {{root: Level, levels: Level[], parts: Map<string, string[]>}} LevelPlan  `levels`
 *   parents first; `parts`: drawn edge -> the pieces inside boxes that it also runs through
 */

/** The DOT name of a box's node in the level around it. @param {Level} box */
export const boxNode = (box) => `b_${box.dotId}`;

/**
 * The levels of a visible graph (`planLevelsSteps` run on the spot).
 * @param {Index} index
 * @param {VisibleGraph} graph
 * @param {any} options
 * @returns {LevelPlan}
 */
export function planLevels(index, graph, options) {
  return runSteps(planLevelsSteps(index, graph, options));
}

/**
 * The levels of a visible graph, as a step generator (see ./graph.js runSliced).
 * @param {Index} index
 * @param {VisibleGraph} graph
 * @param {any} options  the layout options (rankdir, show_params, font_size, theme, ...)
 * @returns {Generator<undefined, LevelPlan>}
 */
export function* planLevelsSteps(index, graph, options) {
  /** @type {Map<string|null, Level>} */
  const levels = new Map();
  const root = newLevel(null, "root", null);
  levels.set(null, root);
  /** @type {Map<string|null|undefined, string|null>} cluster -> nearest opened box at or above it */
  const boxAbove = new Map();
  const nearestBox = (/** @type {string|null|undefined} */ clusterId) => {
    let box = boxAbove.get(clusterId);
    if (box !== undefined) return box;
    box = clusterChain(index.clusters, clusterId).find((id) => COLLAPSIBLE.has(index.clusters.get(id).kind)) ?? null;
    boxAbove.set(clusterId, box);
    return box;
  };
  /** @returns {Level} */
  const levelOf = (/** @type {string|null} */ boxId) => {
    let level = levels.get(boxId);
    if (level) return level;
    const cluster = index.clusters.get(boxId);
    const parent = levelOf(nearestBox(cluster.parent));
    level = newLevel(boxId, graph.clusterToDot.get(String(boxId)) || "", parent);
    parent.boxes.push(level);
    levels.set(boxId, level);
    return level;
  };
  let tick = 0;
  for (const [clusterId, dotId] of graph.clusterToDot) {
    if (++tick % 64 === 0) yield;
    if (!dotId.startsWith("s")) continue;
    if (COLLAPSIBLE.has(index.clusters.get(clusterId).kind)) levelOf(clusterId);
    else levelOf(nearestBox(clusterId)).clusters.push(clusterId);
  }
  const first = firstNodes(index);
  /** @type {Map<string, Level>} leaf DOT id -> its level */
  const leafLevel = new Map();
  /** @type {Map<string, number>} leaf DOT id -> where its first node is in the view model */
  const leafOrder = new Map();
  for (const item of graph.items) {
    if (++tick % 64 === 0) yield;
    const level = levelOf(nearestBox(item.parent));
    level.items.push(item);
    leafLevel.set(item.dotId, level);
    leafOrder.set(item.dotId, item.node ? Number(item.dotId.slice(1)) : first.get(item.cluster.id) ?? 0);
  }
  for (const level of levels.values()) level.order = level.id ? first.get(level.id) ?? 0 : -1;
  /** @type {Map<string, string[]>} */
  const parts = new Map();
  for (const edge of graph.edges) {
    if (++tick % 64 === 0) yield;
    const from = leafLevel.get(edge.source), to = leafLevel.get(edge.target);
    if (!from || !to) continue;
    const top = commonLevel(from, to);
    const tails = chainBelow(from, top), heads = chainBelow(to, top);
    // an edge back up the program (a layer reading the next one's state) leaves its boxes by
    // their top and enters by their bottom, and is reversed for ranking (`back`)
    const order = (/** @type {Level[]} */ chain, /** @type {string} */ leaf) =>
      chain.length ? chain[chain.length - 1].order : leafOrder.get(leaf) ?? 0;
    const back = order(tails, edge.source) > order(heads, edge.target);
    const pieces = [];
    /** @type {End} */
    let tail = { node: edge.source };
    for (const level of tails) {
      const port = `${back ? "u" : "o"}_${edge.source}`;
      pieces.push(portPiece(level, port, edge.vmIds, tail));
      tail = { node: boxNode(level), port };
    }
    /** @type {End} */
    let head = { node: edge.target };
    for (const level of heads) {
      const port = `${back ? "j" : "i"}_${edge.target}`;
      pieces.push(portPiece(level, port, edge.vmIds, head));
      head = { node: boxNode(level), port };
    }
    top.edges.push({ id: edge.dotId, tail, head, vmIds: edge.vmIds, counted: true, back: back && tails.length + heads.length > 0 });
    if (pieces.length) parts.set(edge.dotId, pieces);
  }
  const ordered = [...levels.values()].sort((a, b) => a.depth - b.depth);
  yield;
  for (const level of ordered) {
    for (let up = level.parent; up && level.id; up = up.parent) up.inside.push(level.id);
  }
  const common = [options.rankdir === "LR" ? "LR" : "TB", !!options.show_params, options.font_size || 0,
    options.theme || "light", options.large_graph_threshold ?? 150];
  for (const level of ordered) level.key = JSON.stringify([level.id, [...level.inside].sort(), common]);
  return { root, levels: ordered, parts };
}

/** @returns {Level} */
function newLevel(/** @type {string|null} */ id, /** @type {string} */ dotId, /** @type {Level|null} */ parent) {
  return { id, dotId, parent, depth: parent ? parent.depth + 1 : 0, items: [], boxes: [], clusters: [], edges: [],
    ports: new Map(), inside: [], order: 0, key: "" };
}

/** The innermost level holding both. @param {Level} a @param {Level} b */
function commonLevel(a, b) {
  while (a.depth > b.depth && a.parent) a = a.parent;
  while (b.depth > a.depth && b.parent) b = b.parent;
  while (a !== b && a.parent && b.parent) { a = a.parent; b = b.parent; }
  return a;
}

/** The levels from `level` up to the one just below `top`. @param {Level} level @param {Level} top */
function chainBelow(level, top) {
  const chain = [];
  for (let at = /** @type {Level|null} */ (level); at && at !== top; at = at.parent) chain.push(at);
  return chain;
}

/** @type {WeakMap<Index, Map<string, number>>} */
const firstNodeCache = new WeakMap();

/**
 * Each cluster's first node in the view model (its smallest node index): an order of boxes
 * and collapsed boxes that no expansion state changes (a level's layout depends on it).
 * @param {Index} index
 */
function firstNodes(index) {
  let first = firstNodeCache.get(index);
  if (first) return first;
  first = new Map();
  index.vm.nodes.forEach((node, i) => {
    for (const id of clusterChain(index.clusters, node.cluster)) if (!first?.has(id)) first?.set(id, i);
  });
  firstNodeCache.set(index, first);
  return first;
}

/** Port nodes on a level's first rank (its top, or its left side left to right). */
const FIRST_RANK_PORTS = new Set(["i", "u"]);

/**
 * The piece of an edge inside `level`'s box between its port `port` (`i_<leaf>` in at the
 * top, `j_<leaf>` in at the bottom, `o_<leaf>` out at the bottom, `u_<leaf>` out at the top)
 * and `end` (the leaf, or the port of the box inside that holds it); made once per box and
 * port. Returns its id.
 * @param {Level} level
 * @param {string} port
 * @param {string[]} vmIds
 * @param {End} end
 */
function portPiece(level, port, vmIds, end) {
  const id = `p${port.slice(0, 1)}_${level.dotId}_${port.slice(2)}`;
  let carried = level.ports.get(port);
  if (!carried) {
    carried = [];
    level.ports.set(port, carried);
    const node = { node: `p${port}` };
    const into = port.startsWith("i") || port.startsWith("j");
    // from the first rank down, or to the last rank down; else up, reversed for ranking
    const back = port.startsWith("j") || port.startsWith("u");
    level.edges.push(into ? { id, tail: node, head: end, vmIds: carried, counted: false, back }
      : { id, tail: end, head: node, vmIds: carried, counted: false, back });
  }
  carried.push(...vmIds);
  return id;
}

/**
 * @typedef {{width: number, height: number, ports: Record<string, [number, number]>}} BoxSize
 *   a laid-out level as its parent sees it: size, and each port's position on its border
 *   (`i_<leaf>`, `o_<leaf>`; points from the top left)
 */

/**
 * The DOT text of one level; each box inside it is a node of its laid-out size (`sizes`, by
 * box DOT id).
 * @param {Index} index
 * @param {Level} level
 * @param {any} options
 * @param {Map<string, BoxSize>} sizes
 */
export function levelDot(index, level, options, sizes) {
  const lr = options.rankdir === "LR";
  const large = level.items.length + level.boxes.length > (options.large_graph_threshold ?? 150);
  const out = ["digraph G {", ...dotHeader(index, options, large)];
  const own = new Set(level.clusters);
  /** the innermost cluster drawn in this level at or above `clusterId` (the box: its frame) */
  const ownerOf = (/** @type {string|null|undefined} */ clusterId) =>
    clusterChain(index.clusters, clusterId).find((id) => own.has(id) || id === level.id) ?? null;
  /** @type {Map<string|null, string[]>} */
  const body = new Map();
  const push = (/** @type {string|null} */ owner, /** @type {string} */ line) => {
    if (!body.has(owner)) body.set(owner, []);
    body.get(owner)?.push(line);
  };
  for (const item of level.items) push(ownerOf(item.parent), itemStatement(index, item));
  for (const box of level.boxes) {
    const size = sizes.get(box.dotId);
    if (!size) throw new Error(`level ${level.dotId}: box ${box.dotId} was not laid out`);
    push(ownerOf(index.clusters.get(box.id).parent), `${boxNode(box)} [shape="plain" label=<${boxLabel(size, lr)}>];`);
  }
  /** @type {Map<string|null, string[]>} clusters drawn here under each (null: the top) */
  const children = new Map();
  for (const id of level.clusters) {
    const parent = ownerOf(index.clusters.get(id).parent);
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent)?.push(id);
  }
  const emit = (/** @type {string} */ id, /** @type {string} */ indent) => {
    out.push(`${indent}subgraph cluster_${id === level.id ? level.dotId : clusterDot(index, id)} {`,
      `${indent}  ${clusterStatement(index, index.clusters.get(id), id === level.id ? level.dotId : clusterDot(index, id), options)}`);
    for (const line of body.get(id) || []) out.push(`${indent}  ${line}`);
    for (const child of children.get(id) || []) emit(child, indent + "  ");
    out.push(`${indent}}`);
  };
  if (level.id) emit(level.id, "");
  else {
    out.push(...(body.get(null) || []));
    for (const child of children.get(null) || []) emit(child, "");
  }
  // port nodes: no id, so nothing is drawn for them (./xdot.js)
  const ports = [...level.ports.keys()];
  for (const port of ports) out.push(`p${port} [shape="point" style="invis" width="0.02" height="0.02" label=""];`);
  for (const [rank, firstRank] of [["source", true], ["sink", false]]) {
    const names = ports.filter((port) => FIRST_RANK_PORTS.has(port.slice(0, 1)) === firstRank).map((port) => `p${port}`);
    if (names.length) out.push(`{rank="${rank}"; ${names.join("; ")};}`);
  }
  const compass = (/** @type {string} */ port) => (FIRST_RANK_PORTS.has(port.slice(0, 1)) ? (lr ? "w" : "n") : (lr ? "e" : "s"));
  const end = (/** @type {End} */ e) => (e.port ? `${e.node}:${e.port}:${compass(e.port)}` : e.node);
  /** whether an end is a drawn node (the arrow goes there; a port is on the way) */
  const drawn = (/** @type {End} */ e) => !e.port && !/^p[ijou]_/.test(e.node);
  for (const e of level.edges) {
    const attrs = edgeAttrs(index, e.vmIds, e.counted);
    if (e.back) {
      Object.assign(attrs, { dir: "back", arrowhead: "none" }, drawn(e.head) ? {} : { arrowtail: "none" });
      out.push(`${end(e.head)} -> ${end(e.tail)} [id="${e.id}" ${formatAttrs(attrs)}];`);
    } else {
      if (!drawn(e.head)) attrs.arrowhead = "none";
      out.push(`${end(e.tail)} -> ${end(e.head)} [id="${e.id}" ${formatAttrs(attrs)}];`);
    }
  }
  out.push("}");
  return out.join("\n");
}

/** @param {Index} index @param {string} clusterId */
function clusterDot(index, clusterId) {
  return `s${index.clusterOrdinal.get(clusterId)}`;
}

/**
 * The HTML-like label of a box's node: exactly the box's laid-out size (whole points, the
 * layout at its top left), with a 2-point port cell centred on each port's position: along
 * the top edge for edges in and the bottom edge for edges out (left and right edges
 * left to right). Graphviz attaches `node:port:n` (`:s`, `:w`, `:e`) at the cell's middle.
 * @param {BoxSize} size
 * @param {boolean} lr
 */
export function boxLabel(size, lr) {
  const width = Math.max(3, Math.ceil(size.width));
  const height = Math.max(3, Math.ceil(size.height));
  const along = lr ? height : width;
  const cell = (/** @type {number} */ length, /** @type {string} */ port = "") => {
    const [w, h] = lr ? [1, length] : [length, 1];
    return `<TD FIXEDSIZE="TRUE" WIDTH="${w}" HEIGHT="${h}"${port ? ` PORT="${port}"` : ""}></TD>`;
  };
  const strip = (/** @type {boolean} */ firstRank) => {
    const ports = Object.entries(size.ports).filter(([name]) => FIRST_RANK_PORTS.has(name.slice(0, 1)) === firstRank)
      .map(([name, [x, y]]) => /** @type {[string, number]} */ ([name, lr ? y : x])).sort((a, b) => a[1] - b[1]);
    const cells = [];
    let at = 0;
    for (const [name, position] of ports) {
      const centre = Math.min(Math.max(Math.round(position), at + 1), along - 1);
      if (centre - 1 > at) cells.push(cell(centre - 1 - at));
      cells.push(cell(2, name));
      at = centre + 1;
    }
    if (along > at) cells.push(cell(along - at));
    const rows = lr ? cells.map((c) => `<TR>${c}</TR>`).join("") : `<TR>${cells.join("")}</TR>`;
    return `<TD>${table(rows)}</TD>`;
  };
  const middle = lr ? `<TD FIXEDSIZE="TRUE" WIDTH="${width - 2}" HEIGHT="${height}"></TD>`
    : `<TD FIXEDSIZE="TRUE" WIDTH="${width}" HEIGHT="${height - 2}"></TD>`;
  return table(lr ? `<TR>${strip(true)}${middle}${strip(false)}</TR>`
    : `<TR>${strip(true)}</TR><TR>${middle}</TR><TR>${strip(false)}</TR>`);
}

/** @param {string} rows */
function table(rows) {
  return `<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="0">${rows}</TABLE>`;
}
