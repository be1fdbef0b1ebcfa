"""The live region in headless Chromium, driven by a real Python session.

The harness page's mock anywidget model forwards every request (Step, Run, Pause, Reset,
live_set) to a real :class:`~etp_viz.explorer.live_explorer.LiveExplorer` through Playwright's
``expose_function``; what Python sends back (responses, float32 live buffers, trait changes of
``live_status`` and ``error``) is replayed into the page, so the panels draw real numbers.
Every non-loopback request is aborted and counted (must be 0); page errors must be 0.
"""

from __future__ import annotations

import base64
import json
import math
import tempfile
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

import etp_viz
from etp_viz import tasks

from .conftest import MOCK_MODEL_JS

pytestmark = pytest.mark.browser

BRIDGE_HTML = (
    """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>etp_viz live bridge</title></head>
<body style="margin:0;padding:8px">
<div id="root"></div>
<script>"""
    + MOCK_MODEL_JS
    + """</script>
<script type="module">
import widget from "./widget.js";
const state = await (await fetch("./live_state.json")).json();
const model = etpCreateModel(state);
const toView = (b64) => { const s = atob(b64); const bytes = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) bytes[i] = s.charCodeAt(i);
  return new DataView(bytes.buffer); };
const apply = (text) => { for (const m of JSON.parse(text)) {
  if (m.trait) model.set(m.trait, m.value);
  else model.emit("msg:custom", m.content, (m.buffers || []).map(toView)); } };
model.send = (content) => { window.etpPyMessage(JSON.stringify(content)).then(apply); };
setInterval(() => window.etpPyPoll().then(apply), 50);
window.etpModel = model;
window.etpEl = document.getElementById("root");
widget.render({ model, el: window.etpEl });
window.etpReady = true;
</script>
</body></html>
"""
)
#: Screenshots of the teaching panels (looked at by a person; not compared).
SCREENSHOTS = Path(tempfile.gettempdir()) / "etp_viz_screenshots"
SCREENSHOTS.mkdir(exist_ok=True)
LOSS_ON_PAGE = "Array.from(window.etpEl.etpExplorer.live.series.get('loss').data)"
RENDERED = "document.querySelectorAll('.etp-graph-pane svg g.node').length > 0"


class Bridge:
    """Python end of the page's mock model: an outbox of messages and trait changes."""

    def __init__(self, explorer):
        self.explorer = explorer
        self.lock = threading.Lock()
        self.outbox: list[dict] = []
        explorer.send = self._send
        explorer.observe(self._trait, names=["live_status", "error", "verification"])

    def _send(self, content, buffers=None):
        encoded = [base64.b64encode(bytes(b)).decode() for b in buffers or []]
        with self.lock:
            self.outbox.append({"content": content, "buffers": encoded})

    def _trait(self, change):
        with self.lock:
            self.outbox.append({"trait": change["name"], "value": change["new"]})

    def drain(self) -> str:
        with self.lock:
            out, self.outbox = self.outbox, []
        return json.dumps(out)

    def message(self, text: str) -> str:
        self.explorer._on_custom_message(self.explorer, json.loads(text), [])
        return self.drain()


def live_explorer(data=None, **options):
    task = tasks.get_task("sine")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return etp_viz.show(
            task.suggested_model(),
            task.example_input(),
            steps_per_frame=5,
            **({"data": data} if data is not None else {"task": task}),
            **options,
        )


@pytest.fixture
def bridged(site, open_page):
    """bridged(explorer) -> (Page, Bridge) with the widget rendered on the bridge page."""
    root, base = site
    (root / "bridge.html").write_text(BRIDGE_HTML)

    def load(explorer):
        bridge = Bridge(explorer)
        state = explorer.frontend_state()
        state.pop("live_history")  # a kernel is attached: no recorded-run (static) mode
        (root / "live_state.json").write_text(json.dumps(state))
        page = open_page(base)
        page.page.expose_function("etpPyMessage", bridge.message)
        page.page.expose_function("etpPyPoll", bridge.drain)
        page.page.goto(f"{base}/bridge.html")
        page.page.wait_for_function("window.etpReady === true", timeout=20000)
        page.page.wait_for_function(RENDERED, timeout=30000)
        return page, bridge

    return load


def canvas_image(page, name):
    """(data URL, number of drawn pixels) of a live canvas."""
    return page.page.evaluate(
        """(name) => { const c = document.querySelector(`canvas[data-live="${name}"]`);
          const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          let n = 0; for (let i = 3; i < d.length; i += 4) n += d[i] > 0;
          return [c.toDataURL(), n]; }""",
        name,
    )


def status_text(page):
    return page.page.text_content("[data-live-status]")


def wait_status(page, text, timeout=60000):
    page.page.wait_for_function(
        "(t) => document.querySelector('[data-live-status]').textContent.includes(t)",
        arg=text,
        timeout=timeout,
    )


def assert_clean(page):
    assert page.errors == [], page.errors
    assert page.aborted == [], f"non-loopback requests: {page.aborted}"


def test_step_changes_loss_and_trace_panels(bridged):
    explorer = live_explorer()
    page, _ = bridged(explorer)
    device = explorer.history.meta["device"]
    assert f"device {device}" in status_text(page) and "step 0" in status_text(page)
    loss_before, _ = canvas_image(page, "loss")
    traces_before, _ = canvas_image(page, "traces")

    page.page.click("button[data-live-action=step]")
    wait_status(page, "step 1 ")
    page.page.wait_for_function(
        "document.querySelector('canvas[data-live=traces]') && "
        "window.etpEl.etpExplorer.live.series.size > 0"
    )
    page.page.click("button[data-live-action=step]")
    wait_status(page, "step 2 ")
    page.page.wait_for_function("window.etpEl.etpExplorer.live.series.get('loss').data.length == 2")
    loss_after, loss_pixels = canvas_image(page, "loss")
    traces_after, trace_pixels = canvas_image(page, "traces")
    assert loss_after != loss_before and traces_after != traces_before
    assert loss_pixels > 200 and trace_pixels > 200
    # the page holds Python's numbers (float32 buffers)
    page_loss = page.page.evaluate(
        "Array.from(window.etpEl.etpExplorer.live.series.get('loss').data)"
    )
    np.testing.assert_allclose(page_loss, explorer.history.loss, rtol=1e-6)
    assert explorer.session.step_count == 2
    # graph ETP nodes coloured by trace magnitude, legend shown
    coloured = page.page.evaluate("document.querySelectorAll('g.etp-trace-coloured').length")
    relations = len(explorer.view_model["relations"])
    assert coloured == relations >= 1
    assert page.page.is_visible(".etp-live-legend")
    heat, heat_pixels = canvas_image(page, "df/r0.g0")
    assert heat_pixels > 1000

    # Run does not block; Pause stops it; the panels keep moving meanwhile
    page.page.fill("input[data-live-input=steps_per_frame]", "3")
    page.page.dispatch_event("input[data-live-input=steps_per_frame]", "change")
    page.page.click("button[data-live-action=run]")
    page.page.wait_for_function(
        "window.etpEl.etpExplorer.live.series.get('loss').data.length > 12", timeout=60000
    )
    page.page.click("button[data-live-action=pause]")
    wait_status(page, "paused")
    assert not explorer.session.running and explorer.session.steps_per_frame == 3

    # record selection reaches Python and hides the panel
    page.page.click("button[data-live-action=record]")
    page.page.uncheck("input[data-record='dhdh/g0']")
    page.page.wait_for_selector("[data-live-panel='dhdh/g0']", state="hidden")
    page.page.wait_for_function("window.etpEl.etpExplorer.live.status.record != null")
    assert explorer.record is not None and "dhdh/g0" not in explorer.record

    page.page.click("button[data-live-action=reset]")
    wait_status(page, "step 0 ")
    assert explorer.history.num_steps == 0
    assert_clean(page)


def test_es_d_rtrl_decay_control_reaches_the_algorithm(bridged):
    explorer = live_explorer(algorithm="es_d_rtrl", decay=0.9)
    page, _ = bridged(explorer)
    assert page.page.is_visible("input[data-live-input=decay]")
    page.page.fill("input[data-live-input=decay]", "0.5")
    page.page.dispatch_event("input[data-live-input=decay]", "change")
    page.page.wait_for_function("window.etpEl.etpExplorer.live.status.decay === 0.5")
    assert explorer.session.algorithm.alpha_x == explorer.session.algorithm.alpha_f == 0.5
    page.page.click("button[data-live-action=step]")
    wait_status(page, "step 1 ")
    names = page.page.evaluate("[...window.etpEl.etpExplorer.live.series.keys()]")
    assert any(n.startswith("trace_x/") for n in names), names
    assert_clean(page)


def test_nan_run_shows_the_error_with_its_step(bridged):
    task = tasks.get_task("sine")

    def data(t):
        x, y = task.step_data(t)
        return x, (np.asarray(y) * np.nan if t >= 6 else y)

    explorer = live_explorer(data=data)
    page, _ = bridged(explorer)
    page.page.click("button[data-live-action=run]")
    page.page.wait_for_selector("[data-live-error]:not([hidden])", timeout=60000)
    message = page.page.text_content("[data-live-error]")
    assert "Step 6" in message and "non-finite" in message, message
    assert "Step 6" in page.page.text_content(".etp-error")
    wait_status(page, "halted")
    assert page.page.is_disabled("button[data-live-action=step]")
    assert page.page.is_disabled("button[data-live-action=run]")
    assert explorer.history.failure["step"] == 6
    # history before the failure is intact on the page
    loss = page.page.evaluate(LOSS_ON_PAGE)
    assert len(loss) >= 6 and np.all(np.isfinite(loss[:6]))
    # Reset clears the error and the session is usable again
    page.page.click("button[data-live-action=reset]")
    page.page.wait_for_selector("[data-live-error]", state="hidden")
    wait_status(page, "step 0 ")
    assert_clean(page)


def test_user_code_exception_is_shown_and_session_stays_usable(bridged):
    task = tasks.get_task("sine")

    def data(t):
        if t == 2:
            raise OSError("sensor unplugged")
        return task.step_data(t)

    explorer = live_explorer(data=data)
    page, _ = bridged(explorer)
    page.page.click("button[data-live-action=run]")
    page.page.wait_for_selector("[data-live-error]:not([hidden])", timeout=60000)
    assert "sensor unplugged" in page.page.text_content("[data-live-error]")
    assert "sensor unplugged" in page.page.text_content(".etp-error")
    assert page.errors == [] and page.aborted == []


def test_verify_shows_measured_fidelity_beside_each_claim(bridged):
    """Verify runs etp_viz.verify on the session's last steps; each weight row gets ✓ (the
    claim holds) and its detail the measured cosine and error beside the claim."""
    explorer = live_explorer()
    page, _ = bridged(explorer)
    claims = page.page.eval_on_selector_all(
        "[data-weight]", "rows => rows.map(r => [r.dataset.weight, r.dataset.claim])"
    )
    assert dict(claims) == {"rnn.W.weight": "approximate", "readout.W.weight": "exact"}
    page.page.click("button[data-live-action=step]")
    wait_status(page, "step 1 ")
    page.page.click("button[data-live-action=verify]")
    page.page.wait_for_selector("[data-verified-mark]", timeout=60000)
    marks = page.page.eval_on_selector_all(
        "[data-verified-mark]", "marks => marks.map(m => m.dataset.verifiedMark)"
    )
    assert marks == ["ok", "ok"], marks
    assert explorer.verification["contradictions"] == 0
    page.page.click("[data-weight='rnn.W.weight']")
    detail = page.page.text_content("[data-verified='rnn.W.weight']")
    assert "cos" in detail and "rel. err" in detail
    assert_clean(page)


def panel_state(page):
    """What the page shows on the teaching panels (read off the DOM and the canvases)."""
    return page.page.evaluate(
        """() => { const q = (s) => document.querySelector(s);
          const loss = q('canvas[data-live="loss"]');
          const constant = q('[data-live-panel][data-constant]');
          const synapse = q('canvas[data-live="activity/synapse"]');
          return { smoothed: loss.dataset.smoothed, chance: loss.dataset.chance,
            constant: constant ? constant.dataset.constant : null,
            caption: constant ? constant.querySelector('[data-live-caption]').textContent : '',
            tooltips: [...document.querySelectorAll('[data-live-panel]')].map((e) => e.title),
            synapseTitle: q('[data-live-title="activity/synapse"]').textContent,
            synapseUnit: synapse.dataset.unit,
            layer: q('canvas[data-live="activity/layer"]').dataset.drawn }; }"""
    )


def test_panels_teach_smoothing_chance_constants_and_activity(bridged):
    explorer = live_explorer()
    page, _ = bridged(explorer)
    explorer.step(110)  # one whole episode (100 steps) and a bit: the activity views fill
    page.page.wait_for_function(
        "(() => { const s = window.etpEl.etpExplorer.live.series.get('activity/synapse');"
        " return s && s.shape[0] === 100; })()",
        timeout=60000,
    )
    state = panel_state(page)
    task = explorer.session.options["task"]
    assert state["smoothed"] == str(task.n_steps)  # the mean over one episode
    assert float(state["chance"]) == pytest.approx(task.chance_loss, rel=1e-6)
    # the readout's leak is a constant: shown as its value, with where it comes from
    assert state["constant"] is not None
    assert "constant over units and steps" in state["caption"]
    leak = math.exp(-1.0 / task.recipe().readout_tau)  # the readout the task built
    assert f"dh/dh = {leak:.3g} = exp(−Δt/τ)" in page.page.text_content(
        "[data-live-panel='dhdh/g1'] [data-live-caption]"
    )
    assert all(state["tooltips"]), "every panel has a plain-language tooltip"
    assert state["layer"] == "true"
    unit = int(state["synapseUnit"])
    assert f"rnn.W.weight[0, {unit}]" in state["synapseTitle"]
    for name in ("activity/layer", "activity/readout", "activity/synapse", "loss"):
        _, pixels = canvas_image(page, name)
        assert pixels > 2000, name
    # a click on a raster row picks that unit's synapse
    layer = page.page.locator("canvas[data-live='activity/layer']")
    layer.click(position={"x": 220, "y": 6 + 2.5 * 10.4})  # the raster's row of unit 2
    page.page.wait_for_function(
        "document.querySelector('[data-live-title=\"activity/synapse\"]').textContent"
        ".includes('[0, 2] (input 0 → unit 2, clicked)')"
    )
    page.page.set_viewport_size({"width": 1400, "height": 1000})
    page.page.screenshot(path=str(SCREENSHOTS / "live_teaching_panels.png"), full_page=True)
    assert_clean(page)


def test_a_saved_page_draws_accuracy_and_activity_without_a_kernel(harness):
    task = tasks.get_task("delayed_recall", seq_len=1, delay=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        explorer = etp_viz.show(
            task.suggested_model(hidden_size=6), task.example_input(), task=task
        )
        explorer.step(40)
    page = harness(explorer, "saved_teaching")
    p = page.page
    p.wait_for_function(
        "(() => { const c = document.querySelector('canvas[data-live=\"accuracy\"]');"
        " return c && c.dataset.chance; })()",
        timeout=30000,
    )
    assert float(p.get_attribute("canvas[data-live='accuracy']", "data-chance")) == 0.25
    _, pixels = canvas_image(page, "activity/readout")
    assert pixels > 2000
    assert p.get_attribute("canvas[data-live='activity/layer']", "data-drawn") == "true"
    assert page.errors == [] and page.aborted == []
