"""The notebooks: each runs on the current interpreter (nbclient), and each is stored executed
so that it reads without a kernel (``make notebooks`` re-executes them; see
``scripts/execute_notebooks.py``)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _tool():
    spec = importlib.util.spec_from_file_location(
        "execute_notebooks", ROOT / "scripts" / "execute_notebooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _tool()


@pytest.fixture(scope="module")
def kernel_name():
    """A kernelspec pointing at this interpreter (so the notebooks see this venv)."""
    pytest.importorskip("ipykernel")
    previous = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = TOOL.kernelspec_dir() + (os.pathsep + previous if previous else "")
    yield TOOL.KERNEL_NAME
    if previous is None:
        os.environ.pop("JUPYTER_PATH", None)
    else:
        os.environ["JUPYTER_PATH"] = previous


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, kernel_name):
    pytest.importorskip("nbclient")
    # 300 s a cell (the scripts default): the lesson cells train for a minute on a laptop and
    # CI runs on a loaded 2-core machine
    notebook = TOOL.execute(path, kernel_name, timeout=300)  # raises on a failing cell
    assert not TOOL.problems(notebook)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_stored_notebook_reads_without_a_kernel(path):
    """Stored executed, from its current cells, with no error; every ``show()`` output
    carries the static fallback (graph, weights and claims) a page without a kernel shows."""
    notebook = json.loads(path.read_text())
    assert not TOOL.problems(notebook), (
        f"{path.name}: {TOOL.problems(notebook)}; run make notebooks"
    )
    widgets = [
        output
        for cell in notebook["cells"]
        for output in cell.get("outputs", [])
        if "application/vnd.jupyter.widget-view+json" in output.get("data", {})
    ]
    for output in widgets:
        assert "etp-viz-static" in "".join(output["data"].get("text/html", "")), path.name


def test_a_stale_notebook_is_caught():
    notebook = json.loads(NOTEBOOKS[0].read_text())
    notebook["metadata"].setdefault("etp_viz", {})["source_sha256"] = TOOL.source_digest(notebook)
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            cell["execution_count"] = cell.get("execution_count") or 1
    assert not [p for p in TOOL.problems(notebook) if "stale" in p]
    notebook["cells"][0]["source"] = ["# edited after execution\n"]
    assert any("stale" in p for p in TOOL.problems(notebook))
