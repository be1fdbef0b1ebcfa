"""Real view models for the front-end tests: ``build_view_model(compile_etrace_graph(model,
x))`` for the shared test models (tests/view/models.py), generated at test time.

``write_real_view_models(directory)`` writes ``<name>.json`` for every name in ``REAL``;
the node tests (js/tests/) read them from the directory named by ``ETP_VIZ_REAL_VMS``.
"""

from __future__ import annotations

import functools
import json
import warnings
from pathlib import Path

#: name -> maker in tests/view/models.py ("subjaxprs" is a plain closed jaxpr, below)
REAL = ("two_layer_rnn", "gru", "lstm", "stacked_2000", "subjaxprs")


def _subjaxprs_jaxpr():
    """A closed jaxpr with a custom_jvp inside one branch of a cond: nested sub-jaxpr
    clusters (``c:e<i>``, branch clusters ``c:e<i>.<k>``) that the ETP models do not have."""
    import jax
    import jax.numpy as jnp

    @jax.custom_jvp
    def soft(x):
        return jnp.log1p(jnp.exp(x))

    soft.defjvp(lambda p, t: (soft(p[0]), t[0] * jax.nn.sigmoid(p[0])))

    def step(x, w):
        y = jnp.tanh(x @ w)
        z = jax.lax.cond(y.sum() > 0, lambda v: soft(v) * 2.0, lambda v: -v, y)
        return soft(z) + 1.0

    return jax.make_jaxpr(step)(jnp.ones(3), jnp.ones((3, 4)))


@functools.cache
def real_view_model(name: str) -> dict:
    """The JSON view model of one real model (cached per process: the ~2,000-equation stack
    takes seconds to compile)."""
    from etp_viz.compiler import compile_etrace_graph
    from etp_viz.view.model import build_view_model
    from tests.view import models

    if name == "subjaxprs":
        return build_view_model(_subjaxprs_jaxpr(), title="subjaxprs").to_json()
    makers = {
        "two_layer_rnn": models.make_two_layer_rnn,
        "gru": models.make_gru,
        "lstm": models.make_lstm,
        "stacked_2000": lambda: models.make_deep_stack(target_eqns=2000),
    }
    model, x = makers[name]()
    with warnings.catch_warnings():
        # compile diagnostics (excluded weights) are expected here; the view model shows them
        warnings.simplefilter("ignore", UserWarning)
        graph = compile_etrace_graph(model, x)
    return build_view_model(graph).to_json()


def write_real_view_models(directory: Path) -> Path:
    """``<name>.json`` (the view model) and ``<name>.split.json`` (``{"shell", "parts"}``:
    what a page gets in parts, etp_viz/explorer/parts.py) for every name in ``REAL``."""
    from etp_viz.explorer.parts import every_part, split_view_model

    directory.mkdir(parents=True, exist_ok=True)
    for name in REAL:
        path = directory / f"{name}.json"
        if not path.exists():
            path.write_text(json.dumps(real_view_model(name)))
        split_path = directory / f"{name}.split.json"
        if not split_path.exists():
            split = split_view_model(real_view_model(name))
            split_path.write_text(json.dumps({"shell": split.shell, "parts": every_part(split)}))
    return directory
