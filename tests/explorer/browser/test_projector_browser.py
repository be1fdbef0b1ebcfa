"""Projector and accessibility (issue 28) in headless Chromium: the text scale, the graph's
first view, ``height`` in a live run, keyboard-only use, the dark theme.

One compiled sine-task explorer serves every test (its saved state: the graph and the recorded
run as the saved page draws them); the live-run test drives a real session through the bridge
of test_live_browser.py.
"""

from __future__ import annotations

import warnings

import pytest

import etp_viz
from etp_viz import tasks
from etp_viz.explorer.widget import Explorer

from .conftest import load_real
from .legend_checks import LIVE_COLOURS, assert_every_colour_in_legend
from .test_live_browser import assert_clean, bridged, wait_status  # noqa: F401

pytestmark = pytest.mark.browser
GRAPH = ".etp-graph-pane svg.etp-graph:not(.etp-building)"
RENDERED = f"document.querySelectorAll('{GRAPH} g.node').length > 0"

#: JS: every text of the drawn graph: its font size on screen (font size x the SVG's scale) and
#: the height of its box
GRAPH_TEXT = """() => {
  const svg = document.querySelector('.etp-graph-pane svg.etp-graph:not(.etp-building)');
  return [...svg.querySelectorAll('text')].map((t) => { const m = t.getScreenCTM();
    const px = parseFloat(t.getAttribute('font-size')) * Math.hypot(m.a, m.b);
    return { text: t.textContent, px, box: t.getBoundingClientRect().height }; }); }"""
#: JS: the computed font size of every visible HTML text outside the graph and the live
#: canvases (toolbar, side panels, chips, legend), one entry per element holding text
PAGE_TEXT = """() => {
  const root = document.querySelector('.etp-explorer'); const out = [];
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement, text = n.textContent.trim();
    if (!text || !el || el.closest('svg, style, .etp-live-grid, [hidden]')) continue;
    const r = el.getBoundingClientRect(); if (!r.width || !r.height) continue;
    out.push({ text: text.slice(0, 40), px: parseFloat(getComputedStyle(el).fontSize) });
  }
  return out; }"""
#: JS: drawn nodes whose box is not inside the graph pane
NODES_OUTSIDE = """() => {
  const pane = document.querySelector('.etp-graph-pane').getBoundingClientRect();
  return [...document.querySelectorAll('.etp-graph-pane svg.etp-graph:not(.etp-building) g.node')]
    .filter((g) => { const r = g.getBoundingClientRect();
      return r.left < pane.left - 0.5 || r.right > pane.right + 0.5
        || r.top < pane.top - 0.5 || r.bottom > pane.bottom + 0.5; })
    .map((g) => g.id); }"""


@pytest.fixture(scope="module")
def sine_state():
    """The saved state of the sine task's explorer after a few recorded steps."""
    task = tasks.get_task("sine")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        explorer = etp_viz.show(task.suggested_model(), task.example_input(), task=task)
        explorer.step(4)
    return explorer.frontend_state()


def open_state(harness, state, name, **changes):
    if "expanded" not in changes:  # these checks read the operations: open the model's cells
        cells = [c["id"] for c in state["view_shell"]["clusters"] if c["kind"] == "cell"]
        changes["expanded"] = [*state.get("expanded", []), *cells]
    page = harness({**state, **changes}, name)
    page.page.wait_for_function(RENDERED, timeout=30000)
    page.page.wait_for_selector("[data-legend] .etp-legend-item")
    settle(page)
    return page


def settle(page):
    """Wait until the graph's first view is drawn for the pane as it is now (the legend fills
    in under the graph after it, and the first view follows the pane)."""
    page.page.wait_for_function(
        """() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() =>
          done(!document.querySelector('.etp-graph-pane svg.etp-building')))))"""
    )


def test_scale_1_5_makes_every_text_larger_and_graph_labels_at_least_16_px(harness, sine_state):
    """show(..., scale=1.5): graph labels >= 16 px on screen in the first view, every other
    text of the page >= 16 px; at scale 1 the same texts were smaller (the scale is what did
    it). The saved page keeps the scale (it is a trait)."""
    page = open_state(harness, sine_state, "scale1")
    small = page.page.evaluate(PAGE_TEXT)
    assert min(t["px"] for t in small) < 16, small
    page.close()

    state = {**sine_state, "scale": 1.5}
    page = open_state(harness, state, "scale15")
    labels = page.page.evaluate(GRAPH_TEXT)
    assert labels and all(t["px"] >= 16 and t["box"] >= 16 for t in labels), min(
        labels, key=lambda t: t["px"]
    )
    texts = page.page.evaluate(PAGE_TEXT)
    assert {"online · exact", "Weights", "hidden state h"} <= {t["text"] for t in texts}, texts
    too_small = [t for t in texts if t["px"] < 16]
    assert not too_small, too_small
    # the status says the rest of the graph is a drag (or Fit) away, and Fit shows it all
    assert "part of the graph" in page.page.text_content("[data-status]")
    page.page.click("[data-action=fit]")
    assert page.page.evaluate(NODES_OUTSIDE) == []
    assert "part of the graph" not in page.page.text_content("[data-status]")
    assert_clean(page)


def test_a_plus_button_sets_the_scale_trait(harness, sine_state):
    page = open_state(harness, sine_state, "aplus")
    before = page.page.evaluate(GRAPH_TEXT)
    page.page.click("[data-action=text-larger]")
    page.page.click("[data-action=text-larger]")
    assert page.page.evaluate("window.etpModel.state.scale") == 1.5
    assert page.page.text_content("[data-scale-value]") == "150 %"
    page.page.wait_for_function(
        "() => { const t = document.querySelector('.etp-graph-pane svg.etp-graph:not(.etp-building)"
        " text'); return t && parseFloat(t.getAttribute('font-size')) === 21; }"
    )
    settle(page)
    after = page.page.evaluate(GRAPH_TEXT)
    assert min(t["px"] for t in after) >= 16 > min(t["px"] for t in before)
    page.page.click("[data-action=text-smaller]")
    assert page.page.evaluate("window.etpModel.state.scale") == 1.25
    assert_clean(page)


def test_saved_html_keeps_the_scale(open_page, tmp_path):
    explorer = Explorer(load_real("gru"), scale=1.5)
    path = explorer.save_html(tmp_path / "gru.html")
    assert '"scale": 1.5' in path.read_text()
    page = open_page(None)
    page.page.goto(path.as_uri())
    page.page.wait_for_selector(".etp-graph-pane svg.etp-graph:not(.etp-building) g.node")
    assert page.page.get_attribute(".etp-explorer", "data-scale") == "1.5"
    assert page.page.text_content("[data-scale-value]") == "150 %"
    assert page.errors == [] and page.aborted == []


@pytest.mark.parametrize("name", ["sine", "two_layer_rnn", "gru"])
def test_the_first_view_fits_the_whole_graph(harness, sine_state, name):
    """Every node's box is inside the graph pane in the first view (the sine graph's readout
    group included), and the status line does not say part of it is hidden."""
    state = sine_state if name == "sine" else Explorer(load_real(name)).frontend_state()
    page = open_state(harness, state, f"fit_{name}", expanded=state.get("expanded", []))
    assert page.page.evaluate(NODES_OUTSIDE) == []
    status = page.page.text_content("[data-status]")
    assert "nodes" in status and "part of the graph" not in status, status
    if name == "sine":
        readout = page.page.evaluate(
            # its group box, inside the folded readout cell (a node) since cells fold (issue 41)
            "() => [...document.querySelectorAll("
            "'svg.etp-graph g.cluster text, svg.etp-graph g.node text')]"
            ".map((t) => t.textContent)"
        )
        assert any("readout" in t for t in readout), readout
    assert_clean(page)


def test_height_is_honoured_in_a_live_run(bridged):  # noqa: F811
    """show(..., height=900): the graph area stays 900 px tall once the run is live (the live
    panels come below it), and the graph pane takes the room."""
    task = tasks.get_task("sine")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        explorer = etp_viz.show(task.suggested_model(), task.example_input(), task=task, height=900)
    page, _ = bridged(explorer)
    page.page.click("button[data-live-action=step]")
    wait_status(page, "step 1 ")
    page.page.wait_for_selector("[data-region=live]:not([hidden])")
    boxes = page.page.evaluate(
        """() => { const box = (s) => document.querySelector(s).getBoundingClientRect();
          return { top: box('.etp-top').height, pane: box('.etp-graph-pane').height,
            live: box('[data-region=live]').top, main: box('.etp-main').bottom }; }"""
    )
    assert boxes["top"] == pytest.approx(900, abs=1), boxes
    assert boxes["pane"] > 600 and boxes["live"] >= boxes["main"] - 1, boxes
    assert_clean(page)


def test_keyboard_only_selects_a_weight_and_reads_its_claim(harness, sine_state):
    """Tab reaches the graph (arrow keys move a visible focus ring between nodes, Enter
    selects one) and the weights list (arrow keys, Enter selects a weight: the inspector
    shows its claim). No mouse."""
    page = open_state(harness, sine_state, "keyboard")
    p = page.page
    p.focus("body")
    focused = []
    for _ in range(40):
        p.keyboard.press("Tab")
        focused.append(p.evaluate("document.activeElement.className || 'other'"))
        if "etp-graph-pane" in focused[-1]:
            break
    assert "etp-graph-pane" in focused[-1], focused
    assert p.get_attribute(".etp-graph-pane", "role") == "application"
    p.wait_for_selector("[data-focus-ring]")
    p.wait_for_selector("[data-legend] [data-key=focus]")  # the ring is in the legend
    first = p.get_attribute(".etp-graph-pane", "aria-activedescendant")
    for key in ("ArrowDown", "ArrowRight", "ArrowDown"):
        p.keyboard.press(key)
    moved = p.get_attribute(".etp-graph-pane", "aria-activedescendant")
    assert moved and moved != first
    label = p.get_attribute(f"g#{moved}", "aria-label")
    assert label and ":" in label
    p.keyboard.press("Enter")
    selected = p.evaluate("window.etpModel.state.selected")
    assert selected["kind"] in ("node", "cluster"), selected
    # on to the weights list: Tab, Tab ... until the listbox of weights has the focus
    for _ in range(20):
        p.keyboard.press("Tab")
        if p.evaluate("!!document.activeElement.closest('[data-panel-body=weights]')"):
            break
    assert p.evaluate("document.activeElement.getAttribute('role')") == "listbox"
    p.keyboard.press("ArrowDown")
    row = p.evaluate(
        "document.getElementById(document.activeElement.getAttribute('aria-activedescendant'))"
        ".dataset.weight"
    )
    ring = "getComputedStyle(document.querySelector('.etp-row.focused')).outlineStyle"
    assert p.evaluate(ring) == "dashed"
    p.keyboard.press("Enter")
    assert p.evaluate("window.etpModel.state.selected") == {"kind": "weight", "id": row}
    weight = next(w for w in sine_state["view_shell"]["weights"] if w["path"] == row)
    inspector = p.inner_text("[data-panel-body=inspector]")
    assert row in inspector and weight["claim"] in inspector, inspector
    assert_clean(page)


def test_dark_theme_follows_jupyterlab(harness, sine_state):
    """body[data-jp-theme-light="false"] (JupyterLab's dark themes): the page, the graph and
    its legend turn dark, every colour on the graph still has a legend entry; back to light
    when JupyterLab switches back."""
    page = open_state(harness, sine_state, "dark")
    p = page.page
    light = p.evaluate(LIVE_COLOURS)
    p.evaluate("document.body.setAttribute('data-jp-theme-light', 'false')")
    p.wait_for_selector(".etp-explorer.etp-dark")
    p.wait_for_function(
        "() => { const t = document.querySelector('.etp-graph-pane svg.etp-graph:not(.etp-building)"
        " text'); return t && t.getAttribute('fill') === '#f0f0f0'; }"
    )
    settle(page)
    colours = p.evaluate(
        """() => { const bg = (s) => getComputedStyle(document.querySelector(s)).backgroundColor;
          return { root: bg('.etp-explorer'), pane: bg('.etp-graph-pane svg.etp-graph'),
            text: getComputedStyle(document.querySelector('.etp-side')).color }; }"""
    )
    assert colours["pane"] == "rgb(30, 30, 30)", colours
    assert colours["root"] != "rgb(255, 255, 255)" and colours["text"] != "rgb(34, 34, 34)"
    dark = p.evaluate(LIVE_COLOURS)
    assert_every_colour_in_legend(dark)
    assert "#1e1e1e" in dark["legend"]["op"] and "#1e1e1e" not in light["legend"]["op"]
    p.evaluate("document.body.setAttribute('data-jp-theme-light', 'true')")
    p.wait_for_selector(".etp-explorer:not(.etp-dark)")
    assert_clean(page)
