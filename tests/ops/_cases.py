"""One small case per built-in primitive family x bias setting (build inside an x64 test)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from saiunit import sparse as ss

from etp_viz import ops
from etp_viz.ops.sparse import SparsePattern


@dataclasses.dataclass
class Case:
    name: str
    prim: Any
    x: Any
    weights: dict
    params: dict
    #: integer inputs (embedding ids) are drawn from ``[0, id_range)``
    id_range: int | None = None

    def operands(self, weights: dict | None = None) -> list:
        """Invars in order: x (if any) then trainable inputs sorted by invar index."""
        weights = self.weights if weights is None else weights
        index = ops.get_trainable_invars(self.prim, self.params)
        ordered = [weights[k] for k in sorted(index, key=index.get)]
        return ordered if self.x is None else [self.x, *ordered]

    def apply(self, weights: dict | None = None, x: Any = None) -> jax.Array:
        ops_ = self.operands(weights)
        if self.x is not None and x is not None:
            ops_[0] = x
        return self.prim.bind(*ops_, **self.params)

    def random_inputs(self, key: Any, steps: int) -> jax.Array:
        """``(steps, *x.shape)`` inputs: normal, or ids in ``[0, id_range)`` for integer x."""
        shape = (steps, *self.x.shape)
        if jnp.issubdtype(self.x.dtype, jnp.integer):
            return jax.random.randint(key, shape, 0, self.id_range, dtype=self.x.dtype)
        return jax.random.normal(key, shape, dtype=self.x.dtype)


CASE_NAMES = [
    "mm",
    "mm+bias",
    "mv",
    "mv+bias",
    "elemwise",
    "conv1d",
    "conv1d+bias",
    "conv2d_grouped+bias",
    "conv2d_dilated_strided+bias",
    "conv1d_batch_grouped",
    "conv2d_depthwise_lhs_dilated",
    "sp_mm",
    "sp_mm+bias",
    "sp_mv+bias",
    "lora_mm",
    "lora_mm+bias",
    "lora_mv+bias",
    "emb",
    "emb_2d",
    "emb_scalar",
    "gmm",
    "gmm+bias",
    "gmv+bias",
    "einsum_mm",
    "einsum_mv",
    "einsum_grouped",
    "einsum_positions",
    "einsum_x_summed",
    "einsum_outer",
]

#: einsum cases: (spec, x shape, weight shape)
EINSUM_SPECS = {
    "einsum_mm": ("bi,io->bo", (3, 4), (4, 5)),
    "einsum_mv": ("i,io->o", (4,), (4, 5)),
    "einsum_grouped": ("bgi,gio->bgo", (3, 2, 4), (2, 4, 5)),
    "einsum_positions": ("bti,oi->tbo", (2, 3, 4), (5, 4)),  # output transposed
    "einsum_x_summed": ("bki,io->bo", (3, 2, 4), (4, 5)),  # k summed on x alone
    "einsum_outer": ("bi,ij->bji", (3, 4), (4, 2)),  # no contraction: y = x * w
}


def _normal(key, shape, i):
    return jax.random.normal(jax.random.fold_in(key, i), shape, dtype=jnp.float64)


def _conv_params(x, k, dn, **kw):
    n = x.ndim - 2
    params = dict(
        window_strides=kw.get("strides", (1,) * n),
        padding=kw.get("padding", "SAME"),
        lhs_dilation=kw.get("lhs_dilation", (1,) * n),
        rhs_dilation=kw.get("rhs_dilation", (1,) * n),
        feature_group_count=kw.get("groups", 1),
        batch_group_count=kw.get("batch_groups", 1),
        dimension_numbers=lax.conv_dimension_numbers(x.shape, k.shape, dn),
    )
    return params


def _pattern(key):
    dense = jnp.where(jax.random.uniform(key, (4, 5)) < 0.5, 1.0, 0.0).at[0, 0].set(1.0)
    return SparsePattern.from_matrix(ss.CSR.fromdense(dense))


def make_case(name: str, seed: int = 0) -> Case:
    key = jax.random.PRNGKey(seed)
    r = lambda shape, i: _normal(key, shape, i)  # noqa: E731
    bias = name.endswith("+bias")
    family = name.split("+")[0]
    if family in ("mm", "mv"):
        x = r((3, 4), 0) if family == "mm" else r((4,), 0)
        weights = {"weight": r((4, 5), 1)}
        prim = ops.etp_mm_p if family == "mm" else ops.etp_mv_p
        params = {"has_bias": bias}
    elif family == "elemwise":
        return Case(name, ops.etp_elemwise_p, None, {"weight": r((5,), 1)}, {})
    elif family == "conv1d":
        x, k = r((2, 6, 3), 0), r((3, 3, 4), 1)
        weights, prim = {"weight": k}, ops.etp_conv_p
        params = {"has_bias": bias, **_conv_params(x, k, ("NWC", "WIO", "NWC"))}
    elif family == "conv2d_grouped":
        x, k = r((2, 4, 5, 4), 0), r((6, 2, 3, 2), 1)
        weights, prim = {"weight": k}, ops.etp_conv_p
        params = {
            "has_bias": bias,
            **_conv_params(
                x, k, ("NCHW", "OIHW", "NCHW"), strides=(2, 1), padding=((1, 1), (0, 1)), groups=2
            ),
        }
    elif family == "conv2d_dilated_strided":
        x, k = r((2, 9, 7, 3), 0), r((3, 2, 3, 4), 1)
        weights, prim = {"weight": k}, ops.etp_conv_p
        params = {
            "has_bias": bias,
            **_conv_params(
                x, k, ("NHWC", "HWIO", "NHWC"), strides=(2, 3), rhs_dilation=(2, 1), padding="SAME"
            ),
        }
    elif family == "conv1d_batch_grouped":
        x, k = r((4, 3, 7), 0), r((6, 3, 3), 1)
        weights, prim = {"weight": k}, ops.etp_conv_p
        params = {
            "has_bias": bias,
            **_conv_params(x, k, ("NCW", "OIW", "NCW"), batch_groups=2, padding=((1, 0),)),
        }
    elif family == "conv2d_depthwise_lhs_dilated":
        x, k = r((2, 4, 5, 3), 0), r((3, 2, 2, 1), 1)  # OHWI kernel, output NCHW
        weights, prim = {"weight": k}, ops.etp_conv_p
        params = {
            "has_bias": bias,
            **_conv_params(
                x,
                k,
                ("NHWC", "OHWI", "NCHW"),
                groups=3,
                lhs_dilation=(2, 1),
                padding=((1, 0), (0, 1)),
            ),
        }
    elif family in ("sp_mm", "sp_mv"):
        pattern = _pattern(jax.random.fold_in(key, 7))
        x = r((3, 4), 0) if family == "sp_mm" else r((4,), 0)
        weights = {"weight": r((pattern.nnz,), 1)}
        prim = ops.etp_sp_mm_p if family == "sp_mm" else ops.etp_sp_mv_p
        params = {"sparse_mat": pattern, "has_bias": bias}
    elif family in ("lora_mm", "lora_mv"):
        x = r((3, 4), 0) if family == "lora_mm" else r((4,), 0)
        weights = {"lora_b": r((4, 2), 1), "lora_a": r((2, 5), 2)}
        prim = ops.etp_lora_mm_p if family == "lora_mm" else ops.etp_lora_mv_p
        params = {"alpha": 0.7, "has_bias": bias}
    elif family.startswith("emb"):
        shape = {"emb": (3,), "emb_2d": (2, 3), "emb_scalar": ()}[family]
        ids = jax.random.randint(jax.random.fold_in(key, 5), shape, 0, 6).astype(jnp.int32)
        ids = ids.at[(0,) * len(shape)].set(5) if shape else jnp.asarray(5, jnp.int32)
        return Case(name, ops.etp_emb_p, ids, {"weight": r((6, 4), 1)}, {}, id_range=6)
    elif family in ("gmm", "gmv"):
        x = r((3, 2, 4), 0) if family == "gmm" else r((2, 4), 0)
        weights = {"weight": r((2, 4, 5), 1)}
        prim = ops.etp_gmm_p if family == "gmm" else ops.etp_gmv_p
        params = {"has_bias": bias}
        if bias:
            weights["bias"] = r((2, 5), 3)
        return Case(name, prim, x, weights, params)
    elif family in EINSUM_SPECS:
        spec, x_shape, w_shape = EINSUM_SPECS[family]
        return Case(
            name, ops.etp_einsum_p, r(x_shape, 0), {"weight": r(w_shape, 1)}, {"spec": spec}
        )
    else:  # pragma: no cover
        raise KeyError(name)
    if bias:
        n_out = weights.get("weight", weights.get("lora_a")).shape[-1]
        if family.startswith("conv"):
            n_out = weights["weight"].shape[params["dimension_numbers"].rhs_spec[0]]
        elif family.startswith("sp"):
            n_out = params["sparse_mat"].shape[1]
        weights["bias"] = r((n_out,), 3)
    return Case(name, prim, x, weights, params)
