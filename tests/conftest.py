"""Shared fixtures for the whole suite."""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import Iterator

import jax
import pytest

# the suite's one closeness helper lives with the oracles; re-exported for older imports
from tests.oracles import tree_allclose as tree_allclose  # noqa: F401


@contextlib.contextmanager
def float64() -> Iterator[None]:
    """float64 inside the block (where exactness is claimed), the previous setting after."""
    previous = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", previous)


@pytest.fixture
def x64():
    """Run a test in float64 (where exactness is claimed), restoring the previous setting."""
    with float64():
        yield


@pytest.fixture(scope="module")
def x64_module():
    """float64 for a whole module: for module-scoped fixtures that build float64 models once
    (a function-scoped ``x64`` is set up after them)."""
    with float64():
        yield


# -- scheduling on pytest-xdist workers (scripts/run_tests.sh: --dist loadscope) ---------------
# loadscope hands each worker a module at a time, by default the modules with the most tests
# first: the slowest modules, a single long property test each, came last and one worker ran them
# alone at the end. Instead the modules measured slowest go first (docs/development.md, "The CI's
# time budget"), then the others as before, and each notebook is a unit of its own (one module of
# ~6 min otherwise). A module missing here (renamed) only loses its place in the queue.
SLOW_FIRST = (
    "tests/learn/test_claims_property.py",
    "tests/learn/test_influence_claims_property.py",
    "tests/test_notebooks.py::test_notebook_runs[06-online-learning-algorithms.ipynb]",
    "tests/test_notebooks.py::test_notebook_runs[07-why-online-learners-fall-behind.ipynb]",
    "tests/test_notebooks.py::test_notebook_runs[05-drtrl-vs-es-drtrl-vs-bptt.ipynb]",
    "tests/test_notebooks.py::test_notebook_runs[01-quickstart.ipynb]",
    "tests/test_task_lessons.py",
    "tests/learn/test_sharding.py",
    "tests/view/test_view_model.py",
    "tests/live/test_compare.py",
)


def _xdist_unit(nodeid: str) -> str:
    """The unit a worker runs at a time: a notebook, else the module (or class)."""
    if nodeid.startswith("tests/test_notebooks.py::test_notebook_runs["):
        return nodeid
    return nodeid.rsplit("::", 1)[0]


def _slow_first_key(nodeid: str) -> int:
    unit = _xdist_unit(nodeid)
    return next((i for i, slow in enumerate(SLOW_FIRST) if unit == slow), len(SLOW_FIRST))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On xdist workers (the same order on each): the units of SLOW_FIRST first, in its order,
    then the others with the most tests first (xdist's own order; stable sorts)."""
    if not hasattr(config, "workerinput"):  # (a worker's own option says dist "no")
        return
    count: dict[str, int] = {}
    for item in items:
        count[_xdist_unit(item.nodeid)] = count.get(_xdist_unit(item.nodeid), 0) + 1
    items.sort(key=lambda item: -count[_xdist_unit(item.nodeid)])
    items.sort(key=lambda item: _slow_first_key(item.nodeid))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # pragma: no cover - xdist hook
    """loadscope in the workers' collection order (above), a notebook per unit."""
    if config.getoption("dist", "no") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SlowFirstScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _xdist_unit(nodeid)

    config.option.loadscopereorder = False
    return SlowFirstScheduling(config, log)


def pytest_configure(config: pytest.Config) -> None:
    """solara's test server (the comm browser test) listens on a fixed default port: give it a
    free one, so two test runs on one machine do not collide (``--solara-port`` still wins)."""
    if getattr(config.option, "solara_port", None) is None:
        return
    if any(arg.startswith("--solara-port") for arg in sys.argv):
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        config.option.solara_port = probe.getsockname()[1]
