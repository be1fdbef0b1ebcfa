"""The structured record of a live session: per-step metrics, fidelity checkpoints, failures.

Metric names are ``"<kind>"`` or ``"<kind>/<what>"``:

===================  ==========================================================  ==========
kind                 meaning                                                     shape
===================  ==========================================================  ==========
``loss``             the step's loss                                             ``()``
``trace``            ‖ε‖ of one relation's eligibility trace (D-RTRL)            ``()``
``trace_x``          ‖ε_x‖, input-side trace of a relation (ES-D-RTRL)           ``()``
``trace_f``          ‖ε_f‖, output-side trace of a relation (ES-D-RTRL)          ``()``
``df``               dh/dy of a relation: first units of the (batch-mean) slice  ``(k,)``
``dhdh``             dh/dh diagonal of a hidden group: first units               ``(k,)``
``grad_norm``        ‖online gradient‖ of a parameter                            ``()``
``update_norm``      ‖weight change‖ applied by the optimizer                    ``()``
===================  ==========================================================  ==========

``loss`` is measured every step. The others are measured on every ``record_every``-th step of
each frame (and on each frame's last step); in between their rows are NaN, meaning "not
measured" (``np.isfinite`` selects the measured rows). The step before a failure is never
NaN for a non-finite reason: a non-finite value halts the run instead of being recorded.

Examples
--------
>>> import numpy as np
>>> h = History(meta={"algorithm": "d_rtrl"})
>>> h.extend(np.arange(3), {"loss": np.array([3.0, 2.0, 1.0])})
>>> h.loss.tolist(), h.num_steps
([3.0, 2.0, 1.0], 3)
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["History", "load_history"]

_META_KEY = "__meta__"


@dataclass
class History:
    """Everything a session recorded, on the host, as numpy arrays.

    Attributes
    ----------
    steps : numpy.ndarray
        Global step numbers, shape ``(T,)``.
    metrics : dict[str, numpy.ndarray]
        Metric name → ``(T, *shape)`` array (see the module docstring for names).
    fidelity : list[dict]
        One entry per fidelity checkpoint: ``{"step", "window", "cosine", "rel_error",
        "per_param": {path: {"cosine", "rel_error"}}}``.
    failure : dict or None
        ``{"step", "quantities", "message"}`` of the step that went non-finite.
    meta : dict
        JSON-able description (algorithm, task, model, device, relation and group names).
    """

    steps: np.ndarray = field(default_factory=lambda: np.zeros((0,), np.int64))
    metrics: dict[str, np.ndarray] = field(default_factory=dict)
    fidelity: list[dict[str, Any]] = field(default_factory=list)
    failure: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    #: growable storage behind ``steps`` / ``metrics`` (see :meth:`extend`)
    _buffers: dict[str, np.ndarray] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    # -- reading ---------------------------------------------------------------------------
    @property
    def num_steps(self) -> int:
        """Number of recorded steps."""
        return int(self.steps.shape[0])

    @property
    def loss(self) -> np.ndarray:
        """Per-step loss, shape ``(T,)`` (empty before the first step)."""
        return self.metrics.get("loss", np.zeros((0,), np.float32))

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self.metrics[name]
        except KeyError:
            raise KeyError(
                f"No metric {name!r} in this history. Recorded metrics: {sorted(self.metrics)}"
            ) from None

    def kind(self, kind: str) -> dict[str, np.ndarray]:
        """All metrics of one kind, keyed by what they describe.

        >>> h = History()
        >>> h.extend(np.arange(1), {"trace/W": np.ones(1), "trace/U": np.zeros(1)})
        >>> sorted(h.kind("trace"))
        ['U', 'W']
        """
        prefix = kind + "/"
        return {n[len(prefix) :]: v for n, v in self.metrics.items() if n.startswith(prefix)}

    # -- writing ---------------------------------------------------------------------------
    def extend(self, steps: np.ndarray, values: dict[str, np.ndarray]) -> None:
        """Append rows (what :meth:`Recorder.drain` returned).

        Amortised O(rows): the arrays live in buffers that double when full, and ``steps`` /
        ``metrics`` are views of their filled part (a view handed out earlier keeps its
        values). A metric seen for the first time is NaN ("not measured") on earlier steps.
        """
        steps = np.asarray(steps, np.int64)
        if steps.size == 0:
            return
        old, new = self.num_steps, self.num_steps + steps.shape[0]
        if self._buffers is None or new > self._buffers["steps"].shape[0]:
            self._grow(max(new, 2 * old, 64))
        buffers = self._buffers
        buffers["steps"][old:new] = steps
        for name, rows in values.items():
            rows = np.asarray(rows)
            if name not in buffers:
                buffers[name] = _blank(buffers["steps"].shape[0], rows.shape[1:], rows.dtype)
            buffers[name][old:new] = rows
        self.steps = buffers["steps"][:new]
        self.metrics = {name: buffers[name][:new] for name in buffers if name != "steps"}

    def _grow(self, size: int) -> None:
        """Move the filled rows into buffers of ``size`` rows."""
        arrays = {"steps": self.steps, **self.metrics}
        buffers = {}
        for name, array in arrays.items():
            array = np.asarray(array)
            buffers[name] = _blank(size, array.shape[1:], array.dtype)
            buffers[name][: array.shape[0]] = array
        self._buffers = buffers

    def clear(self) -> None:
        """Forget every recorded step (meta is kept)."""
        self.steps = np.zeros((0,), np.int64)
        self.metrics = {}
        self._buffers = None
        self.fidelity = []
        self.failure = None

    # -- saving ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (lists of floats; non-finite values become None)."""

        def clean(array: np.ndarray) -> Any:
            as_object = np.asarray(array, np.float64).astype(object)
            as_object[~np.isfinite(np.asarray(array, np.float64))] = None
            return as_object.tolist()

        return {
            "steps": self.steps.tolist(),
            "metrics": {name: clean(values) for name, values in self.metrics.items()},
            "fidelity": self.fidelity,
            "failure": self.failure,
            "meta": self.meta,
        }

    def save(self, path: str | os.PathLike) -> None:
        """Write an ``.npz`` file (arrays + a JSON header); read it back with
        :func:`load_history`."""
        header = {"fidelity": self.fidelity, "failure": self.failure, "meta": self.meta}
        arrays = {f"m:{name}": values for name, values in self.metrics.items()}
        buffer = io.BytesIO()
        np.savez_compressed(
            buffer, steps=self.steps, **{_META_KEY: np.array(json.dumps(header))}, **arrays
        )
        with open(path, "wb") as handle:
            handle.write(buffer.getvalue())


def _blank(rows: int, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """``rows`` empty rows: NaN for floating types ("not measured"), else zeros."""
    if np.issubdtype(dtype, np.floating):
        return np.full((rows, *shape), np.nan, dtype)
    return np.zeros((rows, *shape), dtype)


def load_history(path: str | os.PathLike) -> History:
    """Read a history written by :meth:`History.save` / ``Session.save_history``.

    Examples
    --------
    >>> import tempfile, os
    >>> h = History(meta={"task": "sine"})
    >>> h.extend(np.arange(2), {"loss": np.array([1.0, 0.5])})
    >>> path = os.path.join(tempfile.mkdtemp(), "run.npz")
    >>> h.save(path)
    >>> load_history(path).loss.tolist()
    [1.0, 0.5]
    """
    with np.load(path, allow_pickle=False) as data:
        if _META_KEY not in data.files:
            raise ValueError(
                f"{os.fspath(path)!r} is not an etp_viz history (no {_META_KEY} entry); "
                "write one with `session.save_history(path)`."
            )
        header = json.loads(str(data[_META_KEY]))
        metrics = {name[2:]: data[name] for name in data.files if name.startswith("m:")}
        return History(
            steps=data["steps"],
            metrics=metrics,
            fidelity=header.get("fidelity", []),
            failure=header.get("failure"),
            meta=header.get("meta", {}),
        )
