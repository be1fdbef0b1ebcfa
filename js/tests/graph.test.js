import { test } from "node:test";
import assert from "node:assert/strict";
import { indexViewModel, visibleGraph, toDot, layoutKey, expandedToShow, initialExpanded, tooltipFor, drawnKeys } from "../src/graph.js";
import { highlightSets, highlightDotIds } from "../src/highlight.js";
import { search } from "../src/search.js";
import { escapeDot, escapeHtml } from "../src/escape.js";
import { loadReal, REAL, needsReal } from "./helpers.js";

/** Every id a view model references, by where it is referenced. */
function referencedIds(vm) {
  const refs = [];
  const add = (where, ids, kind) => { for (const id of ids || []) refs.push([where, id, kind]); };
  for (const e of vm.edges) add(`edge ${e.id}`, [e.source, e.target], "node");
  for (const n of vm.nodes) add(`node ${n.id}`, [n.cluster, n.subcluster].filter(Boolean), "cluster");
  for (const c of vm.clusters) add(`cluster ${c.id}`, [c.parent].filter(Boolean), "cluster");
  for (const w of vm.weights) {
    add(`weight ${w.path}`, [...w.node_ids, ...w.path_nodes, ...w.boundary_nodes], "node");
    add(`weight ${w.path}`, w.path_edges, "edge");
  }
  for (const g of vm.groups) {
    add(`group ${g.index}`, g.transition_nodes, "node");
    add(`group ${g.index}`, g.transition_edges, "edge");
    add(`group ${g.index}`, [g.cluster].filter(Boolean), "cluster");
  }
  for (const r of vm.relations) {
    add(`relation ${r.id}`, [r.node, ...r.slice_nodes], "node");
    add(`relation ${r.id}`, r.slice_edges, "edge");
  }
  for (const r of vm.readouts) { add("readout", r.path_nodes, "node"); add("readout", r.path_edges, "edge"); }
  for (const p of vm.perturbations) add("perturbation", [p.node, p.perturb_node].filter(Boolean), "node");
  for (const d of vm.diagnostics) add(`diagnostic ${d.index}`, d.node_ids, "node");
  return refs;
}

test("real view models: every referenced id resolves, also after the viewer adds modules", needsReal, () => {
  for (const name of REAL) {
    const vm = loadReal(name);
    const index = indexViewModel(vm);
    const known = { node: index.nodes, edge: index.edges, cluster: index.clusters };
    for (const [where, id, kind] of referencedIds(index.vm)) {
      assert.ok(known[kind].has(id), `${name}: ${where} -> unknown ${kind} ${id}`);
    }
    // the viewer-made module tree only re-parents: every original node and cluster is kept
    for (const n of vm.nodes) assert.ok(index.nodes.has(n.id));
    for (const c of vm.clusters) assert.ok(index.clusters.has(c.id));
  }
});

test("sub-jaxprs: the owner equation is the collapsed cluster's entry; branches only open with it", needsReal, () => {
  const index = indexViewModel(loadReal("subjaxprs"));
  const collapsed = visibleGraph(index, []);
  // owner e5 (cond) and everything inside its branches are one collapsed node
  assert.match(collapsed.nodeToDot.get("e5"), /^k/);
  for (const id of ["e5.0/0", "e5.1/1", "e5.1/0/1"]) assert.equal(collapsed.nodeToDot.get(id), collapsed.nodeToDot.get("e5"));
  assert.equal(collapsed.clusterToDot.get("c:e5"), collapsed.nodeToDot.get("e5"));
  // a branch cluster is not collapsible by itself: expanding it alone changes nothing
  assert.equal(visibleGraph(index, ["c:e5.1"]).nodeCount, collapsed.nodeCount);
  const open = visibleGraph(index, ["c:e5"]);
  assert.match(open.nodeToDot.get("e5"), /^n/);
  assert.match(open.clusterToDot.get("c:e5.0"), /^s/);
  assert.match(open.clusterToDot.get("c:e5.1"), /^s/);
  // the custom_jvp inside branch 1 stays collapsed until expanded
  assert.match(open.nodeToDot.get("e5.1/0/0"), /^k/);
  assert.match(visibleGraph(index, ["c:e5", "c:e5.1/0"]).nodeToDot.get("e5.1/0/0"), /^n/);
  assert.deepEqual(expandedToShow(index, "e5.1/0/1", []).sort(), ["c:e5", "c:e5.1/0"]);
  // edges: no self loops, no duplicate pairs
  for (const g of [collapsed, open]) {
    assert.equal(new Set(g.edges.map((e) => `${e.source}>${e.target}`)).size, g.edges.length);
    assert.ok(g.edges.every((e) => e.source !== e.target));
  }
  assert.match(tooltipFor(index, collapsed, collapsed.clusterToDot.get("c:e5")), /click to expand/);
});

test("the ~2,000-equation model opens as a small level of module ranges", needsReal, () => {
  const vm = loadReal("stacked_2000");
  assert.ok(vm.nodes.filter((n) => n.kind === "eqn").length > 1500);
  const index = indexViewModel(vm);
  const top = visibleGraph(index, initialExpanded(index.vm));
  assert.ok(top.nodeCount < 40, `top level has ${top.nodeCount} nodes`);
  // every layer is a cell of the view model (its own box), in ranges of 16 made by the viewer
  const modules = [...index.clusters.values()].filter((c) => c.kind === "module" || c.kind === "cell");
  assert.ok(modules.length > 100);
  assert.ok(!index.clusters.has("m:layers.50") && index.clusters.get("cell:layers.50").parent.startsWith("m:"));
  // a weight's layer: expanding to show it opens its range and its cell only
  const expanded = expandedToShow(index, "h:layers.50.h:out", []);
  assert.equal(expanded.length, 2);
  assert.ok(expanded.includes("cell:layers.50"));
  const level = visibleGraph(index, expanded);
  assert.ok(level.nodeCount < top.nodeCount + 80, `${level.nodeCount}`);
  assert.match(level.nodeToDot.get("h:layers.50.h:out"), /^n/);
  // the group cluster of layer 50 nests in the layer's cell
  assert.equal(index.clusters.get(vm.nodes.find((n) => n.id === "h:layers.50.h:out").cluster).parent, "cell:layers.50");
  const { dot, large } = toDot(index, visibleGraph(index, modules.map((c) => c.id)));
  assert.ok(large);
  for (const attr of ['nslimit="1"', 'mclimit="0.1"', 'splines="line"']) assert.ok(dot.includes(attr), attr);
  assert.ok(!toDot(index, top).dot.includes("nslimit"));
  // a diagnostic's nodes inside collapsed modules land on the collapsed module node
  const classes = highlightDotIds(highlightSets(index, { kind: "weight", id: "layers.48.Wz.weight" }), top);
  assert.ok([...classes.keys()].some((id) => id.startsWith("k")));
});

test("small real models stay flat (no viewer modules) and give DOT with generated names", needsReal, () => {
  for (const name of ["two_layer_rnn", "gru", "lstm", "subjaxprs"]) {
    const vm = loadReal(name);
    const index = indexViewModel(vm);
    assert.ok(![...index.clusters.values()].some((c) => c.kind === "module"), name);
    const graph = visibleGraph(index, initialExpanded(vm));
    const { dot } = toDot(index, graph);
    assert.equal((dot.match(/\{/g) || []).length, (dot.match(/\}/g) || []).length, `${name}: balanced braces`);
    for (const item of graph.items) assert.ok(dot.includes(`${item.dotId} [id="${item.dotId}"`), `${name}: ${item.dotId}`);
    // unconnected parameter nodes are hidden
    assert.ok(![...graph.nodeToDot.keys()].some((id) => id.startsWith("p:")), name);
  }
});

test("user strings are escaped in DOT (quotes, backslashes, newlines, markup)", needsReal, () => {
  assert.equal(escapeDot('a"b\\c\nd'), 'a\\"b\\\\c\\nd');
  assert.equal(escapeHtml(`<script>"'&`), "&lt;script&gt;&quot;&#39;&amp;");
  const vm = loadReal("gru");
  const evil = `x"];evil[label="\\N<script>alert(1)</script>`;
  const node = vm.nodes.find((n) => n.kind === "hidden_in");
  node.label = evil;
  node.hidden_path = evil;
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

test("GRU: Wr highlights its path to the boundary (the Wh op) and carries a fix", needsReal, () => {
  const index = indexViewModel(loadReal("gru"));
  const w = index.weights.get("Wr.weight");
  assert.equal(w.status, "not_learned");
  assert.match(w.fix, /BPTT/);
  const sets = highlightSets(index, { kind: "weight", id: "Wr.weight" });
  const wh = index.weights.get("Wh.weight").node_ids.find((id) => !id.startsWith("p:"));
  assert.deepEqual(w.boundary_nodes, [wh]);
  assert.equal(sets.nodes.get(wh), "hl-boundary");
  assert.equal(w.path_nodes[w.path_nodes.length - 1], wh);
  const graph = visibleGraph(index, []);
  const classes = highlightDotIds(sets, graph);
  assert.equal(classes.get(graph.nodeToDot.get(wh)), "hl-boundary");
  for (const id of w.path_nodes.slice(1, -1)) assert.equal(classes.get(graph.nodeToDot.get(id)), "hl-path", id);
  for (const id of w.path_edges) assert.equal(classes.get(graph.edgeToDot.get(id)), "hl-path", id);
});

test("LSTM: one merged group of h and c; its cluster and transition highlight", needsReal, () => {
  const index = indexViewModel(loadReal("lstm"));
  assert.equal(index.groups.size, 1);
  assert.deepEqual([...index.groups.values()][0].hidden_paths.sort(), ["c", "h"]);
  const sets = highlightSets(index, { kind: "group", id: "0" });
  assert.equal(sets.clusters.get("g0"), "hl-cluster");
  assert.equal(sets.nodes.get("h:c:out"), "hl-transition");
  assert.equal(sets.nodes.get("h:h:out"), "hl-transition");
  const graph = visibleGraph(index, []);
  const classes = highlightDotIds(sets, graph);
  assert.equal(classes.get(graph.clusterToDot.get("g0")), "hl-cluster");
  assert.ok(sets.edges.size > 0 && [...sets.edges.keys()].every((id) => classes.has(graph.edgeToDot.get(id))));
});

test("unknown selections highlight nothing", needsReal, () => {
  const index = indexViewModel(loadReal("gru"));
  for (const sel of [null, {}, { kind: "weight", id: "nope" }, { kind: "bogus", id: "e1" }]) {
    const sets = highlightSets(index, sel);
    assert.equal(sets.nodes.size + sets.edges.size + sets.clusters.size, 0);
  }
});

test("search matches primitives, var names, weight and state paths; bad regex throws", needsReal, () => {
  const index = indexViewModel(loadReal("gru"));
  const kinds = (q) => new Set(search(index, q).map((r) => r.kind));
  assert.ok(kinds("Wr").has("weight"));
  assert.equal(search(index, "^etp_mv$").filter((r) => r.kind === "node").length, 3);
  assert.ok(kinds("^h$").has("group"));
  assert.ok(search(index, "^zzz$").length === 0);
  const edge = index.vm.edges.find((e) => e.var);
  assert.ok(search(index, `^${edge.var}$`).some((r) => r.kind === "edge"));
  assert.throws(() => search(index, "("), SyntaxError);
  assert.equal(search(indexViewModel(loadReal("stacked_2000")), ".", 50).length, 50);
});

test("tooltips carry avals and var shapes", needsReal, () => {
  const index = indexViewModel(loadReal("two_layer_rnn"));
  const graph = visibleGraph(index, ["cell:rnn1", "cell:rnn2"]);
  const etp = index.weights.get("rnn1.W.weight").node_ids.find((id) => !id.startsWith("p:"));
  assert.match(tooltipFor(index, graph, graph.nodeToDot.get(etp)), /etp_mv[\s\S]*f32\[/);
  const edge = index.vm.edges.find((e) => graph.edgeToDot.has(e.id));
  assert.ok(tooltipFor(index, graph, graph.edgeToDot.get(edge.id)).includes(`${edge.var}: ${edge.aval}`));
});

test("a malformed view model is rejected with a message", () => {
  assert.throws(() => indexViewModel({}), /nodes/);
});

test("a cell of the view model is one record node: name and class, a port per weight, its hidden states", needsReal, () => {
  const index = indexViewModel(loadReal("two_layer_rnn"));
  const graph = visibleGraph(index, initialExpanded(index.vm));
  const dotId = graph.nodeToDot.get("e1");
  assert.equal(dotId, graph.clusterToDot.get("cell:rnn1"));
  assert.equal(graph.nodeToDot.get("h:rnn1.h:out"), dotId);  // the hidden state is inside
  const { dot } = toDot(index, graph);
  const line = dot.split("\n").find((l) => l.includes(`id="${dotId}"`));
  assert.match(line, /shape="Mrecord"/);
  assert.ok(line.includes('label="{rnn1 (ValinaRNNCell) ▸|{<w0> W}|h}"'), line);
  assert.ok(!dot.includes("concatenate"));
  assert.ok(drawnKeys(index, graph).has("cell"));
  assert.match(tooltipFor(index, graph, dotId), /weight rnn1\.W\.weight: online/);
  const open = visibleGraph(index, ["cell:rnn1"]);
  assert.match(open.nodeToDot.get("e1"), /^n/);
  assert.equal(open.clusterToDot.get("cell:rnn1")[0], "s");
});
