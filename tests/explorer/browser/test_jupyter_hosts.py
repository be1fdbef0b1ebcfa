"""The live explorer inside real Jupyter hosts: JupyterLab 4 and Notebook 7.

Each test writes a notebook (``import etp_viz``, then ``ex = etp_viz.show(model, x, task=...)``
displayed as the last expression) into a temp dir, starts the host as a subprocess on a free
loopback port with a fixed token and its own Jupyter config/data/runtime dirs, opens the
notebook in headless Debian chromium, runs all cells from the host's Run menu, waits for the
graph, clicks the live Step button and waits for the status line and the loss panel to change.
That is the whole real path: the host's ipywidgets manager, anywidget's front end, the comm to
a real kernel, which is this interpreter (a kernelspec written into the temp ``JUPYTER_PATH``;
the first cell prints ``sys.executable`` and the test checks it).

Console errors and uncaught page errors must be empty, except for the host's own errors that
``HOST_NOISE`` lists by message and source (never one that mentions etp, anywidget or widget).
Every request that is not to the loopback server is aborted and counted (must be 0).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import etp_viz

from .conftest import Page

pytestmark = pytest.mark.browser

#: The kernel imports the etp_viz this test imports (it runs in the temp root dir).
PACKAGE_ROOT = str(Path(etp_viz.__file__).resolve().parents[1])
TOKEN = "etp-viz-test-token"
KERNEL = "etp-viz-test-python"
NOTEBOOK = "explore.ipynb"
CELLS = [
    "import sys\nimport warnings\n\nimport etp_viz\n\nprint(sys.executable)",
    'task = etp_viz.tasks.get_task("sine")\n'
    "with warnings.catch_warnings():\n"
    '    warnings.simplefilter("ignore")  # the teaching model compiles with notes\n'
    "    ex = etp_viz.show(\n"
    "        task.suggested_model(), task.example_input(), task=task, steps_per_frame=5\n"
    "    )\n"
    "ex",
]
#: host -> (module run with ``python -m``, the notebook's URL path)
HOSTS = {
    "jupyterlab": ("jupyterlab", f"/lab/tree/{NOTEBOOK}"),
    "notebook7": ("notebook", f"/notebooks/{NOTEBOOK}"),
}
#: Lab settings: no "get notified about Jupyter news?" toast, no update check.
USER_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    }
}
#: ``window.jupyterapp`` (``--expose-app-in-browser``): the notebook's kernel is connected and
#: idle. (The toolbar's execution indicator says "idle" before a kernel exists: running cells
#: then opens the host's "Select Kernel" dialog instead.)
KERNEL_READY = """() => {
  const app = window.jupyterapp;
  const widget = app && app.shell.currentWidget;
  const session = widget && widget.sessionContext && widget.sessionContext.session;
  const kernel = session && session.kernel;
  return Boolean(kernel) && kernel.connectionStatus === "connected" && kernel.status === "idle";
}"""
RENDERED = "document.querySelectorAll('.etp-graph-pane svg g.node').length > 0"
STATUS_HAS = """(text) => {
  const status = document.querySelector("[data-live-status]");
  return Boolean(status) && status.textContent.includes(text);
}"""
LOSS_IMAGE = "() => document.querySelector('canvas[data-live=loss]').toDataURL()"
#: Errors of the hosts themselves, never of the widget: (kind, message, where it was raised).
#: Each was seen with a plain ``1+1`` notebook too. An error mentioning etp, anywidget or a
#: widget (``STRICT``, in its message or source) is never ignored.
HOST_NOISE = [
    # Notebook 7.6's keyboard-shortcut settings plugin (a ``pluginChanged`` handler) throws on
    # page load, before any cell runs, also with every third-party lab extension disabled
    (
        "pageerror",
        re.compile(r"^Cannot read properties of undefined \(reading 'schema'\)$"),
        re.compile(r"^\s*at .*/static/notebook/notebook_core\.[0-9a-f]+\.js"),
    ),
]
STRICT = re.compile(r"etp|anywidget|widget", re.IGNORECASE)


def collect_errors(page) -> list[tuple[str, str, str]]:
    """(kind, message, source) of every console error and uncaught page error; the source is a
    console message's URL or a page error's innermost stack frame."""
    errors: list[tuple[str, str, str]] = []

    def on_console(msg):
        if msg.type == "error":
            errors.append(("console", msg.text, msg.location.get("url", "")))

    def on_pageerror(error):
        frames = [
            line for line in (error.stack or "").splitlines() if line.strip().startswith("at ")
        ]
        errors.append(("pageerror", error.message, frames[0] if frames else ""))

    page.on("console", on_console)
    page.on("pageerror", on_pageerror)
    return errors


def widget_errors(errors: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The errors that are not known host noise."""

    def noise(kind, message, source):
        if STRICT.search(message) or STRICT.search(source):
            return False
        return any(k == kind and m.search(message) and s.search(source) for k, m, s in HOST_NOISE)

    return [error for error in errors if not noise(*error)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_notebook(path: Path, cells: list[str] = CELLS) -> None:
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": KERNEL, "language": "python"}
    nbformat.write(nb, str(path))


def write_jupyter_dirs(tmp: Path) -> dict[str, str]:
    """Isolated Jupyter dirs (no user config, settings or kernels) and their environment.
    The kernelspec runs this interpreter; ``JUPYTER_PATH`` is searched before the venv's."""
    spec = tmp / "jupyter_path" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": KERNEL, "language": "python"})
    )
    settings = tmp / "config" / "lab" / "user-settings"
    for name, value in USER_SETTINGS.items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(json.dumps(value))
    return {
        "JUPYTER_PATH": str(tmp / "jupyter_path"),
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        "JUPYTER_DATA_DIR": str(tmp / "data"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "IPYTHONDIR": str(tmp / "ipython"),
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")])),
    }


def wait_for_server(proc: subprocess.Popen, base: str, log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the Jupyter server exited ({proc.returncode}):\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.25)
    pytest.fail(f"the Jupyter server did not answer in {timeout} s:\n{log.read_text()}")


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group (the server shuts its kernels down), then kill what
    is left of its process tree (kernels run in sessions of their own)."""
    import psutil

    try:
        tree = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    _, alive = psutil.wait_procs(tree, timeout=5)
    for child in alive:
        child.kill()


@pytest.fixture
def jupyter_host(tmp_path):
    """jupyter_host(host) -> (base URL, notebook URL) of a running host serving the notebook;
    the server and its kernels are stopped at teardown."""
    procs: list[subprocess.Popen] = []

    def start(host: str, cells: list[str] = CELLS) -> tuple[str, str]:
        module, notebook_path = HOSTS[host]
        pytest.importorskip(module, reason=f"{module} is not installed (pip install {module})")
        root = tmp_path / "root"
        root.mkdir()
        write_notebook(root / NOTEBOOK, cells)
        env = dict(os.environ, **write_jupyter_dirs(tmp_path))
        port = free_port()
        cmd = [
            sys.executable,
            "-m",
            module,
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--port-retries=0",
            f"--IdentityProvider.token={TOKEN}",
            f"--ServerApp.root_dir={root}",
            "--expose-app-in-browser",
            "--LabApp.news_url=None",
            "--LabApp.extension_manager=readonly",
        ]
        if os.geteuid() == 0:
            cmd.append("--allow-root")
        log = tmp_path / "server.log"
        with log.open("w") as out:
            procs.append(
                subprocess.Popen(
                    cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                )
            )
        base = f"http://127.0.0.1:{port}"
        wait_for_server(procs[-1], base, log)
        return base, f"{base}{notebook_path}?token={TOKEN}"

    yield start
    for proc in procs:
        stop_server(proc)


def run_all_cells(p, url: str, rendered_timeout: int = 60000) -> None:
    """Open the notebook at ``url``, wait for its kernel, run every cell (the host's Run menu)
    and wait for the explorer to render."""
    p.goto(url)
    p.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=60000)
    p.wait_for_function(KERNEL_READY, timeout=60000)
    p.get_by_role("menuitem", name="Run", exact=True).click()
    p.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    p.wait_for_function(RENDERED, timeout=rendered_timeout)


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_live_step_in_a_real_jupyter_host(host, jupyter_host, browser, tmp_path):
    base, url = jupyter_host(host)
    page = Page(browser, base)
    p = page.page
    errors = collect_errors(p)
    try:
        run_all_cells(p, url)
        first_output = p.locator(".jp-Cell").first.locator(".jp-OutputArea-output")
        assert first_output.inner_text().strip() == sys.executable

        p.wait_for_function(STATUS_HAS, arg="step 0 ", timeout=20000)
        loss_before = p.evaluate(LOSS_IMAGE)
        p.locator("button[data-live-action='step']").click()
        p.wait_for_function(STATUS_HAS, arg="step 1 ", timeout=30000)
        p.wait_for_function(f"(before) => ({LOSS_IMAGE})() !== before", arg=loss_before)
        assert p.locator("[data-live-error]").is_hidden()

        assert widget_errors(errors) == [], errors
        assert page.aborted == [], f"non-loopback requests: {page.aborted}"
    except BaseException as error:
        shot = tmp_path / f"{host}.png"
        p.screenshot(path=str(shot), full_page=True)
        error.add_note(f"screenshot: {shot}; console/page errors: {errors}")
        raise
    finally:
        page.close()


#: A 16-layer GRU stack (394 KB of view model: the page gets its shell, then parts)
STACK_CELLS = [
    CELLS[0],
    "import brainstate\nimport jax.numpy as jnp\n\nimport etp_viz.nn as enn\n\n\n"
    "class GRUStack(brainstate.nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.layers = [enn.GRUCell(8, 8) for _ in range(16)]\n"
    "        self.out = enn.Linear(8, 2)\n\n"
    "    def update(self, x):\n"
    "        for layer in self.layers:\n"
    "            x = layer(x)\n"
    "        return self.out(x)\n\n\n"
    "model = GRUStack()\nbrainstate.nn.init_all_states(model)\n"
    "with warnings.catch_warnings():\n"
    '    warnings.simplefilter("ignore")\n'
    "    ex = etp_viz.Explorer(etp_viz.compile_etrace_graph(model, jnp.zeros(8)))\n"
    "ex",
]
APP = "document.querySelector('.etp-explorer').parentElement.etpExplorer"
#: the id of the weight op of ``path`` once it is drawn, else null
DRAWN_WEIGHT_OP = f"""(path) => {{
  const app = {APP};
  const nodes = app.index ? [...app.index.nodes.values()] : [];
  const node = nodes.find((n) => n.etp && n.weight_path === path);
  const dot = node && app.graph && app.graph.nodeToDot.get(node.id);
  return dot && dot.startsWith("n") && document.getElementById(dot) ? node.id : null;
}}"""


def test_parts_of_a_deep_stack_come_over_the_comm(jupyter_host, browser, tmp_path):
    """JupyterLab and a real kernel: the page holds the shell; opening a box draws its nodes
    once their part came back over the comm, and a clicked weight's card gets its text."""
    base, url = jupyter_host("jupyterlab", STACK_CELLS)
    page = Page(browser, base)
    p = page.page
    errors = collect_errors(p)
    try:
        run_all_cells(p, url, rendered_timeout=120000)
        assert p.evaluate(f"Boolean(({APP}).model.get('view_shell').parts)")
        assert p.evaluate(f"({APP}).model.get('view_model')") is None  # not synced
        assert p.evaluate(DRAWN_WEIGHT_OP, "layers.3.Wz.weight") is None
        p.evaluate(
            f"""() => {{ const app = {APP}; const dot = app.graph.clusterToDot.get("cell:layers.3");
              const click = new MouseEvent("click", {{bubbles: true}});
              document.getElementById(dot).dispatchEvent(click);
            }}"""
        )
        p.wait_for_function(DRAWN_WEIGHT_OP, arg="layers.3.Wz.weight", timeout=60000)
        node = p.evaluate(DRAWN_WEIGHT_OP, "layers.3.Wz.weight")
        record = p.evaluate(f"(id) => ({APP}).index.nodes.get(id)", node)
        assert record["out_avals"] and record["source"], record

        path = "layers.0.Wr.weight"
        p.locator(f"[data-panel-body=weights] [data-weight='{path}']").click()
        summary = p.locator(f"[data-panel-body=inspector] [data-summary='{path}']")
        summary.wait_for(timeout=30000)
        assert summary.inner_text().strip()
        assert widget_errors(errors) == [], errors
        assert page.aborted == [], f"non-loopback requests: {page.aborted}"
    except BaseException as error:
        shot = tmp_path / "parts.png"
        p.screenshot(path=str(shot), full_page=True)
        error.add_note(f"screenshot: {shot}; console/page errors: {errors}")
        raise
    finally:
        page.close()
