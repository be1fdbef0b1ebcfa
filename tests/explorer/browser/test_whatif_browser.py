"""``etp_viz.what_if``'s notebook view in Chromium: the two graphs side by side, the lifted
weight highlighted on the side where it gained its relation, the change listed above them,
offline (no request), no page error."""

from __future__ import annotations

import jax
import pytest

import etp_viz
from tests.test_whatif import Leaky, _net

pytestmark = pytest.mark.browser

HIGHLIGHT = "#e8710a"  # etp_viz.view.palette COLOURS["hl_path"]


def test_what_if_draws_both_graphs_and_marks_the_changed_weight(open_page, tmp_path):
    xs = jax.random.normal(jax.random.PRNGKey(1), (4, 3))
    result = etp_viz.what_if(_net(Leaky(plain=True)), xs[0], change="lift", measure=False)
    html = tmp_path / "whatif.html"
    html.write_text(f"<!doctype html><html><body>{result.html()}</body></html>")
    page = open_page(None)
    page.page.goto(html.as_uri())
    sides = page.page.locator(".etp-whatif-side")
    assert sides.count() == 2
    assert (
        page.page.locator(".etp-whatif li.added").inner_text() == "relation added: cell.W → cell.h"
    )
    marked = page.page.evaluate(
        """(colour) => [...document.querySelectorAll('.etp-whatif-side')].map(side =>
             [...side.querySelectorAll('g.node')].filter(g => [...g.querySelectorAll(
               'polygon, ellipse, path')].some(s => s.getAttribute('stroke') === colour))
             .map(g => g.querySelector('title')?.textContent || g.id))""",
        HIGHLIGHT,
    )
    drawn = page.page.evaluate("document.querySelectorAll('.etp-whatif-side svg').length")
    assert drawn == 2
    before, after = marked
    assert after, "the lifted weight's op is not highlighted on the after side"
    assert len(after) >= len(before)
    assert not page.errors and not page.aborted
