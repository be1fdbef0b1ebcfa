"""The graph's visual language (etp_viz/view/palette.py): one palette, legend entries in plain
words, the static SVG drawn with the same colours, and weights summarised in plain words."""

from __future__ import annotations

import re
import warnings

import pytest

from etp_viz.view.dot import drawn_legend_keys, legend_html, to_dot
from etp_viz.view.model import build_view_model
from etp_viz.view.palette import COLOURS, LEGEND, edge_key, node_key, node_style, palette_json
from etp_viz.view.plain import plain_drop, weight_summary
from tests.view import models

HEX = re.compile(r"#[0-9a-f]{6}")
#: words a student should not have to read (they go on hover)
CODES = re.compile(r"equation|@\d|\be\d+\b|non-parametric|relation_|jaxpr|ETP equation")


@pytest.fixture(scope="module")
def vms():
    from etp_viz.compiler import compile_etrace_graph

    out = {}
    for name in ("two_layer_rnn", "gru", "lstm"):
        model, x = models.MODELS[name]()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out[name] = build_view_model(compile_etrace_graph(model, x))
    return out


def test_palette_colours_are_hex_and_every_legend_colour_is_in_it():
    assert all(HEX.fullmatch(c) for c in COLOURS.values()), COLOURS
    keys = [e.key for e in LEGEND]
    assert len(keys) == len(set(keys))
    for e in LEGEND:
        assert set(e.colours()) <= set(COLOURS.values()), e
        assert e.label and len(e.title) > 20 and not CODES.search(e.title + e.label), e
        assert e.swatch in {"box", "round", "ellipse", "diamond", "house", "note", "box3d",
                            "line", "ramp", "text"}  # fmt: skip
        assert e.line in {"solid", "dashed", "dotted", "double"}


def test_node_styles_use_the_palette_and_match_their_legend_entry():
    entries = {e.key: e for e in LEGEND}
    for kind in ("eqn", "input", "output", "hidden_in", "hidden_out", "state_in", "param"):
        style = node_style(kind)
        entry = entries[node_key(kind)]
        assert (style["fill"], style["stroke"]) == (entry.fill, entry.stroke), kind
    for status in ("online", "exact", "not_learned", None):
        style = node_style("eqn", etp=True, status=status)
        entry = entries[node_key("eqn", etp=True, status=status)]
        assert (style["fill"], style["stroke"]) == (entry.fill, entry.stroke), status
    assert node_style("eqn", etp=True, status="not_learned")["fill"] == COLOURS["not_learned_fill"]
    assert node_style("eqn", perturbed=True)["stroke"] == entries["perturbed"].stroke
    assert node_style("eqn", boundary=True)["peripheries"] == "2"
    assert node_style("eqn", collapsed=True)["fill"] == entries["collapsed"].fill
    assert edge_key(slice_=True, dropped=True) == "dropped"
    assert edge_key(slice_=True, transition=True) == "slice"
    assert edge_key() == "edge"


def test_view_model_carries_the_palette_and_the_legend(vms):
    data = vms["gru"].to_json()
    assert data["palette"] == palette_json()  # the light colours and the dark theme's
    assert [e["key"] for e in data["legend"]] == [e.key for e in LEGEND]
    assert set(data["legend"][0]) == {"key", "label", "title", "swatch", "fill", "stroke", "line"}


@pytest.mark.parametrize("name", ["two_layer_rnn", "gru", "lstm"])
def test_static_svg_colours_are_the_palette_and_its_legend_explains_them(vms, name):
    vm = vms[name]
    dot = to_dot(vm)
    drawn = set(HEX.findall(dot))
    assert drawn <= set(COLOURS.values()), drawn - set(COLOURS.values())
    keys = drawn_legend_keys(vm)
    explained = {c for e in LEGEND if e.key in keys for c in e.colours()}
    assert drawn <= explained, f"{name}: colours without a legend entry: {drawn - explained}"
    html = legend_html(vm)
    assert [k for k in re.findall(r"data-key='(\w+)'", html)] == keys
    assert "title='" in html


def test_static_legend_shows_only_what_is_drawn(vms):
    gru = drawn_legend_keys(vms["gru"])
    assert {"etp_not_learned", "etp_online", "boundary", "hidden", "group", "dropped"} <= set(gru)
    assert "trace" not in gru and "readout" not in gru and "etp_exact" not in gru


def test_weight_summaries_are_plain_words_with_weight_names(vms):
    for vm in vms.values():
        for w in vm.weights:
            assert w.summary and not CODES.search(w.summary), (w.path, w.summary)
    wr = next(w for w in vms["gru"].weights if w.path == "Wr.weight")
    assert wr.summary.startswith("Not learned online") and "Wh.weight" in wr.summary
    assert "@" in wr.reason  # the compiler's text stays in the view model (shown on hover)


def test_plain_drop_names_weights_and_drops_codes():
    text = "drops h→h h → h through Wz.weight (etp_mv, equation 1), etp_mv (equation 3)"
    assert (
        plain_drop(text, {3: "Wr.weight"})
        == "ignores how h feeds back into itself through Wz.weight and Wr.weight"
    )
    assert plain_drop("drops the effect on r's future states (r reads r; x)") == (
        "ignores the effect on r's later steps"
    )
    summary = weight_summary(
        "online", "approximate", leaf_claims=[("W.weight", "approximate", text)], names={3: "U"}
    )
    assert "approximately" in summary and "U" in summary and "equation" not in summary
