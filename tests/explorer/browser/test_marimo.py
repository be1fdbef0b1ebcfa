"""The live explorer in marimo: ``notebooks/marimo/quickstart.py`` served by ``marimo run``.

The test copies the example notebook into a temp dir, starts ``marimo run`` (the app view a
course hands to students: code hidden, cells run on load) as a subprocess on a free loopback
port with its own config dir, opens it in headless Debian chromium and waits for the graph,
then clicks the live Step button and waits for the status line and the loss canvas to change.
That is marimo's own anywidget host (``mo.ui.anywidget``), its websocket to the kernel, the
custom messages of the live requests and their binary buffers.

Console errors and uncaught page errors must be empty, except for ``HOST_NOISE`` (never one
that mentions etp, anywidget or widget). Every request that is not to the loopback server is
aborted and counted (must be 0).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from .conftest import Page
from .test_jupyter_hosts import PACKAGE_ROOT, collect_errors, free_port, stop_server

pytestmark = pytest.mark.browser

EXAMPLE = Path(__file__).resolve().parents[3] / "notebooks" / "marimo" / "quickstart.py"
STRICT = re.compile(r"etp|anywidget|widget", re.IGNORECASE)
#: Errors of the host or of this test's browser context, never of the widget.
HOST_NOISE = [
    # marimo's page registers a service worker; the test's browser context blocks service
    # workers (conftest.Page), and marimo logs the refusal as an error
    (
        "console",
        re.compile(r"^Error registering service worker: "),
        re.compile(r"^http://127\.0\.0\.1:\d+/"),
    ),
]


def widget_errors(errors: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    def noise(kind, message, source):
        if STRICT.search(message) or STRICT.search(source):
            return False
        return any(k == kind and m.search(message) and s.search(source) for k, m, s in HOST_NOISE)

    return [error for error in errors if not noise(*error)]


def wait_for_http(proc: subprocess.Popen, url: str, log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the server exited ({proc.returncode}):\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.25)
    pytest.fail(f"the server did not answer in {timeout} s:\n{log.read_text()}")


@pytest.fixture
def marimo_app(tmp_path):
    """The base URL of ``marimo run`` serving a copy of the example; stopped at teardown."""
    pytest.importorskip("marimo", reason="marimo is not installed (it is in the test extra)")
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(EXAMPLE, root / EXAMPLE.name)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")])),
        JAX_PLATFORMS="cpu",
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        MARIMO_SKIP_UPDATE_CHECK="1",
    )
    port = free_port()
    cmd = [sys.executable, "-m", "marimo", "run", EXAMPLE.name, "--headless"]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--no-token", "--no-skew-protection"]
    log = tmp_path / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(proc, f"{base}/", log)
        yield base
    finally:
        stop_server(proc)


def test_live_step_in_marimo(marimo_app, browser, tmp_path):
    page = Page(browser, marimo_app)
    p = page.page
    errors = collect_errors(p)
    try:
        p.goto(f"{marimo_app}/")
        # the widget renders inside marimo's output (locators pierce its shadow roots)
        p.locator(".etp-graph-pane svg g.node").first.wait_for(timeout=120000)
        status = p.locator("[data-live-status]").first
        loss = p.locator("canvas[data-live=loss]").first
        deadline = time.monotonic() + 30
        while "step 0 " not in status.inner_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "step 0 " in status.inner_text(), status.inner_text()
        loss_before = loss.evaluate("c => c.toDataURL()")
        p.locator("button[data-live-action='step']").first.click()
        deadline = time.monotonic() + 30
        while "step 1 " not in status.inner_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "step 1 " in status.inner_text(), status.inner_text()
        deadline = time.monotonic() + 10
        while loss.evaluate("c => c.toDataURL()") == loss_before and time.monotonic() < deadline:
            time.sleep(0.2)
        assert loss.evaluate("c => c.toDataURL()") != loss_before, "the loss canvas did not move"
        assert p.locator("[data-live-error]").first.is_hidden()

        assert widget_errors(errors) == [], errors
        assert page.aborted == [], f"non-loopback requests: {page.aborted}"
    except BaseException as error:
        shot = tmp_path / "marimo.png"
        p.screenshot(path=str(shot), full_page=True)
        error.add_note(f"screenshot: {shot}; console/page errors: {errors}")
        raise
    finally:
        page.close()
