"""`python -m etp_viz demo` and `inspect`, end to end (HTML written; summary printed)."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from etp_viz.__main__ import (
    build_parser,
    fidelity_explanation,
    output_path,
    run_demo,
    run_inspect,
)


def test_demo_writes_html_with_graph_and_history(tmp_path):
    out = io.StringIO()
    html = tmp_path / "demo.html"
    html.write_text("an older page")  # named by --out: replaced, and the run says so
    args = build_parser().parse_args(
        ["demo", "--steps", "100", "--fidelity-every", "100", "--out", str(html)]
    )
    assert run_demo(args, out) == 0
    text = out.getvalue()
    assert "relation(s)" in text and "Exclusions" in text
    assert f"Writes {html.resolve()} at the end (replacing the file there)." in text
    loss = re.search(r"final loss ([0-9.e+-]+)", text).group(1)
    assert text.count(loss) == 1, text  # each number once (the loss was printed twice)
    cosine = re.search(r"fidelity at step 100: cosine ([0-9.-]+)", text).group(1)
    assert text.count(cosine) == 1, text
    assert "What the cosine means: d_rtrl's online gradient against " in text
    assert f"Overwrote {html}" in text
    page = html.read_text(encoding="utf-8")
    state = json.loads(re.search(r'id="etp-state">(.*?)</script>', page, re.S).group(1))
    assert state["view_shell"]["nodes"]
    assert len(state["live_history"]["steps"]) == 100
    assert "http://" not in state and "https://cdn" not in page


def test_demo_without_out_keeps_an_existing_page(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "demo.html").write_text("a student's page")
    args = build_parser().parse_args(["demo", "--steps", "1"])
    with pytest.raises(SystemExit, match=r"demo.html already exists.*--out demo.html.*--force"):
        run_demo(args, io.StringIO())  # refused before compiling anything
    assert (tmp_path / "demo.html").read_text() == "a student's page"
    assert output_path(None, force=True) == Path("demo.html")
    assert output_path("demo.html", force=False) == Path("demo.html")  # named: replaced
    (tmp_path / "demo.html").unlink()
    assert output_path(None, force=False) == Path("demo.html")


def _claim(kind, path):
    return SimpleNamespace(kind=kind, weight_path=path, reason="")


def test_a_low_fidelity_cosine_is_explained_from_the_claims():
    claims = {
        "rnn.W.weight": _claim("approximate", ("rnn", "W", "weight")),
        "rnn.W.weight.bias": _claim("approximate", ("rnn", "W", "weight")),
        "out.weight": _claim("exact", ("out", "weight")),
    }
    record = {
        "cosine": 0.468,
        "window": 100,
        "per_param": {"rnn.W.weight": {"cosine": 0.41}, "out.weight": {"cosine": 0.97}},
    }
    text = fidelity_explanation(record, "d_rtrl", claims, "the exact gradient (one episode)")
    assert "d_rtrl's online gradient against the exact gradient (one episode)" in text
    assert "below 1 because d_rtrl drops terms of the exact gradient on rnn.W.weight " in text
    assert "out.weight" not in text.split("furthest")[0]  # an exact weight is not blamed
    assert "furthest from BPTT in this window: rnn.W.weight (cosine 0.410)" in text
    assert "0.468" not in text  # the summary line prints the cosine; this says why
    default = fidelity_explanation(record, "d_rtrl", claims)
    assert "against BPTT over the last 100 steps" in default


def test_a_high_or_unexplained_cosine_says_so():
    exact = {"out.weight": _claim("exact", ("out", "weight"))}
    assert "Close to 1: rtrl follows the reference." in fidelity_explanation(
        {"cosine": 0.999, "window": 20}, "rtrl", exact
    )
    assert "unexpected" in fidelity_explanation({"cosine": 0.5, "window": 20}, "rtrl", exact)


def test_a_weight_that_is_not_learned_is_named_as_such():
    claims = {"rnn.Wr.weight": _claim("none", ("rnn", "Wr", "weight"))}
    record = {"cosine": 0.5, "window": 22, "per_param": {"rnn.Wr.weight": {"cosine": 0.0}}}
    text = fidelity_explanation(record, "d_rtrl", claims)
    assert "rnn.Wr.weight (cosine 0.000; not learned online: its online gradient is 0)" in text


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


def test_module_runs_as_a_command():
    result = subprocess.run(
        [sys.executable, "-m", "etp_viz", "--help"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 and "demo" in result.stdout


def test_help_is_plain_text_with_one_line_per_command(capsys):
    text = build_parser().format_help()
    lines = text.splitlines()
    for command in ("demo", "inspect", "check"):
        line = next((x for x in lines if re.match(rf"^ +{command} +\S", x)), None)
        assert line, (command, text)  # listed, with its help on the same line
        assert not lines[lines.index(line) + 1].startswith(" " * 6), text  # not wrapped
    pages = [text]
    for command in ("demo", "inspect", "check"):
        with pytest.raises(SystemExit):
            build_parser().parse_args([command, "--help"])
        pages.append(capsys.readouterr().out)
    for page in pages:
        assert page.strip() and "``" not in page and ".. code-block" not in page, page
