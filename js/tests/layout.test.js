// Lays out every fixture's DOT with the same Graphviz wasm the worker uses.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Graphviz } from "@hpcc-js/wasm-graphviz";
import { indexViewModel, visibleGraph, toDot } from "../src/graph.js";
import { loadFixture, FIXTURES } from "./helpers.js";

test("Graphviz lays out each fixture and keeps our ids", async () => {
  const graphviz = await Graphviz.load();
  for (const name of FIXTURES) {
    const index = indexViewModel(loadFixture(name));
    const states = [[]];
    const sub = [...index.clusters.values()].find((c) => c.kind === "subjaxpr");
    if (sub) states.push([sub.id]);
    for (const expanded of states) {
      const graph = visibleGraph(index, expanded);
      const svg = graphviz.layout(toDot(index, graph).dot, "svg", "dot");
      for (const item of graph.items) assert.ok(svg.includes(`id="${item.dotId}"`), `${name} ${item.dotId}`);
      for (const edge of graph.edges) assert.ok(svg.includes(`id="${edge.dotId}"`), `${name} ${edge.dotId}`);
      assert.ok(!svg.includes("<script"), name);
    }
  }
});

test("a hostile label comes out of Graphviz as escaped text", async () => {
  const graphviz = await Graphviz.load();
  const vm = loadFixture("gru");
  vm.nodes.find((n) => n.id === "e3").label = `<script>alert("x")</script>'`;
  const index = indexViewModel(vm);
  const svg = graphviz.layout(toDot(index, visibleGraph(index, [])).dot, "svg", "dot");
  assert.ok(!svg.includes("<script>"));
  assert.ok(svg.includes("&lt;script&gt;"));
});
