"""The explorer in headless Chromium: renders, clicks, highlights, escapes, saves offline."""

from __future__ import annotations

import io

import pytest

from etp_viz.explorer.widget import Explorer
from etp_viz.view.types import SCHEMA_VERSION

from .conftest import load_real

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


def vm_ids(page, cls):
    """View-model ids (nodes, edges, clusters) drawn with a highlight class."""
    return node_ids_with_class(page, cls)


def assert_references_resolve(page):
    """Every id the page's view model references exists (checked in the page's own index)."""
    missing = page.page.evaluate(
        """() => { const ix = window.etpEl.etpExplorer.index; const vm = ix.vm; const bad = [];
          const chk = (ids, map, where) => { for (const id of ids || [])
            if (id != null && !map.has(id)) bad.push(`${where}: ${id}`); };
          for (const e of vm.edges) chk([e.source, e.target], ix.nodes, `edge ${e.id}`);
          for (const n of vm.nodes) chk([n.cluster, n.subcluster], ix.clusters, `node ${n.id}`);
          for (const w of vm.weights) { chk([...w.node_ids, ...w.path_nodes, ...w.boundary_nodes],
            ix.nodes, w.path); chk(w.path_edges, ix.edges, w.path); }
          for (const g of vm.groups) { chk(g.transition_nodes, ix.nodes, `group ${g.index}`);
            chk(g.transition_edges, ix.edges, `group ${g.index}`);
            chk([g.cluster], ix.clusters, "g"); }
          for (const r of vm.relations) { chk([r.node, ...r.slice_nodes], ix.nodes, r.id);
            chk(r.slice_edges, ix.edges, r.id); }
          for (const d of vm.diagnostics) chk(d.node_ids, ix.nodes, `diagnostic ${d.index}`);
          return bad; }"""
    )
    assert missing == [], missing[:20]


def drawn_vm_ids(page):
    """View-model ids of every drawn element (graph items are generated DOT ids)."""
    return page.page.evaluate(
        """() => { const app = window.etpEl.etpExplorer;
          return [...document.querySelectorAll('svg.etp-graph g[id]')].map((g) => {
            const ref = app.graph.dotToVm.get(g.id); return ref ? ref.id : null; }); }"""
    )


@pytest.mark.parametrize("name", ["two_layer_rnn", "gru", "lstm", "stacked_2000", "subjaxprs"])
def test_real_model_renders(harness, name, tmp_path):
    vm = load_real(name)
    cells = [c["id"] for c in vm["clusters"] if c["kind"] == "cell"]  # drawn open: more to see
    page = harness(Explorer(vm, expanded=cells if name == "two_layer_rnn" else None), name)
    wait_rendered(page, timeout=60000)
    counts = page.page.evaluate(
        "[document.querySelectorAll('g.node').length, document.querySelectorAll('g.edge').length,"
        " document.querySelectorAll('[data-weight]').length]"
    )
    assert counts[0] > 5 and counts[1] > 5, counts
    if name != "subjaxprs":
        assert counts[2] >= 1, counts
    drawn = drawn_vm_ids(page)
    assert None not in drawn, "a drawn element maps to no view-model id"
    assert_references_resolve(page)
    assert_screenshot_not_blank(page, tmp_path / f"{name}.png")
    assert_clean(page)


def test_gru_click_wr_highlights_blocking_path(harness, tmp_path):
    vm = load_real("gru")
    wr = next(w for w in vm["weights"] if w["path"] == "Wr.weight")
    wh = next(w for w in vm["weights"] if w["path"] == "Wh.weight")
    wh_eqn = next(n for n in wh["node_ids"] if not n.startswith("p:"))
    wr_eqn = next(n for n in wr["node_ids"] if not n.startswith("p:"))
    page = harness(Explorer(vm), "gru_wr")
    wait_rendered(page)
    page.page.click("[data-weight='Wr.weight']")
    page.page.wait_for_selector("g.hl-boundary")
    assert vm_ids(page, "hl-boundary") == [wh_eqn] == wr["boundary_nodes"]
    assert set(vm_ids(page, "hl-path")) >= set(wr["path_nodes"][1:-1]) | set(wr["path_edges"])
    assert vm_ids(page, "hl-selected") == [wr_eqn]
    fix = page.page.text_content(".etp-fix")
    assert "Suggested fix" in fix and "BPTT" in fix and wr["fix"] in fix
    state = page.page.evaluate("window.etpModel.state.selected")
    assert state == {"kind": "weight", "id": "Wr.weight"}
    assert_screenshot_not_blank(page, tmp_path / "gru_wr.png")
    assert_clean(page)


def test_lstm_merged_group(harness):
    vm = load_real("lstm")
    page = harness(Explorer(vm), "lstm_group")
    wait_rendered(page)
    assert "h + c" in page.page.text_content("[data-group='0']")
    page.page.click("[data-group='0']")
    page.page.wait_for_selector("g.hl-cluster")
    transition = set(vm_ids(page, "hl-transition"))
    assert {"h:h:out", "h:c:out"} <= transition
    assert set(vm["groups"][0]["transition_edges"]) <= transition
    assert vm_ids(page, "hl-cluster") == ["g0"]
    assert_clean(page)


def test_two_layer_rnn_inspect_search(harness):
    vm = load_real("two_layer_rnn")
    page = harness(Explorer(vm, expanded=["cell:rnn1", "cell:rnn2"]), "rnn_clicks")
    wait_rendered(page)
    etp = next(n for n in vm["nodes"] if n.get("weight_path") == "rnn1.W.weight" and n["etp"])
    dot_id = page.page.evaluate(f"window.etpEl.etpExplorer.graph.nodeToDot.get('{etp['id']}')")
    page.page.click(f"g#{dot_id}")
    inspector = page.page.text_content("[data-panel-body='inspector']")
    assert "etp_mv" in inspector and etp["in_avals"][1] in inspector
    if etp.get("source"):
        assert etp["source"] in inspector
    assert page.page.evaluate("window.etpModel.state.selected") == {"kind": "node", "id": etp["id"]}
    # search, Enter jumps to the first result
    rnn2 = next(n for n in vm["nodes"] if n.get("weight_path") == "rnn2.W.weight" and n["etp"])
    page.page.fill(".etp-search", "rnn2\\.W")
    page.page.press(".etp-search", "Enter")
    page.page.wait_for_selector("g.hl-selected")
    assert rnn2["id"] in vm_ids(page, "hl-selected")
    page.page.fill(".etp-search", "(")
    assert "invalid regular expression" in page.page.text_content("[data-panel-body='search']")
    for action in ("zoom-in", "zoom-out", "fit"):
        page.page.click(f"[data-action='{action}']")
    svg = page.page.evaluate("window.etpEl.etpExplorer.exportSvg()")
    assert svg.startswith("<svg") and "hl-selected" in svg and "<style>" in svg
    assert_clean(page)


def test_subjaxprs_expand_collapse(harness):
    """Real sub-jaxpr clusters: the owner is the collapsed entry; a branch cluster has no
    expand of its own; a nested custom_jvp expands inside the open cond."""
    page = harness(Explorer(load_real("subjaxprs")), "subjaxprs")
    wait_rendered(page)
    dot = page.page.evaluate("window.etpEl.etpExplorer.graph.nodeToDot.get('e5')")
    before = page.page.evaluate("document.querySelectorAll('g.node').length")
    page.page.click(f"g#{dot}")
    page.page.wait_for_function(f"document.querySelectorAll('g.node').length > {before}")
    assert page.page.evaluate("window.etpModel.state.expanded") == ["c:e5"]
    clusters = set(drawn_vm_ids(page))
    assert {"c:e5", "c:e5.0", "c:e5.1", "e5", "e5.0/0"} <= clusters
    # the branch cluster's inspector offers no expand/collapse of its own
    branch = page.page.evaluate("window.etpEl.etpExplorer.graph.clusterToDot.get('c:e5.1')")
    page.page.evaluate(f"window.etpEl.etpExplorer.onGraphClick('{branch}')")
    assert page.page.query_selector("[data-panel-body='inspector'] button") is None
    inner = page.page.evaluate("window.etpEl.etpExplorer.graph.nodeToDot.get('e5.1/0/0')")
    assert inner.startswith("k")
    page.page.click(f"g#{inner}")
    page.page.wait_for_function(
        "window.etpEl.etpExplorer.graph && window.etpEl.etpExplorer.graph.nodeToDot"
        ".get('e5.1/0/0').startsWith('n')"
    )
    assert sorted(page.page.evaluate("window.etpModel.state.expanded")) == ["c:e5", "c:e5.1/0"]
    page.page.click("[data-action='collapse-all']")
    page.page.wait_for_function(
        f"document.querySelectorAll('svg.etp-graph g.node').length === {before}"
    )
    assert_clean(page)


def test_python_highlight_reaches_page(harness):
    """highlight_weight() in Python sets a trait; the page follows the trait."""
    explorer = Explorer(load_real("gru"))
    page = harness(explorer, "py_highlight")
    wait_rendered(page)
    explorer.highlight_weight("Wr.weight")
    page.page.evaluate(
        "(h) => window.etpModel.set('highlight', h)", explorer.frontend_state()["highlight"]
    )
    page.page.wait_for_selector("g.hl-boundary")
    assert len(vm_ids(page, "hl-boundary")) == 1
    assert_clean(page)


def test_stacked_diagnostic_jumps_into_collapsed_module(harness):
    vm = load_real("stacked_2000")
    diag = next(d for d in vm["diagnostics"] if d["kind"] == "relation_excluded_weight_to_weight")
    page = harness(Explorer(vm), "stacked_diag")
    wait_rendered(page, timeout=60000)
    page.page.click("details[data-panel='diagnostics'] > summary")
    # the lists are virtual: only the rows in view are in the DOM, whatever the model's size
    rows = page.page.evaluate(
        "['weight', 'group', 'diagnostic']"
        ".map((k) => document.querySelectorAll(`[data-${k}]`).length)"
    )
    assert len(vm["weights"]) > 400 and len(vm["diagnostics"]) > 400
    assert all(0 < n <= 30 for n in rows), rows
    # scroll the diagnostics list (as a person would) until the row is there, then click it
    position = [d["index"] for d in vm["diagnostics"]].index(diag["index"])
    page.page.locator("[data-panel-body='diagnostics'] .etp-vlist").evaluate(
        "(el, i) => { el.scrollTop = i * 20; }", position
    )
    page.page.wait_for_selector(f"[data-diagnostic='{diag['index']}']")
    page.page.click(f"[data-diagnostic='{diag['index']}']")
    assert page.page.evaluate("document.querySelectorAll('[data-diagnostic]').length") <= 30
    page.page.wait_for_function(
        """(ids) => { const app = window.etpEl.etpExplorer; if (!app.graph) return false;
          return ids.every((id) => {
            const el = document.getElementById(app.graph.nodeToDot.get(id));
            return el && el.id.startsWith('n') && el.classList.contains('hl-selected'); }); }""",
        arg=diag["node_ids"],
        timeout=60000,
    )
    assert page.page.evaluate("window.etpEl.etpExplorer.graph.expanded.size") == 2
    assert set(diag["node_ids"]) <= set(vm_ids(page, "hl-selected"))
    assert_clean(page)


def test_user_strings_cannot_inject(harness):
    evil = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">\'"'
    vm = load_real("gru")
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
    # no sleep: an injected <img src=x> would request `x`; wait until every request the page
    # made has settled (its onerror has run then, and assert_clean sees its 404)
    page.page.wait_for_load_state("networkidle")
    assert page.page.evaluate("window.__pwned") is None
    assert page.page.evaluate("document.querySelectorAll('#root script, #root img').length") == 0
    assert evil in page.page.text_content("[data-panel-body='inspector']")
    assert evil in page.page.text_content(".etp-title")
    assert_clean(page)


def test_errors_are_shown_not_fatal(harness):
    explorer = Explorer(load_real("gru"))
    state = explorer.frontend_state()
    state["view_shell"] = {"schema": SCHEMA_VERSION, "title": "broken"}
    state["error"] = "ValueError: from python"
    page = harness(state, "broken")
    page.page.wait_for_selector(".etp-error:not([hidden])")
    assert "nodes" in page.page.text_content(".etp-error")
    # the widget is still alive: feed a good view model through the trait
    page.page.evaluate("(vm) => window.etpModel.set('view_shell', vm)", load_real("gru"))
    wait_rendered(page)
    assert page.errors == [] and page.aborted == []


def test_a_view_model_of_another_version_is_refused_with_a_clear_error(harness):
    """A view model the page was not built for (an older etp_viz's saved state, a stale
    bundle) is not drawn: the widget says which versions differ and what to do."""
    state = Explorer(load_real("gru")).frontend_state()
    state["view_shell"] = {**state["view_shell"], "schema": SCHEMA_VERSION + 1}
    page = harness(state, "version")
    page.page.wait_for_selector(".etp-error:not([hidden])")
    text = page.page.text_content(".etp-error")
    assert f"version {SCHEMA_VERSION}, got version {SCHEMA_VERSION + 1}" in text
    assert "re-run the cell" in text
    drawn = "document.querySelectorAll('[data-weight-name]').length"
    assert page.page.evaluate(drawn) == 0
    page.page.evaluate("(vm) => window.etpModel.set('view_shell', vm)", load_real("gru"))
    wait_rendered(page)
    assert page.aborted == []


def test_requests_and_live_region(harness):
    page = harness(Explorer(load_real("two_layer_rnn")), "live")
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
    explorer = Explorer(load_real("gru"))
    explorer.highlight_weight("Wr.weight")
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


def test_python_select_node_opens_module_box(harness):
    """Explorer.select(node=...) on the big model: the front end expands the viewer-made
    module cluster (and its range) hiding the node, draws the node and marks it."""
    vm = load_real("stacked_2000")
    target = next(
        n for n in vm["nodes"] if n.get("etp") and n.get("weight_path", "").startswith("layers.40.")
    )
    explorer = Explorer(vm)
    page = harness(explorer, "stacked_select")
    wait_rendered(page, timeout=60000)
    explorer.select(node=target["id"])
    state = explorer.frontend_state()
    page.page.evaluate(
        """(s) => { const m = window.etpModel; m.set('expanded', s.expanded);
          m.set('selected', s.selected); m.set('highlight', s.highlight); }""",
        {k: state[k] for k in ("expanded", "selected", "highlight")},
    )
    page.page.wait_for_function(
        """(id) => { const app = window.etpEl.etpExplorer; if (!app.graph) return false;
          const dot = app.graph.nodeToDot.get(id); const el = dot && document.getElementById(dot);
          return !!el && dot.startsWith('n') && el.classList.contains('hl-selected'); }""",
        arg=target["id"],
        timeout=60000,
    )
    expanded = page.page.evaluate("window.etpModel.state.expanded")
    # Python opens the layer's cell (a view-model cluster), the page the viewer-made range
    assert "cell:layers.40" in expanded and any(c.startswith("m:layers.") for c in expanded)
    assert_clean(page)


def test_gru_legend_is_what_is_drawn_and_explains_every_colour(harness, tmp_path):
    """GRU: Wr is not learned, so its op is drawn pink with a red border and the legend has
    that entry; every colour on the graph has an entry (also with Wr selected: the highlight
    colours join the legend); no entry is clipped; none for marks that are not drawn."""
    from .legend_checks import (
        LEGEND_BOXES,
        LIVE_COLOURS,
        assert_every_colour_in_legend,
        assert_legend_not_clipped,
    )

    vm = load_real("gru")
    page = harness(Explorer(vm), "gru_legend")
    wait_rendered(page)
    page.page.wait_for_selector("[data-legend] .etp-legend-item")
    info = page.page.evaluate(LIVE_COLOURS)
    assert {"etp_not_learned", "etp_online", "hidden", "group", "dropped"} <= set(info["legend"])
    assert "trace" not in info["legend"] and "readout" not in info["legend"]  # not drawn
    assert_every_colour_in_legend(info)
    assert_legend_not_clipped(page.page.evaluate(LEGEND_BOXES))
    page.page.click("[data-weight='Wr.weight']")
    page.page.wait_for_selector("[data-legend] [data-key=hl_boundary]")
    info = page.page.evaluate(LIVE_COLOURS)
    assert {"hl_selected", "hl_path", "hl_boundary"} <= set(info["legend"])
    assert_every_colour_in_legend(info)
    assert_legend_not_clipped(page.page.evaluate(LEGEND_BOXES))
    assert_screenshot_not_blank(page, tmp_path / "gru_legend.png")
    assert_clean(page)


def test_weight_inspector_speaks_plain_words_with_codes_on_hover(harness):
    """What a student reads names weights and says what happens in plain words; the
    compiler's text (equation numbers, "etp_mv@7", rule names) is only in title attributes."""
    vm = load_real("gru")
    wr = next(w for w in vm["weights"] if w["path"] == "Wr.weight")
    page = harness(Explorer(vm), "gru_plain")
    wait_rendered(page)
    page.page.click("[data-weight='Wr.weight']")
    page.page.wait_for_selector("[data-panel-body='inspector'] [data-summary]")
    shown = page.page.inner_text("[data-panel-body='inspector']")
    shown += page.page.inner_text("[data-panel='weights']")
    assert wr["summary"] in shown and "Wh.weight" in wr["summary"]
    for code in ("equation", "@", "non-parametric", "e3", "e7", "relation_"):
        assert code not in shown, f"{code!r} shown to the student: {shown}"
    hover = page.page.get_attribute("[data-panel-body='inspector'] [data-summary]", "title")
    assert "non-parametric-tail" in hover and "(equation 3)" in hover
    # a node's inspector: its plain meaning first, its id and equation number on hover
    dot_id = page.page.evaluate("window.etpEl.etpExplorer.graph.nodeToDot.get('e3')")
    page.page.click(f"g#{dot_id}")
    page.page.wait_for_selector("[data-panel-body='inspector'] .etp-plain")
    title = page.page.locator("[data-panel-body='inspector'] .etp-title")
    assert "Wr.weight" in title.inner_text() and "e3" in title.get_attribute("title")
    assert "weight" in page.page.inner_text("[data-panel-body='inspector'] .etp-plain")
    graph_title = page.page.evaluate(f"document.querySelector('g#{dot_id} > title').textContent")
    assert graph_title.startswith("weight op, not learned: Wr.weight"), graph_title
    assert_clean(page)


def test_compare_mode_weights_panel_shows_every_weight_name(harness):
    """Compare mode puts one claim chip per algorithm on each weight row: the weight's name
    stays whole (its own line), however many algorithms there are."""
    vm = load_real("two_layer_rnn")
    algorithms = ["d_rtrl", "es_d_rtrl", "eprop", "snap2", "bptt"]
    for w in vm["weights"]:
        w["path"] = f"encoder.recurrent_layer.{w['path']}"
        w["claim"] = ""
        w["claims"] = [{"algorithm": a, "claim": "approximate", "reason": "r"} for a in algorithms]
    page = harness(Explorer(vm), "compare_names")
    wait_rendered(page)
    names = page.page.eval_on_selector_all(
        "[data-weight-name]",
        """els => els.map(e => ({ text: e.textContent, cut: e.scrollWidth > e.clientWidth + 1,
          width: e.getBoundingClientRect().width, row: e.closest('.etp-row').clientWidth }))""",
    )
    assert {n["text"] for n in names} == {w["path"] for w in vm["weights"]}
    assert not any(n["cut"] for n in names), names
    chips = page.page.eval_on_selector_all("[data-algorithm-claim]", "els => els.length")
    assert chips == len(algorithms) * len(vm["weights"])
    cut_lines = page.page.eval_on_selector_all(
        ".etp-row-2 > .etp-row-line",
        "els => els.filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)",
    )
    assert cut_lines == [], cut_lines
    assert_clean(page)
