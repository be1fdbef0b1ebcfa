r"""Stage 5: ``compile_etrace_graph`` and the :class:`ETraceGraph` the executor consumes.

Executor contract
-----------------
``graph = compile_etrace_graph(model, *args, recurrence='diagonal')`` returns an
:class:`ETraceGraph` (a NamedTuple; ``graph._asdict()`` works). Besides the spec's six fields
(``module_info``, ``hidden_groups``, ``hid_path_to_group``, ``hidden_param_op_relations``,
``hidden_perturb``, ``diagnostics``) it carries:

``graph.executor_jaxpr`` (closed jaxpr) and ``graph.run_step(args, state_vals, perturbs=None)``
    One forward step of the *perturbed* model (every hidden outvar ``h = ĥ + p``) that also
    returns what the learning rules need. Flat layout of ``executor_jaxpr``:

    * invars: ``[*model-arg leaves, *state leaves (module_info.compiled_model_states order),
      *perturbation vars (hidden_perturb.perturb_vars order)]``
    * outvars: ``[*model-output leaves, *new state leaves, *relation x, *relation y,
      *relation transition consts, *group transition consts]`` where, for relation ``r`` in
      ``hidden_param_op_relations`` order, "x" is ``r.x_var`` (skipped when ``None``), "y" is
      ``r.y_var``, and the consts are ``constvars`` of each ``r.y_to_hidden_group_jaxprs[k]``
      (k in ``r.hidden_groups`` order); group consts are ``g.transition_jaxpr_constvars`` per
      group. ``graph.executor_layout`` gives the slices.

    ``run_step`` evaluates it and returns a :class:`StepResult`:
    ``outputs`` (model output pytree), ``new_state_vals`` (one value per compiled state),
    ``xs[i]`` / ``ys[i]`` (relation i), ``relation_consts[i][k]`` (list, in constvar order, for
    relation i and its k-th group), ``group_consts[g]`` (list), ``hidden_prev[g]`` /
    ``hidden_new[g]`` (per-path values of group g before/after the step). It is traceable and
    differentiable: ``jax.vjp`` w.r.t. ``perturbs`` at zero gives :math:`\partial L/\partial h^t`.

Per relation ``r`` (``HiddenParamOpRelation``):
    ``r.y_to_hidden_groups(y, consts)`` evaluates the y -> h tails (df = a JVP of it);
    ``r.trainable_param_fns[key]`` maps the ``ParamState`` value (the whole pytree) to the
    primitive's trainable input (pull a gradient w.r.t. the input back to the leaves with
    ``jax.vjp``); ``r.trainable_is_leaf[key]`` is True when the input *is* the leaf.
    ``r.tail_position_preserving`` False means df is not per-position (diagnosed).

Per group ``g``: ``g.diagonal_jacobian(hidden_prev[g], group_consts[g])`` -> ``(*varshape,S,S)``.

Readouts: ``graph.readout_params`` maps each ``ParamState`` path whose leaves reach a model
output without crossing a new hidden value to a :class:`ReadoutParam` (leaf indices, equation
path); those parameters get their exact same-step gradient from the learn layer.
"""
