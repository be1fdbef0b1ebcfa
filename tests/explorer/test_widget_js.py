"""Runs the front end's node tests (`npm test` in js/) so the README's test command covers
them. Skips when node/npm or js/node_modules are absent."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

JS = Path(__file__).resolve().parents[2] / "js"


def test_npm_test():
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("node/npm not installed")
    if not (JS / "node_modules").is_dir():
        pytest.fail("js/node_modules is missing: run scripts/setup.sh (npm ci in js/)")
    result = subprocess.run(
        ["npm", "test", "--silent"], cwd=JS, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
