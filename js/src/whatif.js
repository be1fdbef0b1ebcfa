// @ts-check
/**
 * The "What if…" control and its result panel. Python decides which changes a weight is
 * offered (the `what_if_changes` trait, etp_viz/explorer/whatif_offers.py): this file draws
 * them in the inspector, sends the `what_if {weight, change}` request, and draws the result
 * (the `what_if` trait): what changed (relations, hidden groups, claims), the cost before and
 * after, and the two graphs side by side (Graphviz SVG made by `etp_viz.what_if`'s
 * `WhatIf.graphs_html()`: every user string in it is escaped in Python). A failure is shown
 * in the panel, never a dead widget.
 */
import { h, fill } from "./dom.js";

/** a what-if compiles the model twice and times a step on each side: allow it time */
export const WHAT_IF_TIMEOUT_MS = 600000;

/**
 * The inspector's "What if…" row for weight `path`: one button per offered change (a
 * disabled one says why on hover); null when nothing is offered.
 * @param {string} path
 * @param {any[]} offers `what_if_changes[path]`
 * @param {(path: string, offer: any) => void} run
 */
export function whatIfOffer(path, offers, run) {
  if (!offers || !offers.length) return null;
  return h("div", { class: "etp-whatif-offer", "data-what-if-offer": path },
    h("span", { class: "etp-dim", title: "See what the graph and the claims would be after one change (runs etp_viz.what_if)" }, "What if… "),
    ...offers.map((offer) => h("button", { class: "etp-button", "data-what-if": offer.id, title: offer.title || "",
      disabled: offer.disabled ? true : null, onclick: () => run(path, offer) }, offer.label)));
}

/** Bytes for people. @param {any} n */
function bytes(n) {
  if (n == null) return "n/a";
  const units = ["B", "KiB", "MiB", "GiB"];
  let value = Number(n), i = 0;
  while (value >= 1024 && i < units.length - 1) { value /= 1024; i++; }
  return `${i ? value.toPrecision(3) : value} ${units[i]}`;
}

/** @param {any} ms */
function millis(ms) {
  return ms == null || !Number.isFinite(Number(ms)) ? "n/a" : `${Number(ms).toPrecision(3)} ms`;
}

/** The list of what changed (the diff of `WhatIf.diff()`). @param {any} result */
function changeItems(result) {
  const diff = result.diff || {};
  const items = [];
  for (const verb of ["added", "removed"]) {
    for (const [weight, hidden] of (diff.relations || {})[verb] || []) {
      items.push(h("li", { class: verb, "data-what-if-relation": verb }, `relation ${verb}: ${weight} → ${hidden.join(", ")}`));
    }
    for (const group of (diff.groups || {})[verb] || []) {
      items.push(h("li", { class: verb }, `hidden group ${verb}: ${group.join(", ")}`));
    }
  }
  for (const row of diff.claims || []) {
    items.push(h("li", { class: "claim", "data-what-if-claim": row.leaf, title: row.reason || "" },
      `${row.leaf}: ${row.before ?? "—"} → ${row.after ?? "—"}`));
  }
  for (const row of diff.fidelity || []) {
    items.push(h("li", { class: "fidelity" }, `${row.leaf}: cosine vs BPTT ${row.before.cosine ?? "n/a"} → ${row.after.cosine ?? "n/a"}`));
  }
  if (!items.length) items.push(h("li", {}, "no relation, group or claim changed"));
  for (const [name, side] of [["before", result.before], ["after", result.after]]) {
    if (side && side.error) items.push(h("li", { class: "removed" }, `${name}: not learned online: ${side.error}`));
  }
  return items;
}

/** The result panel: below the graph area, drawn from the `what_if` trait. */
export class WhatIfPanel {
  /** @param {{model: any, request: (method: string, params: any, timeoutMs?: number) => Promise<any>, guard: (fn: () => any) => any}} app */
  constructor(app) {
    this.app = app;
    this.el = h("div", { class: "etp-whatif-panel", "data-region": "what-if", hidden: true });
  }

  /** Draw the `what_if` trait (hidden when it is null). */
  render() {
    this.show(this.app.model.get("what_if"));
  }

  /** @param {any} result */
  show(result) {
    if (!result) { this.el.hidden = true; fill(this.el, []); return; }
    const title = `What if: ${result.label || result.id} (${result.weight})`;
    const close = h("button", { class: "etp-button", "data-what-if-close": "", title: "close the what-if",
      onclick: () => this.app.guard(() => this.close()) }, "close");
    const head = h("div", { class: "etp-whatif-head" }, h("b", {}, title), " ", close);
    /** @type {(Element | string | null)[]} */
    const parts = [head];
    if (result.running) {
      parts.push(h("div", { class: "etp-dim", "data-what-if-running": "" }, "running etp_viz.what_if… (builds the model before and after the change, times a step on each)"));
    } else if (result.error) {
      parts.push(h("div", { class: "etp-whatif-error", role: "alert", "data-what-if-error": "" }, result.error));
    } else {
      const cost = (result.diff || {}).cost || {};
      const [b, a] = [result.before || {}, result.after || {}];
      parts.push(h("ul", { class: "etp-whatif-changes", "data-what-if-changes": "" }, ...changeItems(result)));
      parts.push(h("div", { class: "etp-whatif-cost", "data-what-if-cost": "" },
        `learner ${b.learner} → ${a.learner} · learner state ${bytes((cost.state_bytes || [])[0])} → ${bytes((cost.state_bytes || [])[1])}`
        + ` · per step ${millis((cost.ms_per_step || [])[0])} → ${millis((cost.ms_per_step || [])[1])}`));
      const graphs = h("div", { class: "etp-whatif-graphs-slot", "data-what-if-graphs": "" });
      graphs.innerHTML = String(result.graphs_html || "");  // Python's WhatIf.graphs_html(), escaped there
      parts.push(graphs);
    }
    fill(this.el, parts);
    this.el.hidden = false;
  }

  /** Run offer `offer` of weight `path` in Python; the panel says so meanwhile. @param {string} path @param {any} offer */
  run(path, offer) {
    this.show({ weight: path, id: offer.id, label: offer.label, running: true });
    if (typeof this.el.scrollIntoView === "function") this.el.scrollIntoView({ block: "nearest" });
    return this.app.request("what_if", { weight: path, change: offer.id }, WHAT_IF_TIMEOUT_MS)
      .then((result) => this.show(result))
      .catch((/** @type {any} */ error) => this.show({ weight: path, id: offer.id, label: offer.label,
        error: error && error.message ? error.message : String(error) }));
  }

  close() {
    this.app.model.set("what_if", null);
    this.app.model.save_changes();
    this.show(null);
  }
}
