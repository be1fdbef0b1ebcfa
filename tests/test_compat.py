"""Version quirks in ``etp_viz._compat``: jaxlib 0.10's slow YNNPACK reductions on CPU."""

from __future__ import annotations

import subprocess
import sys

import pytest

from etp_viz import _compat

FLAG = "xla_cpu_experimental_ynn_fusion_type"


@pytest.fixture
def affected(monkeypatch):
    monkeypatch.setattr(_compat, "YNN_SLOW_REDUCE", True)


def test_the_flag_is_added_before_a_backend_starts(affected, monkeypatch):
    from jax._src import xla_bridge

    monkeypatch.setattr(xla_bridge, "_backends", {})
    environ = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    assert _compat.avoid_slow_cpu_reductions(environ) == "applied"
    assert (
        environ["XLA_FLAGS"]
        == f"--xla_force_host_platform_device_count=2 {_compat.YNN_FUSION_FLAG}"
    )


def test_the_users_flags_and_the_opt_out_are_kept(affected):
    environ = {"XLA_FLAGS": f"--{FLAG}=individual_dot,reduce"}
    assert _compat.avoid_slow_cpu_reductions(environ) == "kept"
    assert environ == {"XLA_FLAGS": f"--{FLAG}=individual_dot,reduce"}
    environ = {"ETP_VIZ_XLA_FLAGS": "keep"}
    assert _compat.avoid_slow_cpu_reductions(environ) == "kept" and "XLA_FLAGS" not in environ


def test_nothing_changes_once_a_backend_runs(affected, monkeypatch):
    from jax._src import xla_bridge

    monkeypatch.setattr(xla_bridge, "_backends", {"cpu": object()})
    environ: dict[str, str] = {}
    assert _compat.avoid_slow_cpu_reductions(environ) == "too late" and environ == {}


def test_nothing_changes_on_a_jaxlib_without_the_cliff(monkeypatch):
    monkeypatch.setattr(_compat, "YNN_SLOW_REDUCE", False)
    environ: dict[str, str] = {}
    assert _compat.avoid_slow_cpu_reductions(environ) == "not needed" and environ == {}


PROBE = """
import etp_viz, jax, jax.numpy as jnp
g = jnp.ones((100, 288, 256), jnp.float32)
hlo = jax.jit(lambda g: jnp.sum(g, 0)).lower(g).compile().as_text()
print(etp_viz.XLA_CPU_REDUCTIONS, "ynn" in hlo)
"""


def test_import_keeps_leading_axis_sums_out_of_ynnpack():
    """Structural: in a fresh process, ``import etp_viz`` first, the sum over the leading
    axis compiles without a YNNPACK fusion exactly where the jaxlib has the cliff."""
    env = {"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    done, has_ynn = out.stdout.strip().splitlines()[-1].rsplit(maxsplit=1)
    if _compat.YNN_SLOW_REDUCE:
        assert (done, has_ynn) == ("applied", "False"), out.stdout
    else:
        assert done == "not needed", out.stdout
