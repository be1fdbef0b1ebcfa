"""The package as a user gets it: ``pip install "etp-viz[explorer]"`` from a wheel or an sdist.

From a clean checkout (a ``git clone --local`` of this repository, with the working tree's
uncommitted edits copied over it: what the next commit would ship, and nothing ignored such as
``etp_viz/explorer/static/`` or ``js/node_modules/``) a fresh venv builds the wheel (setup.py's
hook runs ``npm ci`` and ``npm run build`` in ``js/``) and the sdist. The sdist must carry the
built bundle and build a wheel with no npm on the PATH; the wheel is installed with
``[explorer]`` into the fresh venv, whose ``show(...).save_html`` page Chromium renders offline.
Skipped when git, npm or chromium is missing. About a minute, most of it ``pip install``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.explorer.browser.conftest import (  # noqa: F401  (fixtures used below)
    browser,
    browser_type_launch_args,
    open_page,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

REPO = Path(__file__).resolve().parents[1]
BUNDLES = ("etp_viz/explorer/static/widget.js", "etp_viz/explorer/static/widget.standalone.js")
RENDER = """
import sys
import brainstate
import jax.numpy as jnp
import etp_viz

class Net(brainstate.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = etp_viz.nn.GRUCell(3, 8)
        self.out = etp_viz.nn.Linear(8, 2)

    def update(self, x):
        return self.out(self.rnn(x))

model = Net()
brainstate.nn.init_all_states(model)
etp_viz.show(model, jnp.zeros(3)).save_html(sys.argv[1])
print(etp_viz.__file__)
"""


def run(args, **kwargs) -> str:
    result = subprocess.run(args, capture_output=True, text=True, timeout=600, **kwargs)
    assert result.returncode == 0, f"{args}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def clean_checkout(dest: Path) -> Path:
    """A clone of the repository with the working tree's tracked and untracked, not ignored,
    files copied over it (files deleted in the working tree are deleted)."""
    run(["git", "clone", "--quiet", "--local", str(REPO), str(dest)])
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO)
    for name in filter(None, listed.split("\0")):
        source, target = REPO / name, dest / name
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        elif target.is_file():
            target.unlink()
    return dest


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    for tool in ("git", "npm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed: the wheel cannot be built from a checkout")
    if shutil.which("chromium") is None:
        pytest.skip("Debian chromium is not installed (scripts/setup.sh installs it as root)")
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: nothing to clone")
    root = tmp_path_factory.mktemp("packaging")
    source = clean_checkout(root / "src")
    venv = root / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    run([python, "-m", "pip", "install", "-q", "setuptools>=77", "wheel"])
    dist = root / "dist"
    env = {**os.environ, "npm_config_prefer_offline": "true"}
    run([python, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, source], env=env)
    sdist_code = f"from setuptools import build_meta as b; print(b.build_sdist({str(dist)!r}))"
    run([python, "-c", sdist_code], cwd=source, env=env)
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    return SimpleNamespace(root=root, python=python, wheel=wheel, sdist=sdist)


def test_sdist_carries_the_bundle_and_builds_without_npm(built):
    with tarfile.open(built.sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert set(BUNDLES) <= names, sorted(names)
    assert not any(name.startswith("js/") for name in names)
    no_npm = {**os.environ, "PATH": str(built.python.parent)}  # the venv's python, no node
    out = built.root / "from-sdist"
    pip = [built.python, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    run([*pip, "-w", out, built.sdist], env=no_npm)
    (wheel,) = out.glob("*.whl")
    assert set(BUNDLES) <= set(zipfile.ZipFile(wheel).namelist())


def test_wheel_installs_with_explorer_and_renders_offline(built, request):
    assert set(BUNDLES) <= set(zipfile.ZipFile(built.wheel).namelist())
    run([built.python, "-m", "pip", "install", "-q", f"{built.wheel}[explorer]"])
    page_path = built.root / "page.html"
    # cwd outside the repository: the installed package is imported, not the checkout
    where = run([built.python, "-c", RENDER, str(page_path)], cwd=built.root)
    assert str(built.root / "venv") in where, where
    # file:// only; any other request is aborted and counted
    page = request.getfixturevalue("open_page")(None)
    page.page.goto(page_path.as_uri())
    page.page.wait_for_selector(".etp-graph-pane svg g.node", timeout=30000)
    assert page.page.eval_on_selector_all(".etp-graph-pane svg g.node", "ns => ns.length") > 5
    assert page.aborted == [] and page.errors == [], (page.aborted, page.errors)
