"""The README: its first screen says what the package is, shows a picture, the install and a
short example; it states the two commands (`make demo`, `make test`: `.ci/run` calls the
second); and its Python examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 2, "the README lost its Python examples"
    return blocks


def test_readme_states_the_two_commands():
    text = README.read_text()
    assert re.search(r"^make demo +#.*sets up.*runs the demo", text, re.M), "make demo line"
    assert re.search(r"^make test +#.*sets up and runs the tests", text, re.M), "make test line"


def test_readme_first_screen_is_for_users():
    head = README.read_text().split("```python", 1)[0]  # everything before the first example
    picture = re.search(r"!\[[^\]]+\]\(([^)]+\.png)\)", head)
    assert picture and (README.parent / picture.group(1)).stat().st_size > 20_000
    assert "pip install" in head and "## Install" in head
    for developer_word in ("XLA_FLAGS", "jaxlib", "pyenv", "steps_per_frame"):
        assert developer_word not in head, developer_word
    assert len(_python_blocks()[0].strip().splitlines()) <= 6  # the short example


def test_readme_python_examples_run(tmp_path, monkeypatch):
    first, closer = _python_blocks()[:2]
    monkeypatch.chdir(tmp_path)
    short: dict = {}
    exec(compile(first, str(README), "exec"), short)  # noqa: S102 - our own README
    assert short["ex"].session.history.num_steps == 0  # a live explorer, ready to Run
    namespace: dict = {}
    exec(compile(closer, str(README), "exec"), namespace)  # noqa: S102 - our own README
    assert (tmp_path / "run.html").stat().st_size > 10_000
    assert set(namespace["grads"]) == set(namespace["alg"].param_states)
    assert len(namespace["ex"].history.loss) == 5
