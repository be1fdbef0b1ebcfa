"""etp_viz.compiler: jaxpr analysis turning a model step into an :class:`ETraceGraph`.

ModuleInfo -> HiddenGroup -> HiddenParamOpRelation -> HiddenPerturbation -> ETraceGraph, each
stage usable alone; every decision is a :class:`CompilationRecord` in ``graph.diagnostics``.
"""

from .claims import GradientClaim as GradientClaim
from .claims import GradientClaims as GradientClaims
from .claims import gradient_claims as gradient_claims
from .claims.verdict import WeightVerdict as WeightVerdict
from .diagnostics import CompilationRecord as CompilationRecord
from .diagnostics import DiagnosticKind as DiagnosticKind
from .diagnostics import DiagnosticLevel as DiagnosticLevel
from .graph import ETraceGraph as ETraceGraph
from .graph import ExecutorLayout as ExecutorLayout
from .graph import StepResult as StepResult
from .graph import compile_etrace_graph as compile_etrace_graph
from .hidden_groups import HiddenGroup as HiddenGroup
from .hidden_groups import find_hidden_groups_from_minfo as find_hidden_groups_from_minfo
from .hidden_groups import find_hidden_groups_from_module as find_hidden_groups_from_module
from .module_info import ModuleInfo as ModuleInfo
from .module_info import extract_module_info as extract_module_info
from .perturbation import HiddenPerturbation as HiddenPerturbation
from .perturbation import add_hidden_perturbation_from_minfo as add_hidden_perturbation_from_minfo
from .perturbation import add_hidden_perturbation_in_module as add_hidden_perturbation_in_module
from .readouts import ReadoutParam as ReadoutParam
from .relations import HiddenParamOpRelation as HiddenParamOpRelation
from .relations import PathClassification as PathClassification
from .relations import (
    find_hidden_param_op_relations_from_minfo as find_hidden_param_op_relations_from_minfo,
)
from .relations import (
    find_hidden_param_op_relations_from_module as find_hidden_param_op_relations_from_module,
)
