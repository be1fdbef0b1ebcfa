r"""OSTL, online spatio-temporal learning (Bohnstingl et al. 2022, "Online spatio-temporal
learning in deep neural networks"), in its two forms.

OSTL splits the gradient into a *spatial* part -- the learning signal, backpropagated across
layers within the step -- and a *temporal* part per layer -- an eligibility trace carried
forward in time inside the layer:

* :class:`OSTLRecurrent` keeps, for each parameter, its influence on the units of its own layer
  through the layer's full recurrent Jacobian (recurrent weights included): RTRL restricted to
  the layer, on the step's influence matrix (:mod:`.learner`). Exact for one layer.
* :class:`OSTLFeedforward` is the form for layers without recurrent weights, where the layer's
  trace factorises into a presynaptic trace (the input, low-pass filtered) times a postsynaptic
  one: the ES-D-RTRL factorisation, ``decay_or_rank`` as there (:class:`etp_viz.ES_D_RTRL`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from ..pp_prop import IODimVjpAlgorithm
from .algorithms import PatternedRTRL, _patterns, closed_pattern
from .learner import InfluenceLearner

__all__ = ["OSTLFeedforward", "OSTLRecurrent"]


class OSTLRecurrent(PatternedRTRL):
    """Online spatio-temporal learning with the recurrent Jacobian (Bohnstingl et al. 2022,
    "Online spatio-temporal learning in deep neural networks").

    Each parameter keeps its influence on the units of the layer it drives -- its hidden
    group (the compiler's ``graph.hidden_groups``; a state outside every group is a layer of
    its own) -- propagated through that layer's full recurrent Jacobian, recurrent weights
    included (the *temporal* part); the learning signal carries the same-step effects across
    layers (the *spatial* part). Exact for a single layer; in a stack it drops how a
    parameter's past effect on its layer reaches the other layers' future states.
    """

    claim_name = "ostl_recurrent"

    def prepare(self) -> None:
        reach_h, reach_theta = _patterns(self)
        layer = _unit_layers(self)
        onehot = np.zeros((self.num_hidden, int(layer.max()) + 1), bool)
        onehot[np.arange(self.num_hidden), layer] = True
        layers_of_param = (onehot.T.astype(np.int64) @ reach_theta.astype(np.int64)) > 0
        pattern = (onehot.astype(np.int64) @ layers_of_param.astype(np.int64)) > 0
        self.keep(pattern, closed_pattern(reach_h, reach_theta)[0])

    def adjust_claims(self, claims: Any) -> Any:
        reason = (
            "OSTL keeps each parameter's influence inside its own layer (hidden group): it "
            "drops how its past effect reaches the other layers' future states"
        )
        return self.claims_by_columns(claims, self.covered, reason)


class OSTLFeedforward(IODimVjpAlgorithm):
    """OSTL for feed-forward (non-recurrent) layers: the factorised input x output trace of
    ES-D-RTRL (see the module docstring); arguments as :class:`etp_viz.ES_D_RTRL`.

    Examples
    --------
    >>> alg = etp_viz.OSTLFeedforward(model, decay_or_rank=0.9)   # doctest: +SKIP
    """

    def adjust_claims(self, claims: Any) -> Any:
        for key, claim in list(claims.items()):
            claims[key] = dataclasses.replace(claim, algorithm="ostl_feedforward")
        return claims


def _unit_layers(learner: InfluenceLearner) -> np.ndarray:
    """The layer (hidden group) of each entry of the flat ``h``: the compiler's groups, and
    one layer per state outside them."""
    import brainstate

    path_of = {id(s): tuple(p) for p, s in brainstate.graph.states(learner.model).items()}
    group_of = {
        tuple(path): g
        for g, group in enumerate(learner.graph.hidden_groups)
        for path in group.hidden_paths
    }
    extra = len(learner.graph.hidden_groups)
    layers = []
    for state, is_param in zip(learner._states, learner._is_param):
        if is_param:
            continue
        group = group_of.get(path_of.get(id(state)))
        if group is None:
            group, extra = extra, extra + 1
        size = sum(int(np.size(leaf)) for leaf in jax.tree.leaves(state.value))
        layers += [group] * size
    return np.asarray(layers, np.int64)
