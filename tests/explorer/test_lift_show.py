"""``show(model, x, lift=True)`` (issue 32): the graph shown is the lifted one, its lifted
weight ops carry ``lifted`` and the "lifted from" tag; compare mode refuses ``lift``."""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import pytest

from etp_viz.explorer.live_explorer import build_explorer
from tests.learn import archs


def test_a_static_view_of_a_plain_model_shows_its_lifted_ops():
    model = archs.build(archs.Arch((archs.Layer(bias="plain"),), ops="plain"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lifted = build_explorer(model, jnp.zeros(3), lift=True)
        plain = build_explorer(model, jnp.zeros(3))
    nodes = [n for n in lifted.view_model["nodes"] if n.get("lifted")]
    assert {n["lifted"] for n in nodes} == {"x @ layers.0.Win + layers.0.b", "x @ Wo"}
    for node in nodes:
        tags = [b["title"] for b in node["badges"] if b["kind"] == "lifted"]
        assert tags == [f"lifted from `{node['lifted']}` (etp_viz.matmul)"]
    assert not [n for n in plain.view_model["nodes"] if n.get("lifted")]
    assert plain.graph.module_info.lifting is None


def test_compare_mode_refuses_lift():
    task_free = archs.build(archs.Arch(ops="plain"))
    with pytest.raises(TypeError, match="lift=True applies to one learner"):
        build_explorer(
            task_free, jnp.zeros(3), data=lambda t: (jnp.zeros(3), jnp.zeros(2)),
            algorithm=["d_rtrl", "eprop"], lift=True,
        )  # fmt: skip
