// Lays out real view models with the same Graphviz wasm and draw-list conversion the worker uses.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Graphviz } from "@hpcc-js/wasm-graphviz";
import { indexViewModel, visibleGraph, toDot } from "../src/graph.js";
import { layoutToDrawList, convertOps } from "../src/xdot.js";
import { loadReal, REAL, needsReal } from "./helpers.js";

const items = (layout) => layout.chunks.flatMap((c) => JSON.parse(c));

test("Graphviz json -> draw list keeps every DOT id, in paint order", needsReal, async () => {
  const graphviz = await Graphviz.load();
  for (const name of REAL) {
    const index = indexViewModel(loadReal(name));
    const states = [[]];
    const sub = [...index.clusters.values()].find((c) => c.kind === "subjaxpr" || c.kind === "module");
    if (sub) states.push([sub.id]);
    for (const expanded of states) {
      const graph = visibleGraph(index, expanded);
      const layout = layoutToDrawList(JSON.parse(graphviz.layout(toDot(index, graph).dot, "json", "dot")));
      const list = items(layout);
      const ids = new Set(list.map((i) => i.id));
      for (const item of graph.items) assert.ok(ids.has(item.dotId), `${name} ${item.dotId}`);
      for (const edge of graph.edges) assert.ok(ids.has(edge.dotId), `${name} ${edge.dotId}`);
      const kinds = list.map((i) => i.k).join(",");
      assert.match(kinds, /^(cluster,)*(edge,)*(node,?)+$/, `${name}: clusters, then edges, then nodes`);
      for (const item of list) {
        assert.ok(item.s.length > 0, `${name} ${item.id} has a shape`);
        for (const s of item.s) assert.ok(["polygon", "path", "ellipse"].includes(s.e));
      }
      assert.ok(layout.width > 0 && layout.height > 0);
    }
  }
});

test("a hostile label stays text in the draw list (no markup is ever parsed)", needsReal, async () => {
  const graphviz = await Graphviz.load();
  const vm = loadReal("gru");
  const evil = `<script>alert("x")</script>'`;
  vm.nodes.find((n) => n.kind === "hidden_in").hidden_path = evil;
  const index = indexViewModel(vm);
  const list = items(layoutToDrawList(JSON.parse(graphviz.layout(toDot(index, visibleGraph(index, [])).dot, "json", "dot"))));
  assert.ok(list.some((i) => i.t.some((t) => t.v === evil)));
});

test("xdot ops: y flipped, fill only where set, edge splines never filled, pen styles", () => {
  const ops = [{ op: "S", style: "setlinewidth(2)" }, { op: "c", color: "#111111" }, { op: "C", color: "#eeeeee" },
    { op: "P", points: [[0, 0], [10, 0], [10, 10]] }, { op: "S", style: "dashed" },
    { op: "b", points: [[0, 0], [1, 1], [2, 2], [0, 0]] },
    { op: "F", size: 10, face: "Helvetica" }, { op: "T", pt: [5, 2], align: "l", width: 3, text: "a<b" }];
  const { shapes, texts } = convertOps([ops], 100, false);
  assert.deepEqual(shapes[0], { e: "polygon", p: "0,100 10,100 10,90", f: "#eeeeee", s: "#111111", w: 2 });
  assert.equal(shapes[1].f, null, "the fill colour was used by the polygon");
  assert.equal(shapes[1].a, "5,2");
  assert.deepEqual(texts[0], { x: 5, y: 98, a: "start", z: 10, f: "Helvetica", c: "#111111", v: "a<b" });
  const edge = convertOps([[{ op: "C", color: "#f00" }, { op: "b", points: [[0, 0], [1, 1], [2, 2], [0, 0]] }]], 10, true);
  assert.equal(edge.shapes[0].f, null);
});
