"""mesh=: the batch split over devices with jax.sharding (issue 17).

The multi-device checks run ``tests/learn/sharded_run.py`` in a subprocess with 8 host CPU
devices (``XLA_FLAGS=--xla_force_host_platform_device_count=8``): sharded gradients equal the
single-device ones (float32, rel 1e-5), each trace leaf's addressable shard holds 1/8 of it,
weights stay replicated, a live session records the same losses, and the host reads of a frame
do not grow with its number of steps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import etp_viz
from tests.learn import archs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sharded():
    # the run's own XLA flags kept (the suite's -O0: 22% less CPU here), 8 host devices added
    flags = [
        flag
        for flag in os.environ.get("XLA_FLAGS", "").split()
        if not flag.startswith("--xla_force_host_platform_device_count")
    ]
    flags.append("--xla_force_host_platform_device_count=8")
    env = {**os.environ, "XLA_FLAGS": " ".join(flags)}
    env["JAX_PLATFORMS"] = "cpu"
    done = subprocess.run(
        [sys.executable, "-m", "tests.learn.sharded_run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("algorithm", ["d_rtrl", "es_d_rtrl", "eprop"])
def test_sharded_gradients_equal_one_device(sharded, algorithm):
    assert sharded["devices"] == 8
    result = sharded["gradients"][algorithm]
    assert result["rel"] <= 1e-5, result
    assert result["trace_fractions"] == [1 / 8]  # every trace leaf: 1/8 per device
    assert result["hidden_fraction"] == 1 / 8
    assert result["weights_replicated"]


def test_a_sharded_session_records_the_same_losses(sharded):
    assert sharded["session_steps"] == 32
    assert sharded["session_rel"] <= 1e-4
    assert sharded["session_device"] == "8 x cpu (mesh batch=8)"


def test_no_host_read_per_step(sharded):
    """A frame of 64 steps reads the device no more often than a frame of 16."""
    short, long = sharded["host_reads"]
    assert long == short, sharded["host_reads"]


def test_a_batch_that_does_not_split_is_refused(sharded):
    assert "does not split over the mesh's 8 'batch' devices" in sharded["indivisible"]


def one_device_mesh(names=("batch",)):
    return jax.sharding.Mesh(np.array(jax.devices()[:1]), names)


@pytest.mark.parametrize(
    ("mesh", "batch", "error", "match"),
    [
        ("not a mesh", 2, TypeError, "mesh must be a jax.sharding.Mesh"),
        (one_device_mesh(("data",)), 2, ValueError, "needs an axis named 'batch'"),
        (one_device_mesh(), None, ValueError, "compiled unbatched"),
    ],
)
def test_bad_meshes_say_what_is_wrong(mesh, batch, error, match):
    arch = archs.Arch(layers=(archs.Layer(),), batch=batch)
    with pytest.raises(error, match=match):
        alg = etp_viz.D_RTRL(archs.build(arch), mesh=mesh)
        alg.compile_graph(archs.inputs(arch, 1)[0])


def test_one_device_mesh_keeps_the_numbers():
    arch = archs.Arch(layers=(archs.Layer(rec="dense"),), batch=2, seed=1)
    xs = archs.inputs(arch, 3)
    from tests.learn.helpers import online_gradients

    plain = etp_viz.D_RTRL(archs.build(arch))
    plain.compile_graph(xs[0])
    meshed = etp_viz.D_RTRL(archs.build(arch), mesh=one_device_mesh())
    meshed.compile_graph(xs[0])
    for a, b in zip(
        jax.tree.leaves(online_gradients(plain, xs)), jax.tree.leaves(online_gradients(meshed, xs))
    ):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)
    meshed.reset_state()
    assert meshed.model.layers[0].h.value.sharding.spec == jax.sharding.PartitionSpec("batch")
