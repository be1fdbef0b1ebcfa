"""The influence wing: exact RTRL, SnAp-n, UORO, OSTL (recurrent) and BPTT / truncated BPTT
(the step's influence matrix, a sparse or rank-1 part of it, or a window of past steps),
beside the ETP wing (:mod:`etp_viz.learn.etp`); OSTL's feed-forward form is there."""

from .algorithms import RTRL as RTRL
from .algorithms import UORO as UORO
from .algorithms import SnAp as SnAp
from .learner import InfluenceLearner as InfluenceLearner
from .ostl import OSTLRecurrent as OSTLRecurrent
from .tbptt import BPTT as BPTT
from .tbptt import TruncatedBPTT as TruncatedBPTT
