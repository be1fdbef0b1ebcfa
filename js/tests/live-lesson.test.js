import { test } from "node:test";
import assert from "node:assert/strict";
import { zeroPositions, grownMax } from "../src/live/graph-colour.js";
import { bucketRows } from "../src/live/plots.js";
import { compilingText } from "../src/live/lesson.js";
import { synapseStrips } from "../src/live/activity.js";

test("trace colours: a scale from 0 that only grows, so close values look alike", () => {
  const frame1 = new Map([["r0", 15.2], ["r1", 15.8]]);
  let top = grownMax(frame1, 0);
  const { positions } = zeroPositions(frame1, top);
  assert.equal(top, 15.8);
  assert.ok(Math.abs(positions.get("r0") - 15.2 / 15.8) < 1e-12 && positions.get("r1") === 1);
  // a later frame with smaller traces keeps the scale: the same value, the same colour
  const frame2 = new Map([["r0", 7.6], ["r1", NaN]]);
  top = grownMax(frame2, top);
  assert.equal(top, 15.8);
  assert.equal(zeroPositions(frame2, top).positions.get("r0"), 7.6 / 15.8);
  assert.ok(!zeroPositions(frame2, top).positions.has("r1"));
});

test("page-side overview buckets keep mean, min and max; the first bucket starts at step 0", () => {
  const values = Array.from({ length: 1000 }, (_, i) => (i % 7) - (i === 500 ? 100 : 0));
  values[3] = NaN;
  const { rows, count, width } = bucketRows(values, 0, 256);
  assert.equal(width, 4);
  assert.equal(count, 250);
  assert.deepEqual([...rows.subarray(0, 4)], [0, 1, 0, 2]); // steps 0..3: 0, 1, 2, NaN
  const b = 125; // steps 500..503: -100 + 3, 4, 5, 6
  assert.equal(rows[b * 4], 500);
  assert.equal(rows[b * 4 + 2], -97);
  assert.equal(rows[b * 4 + 3], 6);
});

test("compiling text names the learner, the count in compare mode and the seconds", () => {
  const started = Date.now() - 12_400;
  assert.equal(compilingText({ label: "d_rtrl", index: 1, total: 1 }, started), "compiling d_rtrl … 12 s");
  assert.equal(compilingText({ label: "d_rtrl", index: 2, total: 4 }, started), "compiling 2/4: d_rtrl … 12 s");
  assert.equal(compilingText(null, started), "");
});

test("the synapse view's product strip is trace × signal", () => {
  // rows [T=2, 3, K=2]: (ε, L, g) per unit
  const data = Float32Array.from([1e-16, 2, 3e15, 4, 1e-3, 5, /* t=1 */ 2, 3, 0.5, 1, 1e-3, 2]);
  const { trace, signal, product, grad } = synapseStrips(data, 2, 2, 0);
  assert.deepEqual([...trace].map((v) => +v.toPrecision(6)), [1e-16, 2]);
  assert.deepEqual([...signal].map((v) => +v.toPrecision(6)), [3e15, 0.5]);
  assert.deepEqual([...product].map((v) => +v.toPrecision(5)), [0.3, 1]);
  assert.deepEqual([...grad].map((v) => +v.toPrecision(6)), [1e-3, 1e-3]);
});
