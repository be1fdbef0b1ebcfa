import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { indexViewModel, visibleGraph, toDot, drawnKeys, nodeKey, nodeStyle, edgeKey, resolveRankdir, COLORS, tooltipFor } from "../src/graph.js";
import { legendEntries } from "../src/legend.js";
import { loadReal, needsReal } from "./helpers.js";

/** A small view model: an input, an ETP op (not learned), a hidden state pair, an output. */
function tiny() {
  return {
    schema: 1, title: "t",
    nodes: [
      { id: "in:0", kind: "input", label: "input 0" },
      { id: "e0", kind: "eqn", label: "etp_mv", primitive: "etp_mv", etp: true, weight_path: "W", status: "not_learned", badges: [{ text: "W", kind: "param" }] },
      { id: "h:h:in", kind: "hidden_in", label: "h", hidden_path: "h", cluster: "g0" },
      { id: "e1", kind: "eqn", label: "add", primitive: "add", badges: [{ text: "1.0", kind: "literal" }] },
      { id: "h:h:out", kind: "hidden_out", label: "h", hidden_path: "h", cluster: "g0" },
      { id: "out:0", kind: "output", label: "output 0" },
    ],
    edges: [
      { id: "v0>e0", source: "in:0", target: "e0" }, { id: "v1>e1", source: "e0", target: "e1" },
      { id: "v2>e1", source: "h:h:in", target: "e1" }, { id: "v3>h", source: "e1", target: "h:h:out" },
      { id: "v3>o", source: "e1", target: "out:0" },
    ],
    clusters: [{ id: "g0", kind: "group", label: "group 0: h", parent: null }],
    groups: [{ index: 0, hidden_paths: ["h"], cluster: "g0", transition_nodes: ["e1"], transition_edges: ["v2>e1"] }],
    weights: [{ path: "W", status: "not_learned", node_ids: ["e0"], summary: "Not learned online: its op's output reaches no hidden state." }],
    relations: [], readouts: [], perturbations: [{ hidden_path: "h", node: "e1" }], diagnostics: [],
    legend: [
      { key: "etp_not_learned", label: "weight op, not learned", title: "Pink: no online gradient.", swatch: "round", fill: "#f6d0d0", stroke: "#d62728" },
      { key: "io", label: "input / output", swatch: "house", fill: "#e6e6e6", stroke: "#555555" },
    ],
  };
}

test("the legend lists exactly the marks drawn: node kinds, statuses, boxes and edge kinds", () => {
  const index = indexViewModel(tiny());
  const graph = visibleGraph(index, []);
  const keys = drawnKeys(index, graph);
  assert.deepEqual([...keys].sort(),
    ["edge", "etp_not_learned", "group", "hidden", "io", "badge", "op", "perturbed", "transition"].sort());
  // entries in the view model's order; a key without an entry is still listed, by name
  const entries = legendEntries(index.vm.legend, ["io", "etp_not_learned", "perturbed"]);
  assert.deepEqual(entries.map((e) => e.key), ["etp_not_learned", "io", "perturbed"]);
  assert.equal(entries[2].label, "perturbed");
});

test("a not-learned weight op is pink with a red border, in DOT and in the palette", () => {
  const index = indexViewModel(tiny());
  const dot = toDot(index, visibleGraph(index, [])).dot;
  assert.match(dot, new RegExp(`fillcolor="${COLORS.not_learned_fill}"[^\\]]*color="${COLORS.not_learned}"`));
  assert.equal(nodeKey(index.nodes.get("e0")), "etp_not_learned");
  // the view model's palette wins over the built-in defaults
  const custom = indexViewModel({ ...tiny(), palette: { ...COLORS, not_learned_fill: "#123456" } });
  assert.equal(nodeStyle(custom.colours, custom.nodes.get("e0")).fillcolor, "#123456");
  assert.match(toDot(custom, visibleGraph(custom, [])).dot, /#123456/);
});

test("the built-in colours are the Python palette's (etp_viz/view/palette.py COLOURS)", () => {
  const text = readFileSync(new URL("../../etp_viz/view/palette.py", import.meta.url), "utf8");
  const python = Object.fromEntries([...text.matchAll(/^ {4}"(\w+)": "(#[0-9a-f]{6})",$/gm)].map((m) => [m[1], m[2]]));
  assert.deepEqual(COLORS, python);
});

test("edge keys: dropped over bypass over the slice / transition / readout paths", () => {
  const index = indexViewModel({ ...tiny(), weights: [{ ...tiny().weights[0], dropped_edges: ["v2>e1"] }] });
  assert.equal(edgeKey(index, ["v2>e1"]), "dropped");
  assert.equal(edgeKey(index, ["v0>e0"]), "edge");
});

test("auto layout direction: left to right in a wide pane, top to bottom in a tall one", () => {
  assert.equal(resolveRankdir("auto", { width: 1000, height: 400 }), "LR");
  assert.equal(resolveRankdir(undefined, { width: 500, height: 600 }), "TB");
  assert.equal(resolveRankdir("TB", { width: 1000, height: 400 }), "TB");
});

test("node tooltips start with plain words (legend label, weight summary), codes after", () => {
  const index = indexViewModel(tiny());
  const graph = visibleGraph(index, []);
  const text = tooltipFor(index, graph, graph.nodeToDot.get("e0"));
  const lines = text.split("\n");
  assert.equal(lines[0], "weight op, not learned: W");
  assert.match(lines[1], /^Not learned online/);
  assert.ok(lines.indexOf("etp_mv · e0") > 1);
});

test("real view models: every drawn key has a legend entry of the view model", needsReal, () => {
  for (const name of ["two_layer_rnn", "gru", "lstm"]) {
    const index = indexViewModel(loadReal(name));
    const keys = drawnKeys(index, visibleGraph(index, []));
    const known = new Set(index.vm.legend.map((e) => e.key));
    for (const key of keys) assert.ok(known.has(key), `${name}: no legend entry for ${key}`);
  }
});

test("the highlight CSS draws with the palette's highlight colours (legend entries hl_*)", () => {
  const css = readFileSync(new URL("../src/style.css", import.meta.url), "utf8");
  const rules = { "hl-selected": "hl_selected", "hl-path": "hl_path", "hl-boundary": "hl_boundary",
    "hl-cluster": "hl_cluster", "hl-transition": "hl_transition", "hl-search": "hl_search" };
  for (const [cls, key] of Object.entries(rules)) {
    const rule = css.split("\n").find((line) => line.includes(`.${cls} >`) && line.includes("stroke:"));
    assert.ok(rule && rule.includes(COLORS[key]), `${cls}: ${rule}`);
  }
  assert.ok(css.includes(`fill: ${COLORS.hl_boundary_fill}`));
});
