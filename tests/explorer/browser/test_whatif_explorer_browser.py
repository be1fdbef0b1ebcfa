"""The explorer's "What if…" control in Chromium, answered by a real Python explorer.

Select a weight that a plain ``x @ W`` keeps from being learned, click "What if… lift plain
ops" in the inspector: the result panel lists the relation the lift adds and the claim it
changes, the cost before and after, and draws the two graphs (SVG) side by side; close hides
it. The page's mock model forwards the request to ``Explorer`` through Playwright's
``expose_function`` and replays what Python sends back (the response, the ``what_if`` trait).
"""

from __future__ import annotations

import base64
import json
import threading
import warnings

import jax
import pytest

import etp_viz
from etp_viz.explorer.live_explorer import build_explorer
from tests.test_whatif import Leaky, _net

from .test_live_browser import BRIDGE_HTML

pytestmark = pytest.mark.browser

RENDERED = "document.querySelectorAll('.etp-graph-pane svg g.node').length > 0"


class Bridge:
    """Python end of the page's mock model: the explorer's messages and trait changes."""

    def __init__(self, explorer):
        self.explorer = explorer
        self.lock = threading.Lock()
        self.outbox: list[dict] = []
        explorer.send = self._send
        explorer.observe(self._trait, names=["what_if", "error"])

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


@pytest.fixture
def bridged(site, open_page):
    root, base = site
    (root / "whatif_bridge.html").write_text(
        BRIDGE_HTML.replace("./live_state.json", "./whatif_state.json")
    )

    def load(explorer):
        bridge = Bridge(explorer)
        (root / "whatif_state.json").write_text(json.dumps(explorer.frontend_state()))
        page = open_page(base)
        page.page.expose_function("etpPyMessage", bridge.message)
        page.page.expose_function("etpPyPoll", bridge.drain)
        page.page.goto(f"{base}/whatif_bridge.html")
        page.page.wait_for_function("window.etpReady === true", timeout=20000)
        page.page.wait_for_function(RENDERED, timeout=30000)
        return page

    return load


def test_what_if_lift_on_a_plain_weight_shows_the_added_relation_and_both_graphs(bridged):
    x = jax.random.normal(jax.random.PRNGKey(1), (3,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # cell.W's plain `@`: what this is about
        explorer = build_explorer(_net(Leaky(plain=True)), x)
    page = bridged(explorer)
    lift_cell_w_and_close(page.page, explorer)
    assert page.page.evaluate("window.etpModel.get('what_if')") is None
    assert page.errors == [], page.errors
    assert page.aborted == [], page.aborted


def test_what_if_offers_exact_rtrl_on_a_gru_gate_and_a_saved_page_says_no_kernel(harness):
    x = jax.random.normal(jax.random.PRNGKey(1), (3,))
    explorer = build_explorer(_net(etp_viz.nn.GRUCell(3, 4)), x)
    page = harness(explorer, "whatif_gru")
    page.page.wait_for_function(RENDERED, timeout=30000)
    page.page.click('[data-weight="cell.Wr.weight"]')
    button = page.page.locator('[data-what-if-offer="cell.Wr.weight"] [data-what-if="exact"]')
    assert button.inner_text() == "exact RTRL" and button.is_enabled()
    button.click()  # the harness has no kernel: the panel says so, the widget lives on
    error = page.page.locator('[data-region="what-if"] [data-what-if-error]')
    error.wait_for(timeout=10000)
    assert "no kernel" in error.inner_text()
    page.page.click('[data-weight="out.weight"]')  # a readout: nothing to offer
    assert page.page.locator("[data-what-if-offer]").count() == 0
    assert page.aborted == []


def lift_cell_w_and_close(p, explorer) -> None:
    """Select ``cell.W``, run its "lift plain ops" offer, check the panel (the relation added,
    none -> exact, the cost, both graphs) and the explorer's result, and close the panel."""
    p.click('[data-weight="cell.W"]')
    offer = p.locator('[data-what-if-offer="cell.W"]')
    assert offer.inner_text().startswith("What if")
    offer.locator('[data-what-if="lift"]').click()
    panel = p.locator('[data-region="what-if"]')
    panel.locator("[data-what-if-changes]").wait_for(timeout=60000)
    changes = panel.locator("[data-what-if-changes]").inner_text()
    assert "relation added: cell.W → cell.h" in changes
    assert "cell.W: none → exact" in changes
    assert "learner state" in panel.locator("[data-what-if-cost]").inner_text()
    assert panel.locator(".etp-whatif-side svg").count() == 2
    assert explorer.what_if["diff"]["relations"]["added"] == [["cell.W", ["cell.h"]]]
    panel.locator("[data-what-if-close]").click()
    assert panel.is_hidden()
