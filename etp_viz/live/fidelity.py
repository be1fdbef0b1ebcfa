r"""The gradient-fidelity meter: how close is the online gradient to BPTT right now?

Every ``K`` steps the session replays the last ``W`` steps twice from the hidden state the
window started in, with the *current* weights and no weight update:

* online: traces zeroed at the window start, the algorithm stepped ``W`` times, its online
  gradients summed: :math:`g_{on} = \sum_t \nabla^{on}_\theta L^t`;
* BPTT: :math:`g_{bptt} = \nabla_\theta \sum_t L^t` through the unrolled window
  (``brainstate.transform.for_loop`` under ``brainstate.transform.grad``).

and records :math:`\cos(g_{on}, g_{bptt})` and :math:`\|g_{on} - g_{bptt}\| / \|g_{bptt}\|`,
overall and per parameter. For an exact algorithm on its exact model class (D-RTRL with an
element-wise recurrence) the cosine is 1 up to rounding. All states are restored afterwards,
so measuring does not change the run.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import brainstate
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["FidelityMeter", "compare_gradients"]


def compare_gradients(online: dict, reference: dict) -> dict[str, Any]:
    """Cosine and relative error, overall and per parameter (host floats).

    Where the reference gradient is zero (a window whose loss is masked out) the cosine is
    undefined: None, not 0 (which would read as "orthogonal"), and averages skip it.

    >>> import numpy as np
    >>> r = compare_gradients({"w": np.array([1.0, 0.0])}, {"w": np.array([2.0, 0.0])})
    >>> round(r["cosine"], 6), round(r["rel_error"], 6)
    (1.0, 0.5)
    >>> compare_gradients({"w": np.zeros(2)}, {"w": np.zeros(2)})["cosine"] is None
    True
    """

    def flat(tree: Any) -> np.ndarray:
        leaves = [np.ravel(np.asarray(leaf, np.float64)) for leaf in jax.tree.leaves(tree)]
        return np.concatenate(leaves) if leaves else np.zeros(0)

    def scores(a: np.ndarray, b: np.ndarray) -> dict[str, float | None]:
        norm_a, norm_b = np.linalg.norm(a), np.linalg.norm(b)
        if norm_b == 0:  # nothing to learn in this window (a masked loss): no direction
            return {"cosine": None, "rel_error": None if norm_a == 0 else float(norm_a)}
        cosine = float(a @ b / (norm_a * norm_b)) if norm_a > 0 else 0.0
        return {"cosine": cosine, "rel_error": float(np.linalg.norm(a - b) / norm_b)}

    per_param = {name: scores(flat(online[name]), flat(reference[name])) for name in reference}
    overall = scores(flat(online), flat(reference))
    return {**overall, "per_param": per_param}


class FidelityMeter:
    """Keeps the last window of inputs and the model states at window starts; measures on
    request. The session splits a frame's scan at window starts and checkpoints (see
    :meth:`next_stop`), the only places where the states are on hand."""

    def __init__(self, session: Any, window: int) -> None:
        if window < 1:
            raise ValueError(f"fidelity_window must be >= 1, got {window}.")
        self.session = session
        self.window = int(window)
        self.every = int(session.options["fidelity_every"])
        self.recent: deque = deque(maxlen=self.window)
        self.snapshots: dict[int, list] = {}
        self._online_grad = None
        self._bptt_grad = None
        #: wall seconds spent measuring (compare mode subtracts it from the step time)
        self.seconds = 0.0

    @property
    def model_states(self) -> list:
        """The model's states now (a ``reset_state`` may have built new State objects)."""
        return list(self.session.model.states().values())

    def clear(self) -> None:
        self.recent.clear()
        self.snapshots.clear()

    # -- where a frame must stop -----------------------------------------------------------
    def _window_start(self, step: int) -> bool:
        return step >= 0 and (step + self.window) % self.every == 0

    def next_stop(self, frame_start: int, position: int, data: Any) -> int:
        """Where the current chunk of a frame ends: the frame's end, a window start (states
        are snapshotted there: references, no transfer) or a checkpoint. Also remembers the
        pairs the chunk will run (the window's data)."""
        step = frame_start + position
        if self._window_start(step):
            self.snapshots[step] = [s.value for s in self.model_states]
        stop = data.num_steps
        for candidate in range(position + 1, data.num_steps):
            global_step = frame_start + candidate
            if global_step % self.every == 0 or self._window_start(global_step):
                stop = candidate
                break
        for index in range(position, stop):
            self.recent.append(data.pair(index))
        return stop

    def due(self, step_count: int) -> bool:
        """A checkpoint whose window start was snapshotted (not before ``window`` steps)."""
        ready = step_count % self.every == 0 and (step_count - self.window) in self.snapshots
        return ready and len(self.recent) == self.window

    # -- measuring -------------------------------------------------------------------------
    def _build(self) -> None:
        session = self.session
        algorithm, model, params, loss_fn = (
            session.algorithm,
            session.model,
            session.params,
            session.loss_fn,
        )

        def online_loss(x_t: Any, y_t: Any) -> Any:
            return jnp.asarray(loss_fn(algorithm(x_t), y_t)).reshape(())

        def bptt_loss(xs: Any, ys: Any) -> Any:
            losses = brainstate.transform.for_loop(
                lambda x_t, y_t: jnp.asarray(loss_fn(model(x_t), y_t)).reshape(()), xs, ys
            )
            return jnp.sum(losses)

        self._online_grad = brainstate.transform.jit(brainstate.transform.grad(online_loss, params))
        self._bptt_grad = brainstate.transform.jit(brainstate.transform.grad(bptt_loss, params))

    def measure(self, step: int) -> dict[str, Any]:
        """Replay the window both ways, append the result to the session's history."""
        began = time.perf_counter()
        try:
            return self._measure(step)
        finally:
            self.seconds += time.perf_counter() - began

    def _measure(self, step: int) -> dict[str, Any]:
        if self._online_grad is None:
            self._build()
        session = self.session
        saved = [(state, state.value) for state in session._all_states()]
        start = self.snapshots.pop(int(step) - self.window)
        for old in [s for s in self.snapshots if s < int(step) - self.window]:
            del self.snapshots[old]
        xs = [x for x, _ in self.recent]
        ys = [y for _, y in self.recent]
        try:
            self._enter_window(start)
            online = None
            for x_t, y_t in zip(xs, ys):
                grads = self._online_grad(x_t, y_t)
                online = grads if online is None else jax.tree.map(jnp.add, online, grads)
            self._enter_window(start)
            stacked_x = jax.tree.map(lambda *a: jnp.stack(a), *xs)
            stacked_y = jax.tree.map(lambda *a: jnp.stack(a), *ys)
            reference = self._bptt_grad(stacked_x, stacked_y)
        finally:
            for state, value in saved:
                state.value = value
        result = {"step": int(step), "window": self.window, **compare_gradients(online, reference)}
        session.history.fidelity.append(result)
        return result

    def _enter_window(self, start_values: list) -> None:
        algorithm = self.session.algorithm
        # zero the traces only: the model's states are overwritten just below, and a model
        # reset could build new State objects the session's compiled frames do not read
        reset = getattr(algorithm, "reset_traces", None) or getattr(algorithm, "reset_state", None)
        if reset is not None:
            reset()
        for state, value in zip(self.model_states, start_values):
            state.value = value
