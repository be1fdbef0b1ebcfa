"""The live explorer in Voilà: a lesson notebook served as an app for students.

The test copies :data:`LESSON` into a temp dir (its kernelspec pointed at this interpreter,
as in the JupyterLab test: a kernelspec in a temp ``JUPYTER_PATH``), starts ``voila`` on a
free loopback port with a fixed token and its own Jupyter dirs, opens the page in headless
Debian chromium and waits until Voilà has run every cell (the page's load event: Voilà streams
the page while it executes). Then the first live explorer must show its graph, and its Step
button must move the step count and the loss canvas: Voilà's widget manager, anywidget's
front end and the comm to a real kernel.

Console errors and uncaught page errors must be empty, except for ``HOST_NOISE`` (Voilà's
own, never one that mentions etp, anywidget or widget). Every request that is not to the
loopback server is aborted and counted: only ``HOST_REQUESTS`` (Voilà's template asks a CDN
for Font Awesome) may be among them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import Page
from .test_jupyter_hosts import (
    KERNEL,
    TOKEN,
    collect_errors,
    free_port,
    stop_server,
    write_jupyter_dirs,
)
from .test_marimo import wait_for_http

# about 1-2 minutes (Voilà runs the whole notebook): the Makefile's 3.12 leg leaves the browser
# tests to the 3.11 leg (the widget path does not depend on the jax stack), so it runs once
pytestmark = pytest.mark.browser

#: The lesson a course serves with Voilà (the teaching notebook; one constant to switch).
LESSON = Path(__file__).resolve().parents[3] / "notebooks" / "01-quickstart.ipynb"
STRICT = re.compile(r"etp|anywidget|widget", re.IGNORECASE)
#: Requests Voilà's page makes off the loopback server (aborted, never fetched).
HOST_REQUESTS = re.compile(r"^https://cdn\.jsdelivr\.net/npm/@fortawesome/fontawesome-free@")
#: Voilà's own errors: (kind, message, source).
HOST_NOISE = [
    # the aborted Font Awesome stylesheets of HOST_REQUESTS
    ("console", re.compile(r"^Failed to load resource: net::ERR_FAILED$"), HOST_REQUESTS),
    # Voilà 0.5.13 loading Notebook 7.6's lab extension, whose module federation asks for a
    # shared @jupyterlab/docregistry that Voilà does not provide; every frame of its stack is
    # Voilà's extension loader. Bisected on notebook 01: it comes with the lesson's two
    # matplotlib plot cells (not with the lesson without them, a 1+1 notebook, an IntSlider,
    # a bare anywidget, or a static or live etp_viz explorer alone); the explorer works after
    (
        "console",
        re.compile(
            r"^Error: The getter for the shared module is not a function\..*"
            r"@jupyterlab/docregistry.*@jupyter-notebook/lab-extension/static/remoteEntry",
            re.DOTALL,
        ),
        re.compile(r"^http://127\.0\.0\.1:\d+/"),
    ),
]
STEP = re.compile(r"step (\d+) ")


def widget_errors(errors: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    def noise(kind, message, source):
        # the page's own URL carries the token ("etp-viz-test-token"): not a widget source
        if STRICT.search(message) or STRICT.search(source.split("?", 1)[0]):
            return False
        return any(k == kind and m.search(message) and s.search(source) for k, m, s in HOST_NOISE)

    return [error for error in errors if not noise(*error)]


@pytest.fixture
def voila_app(tmp_path):
    """The URL of Voilà serving a copy of :data:`LESSON`; stopped at teardown."""
    pytest.importorskip("voila", reason="voila is not installed (it is in the test extra)")
    nbformat = pytest.importorskip("nbformat")
    root = tmp_path / "root"
    root.mkdir()
    notebook = nbformat.read(LESSON, as_version=4)
    notebook.metadata["kernelspec"] = {"name": KERNEL, "display_name": KERNEL, "language": "python"}
    nbformat.write(notebook, str(root / LESSON.name))
    env = dict(os.environ, **write_jupyter_dirs(tmp_path))
    port = free_port()
    cmd = [sys.executable, "-m", "voila", LESSON.name, "--no-browser", f"--port={port}"]
    cmd += ["--Voila.ip=127.0.0.1", "--Voila.port_retries=0", f"--token={TOKEN}"]
    log = tmp_path / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(proc, f"{base}/voila/static/voila.js", log)
        yield base, f"{base}/?token={TOKEN}"
    finally:
        stop_server(proc)


def test_live_step_in_voila(voila_app, browser, tmp_path):
    base, url = voila_app
    page = Page(browser, base)
    p = page.page
    errors = collect_errors(p)
    try:
        # Voilà streams the page while it runs the cells: "load" comes when all have run
        p.goto(url, wait_until="commit")
        p.wait_for_load_state("load", timeout=240000)
        p.locator(".etp-graph-pane svg g.node").first.wait_for(timeout=60000)
        status = p.locator("[data-live-status]").first
        status.wait_for(timeout=30000)
        before = int(STEP.search(status.inner_text()).group(1))
        loss = p.locator("canvas[data-live=loss]").first
        loss_before = loss.evaluate("c => c.toDataURL()")
        p.locator("button[data-live-action='step']").first.click()
        after = f"step {before + 1} "
        deadline = time.monotonic() + 30
        while after not in status.inner_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert after in status.inner_text(), status.inner_text()
        deadline = time.monotonic() + 10
        while loss.evaluate("c => c.toDataURL()") == loss_before and time.monotonic() < deadline:
            time.sleep(0.2)
        assert loss.evaluate("c => c.toDataURL()") != loss_before, "the loss canvas did not move"
        assert p.locator("[data-live-error]").first.is_hidden()

        assert widget_errors(errors) == [], errors
        unexpected = [u for u in page.aborted if not HOST_REQUESTS.search(u)]
        assert unexpected == [], f"non-loopback requests: {unexpected}"
    except BaseException as error:
        shot = tmp_path / "voila.png"
        p.screenshot(path=str(shot), full_page=True)
        error.add_note(f"screenshot: {shot}; console/page errors: {errors}")
        raise
    finally:
        page.close()
