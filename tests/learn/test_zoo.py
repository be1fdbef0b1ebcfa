"""The zoo (issue 41): the models people already have learn online as written (float64).

Generated from ``bench/zoo_models.CATALOGUE``: every recurrent cell of ``brainstate.nn``, the
linear-like layers people put in recurrent nets, and spiking neurons with a braintools
surrogate, each in a small recurrent net written in plain brainstate. With ``lift=True``:

* every weight leaf is learned online, or claimed ``none`` for a structural reason (it reaches
  the hidden state only through another weight), never because an op did not lift;
* ``verify`` against BPTT finds 0 contradictions for D-RTRL and ES-D-RTRL, per leaf and per
  block of a fused gate weight, and the learned leaves get a non-zero online gradient.
"""

from __future__ import annotations

import brainstate
import pytest

import etp_viz
from bench.zoo_models import CATALOGUE

STEPS = 6
#: words of a structural reason for a "none" claim (the model's structure, not the tool)
STRUCTURAL = ("only through", "no hidden state", "non-temporal")


@pytest.fixture
def f64():
    with brainstate.environ.context(precision=64):
        yield


def _entries():
    for entry in CATALOGUE:
        why = entry.available()
        marks = [pytest.mark.skip(reason=why)] if why else []
        yield pytest.param(entry, id=entry.name.replace(" ", ""), marks=marks)


@pytest.mark.parametrize("entry", list(_entries()))
def test_zoo_model_learns_online_as_written(f64, entry):
    model = entry.model()
    xs = entry.inputs(STEPS)
    for algorithm in ("d_rtrl", "es_d_rtrl"):
        report = etp_viz.verify(model, xs, algorithm=algorithm, lift=True)
        assert not report.contradictions, f"{entry.name} {algorithm}\n{report.table()}"
        for row in report.rows:
            if row.claim == "none":
                assert any(w in row.reason for w in STRUCTURAL), (entry.name, row.path, row.reason)
                assert "not lifted" not in row.reason, row.reason
            else:
                assert row.online_norm > 0, (entry.name, algorithm, row.path)
