import { test } from "node:test";
import assert from "node:assert/strict";
import { indexViewModel, visibleGraph, toDot, layoutKey, expandedToShow, initialExpanded, tooltipFor } from "../src/graph.js";
import { highlightSets, highlightDotIds } from "../src/highlight.js";
import { search } from "../src/search.js";
import { escapeDot, escapeHtml } from "../src/escape.js";
import { loadFixture, FIXTURES } from "./helpers.js";

test("collapsed sub-jaxpr clusters become one node; expanding shows their equations", () => {
  const index = indexViewModel(loadFixture("two_layer_rnn"));
  const collapsed = visibleGraph(index, []);
  assert.equal(collapsed.nodeToDot.get("e2"), collapsed.nodeToDot.get("e2/0"));
  assert.match(collapsed.nodeToDot.get("e2"), /^k/);
  assert.equal(collapsed.clusterToDot.get("c:e2"), collapsed.nodeToDot.get("e2"));
  const open = visibleGraph(index, ["c:e2"]);
  assert.notEqual(open.nodeToDot.get("e2"), open.nodeToDot.get("e2/0"));
  assert.equal(open.nodeCount, collapsed.nodeCount + 1);
  // param nodes are badges, not nodes, unless asked for
  assert.ok(!collapsed.nodeToDot.has("p:rnn1.W.weight"));
  assert.ok(visibleGraph(index, [], { show_params: true }).nodeToDot.has("p:rnn1.W.weight"));
});

test("edges into a collapsed cluster are remapped, deduplicated, and self-loops dropped", () => {
  const index = indexViewModel(loadFixture("stacked_2000"));
  const graph = visibleGraph(index, []);
  const pairs = new Set(graph.edges.map((e) => `${e.source}>${e.target}`));
  assert.equal(pairs.size, graph.edges.length);
  assert.ok(graph.edges.every((e) => e.source !== e.target));
  // ~2,000 equations collapse to a small top level: 40 layers + hidden states + io
  assert.ok(graph.nodeCount < 200, `top level has ${graph.nodeCount} nodes`);
  const one = visibleGraph(index, ["c:e0"]);
  assert.ok(one.nodeCount > graph.nodeCount + 40 && one.nodeCount < graph.nodeCount + 60);
  const nested = visibleGraph(index, ["c:e0", "c:e0/10"]);
  assert.equal(nested.nodeCount, one.nodeCount + 2);
  // a nested cluster without its parent expanded stays hidden
  assert.equal(visibleGraph(index, ["c:e0/10"]).nodeCount, graph.nodeCount);
});

test("every fixture gives valid-looking DOT with generated names only", () => {
  for (const name of FIXTURES) {
    const vm = loadFixture(name);
    const index = indexViewModel(vm);
    const graph = visibleGraph(index, initialExpanded(vm));
    const { dot, large } = toDot(index, graph);
    assert.ok(dot.startsWith("digraph G {") && dot.trimEnd().endsWith("}"), name);
    assert.equal((dot.match(/\{/g) || []).length, (dot.match(/\}/g) || []).length, `${name}: balanced braces`);
    for (const item of graph.items) assert.ok(dot.includes(`${item.dotId} [id="${item.dotId}"`), `${name}: ${item.dotId}`);
    assert.equal(large, graph.nodeCount > 150);
  }
});

test("large graphs get bounded layout options", () => {
  const index = indexViewModel(loadFixture("stacked_2000"));
  const all = [...index.clusters.values()].filter((c) => c.kind === "subjaxpr").map((c) => c.id);
  const { dot, large } = toDot(index, visibleGraph(index, all));
  assert.ok(large);
  for (const attr of ['nslimit="1"', 'mclimit="0.1"', 'splines="line"']) assert.ok(dot.includes(attr), attr);
  const small = toDot(index, visibleGraph(index, [])).dot;
  assert.ok(!small.includes("nslimit"));
});

test("user strings are escaped in DOT (quotes, backslashes, newlines, markup)", () => {
  assert.equal(escapeDot('a"b\\c\nd'), 'a\\"b\\\\c\\nd');
  assert.equal(escapeHtml(`<script>"'&`), "&lt;script&gt;&quot;&#39;&amp;");
  const vm = loadFixture("gru");
  const evil = `x"];evil[label="\\N<script>alert(1)</script>`;
  vm.nodes[0].label = evil;
  vm.nodes[0].hidden_path = evil;
  const index = indexViewModel(vm);
  const { dot } = toDot(index, visibleGraph(index, []));
  assert.ok(!dot.includes('x"];evil'), "a quote must not close the label");
  assert.ok(dot.includes('x\\"];evil'));
  assert.ok(!/[^\\]\\N/.test(dot), "escString sequences are neutralised");
});

test("layout cache key depends on the expansion set, not its order", () => {
  assert.equal(layoutKey(["b", "a"]), layoutKey(["a", "b"]));
  assert.notEqual(layoutKey(["a"]), layoutKey(["a", "b"]));
  assert.notEqual(layoutKey(["a"], { rankdir: "LR" }), layoutKey(["a"]));
});

test("GRU: highlighting Wr marks its path and the blocking Wh op", () => {
  const index = indexViewModel(loadFixture("gru"));
  const sets = highlightSets(index, { kind: "weight", id: "gru.Wr.weight" });
  assert.equal(sets.nodes.get("e7"), "hl-boundary");
  assert.equal(sets.nodes.get("e3"), "hl-selected");
  assert.equal(sets.nodes.get("e5"), "hl-path");
  assert.ok([...sets.edges.values()].every((c) => c === "hl-path"));
  const graph = visibleGraph(index, []);
  const classes = highlightDotIds(sets, graph);
  assert.equal(classes.get(graph.nodeToDot.get("e7")), "hl-boundary");
  assert.equal(classes.get(graph.edgeToDot.get(index.weights.get("gru.Wr.weight").path_edges[0])), "hl-path");
});

test("LSTM: the merged group highlights its cluster and both states' transition", () => {
  const index = indexViewModel(loadFixture("lstm"));
  const sets = highlightSets(index, { kind: "group", id: "0" });
  assert.equal(sets.clusters.get("g0"), "hl-cluster");
  assert.equal(sets.nodes.get("h:lstm.c:out"), "hl-transition");
  assert.equal(sets.nodes.get("h:lstm.h:out"), "hl-transition");
  const graph = visibleGraph(index, []);
  assert.match(highlightDotIds(sets, graph).keys().next().value, /^[nsx]/);
});

test("highlights of hidden nodes land on the collapsed cluster that holds them", () => {
  const index = indexViewModel(loadFixture("stacked_2000"));
  const graph = visibleGraph(index, []);
  const classes = highlightDotIds(highlightSets(index, { kind: "weight", id: "layers.3.cell.W.weight" }), graph);
  assert.ok(classes.has(graph.clusterToDot.get("c:e3")));
  assert.deepEqual(expandedToShow(index, "e3/10/1", []).sort(), ["c:e3", "c:e3/10"]);
});

test("unknown selections highlight nothing", () => {
  const index = indexViewModel(loadFixture("gru"));
  for (const sel of [null, {}, { kind: "weight", id: "nope" }, { kind: "bogus", id: "e1" }]) {
    const sets = highlightSets(index, sel);
    assert.equal(sets.nodes.size + sets.edges.size + sets.clusters.size, 0);
  }
});

test("search matches primitives, var names, weight and state paths; bad regex throws", () => {
  const index = indexViewModel(loadFixture("gru"));
  const kinds = (q) => new Set(search(index, q).map((r) => r.kind));
  assert.ok(kinds("Wr").has("weight"));
  assert.ok(search(index, "^etp_mv$").filter((r) => r.kind === "node").length === 3);
  assert.ok(kinds("gru\\.h").has("group"));
  assert.ok(search(index, "^xrh$").length === 0);
  assert.ok(search(index, "^h$").some((r) => r.kind === "edge"));
  assert.throws(() => search(index, "("), SyntaxError);
  assert.equal(search(indexViewModel(loadFixture("stacked_2000")), ".", 50).length, 50);
});

test("tooltips carry avals and var shapes", () => {
  const index = indexViewModel(loadFixture("two_layer_rnn"));
  const graph = visibleGraph(index, []);
  assert.match(tooltipFor(index, graph, graph.nodeToDot.get("e1")), /f32\[48,32\]/);
  assert.match(tooltipFor(index, graph, graph.edgeToDot.get("v2")), /c: f32\[48\]/);
  assert.match(tooltipFor(index, graph, graph.clusterToDot.get("c:e2")), /click to expand/);
});

test("a malformed view model is rejected with a message", () => {
  assert.throws(() => indexViewModel({}), /nodes/);
});
