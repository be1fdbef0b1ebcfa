// @ts-check
/**
 * Compare mode's knob sliders: one per knob that some learner of the comparison takes
 * (ES-D-RTRL's `decay`, truncated BPTT's `window`, e-prop's `kappa_filter_decay`, SnAp's `n`).
 *
 * Python side: `live_status.knobs` (`_knob_sliders` in etp_viz/explorer/compare.py), a list of
 * `{name, summary, values: {label: value}, value, min, max, step, integer}`. Releasing a slider
 * sends `live_set {<name>: value}`, which rebuilds the learners that take it at the current
 * step (`Comparison.set_knob` in etp_viz/live/compare.py). The sliders are disabled while a run
 * goes on; a refused value is shown by the app's error banner and the slider goes back to the
 * value Python holds.
 */
import { h } from "../dom.js";

/**
 * @typedef {object} KnobSlider  one entry of `live_status.knobs`
 * @property {string} name
 * @property {string} summary
 * @property {Record<string, number | number[]>} values  the knob's value on each learner taking it
 * @property {number} value
 * @property {number} min
 * @property {number} max
 * @property {number} step
 * @property {boolean} integer
 */

/** @param {KnobSlider} knob @param {number} value */
export function knobText(knob, value) {
  return knob.integer ? String(Math.round(value)) : Number(value).toFixed(2);
}

/** The slider's tooltip: what it is and its value on each learner. */
export function knobTitle(/** @type {KnobSlider} */ knob) {
  const on = Object.entries(knob.values || {}).map(([label, v]) => `${label}: ${Array.isArray(v) ? v.join(" / ") : v}`);
  return `${knob.summary}. Moves ${on.join(", ")}: those learners are rebuilt at the current step (paused only) and their next steps compile again.`;
}

export class KnobSliders {
  /** @param {(name: string, value: number) => Promise<any>} send  the `live_set` request */
  constructor(send) {
    this.send = send;
    this.el = h("span", { class: "etp-live-knobs", "data-live-knobs": "", hidden: true });
    /** @type {Map<string, {input: HTMLInputElement, output: HTMLElement, label: HTMLElement}>} */
    this.inputs = new Map();
    /** @type {KnobSlider[]} */
    this.knobs = [];
    this.disabled = false;
    this.layout = "";
  }

  /**
   * Draw the sliders of `knobs` (none: hidden); `disabled` while a run goes on or on a saved page.
   * @param {KnobSlider[] | null | undefined} knobs
   * @param {boolean} disabled
   */
  render(knobs, disabled) {
    this.knobs = Array.isArray(knobs) ? knobs : [];
    this.disabled = disabled;
    const layout = this.knobs.map((k) => `${k.name}:${k.min}:${k.max}:${k.step}`).join("|");
    if (layout !== this.layout) this.build();
    for (const knob of this.knobs) {
      const entry = this.inputs.get(knob.name);
      if (!entry) continue;
      entry.input.disabled = disabled || entry.input.dataset.pending === "true";
      entry.label.title = knobTitle(knob);
      if (entry.input.dataset.pending !== "true" && document.activeElement !== entry.input) {
        entry.input.value = String(knob.value);
        entry.output.textContent = knobText(knob, knob.value);
      }
    }
    this.el.hidden = this.knobs.length === 0;
  }

  build() {
    this.layout = this.knobs.map((k) => `${k.name}:${k.min}:${k.max}:${k.step}`).join("|");
    this.inputs.clear();
    const labels = this.knobs.map((knob) => {
      const output = h("output", { class: "etp-live-knob-value", "data-live-knob-value": knob.name }, knobText(knob, knob.value));
      const input = /** @type {HTMLInputElement} */ (h("input", {
        type: "range", min: knob.min, max: knob.max, step: knob.step, value: knob.value, "data-live-knob": knob.name,
        oninput: () => { output.textContent = knobText(knob, Number(input.value)); },
        onchange: () => this.move(knob.name, Number(input.value)),
      }));
      const label = h("label", { title: knobTitle(knob) }, knob.name, input, output);
      this.inputs.set(knob.name, { input, output, label });
      return label;
    });
    this.el.replaceChildren(...labels);
  }

  /** Ask Python to move a knob; whatever it answers, show the value it holds after. */
  move(/** @type {string} */ name, /** @type {number} */ value) {
    const entry = this.inputs.get(name);
    if (entry) { entry.input.dataset.pending = "true"; entry.input.disabled = true; }
    const done = () => {
      if (entry) { entry.input.dataset.pending = "false"; entry.input.blur(); }
      this.render(this.knobs, this.disabled);
    };
    return this.send(name, value).then(done, done);
  }
}
