"""The layers import one way only, and the engine imports without the widget stack."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "etp_viz"

#: layer -> layers it must never import (ops <- compiler <- learn <- explorer; nn needs ops only)
FORBIDDEN = {
    "ops": ("compiler", "learn", "explorer", "nn"),
    "nn": ("compiler", "learn", "explorer"),
    "compiler": ("learn", "explorer", "nn"),
    "learn": ("explorer",),
}


def _imported_modules(path: Path) -> set[str]:
    """Absolute names of the etp_viz modules a source file imports (relative ones resolved)."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {name for name in found if name.startswith("etp_viz")}


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_point_one_way(layer):
    bad = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        for name in _imported_modules(path):
            parts = name.split(".")
            if len(parts) > 1 and parts[1] in FORBIDDEN[layer]:
                bad.append(f"{path.relative_to(PACKAGE.parent)} imports {name}")
    assert not bad, "a layer reached upwards:\n" + "\n".join(bad)


def test_engine_imports_without_the_widget_stack():
    code = "import json, sys, etp_viz\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    # brainstate itself imports matplotlib, so our plotting module is what is checked
    forbidden = ("anywidget", "ipywidgets", "etp_viz.explorer")
    bad = [m for m in loaded for f in forbidden if m == f or m.startswith(f + ".")]
    assert not bad, f"`import etp_viz` also imported {bad}"
