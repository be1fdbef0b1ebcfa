// @ts-check
/**
 * Graphviz `json` output (xdot drawing operations) -> a compact draw list the page turns into
 * SVG elements without parsing markup. Runs in the layout worker; pure, tested with node.
 *
 * Draw list: `{width, height, count, chunks}` where `chunks` are JSON strings, each an array
 * of up to CHUNK items `{k: "cluster"|"edge"|"node", id, s: Shape[], t: Text[]}`, in paint order
 * (clusters, edges, nodes). Strings (not objects) because the page deserialises a message on
 * its UI thread: copying strings is cheap, and each chunk is parsed only when it is built.
 *   Shape: {e: "polygon"|"path"|"ellipse", p|d|c: geometry, f: fill|null, s: stroke, w?, a?}
 *   Text:  {x, y, a: "start"|"middle"|"end", z: size, f: face, c: colour, v: text}
 * Coordinates are already flipped to SVG's y-down (y' = height - y).
 */

export const CHUNK = 150;

/** @typedef {{e: string, p?: string, d?: string, c?: number[], f: string|null, s: string, w?: number, a?: string}} Shape */
/** @typedef {{x: number, y: number, a: string, z: number, f: string, c: string, v: string}} Text */
/** @typedef {{k: string, id: string, s: Shape[], t: Text[]}} Item */

const round = (/** @type {number} */ v) => Math.round(v * 100) / 100;
const ANCHOR = /** @type {Record<string, string>} */ ({ l: "start", c: "middle", r: "end" });

/**
 * Convert one element's xdot operations into shapes and texts. A fill colour (`C`) fills the
 * next filled shape only (outer peripheries of a filled node are outlines).
 * @param {any[][]} opLists  the element's _draw_, _ldraw_, _hdraw_, _tdraw_, ... lists
 * @param {number} height  graph height (for the y flip)
 * @param {boolean} isEdge  edge splines are never filled
 */
export function convertOps(opLists, height, isEdge) {
  /** @type {Shape[]} */
  const shapes = [];
  /** @type {Text[]} */
  const texts = [];
  for (const ops of opLists) {
    if (!Array.isArray(ops)) continue;
    let pen = "#000000";
    /** @type {string|null} */
    let fill = null;
    let width = 1;
    /** @type {string|undefined} */
    let dash;
    let font = { size: 14, face: "Times-Roman" };
    const pts = (/** @type {number[][]} */ points) => points.map(([x, y]) => `${round(x)},${round(height - y)}`);
    const style = (/** @type {Shape} */ shape) => {
      if (width !== 1) shape.w = width;
      if (dash) shape.a = dash;
      shapes.push(shape);
    };
    for (const op of ops) {
      switch (op.op) {
        case "c": pen = op.color; break;
        case "C": fill = op.color; break;
        case "S":
          if (op.style === "dashed") dash = "5,2";
          else if (op.style === "dotted") dash = "1,5";
          else if (op.style === "solid") dash = undefined;
          else if (op.style === "bold") width = 2;
          else {
            const m = /^setlinewidth\(([\d.]+)\)$/.exec(op.style || "");
            if (m) width = Number(m[1]);
          }
          break;
        case "F": font = { size: op.size, face: op.face }; break;
        case "P": case "p":
          style({ e: "polygon", p: pts(op.points).join(" "), f: op.op === "P" ? fill : null, s: pen });
          if (op.op === "P") fill = null;
          break;
        case "L":
          style({ e: "path", d: `M${pts(op.points).join("L")}`, f: null, s: pen });
          break;
        case "b": case "B": {
          const p = pts(op.points);
          const first = op.points[0];
          const last = op.points[op.points.length - 1];
          const closed = first[0] === last[0] && first[1] === last[1];
          // Filled when closed and a fill colour was set for it (rounded boxes, clusters):
          // the xdot letter is not reliable here, and splines of edges are never filled.
          const filled = !isEdge && closed && fill != null;
          style({ e: "path", d: `M${p[0]}C${p.slice(1).join(" ")}`, f: filled ? fill : null, s: pen });
          if (filled) fill = null;
          break;
        }
        case "E": case "e": {
          const [cx, cy, rx, ry] = op.rect;
          style({ e: "ellipse", c: [round(cx), round(height - cy), round(rx), round(ry)], f: op.op === "E" ? fill : null, s: pen });
          if (op.op === "E") fill = null;
          break;
        }
        case "T":
          texts.push({ x: round(op.pt[0]), y: round(height - op.pt[1]), a: ANCHOR[op.align] || "middle",
            z: font.size, f: font.face, c: pen, v: String(op.text) });
          break;
        default: break;
      }
    }
  }
  return { shapes, texts };
}

const DRAW_KEYS = ["_draw_", "_ldraw_", "_hdraw_", "_tdraw_", "_hldraw_", "_tldraw_"];

/**
 * @param {any} graph  JSON.parse(graphviz.layout(dot, "json", "dot"))
 * @returns {{width: number, height: number, count: number, chunks: string[]}}
 */
export function layoutToDrawList(graph) {
  const [x0, y0, x1, y1] = String(graph.bb || "0,0,1,1").split(",").map(Number);
  const width = x1 - x0;
  const height = y1 - y0;
  /** @type {Item[]} */
  const items = [];
  const add = (/** @type {string} */ kind, /** @type {any} */ obj) => {
    if (!obj.id) return;
    const { shapes, texts } = convertOps(DRAW_KEYS.map((k) => obj[k]), y1, kind === "edge");
    items.push({ k: kind, id: String(obj.id), s: shapes, t: texts });
  };
  const objects = graph.objects || [];
  for (const obj of objects) if (String(obj.name || "").startsWith("cluster")) add("cluster", obj);
  for (const edge of graph.edges || []) add("edge", edge);
  for (const obj of objects) if (!String(obj.name || "").startsWith("cluster") && !obj.nodes) add("node", obj);
  const chunks = [];
  for (let i = 0; i < items.length; i += CHUNK) chunks.push(JSON.stringify(items.slice(i, i + CHUNK)));
  return { width: Math.max(width, 1), height: Math.max(height, 1), count: items.length, chunks };
}

/**
 * @typedef {{width: number, height: number, count: number, chunks: string[],
 *   boxes: Record<string, [number, number]>, ports: Record<string, [number, number]>}} LevelDrawList
 *   a level's draw list (./hierarchy.js), in its own coordinates (y down from its top left),
 *   with the top left corner of each box node (`b_<box>`) and the border point of each of its
 *   own ports (`i_<leaf>` from the port node `pi_<leaf>`, and `j_`, `o_`, `u_` alike: the
 *   first rank's side for `i` and `u`, the last rank's for `j` and `o`)
 */

/**
 * A level's draw list (./hierarchy.js): `layoutToDrawList`, after the pieces of each edge
 * that crosses a box border were made to meet there. A piece from or to a port node starts or
 * ends on the border, across from the port node (the level's first or last rank); a piece from
 * or to a box node's port starts or ends where that box's own layout put the port (`boxes`:
 * each box node's ports, in the box's coordinates). Both points are the same once the box is
 * drawn at its node's place: Graphviz puts a port at whole points (./hierarchy.js boxLabel).
 * @param {any} graph  JSON.parse(graphviz.layout(levelDot, "json", "dot"))
 * @param {Record<string, {ports: Record<string, [number, number]>}>} boxes
 * @param {string} rankdir  "TB" or "LR"
 * @returns {LevelDrawList}
 */
export function levelToDrawList(graph, boxes, rankdir) {
  const [x0, y0, x1, y1] = String(graph.bb || "0,0,1,1").split(",").map(Number);
  const lr = rankdir === "LR";
  const objects = graph.objects || [];
  /** @type {Record<string, [number, number]>} */
  const boxCorners = {};
  /** @type {Record<string, [number, number]>} port name -> border point (Graphviz coordinates) */
  const ownPorts = {};
  /** @type {Map<number, {name: string, left: number, top: number}>} gvid -> box node */
  const boxByGvid = new Map();
  /** @type {Map<number, [number, number]>} gvid -> border point of a port node */
  const portByGvid = new Map();
  for (const obj of objects) {
    const name = String(obj.name || "");
    if (obj.nodes || !obj.pos) continue;
    const [cx, cy] = String(obj.pos).split(",").map(Number);
    if (name.startsWith("b_")) {
      const left = cx - (Number(obj.width) * 72) / 2, top = cy + (Number(obj.height) * 72) / 2;
      boxByGvid.set(obj._gvid, { name, left, top });
      boxCorners[name] = [round(left), round(y1 - top)];
    } else if (/^p[ijou]_/.test(name)) {
      const firstRank = name[1] === "i" || name[1] === "u";
      /** @type {[number, number]} */
      const point = lr ? [firstRank ? x0 : x1, cy] : [cx, firstRank ? y1 : y0];
      portByGvid.set(obj._gvid, point);
      ownPorts[name.slice(1)] = [round(point[0]), round(y1 - point[1])];
    }
  }
  /** where an edge's end on `gvid` (with `port`) must be, or null (a drawn node: as laid out) */
  const endPoint = (/** @type {number} */ gvid, /** @type {string|undefined} */ port) => {
    const own = portByGvid.get(gvid);
    if (own) return own;
    const box = boxByGvid.get(gvid);
    const at = box && port ? boxes[box.name]?.ports[String(port).split(":")[0]] : undefined;
    return box && at ? [box.left + at[0], box.top - at[1]] : null;
  };
  for (const edge of graph.edges || []) {
    const spline = (edge._draw_ || []).find((/** @type {any} */ op) => op.op === "b" || op.op === "B");
    if (!spline || !spline.points.length) continue;
    const start = endPoint(edge.tail, edge.tailport);
    const end = endPoint(edge.head, edge.headport);
    if (start) spline.points[0] = start;
    if (end) spline.points[spline.points.length - 1] = end;
  }
  return { ...layoutToDrawList(graph), boxes: boxCorners, ports: ownPorts };
}
