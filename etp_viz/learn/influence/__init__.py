"""Influence-matrix learners: exact RTRL, SnAp-n and UORO (the RTRL family beside ETP)."""

from .algorithms import RTRL as RTRL
from .algorithms import UORO as UORO
from .algorithms import SnAp as SnAp
from .learner import InfluenceLearner as InfluenceLearner
