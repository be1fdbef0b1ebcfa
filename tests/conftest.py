"""Shared fixtures for the whole suite."""

from __future__ import annotations

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
