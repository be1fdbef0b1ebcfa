"""Stage 1: trace a ``brainstate.nn.Module`` once into one flat jaxpr and index its states.

The jaxpr's invars are ``[model-argument leaves..., state leaves...]`` and its outvars
``[model-output leaves..., new state leaves...]`` (every compiled state, written or not).
Nested ``jit``/``pjit`` bodies are spliced in, and ``cond``s holding ETP ops or writing
step results are if-converted (:func:`._jaxpr.inline_calls`), so every Var lives in one jaxpr
and equation indices are stable ids.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import brainstate
import jax
import numpy as np

from etp_viz import _compat
from etp_viz._compat import Jaxpr, Var

from ._jaxpr import CONTROL_FLOW_PRIMITIVE_NAMES, DefUse, eval_jaxpr, inline_calls, split_closed
from .loops import loop_not_unrolled_reason, non_param_state_vars

__all__ = ["ModuleInfo", "check_example_inputs", "extract_module_info", "Path"]

Path = tuple


class ModuleInfo(NamedTuple):
    """The compiler's structured view of one traced model step.

    Attributes
    ----------
    jaxpr : Jaxpr
        The flat open jaxpr (no nested jit).
    closed_jaxpr : ClosedJaxpr
        ``jaxpr`` closed over ``consts``.
    compiled_model_states : tuple of State
        States the step reads or writes, in jaxpr order.
    retrieved_model_states : dict
        ``{path: State}`` for every state of the model.
    state_id_to_path : dict
        ``{id(state): path}``.
    state_tree_invars, state_tree_outvars : tuple of pytrees of Var
        Per compiled state, its value's pytree of invars / outvars.
    hidden_path_to_invar, hidden_path_to_outvar : dict
    invar_to_hidden_path, outvar_to_hidden_path : dict
    hidden_outvar_to_invar : dict
    weight_invars : list of Var
        Every ``ParamState`` leaf invar.
    weight_path_to_invars : dict
        ``{path: [leaf invars in jax.tree.leaves order]}``.
    invar_to_weight_path : dict
    """

    model: Any
    jaxpr: Jaxpr
    #: top-level constvars (values in ``consts``) and non-constant invars of ``jaxpr``
    constvars: list
    invars: list
    closed_jaxpr: Any
    consts: list
    compiled_model_states: tuple
    retrieved_model_states: dict
    state_id_to_path: dict
    state_tree_invars: tuple
    state_tree_outvars: tuple
    hidden_path_to_invar: dict
    hidden_path_to_outvar: dict
    invar_to_hidden_path: dict
    outvar_to_hidden_path: dict
    hidden_outvar_to_invar: dict
    weight_invars: list
    weight_path_to_invars: dict
    invar_to_weight_path: dict
    #: number of flattened model-argument leaves at the front of ``jaxpr.invars``
    num_arg_leaves: int
    #: number of flattened model-output leaves at the front of ``jaxpr.outvars``
    num_out_leaves: int
    out_treedef: Any
    #: ``{path: S}``: 1 for a ``HiddenState``, the last axis for a multi-state hidden class
    hidden_path_to_num_state: dict
    #: top-level equation index -> names of the jit calls it was inlined from
    nested_jit_eqns: dict
    def_use: DefUse
    #: what ``lift=True`` rewrote (a :class:`etp_viz.compiler.lift.LiftReport`); None without
    lifting: Any = None
    #: the blocks of fused weight ops (:class:`etp_viz.compiler.lift.blocks.WeightBlock`):
    #: one ETP equation per gate of a ``split`` product (brainstate's ``LSTMCell.W``)
    blocks: tuple = ()

    @property
    def arg_invars(self) -> list:
        return list(self.invars[: self.num_arg_leaves])

    @property
    def out_vars(self) -> list:
        return list(self.jaxpr.outvars[: self.num_out_leaves])

    @property
    def hidden_paths(self) -> list:
        return list(self.hidden_path_to_invar)

    def path_of(self, state: Any) -> Path:
        return self.state_id_to_path[id(state)]

    def jaxpr_call(self, state_vals: Sequence[Any], *args: Any) -> tuple[Any, list]:
        """Run the step on values: ``(outputs pytree, [new value of each compiled state])``."""
        leaves = jax.tree.leaves((args, list(state_vals)))
        outs = eval_jaxpr(self.jaxpr, self.consts, *leaves)
        outputs = jax.tree.unflatten(self.out_treedef, outs[: self.num_out_leaves])
        flat_states = outs[self.num_out_leaves :]
        new_vals, start = [], 0
        for tree in self.state_tree_outvars:
            leaves_tree = jax.tree.structure(tree)
            n = len(jax.tree.leaves(tree))
            new_vals.append(jax.tree.unflatten(leaves_tree, flat_states[start : start + n]))
            start += n
        return outputs, new_vals


def extract_module_info(model: Any, *args: Any, lift: bool = False, **kwargs: Any) -> ModuleInfo:
    """Extract the model information for the ETP compiler.

    Parameters
    ----------
    model : brainstate.nn.Module
        The model; its states must be initialised (``brainstate.nn.init_all_states``).
    *args
        Example positional inputs of one step. Keyword arguments are not supported: bind them
        with ``functools.partial`` first.
    lift : bool
        Rewrite plain ops on parameters (``x @ W``, ``W * h``, ``conv(x, K)``) into the ETP
        primitives computing them (:mod:`etp_viz.compiler.lift`); ``lifting`` says what.

    Examples
    --------
    >>> minfo = extract_module_info(model, jnp.zeros(10))  # doctest: +SKIP
    >>> len(minfo.hidden_path_to_invar)  # doctest: +SKIP
    2
    """
    _check_model_and_args(model, kwargs)
    check_example_inputs(model, args)
    stateful = _compat.get_stateful_function_class()(model, return_only_write=False)
    try:
        stateful.make_jaxpr(*args)
    except (TypeError, ValueError) as error:
        if type(error) not in (TypeError, ValueError):  # a subclass may take other arguments
            raise
        raise _explain_tracing_error(error, model, args) from error
    except AttributeError as error:
        if _has_hidden_states(model):
            raise
        raise ValueError(
            f"model: {type(model).__name__}'s states are not initialised (tracing its step "
            f"raised {type(error).__name__}: {error}). Call "
            "brainstate.nn.init_all_states(model) (with batch_size=B for batched inputs) "
            "before compiling, verifying or learning."
        ) from error
    closed = stateful.get_jaxpr(*args)
    states = tuple(stateful.get_states(*args))
    written = list(stateful.get_state_trace(*args).been_writen)
    # brainstate's out treedef covers ``(outputs, state values)``; keep the outputs part
    out_treedef = stateful.get_out_treedef(*args).children()[0]

    open_jaxpr, consts = split_closed(closed)
    from etp_viz.ops.braintrace_adapter import register_braintrace_primitives_in

    # a model built with braintrace: adopt its ETP ops (before inlining: if-converting a cond
    # looks for ETP ops in its branches)
    register_braintrace_primitives_in(open_jaxpr)
    # inner loops that touch a state are unrolled (.loops): they need the states' Vars
    # with lift, a cond taking a weight is if-converted so its plain ops on it can be lifted
    lift_vars = non_param_state_vars(states, open_jaxpr, params=True) if lift else ()
    flat = inline_calls(
        open_jaxpr,
        consts,
        state_vars=non_param_state_vars(states, open_jaxpr),
        lift_vars=lift_vars,
    )
    jaxpr = flat.jaxpr

    retrieved = dict(brainstate.graph.states(model).items())
    state_id_to_path = {id(st): tuple(path) for path, st in retrieved.items()}
    for i, st in enumerate(states):  # states read from outside the model get a synthetic path
        state_id_to_path.setdefault(id(st), ("<external>", str(i)))

    num_state_leaves = sum(len(jax.tree.leaves(st.value)) for st in states)
    num_arg_leaves = len(flat.invars) - num_state_leaves
    num_out_leaves = len(jaxpr.outvars) - num_state_leaves
    state_invars = _split_by_state(states, flat.invars[num_arg_leaves:])
    state_outvars = _split_by_state(states, jaxpr.outvars[num_out_leaves:])

    maps = _classify_states(states, state_invars, state_outvars, state_id_to_path)
    lifting = None
    if lift:
        flat, lifting = _lift(flat, states, maps, state_id_to_path)
    flat, blocks, lifting = _split_blocks(flat, maps, lifting)
    jaxpr = flat.jaxpr
    def_use = DefUse(jaxpr)
    _check_writes(states, written, state_outvars, state_id_to_path, def_use, jaxpr)
    if not maps["hidden_path_to_invar"]:
        raise ValueError(
            f"{type(model).__name__} has no HiddenState read or written by its step, so there is "
            "nothing to trace online. Declare recurrent state as brainstate.HiddenState (e.g. "
            "`self.h = brainstate.HiddenState(jnp.zeros(n))` in init_state) and call "
            "brainstate.nn.init_all_states(model) before compiling."
        )
    return ModuleInfo(
        model=model,
        jaxpr=jaxpr,
        constvars=list(flat.constvars),
        invars=list(flat.invars),
        closed_jaxpr=_compat.close_jaxpr(jaxpr, flat.consts),
        consts=flat.consts,
        compiled_model_states=states,
        retrieved_model_states=retrieved,
        state_id_to_path=state_id_to_path,
        state_tree_invars=tuple(state_invars),
        state_tree_outvars=tuple(state_outvars),
        num_arg_leaves=num_arg_leaves,
        num_out_leaves=num_out_leaves,
        out_treedef=out_treedef,
        nested_jit_eqns=flat.nested_in,
        def_use=def_use,
        lifting=lifting,
        blocks=blocks,
        **maps,
    )


def _lift(flat: Any, states: Sequence[Any], maps: dict, state_id_to_path: dict) -> tuple:
    """The flat step with its plain ops on parameters lifted, and the report."""
    from .dataflow import leaf_name
    from .lift import lift_plain_ops

    names: dict = {}
    for st in states:
        path = state_id_to_path[id(st)]
        if path in maps["weight_path_to_invars"]:
            keys = [k for k, _ in jax.tree_util.tree_flatten_with_path(st.value)[0]]
            names.update(
                (var, leaf_name(path, key))
                for var, key in zip(maps["weight_path_to_invars"][path], keys)
            )
    return lift_plain_ops(flat, maps["invar_to_weight_path"], maps["weight_path_to_invars"], names)


def _split_blocks(flat: Any, maps: dict, lifting: Any) -> tuple:
    """The step with its fused weight ops cut into blocks (:mod:`.lift.blocks`), the blocks,
    and the lifting report with its equation indices moved to the new step."""
    from .lift.blocks import split_fused_gates

    flat, blocks, moved = split_fused_gates(flat, maps["invar_to_weight_path"])
    if blocks and lifting is not None:
        lifting = lifting.moved(moved, blocks)
    return flat, blocks, lifting


def _check_model_and_args(model: Any, kwargs: dict) -> None:
    if not isinstance(model, brainstate.nn.Module):
        raise TypeError(
            f"The ETP compiler needs a brainstate.nn.Module, got {type(model).__name__}. Wrap "
            "the step in a Module whose `update(self, x)` reads/writes brainstate.HiddenState "
            "and uses brainstate.ParamState weights."
        )
    update = getattr(model, "update", None)
    required_kwonly = []
    if update is not None:
        params: Iterable[inspect.Parameter]
        try:
            params = inspect.signature(update).parameters.values()
        except (TypeError, ValueError):  # pragma: no cover - builtins without signature
            params = ()
        required_kwonly = [
            p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty
        ]
    if kwargs or required_kwonly:
        names = sorted(set(kwargs) | set(required_kwonly))
        raise TypeError(
            f"{type(model).__name__}: keyword model arguments {names} are not supported; the "
            "compiled step takes positional inputs only. Bind them first, e.g. "
            "`functools.partial(model.update, **{...})` inside a small wrapper Module, or make "
            "them positional parameters of `update`."
        )


def check_example_inputs(model: Any, args: Sequence[Any]) -> None:
    """Raise a ``TypeError`` for an example input that is a list or tuple of numbers.

    A Python list (or tuple) of numbers is not an array to JAX: brainstate traces
    ``[0., 0., 0.]`` as three separate scalar inputs, and the step then fails deep inside the
    trace (``concatenate requires ndarray or scalar arguments, got <class 'list'>``) or runs
    on scalars. It is not converted: a list is how a step takes several inputs (a list of
    arrays is left alone), and JAX itself refuses lists where it wants an array. The error
    names what was given, the array to pass instead and, as for an input of the wrong shape
    (:func:`_explain_tracing_error`), the feature size the model's first layer expects.

    Parameters
    ----------
    model : brainstate.nn.Module
        The model (named in the message, with its first layer's ``in_size`` if it has one).
    args : sequence
        The positional example inputs of one step.

    Examples
    --------
    >>> check_example_inputs(model, ([0.0, 0.0, 0.0],))   # doctest: +SKIP
    Traceback (most recent call last):
    TypeError: Net's example input is a Python list of 3 numbers, not an array: ...
    """
    for position, arg in enumerate(args):
        if isinstance(arg, list | tuple) and _numbers_only(arg):
            raise TypeError(_list_input_message(model, arg, position, len(args)))


def _numbers_only(value: Any) -> bool:
    """A (nested) list or tuple whose every leaf is a Python or numpy number."""
    if isinstance(value, list | tuple):
        return all(_numbers_only(v) for v in value)
    return isinstance(value, numbers.Number | np.generic)


def _list_input_message(model: Any, arg: Any, position: int, count: int) -> str:
    name = type(model).__name__
    which = "example input" if count == 1 else f"example input {position}"
    kind = type(arg).__name__
    try:
        shape = np.asarray(arg).shape
    except ValueError:  # a ragged list
        shape = None
    size = len(arg) if shape is None else int(np.prod(shape))
    head = (
        f"{name}'s {which} is a Python {kind} of {size} numbers, not an array: JAX would "
        f"trace it as {size} separate scalar inputs. "
    )
    if shape is None:
        head += "Its rows have different lengths; pass one step's input as an array"
    else:
        head += f"Pass an array: jnp.asarray({_short_repr(arg)}) (shape {shape})"
    layer = _first_layer_with_in_size(model)
    if layer is None:
        return head + "."
    path, module = layer
    expected = tuple(module.in_size)[-1]
    where = f"its first layer `{path}` ({type(module).__name__})" if path else name
    return (
        f"{head}. {name} expects inputs with {expected} features ({where} has in_size="
        f"{tuple(module.in_size)}): one step's input is e.g. jnp.zeros({expected}) or "
        f"jnp.zeros((batch, {expected}))."
    )


def _short_repr(arg: Any) -> str:
    text = repr(arg)
    return text if len(text) <= 40 else text[:36] + " ..." + text[-1]


def _explain_tracing_error(error: Exception, model: Any, args: Sequence[Any]) -> Exception:
    """The error of a failed trace, saying the example inputs' shapes and, when they disagree
    with the model's first layer, the feature size that layer expects."""
    shapes = ", ".join(_shape_text(leaf) for leaf in jax.tree.leaves(args)) or "none"
    name = type(model).__name__
    context = f"(while tracing {name}'s step on example input(s) of shape {shapes})"
    layer = _first_layer_with_in_size(model)
    given = [jax.numpy.shape(leaf) for leaf in jax.tree.leaves(args)]
    if layer is not None and given and given[0]:
        path, module = layer
        expected = tuple(module.in_size)[-1]
        if given[0][-1] != expected:
            where = f"its first layer `{path}` ({type(module).__name__})" if path else name
            return type(error)(
                f"{name} expects inputs with {expected} features ({where} has in_size="
                f"{tuple(module.in_size)}), but the example input has shape {given[0]}: pass one "
                f"step's input, e.g. jnp.zeros({expected}) or jnp.zeros((batch, {expected})).\n"
                f"The error while tracing: {error}"
            )
    return type(error)(f"{error}\n{context}")


def _has_hidden_states(model: Any) -> bool:
    return any(
        not isinstance(st, brainstate.ParamState) for st in brainstate.graph.states(model).values()
    )


def _shape_text(leaf: Any) -> str:
    dtype = getattr(leaf, "dtype", None)
    return f"{dtype}{list(jax.numpy.shape(leaf))}" if dtype is not None else repr(leaf)


def _first_layer_with_in_size(module: Any, path: str = "", depth: int = 0):
    """``(path, layer)`` of the first module, in definition order, that declares ``in_size``."""
    if getattr(module, "in_size", None) and isinstance(module, brainstate.nn.Module):
        return path, module
    if depth > 6:
        return None
    children: Iterable[tuple[str, Any]] = (
        vars(module).items() if isinstance(module, brainstate.nn.Module) else ()
    )
    if isinstance(module, list | tuple):
        children = ((str(i), child) for i, child in enumerate(module))
    for name, child in children:
        if isinstance(child, brainstate.nn.Module | list | tuple):
            found = _first_layer_with_in_size(child, f"{path}.{name}" if path else name, depth + 1)
            if found is not None:
                return found
    return None


def _split_by_state(states: Sequence[Any], flat_vars: Sequence[Any]) -> list[Any]:
    trees, start = [], 0
    for st in states:
        treedef = jax.tree.structure(st.value)
        n = len(jax.tree.leaves(st.value))
        trees.append(jax.tree.unflatten(treedef, list(flat_vars[start : start + n])))
        start += n
    return trees


def _classify_states(states, state_invars, state_outvars, state_id_to_path) -> dict:
    maps: dict[str, Any] = {
        "hidden_path_to_invar": {},
        "hidden_path_to_outvar": {},
        "invar_to_hidden_path": {},
        "outvar_to_hidden_path": {},
        "hidden_outvar_to_invar": {},
        "weight_invars": [],
        "weight_path_to_invars": {},
        "invar_to_weight_path": {},
        "hidden_path_to_num_state": {},
    }
    for st, invars, outvars in zip(states, state_invars, state_outvars):
        path = state_id_to_path[id(st)]
        if isinstance(st, brainstate.HiddenState) and _carries_gradient(st):
            _add_hidden(maps, st, path, jax.tree.leaves(invars), jax.tree.leaves(outvars))
        elif isinstance(st, brainstate.ParamState):
            leaves = jax.tree.leaves(invars)
            maps["weight_invars"].extend(leaves)
            maps["weight_path_to_invars"][path] = leaves
            for var in leaves:
                maps["invar_to_weight_path"][var] = path
    return maps


def _carries_gradient(state: Any) -> bool:
    """An integer or boolean state (a refractory countdown, a spike count) has no derivative:
    it is carried as a plain state, not traced as a hidden state."""
    leaves = jax.tree.leaves(state.value)
    return not leaves or any(jax.numpy.issubdtype(leaf.dtype, jax.numpy.inexact) for leaf in leaves)


def _add_hidden(maps: dict, state: Any, path: Path, invars: list, outvars: list) -> None:
    if len(invars) != 1:
        raise TypeError(
            f"Hidden state {'.'.join(map(str, path))} holds a pytree of {len(invars)} arrays; "
            "a HiddenState must hold one array. Use one HiddenState per array, or "
            "brainstate.HiddenGroupState / HiddenTreeState (one array, last axis = states)."
        )
    invar, outvar = invars[0], outvars[0]
    is_multi = isinstance(state, getattr(brainstate, "HiddenGroupState", ()))
    maps["hidden_path_to_invar"][path] = invar
    maps["hidden_path_to_outvar"][path] = outvar
    maps["invar_to_hidden_path"][invar] = path
    maps["outvar_to_hidden_path"][outvar] = path
    maps["hidden_outvar_to_invar"][outvar] = invar
    maps["hidden_path_to_num_state"][path] = invar.aval.shape[-1] if is_multi else 1


def _check_writes(states, written, state_outvars, state_id_to_path, def_use, jaxpr) -> None:
    for st, was_written, outvars in zip(states, written, state_outvars):
        path = ".".join(map(str, state_id_to_path[id(st)]))
        if was_written and isinstance(st, brainstate.ParamState):
            raise ValueError(
                f"The step writes ParamState `{path}`. Parameters must stay constant within a "
                "step (the optimizer updates them between steps). Keep changing values in a "
                "brainstate.HiddenState / ShortTermState instead."
            )
        if not isinstance(st, (brainstate.HiddenState, brainstate.ParamState)):
            continue
        for var in jax.tree.leaves(outvars):
            index = def_use.producer.get(var) if _compat.is_var(var) else None
            if index is not None and jaxpr.eqns[index].primitive.name in (
                CONTROL_FLOW_PRIMITIVE_NAMES
            ):
                prim = jaxpr.eqns[index].primitive.name
                why = loop_not_unrolled_reason(jaxpr.eqns[index])
                raise ValueError(
                    f"State `{path}` is updated inside `{prim}` (equation {index})"
                    f"{f': {why}' if why else ''}. The ETP compiler needs each hidden state "
                    "written once per step at the top level (loops with a static trip count, "
                    "e.g. `jax.lax.fori_loop(0, 6, ...)`, are unrolled); move the loop outside "
                    "the model step (call the model once per time step) or learn this model "
                    "with BPTT."
                )


def is_var(atom: Any) -> bool:
    return isinstance(atom, Var) and _compat.is_var(atom)
