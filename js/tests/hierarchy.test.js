// Level-by-level layout (./src/hierarchy.js) on the real ~2,000-equation stack, laid out with
// the same Graphviz wasm and level draw lists the worker uses.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Graphviz } from "@hpcc-js/wasm-graphviz";
import { indexViewModel, visibleGraph, toDotSteps, runSteps, LEVEL_LAYOUT_MIN_NODES } from "../src/graph.js";
import { planLevels, levelDot, boxNode } from "../src/hierarchy.js";
import { levelToDrawList } from "../src/xdot.js";
import { itemBounds, shiftItem } from "../src/draw.js";
import { loadReal, needsReal } from "./helpers.js";

const boxes = (index) => [...index.clusters.values()].filter((c) => c.kind === "module" || c.kind === "subjaxpr" || c.kind === "cell");

/** Every range open and every layer but `closed`. */
function mostlyOpen(index, closed = null) {
  return boxes(index).map((c) => c.id).filter((id) => id !== closed);
}

/** Lay out a plan bottom up (what ./layout.js does, without a worker) and place each level. */
function layOut(graphviz, index, plan, options) {
  const done = new Map();
  const run = (level) => {
    if (done.has(level)) return done.get(level);
    const inner = level.boxes.map(run);
    const sizes = new Map(level.boxes.map((box, i) => [box.dotId, inner[i]]));
    const ports = Object.fromEntries(level.boxes.map((box, i) => [boxNode(box), { ports: inner[i].ports }]));
    const json = JSON.parse(graphviz.layout(levelDot(index, level, options, sizes), "json", "dot"));
    const layout = levelToDrawList(json, ports, options.rankdir);
    done.set(level, layout);
    return layout;
  };
  run(plan.root);
  const placed = new Map();
  const place = (level, x, y) => {
    const layout = done.get(level);
    placed.set(level, { x, y, layout, items: layout.chunks.flatMap((c) => JSON.parse(c)).map((item) => shiftItem(item, x, y)) });
    for (const box of level.boxes) {
      const [bx, by] = layout.boxes[boxNode(box)];
      place(box, x + bx, y + by);
    }
  };
  place(plan.root, 0, 0);
  return placed;
}

/** First and last point of an edge piece's spline. */
function ends(item) {
  const path = item.s.find((s) => s.e === "path");
  const numbers = (path.d.match(/-?\d*\.?\d+/g) || []).map(Number);
  return [[numbers[0], numbers[1]], [numbers[numbers.length - 2], numbers[numbers.length - 1]]];
}

for (const rankdir of ["TB", "LR"]) {
  test(`${rankdir}: each box is drawn inside its node, and an edge's pieces meet on the borders`, needsReal, async () => {
    const graphviz = await Graphviz.load();
    const index = indexViewModel(loadReal("stacked_2000"));
    const layers = boxes(index).filter((c) => !c.id.includes("…"));
    // a part of the layers open (a level of each kind), one layer with two levels above it
    const open = new Set([...boxes(index).filter((c) => c.id.includes("…")).map((c) => c.id),
      ...layers.slice(0, 20).map((c) => c.id)]);
    const graph = visibleGraph(index, open);
    const options = { rankdir, font_size: 14 };
    const plan = planLevels(index, graph, options);
    const placed = layOut(graphviz, index, plan, options);
    for (const level of plan.levels) {
      if (!level.parent) continue;
      const { x, y, layout, items } = placed.get(level);
      const frame = items.find((item) => item.id === level.dotId);
      const b = itemBounds(frame);
      assert.ok(b[0] >= x - 1 && b[1] >= y - 1 && b[2] <= x + layout.width + 1 && b[3] <= y + layout.height + 1,
        `${level.id}: frame ${b} outside its node at ${x},${y} ${layout.width}x${layout.height}`);
    }
    const pieces = new Map();
    for (const { items } of placed.values()) for (const item of items) if (item.k === "edge") pieces.set(item.id, item);
    assert.ok(plan.parts.size > 20, "edges cross box borders");
    for (const [edge, parts] of plan.parts) {
      const points = [edge, ...parts].flatMap((id, piece) => ends(pieces.get(id)).map((p) => [piece, p]));
      const joined = points.filter(([piece, p]) => points.some(([other, q]) => other !== piece && Math.hypot(p[0] - q[0], p[1] - q[1]) <= 1));
      assert.ok(joined.length >= 2 * parts.length, `${edge}: ${parts.length + 1} pieces, ${joined.length} ends joined`);
    }
  });
}

test("opening a box changes the levels of that box and the boxes around it only", needsReal, () => {
  const index = indexViewModel(loadReal("stacked_2000"));
  const target = "cell:layers.50";
  const options = { rankdir: "TB", font_size: 14 };
  const before = planLevels(index, visibleGraph(index, mostlyOpen(index, target)), options);
  const after = planLevels(index, visibleGraph(index, mostlyOpen(index)), options);
  assert.ok(after.levels.length > 150, `${after.levels.length} levels`);
  const keys = (plan) => new Map(plan.levels.map((level) => [level.key, level]));
  const old = keys(before);
  const changed = after.levels.filter((level) => !old.has(level.key)).map((level) => level.id);
  assert.deepEqual(changed.sort(), [null, target, "m:layers.48…layers.63"].sort());
  // a level laid out once is the same graph whatever the rest: same key, same DOT text
  const sizes = (level) => new Map(level.boxes.map((box) => [box.dotId, {
    width: 200, height: 100, ports: Object.fromEntries([...box.ports.keys()].map((port, i) => [port, [10 * (i + 1), 0]])) }]));
  for (const level of after.levels) {
    const same = old.get(level.key);
    if (same) assert.equal(levelDot(index, level, options, sizes(level)), levelDot(index, same, options, sizes(same)), level.key);
  }
});

test("graphs above LEVEL_LAYOUT_MIN_NODES drawn nodes are laid out level by level", needsReal, () => {
  const index = indexViewModel(loadReal("stacked_2000"));
  const folded = visibleGraph(index, []);
  const big = visibleGraph(index, mostlyOpen(index));
  assert.ok(folded.nodeCount <= LEVEL_LAYOUT_MIN_NODES && big.nodeCount > LEVEL_LAYOUT_MIN_NODES);
  assert.equal(typeof runSteps(toDotSteps(index, folded, {})).dot, "string");
  assert.equal(runSteps(toDotSteps(index, big, {})).dot.levels, true);
  assert.equal(typeof runSteps(toDotSteps(index, big, { level_layout_min_nodes: Infinity })).dot, "string");
});
