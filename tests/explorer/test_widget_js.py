"""Runs the front end's node tests (`npm test` in js/) on REAL view models: the shared test
models are compiled and their view models written to a temp dir named by ETP_VIZ_REAL_VMS
(tests/explorer/browser/real_view_models.py). Skips when node/npm are absent."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.explorer.browser.real_view_models import write_real_view_models

JS = Path(__file__).resolve().parents[2] / "js"


def test_npm_test(tmp_path):
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("node/npm not installed")
    if not (JS / "node_modules").is_dir():
        pytest.fail("js/node_modules is missing: run scripts/setup.sh (npm ci in js/)")
    real = write_real_view_models(tmp_path / "real")
    result = subprocess.run(
        ["npm", "test", "--silent"],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "ETP_VIZ_REAL_VMS": str(real)},
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "# skipped 0" in result.stdout, result.stdout[-2000:]
