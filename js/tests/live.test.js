import { test } from "node:test";
import assert from "node:assert/strict";
import { smooth, smoothRows, quantile, symmetricRange, relationOf, relationMagnitudes, seriesFromHistory, compareSeriesFromHistory } from "../src/live/series.js";
import { diverging, sequential } from "../src/live/colormap.js";
import { logPositions } from "../src/live/graph-colour.js";
import { panelOf, formatBytes } from "../src/live/index.js";
import { measuredRows } from "../src/live/plots.js";

test("smoothing is an EMA that keeps NaN gaps", () => {
  assert.deepEqual([...smooth([1, 3, NaN, 5], 0)], [1, 3, NaN, 5]);
  assert.deepEqual([...smooth([2, 4], 0.5)], [2, 3]);
});

test("quantile trimming: the top fraction of |v| saturates", () => {
  const values = Float32Array.from({ length: 101 }, (_, i) => i - 50);
  values[100] = 1e6;
  assert.equal(quantile([0, 10], 0.5), 5);
  assert.equal(symmetricRange(values, 0), 1e6);
  assert.ok(symmetricRange(values, 0.05) < 60);
  assert.equal(symmetricRange([0, 0], 0.01), 1);
});

test("diverging map is white at 0, blue below, red above; NaN grey", () => {
  assert.deepEqual(diverging(0), [247, 247, 247]);
  const [r1, , b1] = diverging(-1), [r2, , b2] = diverging(1);
  assert.ok(b1 > r1 && r2 > b2);
  assert.deepEqual(diverging(NaN), [150, 150, 150]);
  assert.deepEqual(sequential(2), sequential(1));
});

test("trace series map to relations; magnitudes combine groups and ES traces", () => {
  assert.equal(relationOf("trace/r3.g0"), "r3");
  assert.equal(relationOf("trace_x/r1"), "r1");
  assert.equal(relationOf("df/r0.g0"), null);
  const s = (v) => ({ data: Float32Array.from(v), shape: [v.length], lastStep: v.length - 1 });
  const m = relationMagnitudes(new Map([["trace_x/r0", s([9, 3])], ["trace_f/r0.g0", s([4])], ["trace/r1.g0", s([NaN])], ["loss", s([1])]]));
  assert.deepEqual([...m], [["r0", 5]]);
  const { positions } = logPositions(new Map([["r0", 1], ["r1", 100], ["r2", 10]]));
  assert.deepEqual([...positions.values()], [0, 1, 0.5]);
});

test("a saved history becomes series (null -> NaN, heatmaps [T, units], fidelity [n, 3])", () => {
  const history = { steps: [0, 1, 2, 3], metrics: { loss: [3, null, 1, 2], "df/r0.g0": [[1, 2], [3, 4], [5, 6], [null, null]] },
    fidelity: [{ step: 2, cosine: 0.9, rel_error: 0.1 }] };
  const specs = [{ name: "loss", kind: "line" }, { name: "df/r0.g0", kind: "heatmap" }, { name: "fidelity", kind: "fidelity" }];
  const series = seriesFromHistory(history, specs, 3);
  assert.ok(Number.isNaN(series.get("loss").data[0]) && series.get("loss").lastStep === 3);
  // heatmaps keep the measured rows only (the unmeasured step 3 is dropped), with their steps
  assert.deepEqual(series.get("df/r0.g0").shape, [3, 2]);
  assert.deepEqual([...series.get("df/r0.g0").data], [1, 2, 3, 4, 5, 6]);
  assert.deepEqual(series.get("df/r0.g0").steps, [0, 1, 2]);
  assert.deepEqual(series.get("fidelity").shape, [1, 3]);
  assert.equal(panelOf({ name: "trace_f/r0.g1", kind: "line" }), "traces");
  assert.equal(panelOf({ name: "loss", kind: "line" }), "loss");
});

test("heatmaps skip rows that were not measured", () => {
  const data = Float32Array.from([NaN, NaN, 1, 2, NaN, NaN, 3, NaN]);
  assert.deepEqual(measuredRows(data, 4, 2), [1, 3]);
});

test("compare mode: a saved {algorithm: history} becomes [k, m, 2] rows in label order, NaN-padded", () => {
  const history = { compare: {
    d_rtrl: { steps: [0, 1, 2], metrics: { loss: [3, 2, null] }, fidelity: [{ step: 2, cosine: 0.5, rel_error: 0.9 }] },
    bptt: { steps: [0, 1], metrics: { loss: [4, 1] }, fidelity: [{ step: 2, cosine: null, rel_error: null }] },
  } };
  const specs = [{ name: "loss", kind: "compare", labels: ["bptt", "d_rtrl"] }, { name: "cosine", kind: "compare", labels: ["bptt", "d_rtrl"] }];
  const series = compareSeriesFromHistory(history, specs);
  const loss = series.get("loss");
  assert.deepEqual(loss.shape, [2, 3, 2]);
  // bptt (first label) has 2 rows: one NaN padding row in front
  assert.ok(Number.isNaN(loss.data[0]));
  assert.deepEqual([...loss.data.slice(2, 6)], [0, 4, 1, 1]);
  assert.deepEqual([...loss.data.slice(6, 10)], [0, 3, 1, 2]);
  assert.ok(Number.isNaN(loss.data[11]));  // null loss -> NaN
  const cosine = series.get("cosine");
  assert.deepEqual(cosine.shape, [2, 1, 2]);
  assert.ok(Number.isNaN(cosine.data[1]));  // no gradient in the window: undefined, not 0
  assert.equal(cosine.data[3], 0.5);
});

test("compare mode: smoothing acts on each algorithm's values, not on the steps", () => {
  const data = Float32Array.from([0, 2, 1, 4, 0, 10, 1, 20]);
  const out = smoothRows(data, [2, 2, 2], 0.5);
  assert.deepEqual([...out], [0, 2, 1, 3, 0, 10, 1, 15]);
  assert.equal(smoothRows(data, [2, 2, 2], 0), data);
});

test("learner-state bytes are formatted like Python's format_bytes", () => {
  assert.equal(formatBytes(512), "512 B");
  assert.equal(formatBytes(3 * 2 ** 20), "3.0 MiB");
  assert.equal(formatBytes(null), "–");
});

test("loss smoothing: a trailing mean that skips the steps without a target", async () => {
  const { windowMean, windowMeanRows, stepValues } = await import("../src/live/series.js");
  assert.deepEqual(Array.from(windowMean([1, NaN, 3, 5], 2)), [1, 1, 3, 4]);
  assert.ok(Number.isNaN(windowMean([NaN, NaN, 1], 2)[1]));
  const rows = windowMeanRows(Float32Array.from([0, 2, 1, NaN, 2, 4]), [1, 3, 2], 3);
  assert.deepEqual(Array.from(rows), [0, 2, 1, 2, 2, 3]);
  // a masked task's loss is NaN where nothing was labelled; accuracy is correct / labelled
  const metrics = { loss: [0, 0.5, 0, 0.25], "accuracy/labelled": [0, 2, 0, 1], "accuracy/correct": [0, 1, 0, 1] };
  assert.deepEqual(stepValues(metrics, "loss").map((v) => (Number.isNaN(v) ? null : v)), [null, 0.5, null, 0.25]);
  assert.deepEqual(stepValues(metrics, "accuracy").map((v) => (Number.isNaN(v) ? null : v)), [null, 0.5, null, 1]);
});

test("constant panels: detected within float32 noise and explained by the model's constants", async () => {
  const { constantValue, explainConstant, defaultSmoothing } = await import("../src/live/index.js");
  assert.equal(constantValue(Float32Array.from([0.905, 0.905, NaN, 0.905])), Math.fround(0.905));
  assert.equal(constantValue([0.9, 0.91]), null);
  assert.equal(constantValue([NaN]), null);
  const spec = { constants: [{ value: 0.9048374180359595, text: "exp(−Δt/τ), τ = 10" }] };
  assert.equal(explainConstant(spec, Math.fround(0.9048374)), "exp(−Δt/τ), τ = 10");
  assert.equal(explainConstant(spec, 0.5), "");
  assert.equal(defaultSmoothing({ episode: 100 }), 1);
  assert.equal(defaultSmoothing({ episode: 11 }), 10);
});

test("activity: the last episode of a saved history; the default synapse unit is the most active", async () => {
  const { activityFromHistory } = await import("../src/live/series.js");
  const { mostActiveUnit } = await import("../src/live/activity.js");
  const history = { activity: { steps: [5, 6, 7, 8, 9, 10, 11], values: { "activity/hidden": [[1], [2], [3], [4], [5], [6], [7]] } } };
  const series = activityFromHistory(history, { name: "activity/hidden", episode: 4 });
  assert.deepEqual(series && series.steps, [8, 9, 10, 11]);
  assert.deepEqual(series && Array.from(series.data), [4, 5, 6, 7]);
  const spikes = { data: Float32Array.from([0, 1, 0, 0, 1, 1]), shape: [2, 3] };
  assert.equal(mostActiveUnit(spikes, undefined), 1);
  assert.equal(mostActiveUnit({ data: new Float32Array(6), shape: [2, 3] }, undefined), 0);
});
