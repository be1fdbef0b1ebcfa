r"""Online learning over several devices: the batch split with ``jax.sharding``.

An algorithm built with ``mesh=`` (a :class:`jax.sharding.Mesh` with an axis named
``"batch"``) places every state whose leading axis is the batch -- hidden states, eligibility
traces, ES-D-RTRL's input and output traces -- as ``NamedSharding(mesh, P("batch"))``: each
device holds ``1/D`` of every such leaf. Weights and everything else are replicated. JAX's
SPMD partitioner does the rest inside each jitted step: the per-sample trace updates run where
their shard lives, and the weight gradient's contraction over the batch becomes a local sum
plus one all-reduce. No home-made collective, and no host transfer per step.

Examples
--------
>>> mesh = jax.sharding.Mesh(np.array(jax.devices()), ("batch",))   # doctest: +SKIP
>>> alg = etp_viz.D_RTRL(model, mesh=mesh)                          # doctest: +SKIP
>>> alg.compile_graph(x0)        # states and traces now live sharded  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import brainstate
import jax

__all__ = ["BATCH_AXIS", "check_mesh", "describe_mesh", "place_states"]

#: the mesh axis the batch is split over
BATCH_AXIS = "batch"


def check_mesh(mesh: Any) -> Any:
    """``mesh`` itself when it is a ``jax.sharding.Mesh`` with a ``"batch"`` axis (or None)."""
    if mesh is None:
        return None
    if not isinstance(mesh, jax.sharding.Mesh):
        raise TypeError(
            f"mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}; e.g. "
            "jax.sharding.Mesh(np.array(jax.devices()), ('batch',))"
        )
    if BATCH_AXIS not in mesh.axis_names:
        raise ValueError(
            f"the mesh needs an axis named {BATCH_AXIS!r} (the batch is split over it); it has "
            f"{tuple(mesh.axis_names)}"
        )
    return mesh


def place_states(owner: Any, mesh: Any, batch: int | None) -> None:
    """Put every state of ``owner`` (a model or an algorithm and its model) on ``mesh``:
    batch-leading leaves split over ``"batch"``, the rest replicated."""
    devices = mesh.shape[BATCH_AXIS]
    if batch is None:
        raise ValueError(
            "mesh= splits the batch over devices, but the model was compiled unbatched: "
            "initialise it with a batch (brainstate.nn.init_all_states(model, batch_size=B)) "
            "and compile on a batched input"
        )
    if batch % devices:
        raise ValueError(
            f"the batch ({batch}) does not split over the mesh's {devices} '{BATCH_AXIS}' "
            f"devices: use a batch that is a multiple of {devices}"
        )
    P = jax.sharding.PartitionSpec
    split = jax.sharding.NamedSharding(mesh, P(BATCH_AXIS))
    replicated = jax.sharding.NamedSharding(mesh, P())

    def put(leaf: Any, is_param: bool) -> Any:
        shape = getattr(leaf, "shape", None)
        if shape is None:
            return leaf
        sharded = not is_param and len(shape) >= 1 and shape[0] == batch
        return jax.device_put(leaf, split if sharded else replicated)

    for state in brainstate.graph.states(owner).values():
        is_param = isinstance(state, brainstate.ParamState)
        state.value = jax.tree.map(lambda leaf, p=is_param: put(leaf, p), state.value)


def describe_mesh(mesh: Any) -> str:
    """``"8 x cpu (mesh batch=8)"``-style text for the explorer's status line."""
    if mesh is None:
        return str(jax.devices()[0])
    devices = mesh.devices.reshape(-1)
    kinds = sorted({d.platform for d in devices})
    axes = ", ".join(f"{name}={size}" for name, size in mesh.shape.items())
    return f"{len(devices)} x {'/'.join(kinds)} (mesh {axes})"
