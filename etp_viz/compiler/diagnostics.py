"""Structured compiler diagnostics: every decision is a :class:`CompilationRecord`.

Records are data first: ``graph.diagnostics`` lists them and ``graph.explain()`` prints them.
WARNING and ERROR records are also raised as :class:`UserWarning` once compilation ends, with
a ``stacklevel`` that points at the first frame outside ``etp_viz`` (the user's call).

Every record's ``context`` carries ``'eqn_indices'``: top-level equation indices of the flat
jaxpr (``graph.module_info.jaxpr``) that a viewer can highlight.
"""

from __future__ import annotations

import enum
import os
import sys
import warnings
from collections.abc import Iterable, Sequence
from types import FrameType
from typing import Any, NamedTuple

__all__ = [
    "CompilationRecord",
    "DiagnosticCollector",
    "DiagnosticKind",
    "DiagnosticLevel",
    "QUIET_KINDS",
    "format_records",
]


class DiagnosticLevel(enum.IntEnum):
    """Severity of a :class:`CompilationRecord` (``INFO < WARNING < ERROR``)."""

    INFO = 0
    WARNING = 1
    ERROR = 2

    def __str__(self) -> str:
        return self.name.lower()


class DiagnosticKind(enum.Enum):
    """Machine-readable reason for a :class:`CompilationRecord`."""

    RELATION_INCLUDED = "relation_included"
    RELATION_EXCLUDED_NO_PARAMSTATE = "relation_excluded_no_paramstate"
    RELATION_EXCLUDED_NON_TEMPORAL = "relation_excluded_non_temporal"
    RELATION_EXCLUDED_SHAPE_MISMATCH = "relation_excluded_shape_mismatch"
    RELATION_EXCLUDED_WEIGHT_TO_WEIGHT = "relation_excluded_weight_to_weight"
    RELATION_PARTIAL_PATH = "relation_partial_path"
    #: etp_viz addition: the y -> h tail moves or mixes positions, so df is not per position.
    RELATION_TAIL_COUPLES_POSITIONS = "relation_tail_couples_positions"
    TRAINABLE_INVAR_NOT_PARAMSTATE = "trainable_invar_not_paramstate"
    PRIMITIVE_INSIDE_CONTROL_FLOW = "primitive_inside_control_flow"
    PRIMITIVE_INSIDE_NESTED_JIT = "primitive_inside_nested_jit"
    MULTI_OUTPUT_PRIMITIVE_DETECTED = "multi_output_primitive_detected"
    PYTREE_WEIGHT_LEAF_AMBIGUOUS = "pytree_weight_leaf_ambiguous"
    HIDDEN_GROUP_MERGED = "hidden_group_merged"
    STATE_MISMATCH = "state_mismatch"
    OUTPUT_BYPASSES_HIDDEN = "output_bypasses_hidden"
    #: etp_viz addition: a plain op coupling positions was cut out of the h -> h transition.
    TRANSITION_POSITION_COUPLING_CUT = "transition_position_coupling_cut"
    #: etp_viz addition: a ParamState never reaches a trainable input of an ETP primitive.
    PARAM_NOT_USED_BY_ETP = "param_not_used_by_etp"
    #: etp_viz addition: an output reads a hidden state's value from before this step's update
    #: (INFO; the learn layer adds dL^t/dh^{t-1} · e^{t-1}, see ``graph.bypass_hidden``).
    HIDDEN_OUTPUT_BYPASS = "hidden_output_bypass"
    #: etp_viz addition: a primitive with no built-in rule (a library's surrogate spike) met on
    #: the h -> h path was judged element-wise (kept) or mixing (cut) from its own structure
    #: (its JVP, or a declaration in the ETP registry); the message says which and why.
    PRIMITIVE_JUDGED = "primitive_judged"
    #: etp_viz addition (``lift=True``): a plain op on a parameter was rewritten into the ETP
    #: primitive computing it (INFO); ``OP_NOT_LIFTED`` (WARNING): one that could not be, and why.
    OP_LIFTED = "op_lifted"
    OP_NOT_LIFTED = "op_not_lifted"
    #: etp_viz addition: an inner loop with a static trip count (ETP ops or a state inside) was
    #: unrolled into the step (INFO): compiled as the step written out by hand.
    LOOP_UNROLLED = "loop_unrolled"

    def __str__(self) -> str:
        return self.value


class CompilationRecord(NamedTuple):
    """A single compiler decision, captured with structured context.

    Attributes
    ----------
    kind : DiagnosticKind
    level : DiagnosticLevel
    message : str
        What happened, where, and (for warnings) how to change it.
    primitive : jax Primitive or None
    weight_path : tuple of str or None
        Path of the ``ParamState`` concerned, e.g. ``('rnn1', 'W', 'weight')``.
    hidden_paths : tuple of paths
    context : dict
        Extra facts; always has ``'eqn_indices'`` (top-level equation indices).
    """

    kind: DiagnosticKind
    level: DiagnosticLevel
    message: str
    primitive: Any = None
    weight_path: tuple | None = None
    hidden_paths: tuple = ()
    context: dict = {}

    def __repr__(self) -> str:
        prim = getattr(self.primitive, "name", self.primitive)
        return (
            f"CompilationRecord(kind={self.kind}, level={self.level}, primitive={prim!r}, "
            f"weight_path={self.weight_path}, hidden_paths={list(self.hidden_paths)}, "
            f"message={self.message!r}, context={self.context})"
        )


class DiagnosticCollector:
    """Collects records during one compilation (no global state: one collector per call)."""

    def __init__(self) -> None:
        self.records: list[CompilationRecord] = []

    def emit(
        self,
        kind: DiagnosticKind,
        level: DiagnosticLevel,
        message: str,
        *,
        primitive: Any = None,
        weight_path: tuple | None = None,
        hidden_paths: Iterable = (),
        eqn_indices: Iterable[int] = (),
        **context: Any,
    ) -> CompilationRecord:
        record = CompilationRecord(
            kind=kind,
            level=level,
            message=message,
            primitive=primitive,
            weight_path=weight_path,
            hidden_paths=tuple(hidden_paths),
            context={"eqn_indices": tuple(sorted(set(eqn_indices))), **context},
        )
        self.records.append(record)
        return record

    def settle_readouts(self, readout_paths: Iterable) -> None:
        """A non-temporal ETP weight that is a readout is normal: its record becomes INFO (it
        gets its exact same-step gradient). One that reaches nothing stays a WARNING."""
        readouts = {tuple(p) for p in readout_paths}
        for k, record in enumerate(self.records):
            if (
                record.kind is DiagnosticKind.RELATION_EXCLUDED_NON_TEMPORAL
                and record.weight_path is not None
                and tuple(record.weight_path) in readouts
            ):
                self.records[k] = record._replace(level=DiagnosticLevel.INFO)

    def warn(self) -> None:
        """Raise the surprising WARNING/ERROR records as ``UserWarning`` at the user's call
        site, each text once per compilation.

        Quiet by default: records of :data:`QUIET_KINDS` (normal situations the explorer and
        ``explain()`` show, e.g. a GRU's ``Wr`` reaching ``h`` only through ``Wh``) stay in
        ``graph.diagnostics`` and are not raised.
        """
        stacklevel = _user_stacklevel()
        seen: set[str] = set()
        for record in self.records:
            if record.level < DiagnosticLevel.WARNING or record.kind in QUIET_KINDS:
                continue
            text = f"[{record.kind}] {record.message}"
            if text not in seen:
                seen.add(text)
                warnings.warn(text, UserWarning, stacklevel=stacklevel)


#: WARNING kinds kept in the records but not raised: the weight's claim ("not learned" and
#: why) is what a user sees in the explorer, ``explain()`` and ``gradient_claims()``.
QUIET_KINDS = frozenset({DiagnosticKind.RELATION_EXCLUDED_WEIGHT_TO_WEIGHT})


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _user_stacklevel() -> int:
    """Stack level (for ``warnings.warn`` called from :meth:`DiagnosticCollector.warn`) of the
    first frame outside the ``etp_viz`` package."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        _PACKAGE_DIR + os.sep
    ):
        frame = frame.f_back
        level += 1
    return level


#: the change a weight reaching hidden state only through another weight op is offered: in
#: the user's code a rewiring, in a library's (a layer the user did not write) a what-if
_WEIGHT_OP_FIX = {
    False: "; learn it with BPTT, or rewire so its output flows into a hidden state through "
    "element-wise ops only.",
    True: ". The op is at {line}, in a library's code: try etp_viz.what_if(model, x, "
    "change={{'learner': 'rtrl'}}) (exact RTRL keeps every path) or learn it with BPTT.",
}


def weight_op_fix(eqns: Sequence[Any], index: int) -> tuple[str, str]:
    """``(the end of the message, the op's line)`` for a weight op at ``index`` that reaches
    the hidden state only through another weight op (:func:`source_line`)."""
    line, library = source_line(eqns, index)
    return _WEIGHT_OP_FIX[library].format(line=line), line


#: folders of installed packages: code there is a library's, not the user's
_LIBRARY_FOLDERS = ("site-packages", "dist-packages")


def source_line(eqns: Sequence[Any], index: int) -> tuple[str, bool]:
    """``(where, in a library)`` of equation ``index``: ``"model.py:12"``, or for an op inside
    an installed package's code ``"saiunit/sparse/_csr.py:1031, called from model.py:40"``
    (the innermost line of the user's own code); ``("", False)`` when jax kept no line. Paths
    are shown inside their package, or relative to the working directory.

    A message about an op in a library's code never advises rewriting it: the user did not
    write it.
    """
    from etp_viz import _compat

    if index < 0 or index >= len(eqns):
        return "", False
    frames = _compat.eqn_user_frames(eqns[index])
    if not frames:
        return "", False
    inner = f"{_short(frames[0][0])}:{frames[0][1]}"
    if not _in_library(frames[0][0]):
        return inner, False
    mine = next((f for f in frames if not _in_library(f[0])), None)
    return (f"{inner}, called from {_short(mine[0])}:{mine[1]}" if mine else inner), True


def _in_library(file_name: str) -> bool:
    return any(f"{os.sep}{folder}{os.sep}" in file_name for folder in _LIBRARY_FOLDERS)


def _short(file_name: str) -> str:
    for folder in _LIBRARY_FOLDERS:
        marker = f"{os.sep}{folder}{os.sep}"
        if marker in file_name:
            return file_name.split(marker, 1)[1]
    try:
        relative = os.path.relpath(file_name)
    except ValueError:  # another drive
        return file_name
    return file_name if relative.startswith("..") else relative


def format_records(records: Sequence[CompilationRecord]) -> str:
    """Text of ``records`` grouped by kind (kinds in first-appearance order)."""
    by_kind: dict[DiagnosticKind, list[CompilationRecord]] = {}
    for record in records:
        by_kind.setdefault(record.kind, []).append(record)
    lines: list[str] = []
    for kind, group in by_kind.items():
        lines.append(f"{kind.name} ({len(group)})")
        for record in group:
            where = record.context.get("eqn_indices", ())
            eqns = f" eqns {list(where)}" if where else ""
            lines.append(f"  [{record.level.name:7s}] {record.message}{eqns}")
    return "\n".join(lines) if lines else "(no compilation records)"
