"""etp_viz.learn: graph executors, the online learners D-RTRL and ES-D-RTRL (pp_prop), the BPTT
oracle and `verify` (claims against the numbers)."""

from .etp.base import ETraceAlgorithm as ETraceAlgorithm
from .etp.base import ETraceVjpAlgorithm as ETraceVjpAlgorithm
from .etp.d_rtrl import D_RTRL as D_RTRL
from .etp.d_rtrl import ParamDimVjpAlgorithm as ParamDimVjpAlgorithm
from .etp.eprop import EProp as EProp
from .etp.eprop import ThreeFactor as ThreeFactor
from .etp.es_d_rtrl import ES_D_RTRL as ES_D_RTRL
from .etp.es_d_rtrl import IODimVjpAlgorithm as IODimVjpAlgorithm
from .etp.es_d_rtrl import OSTLFeedforward as OSTLFeedforward
from .etp.es_d_rtrl import pp_prop as pp_prop
from .etp.executor import ETraceGraphExecutor as ETraceGraphExecutor
from .etp.executor import ETraceVjpGraphExecutor as ETraceVjpGraphExecutor
from .etp.executor import MultiStepData as MultiStepData
from .etp.status import LearningStatus as LearningStatus
from .etp.status import ParamLearning as ParamLearning
from .influence import BPTT as BPTT
from .influence import RTRL as RTRL
from .influence import UORO as UORO
from .influence import OSTLRecurrent as OSTLRecurrent
from .influence import SnAp as SnAp
from .influence import TruncatedBPTT as TruncatedBPTT
from .verification import VerifyReport as VerifyReport
from .verification import VerifyRow as VerifyRow
from .verification import verify as verify
