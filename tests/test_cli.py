"""`python -m etp_viz demo` and `inspect`, end to end (HTML written; summary printed)."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import textwrap

import pytest

from etp_viz.__main__ import build_parser, run_demo, run_inspect


def test_demo_writes_html_with_graph_and_history(tmp_path):
    out = io.StringIO()
    html = tmp_path / "demo.html"
    args = build_parser().parse_args(
        ["demo", "--steps", "30", "--fidelity-every", "15", "--out", str(html)]
    )
    assert run_demo(args, out) == 0
    text = out.getvalue()
    assert "relation(s)" in text and "Exclusions" in text
    assert re.search(r"final loss [0-9.e+-]+", text)
    assert "fidelity at step 30: cosine" in text
    page = html.read_text(encoding="utf-8")
    state = json.loads(re.search(r'id="etp-state">(.*?)</script>', page, re.S).group(1))
    assert state["view_model"]["nodes"]
    assert len(state["live_history"]["steps"]) == 30
    assert "http://" not in state and "https://cdn" not in page


def test_demo_unknown_task_fails_with_a_message(tmp_path):
    args = build_parser().parse_args(["demo", "--task", "nope", "--out", str(tmp_path / "x")])
    with pytest.raises((SystemExit, KeyError, ValueError), match="nope|Task|task"):
        run_demo(args, io.StringIO())


def test_inspect_module_factory(tmp_path, monkeypatch):
    (tmp_path / "mymodels.py").write_text(
        textwrap.dedent("""
        import jax.numpy as jnp
        import etp_viz
        def make():
            return etp_viz.nn.GRUCell(3, 4), jnp.zeros(3)
    """)
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = io.StringIO()
    args = build_parser().parse_args(["inspect", "mymodels:make", "--out", "gru.html"])
    assert run_inspect(args, out) == 0
    assert "Wr" in out.getvalue()
    assert (tmp_path / "gru.html").exists()


def test_module_runs_as_a_command(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "etp_viz", "--help"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 and "demo" in result.stdout
