// @ts-check
/**
 * Live series on the page: the recent window of each metric (float32, as pushed by
 * etp_viz/explorer/live_explorer.py, or read from a saved page's `live_history`), and the pure
 * maths the panels need (smoothing, quantiles, per-relation trace magnitude).
 */

/**
 * A pushed buffer (custom message `{type: "live", name, shape, dtype: "float32"}`, one
 * little-endian float32 buffer in C order) as a Float32Array (copied when unaligned).
 */
export function decodeFloat32(/** @type {ArrayBuffer | DataView | ArrayBufferView} */ buffer) {
  if (buffer instanceof Float32Array) return buffer;
  if (ArrayBuffer.isView(buffer)) {
    const bytes = new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
    return new Float32Array(bytes.slice().buffer);
  }
  return new Float32Array(buffer);
}

/**
 * @typedef {object} Series
 * @property {Float32Array} data  C order, `shape`
 * @property {number[]} shape  `[T]` (lines), `[T, units]` (heatmaps), `[n, 3]` (fidelity)
 * @property {number} lastStep  global step of the last row (-1 when unknown)
 * @property {number[]} [steps]  heatmaps: the global step of each (measured) row
 */

/** Exponential moving average (`alpha` = weight of the past, 0 = none); NaN stays NaN. */
export function smooth(/** @type {ArrayLike<number>} */ values, alpha = 0) {
  const out = new Float32Array(values.length);
  let state = NaN;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!Number.isFinite(v)) { out[i] = v; continue; }
    state = Number.isFinite(state) ? alpha * state + (1 - alpha) * v : v;
    out[i] = state;
  }
  return out;
}

/**
 * Trailing mean over the last `window` points (NaN points skipped: a masked task's steps
 * without a target); NaN where the window holds no finite value. `window` <= 1: a copy.
 */
export function windowMean(/** @type {ArrayLike<number>} */ values, window = 1) {
  const out = Float32Array.from(values);
  if (!(window > 1)) return out;
  let sum = 0, count = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (Number.isFinite(v)) { sum += v; count++; }
    const j = i - window;
    if (j >= 0 && Number.isFinite(values[j])) { sum -= values[j]; count--; }
    out[i] = count > 0 ? sum / count : NaN;
  }
  return out;
}

/**
 * `windowMean` applied to the values of a compare-mode `[k, m, 2]` array (rows of (step,
 * value)), each algorithm on its own; a new array.
 * @param {Float32Array} data @param {number[]} shape @param {number} window
 */
export function windowMeanRows(data, shape, window) {
  if (!(window > 1) || shape.length !== 3) return data;
  const [k, m] = shape;
  const out = Float32Array.from(data);
  for (let i = 0; i < k; i++) {
    const values = new Float32Array(m);
    for (let r = 0; r < m; r++) values[r] = data[(i * m + r) * 2 + 1];
    windowMean(values, window).forEach((v, r) => { if (Number.isFinite(data[(i * m + r) * 2 + 1]) || Number.isFinite(v)) out[(i * m + r) * 2 + 1] = v; });
  }
  return out;
}

/** The `q` quantile (0..1) of the finite values (linear interpolation); NaN when none. */
export function quantile(/** @type {ArrayLike<number>} */ values, /** @type {number} */ q) {
  const finite = Array.from(values).filter(Number.isFinite).sort((a, b) => a - b);
  if (!finite.length) return NaN;
  const x = Math.min(Math.max(q, 0), 1) * (finite.length - 1);
  const i = Math.floor(x);
  return i + 1 < finite.length ? finite[i] + (finite[i + 1] - finite[i]) * (x - i) : finite[i];
}

/**
 * The symmetric colour range of a heatmap: the `1 - trim` quantile of |v| (so the `trim`
 * fraction of largest magnitudes saturates instead of washing out the rest).
 */
export function symmetricRange(/** @type {ArrayLike<number>} */ values, trim = 0.01) {
  const abs = Float32Array.from(values, Math.abs);
  const range = quantile(abs, 1 - trim);
  return Number.isFinite(range) && range > 0 ? range : 1;
}

/** `{min, max}` of the finite values (positive ones only with `positive`). */
export function extent(/** @type {ArrayLike<number>} */ values, positive = false) {
  let min = Infinity, max = -Infinity;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!Number.isFinite(v) || (positive && v <= 0)) continue;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return { min, max };
}

/**
 * Relation id (`r3`) of a trace series name (`trace/r3.g0`, `trace_x/r3`, `trace_f/r3.g1`);
 * null for anything else.
 */
export function relationOf(/** @type {string} */ name) {
  const match = /^trace(?:_x|_f)?\/(r\d+)(?:\.g\d+)?$/.exec(name);
  return match ? match[1] : null;
}

/**
 * Current trace magnitude of each relation: the root of the sum of squares of the latest value
 * of every trace series of the relation (groups, and ε_x/ε_f for ES-D-RTRL).
 * @param {Map<string, Series>} series
 * @returns {Map<string, number>}
 */
export function relationMagnitudes(series) {
  /** @type {Map<string, number>} */
  const sums = new Map();
  for (const [name, s] of series) {
    const relation = relationOf(name);
    if (!relation || !s.data.length) continue;
    const last = s.data[s.data.length - 1];
    if (!Number.isFinite(last)) continue;
    sums.set(relation, (sums.get(relation) || 0) + last * last);
  }
  return new Map([...sums].map(([r, s]) => [r, Math.sqrt(s)]));
}

/**
 * Series from a saved page's `live_history` (`History.to_json()`: `null` for non-finite),
 * keeping the last `window` rows like the live pushes.
 * @param {any} history
 * @param {{name: string, kind: string}[]} specs
 * @returns {Map<string, Series>}
 */
export function seriesFromHistory(history, specs, window = 500) {
  /** @type {Map<string, Series>} */
  const out = new Map();
  if (!history || !Array.isArray(history.steps) || !history.steps.length) return out;
  const steps = history.steps;
  const lastStep = Number(steps[steps.length - 1]);
  const toNumber = (/** @type {any} */ v) => (v == null ? NaN : Number(v));
  const metrics = history.metrics || {};
  for (const spec of specs) {
    if (spec.kind === "activity") {
      const activity = activityFromHistory(history, spec);
      if (activity) out.set(spec.name, activity);
      continue;
    }
    if (spec.name === "loss" || spec.name === "accuracy") {
      const values = stepValues(metrics, spec.name).slice(-window);
      if (values.length) out.set(spec.name, { data: Float32Array.from(values), shape: [values.length], lastStep });
      continue;
    }
    if (spec.kind === "fidelity") {
      const rows = (history.fidelity || []).slice(-window);
      if (!rows.length) continue;
      const data = Float32Array.from(rows.flatMap((/** @type {any} */ f) => [f.step, f.cosine, f.rel_error].map(toNumber)));
      out.set(spec.name, { data, shape: [rows.length, 3], lastStep: Number(rows[rows.length - 1].step) });
      continue;
    }
    const values = history.metrics && history.metrics[spec.name];
    if (!Array.isArray(values) || !values.length) continue;
    if (spec.kind === "heatmap") {
      // measured steps only (a row of nulls was not measured), like the live pushes
      const measured = values.map((row, t) => [row, Number(steps[t])])
        .filter(([row]) => Array.isArray(row) && row.some((v) => v != null)).slice(-window);
      if (!measured.length) continue;
      const units = measured[0][0].length;
      const data = Float32Array.from(measured.flatMap(([row]) => row.map(toNumber)));
      out.set(spec.name, { data, shape: [measured.length, units], lastStep, steps: measured.map(([, s]) => s) });
      continue;
    }
    const rows = values.slice(-window);
    if (Array.isArray(rows[0])) {
      const units = rows[0].length;
      const data = Float32Array.from(rows.flat().map(toNumber));
      out.set(spec.name, { data, shape: [rows.length, units], lastStep });
    } else {
      out.set(spec.name, { data: Float32Array.from(rows.map(toNumber)), shape: [rows.length], lastStep });
    }
  }
  return out;
}

/**
 * A saved history's per-step loss (NaN on steps without a target when the run recorded
 * `accuracy/labelled`: a masked loss is 0 there) or accuracy (correct / labelled, NaN where
 * nothing was labelled), like etp_viz/explorer/live_panels.py pushes them.
 * @param {Record<string, any[]>} metrics
 * @param {"loss" | "accuracy"} name
 * @returns {number[]}
 */
export function stepValues(metrics, name) {
  const num = (/** @type {any} */ v) => (v == null ? NaN : Number(v));
  const labelled = metrics["accuracy/labelled"];
  if (name === "accuracy") {
    const correct = metrics["accuracy/correct"] || [];
    return (labelled || []).map((n, t) => (num(n) > 0 ? num(correct[t]) / num(n) : NaN));
  }
  const loss = metrics.loss || [];
  return loss.map((v, t) => (labelled && !(num(labelled[t]) > 0) ? NaN : num(v)));
}

/**
 * An activity series (`activity/*`) of a saved history's `activity` (`{steps, values}`): the
 * rows of the last complete episode (`spec.episode` steps), like the live pushes.
 * @param {any} history
 * @param {any} spec
 * @returns {Series | null}
 */
export function activityFromHistory(history, spec) {
  const activity = history && history.activity;
  const rows = activity && activity.values && activity.values[spec.name];
  if (!Array.isArray(rows) || !rows.length) return null;
  const steps = (activity.steps || []).slice(-rows.length).map(Number);
  const episode = Number(spec.episode) || 100;
  const last = steps[steps.length - 1] + 1;
  let end = Math.floor(last / episode) * episode, start = end - episode;
  if (start < steps[0] || end <= start) { start = Math.max(steps[0], last - episode); end = last; }
  const keep = steps.map((s, i) => [s, i]).filter(([s]) => s >= start && s < end).map(([, i]) => i);
  if (!keep.length) return null;
  const first = rows[keep[0]];
  const inner = Array.isArray(first) ? (Array.isArray(first[0]) ? [first.length, first[0].length] : [first.length]) : [];
  const flat = keep.flatMap((i) => [rows[i]].flat(2)).map((v) => (v == null ? NaN : Number(v)));
  return { data: Float32Array.from(flat), shape: [keep.length, ...inner], lastStep: steps[steps.length - 1], steps: keep.map((i) => steps[i]) };
}

/**
 * `smooth` applied to the values of a compare-mode `[k, m, 2]` array (rows of (step, value)),
 * each algorithm on its own; a new array.
 * @param {Float32Array} data
 * @param {number[]} shape
 * @param {number} alpha
 */
export function smoothRows(data, shape, alpha) {
  if (!alpha || shape.length !== 3) return data;
  const [k, m] = shape;
  const out = Float32Array.from(data);
  for (let i = 0; i < k; i++) {
    const values = new Float32Array(m);
    for (let r = 0; r < m; r++) values[r] = data[(i * m + r) * 2 + 1];
    smooth(values, alpha).forEach((v, r) => { out[(i * m + r) * 2 + 1] = v; });
  }
  return out;
}

/**
 * Compare-mode series from a saved page's `live_history.compare` (`{algorithm:
 * History.to_json()}`): per "compare" panel, `[k, m, 2]` rows of (step, value) in the order of
 * the panel's `labels` (loss per step; `cosine` / `rel_error` per fidelity checkpoint).
 * @param {any} history
 * @param {{name: string, kind: string, labels?: string[]}[]} specs
 * @returns {Map<string, Series>}
 */
export function compareSeriesFromHistory(history, specs, window = 500) {
  /** @type {Map<string, Series>} */
  const out = new Map();
  const runs = (history && history.compare) || {};
  for (const spec of specs) {
    if (spec.kind !== "compare") continue;
    const rows = (spec.labels || []).map((label) => {
      const run = runs[label] || {};
      if (spec.name === "loss" || spec.name === "accuracy") {
        const steps = run.steps || [], values = stepValues((run.metrics || {}), spec.name);
        return steps.map((/** @type {number} */ s, /** @type {number} */ t) => [Number(s), values[t] ?? NaN]).slice(-window);
      }
      return (run.fidelity || []).map((/** @type {any} */ f) => [Number(f.step), f[spec.name] == null ? NaN : Number(f[spec.name])]).slice(-window);
    });
    const m = Math.max(0, ...rows.map((r) => r.length));
    const data = new Float32Array(rows.length * m * 2).fill(NaN);
    rows.forEach((r, i) => r.forEach(([s, v], j) => {
      const at = (i * m + (m - r.length) + j) * 2;
      data[at] = s; data[at + 1] = v;
    }));
    const last = Math.max(-1, ...rows.flatMap((r) => (r.length ? [r[r.length - 1][0]] : [])));
    out.set(spec.name, { data, shape: [rows.length, m, 2], lastStep: last });
  }
  return out;
}

/**
 * A whole-run overview computed on the page (a saved page's recorded history): bucket rows
 * (first step, mean, min, max) of `values` (one per step from `firstStep`), `width` a power of
 * two so that at most `most` buckets remain; like etp_viz.live.history.Overview.
 * @param {ArrayLike<number>} values
 * @returns {{rows: Float32Array, count: number, width: number}}
 */
export function bucketRows(values, firstStep = 0, most = 512) {
  let width = 1;
  while (Math.ceil(values.length / width) > most) width *= 2;
  const count = Math.ceil(values.length / width);
  const rows = new Float32Array(count * 4);
  for (let b = 0; b < count; b++) {
    let sum = 0, n = 0, lo = Infinity, hi = -Infinity;
    for (let i = b * width; i < Math.min((b + 1) * width, values.length); i++) {
      const v = values[i];
      if (!Number.isFinite(v)) continue;
      sum += v; n++; lo = Math.min(lo, v); hi = Math.max(hi, v);
    }
    rows.set([firstStep + b * width, n ? sum / n : NaN, n ? lo : NaN, n ? hi : NaN], b * 4);
  }
  return { rows, count, width };
}

/** @typedef {{data: Float32Array, shape: number[], width: number}} Overview  a whole run: `[m, 4]` or `[k, m, 4]` */

/**
 * The whole-run overviews of a saved page's recorded history (one run or compare mode's
 * `{compare: {label: history}}`), computed here like the live pushes (`overview/<name>`):
 * the loss and accuracy of the panels in `panels`, and every trace magnitude (`trace/…`,
 * NaN where not measured), which the scrubber replays on the graph. Compare mode: `[k, m, 4]`
 * in the order of `labels` (the loss panel's), NaN throughout for a learner without a series.
 * @param {any} history @param {any[]} specs @param {Set<string>} panels  names of the whole-run panels
 * @returns {Map<string, Overview>}
 */
export function staticOverviews(history, specs, panels) {
  /** @type {Map<string, Overview>} */
  const out = new Map();
  if (!history) return out;
  const loss = specs.find((s) => s.name === "loss");
  const labels = history.compare ? ((loss && loss.labels) || Object.keys(history.compare)) : [""];
  const runs = labels.map((/** @type {string} */ l) => (history.compare ? history.compare[l] || {} : history));
  const num = (/** @type {any} */ v) => (v == null ? NaN : Number(v));
  /** @type {Set<string>} */
  const traces = new Set();
  for (const run of runs) for (const name of Object.keys((run && run.metrics) || {})) if (relationOf(name)) traces.add(name);
  const names = [...specs.map((s) => s.name).filter((n) => panels.has(n) && (n === "loss" || n === "accuracy")), ...traces];
  for (const name of names) {
    const rows = runs.map((/** @type {any} */ run) => {
      const steps = (run && run.steps) || [], metrics = (run && run.metrics) || {};
      const values = name === "loss" || name === "accuracy" ? stepValues(metrics, name) : (metrics[name] || []).map(num);
      return bucketRows(values, steps.length ? Number(steps[0]) : 0);
    });
    if (!rows.some((r) => r.count)) continue;
    const width = Math.max(...rows.map((r) => r.width));
    if (!history.compare) { out.set(name, { data: rows[0].rows, shape: [rows[0].count, 4], width }); continue; }
    // runs of one comparison have the same length: one width
    const m = Math.max(...rows.map((r) => r.count));
    const data = new Float32Array(rows.length * m * 4).fill(NaN);
    rows.forEach((r, i) => data.set(r.rows, i * m * 4));
    out.set(name, { data, shape: [rows.length, m, 4], width });
  }
  return out;
}
