"""Browser tier: Debian chromium driven by Playwright on a static harness page.

The harness loads the real ESM bundle (what anywidget loads) with a mock anywidget model fed
``Explorer(...).frontend_state()``. Every request that is not to the loopback harness server is
aborted and counted; tests assert the count is 0. Chromium is never downloaded: tests skip
with a reason when the ``chromium`` executable is missing.
"""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import threading
from pathlib import Path

import pytest

from etp_viz.explorer.bundle import BUNDLE
from etp_viz.explorer.export import MOCK_MODEL_JS
from etp_viz.explorer.widget import Explorer

from .real_view_models import real_view_model

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
HARNESS = (
    """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>etp_viz harness</title></head>
<body style="margin:0;padding:8px">
<div id="root"></div>
<script>"""
    + MOCK_MODEL_JS
    + """</script>
<script type="module">
import widget from "./widget.js";
const name = new URLSearchParams(location.search).get("state");
const state = await (await fetch(`./${name}`)).json();
window.etpModel = etpCreateModel(state);
window.etpEl = document.getElementById("root");
window.etpCleanup = widget.render({ model: window.etpModel, el: window.etpEl });
window.etpReady = true;
</script>
</body></html>
"""
)


def load_real(name: str) -> dict:
    """A fresh copy of a real view model (tests/explorer/browser/real_view_models.py)."""
    return json.loads(json.dumps(real_view_model(name)))


@pytest.fixture(scope="module")
def stacked_state():
    """The front-end state of the real 2,000-equation stack (pan / zoom, incremental layout)."""
    return Explorer(load_real("stacked_2000")).frontend_state()


def chromium_path() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.skip("Debian chromium is not installed (scripts/setup.sh installs it as root)")
    return path


@pytest.fixture(scope="session")
def bundle() -> Path:
    if not BUNDLE.is_file():
        pytest.fail(f"{BUNDLE} is missing: run scripts/setup.sh (builds js/ with npm)")
    return BUNDLE


@pytest.fixture(scope="session")
def site(tmp_path_factory, bundle):
    """A loopback HTTP server over a temp dir holding the harness and the bundle."""
    root = tmp_path_factory.mktemp("harness")
    (root / "harness.html").write_text(HARNESS)
    shutil.copy(bundle, root / "widget.js")
    handler = functools.partial(QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def browser_type_launch_args() -> dict:
    """pytest-playwright (used by pytest-ipywidgets) launches Debian chromium: never a
    downloaded browser."""
    return {"executable_path": chromium_path(), "args": CHROMIUM_ARGS, "headless": True}


@pytest.fixture(scope="session")
def browser(request, browser_type_launch_args):
    """The session's Chromium. The Playwright driver is pytest-playwright's when that plugin
    is installed (one driver per process, shared with the solara comm tests)."""
    pytest.importorskip("playwright.sync_api")
    try:
        playwright = request.getfixturevalue("playwright")
    except pytest.FixtureLookupError:
        playwright = None
    if playwright is not None:
        browser = playwright.chromium.launch(**browser_type_launch_args)
        yield browser
        browser.close()
        return
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(**browser_type_launch_args)
        yield browser
        browser.close()


class Page:
    """A page with network policing and error collection."""

    def __init__(self, browser, allowed_prefix: str | None):
        self.context = browser.new_context(
            viewport={"width": 1200, "height": 800}, service_workers="block"
        )
        self.aborted: list[str] = []
        self.errors: list[str] = []
        self.context.route("**/*", self._route)
        self.allowed_prefix = allowed_prefix
        self.page = self.context.new_page()
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on(
            "console",
            lambda msg: self.errors.append(msg.text) if msg.type == "error" else None,
        )

    def _route(self, route):
        url = route.request.url
        if self.allowed_prefix and url.startswith(self.allowed_prefix + "/"):
            route.continue_()
        elif url.startswith(("file://", "data:", "blob:")) and self.allowed_prefix is None:
            route.continue_()
        else:
            self.aborted.append(url)
            route.abort()

    def close(self):
        self.context.close()


@pytest.fixture
def open_page(browser):
    pages = []

    def make(allowed_prefix):
        page = Page(browser, allowed_prefix)
        pages.append(page)
        return page

    yield make
    for page in pages:
        page.close()


@pytest.fixture
def harness(site, open_page):
    """harness(state_or_explorer, name) -> Page with the widget rendered."""
    root, base = site

    def load(state, name="state"):
        if isinstance(state, Explorer):
            state = state.frontend_state()
        (root / f"{name}.json").write_text(json.dumps(state))
        page = open_page(base)
        page.page.goto(f"{base}/harness.html?state={name}.json")
        page.page.wait_for_function("window.etpReady === true", timeout=20000)
        return page

    return load
