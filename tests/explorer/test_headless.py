"""The widget stand-in without the ``[explorer]`` extra (``etp_viz.explorer.headless``): traits
and ``observe`` behave as traitlets' do for what the explorers use (the core install's demo
runs a live explorer on it: ``tests/test_packaging.py``)."""

from __future__ import annotations

from etp_viz.explorer.headless import HeadlessWidget, _Dict


class Widget(HeadlessWidget):
    view_model = _Dict()
    other = _Dict()


def test_observe_is_called_on_a_change_of_the_named_trait_only():
    widget, seen = Widget(), []
    widget.observe(lambda change: seen.append((change["name"], change["new"])), ["view_model"])
    first = {"a": 1}
    widget.view_model = first
    widget.other = {"b": 2}
    widget.view_model = first  # the same value again: no change
    widget.view_model = {"a": 2}
    assert seen == [("view_model", {"a": 1}), ("view_model", {"a": 2})]
    assert Widget().view_model == {} and Widget().view_model is not Widget().view_model
