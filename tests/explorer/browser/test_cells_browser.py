"""The cell-level first view in headless Chromium (issue 41): a brainstate LSTMCell under a
Linear readout, shown with ``lift=True``, is drawn as one node named ``cell (LSTMCell)`` with
its weight as a port and its hidden states inside; a click opens its equations."""

from __future__ import annotations

import brainstate
import jax.numpy as jnp
import pytest

import etp_viz
from etp_viz.explorer.widget import Explorer

from .test_explorer_browser import assert_clean, drawn_vm_ids, wait_rendered

pytestmark = pytest.mark.browser


class Net(brainstate.nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = brainstate.nn.LSTMCell(3, 8)
        self.out = brainstate.nn.Linear(8, 2)

    def update(self, x):
        return self.out(self.cell(x))


@pytest.fixture(scope="module")
def lstm_explorer():
    model = Net()
    brainstate.nn.init_all_states(model)
    return etp_viz.show(model, jnp.zeros(3), lift=True)


def drawn_texts(page):
    return page.page.evaluate(
        "[...document.querySelectorAll('svg.etp-graph g.node')].map((g) => g.textContent)"
    )


def test_a_brainstate_lstm_is_drawn_as_its_cell_and_opens_on_click(harness, lstm_explorer):
    assert isinstance(lstm_explorer, Explorer)
    page = harness(lstm_explorer, "cell_lstm")
    wait_rendered(page)
    drawn = set(drawn_vm_ids(page))
    assert "cell:cell" in drawn
    texts = " | ".join(drawn_texts(page))
    assert "cell (LSTMCell)" in texts and "h, c" in texts, texts
    for primitive in ("concatenate", "split", "logistic", "custom_jvp_call", "slice"):
        assert primitive not in texts, texts
    # the weight is a port of the record node
    cell = page.page.evaluate("window.etpEl.etpExplorer.graph.clusterToDot.get('cell:cell')")
    assert cell.startswith("k")
    port_text = page.page.text_content(f"g#{cell}")
    assert "W" in port_text
    # the legend explains the folded cell
    assert page.page.query_selector(".etp-legend [data-key='cell']") is not None
    # a click opens its equations
    before = page.page.evaluate("document.querySelectorAll('svg.etp-graph g.node').length")
    page.page.click(f"g#{cell}")
    page.page.wait_for_function(
        f"document.querySelectorAll('svg.etp-graph g.node').length > {before}"
    )
    assert page.page.evaluate("window.etpModel.state.expanded") == ["cell:cell"]
    opened = " | ".join(drawn_texts(page))
    assert "logistic" in opened and "etp_mv" in opened, opened
    assert "cell:cell" in set(drawn_vm_ids(page))  # the opened cell's box, with its title
    inspector = page.page.text_content("[data-panel-body='inspector']")
    assert "LSTMCell" in inspector and "cell.W.weight" in inspector, inspector
    # and folds again from the inspector
    assert page.page.text_content("[data-panel-body='inspector'] button") == "Collapse"
    page.page.click("[data-panel-body='inspector'] button")
    page.page.wait_for_function(
        f"document.querySelectorAll('svg.etp-graph g.node').length === {before}"
    )
    assert_clean(page)


class GRUNet(brainstate.nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = brainstate.nn.GRUCell(3, 8)
        self.out = brainstate.nn.Linear(8, 2)

    def update(self, x):
        return self.out(self.cell(x))


def test_a_fused_gate_weight_shows_its_claim_per_block(harness):
    """brainstate's GRUCell.Wrz holds the reset and update gates: the inspector gives each
    block of columns its own claim, the reset gate's with the reason it is not learned."""
    model = GRUNet()
    brainstate.nn.init_all_states(model)
    page = harness(etp_viz.show(model, jnp.zeros(3), lift=True), "cell_gru_blocks")
    wait_rendered(page)
    page.page.click("[data-weight='cell.Wrz.weight']")
    page.page.wait_for_selector("[data-panel-body='inspector'] [data-block]")
    blocks = page.page.evaluate(
        "[...document.querySelectorAll(\"[data-panel-body='inspector'] [data-block]\")]"
        ".map((e) => [e.dataset.block, e.dataset.claim, e.textContent])"
    )
    assert [(b[0], b[1]) for b in blocks] == [
        ("columns 0-7 (r)", "none"),
        ("columns 8-15 (z)", "approximate"),
    ], blocks
    assert "only through cell.Wh.weight" in blocks[0][2], blocks
    assert_clean(page)
