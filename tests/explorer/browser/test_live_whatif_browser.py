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
from .test_whatif_explorer_browser import lift_cell_w_and_close

pytestmark = pytest.mark.browser


def test_a_paused_live_run_offers_what_if_and_shows_the_diff_and_both_graphs(bridged):  # noqa: F811
    explorer = live_of(_net(Leaky(plain=True)))
    page, _ = bridged(explorer)
    p = page.page
    p.click("button[data-live-action=step]")
    wait_status(page, "step 1 ")
    lift_cell_w_and_close(p, explorer)
    # the run goes on from its step
    p.click("button[data-live-action=step]")
    wait_status(page, "step 2 ")
    assert explorer.session.step_count == 2
    assert_clean(page)
