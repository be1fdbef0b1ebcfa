"""Run notebooks/02-compiler-internals.ipynb: its cells assert the spec's printed structure."""

from __future__ import annotations

import pathlib

import pytest

NOTEBOOK = pathlib.Path(__file__).parents[2] / "notebooks" / "02-compiler-internals.ipynb"


@pytest.mark.notebook
def test_compiler_internals_notebook_runs():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute(
        cwd=str(NOTEBOOK.parent)
    )
    outputs = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )
    assert "Compiled model states: 5" in outputs
