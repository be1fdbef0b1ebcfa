import { test } from "node:test";
import assert from "node:assert/strict";
import { indexViewModel, visibleGraph, toDot, COLLAPSIBLE } from "../src/graph.js";
import { missingRecords, missingDrawn, mergePart, pickPart, PartSource, partSource } from "../src/parts.js";
import { loadReal, loadRealSplit, needsReal } from "./helpers.js";

/** A source over a split's parts that counts its requests (what the kernel would answer). */
function countingSource(parts) {
  const requests = [];
  const source = new PartSource(async (request) => { requests.push(request); return pickPart(parts, request); });
  return { source, requests };
}

/** Load and merge what `graph` draws of a shell's index; returns the requests' boxes. */
async function loadDrawn(index, graph, missing, source) {
  const wanted = missingDrawn(index, graph, missing);
  for (const [box, ask] of wanted) mergePart(index, missing, await source.load({ box: box || null, ...ask }));
  return [...wanted.keys()];
}

test("a whole view model misses nothing; a shell misses every record until its parts come", needsReal, () => {
  const whole = missingRecords(loadReal("gru"));
  assert.equal(whole.nodes.size + whole.weights.size, 0);
  const { shell } = loadRealSplit("stacked_2000");
  const missing = missingRecords(shell);
  assert.equal(missing.nodes.size, shell.nodes.length);
  assert.equal(missing.weights.size, shell.weights.length);
});

test("merging every part gives the records of the whole view model (the viewer's modules kept)", needsReal, async () => {
  for (const name of ["stacked_2000", "subjaxprs"]) {
    const { shell, parts } = loadRealSplit(name);
    const whole = indexViewModel(loadReal(name));
    const index = indexViewModel(shell);
    const missing = missingRecords(shell);
    const { source } = countingSource(parts);
    mergePart(index, missing, await source.load({ nodes: [...missing.nodes], weights: [...missing.weights] }));
    assert.equal(missing.nodes.size + missing.weights.size, 0, name);
    assert.deepEqual(index.nodes, whole.nodes, name);
    assert.deepEqual(index.weights, whole.weights, name);
    assert.deepEqual(index.clusters, whole.clusters, name);  // the same module boxes from the shell
  }
});

test("the folded first view and an opened box draw the same graph from a shell and its parts", needsReal, async () => {
  const { shell, parts } = loadRealSplit("stacked_2000");
  const whole = indexViewModel(loadReal("stacked_2000"));
  const index = indexViewModel(shell);
  const missing = missingRecords(shell);
  const { source, requests } = countingSource(parts);
  const first = visibleGraph(index, []);
  assert.deepEqual(await loadDrawn(index, first, missing, source), [""]);  // the top of the graph only
  assert.equal(toDot(index, first).dot, toDot(whole, visibleGraph(whole, [])).dot);
  const range = [...index.clusters.values()].find((c) => COLLAPSIBLE.has(c.kind) && !c.parent).id;
  const box = [...index.clusters.values()].find((c) => c.parent === range && COLLAPSIBLE.has(c.kind)).id;
  // a box of boxes (16 modules) draws closed boxes only: nothing to ask for
  const asked0 = requests.length;
  assert.deepEqual(await loadDrawn(index, visibleGraph(index, [range]), missing, source), []);
  assert.equal(requests.length, asked0);
  const before = missing.nodes.size;
  const opened = visibleGraph(index, [range, box]);
  assert.deepEqual(await loadDrawn(index, opened, missing, source), [box]);
  assert.ok(missing.nodes.size < before, "the box's nodes came");
  assert.ok(missing.nodes.size > 0, "the closed boxes' nodes did not");
  assert.equal(toDot(index, opened).dot, toDot(whole, visibleGraph(whole, [range, box])).dot);
  // the box's records asked for once: opening it again asks nothing
  const asked = requests.length;
  await loadDrawn(index, visibleGraph(index, [range, box]), missing, source);
  assert.equal(requests.length, asked);
});

test("a part source asks for each id once, shares an ask in flight and retries a failed one", async () => {
  const parts = { nodes: { a: { source: "m.py:1" }, b: { source: "m.py:2" } }, weights: { W: { summary: "s" } } };
  let fail = true;
  const asks = [];
  const source = new PartSource(async (request) => {
    asks.push(request);
    if (fail) { fail = false; throw new Error("kernel busy"); }
    return pickPart(parts, request);
  });
  await assert.rejects(source.load({ nodes: ["a"] }), /kernel busy/);
  const [one, two] = await Promise.all([source.load({ box: "m:x", nodes: ["a", "b"], weights: ["W"] }), source.load({ nodes: ["b"] })]);
  assert.deepEqual(one, { nodes: parts.nodes, weights: parts.weights });
  assert.deepEqual(two.nodes.b, parts.nodes.b);
  await source.load({ nodes: ["a"], weights: ["W"] });
  assert.deepEqual(asks, [{ box: null, nodes: ["a"], weights: [] }, { box: "m:x", nodes: ["a", "b"], weights: ["W"] }]);
});

test("an unknown id is an error naming it, from the page's own parts as from the kernel", async () => {
  const embedded = { nodes: { a: {} }, weights: {} };
  assert.throws(() => pickPart(embedded, { nodes: ["zz"] }), /no node 'zz'/);
  await assert.rejects(partSource(embedded, () => Promise.reject(new Error("unused"))).load({ weights: ["V"] }), /no weight 'V'/);
  const sent = [];
  const viaKernel = partSource(null, async (method, params) => { sent.push([method, params]); return { nodes: {}, weights: {} }; });
  await viaKernel.load({ box: "m:x", nodes: ["a"] });
  assert.deepEqual(sent, [["view_part", { box: "m:x", nodes: ["a"], weights: [] }]]);
});

test("merging keeps fields a record has and refuses records the view model lacks", () => {
  const vm = { schema: 3, nodes: [{ id: "e0", kind: "eqn", cluster: "m:a" }], edges: [], weights: [{ path: "W", status: "online" }], parts: {} };
  const index = indexViewModel(vm, { moduleThreshold: 1e9 });
  const missing = missingRecords(vm);
  mergePart(index, missing, { nodes: { e0: { cluster: null, source: "m.py:3" } }, weights: { W: { summary: "learned" } } });
  assert.deepEqual(index.nodes.get("e0"), { id: "e0", kind: "eqn", cluster: "m:a", source: "m.py:3" });
  assert.equal(index.weights.get("W").summary, "learned");
  assert.equal(missing.nodes.size + missing.weights.size, 0);
  assert.throws(() => mergePart(index, missing, { nodes: { e9: {} }, weights: {} }), /node 'e9'/);
});
