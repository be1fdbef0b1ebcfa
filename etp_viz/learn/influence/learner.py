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

They work straight from the step function and never need the ETP compiler: a model it refuses
(a solver loop around the state whose trip count is not a compile-time constant: the compiler
unrolls static ``fori_loop`` / ``scan`` sub-steps) is learned all the same. ``alg.graph`` (the
explorer's drawing) is compiled only when asked for; where the ETP compiler refuses the model
it is a :class:`StepGraph` that still states the claims.

The *cut step* :meth:`InfluenceLearner.cut_step` is the same step with every read of a state's
*new* value (a stacked layer reading the layer below after its update, an output reading the
state it returns) taken from a separate argument ``r``: ``(h^t, y^t) = F_c(\theta, h^{t-1},
r, x^t)`` at ``r = h^t``. Its Jacobians are the step's *direct* ones: what a parameter feeds
without crossing another state's new value (OSTL's layers, SnAp's same-step gradient).
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import brainstate
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from etp_viz import _compat
from etp_viz.compiler._jaxpr import REVERSE_ONLY_PRIMITIVE_NAMES, binds

from ..autodiff import StepJacobians, output_vjp
from ..contract import LearnerState, state_ids, zero_cotangent

__all__ = ["InfluenceLearner", "StepGraph"]


class InfluenceLearner(brainstate.nn.Module):
    """Base of the influence-matrix learners (RTRL, SnAp-n, UORO); see the module docstring.

    Call it like the ETP learners: ``alg.compile_graph(x0)``, then ``alg(x)`` once per step
    inside ``brainstate.transform.grad(..., alg.param_states)``.
    """

    #: whose gradient claims it makes (the registry's family; ``graph.gradient_claims(alg)``)
    claim_family = "influence"

    def __init__(self, model: Any, name: str | None = None):
        # brainstate declares ``Module.__init__(name=...)`` only outside ``TYPE_CHECKING``
        super().__init__(name=name)  # type: ignore[call-arg]
        self.model = model
        self.is_compiled = False
        self._compiled = _Held()
        self.graph = None
        self.influence: LearnerState | None = None
        self.mesh = None

    @property
    def graph(self) -> Any:
        """The model's ``ETraceGraph`` for the explorer, compiled on first use (the learner
        itself never needs it); a :class:`StepGraph` where the ETP compiler refuses the model.
        Held outside brainstate's state walk: its tables are keyed by jaxpr variables, which
        the walk cannot sort, and ``alg.states()`` must list the influence (a session
        snapshots and resets it)."""
        if self._compiled.graph is None and self.is_compiled:
            from etp_viz.compiler import compile_etrace_graph

            try:
                with warnings.catch_warnings():  # the ETP view is for the explorer only
                    warnings.simplefilter("ignore")
                    self._compiled.graph = compile_etrace_graph(self.model, *self._example)
            except Exception as err:  # noqa: BLE001 - any refusal: the learner's own view
                self._compiled.graph = StepGraph(self, err)
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
        """Trace the step on example inputs, flatten its states, allocate the influence (the
        ETP compiler is not run: see :attr:`graph`)."""
        from etp_viz.compiler.module_info import check_example_inputs

        check_example_inputs(self.model, args)  # a list of numbers: say so, before tracing
        function = _compat.get_stateful_function_class()(self.model, return_only_write=False)
        function.make_jaxpr(*args)
        self._function = function
        self._states = tuple(function.get_states(*args))
        self._is_param = [isinstance(s, brainstate.ParamState) for s in self._states]
        values = [s.value for s in self._states]
        theta, hidden = self._split(values)
        self._theta_vec, self._unravel_theta = ravel_pytree(theta)
        self._hidden_vec, self._unravel_hidden = ravel_pytree(hidden)
        self.num_hidden = int(self._hidden_vec.size)
        self.num_params = int(self._theta_vec.size)
        self.graph = None
        self._example = args
        self._compiled.patterns = {}  # structural patterns of this compilation (.patterns)
        #: the cut step, traced on first use (SnAp, OSTL, claims)
        self._cut_fn: _CutStep | None = None
        #: a ``while_loop`` has no reverse mode: the output's Jacobians are then taken
        #: forward; a ``jax.custom_vjp`` (a surrogate spike) has no forward mode: the step's
        #: Jacobian products are then taken in reverse
        jaxpr = function.get_jaxpr(*args)
        self._forward_only = binds(jaxpr, {"while"})
        self._reverse_only = binds(jaxpr, REVERSE_ONLY_PRIMITIVE_NAMES)
        if self._forward_only and self._reverse_only:
            raise ValueError(
                f"{type(self).__name__}: the step of {type(self.model).__name__} holds both a "
                "`while_loop` (no reverse-mode derivative) and a `jax.custom_vjp` (no "
                "forward-mode one), so no Jacobian of the step can be taken. Write the loop "
                "with a static trip count (`jax.lax.fori_loop` with constant bounds, or "
                "`jax.lax.scan`), or the custom derivative with `jax.custom_jvp`."
            )
        self.prepare()
        self.influence = LearnerState(self.init_influence())
        self._step = self._make_step()
        self._compiled_states = state_ids(self.model)
        self.is_compiled = True

    # -- what the step was compiled on (read by .patterns and .sparsity) ---------------------
    def pattern_cache(self) -> dict:
        """The structural patterns of this compilation (:mod:`.patterns`), emptied by each
        :meth:`compile_graph`; held outside brainstate's state walk, which cannot sort its
        mixed keys."""
        if self._compiled.patterns is None:
            self._compiled.patterns = {}
        return self._compiled.patterns

    @property
    def example_args(self) -> tuple:
        """The example inputs of one step :meth:`compile_graph` traced."""
        return self._example

    @property
    def theta_vec(self) -> Any:
        """Every parameter leaf of the step, flattened into one vector (``M``'s columns)."""
        return self._theta_vec

    @property
    def hidden_vec(self) -> Any:
        """Every hidden value of the step, flattened into one vector (``M``'s rows)."""
        return self._hidden_vec

    @property
    def step_states(self) -> tuple:
        """The states one step reads, in the step's order."""
        return self._states

    @property
    def state_is_param(self) -> list[bool]:
        """Per :attr:`step_states` entry: a ``ParamState`` (else a hidden / other state)."""
        return self._is_param

    @property
    def forward_only(self) -> bool:
        """The step holds a ``while_loop`` (no reverse mode): output Jacobians go forward."""
        return self._forward_only

    @property
    def reverse_only(self) -> bool:
        """The step binds a ``jax.custom_vjp`` (no forward mode): Jacobian products go in
        reverse (:mod:`etp_viz.learn.autodiff`)."""
        return self._reverse_only

    def _influence_state(self) -> LearnerState:
        """The influence's state, which :meth:`compile_graph` creates."""
        if self.influence is None:
            raise RuntimeError(
                f"{type(self).__name__} is not compiled: call `alg.compile_graph(x0)` with an "
                "example input of one step first"
            )
        return self.influence

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

    def cut_step(
        self, theta_vec: Any, hidden_vec: Any, reads_vec: Any, *args: Any
    ) -> tuple[Any, Any]:
        """``(h^t, y^t)`` of the step with every read of a state's new value taken from
        ``reads_vec`` (flat like ``h``); equal to :meth:`pure_step` at ``reads_vec = h^t``."""
        values = self._merge(self._unravel_theta(theta_vec), self._unravel_hidden(hidden_vec))
        reads = jax.tree.leaves(self._unravel_hidden(reads_vec))
        if self._cut_fn is None:
            now = [s.value for s in self._states]
            self._cut_fn = _CutStep(self._function, now, self._is_param, self._example)
        new_values, out = self._cut_fn(values, reads, args)
        new_hidden = self._split(new_values)[1]
        return ravel_pytree(new_hidden)[0].astype(hidden_vec.dtype), out

    def direct_reach(self, outputs: bool = False) -> Any:
        """Boolean structural pattern of the cut step's ``∂h^t/∂θ`` (what a parameter feeds
        without crossing another state's new value, ``(n, p)``); ``outputs=True``: of its
        outputs' ``∂y^t/∂θ`` instead (a readout, ``(m, p)``)."""
        from .patterns import flat_outputs
        from .sparsity import jacobian_sparsity

        part = 1 if outputs else 0
        (reach,) = jacobian_sparsity(
            lambda t, *h_r_a: flat_outputs(self.cut_step(t, *h_r_a)[part]),
            self._theta_vec,
            inputs=(self._hidden_vec, self._hidden_vec, *self._example),
        )
        return reach

    #: SnAp: the gradient of step t reads the step's output through the *masked* influence
    #: of the new state (the papers' definition); otherwise (RTRL, OSTL) the output's same-step
    #: Jacobian is taken whole and the mask applies from the next step on
    mask_same_step = False

    def _make_step(self):
        learner = self

        def forward(theta, hidden, influence, args):
            def new_h(t, h):
                return learner.pure_step(t, h, *args)[0]

            jac = StepJacobians(new_h, theta, hidden, learner.forward_only, learner.reverse_only)
            new_hidden, out = learner.pure_step(theta, hidden, *args)
            return new_hidden, out, learner.update_influence(influence, jac)

        def run(theta, hidden, influence, args):
            return forward(theta, hidden, influence, args)

        custom = jax.custom_vjp(run)

        def fwd(theta, hidden, influence, args):
            new_hidden, out = learner.pure_step(theta, hidden, *args)
            if learner.mask_same_step:  # the output's reads of h^t apart (cut step)
                out_vjp = output_vjp(
                    lambda t, h, r: learner.cut_step(t, h, r, *args)[1],
                    theta,
                    hidden,
                    new_hidden,
                    forward=learner.forward_only,
                )
            else:
                out_vjp = output_vjp(
                    lambda t, h: learner.pure_step(t, h, *args)[1],
                    theta,
                    hidden,
                    forward=learner.forward_only,
                )
            step_h = lambda t, h: learner.pure_step(t, h, *args)[0]  # noqa: E731
            jac = StepJacobians(step_h, theta, hidden, learner.forward_only, learner.reverse_only)
            new_influence = learner.update_influence(influence, jac)
            return (new_hidden, out, new_influence), (out_vjp, influence, new_influence, args)

        def bwd(residuals, cotangents):
            out_vjp, influence, new_influence, args = residuals
            hidden_cot, out_cot, _ = cotangents
            # the outputs' part: direct, through h^{t-1} (M^{t-1}) and, for SnAp, through the
            # reads of h^t (M^t); the new state's own cotangent goes through M^t
            direct, via_old, *via_new = out_vjp(out_cot)
            grad = direct + learner.contract(via_old, influence)
            signal = hidden_cot + via_new[0] if via_new else hidden_cot
            grad = grad + learner.contract(signal, new_influence)
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
        self._influence_state().value = self.init_influence()

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
    def adjust_claims(self, claims: Any) -> Any:
        """The learner's claims from a start (``graph.gradient_claims(alg)`` passes D-RTRL's):
        :meth:`refine_claims`, then ``none`` for every leaf zero by structure
        (:meth:`zeros_by_structure`), decided before any run."""
        return self.zeros_by_structure(self.refine_claims(claims))

    def refine_claims(self, claims: Any) -> Any:  # pragma: no cover - subclasses
        """Each leaf's kind from how the learner keeps the influence (a subclass's rule)."""
        return claims

    def influence_support(self) -> Any:
        """``(n, p)`` bool: where the influence the gradient reads can be non-zero (RTRL:
        every entry it can fill, :func:`.patterns.closed_pattern`)."""
        from .patterns import closed_pattern, step_patterns

        return closed_pattern(*step_patterns(self))[0]

    def zeros_by_structure(self, claims: Any) -> Any:
        """Claim ``none`` for each leaf whose every entry gets 0 for every input: no output
        reads it directly and the learning signal never meets the influence kept for it
        (:func:`.patterns.silent_columns`), e.g. SnAp-1 or OSTL on a stack whose upper layer
        reads the lower one's old state.

        >>> alg.gradient_claims()["layers.0.Win"].reason  # doctest: +SKIP
        'zero by structure: SnAp-1 keeps its influence on layers.0.h only, ...'
        """
        from .patterns import zero_claims

        return zero_claims(self, claims)

    def claim_label(self) -> str:
        """The learner's name in a claim's reason (``"SnAp-1"``, ``"OSTLRecurrent"``)."""
        return type(self).__name__

    def param_columns(self) -> dict[str, tuple[int, int]]:
        """``{dotted leaf path: (start, stop)}``: each parameter leaf's columns of ``M``."""
        return {key: (start, stop) for key, _, _, start, stop in self._param_leaves()}

    def _param_leaves(self) -> list[tuple[str, tuple, int, int, int]]:
        """``(dotted leaf path, weight path, leaf index, start, stop)`` per parameter leaf."""
        from etp_viz.compiler.dataflow import leaf_name

        path_of = {id(s): tuple(p) for p, s in brainstate.graph.states(self.model).items()}
        leaves, start = [], 0
        for state in (s for s, p in zip(self._states, self._is_param) if p):
            path = path_of.get(id(state), ("?",))
            flat = jax.tree_util.tree_flatten_with_path(state.value)[0]
            for index, (key, leaf) in enumerate(flat):
                size = int(jnp.size(leaf))
                leaves.append((leaf_name(path, key), path, index, start, start + size))
                start += size
        return leaves

    def gradient_claims(self) -> Any:
        """Per parameter leaf, the learner's claim (``GradientClaims``), read off the step
        alone (no ETP graph): what ``alg.graph.gradient_claims(alg)`` also gives."""
        from etp_viz.compiler.claims import GradientClaim, GradientClaims

        if not self.is_compiled:
            raise RuntimeError(
                f"{type(self).__name__} is not compiled: call `alg.compile_graph(x0)` first"
            )
        readout = self.direct_reach(outputs=True).any(axis=0)
        claims = GradientClaims()
        for key, path, index, start, stop in self._param_leaves():
            claims[key] = GradientClaim(
                path=key,
                kind="exact",
                algorithm=self.claim_family,
                online=True,
                readout=bool(readout[start:stop].any()),
                weight_path=path,
                leaf_index=index,
            )
        return self.adjust_claims(claims)

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
                algorithm=name or self.claim_family,
            )
        return claims


class _Held:
    """A plain holder: brainstate's graph walk treats it as an opaque leaf."""

    graph: Any = None
    patterns: Any = None


class StepLayer(NamedTuple):
    """A layer of the step (:func:`.patterns.state_layers`): its hidden states' paths."""

    # a field named like ``tuple.index``: valid at runtime, rejected by mypy's NamedTuple check
    index: int  # type: ignore[assignment]
    hidden_paths: tuple


class StepGraph:
    """What an influence learner shows where the ETP compiler refuses the model: its claims
    (:meth:`InfluenceLearner.gradient_claims`) and its layers as ``hidden_groups``; ``error``
    is why there is no ETP graph to draw."""

    def __init__(self, learner: InfluenceLearner, error: Exception):
        from .patterns import state_layers

        self.error = error
        self._learner = learner
        self.hidden_groups = [
            StepLayer(i, tuple(paths)) for i, paths in enumerate(state_layers(learner)[1])
        ]

    def gradient_claims(self, algorithm: Any = None) -> Any:
        if algorithm is not None and algorithm is not self._learner:
            raise ValueError(
                "this model has no ETP graph (the ETP compiler refused it: "
                f"{self.error}); only its own learner's claims are known"
            )
        return self._learner.gradient_claims()


class _CutStep:
    """The traced step (state leaves and inputs in, new state leaves and outputs out),
    evaluated with the reads of the hidden states' new values substituted."""

    def __init__(self, function: Any, values: list, is_param: list, args: tuple):
        closed, shapes = jax.make_jaxpr(
            lambda v, *a: _compat.stateful_function_call(function, v, *a), return_shape=True
        )(values, *args)
        self.jaxpr, self.consts = _compat.split_closed_jaxpr(closed)
        self.values_def = jax.tree.structure(values)
        self.num_values = len(jax.tree.leaves(values))
        self.out_def = jax.tree.structure(shapes[1])
        hidden_leaf = []
        for value, param in zip(values, is_param):
            hidden_leaf += [not param] * len(jax.tree.leaves(value))
        inputs = set(self.jaxpr.invars) | set(self.jaxpr.constvars)
        outs = self.jaxpr.outvars[: self.num_values]
        #: per hidden leaf, the Var of its new value (None: unchanged or a constant)
        self.new_vars = [
            v if _compat.is_var(v) and v not in inputs else None
            for v, h in zip(outs, hidden_leaf)
            if h
        ]
        self.hidden_positions = [i for i, h in enumerate(hidden_leaf) if h]

    def __call__(self, values: list, reads: list, args: tuple) -> tuple[list, Any]:
        substitute = {}
        for var, value in zip(self.new_vars, reads):
            if var is not None and var not in substitute:
                substitute[var] = jnp.asarray(value, var.aval.dtype)
        env: dict = {}

        def read(atom: Any) -> Any:
            if _compat.is_literal(atom):
                return atom.val
            return substitute[atom] if atom in substitute else env[atom]

        flat = jax.tree.leaves((values, args))
        for var, value in zip(self.jaxpr.constvars, self.consts):
            env[var] = value
        for var, value in zip(self.jaxpr.invars, flat):
            env[var] = value
        for eqn in self.jaxpr.eqns:
            subfuns, params = _compat.eqn_bind_params(eqn)
            outs = eqn.primitive.bind(*subfuns, *[read(a) for a in eqn.invars], **params)
            outs = outs if eqn.primitive.multiple_results else [outs]
            for var, value in zip(eqn.outvars, outs):
                env[var] = value
        own = dict(zip(self.hidden_positions, self.new_vars))
        result = []
        for i, atom in enumerate(self.jaxpr.outvars):
            if i < self.num_values and own.get(i) is atom:
                result.append(env[atom])  # the state's own new value
            else:
                result.append(atom.val if _compat.is_literal(atom) else read(atom))
        new_values = jax.tree.unflatten(self.values_def, result[: self.num_values])
        return list(new_values), jax.tree.unflatten(self.out_def, result[self.num_values :])
