"""The explorer's text ``scale`` trait and ``theme`` option (projector and dark theme, issue 28)."""

from __future__ import annotations

import pytest

from etp_viz.explorer.export import render_html
from etp_viz.explorer.widget import Explorer
from etp_viz.view.types import SCHEMA_VERSION

EMPTY = {"schema": SCHEMA_VERSION, "title": "t", "nodes": [], "edges": []}


def test_scale_is_a_trait_in_the_saved_state_not_an_option():
    explorer = Explorer(view_model=EMPTY, scale=1.5, theme="dark", height=900)
    assert explorer.scale == 1.5 and "scale" not in explorer.options
    assert explorer.options["theme"] == "dark" and explorer.options["height"] == 900
    state = explorer.frontend_state()
    assert state["scale"] == 1.5
    assert '"scale": 1.5' in render_html(state, "/* bundle */")
    assert Explorer(view_model=EMPTY).scale == 1.0


@pytest.mark.parametrize("scale", [0.2, 4, "big", True, None])
def test_a_bad_scale_says_what_to_pass(scale):
    with pytest.raises(ValueError, match=r"scale must be a number from 0.5 to 3.0 .*projector"):
        Explorer(view_model=EMPTY, scale=scale)


def test_a_bad_theme_names_the_valid_ones():
    with pytest.raises(ValueError, match="theme must be 'auto', 'light' or 'dark'"):
        Explorer(view_model=EMPTY, theme="sepia")
