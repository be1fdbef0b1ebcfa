// @ts-check
/**
 * Layout worker: Graphviz (wasm, inlined) lays DOT out off the UI thread and returns a draw
 * list (./xdot.js), so the page builds SVG elements directly instead of parsing SVG markup.
 * Bundled by build.mjs into a string and started from a blob URL: no file or network fetch.
 * Messages in: {id, dot, level?} (dot omitted = warm-up; `level`: one level of a graph laid
 * out level by level, {boxes, rankdir}, see ./xdot.js levelToDrawList); out: {id, layout, ms}
 * or {id, error}.
 */
import { Graphviz } from "@hpcc-js/wasm-graphviz";
import { layoutToDrawList, levelToDrawList } from "./xdot.js";

/** @type {Promise<any> | null} */
let loading = null;

self.onmessage = async (/** @type {MessageEvent} */ event) => {
  const { id, dot, level } = event.data || {};
  try {
    loading = loading || Graphviz.load();
    const graphviz = await loading;
    if (dot == null) {
      self.postMessage({ id, layout: null, ms: 0 });
      return;
    }
    const start = performance.now();
    const json = JSON.parse(graphviz.layout(dot, "json", "dot"));
    const layout = level ? levelToDrawList(json, level.boxes, level.rankdir) : layoutToDrawList(json);
    self.postMessage({ id, layout, ms: performance.now() - start });
  } catch (error) {
    // A failed layout can leave the wasm module in a bad state: load a fresh one next time.
    loading = null;
    try { Graphviz.unload(); } catch { /* already unloaded */ }
    self.postMessage({ id, error: `layout failed: ${error && error.message ? error.message : error}` });
  }
};
