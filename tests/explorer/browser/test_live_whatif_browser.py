""" "What if…" in the live explorer, in Chromium, answered by a real Python ``LiveExplorer``.

The bridge page of ``test_live_browser`` forwards the page's requests. After a few steps,
select the weight a plain ``x @ W`` keeps from being learned, click "What if… lift plain ops"
in the inspector: the result panel lists the relation the lift adds and the claim it changes,
the cost before and after, and draws the two graphs side by side, as in the static explorer;
the run then goes on from its step.
"""

from __future__ import annotations

import pytest

from tests.explorer.test_live_whatif import live_of
from tests.test_whatif import Leaky, _net

from .test_live_browser import assert_clean, bridged, wait_status  # noqa: F401

pytestmark = pytest.mark.browser


def test_a_paused_live_run_offers_what_if_and_shows_the_diff_and_both_graphs(bridged):  # noqa: F811
    explorer = live_of(_net(Leaky(plain=True)))
    page, _ = bridged(explorer)
    p = page.page
    p.click("button[data-live-action=step]")
    wait_status(page, "step 1 ")
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
    # the run goes on from its step
    p.click("button[data-live-action=step]")
    wait_status(page, "step 2 ")
    assert explorer.session.step_count == 2
    assert_clean(page)
