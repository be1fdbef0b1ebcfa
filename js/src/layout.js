// @ts-check
/**
 * Layout client: one Web Worker (from a blob URL holding the bundled worker code) and a cache
 * of layouts (draw lists) keyed by expansion state, so going back to a level is instant.
 */

/* The worker bundle, injected as a string literal by build.mjs (esbuild `define`). */
/* global __ETP_LAYOUT_WORKER__ */
// @ts-ignore -- defined at build time
const WORKER_SOURCE = typeof __ETP_LAYOUT_WORKER__ === "string" ? __ETP_LAYOUT_WORKER__ : "";

/** @typedef {{layout: {width: number, height: number, count: number, chunks: string[]}, ms: number}} LayoutResult */

export class LayoutClient {
  constructor() {
    /** @type {Map<string, Promise<LayoutResult>>} */
    this.cache = new Map();
    /** @type {Map<number, {resolve: Function, reject: Function}>} */
    this.pending = new Map();
    this.nextId = 1;
    /** @type {Worker | null} */
    this.worker = null;
    this.url = "";
  }

  /** Start the worker and load the wasm before the first layout is needed. */
  warm() {
    return this.post(undefined).catch(() => undefined);
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

  /** @param {string | undefined} dot */
  post(dot) {
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      this.pending.set(id, { resolve, reject });
      try {
        this.ensureWorker().postMessage({ id, dot });
      } catch (error) {
        this.pending.delete(id);
        reject(error);
      }
    });
  }

  /**
   * Lay out `dot`, reusing the cached result for `key`.
   * @param {string} key
   * @param {string} dot
   * @returns {Promise<LayoutResult>}
   */
  layout(key, dot) {
    const cached = this.cache.get(key);
    if (cached) return cached;
    const promise = /** @type {Promise<LayoutResult>} */ (this.post(dot));
    this.cache.set(key, promise);
    promise.catch(() => this.cache.delete(key));
    return promise;
  }

  dispose() {
    if (this.worker) this.worker.terminate();
    if (this.url) URL.revokeObjectURL(this.url);
    this.worker = null;
    this.url = "";
  }
}
