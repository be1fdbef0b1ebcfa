// @ts-check
/**
 * Font warm-up. The first text drawn in a face costs the page synchronous font look-ups
 * (a round trip to the browser process per family name tried and per size: ~20-40 ms in all
 * on a loaded 2-core machine), and they all landed in the frame that first laid out the side
 * panels or the graph. Here each face the explorer draws with is touched by a small hidden
 * probe in its own frame while the index is built, so those frames stay short.
 */
import { afterFrame } from "./view.js";

const SVG_NS = "http://www.w3.org/2000/svg";
/** Characters beyond ASCII that labels use (fall-back fonts are looked up per character). */
const SAMPLE = "Aa0_.,:()[]… → ▸ × ◆ —";

/** One probe per face: UI text (regular, bold), monospace, and the graph's SVG text sizes
 * (at the page's text scale, ./appearance.js). @param {number} scale */
function probes(scale) {
  /** @type {(() => Element)[]} */
  const list = [
    () => Object.assign(document.createElement("span"), { textContent: SAMPLE }),
    () => Object.assign(document.createElement("b"), { textContent: SAMPLE, style: "font-weight: 600" }),
    () => Object.assign(document.createElement("span"), { className: "etp-path", textContent: SAMPLE }),
  ];
  for (const size of [12 * scale, 14 * scale].map(String)) {
    list.push(() => {
      const svg = document.createElementNS(SVG_NS, "svg");
      const text = document.createElementNS(SVG_NS, "text");
      text.setAttribute("font-family", "Helvetica,sans-serif");
      text.setAttribute("font-size", size);
      text.setAttribute("y", "20");
      text.textContent = SAMPLE;
      svg.append(text);
      return svg;
    });
  }
  return list;
}

/**
 * Lay out each probe in its own frame inside `parent` (hidden, out of flow), then remove them.
 * @param {HTMLElement} parent
 * @param {() => boolean} isAlive
 */
export async function warmFonts(parent, isAlive) {
  const box = document.createElement("div");
  box.className = "etp-font-probe";
  box.setAttribute("aria-hidden", "true");
  parent.append(box);
  const scale = Number(parent.style.getPropertyValue("--etp-scale")) || 1;
  for (const make of probes(scale)) {
    if (!isAlive()) break;
    box.append(make());
    await afterFrame();
  }
  box.remove();
}
