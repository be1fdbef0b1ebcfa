r"""Truncated backpropagation through time over a sliding window, as an online learner.

The reference line of the explorer's compare mode: per step it gives the gradient of that
step's loss backpropagated through the last :math:`W` steps, and is called like every other
online learner (``alg(x)`` inside ``brainstate.transform.grad``).

With the step flattened as in :mod:`.learner`, :math:`(h^t, y^t) = F(\theta, h^{t-1}, x^t)`,
the learner keeps a chronological window of the last :math:`W` inputs
:math:`x^{t-W+1},\dots,x^t` and of the hidden states before each of those steps,
:math:`h^{t-W},\dots,h^{t-1}`, plus the count of steps seen. Step :math:`t` (counted from 0)

* **forward**: the model's own step, :math:`(h^t, y^t) = F(\theta, h^{t-1}, x^t)` (outputs and
  new hidden state exactly as without the learner); the windows shift by one;
* **backward**: with :math:`k = \min(t + 1, W)` and the unroll from the stored state

  .. math::

      \tilde h^{t-k} = h^{t-k}, \qquad
      (\tilde h^s, \tilde y^s) = F(\theta, \tilde h^{s-1}, x^s), \quad s = t-k+1, \dots, t,

  where :math:`\theta` is the *current* parameter and :math:`h^{t-k}` a constant, the step's
  gradient is

  .. math::

      \nabla^{W}_\theta L^t = \frac{\partial L^t}{\partial y^t}
      \frac{d\tilde y^t}{d\theta} + \frac{\partial L^t}{\partial h^t}
      \frac{d\tilde h^t}{d\theta},

  i.e. backpropagation through those :math:`k` steps of the cotangents of the output and of
  the new hidden state. The cotangents are the loss's at the real :math:`(y^t, h^t)` (what
  the loss saw); the Jacobians are taken along the re-run. When :math:`\theta` has not
  changed over the window (the re-run then retraces the real states) and :math:`W > t`, this
  is the exact gradient of :math:`L^t`, so the sum over steps is BPTT's gradient of
  :math:`\sum_t L^t`; for :math:`W \le t` the terms through :math:`h^{t-W}` (dependencies
  older than :math:`W` steps) are dropped.

The unroll is a scan of fixed length :math:`W` whose first :math:`W - k` steps are skipped
(``lax.cond``), so the compiled step is the same for every :math:`t`. Memory: the two
windows, :math:`W (n + |x|)` numbers (:meth:`TruncatedBPTT.state_bytes`); time: about
:math:`W` steps forward and backward per step.
"""

from __future__ import annotations

import numbers
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from ..autodiff import output_vjp
from ..contract import zero_cotangent
from .learner import InfluenceLearner
from .sparsity import jacobian_sparsity

__all__ = ["BPTT", "TruncatedBPTT"]


class TruncatedBPTT(InfluenceLearner):
    """Truncated BPTT over the last ``window`` steps (see the module docstring).

    Parameters
    ----------
    model : brainstate.nn.Module
    window : int
        Steps backpropagated through per step (``W >= 1``; ``W = 1`` is the one-step gradient
        with the previous state held constant).
    name : str, optional

    Attributes
    ----------
    influence : LearnerState
        The windows, ``{"inputs": (W, ...) per input leaf, "hidden": (W, n), "count": ()}``:
        oldest first, the newest step last (a session snapshots and restores them).

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp, etp_viz
    >>> cell = etp_viz.nn.ValinaRNNCell(2, 3)
    >>> brainstate.nn.init_all_states(cell)  # doctest: +ELLIPSIS
    ValinaRNNCell(...)
    >>> alg = etp_viz.learn.TruncatedBPTT(cell, window=4)
    >>> alg.compile_graph(jnp.ones(2))
    >>> grads = brainstate.transform.grad(lambda x: jnp.sum(alg(x) ** 2), alg.param_states)
    >>> _ = grads(jnp.ones(2))
    >>> int(alg.influence.value["count"]), alg.influence.value["hidden"].shape
    (1, (4, 3))
    """

    claim_family = "tbptt"

    def __init__(self, model: Any, window: int = 20, name: str | None = None):
        if isinstance(window, bool) or not isinstance(window, numbers.Integral):
            raise TypeError(
                f"TruncatedBPTT's window must be a positive integer, got {window!r} "
                f"({type(window).__name__})"
            )
        if int(window) < 1:
            raise ValueError(f"TruncatedBPTT's window must be a positive integer, got {window!r}")
        super().__init__(model, name=name)
        self.window: int = int(window)

    # -- the windows ---------------------------------------------------------------------------
    def init_influence(self) -> dict:
        """Empty windows: zeros and a count of 0."""
        w = self.window
        inputs = jax.tree.map(
            lambda a: jnp.zeros((w, *jnp.shape(a)), jnp.asarray(a).dtype), self._example
        )
        return {
            "inputs": inputs,
            "hidden": jnp.zeros((w, self.num_hidden), self._hidden_vec.dtype),
            "count": jnp.zeros((), jnp.int32),
        }

    def state_bytes(self) -> int:
        """Bytes of the learner's own state (the windows and the count)."""
        return int(
            sum(np.asarray(a).nbytes for a in jax.tree.leaves(self._influence_state().value))
        )

    def _shift(self, windows: dict, hidden: Any, args: tuple) -> dict:
        """The windows one step on: ``args`` and the state before them appended, the oldest
        dropped (stored in the windows' dtypes)."""

        def push(window, value):
            value = jnp.asarray(value, window.dtype)[None]
            return jnp.concatenate([window[1:], value], axis=0)

        return {
            "inputs": jax.tree.map(push, windows["inputs"], args),
            "hidden": push(windows["hidden"], hidden),
            "count": windows["count"] + 1,
        }

    def unroll(self, theta: Any, windows: dict, args: tuple) -> tuple[Any, Any]:
        """``(h̃^t, ỹ^t)``: the last ``min(count, W)`` steps of ``windows`` (already shifted
        to include this step) re-run with ``theta`` from the stored state; this step's inputs
        are ``args``."""
        w = self.window
        start = w - jnp.minimum(windows["count"], w)
        hidden = jax.lax.dynamic_index_in_dim(windows["hidden"], start, keepdims=False)
        if w > 1:
            earlier = jax.tree.map(lambda a: a[:-1], windows["inputs"])

            def body(h, item):
                i, xs = item
                h = jax.lax.cond(
                    i >= start, lambda h: self.pure_step(theta, h, *xs)[0], lambda h: h, h
                )
                return h, None

            hidden, _ = jax.lax.scan(body, hidden, (jnp.arange(w - 1), earlier))
        return self.pure_step(theta, hidden, *args)

    # -- the step ------------------------------------------------------------------------------
    def _make_step(self):
        learner = self

        def run(theta, hidden, windows, args):
            new_hidden, out = learner.pure_step(theta, hidden, *args)
            return new_hidden, out, learner._shift(windows, hidden, args)

        custom = jax.custom_vjp(run)

        def fwd(theta, hidden, windows, args):
            new_hidden, out, new_windows = run(theta, hidden, windows, args)
            return (new_hidden, out, new_windows), (theta, hidden, new_windows, args)

        def bwd(residuals, cotangents):
            theta, hidden, windows, args = residuals
            hidden_cot, out_cot, _ = cotangents
            vjp = output_vjp(
                lambda t: learner.unroll(t, windows, args), theta, forward=learner.forward_only
            )
            (grad,) = vjp((hidden_cot, out_cot))
            zero_windows = jax.tree.map(zero_cotangent, windows)
            return grad, jnp.zeros_like(hidden), zero_windows, jax.tree.map(zero_cotangent, args)

        custom.defvjp(fwd, bwd)

        def step(*args):
            theta, hidden = self._split([s.value for s in self._states])
            theta_vec = ravel_pytree(theta)[0]
            hidden_vec = ravel_pytree(hidden)[0]
            new_hidden, out, windows = custom(theta_vec, hidden_vec, self.influence.value, args)
            for state, value in zip(
                [s for s, p in zip(self._states, self._is_param) if not p],
                self._unravel_hidden(new_hidden),
            ):
                state.value = value
            self.influence.value = windows
            return out

        return step

    def reset_traces(self) -> None:
        """Empty the windows and zero the count (the model's states are left as they are)."""
        self._influence_state().value = self.init_influence()

    # -- claims --------------------------------------------------------------------------------
    def refine_claims(self, claims: Any) -> Any:
        """Per parameter entry: exact when no term is dropped, i.e. when neither the new state
        nor the output of a step can depend on an entry of ``h^{t-W}`` that the parameter can
        ever reach; otherwise approximate. Read off the step's structural Jacobian sparsity
        (:func:`.sparsity.jacobian_sparsity`), sound at every point: a readout is exact, and
        so is everything when the step forgets its state within ``W`` steps."""
        reason = (
            f"truncated BPTT: dependencies older than W={self.window} steps are dropped "
            "(the gradient through the state from before the window)"
        )
        return self.claims_by_columns(claims, ~self._dropped_columns(), reason)

    def influence_support(self) -> np.ndarray:
        """``∂h^{t-1}/∂θ`` over the ``W - 1`` re-run steps before this one (none at W = 1)."""
        from .patterns import step_patterns, window_pattern

        return window_pattern(*step_patterns(self), self.window - 1)

    def _dropped_columns(self) -> np.ndarray:
        """``(p,)`` bool: the parameter entries whose gradient loses a term at window ``W``.

        With the boolean patterns ``R_h`` (``∂h^t/∂h^{t-1}``), ``R_θ`` (``∂h^t/∂θ``) and
        ``R_y`` (``∂y^t/∂h^{t-1}``), the entries of ``h^{t-W}`` that ``θ_j`` reaches are the
        column ``j`` of the closed pattern ``P`` (:func:`.patterns.closed_pattern`); the
        dropped term is non-zero only where ``R_h^W P`` or ``R_y R_h^{W-1} P`` is."""
        from .patterns import bool_matmul, closed_pattern, step_patterns

        reach_h, reach_theta = step_patterns(self)
        (reach_y,) = jacobian_sparsity(
            lambda h, t, *args: _flat_outputs(self.pure_step(t, h, *args)[1]),
            self._hidden_vec,
            inputs=(self._theta_vec, *self._example),
        )
        reached, _ = closed_pattern(reach_h, reach_theta)
        carried = reached
        for _ in range(self.window - 1):
            carried = bool_matmul(reach_h, carried)
        via_output = bool_matmul(reach_y, carried)
        via_state = bool_matmul(reach_h, carried)
        return np.asarray(via_output.any(axis=0) | via_state.any(axis=0))


class BPTT(TruncatedBPTT):
    r"""Full BPTT over each episode of ``episode`` steps: the exact reference line.

    Steps are counted in episodes of ``episode`` steps from the learner's reset; at step
    :math:`t` of an episode (counted from 0) the gradient is that of :math:`L^t`
    backpropagated through every step since the episode's start, from the state the episode
    started in (held constant). Summed over the episode this is BPTT's gradient of the
    episode's loss :math:`\sum_t L^t`, the quantity a teaching task scores, and it equals it
    exactly when the episode starts from a state that does not depend on the weights, i.e.
    when the hidden state is reset at every episode start, as a live session on an episodic
    task does (``Session(..., task=task)``: every state and every learner's own state is put
    back at each episode start). So its claims are ``exact`` for every weight; the windows
    cost :math:`T (n + |x|)` numbers and each step re-runs up to :math:`T` steps.

    It is :class:`TruncatedBPTT` with ``window = episode`` whose window empties at each
    episode start (``count`` is the step within the episode), so it never reaches back
    across an episode boundary.

    Parameters
    ----------
    model : brainstate.nn.Module
    episode : int
        Steps per episode (a task's ``n_steps``; ``verify`` uses the length of its inputs).
    name : str, optional

    Examples
    --------
    >>> import brainstate, jax.numpy as jnp, etp_viz
    >>> cell = etp_viz.nn.ValinaRNNCell(2, 3)
    >>> brainstate.nn.init_all_states(cell)  # doctest: +ELLIPSIS
    ValinaRNNCell(...)
    >>> alg = etp_viz.learn.BPTT(cell, episode=2)
    >>> alg.compile_graph(jnp.ones(2))
    >>> grads = brainstate.transform.grad(lambda x: jnp.sum(alg(x) ** 2), alg.param_states)
    >>> _ = [grads(jnp.ones(2)) for _ in range(3)]   # the third step starts a new episode
    >>> int(alg.influence.value["count"])
    1
    >>> {c.kind for c in alg.gradient_claims().values()}
    {'exact'}
    """

    claim_family = "bptt"

    def __init__(self, model: Any, episode: int, name: str | None = None):
        if isinstance(episode, bool) or not isinstance(episode, numbers.Integral):
            raise TypeError(
                f"BPTT's episode must be a positive integer (steps per episode), got "
                f"{episode!r} ({type(episode).__name__})"
            )
        if int(episode) < 1:
            raise ValueError(f"BPTT's episode must be a positive integer, got {episode!r}")
        super().__init__(model, window=int(episode), name=name)

    @property
    def episode(self) -> int:
        """Steps per episode (the window)."""
        return self.window

    def _shift(self, windows: dict, hidden: Any, args: tuple) -> dict:
        """A full window means the previous episode ended: this step starts a new one (the
        count restarts, so the unroll begins at this step's starting state)."""
        count = jnp.where(windows["count"] >= self.window, 0, windows["count"])
        return super()._shift({**windows, "count": count}, hidden, args)

    def refine_claims(self, claims: Any) -> Any:
        """Every leaf exact: nothing is dropped inside an episode (the claim is about the
        episode's loss; see the class docstring for the reset it assumes)."""
        return self.claims_by_columns(claims, np.ones(self.num_params, bool), "")


def _flat_outputs(out: Any) -> Any:
    """The floating leaves of a step's output, raveled into one vector."""
    leaves = [jnp.ravel(leaf) for leaf in jax.tree.leaves(out) if _inexact(leaf)]
    return jnp.concatenate(leaves) if leaves else jnp.zeros((0,))


def _inexact(value: Any) -> bool:
    return jnp.issubdtype(jnp.result_type(value), jnp.inexact)
