import { readFileSync, existsSync } from "node:fs";
import path from "node:path";

/**
 * Real view models, `build_view_model(compile_etrace_graph(model, x))` of the shared test
 * models, written at test time by tests/explorer/test_widget_js.py (see
 * tests/explorer/browser/real_view_models.py) into the directory named by ETP_VIZ_REAL_VMS.
 */
export const REAL_DIR = process.env.ETP_VIZ_REAL_VMS || "";
export const REAL = ["two_layer_rnn", "gru", "lstm", "stacked_2000", "subjaxprs"];
/** node:test option: skip (with the reason) when the real view models were not generated. */
export const needsReal = REAL_DIR && existsSync(path.join(REAL_DIR, "gru.json"))
  ? {} : { skip: "ETP_VIZ_REAL_VMS not set: run via pytest tests/explorer/test_widget_js.py" };

/** A fresh copy of one real view model. */
export function loadReal(name) {
  return JSON.parse(readFileSync(path.join(REAL_DIR, `${name}.json`), "utf8"));
}

/** A fresh copy of one real view model in parts: `{shell, parts}` (etp_viz/explorer/parts.py). */
export function loadRealSplit(name) {
  return JSON.parse(readFileSync(path.join(REAL_DIR, `${name}.split.json`), "utf8"));
}
