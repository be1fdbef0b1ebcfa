"""The package as a user gets it: from a wheel or an sdist, with and without extras.

**Offline, every leg** (``dist``): a clean checkout (a ``git clone --local`` of this repository,
with the working tree's uncommitted edits copied over it: what the next commit would ship) plus
the working tree's built front end is built into a wheel and an sdist with this interpreter's
setuptools, no build isolation, no index, no npm. Their metadata is what an index shows
(classifiers, project URLs, license, extras, ``twine check --strict``), both carry the license.
The wheel is installed with **no extras** into a fresh venv that holds only the core
dependencies (their closure, read from the installed distributions' metadata and linked in from
this venv: no index, and none of the widget packages), where ``python -m etp_viz demo`` writes
its page and ``show()`` names ``pip install "etp-viz[explorer]"``.

**With npm and the index** (``built``, slow, browser): a fresh venv builds the wheel
(setup.py's hook runs ``npm ci`` and ``npm run build`` in ``js/``) and the sdist. The sdist must
carry the built bundle and build a wheel with no npm on the PATH; the wheel is installed with
``[explorer]`` into the fresh venv, whose ``show(...).save_html`` page Chromium renders offline.
Skipped when git, npm or chromium is missing. About a minute, most of it ``pip install``.
"""

from __future__ import annotations

import email.parser
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

import etp_viz
from tests.explorer.browser.conftest import (  # noqa: F401  (fixtures used below)
    browser,
    browser_type_launch_args,
    open_page,
)

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


@pytest.mark.slow
@pytest.mark.browser
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


#: JS: what the saved page's graph draws: the view-model id of each drawn node with its text,
#: and the cells (their drawn node's id, ports and hidden states)
DRAWN = """() => { const app = document.querySelector('.etp-explorer').parentElement.etpExplorer;
  const nodes = [...document.querySelectorAll('.etp-graph-pane svg g.node')].map((g) => {
    const ref = app.graph.dotToVm.get(g.id);
    return { id: ref ? ref.id : null, text: g.textContent }; });
  const cells = [...app.index.clusters.values()].filter((c) => c.kind === 'cell')
    .map((c) => ({ id: c.id, dot: app.graph.clusterToDot.get(c.id), ports: c.ports,
      hidden: c.hidden_paths }));
  return { nodes, cells }; }"""
#: JS: click the drawn node of cell `id` (what opens its equations)
OPEN_CELL = """(id) => {
  const app = document.querySelector('.etp-explorer').parentElement.etpExplorer;
  document.getElementById(app.graph.clusterToDot.get(id))
    .dispatchEvent(new MouseEvent('click', {bubbles: true})); }"""


@pytest.mark.slow
@pytest.mark.browser
def test_wheel_installs_with_explorer_and_renders_offline(built, request):
    """The wheel with ``[explorer]``: ``show(...).save_html`` in the fresh venv writes a page
    that Chromium renders from file:// with no request and no error. Its first view folds the
    GRU into one ``cell`` node (issue 41) whose ports are the cell's three weights, between the
    input, the readout's weight op and the output; a click on the cell opens its equations
    (the installed bundle lays the graph out again, offline)."""
    assert set(BUNDLES) <= set(zipfile.ZipFile(built.wheel).namelist())
    run([built.python, "-m", "pip", "install", "-q", f"{built.wheel}[explorer]"])
    page_path = built.root / "page.html"
    # cwd outside the repository: the installed package is imported, not the checkout
    where = run([built.python, "-c", RENDER, str(page_path)], cwd=built.root)
    assert str(built.root / "venv") in where, where
    # file:// only; any other request is aborted and counted
    page = request.getfixturevalue("open_page")(None)
    p = page.page
    p.goto(page_path.as_uri())
    p.wait_for_selector(".etp-graph-pane svg g.node", timeout=30000)
    drawn = p.evaluate(DRAWN)
    weights = ["rnn.Wz.weight", "rnn.Wr.weight", "rnn.Wh.weight"]
    assert [(c["id"], sorted(c["ports"]), c["hidden"]) for c in drawn["cells"]] == [
        ("cell:rnn", sorted(weights), ["rnn.h"])
    ], drawn["cells"]
    ids = [n["id"] for n in drawn["nodes"]]
    assert {"in:0", "cell:rnn", "out:0"} <= set(ids), ids
    texts = {n["id"]: n["text"] for n in drawn["nodes"]}
    assert "GRUCell" in texts["cell:rnn"], texts
    assert all(w in texts["cell:rnn"] for w in weights), texts  # the ports' tooltips
    assert any("out.weight" in t for i, t in texts.items() if i.startswith("e")), texts
    listed = p.eval_on_selector_all("[data-weight]", "es => es.map((e) => e.dataset.weight)")
    assert sorted(set(listed)) == sorted([*weights, "out.weight"]), listed
    # the cell opens: its equations (the GRU's gates) are drawn in its place
    p.evaluate(OPEN_CELL, "cell:rnn")
    p.wait_for_function(
        "(n) => document.querySelectorAll('.etp-graph-pane svg g.node').length > n",
        arg=len(ids) + 5,
        timeout=30000,
    )
    opened = {n["id"]: n["text"] for n in p.evaluate(DRAWN)["nodes"]}
    assert "cell:rnn" not in opened and {"in:0", "out:0"} <= set(opened), sorted(opened)
    ops = " | ".join(opened.values())
    assert "logistic" in ops and "tanh" in ops, ops
    for w in weights:  # each port is now its own weight op
        assert any(t.lstrip().startswith("weight op") and w in t for t in opened.values()), w
    assert page.aborted == [] and page.errors == [], (page.aborted, page.errors)


# --- offline: metadata, license, the core install ---------------------------------------------

#: Distributions of the ``[explorer]`` extra: the core install must hold none of them.
WIDGET_DISTRIBUTIONS = ("anywidget", "ipywidgets", "traitlets")
CORE_SCRIPT = """
import sys
import warnings

import etp_viz
from etp_viz.explorer import export
from etp_viz.explorer.headless import WIDGET_IMPORT_ERROR

assert WIDGET_IMPORT_ERROR is not None, "the widget packages are importable"
task = etp_viz.tasks.get_task("sine")
try:
    etp_viz.show(task.suggested_model(), task.example_input(), task=task)
except ImportError as error:
    print("show:", error)
else:
    raise AssertionError("show() ran without the widget packages")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    graph = etp_viz.compile_etrace_graph(task.suggested_model(), task.example_input())
print("page:", export.save_html(etp_viz.Explorer(graph), sys.argv[1]))
"""


def requirement_closure(requirements: list[str]) -> dict[str, importlib.metadata.Distribution]:
    """The installed distributions that ``requirements`` (no extras) need, transitively,
    by normalised name; a requirement this environment cannot meet fails the test."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    found: dict[str, importlib.metadata.Distribution] = {}
    todo = list(requirements)
    while todo:
        requirement = Requirement(todo.pop())
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        try:
            found[name] = importlib.metadata.distribution(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            pytest.fail(f"core dependency {requirement} is not installed in {sys.prefix}")
        assert requirement.specifier.contains(found[name].version, prereleases=True), (
            f"{requirement} but {found[name].version} is installed"
        )
        todo.extend(found[name].requires or [])
    return found


def link_distributions(distributions, site_packages: Path) -> None:
    """Make ``distributions`` importable in another venv: each top-level file or folder that
    a distribution's RECORD names is linked into ``site_packages`` (scripts are left out)."""
    for dist in distributions:
        assert dist.files is not None, f"{dist.metadata['Name']} has no RECORD"
        for top in sorted({f.parts[0] for f in dist.files if f.parts[0] != ".."}):
            target = site_packages / top
            if not target.exists():
                target.symlink_to(Path(dist.locate_file(top)).resolve())


def wheel_metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(archive.read(name).decode())


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """The wheel and the sdist of a clean checkout, built offline with this interpreter."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout (or no git): nothing to clone")
    missing = [name for name in BUNDLES if not (REPO / name).is_file()]
    if missing:
        pytest.fail(f"{missing} not built: run scripts/setup.sh (builds js/ with npm)")
    from packaging.version import Version

    if Version(importlib.metadata.version("setuptools")) < Version("77"):
        pytest.fail("setuptools >= 77 is needed to build (it is in the test extra)")
    root = tmp_path_factory.mktemp("offline-dist")
    source = clean_checkout(root / "src")
    for name in BUNDLES:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, source / name)
    out = root / "dist"
    env = {**os.environ, "ETP_VIZ_SKIP_JS": "1"}
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    run([*pip, "--no-index", "-w", out, source], env=env)
    sdist_code = f"from setuptools import build_meta as b; print(b.build_sdist({str(out)!r}))"
    built_sdist = subprocess.run(
        [sys.executable, "-c", sdist_code], cwd=source, env=env, capture_output=True, text=True
    )
    assert built_sdist.returncode == 0, built_sdist.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return SimpleNamespace(root=root, wheel=wheel, sdist=sdist, sdist_log=built_sdist.stderr)


def test_metadata_is_ready_for_an_index(dist):
    trove = pytest.importorskip("trove_classifiers")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    meta = wheel_metadata(dist.wheel)
    assert meta["Name"] == "etp-viz" and meta["Version"] == etp_viz.__version__
    assert meta["License-Expression"] == "Apache-2.0" and meta["License-File"] == "LICENSE"
    assert "License ::" not in " ".join(meta.get_all("Classifier")), "PEP 639: expression only"
    classifiers = meta.get_all("Classifier")
    assert set(classifiers) <= trove.classifiers, set(classifiers) - trove.classifiers
    floor = re.fullmatch(r">=3\.(\d+)", meta["Requires-Python"]).group(1)
    versions = {int(c.rsplit(".", 1)[1]) for c in classifiers if re.search(r":: 3\.\d+$", c)}
    assert min(versions) == int(floor), (versions, meta["Requires-Python"])
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert {"Source", "Documentation", "Changelog", "Issues"} <= set(urls), urls
    assert meta.get_content_type() == "text/plain" and meta["Description-Content-Type"] == (
        "text/markdown"
    )
    assert set(meta.get_all("Provides-Extra")) >= {"explorer", "test", "braintrace"}
    core = [r for r in meta.get_all("Requires-Dist") if "extra ==" not in r]
    assert sorted(core) == sorted(project["dependencies"]), core
    assert not any(w in " ".join(core) for w in WIDGET_DISTRIBUTIONS), core
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert f"## {etp_viz.__version__} " in changelog, "CHANGELOG.md has no section for it"


def test_wheel_and_sdist_carry_the_license(dist):
    license_text = (REPO / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0" in license_text
    with zipfile.ZipFile(dist.wheel) as archive:
        names = [n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert len(names) == 1, archive.namelist()
        assert archive.read(names[0]).decode() == license_text
    with tarfile.open(dist.sdist) as archive:
        names = {n.split("/", 1)[1]: n for n in archive.getnames() if "/" in n}
        assert {"LICENSE", "README.md", "pyproject.toml", "setup.py"} <= set(names)
        assert archive.extractfile(names["LICENSE"]).read().decode() == license_text
        pkg_info = email.parser.Parser().parsestr(
            archive.extractfile(names["PKG-INFO"]).read().decode()
        )
    assert pkg_info["License-File"] == "LICENSE"
    assert "warning" not in dist.sdist_log.lower(), dist.sdist_log[-3000:]


def test_twine_check_is_clean(dist):
    pytest.importorskip("twine")
    checked = run([sys.executable, "-m", "twine", "check", "--strict", dist.wheel, dist.sdist])
    assert checked.count("PASSED") == 2, checked


def test_core_install_runs_the_demo_without_the_widget(dist):
    """No extras: the CLI demo writes its page, ``show()`` names the extra to install."""
    meta = wheel_metadata(dist.wheel)
    core = [r for r in meta.get_all("Requires-Dist") if "extra ==" not in r]
    closure = requirement_closure(core)
    assert not set(WIDGET_DISTRIBUTIONS) & set(closure), sorted(closure)
    venv = dist.root / "core-venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    (site_packages,) = (venv / "lib").glob("python3.*/site-packages")
    link_distributions(closure.values(), site_packages)
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    run([*pip, "install", "-q", "--no-deps", "--no-index", dist.wheel])
    run([*pip, "check"])  # the wheel's core requirements hold in the venv
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"JAX_PLATFORMS": "cpu"}
    # cwd outside the repository: the installed package is imported, not the checkout
    demo = run(
        [python, "-m", "etp_viz", "demo", "--steps", "50", "--out", "demo.html"],
        cwd=dist.root,
        env=env,
    )
    assert "Online learning unavailable" not in demo and "final loss" in demo, demo
    page = (dist.root / "demo.html").read_text()
    assert '"live_history"' in page and '"view_shell"' in page
    out = run([python, "-c", CORE_SCRIPT, "static.html"], cwd=dist.root, env=env)
    assert 'pip install "etp-viz[explorer]"' in out, out
    assert (dist.root / "static.html").stat().st_size > 10_000
