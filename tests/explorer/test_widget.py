"""Explorer widget state without a kernel: traits, options, Python -> JS commands, requests."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from etp_viz.explorer import export
from etp_viz.explorer.bundle import BUNDLE
from etp_viz.explorer.widget import DISPLAY_OPTIONS, Explorer, split_display_options
from tests.explorer.browser.real_view_models import real_view_model


def fixture(name):
    """A fresh copy of a real view model (build_view_model of the shared test models)."""
    return json.loads(json.dumps(real_view_model(name)))


def test_import_etp_viz_does_not_import_the_widget_stack():
    code = (
        "import sys, etp_viz; assert 'anywidget' not in sys.modules; "
        "assert etp_viz.Explorer.__name__ == 'Explorer'; assert callable(etp_viz.show); "
        "assert 'anywidget' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_traits_from_view_model_json():
    ex = Explorer(fixture("gru"), height=400)
    assert ex.view_model["title"] == "GRUCell"
    assert ex.options == {**DISPLAY_OPTIONS, "height": 400}
    assert ex.expanded == [] and ex.selected == {} and ex.highlight == {} and ex.error == ""
    assert set(ex.frontend_state()) == {
        "view_shell",
        "view_parts",
        "expanded",
        "selected",
        "highlight",
        "options",
        "error",
        "live_panels",
        "verification",
        "what_if_changes",
        "what_if",
        "scale",
    }
    assert ex.verification is None  # no report until verify()
    assert ex.what_if_changes == {} and ex.what_if is None  # JSON alone: no model to change


def test_unknown_option_lists_the_valid_ones():
    match = r"unknown option\(s\) 'heigth' \(did you mean 'height'"
    with pytest.raises(TypeError, match=match) as e:
        Explorer(fixture("gru"), heigth=300)
    for name in DISPLAY_OPTIONS:
        assert name in str(e.value)
    with pytest.raises(ValueError, match="rankdir"):
        split_display_options({"rankdir": "XY"})
    with pytest.raises(ValueError, match="unknown panel"):
        split_display_options({"panels": ["weights", "plots"]})


def test_highlight_weight_and_select():
    ex = Explorer(fixture("gru"))
    ex.highlight_weight("Wr.weight")
    assert ex.highlight == ex.selected == {"kind": "weight", "id": "Wr.weight"}
    with pytest.raises(KeyError, match="did you mean 'Wr.weight'"):
        ex.highlight_weight("Wr.weigth")
    ex.select(group=0)
    assert ex.highlight == {"kind": "group", "id": "0"}
    with pytest.raises(TypeError, match="exactly one of"):
        ex.select(node="e1", group=0)
    ex.clear_selection()
    assert ex.selected == {}


def test_select_node_inside_collapsed_clusters_expands_them():
    ex = Explorer(fixture("subjaxprs"))
    ex.select(node="e5.1/0/1")
    assert sorted(ex.expanded) == ["c:e5", "c:e5.1/0"]
    ex.collapse("c:e5.1/0")
    assert ex.expanded == ["c:e5"]
    with pytest.raises(KeyError):
        ex.expand("c:nope")
    with pytest.raises(ValueError, match="branch cluster.*expand its owner 'c:e5'"):
        ex.expand("c:e5.1")


def test_requests_reply_with_id_and_error():
    ex = Explorer(fixture("two_layer_rnn"))
    ok = ex._answer({"type": "request", "id": 7, "method": "summary"})
    assert ok["id"] == 7 and ok["error"] is None and "TwoLayerRNN" in ok["result"]
    bad = ex._answer({"type": "request", "id": 8, "method": "nope"})
    assert bad["id"] == 8 and "unknown request 'nope'" in bad["error"]
    assert "unknown request" in ex.error  # shown in the widget
    sent = []
    ex.send = lambda content, buffers=None: sent.append(content)
    ex._on_custom_message(ex, {"type": "request", "id": 9, "method": "summary"}, [])
    ex._on_custom_message(ex, {"type": "frontend_error", "message": "boom"}, [])
    assert sent[0]["id"] == 9 and ex.frontend_errors == ["boom"]


def test_push_live_sends_float32_buffer():
    ex = Explorer(fixture("two_layer_rnn"))
    sent = []
    ex.send = lambda content, buffers=None: sent.append((content, buffers))
    with pytest.raises(KeyError, match="no live panel"):
        ex.push_live("loss", [1.0])
    ex.live_panels = [{"name": "loss", "kind": "line"}]
    ex.push_live("loss", [[1, 2], [3, 4]])
    content, buffers = sent[0]
    assert content["shape"] == [2, 2] and content["dtype"] == "float32"
    assert len(buffers[0]) == 16


def test_mimebundle_has_text_summary_and_widget_view():
    ex = Explorer(fixture("gru"))
    data, _ = ex._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    text = data["text/plain"]
    assert "not learned" in text and "Wr.weight" in text and "fix:" in text
    # a static SVG only with a `dot` executable (the setup installs graphviz)
    import shutil

    has_dot = shutil.which("dot") is not None
    assert ("image/svg+xml" in data) == has_dot
    # the static fallback a page without a kernel shows: graph, weights and their status
    page = data["text/html"]
    assert ("<svg" in page) == has_dot and "<?xml" not in page
    for weight in ex.view_model["weights"]:
        assert f"<code>{weight['path']}</code>" in page
    assert "<script" not in page.lower()


def test_static_html_escapes_model_text():
    ex = Explorer(fixture("gru"))
    vm = json.loads(json.dumps(ex.view_model))
    vm["weights"][0]["path"] = "<img src=x onerror=alert(1)>"
    ex.view_model = vm
    page = ex.static_html()
    assert "<img src=x" not in page and "&lt;img src=x" in page


def test_to_dot_delegates_to_the_dot_module():
    pytest.importorskip("graphviz")
    ex = Explorer(fixture("gru"))
    ex.highlight_weight("Wr.weight")
    text = ex.to_dot()
    assert text.startswith("digraph") and "etp_mv" in text


def test_save_html_is_self_contained_and_escaped(tmp_path):
    if not BUNDLE.is_file():
        pytest.fail(f"{BUNDLE} is missing: run scripts/setup.sh")
    vm = fixture("gru")
    vm["title"] = "</script><script>alert(1)</script>"
    path = Explorer(vm).save_html(tmp_path / "x.html")
    text = path.read_text()
    assert text.count("</script>") == 3  # state, bundle, bootstrap: nothing closes early
    assert "<script>alert(1)" not in text
    assert "http://" not in text.split("<script>", 1)[0].replace("http-equiv", "")
    assert "default-src &#x27;none&#x27;" in text  # CSP: no fetch of any kind
    assert "EtpVizExplorer" in text


def test_missing_bundle_message_names_setup(tmp_path):
    with pytest.raises(FileNotFoundError, match="scripts/setup.sh"):
        export.bundle_text(tmp_path / "nope.js")
