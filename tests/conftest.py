"""Shared fixtures for the whole suite."""

from __future__ import annotations

import jax
import pytest


@pytest.fixture
def x64():
    """Run a test in float64 (where exactness is claimed), restoring the previous setting."""
    previous = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", previous)
