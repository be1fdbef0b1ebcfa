"""The explorer in headless Chromium: renders, clicks, highlights, escapes, saves offline."""

from __future__ import annotations

import io

import pytest

from etp_viz.explorer.widget import Explorer

from .conftest import load_fixture

pytestmark = pytest.mark.browser
RENDERED = "document.querySelectorAll('.etp-graph-pane svg g.node').length > 0"


def wait_rendered(page, timeout=20000):
    page.page.wait_for_function(RENDERED, timeout=timeout)


def assert_clean(page):
    assert page.errors == [], page.errors
    assert page.aborted == [], f"non-loopback requests: {page.aborted}"


def assert_screenshot_not_blank(page, path):
    from PIL import Image

    data = page.page.screenshot(path=str(path))
    image = Image.open(io.BytesIO(data)).convert("L")
    low, high = image.getextrema()
    colours = len(set(image.resize((200, 130)).tobytes()))
    assert high - low > 100 and colours > 20, f"blank screenshot {path} ({colours} levels)"


def node_ids_with_class(page, cls):
    return page.page.evaluate(
        """(cls) => {
          const app = window.etpEl.etpExplorer;
          return [...document.querySelectorAll(`g.${cls}`)].map((g) => {
            const ref = app.graph.dotToVm.get(g.id); return ref ? ref.id : g.id; });
        }""",
        cls,
    )


@pytest.mark.parametrize("name", ["two_layer_rnn", "gru", "lstm", "stacked_2000"])
def test_fixture_renders(harness, name, tmp_path):
    page = harness(Explorer(load_fixture(name)), name)
    wait_rendered(page)
    counts = page.page.evaluate(
        "[document.querySelectorAll('g.node').length, document.querySelectorAll('g.edge').length,"
        " document.querySelectorAll('[data-weight]').length]"
    )
    assert counts[0] > 5 and counts[1] > 5 and counts[2] >= 1, counts
    assert_screenshot_not_blank(page, tmp_path / f"{name}.png")
    assert_clean(page)


def test_gru_click_wr_highlights_blocking_path(harness, tmp_path):
    page = harness(Explorer(load_fixture("gru")), "gru_wr")
    wait_rendered(page)
    page.page.click("[data-weight='gru.Wr.weight']")
    page.page.wait_for_selector("g.hl-boundary")
    assert node_ids_with_class(page, "hl-boundary") == ["e7"]
    assert set(node_ids_with_class(page, "hl-path")) >= {"e4", "e5", "e6"}
    assert node_ids_with_class(page, "hl-selected") == ["e3"]
    fix = page.page.text_content(".etp-fix")
    assert "Suggested fix" in fix and "BPTT" in fix
    state = page.page.evaluate("window.etpModel.state.selected")
    assert state == {"kind": "weight", "id": "gru.Wr.weight"}
    assert_screenshot_not_blank(page, tmp_path / "gru_wr.png")
    assert_clean(page)


def test_lstm_merged_group(harness):
    page = harness(Explorer(load_fixture("lstm")), "lstm_group")
    wait_rendered(page)
    assert "lstm.h + lstm.c" in page.page.text_content("[data-group='0']")
    page.page.click("[data-group='0']")
    page.page.wait_for_selector("g.hl-cluster")
    transition = set(node_ids_with_class(page, "hl-transition"))
    assert {"h:lstm.h:out", "h:lstm.c:out", "e9"} <= transition
    assert node_ids_with_class(page, "hl-cluster") == ["g0"]
    assert_clean(page)


def test_two_layer_rnn_expand_inspect_search(harness):
    page = harness(Explorer(load_fixture("two_layer_rnn")), "rnn_clicks")
    wait_rendered(page)
    before = page.page.evaluate("document.querySelectorAll('g.node').length")
    page.page.click("g.node[id^='k']")  # the collapsed custom_jvp_call (relu)
    page.page.wait_for_function(f"document.querySelectorAll('g.node').length > {before}")
    assert page.page.evaluate("window.etpModel.state.expanded") == ["c:e2"]
    # click the etp_mv node of rnn1 in the graph -> inspector
    dot_id = page.page.evaluate("window.etpEl.etpExplorer.graph.nodeToDot.get('e1')")
    page.page.click(f"g#{dot_id}")
    inspector = page.page.text_content("[data-panel-body='inspector']")
    assert "etp_mv" in inspector and "two_layer.py:22" in inspector and "f32[48,32]" in inspector
    # search, Enter jumps to the first result
    page.page.fill(".etp-search", "rnn2\\.W")
    page.page.press(".etp-search", "Enter")
    page.page.wait_for_selector("g.hl-selected")
    assert node_ids_with_class(page, "hl-selected") == ["e4"]
    page.page.fill(".etp-search", "(")
    assert "invalid regular expression" in page.page.text_content("[data-panel-body='search']")
    # fit / zoom / export do not fail
    for action in ("zoom-in", "zoom-out", "fit"):
        page.page.click(f"[data-action='{action}']")
    svg = page.page.evaluate("window.etpEl.etpExplorer.exportSvg()")
    assert svg.startswith("<svg") and "hl-selected" in svg and "<style>" in svg
    assert_clean(page)


def test_python_highlight_reaches_page(harness):
    """highlight_weight() in Python sets a trait; the page follows the trait."""
    explorer = Explorer(load_fixture("gru"))
    page = harness(explorer, "py_highlight")
    wait_rendered(page)
    explorer.highlight_weight("gru.Wr.weight")
    page.page.evaluate(
        "(h) => window.etpModel.set('highlight', h)", explorer.frontend_state()["highlight"]
    )
    page.page.wait_for_selector("g.hl-boundary")
    assert node_ids_with_class(page, "hl-boundary") == ["e7"]
    assert_clean(page)


def test_stacked_diagnostic_jumps_into_collapsed_layer(harness):
    page = harness(Explorer(load_fixture("stacked_2000")), "stacked_diag")
    wait_rendered(page)
    page.page.click("details[data-panel='diagnostics'] > summary")
    page.page.click("[data-diagnostic='5']")
    page.page.wait_for_function(
        "window.etpModel.state.expanded.includes('c:e5') && document.querySelector('g.hl-selected')"
    )
    assert node_ids_with_class(page, "hl-selected") == ["e5/2"]
    assert_clean(page)


def test_user_strings_cannot_inject(harness):
    evil = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">\'"'
    vm = load_fixture("gru")
    for n in vm["nodes"]:
        if n["id"] == "e3":
            n["params"]["name"] = evil
            n["label"] = evil
        if n["kind"] == "hidden_in":
            n["hidden_path"] = evil
    vm["weights"][1]["path"] = "gru." + evil
    vm["weights"][1]["reason"] = evil
    vm["title"] = evil
    page = harness(Explorer(vm), "evil")
    wait_rendered(page)
    page.page.click("[data-weight]:nth-child(2)")
    dot_id = page.page.evaluate("window.etpEl.etpExplorer.graph.nodeToDot.get('e3')")
    page.page.click(f"g#{dot_id}")
    page.page.wait_for_timeout(200)
    assert page.page.evaluate("window.__pwned") is None
    assert page.page.evaluate("document.querySelectorAll('#root script, #root img').length") == 0
    assert evil in page.page.text_content("[data-panel-body='inspector']")
    assert evil in page.page.text_content(".etp-title")
    assert_clean(page)


def test_errors_are_shown_not_fatal(harness):
    explorer = Explorer(load_fixture("gru"))
    state = explorer.frontend_state()
    state["view_model"] = {"schema": 1, "title": "broken"}
    state["error"] = "ValueError: from python"
    page = harness(state, "broken")
    page.page.wait_for_selector(".etp-error:not([hidden])")
    assert "nodes" in page.page.text_content(".etp-error")
    # the widget is still alive: feed a good view model through the trait
    page.page.evaluate("(vm) => window.etpModel.set('view_model', vm)", load_fixture("gru"))
    wait_rendered(page)
    assert page.errors == [] and page.aborted == []


def test_requests_and_live_region(harness):
    page = harness(Explorer(load_fixture("two_layer_rnn")), "live")
    wait_rendered(page)
    result = page.page.evaluate(
        "window.etpEl.etpExplorer.request('summary').then(() => 'ok', (e) => e.message)"
    )
    assert "no kernel" in result
    assert "no kernel" in page.page.text_content(".etp-error")
    assert page.page.evaluate("document.querySelector('[data-region=live]').hidden")
    page.page.evaluate(
        """() => {
          window.etpModel.set('live_panels', [{name: 'loss', kind: 'line', title: 'loss'}]);
          const data = new Float32Array([3, 2, 1.5, 1.2, 1.0]);
          window.etpModel.emit('msg:custom', {type: 'live', name: 'loss', shape: [5],
            dtype: 'float32'}, [new DataView(data.buffer)]);
        }"""
    )
    assert not page.page.evaluate("document.querySelector('[data-region=live]').hidden")
    drawn = page.page.evaluate(
        """() => { const c = document.querySelector('canvas[data-live=loss]');
          const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          let n = 0; for (let i = 3; i < d.length; i += 4) n += d[i] > 0; return n; }"""
    )
    assert drawn > 50
    assert page.errors == [] and page.aborted == []


def test_saved_html_opens_offline(open_page, bundle, tmp_path):
    explorer = Explorer(load_fixture("gru"))
    explorer.highlight_weight("gru.Wr.weight")
    path = explorer.save_html(tmp_path / "gru.html")
    page = open_page(None)
    page.page.goto(path.as_uri())
    # the page's CSP forbids eval, so wait with selectors rather than wait_for_function
    page.page.wait_for_selector(".etp-graph-pane svg g.node", timeout=20000)
    page.page.wait_for_selector("g.hl-boundary")
    page.page.click("[data-group='0']")
    page.page.wait_for_selector("g.hl-cluster")
    assert_screenshot_not_blank(page, tmp_path / "saved.png")
    assert page.errors == [], page.errors
    assert page.aborted == [], page.aborted
