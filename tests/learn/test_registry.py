"""The learner registry and the learner contract: every registered name builds a learner that
satisfies :class:`~etp_viz.learn.registry.OnlineLearner`, learns (its online gradient of a
step is finite and the same shape as the weights), and resolves the same way everywhere."""

from __future__ import annotations

import brainstate
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import etp_viz
from etp_viz.learn.registry import (
    DEFAULT_LEARNER,
    LEARNERS,
    OnlineLearner,
    build_learner,
    canonical_name,
    learner_names,
    spec_of,
)


def _model():
    with brainstate.random.seed_context(0):
        net = etp_viz.tasks.RecurrentNet(etp_viz.nn.GRUCell(3, 4), etp_viz.nn.Linear(4, 2))
    return brainstate.nn.init_all_states(net)


@pytest.mark.parametrize("name", learner_names())
def test_every_registered_learner_satisfies_the_contract_and_learns(name):
    model = _model()
    alg = build_learner(model, name, episode=3)  # 'bptt' takes the episode; others ignore it
    assert isinstance(alg, OnlineLearner), f"{name}: {type(alg).__name__} breaks the contract"
    x = jnp.ones(3)
    alg.compile_graph(x)
    assert alg.model is model
    params = alg.param_states
    assert params, name
    grads = brainstate.transform.grad(lambda: jnp.sum(alg(x) ** 2), params)()
    for path, grad in grads.items():
        for leaf, weight in zip(jax.tree.leaves(grad), jax.tree.leaves(params[path].value)):
            assert np.shape(leaf) == np.shape(weight), (name, path)
            assert np.isfinite(np.asarray(leaf)).all(), (name, path)
    alg.reset_traces()
    alg.reset_state()


def test_names_fold_case_dashes_and_aliases():
    assert canonical_name("D-RTRL") == "d_rtrl"
    assert canonical_name("pp_prop") == "es_d_rtrl"
    assert canonical_name("SnAp-7") == "snap7"
    assert canonical_name("ostl") == "ostl_recurrent"
    assert canonical_name("truncated-bptt") == "tbptt"
    assert canonical_name("TBPTT") == "tbptt" and canonical_name("BPTT") == "bptt"
    assert spec_of("bptt").family == "bptt" and spec_of("tbptt").family == "tbptt"
    assert DEFAULT_LEARNER in learner_names()
    assert spec_of("snap3").family == "snap"


@pytest.mark.parametrize("bad", ["snap0", "drtrl2", "bptt3", ""])
def test_an_unknown_name_lists_the_valid_ones(bad):
    with pytest.raises(ValueError, match="Valid names: .*d_rtrl"):
        canonical_name(bad)


def test_snap_without_its_order_says_how_to_name_it():
    """``"snap"`` is SnAp-n's claim family (``alg.claim_family``), not a learner: the error says
    to give n or the learner itself."""
    with pytest.raises(ValueError, match="'snap1', 'snap2'.*gradient_claims\\(alg\\)"):
        canonical_name("SnAp")


def test_options_are_checked_against_the_learner():
    model = _model()
    alg = build_learner(model, "es_d_rtrl", {"decay": 0.5})
    assert float(np.asarray(alg.alpha_x)) == pytest.approx(0.5)
    assert build_learner(model, "tbptt", window=7).window == 7
    assert build_learner(model, "bptt", episode=5).episode == 5
    with pytest.raises(ValueError, match="needs the episode length.*'tbptt'"):
        build_learner(model, "bptt")
    with pytest.raises(TypeError, match="window is truncated BPTT's option \\('tbptt'\\)"):
        build_learner(model, "bptt", {"window": 5})
    assert build_learner(model, "rtrl", decay=0.5, window=3) is not None  # defaults: ignored
    with pytest.raises(
        TypeError,
        match=r"'rtrl' got unknown option\(s\) \['decay'\]; it takes none. decay is an ES-D-RTRL",
    ):
        build_learner(model, "rtrl", {"decay": 0.5})
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("batch",))
    with pytest.raises(TypeError, match="mesh= applies to the ETP learners"):
        build_learner(model, "snap1", mesh=mesh)


def test_every_spec_names_its_family_and_kind():
    for spec in LEARNERS.values():
        assert spec.family and spec.kind in {"etp", "influence", "window"}, spec
        assert spec.summary, spec.name


@pytest.mark.parametrize("name", [*learner_names(), "snap3", "pp_prop"])
def test_a_built_learner_states_the_claim_family_of_its_spec(name):
    """The compiler reads a learner's ``claim_family`` (never its class name): it must be the
    registry's family for that name."""
    alg = build_learner(_model(), name, episode=3)
    assert alg.claim_family == spec_of(name).family, (name, type(alg).__name__)


@pytest.mark.slow  # heavy: runs on the 3.11 leg (make test), not the 3.12 one
@pytest.mark.parametrize("name", learner_names())
def test_every_name_works_in_every_entry_point(name):
    """One registry: a name that one entry point takes, every entry point takes."""
    from etp_viz.__main__ import ALGORITHMS
    from etp_viz.live.session import Session
    from etp_viz.live.sources import LIVE_ALGORITHMS

    assert name in ALGORITHMS and name in LIVE_ALGORITHMS
    xs = jnp.asarray(np.random.default_rng(0).normal(size=(3, 3)), jnp.float32)
    report = etp_viz.verify(_model(), xs, algorithm=name)
    assert {row.path for row in report.rows}, name
    if name == "bptt":  # BPTT over each episode needs episodes: a task's
        task = etp_viz.tasks.get_task("leaky_integrator")
        model = task.suggested_model(hidden_size=4, spiking=False)
        session = Session(model, task.example_input(), algorithm=name, task=task)
    else:
        data = lambda t: (xs[t % 3], jnp.zeros(2))  # noqa: E731
        session = Session(_model(), xs[0], algorithm=name, data=data)
    session.step(2)
    assert session.history.num_steps == 2 and np.isfinite(session.history.loss).all()


# -- the contract's members, capabilities and the one resolver ------------------------------


def test_one_resolver_takes_a_name_class_factory_or_instance():
    import functools

    from etp_viz.learn.registry import name_of, resolve

    model = _model()
    built = etp_viz.SnAp(model, n=1)
    forms = {
        "SnAp-1": "snap1",
        etp_viz.RTRL: "rtrl",
        functools.partial(etp_viz.ES_D_RTRL, decay_or_rank=0.5): "es_d_rtrl",
        built: "snap1",
    }
    for form, name in forms.items():
        learner = resolve(model, form)
        assert isinstance(learner, OnlineLearner) and learner.model is model
        assert name_of(learner) == name, (form, name_of(learner))
    assert resolve(model, built) is built
    assert name_of(etp_viz.SnAp) is None  # a class has no order until it is built
    assert name_of(etp_viz.SnAp(model, n=3)) == "snap3"
    assert resolve(model, "es_d_rtrl", decay=0.3).alpha_f == pytest.approx(0.3)


def test_verify_and_plan_take_the_forms_the_resolver_takes():
    """verify and plan go through the one resolver: a class, a factory and (verify) a built
    learner give what the name gives; plan refuses a built learner, saying what to pass."""
    import functools

    xs = jnp.asarray(np.random.default_rng(1).normal(size=(3, 3)), jnp.float32)
    by_name = etp_viz.verify(_model(), xs, algorithm="es_d_rtrl", decay_or_rank=0.5)
    model = _model()
    forms = [
        functools.partial(etp_viz.ES_D_RTRL, decay_or_rank=0.5),
        lambda m: etp_viz.ES_D_RTRL(m, decay_or_rank=0.5),
        etp_viz.ES_D_RTRL(model, decay_or_rank=0.5),
    ]
    for form in forms:
        report = etp_viz.verify(model, xs, algorithm=form)
        for got, want in zip(report.rows, by_name.rows, strict=True):
            assert (got.path, got.claim) == (want.path, want.claim), form
            np.testing.assert_allclose(got.cosine, want.cosine, rtol=1e-6, equal_nan=True)

    planned = etp_viz.plan(model, xs[0], algorithm=["snap2", etp_viz.RTRL], T=10)
    again = etp_viz.plan(model, xs[0], algorithm=(functools.partial(etp_viz.SnAp, n=2), "rtrl"))
    assert [r.algorithm for r in again.rows] == ["snap2", "rtrl"]
    assert [r.algorithm for r in planned.rows] == ["snap2", "rtrl"]
    assert [r.learner_state for r in again.rows] == [r.learner_state for r in planned.rows]
    with pytest.raises(TypeError, match="pass its name, its class or a factory"):
        etp_viz.plan(model, xs[0], algorithm=etp_viz.D_RTRL(model))


def test_the_resolver_says_what_it_refuses():
    from etp_viz.learn.registry import resolve

    model, other = _model(), _model()
    with pytest.raises(ValueError, match="built for another model"):
        resolve(model, etp_viz.D_RTRL(other))
    with pytest.raises(TypeError, match="pass them when building it"):
        resolve(model, etp_viz.D_RTRL(model), {"decay": 0.5})

    class NotALearner:
        def __init__(self, model):
            self.model = model

    with pytest.raises(TypeError, match=r"lacks \[.*'compile_graph'.*'reset_traces'"):
        resolve(model, NotALearner)
    with pytest.raises(TypeError, match="learner name"):
        resolve(model, 3)


def test_capabilities_are_checked_by_isinstance():
    from etp_viz.learn.registry import (
        ClaimRefiner,
        DecayingTraces,
        StepRecorder,
        TraceLearner,
    )

    model = _model()
    caps = {
        name: {
            cap.__name__
            for cap in (TraceLearner, StepRecorder, DecayingTraces, ClaimRefiner)
            if isinstance(build_learner(model, name, episode=3), cap)
        }
        for name in ("d_rtrl", "es_d_rtrl", "eprop", "rtrl", "bptt")
    }
    assert caps["d_rtrl"] == {"TraceLearner", "StepRecorder"}
    assert caps["es_d_rtrl"] == {"TraceLearner", "StepRecorder", "DecayingTraces"}
    assert caps["eprop"] == {"TraceLearner", "StepRecorder", "ClaimRefiner"}
    assert caps["rtrl"] == caps["bptt"] == {"ClaimRefiner"}


@pytest.mark.parametrize("name", ["d_rtrl", "es_d_rtrl", "rtrl", "snap1", "tbptt"])
def test_a_learners_own_state_is_found_by_type(name):
    from etp_viz.learn.registry import LearnerState, learner_bytes, learner_states

    model = _model()
    alg = build_learner(model, name)
    alg.compile_graph(jnp.ones(3))
    own = learner_states(alg)
    model_ids = {id(s) for s in brainstate.graph.states(model).values()}
    assert own and all(isinstance(s, LearnerState) for s in own.values())
    assert not {id(s) for s in own.values()} & model_ids
    sizes = learner_bytes(alg)
    assert set(sizes) == set(own) and all(b > 0 for b in sizes.values())
    # everything the learner holds beyond the model's states is its own state
    extra = {
        id(s)
        for s in brainstate.graph.states(alg).values()
        if id(s) not in model_ids and not isinstance(s, brainstate.ParamState)
    }
    assert extra - {id(s) for s in own.values()} <= {id(getattr(alg, "step_data_record", None))}


@pytest.mark.parametrize("name", [n for n in learner_names() if n != "snap2"])
def test_the_graph_answers_for_every_registered_learner(name):
    """``graph.gradient_claims(name)`` takes every registered name: the ETP graph derives its
    own learners' claims; the others come from the learner itself (one claim path: equal to
    ``learner.gradient_claims()``)."""
    model = _model()
    x = jnp.ones(3)
    graph = etp_viz.compile_etrace_graph(model, x)
    claims = graph.gradient_claims(name)
    alg = build_learner(model, name, episode=3)
    alg.compile_graph(x)
    own = alg.gradient_claims()
    assert {k: c.kind for k, c in claims.items()} == {k: c.kind for k, c in own.items()}
    assert set(claims) == {k for k in own}


def test_a_session_stores_the_canonical_name():
    from etp_viz.live.session import Session

    xs = jnp.ones((2, 3))
    data = lambda t: (xs[0], jnp.zeros(2))  # noqa: E731
    session = Session(_model(), xs[0], algorithm="SnAp-1", data=data)
    assert session.history.meta["algorithm"] == "snap1"
    model = _model()
    session = Session(model, xs[0], algorithm=etp_viz.ES_D_RTRL(model, 0.5), data=data)
    assert session.history.meta["algorithm"] == "es_d_rtrl"


def test_es_d_rtrl_is_its_own_class_and_pp_prop_an_alias():
    model = _model()
    assert type(etp_viz.ES_D_RTRL(model)).__name__ == "ES_D_RTRL"
    assert etp_viz.pp_prop is etp_viz.ES_D_RTRL
