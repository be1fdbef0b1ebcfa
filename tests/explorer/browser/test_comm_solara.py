"""One real comm round trip in a browser: the widget displayed by a solara server (what
``pytest-ipywidgets`` runs: solara 1.58.2 + solara-assets 1.58.2, served offline), driven by
Playwright in Debian chromium. A click in the page reaches ``explorer.selected`` in Python
through the websocket, and ``explorer.highlight_weight(...)`` in Python changes the page.
Every request that is not to the loopback solara server is aborted and counted (must be 0).
"""

from __future__ import annotations

import time
import urllib.parse

import pytest

from etp_viz.explorer.widget import Explorer

from .conftest import load_real

pytestmark = pytest.mark.browser
pytest.importorskip("solara.test.pytest_plugin", reason="pytest-ipywidgets (solara) not installed")

LOOPBACK = {"localhost", "127.0.0.1", "::1", "[::1]"}
LOCAL_SCHEMES = {"data", "blob", "about"}


@pytest.fixture
def offline_page(page_session):
    """The plugin's session page with every non-loopback request aborted and recorded, on
    before the solara page loads (see ``solara_page``)."""
    aborted: list[str] = []
    allowed: list[str] = []
    errors: list[str] = []

    def police(route):
        url = urllib.parse.urlsplit(route.request.url)
        if url.scheme in LOCAL_SCHEMES or url.hostname in LOOPBACK:
            allowed.append(route.request.url)
            route.continue_()
        else:
            aborted.append(route.request.url)
            route.abort()

    page_session.route("**/*", police)
    page_session.on("pageerror", lambda error: errors.append(str(error)))
    yield page_session, aborted, allowed, errors, police


@pytest.fixture
def solara_page(offline_page, solara_test):
    """The widget's test output in a solara page (pytest-ipywidgets' ``solara_test``).
    The route is removed before ``solara_test`` navigates away: an intercepted unload beacon
    (solara's page-close call) never reaches the server, and the plugin then waits in vain
    for the kernel to close."""
    page, aborted, allowed, errors, police = offline_page
    yield page, aborted, allowed, errors
    page.unroute("**/*", police)


def wait_for_python(predicate, timeout=20.0):
    """Poll a Python-side condition (comm messages are handled on the server's threads)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_click_reaches_python_and_python_highlight_reaches_page(solara_page):
    from IPython.display import display

    page, aborted, allowed, errors = solara_page
    explorer = Explorer(load_real("gru"))
    display(explorer)
    page.locator(".etp-graph-pane svg g.node").first.wait_for(timeout=30000)

    # JS -> Python: a click on a weight row sets `selected` on the Python object
    page.locator("[data-weight='Wr.weight']").click()
    assert wait_for_python(lambda: explorer.selected == {"kind": "weight", "id": "Wr.weight"}), (
        explorer.selected
    )
    assert explorer.highlight == {"kind": "weight", "id": "Wr.weight"}

    # Python -> JS: highlight_weight() changes the page (row marked, path drawn)
    explorer.highlight_weight("Wh.weight")
    page.locator("[data-weight='Wh.weight'].active").wait_for(timeout=20000)
    page.wait_for_function(
        "document.querySelectorAll('svg.etp-graph g.hl-path, svg.etp-graph g.hl-selected')"
        ".length > 0",
        timeout=20000,
    )
    assert page.locator("[data-weight='Wr.weight'].active").count() == 0

    # and back again: a click on a graph node selects it in Python
    page.locator("[data-action='fit']").click()
    page.locator("svg.etp-graph g.node").first.click()
    assert wait_for_python(lambda: explorer.selected.get("kind") in {"node", "cluster"})

    assert errors == [], errors
    assert aborted == [], f"non-loopback requests: {aborted}"
    assert any("/_solara/" in url for url in allowed), "the policing route saw no requests"
