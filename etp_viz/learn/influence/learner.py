r"""Online learners that carry (an estimate of) the RTRL *influence matrix*
:math:`M^t = \partial h^t/\partial\theta` of the whole step, not per-relation ETP traces.

The model's step is traced once as a pure function of its state values (brainstate
``StatefulFunction``, as the BPTT oracle does) and flattened: ``h`` is every non-parameter
state leaf raveled into one vector (``n`` entries, the batch included), ``θ`` every parameter
leaf (``p`` entries). One step is :math:`(h^t, y^t) = F(\theta, h^{t-1}, x^t)`, so the exact
single-step gradient of a loss :math:`L^t(y^t, h^t)` is

.. math::

    \nabla_\theta L^t = \frac{\partial L^t}{\partial y^t}\Big(\frac{\partial y^t}{\partial\theta}
    + \frac{\partial y^t}{\partial h^{t-1}} M^{t-1}\Big)
    + \frac{\partial L^t}{\partial h^t} M^t, \qquad
    M^t = J_h^t M^{t-1} + J_\theta^t,

with :math:`J_h = \partial h^t/\partial h^{t-1}` and :math:`J_\theta = \partial h^t/\partial
\theta`. A subclass says how it keeps :math:`M` (exactly, sparsely, as a rank-1 estimate) through
:meth:`InfluenceLearner.init_influence`, :meth:`~InfluenceLearner.update_influence` and
:meth:`~InfluenceLearner.contract`. These learners need no ETP primitive (a plain ``x @ W`` is
learned too); their cost is a property of the whole step (``n`` × ``p`` for exact RTRL), so they
are for small, teaching-sized models.
"""

from __future__ import annotations

import warnings
from typing import Any

import brainstate
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from etp_viz import _compat

from ..base import state_ids
from ..vjp_step import zero_cotangent

__all__ = ["InfluenceLearner"]


class InfluenceLearner(brainstate.nn.Module):
    """Base of the influence-matrix learners (RTRL, SnAp-n, UORO); see the module docstring.

    Call it like the ETP learners: ``alg.compile_graph(x0)``, then ``alg(x)`` once per step
    inside ``brainstate.transform.grad(..., alg.param_states)``.
    """

    #: the name its gradient claims carry (``graph.gradient_claims(alg)``)
    claim_name = "influence"

    def __init__(self, model: Any, name: str | None = None):
        super().__init__(name=name)
        self.model = model
        self.is_compiled = False
        self._compiled = _Held()
        self.graph = None
        self.influence = None
        self.mesh = None

    @property
    def graph(self) -> Any:
        """The model's ``ETraceGraph`` (for claims and the explorer), held outside brainstate's
        state walk: its tables are keyed by jaxpr variables, which the walk cannot sort, and
        ``alg.states()`` must list the influence (a session snapshots and resets it)."""
        return self._compiled.graph

    @graph.setter
    def graph(self, value: Any) -> None:
        self._compiled.graph = value

    @property
    def param_states(self) -> Any:
        """``{path: ParamState}`` of the model."""
        return self.model.states(brainstate.ParamState)

    # -- compiling -----------------------------------------------------------------------
    def compile_graph(self, *args: Any) -> None:
        """Trace the step on example inputs, flatten its states, allocate the influence."""
        from etp_viz.compiler import compile_etrace_graph

        function = _compat.get_stateful_function_class()(self.model, return_only_write=False)
        function.make_jaxpr(*args)
        self._function = function
        self._states = tuple(function.get_states(*args))
        self._is_param = [isinstance(s, brainstate.ParamState) for s in self._states]
        theta, hidden = self._split([s.value for s in self._states])
        self._theta_vec, self._unravel_theta = ravel_pytree(theta)
        self._hidden_vec, self._unravel_hidden = ravel_pytree(hidden)
        self.num_hidden = int(self._hidden_vec.size)
        self.num_params = int(self._theta_vec.size)
        with warnings.catch_warnings():  # the ETP view is for claims and the explorer only
            warnings.simplefilter("ignore")
            self.graph = compile_etrace_graph(self.model, *args)
        self._example = args
        self.prepare()
        self.influence = brainstate.ShortTermState(self.init_influence())
        self._step = self._make_step()
        self._compiled_states = state_ids(self.model)
        self.is_compiled = True

    def prepare(self) -> None:
        """Called once per compilation, before :meth:`init_influence` (patterns, keys)."""

    # -- what a subclass defines ---------------------------------------------------------
    def init_influence(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def update_influence(self, influence: Any, jac: Any) -> Any:  # pragma: no cover
        """The next influence from the previous one; ``jac`` gives ``jvp_h(v)`` (J_h v),
        ``vjp_theta(u)`` (uᵀ J_θ), ``jac_h()`` and ``jac_theta()`` (dense, for small models)."""
        raise NotImplementedError

    def contract(self, signal: Any, influence: Any) -> Any:  # pragma: no cover
        """``signal @ M`` (a ``(p,)`` vector) for a ``(n,)`` learning signal."""
        raise NotImplementedError

    # -- the pure step ---------------------------------------------------------------------
    def _split(self, values: list) -> tuple[list, list]:
        theta = [v for v, p in zip(values, self._is_param) if p]
        hidden = [v for v, p in zip(values, self._is_param) if not p]
        return theta, hidden

    def _merge(self, theta: list, hidden: list) -> list:
        it_t, it_h = iter(theta), iter(hidden)
        return [next(it_t) if p else next(it_h) for p in self._is_param]

    def pure_step(self, theta_vec: Any, hidden_vec: Any, *args: Any) -> tuple[Any, Any]:
        """``(h^t, y^t)`` from flat ``θ`` and ``h^{t-1}``."""
        values = self._merge(self._unravel_theta(theta_vec), self._unravel_hidden(hidden_vec))
        new_values, out = _compat.stateful_function_call(self._function, values, *args)
        new_hidden = self._split(new_values)[1]
        return ravel_pytree(new_hidden)[0].astype(hidden_vec.dtype), out

    def _make_step(self):
        learner = self

        def forward(theta, hidden, influence, args):
            def new_h(t, h):
                return learner.pure_step(t, h, *args)[0]

            jac = _Jacobians(new_h, theta, hidden)
            new_hidden, out = learner.pure_step(theta, hidden, *args)
            return new_hidden, out, learner.update_influence(influence, jac)

        def run(theta, hidden, influence, args):
            return forward(theta, hidden, influence, args)

        custom = jax.custom_vjp(run)

        def fwd(theta, hidden, influence, args):
            # one evaluation of the step gives the outputs, the new state and the outputs' VJP
            (new_hidden, out), vjp_step = jax.vjp(
                lambda t, h: learner.pure_step(t, h, *args), theta, hidden
            )
            jac = _Jacobians(lambda t, h: learner.pure_step(t, h, *args)[0], theta, hidden)
            new_influence = learner.update_influence(influence, jac)
            return (new_hidden, out, new_influence), (vjp_step, influence, new_influence, args)

        def bwd(residuals, cotangents):
            vjp_step, influence, new_influence, args = residuals
            hidden_cot, out_cot, _ = cotangents
            # the outputs' part only: the new state's cotangent goes through M^t below
            direct, via_old = vjp_step((jnp.zeros_like(hidden_cot), out_cot))
            grad = direct + learner.contract(via_old, influence)
            grad = grad + learner.contract(hidden_cot, new_influence)
            zero_influence = jax.tree.map(jnp.zeros_like, influence)
            return grad, jnp.zeros_like(via_old), zero_influence, jax.tree.map(zero_cotangent, args)

        custom.defvjp(fwd, bwd)

        def step(*args):
            theta, hidden = self._split([s.value for s in self._states])
            theta_vec = ravel_pytree(theta)[0]
            hidden_vec = ravel_pytree(hidden)[0]
            new_hidden, out, influence = custom(theta_vec, hidden_vec, self.influence.value, args)
            for state, value in zip(
                [s for s, p in zip(self._states, self._is_param) if not p],
                self._unravel_hidden(new_hidden),
            ):
                state.value = value
            self.influence.value = influence
            return out

        return step

    def update(self, *args: Any) -> Any:
        if not self.is_compiled:
            raise RuntimeError(
                f"{type(self).__name__} is not compiled: call `alg.compile_graph(x0)` with an "
                "example input of one step first"
            )
        return self._step(*args)

    # -- resets ------------------------------------------------------------------------------
    def reset_traces(self) -> None:
        """Zero the influence (the model's states are left as they are)."""
        self.influence.value = self.init_influence()

    def reset_state(self, batch_size: int | None = None, **kwargs: Any) -> None:
        """Reset the model's states (keeping the compiled batch size) and the influence."""
        if batch_size is None and self.is_compiled:
            leaves = jax.tree.leaves(self._example)
            batch_size = leaves[0].shape[0] if leaves and leaves[0].ndim >= 2 else None
        brainstate.nn.reset_all_states(self.model, batch_size, **kwargs)
        if self.is_compiled and self._compiled_states != state_ids(self.model):
            self.compile_graph(*self._example)  # the reset built new State objects
        elif self.is_compiled:
            self.reset_traces()

    # -- claims --------------------------------------------------------------------------
    def adjust_claims(self, claims: Any) -> Any:  # pragma: no cover - subclasses
        return claims

    def param_columns(self) -> dict[str, tuple[int, int]]:
        """``{dotted leaf path: (start, stop)}``: each parameter leaf's columns of ``M``."""
        from etp_viz.compiler.dataflow import leaf_name

        path_of = {id(s): tuple(p) for p, s in brainstate.graph.states(self.model).items()}
        columns, start = {}, 0
        for state in (s for s, p in zip(self._states, self._is_param) if p):
            for key, leaf in jax.tree_util.tree_flatten_with_path(state.value)[0]:
                size = int(jnp.size(leaf))
                columns[leaf_name(path_of.get(id(state), ("?",)), key)] = (start, start + size)
                start += size
        return columns

    def claims_by_columns(
        self, claims: Any, covered: Any, reason: str, name: str | None = None
    ) -> Any:
        """Each leaf exact when every one of its columns is ``covered`` (kept in full), else
        approximate with ``reason``."""
        import dataclasses

        columns = self.param_columns()
        for key, claim in list(claims.items()):
            start, stop = columns.get(key, (0, 0))
            exact = bool(covered[start:stop].all())
            claims[key] = dataclasses.replace(
                claim,
                kind="exact" if exact else "approximate",
                reason="" if exact else reason,
                dropped=(),
                online=True,
                algorithm=name or self.claim_name,
            )
        return claims


class _Held:
    """A plain holder: brainstate's graph walk treats it as an opaque leaf."""

    graph: Any = None


class _Jacobians:
    """Lazy Jacobian products of ``h^t = f(θ, h^{t-1})`` at one point."""

    def __init__(self, fn: Any, theta: Any, hidden: Any):
        self.fn, self.theta, self.hidden = fn, theta, hidden

    def jvp_h(self, v: Any) -> Any:
        return jax.jvp(lambda h: self.fn(self.theta, h), (self.hidden,), (v,))[1]

    def vjp_theta(self, u: Any) -> Any:
        return jax.vjp(lambda t: self.fn(t, self.hidden), self.theta)[1](u)[0]

    def jac_h(self) -> Any:
        return jax.jacfwd(lambda h: self.fn(self.theta, h))(self.hidden)

    def jac_theta(self) -> Any:
        return jax.jacfwd(lambda t: self.fn(t, self.hidden))(self.theta)
