// @ts-check
/**
 * The end of a lesson and the wait before a run's first frame, as the live region shows them.
 *
 * `live_status.lesson` (etp_viz/live/lesson.py, `LessonSummary.to_json()`, computed in Python):
 * `{step, budget, ended, episodes, chance_loss, chance_accuracy, reference, learners: [{label,
 * loss, accuracy, ratio, reference}], dropped: {learner: [{weight, claim, terms}]}, text}`.
 * `live_status.compiling` (etp_viz/explorer/live_panels.py, `RunWatch`): `{label, index, total,
 * elapsed, why}` while a learner compiles before its frame.
 */
import { h } from "../dom.js";
import { formatNumber } from "./plots.js";

/**
 * "compiling d_rtrl … 3 s" (one learner) or "compiling 2/4: d_rtrl … 12 s" (compare mode),
 * the seconds counted from `started` (ms, the page's clock); "" when nothing compiles.
 * @param {any} compiling  `live_status.compiling`
 * @param {number} [started]
 */
export function compilingText(compiling, started) {
  if (!compiling || !compiling.label) return "";
  const seconds = Math.max(0, Math.floor((Date.now() - (started ?? Date.now())) / 1000));
  const count = Number(compiling.total) > 1 ? ` ${compiling.index}/${compiling.total}:` : "";
  const why = compiling.why ? ` (${compiling.why})` : "";
  return `compiling${count} ${compiling.label}${why} … ${seconds} s`;
}

/** A score beside its chance level: "0.061 (chance 1.39)" or "99 % (chance 25 %)". */
function score(/** @type {number | null} */ value, /** @type {number | null} */ chance, percent = false) {
  const fmt = (/** @type {number} */ v) => (percent ? `${Math.round(100 * v)} %` : formatNumber(v));
  if (value == null || !Number.isFinite(Number(value))) return "–";
  return chance == null ? fmt(Number(value)) : `${fmt(Number(value))} (chance ${fmt(Number(chance))})`;
}

/**
 * Draw the lesson summary into `el` (hidden without one): what ended, a table of the learners'
 * final scores against chance and their loss as a multiple of the exact reference's, and the
 * weights each learner does not learn exactly with the terms it drops (a click selects the
 * weight on the graph).
 * @param {HTMLElement} el
 * @param {any} lesson  `live_status.lesson` (null: none)
 * @param {(path: string) => void} selectWeight
 */
export function renderLesson(el, lesson, selectWeight) {
  const key = lesson ? JSON.stringify(lesson) : "";
  if (el.dataset.key === key) return;
  el.dataset.key = key;
  el.hidden = !lesson;
  if (!lesson) { el.replaceChildren(); return; }
  const past = lesson.ended && lesson.step > lesson.budget;
  const head = !lesson.ended ? `Step ${lesson.step} of the lesson's ${lesson.budget}`
    : past ? `Step ${lesson.step}: past the lesson's end (${lesson.budget} steps, the recipe's budget)`
      : `The lesson ended at step ${lesson.step} (the recipe's budget). Continue runs past it.`;
  const accuracy = lesson.learners.some((/** @type {any} */ r) => r.accuracy != null);
  const reference = lesson.reference;
  const columns = ["learner", `final loss (last ${lesson.episodes} episodes)`, ...(accuracy ? ["accuracy"] : []), ...(reference ? [`loss ÷ ${reference}'s`] : [])];
  const rows = lesson.learners.map((/** @type {any} */ r) => h("tr", { "data-lesson-learner": r.label },
    h("td", {}, r.label, r.reference ? " (exact reference)" : ""),
    h("td", {}, score(r.loss, lesson.chance_loss)),
    ...(accuracy ? [h("td", {}, score(r.accuracy, lesson.chance_accuracy, true))] : []),
    ...(reference ? [h("td", { "data-lesson-ratio": r.label }, r.ratio == null ? "–" : r.reference ? "1 (the reference)" : `${r.ratio.toFixed(1)}×`)] : [])));
  const gaps = lesson.learners.filter((/** @type {any} */ r) => !r.reference && r.ratio != null).map((/** @type {any} */ r) =>
    h("p", { class: "etp-lesson-gap" }, `${r.label}'s final loss is ${r.ratio.toFixed(1)}× ${reference}'s (the exact reference: the gradient of each episode's loss).`));
  if (!reference && lesson.learners.length > 1) gaps.push(h("p", {}, "No learner here is exact on every weight: no reference to measure a gap against."));
  const dropped = [];
  for (const [learner, weights] of Object.entries(lesson.dropped || {})) {
    for (const w of /** @type {any[]} */ (weights)) {
      const link = h("button", { class: "etp-lesson-weight", "data-lesson-weight": w.weight, title: "show this weight on the graph", onclick: () => selectWeight(w.weight) }, w.weight);
      const who = learner ? `${learner}: ` : "";
      dropped.push(h("li", {}, who, link, ` (${w.claim === "none" ? "not learned online" : "approximate"}): ${w.terms.join("; ")}`));
    }
  }
  el.replaceChildren(
    h("div", { class: "etp-lesson-head" }, head),
    h("table", { class: "etp-live-compare" }, h("tr", {}, ...columns.map((c) => h("th", {}, c))), ...rows),
    ...gaps,
    ...(dropped.length ? [h("div", {}, "Why: the terms each learner drops (dashed on the graph)"), h("ul", {}, ...dropped)] : []));
}
