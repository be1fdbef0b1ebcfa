// @ts-check
/**
 * Layout worker: Graphviz (wasm, inlined) turns DOT into SVG off the UI thread. Bundled by
 * build.mjs into a string and started from a blob URL, so no file or network fetch happens.
 * Messages in: {id, dot} (dot omitted = warm-up); out: {id, svg, ms} or {id, error}.
 */
import { Graphviz } from "@hpcc-js/wasm-graphviz";

/** @type {Promise<any> | null} */
let loading = null;

self.onmessage = async (/** @type {MessageEvent} */ event) => {
  const { id, dot } = event.data || {};
  try {
    loading = loading || Graphviz.load();
    const graphviz = await loading;
    if (dot == null) {
      self.postMessage({ id, svg: "", ms: 0 });
      return;
    }
    const start = performance.now();
    // Trim what the page would only parse and throw away (XML prolog, doctype, comments):
    // parsing happens on the UI thread, this string work does not.
    const svg = graphviz.layout(dot, "svg", "dot")
      .replace(/^[\s\S]*?(?=<svg)/, "")
      .replace(/<!--[\s\S]*?-->\n?/g, "");
    self.postMessage({ id, svg, ms: performance.now() - start });
  } catch (error) {
    // A failed layout can leave the wasm module in a bad state: load a fresh one next time.
    loading = null;
    try { Graphviz.unload(); } catch { /* already unloaded */ }
    self.postMessage({ id, error: `layout failed: ${error && error.message ? error.message : error}` });
  }
};
