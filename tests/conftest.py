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


def tree_allclose(actual, expected, *, rtol: float = 1e-10, atol: float = 1e-12) -> bool:
    """True when two pytrees have the same structure, shapes and values within tolerance.

    Defaults are float64 tolerances; pass looser ones explicitly for float32.
    """
    import numpy as np

    leaves_a, tree_a = jax.tree_util.tree_flatten(actual)
    leaves_e, tree_e = jax.tree_util.tree_flatten(expected)
    if tree_a != tree_e:
        return False
    return all(
        np.shape(a) == np.shape(e) and np.allclose(a, e, rtol=rtol, atol=atol)
        for a, e in zip(leaves_a, leaves_e)
    )
