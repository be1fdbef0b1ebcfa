// @ts-check
/**
 * Layout client: one Web Worker (from a blob URL holding the bundled worker code) and a cache
 * of layouts (draw lists) keyed by expansion state, so going back to a level is instant.
 *
 * A big graph (./graph.js LEVEL_LAYOUT_MIN_NODES) comes as a `LevelsInput` instead of DOT
 * text: it is laid out level by level (./hierarchy.js), each level cached by its box and the
 * expansion state inside it, so opening a box lays out that box and the levels around it
 * only; the result lists each level's draw list and where it goes (`LevelsLayout`).
 */
import { runSliced } from "./graph.js";
import { planLevelsSteps, levelDot, boxNode } from "./hierarchy.js";
import { yieldToEventLoop } from "./frames.js";

/* The worker bundle, injected as a string literal by build.mjs (esbuild `define`). */
/* global __ETP_LAYOUT_WORKER__ */
// @ts-ignore -- defined at build time
const WORKER_SOURCE = typeof __ETP_LAYOUT_WORKER__ === "string" ? __ETP_LAYOUT_WORKER__ : "";

/** @typedef {import("./xdot.js").LevelDrawList} LevelDrawList */
/** @typedef {import("./hierarchy.js").Level} Level */
/**
 * @typedef {{width: number, height: number, count: number, chunks: string[],
 *   levels: {key: string, depth: number, x: number, y: number, layout: LevelDrawList}[],
 *   parts: Map<string, string[]>}} LevelsLayout  a graph laid out level by level: each
 *   level's draw list at its offset (parents first); `parts`: the pieces inside boxes of
 *   each drawn edge that crosses a box border (./hierarchy.js); `chunks` is empty
 */
/** @typedef {{layout: {width: number, height: number, count: number, chunks: string[]} | LevelsLayout, ms: number}} LayoutResult */

/** Whole expansion states kept (their draw lists: a few MB each for thousands of nodes). */
const STATES_KEPT = 64;
/** Draw-list items kept in the levels of a graph laid out level by level. */
const LEVEL_ITEMS_KEPT = 200000;
/** Graphviz calls remembered in `calls` (tests read them). */
const CALLS_KEPT = 1000;

/** Laid-out levels of one index by key, the least recently used dropped beyond LEVEL_ITEMS_KEPT items. */
class LevelCache {
  constructor() {
    /** @type {Map<string, {promise: Promise<LevelDrawList>, count: number}>} */
    this.entries = new Map();
    this.items = 0;
  }

  /**
   * The level laid out for `key`, made by `make` when missing.
   * @param {string} key
   * @param {() => Promise<LevelDrawList>} make
   */
  get(key, make) {
    let entry = this.entries.get(key);
    if (entry) this.entries.delete(key);
    else {
      const made = { promise: make(), count: 0 };
      made.promise.then((layout) => { made.count = layout.count; if (this.entries.get(key) === made) this.items += layout.count; },
        () => { if (this.entries.get(key) === made) this.entries.delete(key); });
      entry = made;
    }
    this.entries.set(key, entry);
    return entry.promise;
  }

  /** Drop the least recently used levels (not those in `keep`) beyond LEVEL_ITEMS_KEPT items. @param {Set<string>} keep */
  trim(keep) {
    for (const [key, entry] of this.entries) {
      if (this.items <= LEVEL_ITEMS_KEPT) return;
      if (keep.has(key) || !entry.count) continue;
      this.entries.delete(key);
      this.items -= entry.count;
    }
  }
}

export class LayoutClient {
  constructor() {
    /** @type {Map<string, {source: any, promise: Promise<LayoutResult>}>} by expansion state */
    this.cache = new Map();
    /** @type {WeakMap<object, LevelCache>} per index: its laid-out levels by key */
    this.levelCaches = new WeakMap();
    /**
     * One entry per Graphviz call of a level (./hierarchy.js), the last CALLS_KEPT: its box
     * (null: the root level) and the nodes and edges laid out. What opening a box cost, for
     * tests and benchmarks; `callCount` counts every call.
     * @type {{box: string|null, nodes: number, edges: number, ms: number}[]}
     */
    this.calls = [];
    this.callCount = 0;
    /** @type {Map<number, {resolve: Function, reject: Function}>} */
    this.pending = new Map();
    this.nextId = 1;
    /** @type {Worker | null} */
    this.worker = null;
    this.url = "";
  }

  /** Start the worker and load the wasm before the first layout is needed. */
  warm() {
    return this.post({ dot: undefined }).catch(() => undefined);
  }

  /** @returns {Worker} */
  ensureWorker() {
    if (this.worker) return this.worker;
    if (!WORKER_SOURCE) throw new Error("layout worker source missing from the bundle (rebuild js/)");
    this.url = URL.createObjectURL(new Blob([WORKER_SOURCE], { type: "text/javascript" }));
    const worker = new Worker(this.url);
    worker.onmessage = (event) => {
      const { id, layout, ms, error } = event.data || {};
      const entry = this.pending.get(id);
      if (!entry) return;
      this.pending.delete(id);
      if (error) entry.reject(new Error(error));
      else entry.resolve({ layout, ms });
    };
    worker.onerror = (event) => {
      const error = new Error(`layout worker error: ${event.message || "unknown"}`);
      for (const entry of this.pending.values()) entry.reject(error);
      this.pending.clear();
      this.dispose();
    };
    this.worker = worker;
    return worker;
  }

  /** @param {{dot: string | undefined, level?: any}} message @returns {Promise<any>} */
  post(message) {
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      this.pending.set(id, { resolve, reject });
      try {
        this.ensureWorker().postMessage({ id, ...message });
      } catch (error) {
        this.pending.delete(id);
        reject(error);
      }
    });
  }

  /**
   * Lay out `input` (DOT text, or a graph to lay out level by level), reusing the cached
   * result for `key` when it was made from the same input.
   * @param {string} key
   * @param {string | import("./graph.js").LevelsInput} input
   * @returns {Promise<LayoutResult>}
   */
  layout(key, input) {
    const source = typeof input === "string" ? input : input.index;
    const cached = this.cache.get(key);
    if (cached && cached.source === source) {
      this.cache.delete(key);
      this.cache.set(key, cached);
      return cached.promise;
    }
    const promise = typeof input === "string" ? /** @type {Promise<LayoutResult>} */ (this.post({ dot: input }))
      : this.layoutLevels(input);
    this.cache.set(key, { source, promise });
    promise.catch(() => { if (this.cache.get(key)?.promise === promise) this.cache.delete(key); });
    for (const old of this.cache.keys()) {
      if (this.cache.size <= STATES_KEPT) break;
      this.cache.delete(old);
    }
    return promise;
  }

  /**
   * Lay out a graph level by level: each level once its boxes are laid out (their sizes and
   * ports go into its DOT text), cached levels reused; then each level placed in its box.
   * @param {import("./graph.js").LevelsInput} input
   * @returns {Promise<LayoutResult>}
   */
  async layoutLevels({ index, graph, options }) {
    const plan = /** @type {import("./hierarchy.js").LevelPlan} */ (
      await runSliced(planLevelsSteps(index, graph, options), yieldToEventLoop));
    let cache = this.levelCaches.get(index);
    if (!cache) this.levelCaches.set(index, cache = new LevelCache());
    const levels = cache;
    let ms = 0;
    const rankdir = options.rankdir === "LR" ? "LR" : "TB";
    /** @type {Map<Level, LevelDrawList>} */
    const done = new Map();
    /** @returns {Promise<LevelDrawList>} */
    const run = (/** @type {Level} */ level) => levels.get(level.key, async () => {
      const boxes = await Promise.all(level.boxes.map(run));
      const sizes = new Map(level.boxes.map((box, i) => [box.dotId, boxes[i]]));
      const dot = levelDot(index, level, options, sizes);
      const ports = Object.fromEntries(level.boxes.map((box, i) => [boxNode(box), { ports: boxes[i].ports }]));
      const result = await this.post({ dot, level: { boxes: ports, rankdir } });
      ms += result.ms;
      this.calls.push({ box: level.id, nodes: level.items.length + level.boxes.length, edges: level.edges.length, ms: result.ms });
      this.callCount += 1;
      if (this.calls.length > CALLS_KEPT) this.calls.splice(0, this.calls.length - CALLS_KEPT);
      return /** @type {LevelDrawList} */ (result.layout);
    }).then((layout) => { done.set(level, layout); return layout; });
    // every level: a cached level brings none of its boxes along
    const [root] = await Promise.all([plan.root, ...plan.levels].map(run));
    levels.trim(new Set(plan.levels.map((level) => level.key)));
    /** @type {LevelsLayout["levels"]} */
    const placed = [];
    let count = 0;
    const place = (/** @type {Level} */ level, /** @type {number} */ x, /** @type {number} */ y) => {
      const layout = /** @type {LevelDrawList} */ (done.get(level));
      placed.push({ key: level.key, depth: level.depth, x, y, layout });
      count += layout.count;
      for (const box of level.boxes) {
        const [bx, by] = layout.boxes[boxNode(box)] || [0, 0];
        place(box, x + bx, y + by);
      }
    };
    place(plan.root, 0, 0);
    placed.sort((a, b) => a.depth - b.depth);
    return { layout: { width: root.width, height: root.height, count, chunks: [], levels: placed, parts: plan.parts }, ms };
  }

  dispose() {
    if (this.worker) this.worker.terminate();
    if (this.url) URL.revokeObjectURL(this.url);
    this.worker = null;
    this.url = "";
  }
}
