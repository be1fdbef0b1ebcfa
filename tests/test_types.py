"""The type checker is in the loop: mypy (settings in pyproject.toml's ``[tool.mypy]``) finds no
error in the engine's learners, compiler and live runs (what ``make lint`` runs too)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the folders kept clean (``make lint`` checks the same ones)
CHECKED = ("etp_viz/learn", "etp_viz/compiler", "etp_viz/live")


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_mypy_finds_no_error():
    result = subprocess.run(
        [sys.executable, "-m", "mypy", *CHECKED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, f"mypy {' '.join(CHECKED)}:\n{result.stdout}{result.stderr}"
