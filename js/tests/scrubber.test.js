import { test } from "node:test";
import assert from "node:assert/strict";
import { seriesValueAt, overviewValueAt, valueAt, magnitudesAt, runMaxMagnitude, cursorPosition, columnAt, compareValuesAt, seriesSpan, cursorText } from "../src/live/scrubber.js";
import { bucketRows, staticOverviews } from "../src/live/series.js";

const NaN_ = Number.NaN;

test("a recent window at a step: the last measured value at or before it; null before the window", () => {
  // steps 10..15, measured on 11, 13 and 15
  const series = { data: Float32Array.from([NaN_, 1, NaN_, 3, NaN_, 5]), shape: [6], lastStep: 15 };
  assert.deepEqual(seriesValueAt(series, 13), { value: 3, step: 13 });
  assert.deepEqual(seriesValueAt(series, 14), { value: 3, step: 13 });
  assert.deepEqual(seriesValueAt(series, 99), { value: 5, step: 15 });
  assert.equal(seriesValueAt(series, 10), null); // nothing measured yet in the window
  assert.equal(seriesValueAt(series, 9), null);
});

test("a downsampled series at a step is the mean of the bucket holding it, or the last bucket before with a value", () => {
  const values = Array.from({ length: 2000 }, (_, t) => (t % 4 === 3 ? t : NaN_));
  values.fill(NaN_, 1024, 1100); // a stretch without a measurement
  const { rows, count, width } = bucketRows(values, 0, 512);
  assert.equal(width, 4);
  assert.ok(count <= 512);
  // bucket 100 holds steps 400..403, measured at 403 only
  assert.deepEqual(overviewValueAt(rows, count, width, 401), { value: 403, from: 400, to: 403 });
  // a step in the unmeasured stretch reads the last bucket before it with a value
  assert.deepEqual(overviewValueAt(rows, count, width, 1050), { value: 1023, from: 1020, to: 1023 });
  assert.equal(overviewValueAt(rows, count, width, -1), null);
  // the recent window wins where the step lies in it; the overview elsewhere
  const overview = { data: rows, shape: [count, 4], width };
  const recent = { data: Float32Array.from([7, 8]), shape: [2], lastStep: 1999 };
  assert.deepEqual(valueAt(recent, overview, 1999), { value: 8, from: 1999, to: 1999, exact: true });
  assert.deepEqual(valueAt(recent, overview, 401), { value: 403, from: 400, to: 403, exact: false });
});

test("relation magnitudes at a step: the root of the sum of squares of the relation's series there", () => {
  const ov = (/** @type {number[]} */ means) => ({ data: Float32Array.from(means.flatMap((m, i) => [i, m, m, m + 1])), shape: [means.length, 4], width: 1 });
  const overviews = new Map([["trace_x/r0", ov([3, 6])], ["trace_f/r0", ov([4, 8])], ["trace/r1.g0", ov([1, 2])], ["loss", ov([9, 9])]]);
  const at0 = magnitudesAt(new Map(), overviews, 0);
  assert.equal(at0.get("r0"), 5);
  assert.equal(at0.get("r1"), 1);
  assert.equal(at0.size, 2);
  assert.equal(magnitudesAt(new Map(), overviews, Infinity).get("r0"), 10);
  assert.equal(magnitudesAt(new Map(), overviews, 1, 0, new Set(["trace_f/r0"])).get("r0"), 6);
  // the scale's top: the largest bucket maximum of the run (r0 at step 1: sqrt(7² + 9²))
  assert.equal(runMaxMagnitude(overviews), Math.hypot(7, 9));
  // compare mode: [k, m, 4], the chosen learner
  const two = { data: Float32Array.from([0, 1, 1, 1, 0, 2, 2, 2]), shape: [2, 1, 4], width: 1 };
  assert.equal(magnitudesAt(new Map(), new Map([["trace/r2.g0", two]]), 0, 1).get("r2"), 2);
});

test("the cursor: linear axes, heatmap columns and checkpoints; off the axis: none", () => {
  const box = { x: 50, y: 5, w: 100, h: 60 };
  assert.equal(cursorPosition({ ...box, first: 0, last: 200 }, 100)?.x, 100);
  assert.equal(cursorPosition({ ...box, first: 100, last: 200 }, 99), null);
  const columns = cursorPosition({ ...box, steps: [10, 20, 30, 40], columns: true }, 35);
  assert.deepEqual(columns, { x: 50 + 2.5 * 25, index: 2, width: 25 });
  assert.equal(cursorPosition({ ...box, steps: [10, 20, 30, 40], columns: true }, 9), null);
  assert.equal(cursorPosition({ ...box, steps: [10, 20, 30] }, 25)?.x, 100);
  assert.equal(columnAt([10, 20, 30], 30), 2);
  assert.equal(columnAt([], 30), -1);
});

test("compare rows at a step and the run's span; panel texts at a step", () => {
  const series = { data: Float32Array.from([10, 1, 11, 2, NaN_, NaN_, 10, 5, 11, NaN_, 12, 7]), shape: [2, 3, 2], lastStep: 12 };
  assert.deepEqual(compareValuesAt(series, 11), [{ value: 2, step: 11 }, { value: 5, step: 10 }]);
  assert.deepEqual(seriesSpan(series), { first: 10, last: 12 });
  assert.deepEqual(seriesSpan({ data: new Float32Array(5), shape: [5], lastStep: 9 }), { first: 5, last: 9 });
  const live = {
    specs: [{ name: "loss", kind: "compare", labels: ["a", "b"] }, { name: "df/r0", kind: "heatmap" }, { name: "fidelity", kind: "fidelity" }],
    series: new Map([["loss", series], ["df/r0", { data: new Float32Array(4), shape: [2, 2], lastStep: 20, steps: [16, 20] }],
      ["fidelity", { data: Float32Array.from([8, 0.9, 0.1, 16, 0.95, 0.05]), shape: [2, 3], lastStep: 16 }]]),
    overviews: new Map(),
  };
  assert.equal(cursorText(live, "loss", 11), "step 11: a 2 · b 5");
  assert.equal(cursorText(live, "df/r0", 18), "step 18: column of measured step 16");
  assert.match(cursorText(live, "df/r0", 3), /before the recent window \(from step 16\)/);
  assert.equal(cursorText(live, "fidelity", 17), "step 17: checkpoint 16: cosine 0.95, rel. error 0.05");
});

test("a saved page's trace overviews: every trace series bucketed like the live pushes", () => {
  const steps = Array.from({ length: 1500 }, (_, t) => t);
  const trace = steps.map((t) => (t % 2 ? t / 10 : null)); // measured every other step (null: not)
  const history = { steps, metrics: { loss: steps.map(() => 1), "trace/r0.g0": trace } };
  const out = staticOverviews(history, [{ name: "loss" }], new Set(["loss"]));
  const o = /** @type {any} */ (out.get("trace/r0.g0"));
  assert.equal(o.width, 4);
  assert.deepEqual(o.shape, [375, 4]);
  assert.equal(valueAt(undefined, o, 402)?.value, Math.fround((401 + 403) / 20)); // steps 400..403, measured 401, 403
  assert.ok(out.has("loss"));
  const compare = { compare: { a: history, b: { steps, metrics: { loss: steps.map(() => 2) } } } };
  const both = /** @type {any} */ (staticOverviews(compare, [{ name: "loss", labels: ["a", "b"] }], new Set(["loss"])).get("trace/r0.g0"));
  assert.deepEqual(both.shape, [2, 375, 4]);
  assert.ok(Number.isNaN(both.data[375 * 4 + 1]));
});
