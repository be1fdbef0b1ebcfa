import { test } from "node:test";
import assert from "node:assert/strict";
import { initialBox, fitBox, MIN_FIT_SCALE, viewTransform, GraphView, GESTURE_END_MS } from "../src/view.js";

/** A node item (xdot draw list) with a box at (x, y) of 80 x 30 units. */
const node = (id, x, y) => ({
  k: "node", id, t: [],
  s: [{ e: "p", p: `${x} ${y} ${x + 80} ${y} ${x + 80} ${y + 30} ${x} ${y + 30}`, f: null, s: "#000" }],
});

test("a graph that fits at a readable scale is fitted whole", () => {
  const base = { x: 0, y: 0, w: 600, h: 400 };
  assert.deepEqual(initialBox(base, { width: 800, height: 600 }), fitBox(base));
});

test("a huge graph is not fitted into a dot: a readable window on its top, centred on its nodes", () => {
  const base = { x: 0, y: 0, w: 20000, h: 30000 };
  const pane = { width: 1200, height: 800 };
  const items = [node("a", 4000, 10), node("b", 4400, 200), node("deep", 19000, 29000)];
  const box = initialBox(base, pane, items);
  assert.ok(Math.abs(Math.min(pane.width / box.w, pane.height / box.h) - MIN_FIT_SCALE) < 1e-9);
  assert.equal(box.y, fitBox(base).y); // the top of the graph
  assert.ok(Math.abs(box.x + box.w / 2 - 4240) < 1e-9, JSON.stringify(box)); // between a and b
});

test("the window stays inside the graph and an unmeasured pane falls back to a full fit", () => {
  const base = { x: 0, y: 0, w: 20000, h: 300 };
  const box = initialBox(base, { width: 1200, height: 800 }, [node("left", 0, 0)]);
  assert.equal(box.x, fitBox(base).x);
  assert.equal(box.h, fitBox(base).h);
  assert.deepEqual(initialBox(base, { width: 0, height: 0 }), fitBox(base));
});

test("left to right: the window starts at the graph's left side, centred on the nodes there", () => {
  const base = { x: 0, y: 0, w: 30000, h: 20000 };
  const pane = { width: 1200, height: 800 };
  const items = [node("a", 10, 4000), node("b", 200, 4400), node("far", 29000, 19000)];
  const box = initialBox(base, pane, items, 0.75, 10, "LR");
  assert.ok(Math.abs(Math.min(pane.width / box.w, pane.height / box.h) - 0.75) < 1e-9);
  assert.equal(box.x, fitBox(base).x);
  assert.ok(Math.abs(box.y + box.h / 2 - 4215) < 1e-9, JSON.stringify(box));
});

/** Where a layout point is drawn when `box` is the viewBox of a `size` pane (xMidYMid meet). */
const meet = (box, size, [x, y]) => {
  const s = Math.min(size.width / box.w, size.height / box.h);
  return [(x - box.x - box.w / 2) * s + size.width / 2, (y - box.y - box.h / 2) * s + size.height / 2];
};

test("the layer's transform draws the frame's SVG as the view box would (pan and zoom by transform)", () => {
  const size = { width: 900, height: 600 };
  const frame = { x: -10, y: -10, w: 87487, h: 17056 };
  for (const box of [frame, { x: 48000, y: 1700, w: 600, h: 117 }, { x: -5000, y: 300, w: 200000, h: 9000 }, { x: 10, y: 20, w: 300, h: 900 }]) {
    const t = viewTransform(frame, box, size);
    for (const p of [[0, 0], [48300, 1750], [87000, 17000], [-3000, 5000]]) {
      const [x0, y0] = meet(frame, size, p);
      const want = meet(box, size, p);
      const got = [t.tx + t.k * x0, t.ty + t.k * y0];
      const tolerance = 1e-6 * Math.max(1, Math.abs(want[0]), Math.abs(want[1]));
      assert.ok(Math.abs(got[0] - want[0]) < tolerance && Math.abs(got[1] - want[1]) < tolerance, JSON.stringify({ box, p, got, want }));
    }
  }
  assert.deepEqual(viewTransform(frame, frame, size), { k: 1, tx: 0, ty: 0 });
  assert.deepEqual(viewTransform(frame, { x: 0, y: 0, w: 5, h: 5 }, { width: 0, height: 0 }), { k: 1, tx: 0, ty: 0 });
});

test("a wheel gesture whose frames are slower than its end delay ends once, after its last event", async () => {
  // Chromium hands wheel events to the page at the start of a frame: here frames run only when
  // the test says, so the gesture's timer fires while the next event waits for a frame
  const frames = [];
  const saved = globalThis.requestAnimationFrame;
  globalThis.requestAnimationFrame = (callback) => frames.push(callback);
  const runFrame = (event) => { if (event) view.onWheel(event); for (const f of frames.splice(0)) f(performance.now()); };
  const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
  const rect = { left: 0, top: 0, width: 800, height: 600 };
  const container = { addEventListener() {}, getBoundingClientRect: () => rect };
  let views = 0;
  const view = new GraphView(/** @type {any} */ (container), { onClick() {}, onBackground() {}, onView: () => { views += 1; } });
  view.svg = /** @type {any} */ ({});
  view.box = { x: 0, y: 0, w: 800, h: 600 };
  const wheel = { preventDefault() {}, deltaY: -40, clientX: 300, clientY: 200 };
  try {
    view.onWheel(wheel);
    for (let i = 0; i < 3; i++) {
      await sleep(GESTURE_END_MS + 60); // a slow frame: the timer fires before the next event
      runFrame(wheel);
      assert.ok(view.gesture, `the gesture ended between events (after event ${i + 1})`);
    }
    assert.equal(views, 0);
    await sleep(GESTURE_END_MS + 60);
    assert.ok(view.gesture, "ends only after a frame without a wheel event");
    runFrame(null);
    assert.equal(view.gesture, null);
    assert.equal(views, 1); // one re-render (labels' level of detail, status) at the end
    assert.ok(view.box.w < 800 / 1.15);
  } finally {
    view.dispose();
    globalThis.requestAnimationFrame = saved;
  }
});

test("the layer's transform is never none, the identity included (gaining one lays the SVG out again)", async () => {
  const { transformText } = await import("../src/view-box.js");
  assert.equal(transformText({ k: 1, tx: 0, ty: 0 }), "translate(0px, 0px) scale(1)");
  assert.equal(transformText(viewTransform({ x: 0, y: 0, w: 10, h: 10 }, { x: 0, y: 0, w: 10, h: 10 }, { width: 0, height: 0 })), "translate(0px, 0px) scale(1)");
});
