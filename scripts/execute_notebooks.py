"""Execute notebooks/*.ipynb in place, so that they read without a kernel (GitHub, nbviewer).

    .venv/bin/python scripts/execute_notebooks.py            # all (``make notebooks``)
    .venv/bin/python scripts/execute_notebooks.py 04          # the ones whose name has "04"
    .venv/bin/python scripts/execute_notebooks.py --check     # stale or failed? (exit 1)
    .venv/bin/python scripts/execute_notebooks.py --timeout=900 06   # per-cell limit (s)

Each notebook runs with nbclient on this interpreter. Its outputs are stored with the
``show()`` outputs' static fallback (graph SVG, weights and their claims, a live run's plots);
the widget state itself is not stored (its front end is ~0.9 MB per widget). The notebook's
metadata records ``etp_viz.source_sha256``, a digest of its cells' sources: a stored notebook
whose cells were edited after it was executed is *stale* (``tests/test_notebooks.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
KERNEL_NAME = "etp-viz-notebooks"


def source_digest(notebook: dict) -> str:
    """SHA-256 of the cells' types and sources (what the stored outputs were made from)."""
    digest = hashlib.sha256()
    for cell in notebook["cells"]:
        source = cell["source"]
        text = "".join(source) if isinstance(source, list) else source
        digest.update(cell["cell_type"].encode() + b"\0" + text.encode() + b"\0")
    return digest.hexdigest()


def problems(notebook: dict) -> list[str]:
    """Why a stored notebook does not read without a kernel (empty: it does)."""
    found = []
    stored = notebook.get("metadata", {}).get("etp_viz", {}).get("source_sha256")
    if stored != source_digest(notebook):
        found.append("stale: its cells changed after it was executed (run `make notebooks`)")
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code" or not "".join(cell["source"]).strip():
            continue
        if cell.get("execution_count") is None:
            found.append(f"cell {index} was not executed")
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                found.append(f"cell {index} stored an error: {output.get('ename')}")
            data = output.get("data", {})
            text = "".join(data.get("text/plain", ""))
            if set(data) == {"text/plain"} and text.startswith("<Figure"):
                found.append(f"cell {index} stored a figure as text only (no image)")
    return found


def kernelspec_dir() -> str:
    """A temporary Jupyter path with a kernelspec for this interpreter."""
    root = tempfile.mkdtemp(prefix="etp-viz-kernels-")
    spec_dir = Path(root, "kernels", KERNEL_NAME)
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    return root


def execute(path: Path, kernel_name: str = KERNEL_NAME, timeout: int = 300) -> dict:
    """Run one notebook (its folder as working directory) and return it with outputs."""
    import nbclient
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=False,
    )
    client.execute()
    notebook.metadata["kernelspec"] = {
        "display_name": "Python 3",
        "language": "python",
        "name": "python3",
    }
    notebook.metadata.setdefault("etp_viz", {})["source_sha256"] = source_digest(notebook)
    return notebook


def main(argv: list[str]) -> int:
    import nbformat

    check = "--check" in argv
    timeouts = [a.split("=", 1)[1] for a in argv if a.startswith("--timeout=")]
    timeout = int(timeouts[-1]) if timeouts else 300  # seconds per cell (a loaded machine: more)
    names = [a for a in argv if not a.startswith("--")]
    every = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
    paths = [p for p in every if not names or any(n in p.name for n in names)]
    if check:
        bad = {p.name: problems(json.loads(p.read_text())) for p in paths}
        for name, found in bad.items():
            for problem in found:
                print(f"{name}: {problem}")
        return 1 if any(bad.values()) else 0
    previous = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = kernelspec_dir() + (os.pathsep + previous if previous else "")
    for path in paths:
        print(f"executing {path.name} ...", flush=True)
        started = time.perf_counter()
        nbformat.write(execute(path, timeout=timeout), path)
        print(f"  {path.name}: {time.perf_counter() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
