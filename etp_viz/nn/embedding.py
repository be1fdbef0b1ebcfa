"""``Embedding`` (token ids to vectors, on ``etp_emb``) and ``GroupedLinear`` (per-group weights,
on ``etp_gmm`` / ``etp_gmv``)."""

from __future__ import annotations

import brainstate
import jax

from ..ops import embedding, grouped_matmul
from ._init import Initializer, make_param, normal, xavier_normal, zeros

__all__ = ["Embedding", "GroupedLinear"]

#: the table's default initializer: standard normal entries
UNIT_NORMAL = normal(1.0)


class Embedding(brainstate.nn.Module):
    """Look-up table ``y = E[ids]`` computed by :func:`etp_viz.embedding`.

    The table is one ``ParamState`` of shape ``(num_embeddings, embedding_size)``. Ids are
    integers of any shape; the output has their shape plus ``embedding_size``. The ids get no
    gradient; the table's rows do, and an embedding feeding a hidden state element-wise is
    learned online like any ETP weight (its trace has one entry per table row and unit).

    Parameters
    ----------
    num_embeddings : int
        Rows of the table (the vocabulary size).
    embedding_size : int
        Length of each vector.
    embedding_init : callable or array, optional
        ``shape -> array`` (default: normal, std 1) or an array of the table's shape.
    name : str, optional

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import etp_viz
    >>> emb = etp_viz.nn.Embedding(10, 4)
    >>> emb(jnp.asarray([1, 7])).shape
    (2, 4)
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_size: int,
        embedding_init: Initializer = UNIT_NORMAL,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.num_embeddings = int(num_embeddings)
        self.embedding_size = int(embedding_size)
        self.in_size = ()
        self.out_size = (self.embedding_size,)
        shape = (self.num_embeddings, self.embedding_size)
        self.weight = brainstate.ParamState(make_param(embedding_init, shape, "Embedding.weight"))

    def update(self, ids: jax.Array) -> jax.Array:
        """Return the rows of ``ids`` (integers in ``[0, num_embeddings)``)."""
        return embedding(ids, self.weight.value)


class GroupedLinear(brainstate.nn.Module):
    """``G`` independent dense layers, one per group: ``y[..., g, :] = x[..., g, :] @ W[g] + b[g]``
    computed by :func:`etp_viz.grouped_matmul` (a block-diagonal weight without the zeros).

    Parameters
    ----------
    in_size : int
        Input features per group (last axis of ``x``, which is ``(..., num_groups, in_size)``).
    out_size : int
        Output features per group.
    num_groups : int
        Number of groups ``G``.
    w_init : callable or array, optional
        Initializer of the ``(G, in_size, out_size)`` weight (default: Xavier normal).
    b_init : callable, array or None, optional
        Initializer of the ``(G, out_size)`` bias (default: zeros); ``None``: no bias.
    name : str, optional

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import etp_viz
    >>> layer = etp_viz.nn.GroupedLinear(3, 2, num_groups=4)
    >>> layer(jnp.ones((4, 3))).shape, layer(jnp.ones((5, 4, 3))).shape
    ((4, 2), (5, 4, 2))
    """

    def __init__(
        self,
        in_size: int,
        out_size: int,
        num_groups: int,
        w_init: Initializer = xavier_normal,
        b_init: Initializer = zeros,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.num_groups = int(num_groups)
        self.in_size = (self.num_groups, int(in_size))
        self.out_size = (self.num_groups, int(out_size))
        shape = (self.num_groups, int(in_size), int(out_size))
        params = {"weight": make_param(w_init, shape, "GroupedLinear.weight")}
        bias = make_param(b_init, (self.num_groups, int(out_size)), "GroupedLinear.bias")
        if bias is not None:
            params["bias"] = bias
        self.weight = brainstate.ParamState(params)

    def update(self, x: jax.Array) -> jax.Array:
        """Return the per-group products for ``x`` of shape ``(..., num_groups, in_size)``."""
        params = self.weight.value
        return grouped_matmul(x, params["weight"], params.get("bias"))
