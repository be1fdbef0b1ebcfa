r"""OSTL, online spatio-temporal learning (Bohnstingl et al. 2022, "Online spatio-temporal
learning in deep neural networks"), in its two forms.

OSTL splits the gradient into a *spatial* part -- the learning signal, backpropagated across
layers within the step -- and a *temporal* part per layer -- an eligibility trace carried
forward in time inside the layer:

* :class:`OSTLRecurrent` keeps, for each parameter, its influence on the units of its own layer
  through the layer's full recurrent Jacobian (recurrent weights included): RTRL restricted to
  the layer, on the step's influence matrix (:mod:`.learner`). Exact for one layer.

A *layer* (:func:`state_layers`) is read off the step alone: the hidden states whose updates
read each other's past, directly or through other states (a strongly connected component of
the state-to-state pattern of :math:`J_h`; a state on no cycle is a layer of its own), so an
LSTM's ``h`` and ``c`` or a neuron and its adaptation form one layer and each level of a stack
its own, whether the level above reads the new or the old state below. A parameter's layers
are the ones it feeds *directly*: the cut step's :math:`\partial h^t/\partial\theta`
(:meth:`.learner.InfluenceLearner.cut_step`), so a weight of layer 1 read by layer 2 through
layer 1's new state belongs to layer 1 only.
* OSTL's form for layers without recurrent weights, where the layer's trace factorises into a
  presynaptic trace (the input, low-pass filtered) times a postsynaptic one, is the ES-D-RTRL
  factorisation: :class:`etp_viz.learn.etp.es_d_rtrl.OSTLFeedforward` (the ETP wing).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .algorithms import PatternedRTRL
from .patterns import closed_pattern, state_layers, step_patterns

__all__ = ["OSTLRecurrent"]


class OSTLRecurrent(PatternedRTRL):
    """Online spatio-temporal learning with the recurrent Jacobian (Bohnstingl et al. 2022,
    "Online spatio-temporal learning in deep neural networks").

    Each parameter keeps its influence on the units of the layer it feeds directly (see the
    module docstring: :func:`state_layers`, not crossing another layer's new state)
    propagated through that layer's full recurrent Jacobian, recurrent weights included (the
    *temporal* part); the learning signal carries the same-step effects across layers (the
    *spatial* part: the output's same-step Jacobian is taken whole). Exact for a single layer;
    in a stack it drops how a parameter's past effect on its layer reaches the other layers'
    future states.
    """

    claim_family = "ostl_recurrent"

    def prepare(self) -> None:
        reach_h, reach_theta = step_patterns(self)
        layer, _ = state_layers(self, reach_h)
        direct = self.direct_reach()
        onehot = np.zeros((self.num_hidden, int(layer.max(initial=0)) + 1), bool)
        onehot[np.arange(self.num_hidden), layer] = True
        layers_of_param = (onehot.T.astype(np.int64) @ direct.astype(np.int64)) > 0
        pattern = (onehot.astype(np.int64) @ layers_of_param.astype(np.int64)) > 0
        self.keep(pattern, closed_pattern(reach_h, reach_theta)[0])

    def refine_claims(self, claims: Any) -> Any:
        reason = (
            "OSTL keeps each parameter's influence inside its own layer (hidden group): it "
            "drops how its past effect reaches the other layers' future states"
        )
        return self.claims_by_columns(claims, self.covered, reason)
