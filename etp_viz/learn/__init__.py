"""etp_viz.learn: graph executors, the online learners D-RTRL and ES-D-RTRL (pp_prop), the BPTT
oracle and `verify` (claims against the numbers)."""

from .base import ETraceAlgorithm as ETraceAlgorithm
from .base import ETraceVjpAlgorithm as ETraceVjpAlgorithm
from .d_rtrl import D_RTRL as D_RTRL
from .d_rtrl import ParamDimVjpAlgorithm as ParamDimVjpAlgorithm
from .eprop import EProp as EProp
from .eprop import ThreeFactor as ThreeFactor
from .es_d_rtrl import ES_D_RTRL as ES_D_RTRL
from .es_d_rtrl import IODimVjpAlgorithm as IODimVjpAlgorithm
from .es_d_rtrl import pp_prop as pp_prop
from .executor import ETraceGraphExecutor as ETraceGraphExecutor
from .executor import ETraceVjpGraphExecutor as ETraceVjpGraphExecutor
from .executor import MultiStepData as MultiStepData
from .influence import BPTT as BPTT
from .influence import RTRL as RTRL
from .influence import UORO as UORO
from .influence import OSTLFeedforward as OSTLFeedforward
from .influence import OSTLRecurrent as OSTLRecurrent
from .influence import SnAp as SnAp
from .influence import TruncatedBPTT as TruncatedBPTT
from .status import LearningStatus as LearningStatus
from .status import ParamLearning as ParamLearning
from .verification import VerifyReport as VerifyReport
from .verification import VerifyRow as VerifyRow
from .verification import verify as verify
