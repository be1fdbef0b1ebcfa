"""etp_viz: eligibility-trace propagation (D-RTRL, ES-D-RTRL) for recurrent and spiking
networks in JAX, with an interactive Jupyter explorer.

This module only re-exports. The engine (``ops``, ``compiler``, ``learn``, ``nn``) is imported
eagerly; ``tasks``, ``live``, ``view``, ``plot``, ``explorer``, ``show`` and ``Explorer`` are
resolved on first use, and so is ``sweep`` (it runs sessions). Only ``show`` needs the widget
packages: without them it raises an ``ImportError`` naming ``pip install "etp-viz[explorer]"``
(``Explorer(...).save_html`` works).
"""

__version__ = "0.1.0"

# First: jaxlib 0.10's XLA:CPU runs leading-axis sums 50-100x slower in YNNPACK; importing
# _compat keeps reductions out of it before JAX starts a backend (other versions: no change).
# isort: split
from ._compat import XLA_CPU_REDUCTIONS as XLA_CPU_REDUCTIONS

# --- ops (etp_viz.ops) -------------------------------------------------------------------
# isort: split
from .ops import ETP_PRIMITIVES as ETP_PRIMITIVES
from .ops import ETPPrimitive as ETPPrimitive
from .ops import ETPPrimitiveSpec as ETPPrimitiveSpec
from .ops import UnitMismatchError as UnitMismatchError
from .ops import conv as conv
from .ops import einsum as einsum
from .ops import element_wise as element_wise
from .ops import embedding as embedding
from .ops import get_primitive_spec as get_primitive_spec
from .ops import get_trainable_invars as get_trainable_invars
from .ops import grouped_matmul as grouped_matmul
from .ops import is_etp_enable_gradient_primitive as is_etp_enable_gradient_primitive
from .ops import is_etp_primitive as is_etp_primitive
from .ops import lora_matmul as lora_matmul
from .ops import matmul as matmul
from .ops import register_primitive as register_primitive
from .ops import register_primitive_spec as register_primitive_spec
from .ops import sparse_matmul as sparse_matmul

# --- nn (etp_viz.nn): the layers are public as the namespace `etp_viz.nn` -------------------
# isort: split
from . import nn as nn
from .nn import SparseLIF as SparseLIF

# --- compiler (etp_viz.compiler) ---------------------------------------------------------
# isort: split
from .compiler import CompilationRecord as CompilationRecord
from .compiler import DiagnosticKind as DiagnosticKind
from .compiler import DiagnosticLevel as DiagnosticLevel
from .compiler import ETraceGraph as ETraceGraph
from .compiler import HiddenGroup as HiddenGroup
from .compiler import HiddenParamOpRelation as HiddenParamOpRelation
from .compiler import HiddenPerturbation as HiddenPerturbation
from .compiler import ModuleInfo as ModuleInfo
from .compiler import PathClassification as PathClassification
from .compiler import add_hidden_perturbation_from_minfo as add_hidden_perturbation_from_minfo
from .compiler import add_hidden_perturbation_in_module as add_hidden_perturbation_in_module
from .compiler import compile_etrace_graph as compile_etrace_graph
from .compiler import extract_module_info as extract_module_info
from .compiler import find_hidden_groups_from_minfo as find_hidden_groups_from_minfo
from .compiler import find_hidden_groups_from_module as find_hidden_groups_from_module
from .compiler import (
    find_hidden_param_op_relations_from_minfo as find_hidden_param_op_relations_from_minfo,
)
from .compiler import (
    find_hidden_param_op_relations_from_module as find_hidden_param_op_relations_from_module,
)

# --- learn (etp_viz.learn) ---------------------------------------------------------------
# isort: split
from .learn import BPTT as BPTT
from .learn import D_RTRL as D_RTRL
from .learn import ES_D_RTRL as ES_D_RTRL
from .learn import RTRL as RTRL
from .learn import UORO as UORO
from .learn import EProp as EProp
from .learn import ETraceAlgorithm as ETraceAlgorithm
from .learn import ETraceGraphExecutor as ETraceGraphExecutor
from .learn import ETraceVjpAlgorithm as ETraceVjpAlgorithm
from .learn import ETraceVjpGraphExecutor as ETraceVjpGraphExecutor
from .learn import IODimVjpAlgorithm as IODimVjpAlgorithm
from .learn import MultiStepData as MultiStepData
from .learn import OSTLFeedforward as OSTLFeedforward
from .learn import OSTLRecurrent as OSTLRecurrent
from .learn import ParamDimVjpAlgorithm as ParamDimVjpAlgorithm
from .learn import SnAp as SnAp
from .learn import ThreeFactor as ThreeFactor
from .learn import TruncatedBPTT as TruncatedBPTT
from .learn import VerifyReport as VerifyReport
from .learn import pp_prop as pp_prop
from .learn import verify as verify

# --- memory (etp_viz.memory): will it fit? ----------------------------------------------------
# isort: split
from .memory import plan as plan

# --- what if: one named change, before and after (etp_viz.whatif) ---------------------------
# isort: split
from .whatif import what_if as what_if

# --- lazy: tasks, live runs, the view model, plots, and the widget ----------------------------
#: Subpackages / modules exposed as namespaces, imported on first use (`etp_viz.live.Session`,
#: `etp_viz.plot.loss(history)`), so ``import etp_viz`` stays the engine only.
_LAZY_MODULES = {
    "tasks": "etp_viz.tasks",
    "live": "etp_viz.live",
    "view": "etp_viz.view",
    "plot": "etp_viz.plot",
    "explorer": "etp_viz.explorer",
}
#: Names imported on first use: the widget layer's (the [explorer] extra: anywidget,
#: ipywidgets) and ``sweep`` (etp_viz.sweeps runs live sessions).
_LAZY_NAMES = {
    "Explorer": "etp_viz.explorer.widget",
    "show": "etp_viz.explorer.live_explorer",
    "sweep": "etp_viz.sweeps",
}


def __getattr__(name: str):
    """Lazy names resolve on first use, so ``import etp_viz`` never imports anywidget."""
    import importlib

    if name in _LAZY_MODULES:
        value = importlib.import_module(_LAZY_MODULES[name])
    elif name in _LAZY_NAMES:
        value = getattr(importlib.import_module(_LAZY_NAMES[name]), name)
    else:
        raise AttributeError(f"module 'etp_viz' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY_MODULES, *_LAZY_NAMES})
