// Text scale, first-view label sizes, themes and keyboard moves (pure parts; the browser tests
// in tests/explorer/browser/test_projector_browser.py drive them in Chromium).
import { test } from "node:test";
import assert from "node:assert/strict";
import { clampScale, stepScale, graphScales } from "../src/appearance.js";
import { firstViewLabelPx, initialBox, fitBox } from "../src/view.js";
import { themeColours, themeHex } from "../src/theme.js";
import { nextNode, firstNode } from "../src/keyboard.js";
import { COLORS } from "../src/graph.js";

test("first view: fitted down to 7 px labels at scale 1, 16.5 px at 1.5", () => {
  assert.deepEqual(firstViewLabelPx(1), { fit: 7, window: 10.5 });
  const big = firstViewLabelPx(1.5);
  assert.ok(Math.abs(big.fit - 16.5) < 1e-9 && Math.abs(big.window - 16.5) < 1e-9);
  assert.ok(firstViewLabelPx(2).fit > big.fit);
  // pixels per SVG unit: labels are laid out at 14 x scale points
  const { font, fitMinScale, minScale } = graphScales(1.5);
  assert.equal(font, 21);
  assert.ok(Math.abs(fitMinScale * font - 16.5) < 1e-9 && Math.abs(minScale * font - 16.5) < 1e-9);
});

test("initialBox fits at fitMinScale, else a window at minScale", () => {
  const base = { x: 0, y: 0, w: 1000, h: 400 };
  const pane = { width: 600, height: 400 };
  // fits at 0.58 px per unit: whole graph when 0.5 is enough, a window when 0.8 is asked
  assert.deepEqual(initialBox(base, pane, [], 0.8, 10, "LR", 0.5), fitBox(base));
  const window = initialBox(base, pane, [], 0.8, 10, "LR", 0.8);
  assert.ok(Math.abs(window.w - 600 / 0.8) < 1e-9);
});

test("A- / A+ step through the scales and stay in range", () => {
  assert.equal(stepScale(1, 1), 1.25);
  assert.equal(stepScale(1.25, 1), 1.5);
  assert.equal(stepScale(1.5, -1), 1.25);
  assert.equal(stepScale(3, 1), 3);
  assert.equal(clampScale("x"), 1);
  assert.equal(clampScale(9), 3);
});

test("themes: dark names override, light hex maps to dark hex", () => {
  // one light colour, one dark colour (white is the op fill and the background)
  const palette = { ...COLORS, "dark.op_fill": "#1e1e1e", "dark.background": "#1e1e1e", "dark.text": "#f0f0f0" };
  assert.equal(themeColours(palette, false).op_fill, COLORS.op_fill);
  assert.equal(themeColours(palette, true).op_fill, "#1e1e1e");
  assert.ok(!("dark.op_fill" in themeColours(palette, true)));
  const hex = themeHex(palette, true);
  assert.equal(hex(COLORS.op_fill.toUpperCase()), "#1e1e1e");
  assert.equal(hex(COLORS.online), COLORS.online);
  assert.equal(themeHex(palette, false)("#abcdef"), "#abcdef");
});

test("arrow keys go to the nearest node ahead", () => {
  const centres = new Map([["a", [0, 0]], ["b", [100, 5]], ["c", [0, 100]], ["d", [300, 0]], ["e", [10, 300]]]);
  assert.equal(nextNode(centres, "a", [1, 0]), "b");
  assert.equal(nextNode(centres, "b", [1, 0]), "d");
  assert.equal(nextNode(centres, "a", [0, 1]), "c");
  assert.equal(nextNode(centres, "a", [-1, 0]), null);
  assert.equal(firstNode(centres), "a");
});
