// @ts-check
/**
 * Layout worker: Graphviz (wasm, inlined) lays DOT out off the UI thread and returns a draw
 * list (./xdot.js), so the page builds SVG elements directly instead of parsing SVG markup.
 * Bundled by build.mjs into a string and started from a blob URL: no file or network fetch.
 * Messages in: {id, dot} (dot omitted = warm-up); out: {id, layout, ms} or {id, error}.
 */
import { Graphviz } from "@hpcc-js/wasm-graphviz";
import { layoutToDrawList } from "./xdot.js";

/** @type {Promise<any> | null} */
let loading = null;

self.onmessage = async (/** @type {MessageEvent} */ event) => {
  const { id, dot } = event.data || {};
  try {
    loading = loading || Graphviz.load();
    const graphviz = await loading;
    if (dot == null) {
      self.postMessage({ id, layout: null, ms: 0 });
      return;
    }
    const start = performance.now();
    const layout = layoutToDrawList(JSON.parse(graphviz.layout(dot, "json", "dot")));
    self.postMessage({ id, layout, ms: performance.now() - start });
  } catch (error) {
    // A failed layout can leave the wasm module in a bad state: load a fresh one next time.
    loading = null;
    try { Graphviz.unload(); } catch { /* already unloaded */ }
    self.postMessage({ id, error: `layout failed: ${error && error.message ? error.message : error}` });
  }
};
