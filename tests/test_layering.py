"""The house rules: layers import one way, no import cycles, small folders and modules, and
only the explorer needs the widget packages."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "etp_viz"

#: layer -> the layers it may import (the arrows of docs/architecture.md; `_compat` is shared)
ALLOWED = {
    "_compat": set(),
    "ops": {"_compat"},
    "nn": {"ops", "_compat"},
    "compiler": {"ops", "_compat"},
    "learn": {"ops", "compiler", "_compat"},
    "memory": {"learn", "compiler", "nn", "ops", "_compat"},
    "tasks": {"nn", "ops", "_compat"},
    "live": {"learn", "compiler", "nn", "ops", "tasks", "_compat"},
    "view": {"compiler", "learn", "ops", "_compat"},
    "plot": {"live", "_compat"},
    "testing": {"compiler", "_compat"},
}
LAYERS = (*ALLOWED, "explorer", "__main__")
WIDGET_PACKAGES = ("anywidget", "ipywidgets", "traitlets")
MAX_MODULES_PER_FOLDER = 12
MAX_MODULE_LINES = 600


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(path: Path) -> set[str]:
    """Every module a source file imports anywhere (function-level imports count), with
    relative imports resolved and ``from package import module`` read as the module."""
    modules = _sources()
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
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
            subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules]
            found.update(subs or [target])
            if len(subs) < len(node.names):
                found.add(target)
    return found


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "etp_viz" and len(parts) > 1 else None


def test_every_module_belongs_to_a_layer():
    unknown = {_layer(m) for m in _sources() if m != "etp_viz"} - set(LAYERS)
    assert not unknown, f"modules outside the layer table {sorted(unknown)}: add them to ALLOWED"


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_point_one_way(layer):
    bad = []
    for module, path in _sources().items():
        if _layer(module) != layer:
            continue
        for target in sorted(_imports(path)):
            other = _layer(target)
            if target == "etp_viz" or (other and other != layer and other not in ALLOWED[layer]):
                bad.append(f"{module} imports {target}")
    assert not bad, f"'{layer}' may import only {sorted(ALLOWED[layer])}:\n" + "\n".join(bad)


def test_no_import_cycles():
    sources = _sources()
    graph = {
        m: sorted(t for t in _imports(p) if t in sources and t != m) for m, p in sources.items()
    }
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    cycles: list[list[str]] = []

    def visit(module: str, stack: list[str]) -> None:
        state[module] = 1
        for target in graph[module]:
            if state.get(target) == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target, [*stack, target])
        state[module] = 2

    for module in graph:
        if module not in state:
            visit(module, [module])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_folders_and_modules_stay_small():
    too_many = {
        str(d.relative_to(PACKAGE.parent)): n
        for d in [PACKAGE, *[p for p in PACKAGE.rglob("*") if p.is_dir()]]
        if (n := len([p for p in d.glob("*.py") if p.name != "__init__.py"]))
        > MAX_MODULES_PER_FOLDER
    }
    too_long = {
        str(p.relative_to(PACKAGE.parent)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not too_many, f"folders with more than {MAX_MODULES_PER_FOLDER} modules: {too_many}"
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines: {too_long}"


def test_only_the_explorer_imports_widget_packages():
    bad = [
        f"{module} imports {target}"
        for module, path in _sources().items()
        if _layer(module) != "explorer"
        for target in _imports(path)
        if target.split(".")[0] in WIDGET_PACKAGES
    ]
    assert not bad, "\n".join(bad)


def _run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


def test_engine_imports_without_the_widget_stack():
    loaded = json.loads(_run("import json, sys, etp_viz\nprint(json.dumps(sorted(sys.modules)))"))
    forbidden = ("anywidget", "ipywidgets", "etp_viz.explorer", "etp_viz.live", "etp_viz.view")
    bad = [m for m in loaded for f in forbidden if m == f or m.startswith(f + ".")]
    assert not bad, f"`import etp_viz` also imported {bad}"


def test_a_live_session_runs_without_the_widget_packages():
    """A course's autograder: `etp_viz.live.Session` with anywidget/ipywidgets unimportable."""
    code = """
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("anywidget", "ipywidgets"):
                    raise ImportError(f"{name} is blocked by the test")
        sys.meta_path.insert(0, Block())
        import etp_viz
        task = etp_viz.tasks.get_task("sine")
        session = etp_viz.live.Session(task.suggested_model(), task.example_input(), task=task)
        session.step(3)
        etp_viz.view.build_view_model(session.algorithm.graph).to_json()
        print(len(session.history.loss), "explorer" in str(sorted(sys.modules)))
    """
    assert _run(code) == "3 False"
