"""Golden text of the view model for the spec's models (identical on every supported jax).

Regenerate with ``ETP_VIZ_UPDATE_GOLDEN=1 pytest tests/view/test_view_model_golden.py``.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from etp_viz.view.model import build_view_model
from tests.view import models

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize("name", ["two_layer_rnn", "gru", "lstm"])
def test_golden_text(name):
    from etp_viz.compiler import compile_etrace_graph

    model, x = models.MODELS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = build_view_model(compile_etrace_graph(model, x)).to_text()
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("ETP_VIZ_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with ETP_VIZ_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name}: view model text changed (see {path})"
