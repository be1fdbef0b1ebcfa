"""Influence-matrix learners: exact RTRL, SnAp-n, UORO and OSTL (the RTRL family beside ETP;
OSTL's feed-forward form is the factorised ETP trace)."""

from .algorithms import RTRL as RTRL
from .algorithms import UORO as UORO
from .algorithms import SnAp as SnAp
from .learner import InfluenceLearner as InfluenceLearner
from .ostl import OSTLFeedforward as OSTLFeedforward
from .ostl import OSTLRecurrent as OSTLRecurrent
from .tbptt import BPTT as BPTT
from .tbptt import TruncatedBPTT as TruncatedBPTT
