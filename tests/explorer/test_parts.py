"""The view model in parts (etp_viz/explorer/parts.py): the shell the page gets first, the
parts it asks for, and the widget's ``view_part`` requests."""

from __future__ import annotations

import functools
import json
import random
import warnings

import pytest

from etp_viz.explorer.parts import (
    CARD_WEIGHT_FIELDS,
    SHELL_NODE_FIELDS,
    WHOLE_MAX_BYTES,
    assemble,
    split_for_page,
    split_view_model,
    view_part,
)
from etp_viz.explorer.widget import Explorer
from etp_viz.view.types import SCHEMA_VERSION
from tests.explorer.browser.real_view_models import real_view_model

#: what only an opened box or a clicked weight shows (js/src/panels.js, graph.js tooltipFor)
HEAVY_NODE_FIELDS = ("badges", "params", "in_avals", "out_avals", "source")


@functools.cache
def gru_stack_view_model(depth: int) -> dict:
    """The view model of ``depth`` GRU cells in series and a readout (the stack
    ``bench/view_parts.py`` measures: ``bench/deep_stack.py`` ``make_stack``)."""
    import etp_viz
    from bench.deep_stack import make_stack
    from etp_viz.view.model import build_view_model

    model, x = make_stack(depth)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # excluded weights are expected here
        graph = etp_viz.compile_etrace_graph(model, x)
    return build_view_model(graph).to_json()


def view_model(name: str) -> dict:
    """A fresh copy of a test view model: a real one, or ``stack<depth>``."""
    if name.startswith("stack") and name[5:].isdigit():
        return json.loads(json.dumps(gru_stack_view_model(int(name[5:]))))
    return json.loads(json.dumps(real_view_model(name)))


def size(value) -> int:
    return len(json.dumps(value, separators=(",", ":")))


def test_the_shell_lacks_the_heavy_fields():
    vm = view_model("stack16")
    shell = split_view_model(vm).shell
    assert shell["schema"] == SCHEMA_VERSION and shell["parts"]["nodes"] == list(SHELL_NODE_FIELDS)
    assert len(shell["nodes"]) == len(vm["nodes"]) and shell["edges"] == vm["edges"]
    for node in shell["nodes"]:
        assert set(node) <= set(SHELL_NODE_FIELDS), node
        assert all(v is not None and v is not False for v in node.values()), node
    assert any(n.get("badges") for n in vm["nodes"])  # there was something to hold back
    for weight in shell["weights"]:
        assert not set(weight) & set(CARD_WEIGHT_FIELDS), weight
        # what the lists, the highlights and the dashed edges read stays
        assert {"path", "status", "status_text", "path_nodes", "dropped_edges"} <= set(weight)
    for name in ("clusters", "groups", "relations", "diagnostics", "legend", "palette"):
        assert shell[name] == vm[name]


@pytest.mark.parametrize("name", ["gru", "subjaxprs", "stacked_2000", "stack16"])
def test_the_shell_and_every_part_make_the_view_model_again(name):
    """Property over models (one with nested sub-jaxprs, two deep stacks): the shell and the
    parts, asked for in random batches as boxes and cards open, give the view model back."""
    vm = view_model(name)
    split = split_view_model(vm)
    node_ids, paths = [n["id"] for n in vm["nodes"]], [w["path"] for w in vm.get("weights", [])]
    rng = random.Random(0)
    rng.shuffle(node_ids)
    rng.shuffle(paths)
    merged: dict = {"nodes": {}, "weights": {}}
    for start in range(0, max(len(node_ids), len(paths)), 37):
        part = view_part(
            split, {"nodes": node_ids[start : start + 37], "weights": paths[start : start + 37]}
        )
        merged["nodes"].update(part["nodes"])
        merged["weights"].update(part["weights"])
    again = assemble(split.shell, merged)
    assert again == vm
    assert json.dumps(again, sort_keys=True) == json.dumps(vm, sort_keys=True)


def test_the_shell_is_much_smaller_on_deep_stacks():
    """A structural property (bytes of JSON, not time): the shell of a 16- and a 64-layer GRU
    stack is under 40 % of the view model, and grows no faster than it."""
    ratios = {}
    for depth in (16, 64):
        vm = view_model(f"stack{depth}")
        ratios[depth] = size(split_view_model(vm).shell) / size(vm)
    assert ratios[16] < 0.4 and ratios[64] < 0.4, ratios
    assert ratios[64] <= ratios[16] + 0.02, ratios


def test_a_small_view_model_is_sent_whole():
    vm = view_model("gru")
    assert size(vm) <= WHOLE_MAX_BYTES
    explorer = Explorer(vm)
    assert explorer.view_shell == vm and "parts" not in explorer.view_shell
    assert explorer.frontend_state()["view_parts"] is None
    reply = explorer._answer({"id": 1, "method": "view_part", "params": {"nodes": ["e0"]}})
    assert reply["result"] is None and "sent whole" in reply["error"]


def test_the_widget_syncs_the_shell_and_answers_parts():
    vm = view_model("stack16")
    explorer = Explorer(vm)
    assert explorer.view_model == vm and explorer.view_shell["parts"]
    weight = vm["weights"][3]
    node = next(n for n in vm["nodes"] if n.get("badges"))
    reply = explorer._answer(
        {
            "type": "request",
            "id": 4,
            "method": "view_part",
            "params": {"box": "m:layers.1", "nodes": [node["id"]], "weights": [weight["path"]]},
        }
    )
    assert reply["id"] == 4 and reply["error"] is None
    assert reply["result"]["nodes"][node["id"]]["badges"] == node["badges"]
    assert reply["result"]["weights"][weight["path"]]["summary"] == weight["summary"]
    state = explorer.frontend_state()  # a saved page: every part embedded
    assert assemble(state["view_shell"], state["view_parts"]) == vm


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"box": "m:layers.2", "nodes": ["e999999"]}, r"no node 'e999999'.*box 'm:layers.2'"),
        ({"weights": ["layers.0.Wz"]}, r"no weight 'layers.0.Wz'.*did you mean"),
    ],
)
def test_an_unknown_part_id_gets_an_error_reply(params, message):
    import re

    explorer = Explorer(view_model("stack16"))
    reply = explorer._answer({"type": "request", "id": 9, "method": "view_part", "params": params})
    assert reply["id"] == 9 and reply["result"] is None
    assert re.search(message, reply["error"]), reply["error"]
    assert "KeyError" in explorer.error  # shown in the widget, which goes on working


def test_a_new_view_model_gets_a_new_shell():
    explorer = Explorer(view_model("gru"))
    big = view_model("stack16")
    explorer.view_model = big
    assert explorer.view_shell["parts"] and len(explorer.view_shell["nodes"]) == len(big["nodes"])
    first = big["nodes"][0]["id"]
    reply = explorer._answer({"id": 2, "method": "view_part", "params": {"nodes": [first]}})
    assert reply["error"] is None and first in reply["result"]["nodes"]


def test_split_for_page_follows_the_byte_threshold():
    vm = view_model("gru")
    assert split_for_page(vm).whole
    assert not split_for_page(vm, max_bytes=size(vm) - 1).whole
    assert split_for_page(None).shell == {}
