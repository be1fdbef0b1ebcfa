"""The layers import one way only, and the engine imports without the widget stack."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

FORBIDDEN = {
    "etp_viz.ops": ("etp_viz.compiler", "etp_viz.learn", "etp_viz.explorer", "etp_viz.nn"),
    "etp_viz.nn": ("etp_viz.compiler", "etp_viz.learn", "etp_viz.explorer"),
    "etp_viz.compiler": ("etp_viz.learn", "etp_viz.explorer"),
    "etp_viz.learn": ("etp_viz.explorer",),
    # brainstate itself imports matplotlib, so only our plotting module is checked here
    "etp_viz": ("anywidget", "ipywidgets", "etp_viz.explorer.widget", "etp_viz.explorer.plots"),
}


def _loaded_modules(module: str) -> list[str]:
    code = (
        "import importlib, json, sys\n"
        f"importlib.import_module({module!r})\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", sorted(FORBIDDEN))
def test_layer_imports_point_one_way(module):
    loaded = _loaded_modules(module)
    bad = [
        name
        for name in loaded
        for prefix in FORBIDDEN[module]
        if name == prefix or name.startswith(prefix + ".")
    ]
    assert not bad, f"importing {module} also imported {bad}: a layer reached upwards"
