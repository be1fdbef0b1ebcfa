"""Shared fixtures for the whole suite."""

from __future__ import annotations

import socket
import sys

import jax
import pytest

# the suite's one closeness helper lives with the oracles; re-exported for older imports
from tests.oracles import tree_allclose as tree_allclose  # noqa: F401


@pytest.fixture
def x64():
    """Run a test in float64 (where exactness is claimed), restoring the previous setting."""
    previous = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", previous)


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
