// @ts-check
/** Styles of the live region (kept here so the live panels stay one self-contained module). */
export const LIVE_CSS = `
.etp-live { flex-direction: column; flex-wrap: nowrap; flex-shrink: 0; }
.etp-explorer:has(> .etp-live:not([hidden])) { height: auto !important; }
.etp-explorer:has(> .etp-live:not([hidden])) > .etp-main { flex: none; height: 440px; }
.etp-live-controls { display: flex; gap: 6px; align-items: center; flex-wrap: wrap; }
.etp-live-controls label { display: inline-flex; gap: 3px; align-items: center; color: #444; }
.etp-live-controls input[type=number] { width: 56px; font: inherit; }
.etp-live-controls .etp-button:disabled { opacity: 0.45; cursor: default; }
.etp-live-status { color: #555; font-family: ui-monospace, Menlo, monospace; }
.etp-live-note { color: #8a5a00; background: #fff8e1; padding: 1px 6px; border-radius: 3px; }
.etp-live-error { background: #fdecea; color: #8a1c1c; padding: 3px 6px; white-space: pre-wrap; font-family: ui-monospace, Menlo, monospace; }
.etp-live-error[hidden], .etp-live-note[hidden], .etp-live-legend[hidden], .etp-live-panel[hidden], .etp-live-controls [hidden] { display: none; }
.etp-live-grid { display: flex; gap: 8px; flex-wrap: wrap; }
.etp-live-panel { border: 1px solid #eee; border-radius: 3px; padding: 2px 4px; }
.etp-live-panel-head { display: flex; gap: 6px; align-items: center; justify-content: space-between; }
.etp-live-panel-head label { color: #555; display: inline-flex; gap: 2px; align-items: center; }
.etp-live-panel-head input[type=range] { width: 70px; }
.etp-live-legend { display: inline-flex; gap: 4px; align-items: center; color: #444; }
.etp-live-record { position: relative; }
.etp-live-compare { border-collapse: collapse; font-size: 12px; margin: 2px 0; }
.etp-live-compare th, .etp-live-compare td { padding: 1px 8px; text-align: right; border-bottom: 1px solid #eee; }
.etp-live-compare th:first-child, .etp-live-compare td:first-child { text-align: left; }
.etp-live-compare tr.halted td { color: #a33; }
.etp-live-compare[hidden] { display: none; }
.etp-swatch-line { display: inline-block; width: 14px; height: 3px; margin-right: 5px; vertical-align: middle; }
.etp-live-caption { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
.etp-live-caption[hidden] { display: none; }
.etp-live-panel-head .etp-subtitle { font-size: 12px; font-weight: 600; max-width: 360px; }
.etp-gap { border-left: 3px solid #e08a00; padding-left: 4px; margin: 3px 0; }
.etp-live-lesson { border: 2px solid #2a7a2a; background: #f3faf3; border-radius: 4px; padding: 4px 8px; margin: 4px 0; }
.etp-live-lesson[hidden] { display: none; }
.etp-live-lesson .etp-lesson-head { font-weight: 600; margin-bottom: 2px; }
.etp-live-lesson p { margin: 2px 0; }
.etp-live-lesson ul { margin: 2px 0; padding-left: 18px; }
.etp-lesson-weight { font: inherit; border: none; background: none; color: #1f5fa8; text-decoration: underline; cursor: pointer; padding: 0; }
.etp-live-panel canvas[data-live-detail][hidden] { display: none; }
.etp-live-panel canvas[data-live-detail] { display: block; border-top: 1px dashed #ddd; }
.etp-live-scrub { display: inline-flex; gap: 4px; align-items: center; }
.etp-live-scrub input[type=range] { width: 200px; }
.etp-live-scrub-readout { font-family: ui-monospace, Menlo, monospace; color: #333; min-width: 9em; }
.etp-live-cursor { font-size: 11px; color: #111; font-family: ui-monospace, Menlo, monospace; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; max-width: 260px; }
.etp-live-cursor[hidden] { display: none; }
.etp-live-knobs { display: inline-flex; gap: 8px; align-items: center; }
.etp-live-knobs input[type=range] { width: 110px; }
.etp-live-knob-value { font-family: ui-monospace, Menlo, monospace; min-width: 2.5em; }
.etp-live-record > div { position: absolute; z-index: 2; background: #fff; border: 1px solid #ccc; padding: 4px; max-height: 200px; overflow: auto; white-space: nowrap; }
`;
