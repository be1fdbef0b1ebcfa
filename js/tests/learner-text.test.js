import { test } from "node:test";
import assert from "node:assert/strict";
import { learnerText } from "../src/live/index.js";

test("the status names a learner with its options that are not at their defaults", () => {
  assert.equal(learnerText("eprop", { feedback: "random" }), "eprop (feedback=random)");
  assert.equal(learnerText("es_d_rtrl", { decay: [0.5, 0.7] }), "es_d_rtrl (decay=0.5/0.7)");
  assert.equal(learnerText("tbptt", { window: 8, lift: true }), "tbptt (window=8, lift=true)");
  assert.equal(learnerText("d_rtrl", {}), "d_rtrl");
  assert.equal(learnerText("d_rtrl", undefined), "d_rtrl");
});
