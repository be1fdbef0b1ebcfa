"""The view model in parts, in headless Chromium: a page that holds only the shell of a deep
GRU stack asks Python for a box's records when the box opens, and for a weight's card when it
is clicked.

The page's model is the harness's mock (conftest ``MOCK_MODEL_JS``) fed the synced traits only
(no ``view_parts``: what a kernel-backed page holds); its ``send`` posts each custom message to
this test's loopback server, which answers with ``Explorer._answer`` (the widget's own request
handler) and delivers the reply as a ``msg:custom`` event after ``DELAY_MS``, so the loading
state can be seen.
"""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import threading

import pytest

from etp_viz.explorer.widget import Explorer
from tests.explorer.test_parts import view_model

from .conftest import HARNESS, QuietHandler
from .test_explorer_browser import assert_clean, wait_rendered

pytestmark = pytest.mark.browser
DELAY_MS = 600
#: the harness, with the mock model's send() going to Python through /request
BRIDGE = """
<script>
window.etpBridge = (model) => {
  model.send = (content) => {
    model.sent.push(content);
    fetch("./request", { method: "POST", body: JSON.stringify(content) })
      .then((r) => r.json())
      .then((reply) => setTimeout(() => model.emit("msg:custom", reply, []), DELAY_MS));
  };
  return model;
};
</script>
""".replace("DELAY_MS", str(DELAY_MS))


class BridgeHandler(QuietHandler):
    """Static files, and POST /request: a custom message answered by the explorer."""

    explorer: Explorer
    requests: list

    def do_POST(self):  # noqa: N802 - http.server's name
        content = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append(content)
        reply = self.explorer._answer(content) if content.get("type") == "request" else {}
        body = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def kernel_page(tmp_path, bundle, open_page):
    """(page, explorer, requests): the 16-layer stack's shell on a page whose requests reach
    the Explorer."""
    vm = view_model("stack16")
    explorer = Explorer(vm)
    assert explorer.view_shell.get("parts"), "the 16-layer stack is sent in parts"
    state = {k: v for k, v in explorer.frontend_state().items() if k != "view_parts"}
    (tmp_path / "state.json").write_text(json.dumps(state))
    page_text = HARNESS.replace(
        "window.etpModel = etpCreateModel(state);",
        "window.etpModel = window.etpBridge(etpCreateModel(state));",
    ).replace('<div id="root"></div>', '<div id="root"></div>' + BRIDGE)
    (tmp_path / "harness.html").write_text(page_text)
    shutil.copy(bundle, tmp_path / "widget.js")
    requests: list = []
    handler = type("Handler", (BridgeHandler,), {"explorer": explorer, "requests": requests})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(tmp_path))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    page = open_page(base)
    page.page.goto(f"{base}/harness.html?state=state.json")
    page.page.wait_for_function("window.etpReady === true", timeout=20000)
    yield page, explorer, requests
    server.shutdown()


def part_requests(requests: list) -> list[dict]:
    return [r["params"] for r in requests if r.get("method") == "view_part"]


def test_a_box_draws_its_nodes_once_its_part_arrives(kernel_page):
    page, explorer, requests = kernel_page
    wait_rendered(page, timeout=60000)
    # the folded first view: the top of the graph asked for, no box's records
    assert [p["box"] for p in part_requests(requests)] == [None]
    box = "cell:layers.3"
    weight_op = next(
        n["id"]
        for n in explorer.view_model["nodes"]
        if n.get("etp") and n.get("weight_path") == "layers.3.Wz.weight"
    )
    page.page.evaluate(
        """(box) => { const app = window.etpEl.etpExplorer;
          const dot = app.graph.clusterToDot.get(box);
          const click = new MouseEvent('click', {bubbles: true});
          document.getElementById(dot).dispatchEvent(click); }""",
        box,
    )
    # while the part is on its way the box says so
    page.page.wait_for_selector(f".etp-explorer[data-part-loading='{box}']", timeout=5000)
    assert page.page.evaluate("document.querySelectorAll('g[data-part-loading]').length") == 1
    page.page.wait_for_function(
        """(id) => { const app = window.etpEl.etpExplorer; if (!app.graph) return false;
          const dot = app.graph.nodeToDot.get(id);
          return !!dot && dot.startsWith('n') && !!document.getElementById(dot); }""",
        arg=weight_op,
        timeout=30000,
    )
    asked = part_requests(requests)[-1]
    assert asked["box"] == box and weight_op in asked["nodes"]
    assert "layers.3.Wz.weight" in asked["weights"]
    assert page.page.evaluate("document.querySelectorAll('[data-part-loading]').length") == 0
    # the drawn node carries its record (badges, shapes) as Python holds it
    record = page.page.evaluate(
        "(id) => { const n = window.etpEl.etpExplorer.index.nodes.get(id);"
        " return {out: n.out_avals, source: n.source}; }",
        weight_op,
    )
    full = next(n for n in explorer.view_model["nodes"] if n["id"] == weight_op)
    assert record == {"out": full["out_avals"], "source": full["source"]}
    assert_clean(page)


def test_a_weight_card_gets_its_text_on_click(kernel_page):
    page, explorer, requests = kernel_page
    wait_rendered(page, timeout=60000)
    path = "layers.0.Wr.weight"
    weight = next(w for w in explorer.view_model["weights"] if w["path"] == path)
    assert weight["summary"] and "summary" not in next(
        w for w in explorer.view_shell["weights"] if w["path"] == path
    )
    page.page.click(f"[data-panel-body=weights] [data-weight='{path}']")
    page.page.wait_for_selector(f"[data-loading-card='{path}']", timeout=5000)
    page.page.wait_for_selector(
        f"[data-panel-body=inspector] [data-summary='{path}']", timeout=20000
    )
    text = page.page.inner_text(f"[data-panel-body=inspector] [data-summary='{path}']")
    assert text == weight["summary"]
    assert part_requests(requests)[-1] == {"box": None, "nodes": [], "weights": [path]}
    assert page.page.evaluate("document.querySelectorAll('[data-loading-card]').length") == 0
    assert_clean(page)


def test_an_unknown_part_is_an_error_in_the_widget(kernel_page):
    page, explorer, _requests = kernel_page
    wait_rendered(page, timeout=60000)
    page.page.evaluate(
        "window.etpEl.etpExplorer.parts.load({box: 'm:gone', nodes: ['e999999']}).catch(() => {})"
    )
    page.page.wait_for_selector(".etp-error:not([hidden])", timeout=10000)
    assert "no node 'e999999'" in page.page.inner_text(".etp-error")
    assert "no node 'e999999'" in explorer.error
    # the widget goes on: the first view is still drawn
    assert page.page.evaluate("document.querySelectorAll('svg g.node').length") > 0
