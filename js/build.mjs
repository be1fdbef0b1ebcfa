// Build the explorer bundle into etp_viz/explorer/static/ (gitignored; scripts/setup.sh runs this).
//   widget.js             ESM, anywidget's _esm (layout worker inlined as a string)
//   widget.standalone.js  the same as an IIFE (global `EtpVizExplorer`), used by save_html
import { build } from "esbuild";
import { mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const outdir = path.join(here, "..", "etp_viz", "explorer", "static");
mkdirSync(outdir, { recursive: true });
const start = Date.now();

const worker = await build({
  entryPoints: [path.join(here, "src", "layout-worker.js")],
  bundle: true, format: "iife", minify: true, write: false, target: "es2020", logLevel: "warning",
});
const common = {
  entryPoints: [path.join(here, "src", "index.js")],
  bundle: true, minify: true, target: "es2020", logLevel: "warning",
  loader: { ".css": "text" },
  define: { __ETP_LAYOUT_WORKER__: JSON.stringify(worker.outputFiles[0].text) },
};
await build({ ...common, format: "esm", outfile: path.join(outdir, "widget.js") });
await build({ ...common, format: "iife", globalName: "EtpVizExplorer", outfile: path.join(outdir, "widget.standalone.js") });
console.log(`built ${path.relative(process.cwd(), outdir)}/widget.js in ${Date.now() - start} ms`);
