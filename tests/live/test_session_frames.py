"""One jitted call per frame, df / dh-dh recording against the executor, task frame data."""

from __future__ import annotations

import warnings

import brainstate
import jax
import numpy as np
import pytest

from etp_viz.live.frame_data import gather_frame
from etp_viz.live.session import Session
from etp_viz.live.sources import DataSource
from tests.live.models import OneStepLearner, TinyRNN, etp_sine, sine_data

#: float32 losses of the same steps run by differently compiled programs (frames of 16 against
#: single steps, a replayed frame against a fast one): XLA may order a sum differently, 1e-5
#: relative under the suite's XLA:CPU -O0; data used out of order or twice differs by 1e-1 or
#: more (the sine task's losses change by orders of magnitude from step to step)
OTHER_PROGRAM_RTOL = 1e-4


def tiny(**options):
    model = TinyRNN()
    options.setdefault("data", sine_data)
    return Session(model, np.zeros(2, np.float32), algorithm=OneStepLearner(model), **options)


def test_a_frame_is_one_jitted_call():
    session = tiny(steps_per_frame=10)
    session.run(10, background=False)  # compile
    calls = []
    key = (False, session.record_every)
    original = session._frames[key]
    session._frames[key] = lambda *a: calls.append(1) or original(*a)
    session.run(30, background=False)
    assert len(calls) == 3 and list(session._frames) == [key]
    assert session.history.num_steps == 40


def test_step_count_stops_at_the_failing_step_inside_a_frame():
    def data(t):
        x, y = sine_data(t)
        return (x * np.inf if t == 7 else x), y

    session = tiny(data=data, steps_per_frame=20)
    session.run(20, background=False)
    assert session.history.failure["step"] == 7
    assert session.step_count == 7 == session.history.num_steps


@pytest.mark.parametrize("algorithm", ["d_rtrl", "es_d_rtrl"])
def test_df_and_dhdh_are_the_executors(algorithm):
    brainstate.random.seed(0)
    model, x0, data = etp_sine(num_hidden=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = Session(model, x0, algorithm=algorithm, data=data)
    assert session.history.meta["unavailable"] == []
    ex = session.algorithm.graph_executor
    from etp_viz.learn.etp.vjp_step import StateLayout

    layout = StateLayout(ex.plan)
    params, others = layout.read()
    x, _ = data(0)
    _, _, expected = ex.step_data(layout.assemble([x], params, others))
    history = session.step(1)
    df = np.asarray(expected["df"][(0, 0)])
    np.testing.assert_allclose(history["df/r0.g0"][0], df[..., 0][:32], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(history["df_abs/r0.g0"][0], np.abs(df).mean(), rtol=1e-5)
    if expected["dh_dh"][0] is None:  # no hidden-to-hidden path in this group
        assert "dhdh/g0" not in history.metrics
    else:
        dh_dh = np.asarray(expected["dh_dh"][0])
        np.testing.assert_allclose(history["dhdh/g0"][0], dh_dh[..., 0, 0][:32], atol=1e-7)


def test_task_frames_equal_the_task_stream():
    from etp_viz.tasks import SineRegression

    task = SineRegression()
    frame = gather_frame(DataSource(task), task.n_steps - 3, 7)  # crosses an episode
    for i in range(7):
        x, y = task.step_data(task.n_steps - 3 + i)
        np.testing.assert_array_equal(frame.xs[i], np.asarray(x))
        np.testing.assert_array_equal(frame.ys[i], np.asarray(y))


def test_auto_frame_size_aims_at_50ms_frames_in_powers_of_two():
    session = tiny(capacity=1024)
    assert session.steps_per_frame == 16 and session.history.meta["steps_per_frame"] == "auto"
    session._adapt_frame_size(16, 10.0)  # a size's first frame compiles: not timed
    assert session.steps_per_frame == 16
    session._adapt_frame_size(16, 16 * 1e-4)  # 0.1 ms a step -> 500 steps per 50 ms
    assert session.steps_per_frame == 256
    session._adapt_frame_size(256, 256 * 1e-6)  # first frame of the new size: not timed
    session._adapt_frame_size(256, 256 * 1e-6)  # 1 us a step: capped at the capacity
    assert session.steps_per_frame == 1024
    session.run(2 * 1024 + 5, background=False)
    assert session.history.num_steps == 2 * 1024 + 5
    np.testing.assert_array_equal(session.history.steps, np.arange(2 * 1024 + 5))
    session.steps_per_frame = 7  # a user's choice turns 'auto' off
    session._adapt_frame_size(7, 1.0)
    session._adapt_frame_size(7, 1.0)
    assert session.steps_per_frame == 7


def test_auto_pacing_ignores_slow_outliers_and_shrinks_only_on_slow_frames():
    from etp_viz.live.runner import Pacer

    pacer = Pacer("auto", "auto", capacity=8192)
    pacer.observe(16, 2.0)  # compiles: not timed
    pacer.observe(16, 16 * 1e-5)  # 10 us a step: 5000 steps per 50 ms; every 2 ms: 200
    assert (pacer.steps_per_frame, pacer.record_every) == (4096, 128)
    pacer.observe(4096, 3.0)  # the new size compiles: not timed
    for seconds in (4096 * 1e-5, 5.0, 4096 * 1e-5, 4096 * 1.5e-5):  # a stall, a slower frame
        assert not pacer.observe(4096, seconds)
    assert (pacer.steps_per_frame, pacer.record_every) == (4096, 128)
    for _ in range(3):  # slow frames, while a recent one was fast: kept
        assert not pacer.observe(4096, 4096 * 2e-4)
    # every recent frame > 2x too long (200 us a step): both shrink (10 steps in 2 ms: the
    # floor of 32)
    assert pacer.observe(4096, 4096 * 2e-4)
    assert (pacer.steps_per_frame, pacer.record_every) == (128, 32)
    fixed = Pacer(10, 4, capacity=8192)
    assert not fixed.observe(10, 1.0) and not fixed.observe(10, 1e-6)
    assert (fixed.steps_per_frame, fixed.record_every) == (10, 4)


def test_auto_record_every_measures_fast_models_less_often(monkeypatch):
    """A fast step gets a longer measuring interval (a power of two >= 32), recompiled once;
    the history then holds measured rows on that interval and the meta says 'auto'."""
    session = tiny(steps_per_frame=64)
    assert session.record_every == 32 and session.history.meta["record_every"] == "auto"
    session._adapt_frame_size(64, 1.0)
    session._adapt_frame_size(64, 64 * 2e-6)  # 2 us a step: 2 ms is 1000 steps -> 512
    assert session.record_every == 512 and session.steps_per_frame == 64
    session.record_every = 16  # a user's choice turns 'auto' off
    session._adapt_frame_size(64, 64 * 2e-6)
    assert session.record_every == 16
    session.run(64, background=False)
    measured = np.isfinite(session.history["grad_norm/W"])
    assert np.flatnonzero(measured).tolist() == [15, 31, 47, 63]


def test_heavy_metrics_every_record_every_steps_and_on_a_frames_last_step():
    session = tiny(steps_per_frame=10, record_every=4)
    session.run(20, background=False)  # two frames of 10 steps
    history = session.history
    assert np.all(np.isfinite(history.loss))  # the loss: every step
    measured = np.isfinite(history["grad_norm/W"])
    # every 4th step of each frame (positions 3 and 7) and each frame's last (position 9)
    expected = [t % 10 in (3, 7, 9) for t in range(20)]
    assert measured.tolist() == expected
    for name in ("update_norm/V", "trace/input_trace"):
        assert np.isfinite(history[name]).tolist() == expected  # NaN = not measured


def test_record_every_one_measures_every_step():
    history = tiny(steps_per_frame=5, record_every=1).step(10)
    assert all(np.all(np.isfinite(values)) for values in history.metrics.values())


def test_non_finite_weight_with_finite_loss_halts_at_its_step():
    # Step 5's learning rate is infinite: its loss is finite, the weights it makes are not.
    import jax.numpy as jnp
    import optax

    optimizer = optax.sgd(lambda count: jnp.where(count == 5, jnp.inf, 1e-2))
    session = tiny(optimizer=optimizer, steps_per_frame=16, record_every=1000)
    session.step(16)
    failure = session.history.failure
    assert failure["step"] == 5 and session.step_count == 5 == session.history.num_steps
    assert "loss" not in failure["quantities"]
    assert {"weight/W", "weight/V"} <= set(failure["quantities"])
    for state in session.params.values():
        assert np.all(np.isfinite(np.asarray(state.value["weight"])))


@pytest.mark.parametrize("steps_per_frame", [16, 13])
def test_fast_frames_record_what_step_checked_frames_record(steps_per_frame):
    """The fast frame (blocks of plain steps + one measured step, checks once per frame) and
    the careful one (every step checked) give the same weights and the same history."""
    from etp_viz.live.frame_step import build_frame

    histories, weights = [], []
    for careful in (False, True):
        brainstate.random.seed(0)
        model, x0, data = etp_sine(num_hidden=6)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            session = Session(model, x0, data=data, steps_per_frame=steps_per_frame, record_every=4)
        if careful:  # every frame step-checked (on the steps the fast frame would run)
            checked = build_frame(session.frame_context(), careful=True)
            session._frames[(False, 4)] = lambda ring, opt, xs, ys, n, f=checked: f(
                ring, opt, *(jax.tree.map(lambda a: a[:n], t) for t in (xs, ys))
            )
        session.run(3 * steps_per_frame + 5, background=False)
        histories.append(session.history)
        weights.append({k: np.asarray(s.value["weight"]) for k, s in session.params.items()})
        assert (True, 4) not in session._frames  # nothing went non-finite: no replay compiled
    fast, careful = histories
    assert fast.num_steps == careful.num_steps == 3 * steps_per_frame + 5
    # the two frames are different XLA programs (fusion order differs), so float32 sums
    # agree to rounding, not bit for bit: 6e-5 relative was seen on jax 0.12 for a small norm
    for name in fast.metrics:
        np.testing.assert_allclose(fast[name], careful[name], rtol=5e-4, atol=1e-6, err_msg=name)
    for name in weights[0]:
        np.testing.assert_allclose(weights[0][name], weights[1][name], rtol=5e-4, atol=1e-6)


@pytest.mark.parametrize("replay_steps", [None, 3])
@pytest.mark.parametrize("bad_step", [5, 21])
def test_a_suspect_frame_is_replayed_from_its_start_states(bad_step, replay_steps, monkeypatch):
    """A NaN half-way through a fast frame (the first of two in flight, or the second): the
    replay restores the frame's start states, the frame after it is dropped, and the steps
    before the failure are recorded once, with the values a clean run gives. With
    ``replay_steps`` the replay runs in pieces of that many steps (long frames' replays do)."""
    if replay_steps is not None:
        monkeypatch.setattr("etp_viz.live.frame_step.REPLAY_STEPS", replay_steps)

    def data(t):
        x, y = sine_data(t)
        return (x * np.nan if t == bad_step else x), y

    session = tiny(data=data, steps_per_frame=16)
    clean = tiny(data=sine_data, steps_per_frame=16)
    session.run(48, background=False)
    clean.run(bad_step, background=False)
    assert session.history.failure["step"] == bad_step and session.step_count == bad_step
    assert (True, session.record_every) in session._frames
    np.testing.assert_allclose(session.history.loss, clean.history.loss, rtol=1e-6)
    for name, state in session.params.items():
        np.testing.assert_allclose(
            np.asarray(state.value["weight"]),
            np.asarray(clean.params[name].value["weight"]),
            rtol=1e-6,
        )


def test_data_gathered_ahead_is_used_once_in_order():
    """The next frame's data is gathered while the device runs the current one: an iterable
    is still consumed exactly once, in step order, across frames, pauses and `step`."""
    pulled, while_a_frame_runs, in_flight = [], [], []

    def stream():
        t = 0
        while True:
            pulled.append(t)
            while_a_frame_runs.append(bool(session._flights))  # dispatched, not landed
            in_flight.append(len(session._flights))
            yield sine_data(t)
            t += 1

    session = tiny(data=stream(), steps_per_frame=16)
    session.run(40, background=False)  # frames of 16, 16, 8
    session.step(5)
    session.run(20, background=False)
    assert session.history.num_steps == 65
    assert pulled[:65] == list(range(65))
    assert len(pulled) == len(set(pulled))  # nothing gathered twice
    assert while_a_frame_runs[16:32] == [True] * 16  # frame 2's data: gathered during frame 1
    assert max(in_flight) == 2  # frame k+1 is dispatched before frame k is landed

    reference = tiny(data=sine_data, steps_per_frame=16)
    reference.step(65)
    np.testing.assert_allclose(
        session.history.loss, reference.history.loss, rtol=OTHER_PROGRAM_RTOL
    )


def test_a_data_error_in_a_frame_gathered_ahead_still_runs_the_steps_before_it():
    def data(t):
        if t == 20:
            raise ValueError("bad sample")
        return sine_data(t)

    session = tiny(data=data, steps_per_frame=16)
    session.run(48, background=False)
    assert session.step_count == 20 == session.history.num_steps
    assert "step 20" in session.error and "ValueError" in session.error


@pytest.mark.parametrize(
    "bad",
    [lambda t: 3.0, lambda t: (np.ones(2),), lambda t: 1 / 0],
    ids=["scalar", "1-tuple", "raises"],
)
def test_a_bad_data_step_is_named_and_the_steps_before_it_are_kept(bad):
    def data(t):
        return bad(t) if t == 6 else sine_data(t)

    frame = gather_frame(DataSource(data), 2, 10)
    assert frame.num_steps == 4 and frame.xs.shape == (4, 2) and frame.ys.shape == (4, 1)
    assert "at step 6" in str(frame.error)
    np.testing.assert_array_equal(frame.xs[1], sine_data(3)[0])


def test_frames_of_unequal_or_zero_dim_arrays_stack_like_numpy():
    from etp_viz.live.frame_data import stack_pairs

    xs, ys = stack_pairs(
        [(np.float32(t) * np.ones(()), np.full(2, t, np.float64)) for t in range(3)]
    )
    assert xs.shape == (3,) and ys.shape == (3, 2) and ys.dtype == np.float64
    with pytest.raises(ValueError):
        stack_pairs([(np.ones(2), np.ones(1)), (np.ones(3), np.ones(1))])
    with pytest.raises(ValueError):  # the rows add up to 2 x 2, the shapes differ
        stack_pairs([(np.ones((1, 2)), np.ones(1)), (np.ones((3, 2)), np.ones(1))])
    mixed = [(np.ones(2, np.float32), np.ones(1, np.int32)), (np.ones(2), np.ones(1, np.int64))]
    xs, ys = stack_pairs(mixed)  # dtypes promote as np.stack promotes them
    assert xs.dtype == np.stack([p[0] for p in mixed]).dtype == np.float64
    assert ys.dtype == np.stack([p[1] for p in mixed]).dtype


def test_frames_after_the_first_do_not_compile(caplog):
    """Fast frames of a size seen before, and the data of the next frame, compile nothing
    (two frames in flight included)."""
    import logging

    import jax

    brainstate.random.seed(0)
    model, x0, data = etp_sine(num_hidden=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # a fixed interval: 'auto' may move it with the timings (and compile once for it)
        session = Session(model, x0, data=data, steps_per_frame=32, record_every=8)
    session.run(64, background=False)  # compiles the 32-step frame
    with jax.log_compiles(), caplog.at_level(logging.DEBUG):
        caplog.clear()
        session.run(32 * 5, background=False)
    compiles = [r.getMessage() for r in caplog.records if "ompil" in r.getMessage()]
    assert compiles == [] and session.history.num_steps == 64 + 32 * 5


def test_a_replay_that_finds_nothing_keeps_every_later_step_of_an_iterable():
    """A frame reported suspect whose step-checked replay finds no failure (a NaN that does
    not come back): the frames in flight after it are dropped, and their data and the data
    gathered ahead are run next, so a one-shot iterable loses no step."""
    from etp_viz.live.frame_step import build_frame

    pairs = [sine_data(t) for t in range(80)]
    session = tiny(data=iter(pairs), steps_per_frame=16, record_every=4)
    clean = tiny(data=iter(pairs), steps_per_frame=16, record_every=4)
    fast = build_frame(session.frame_context(), careful=False)
    calls = []

    def first_call_suspect(*args):
        ring, opt_state, packed = fast(*args)
        calls.append(1)
        if len(calls) == 1:  # the first frame claims a non-finite value
            packed = (*packed[:3], packed[3].at[3].set(1))
        return ring, opt_state, packed

    session._frames[(False, 4)] = first_call_suspect
    session.run(80, background=False)
    clean.run(80, background=False)
    assert (True, 4) in session._frames  # the replay ran
    assert session.history.failure is None and session.step_count == 80
    np.testing.assert_array_equal(session.history.steps, np.arange(80))
    np.testing.assert_allclose(session.history.loss, clean.history.loss, rtol=OTHER_PROGRAM_RTOL)


def _dispatched_lengths(session, monkeypatch) -> list[tuple[int, int]]:
    """``(steps, padded length)`` of every fast frame call the session makes from now on."""
    lengths: list[tuple[int, int]] = []
    compiled = session.compiled_frame

    def recording(careful, every):
        frame = compiled(careful, every)

        def run(ring, opt_state, xs, ys, n):
            lengths.append((n, jax.tree.leaves(xs)[0].shape[0]))
            return frame(ring, opt_state, xs, ys, n)

        return run

    monkeypatch.setattr(session, "compiled_frame", recording)
    return lengths


def test_a_frame_cut_at_the_fidelity_window_runs_on_one_program(monkeypatch):
    """The fidelity meter cuts each 64-step frame at its 5-step window: the long piece runs on
    the 64-step program, the short one padded to 8: three compiled programs for the whole run
    (the frame and two padded lengths), as separate scans of 59, 4 and 1 steps compiled four."""
    brainstate.random.seed(0)
    model, x0, data = etp_sine(num_hidden=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = Session(
            model,
            x0,
            data=data,
            steps_per_frame=64,
            record_every=64,
            fidelity_every=64,
            fidelity_window=5,
        )
    lengths = _dispatched_lengths(session, monkeypatch)
    programs = session.compiled_frames
    session.run(64 * 3, background=False)
    assert lengths == [(59, 64), (5, 8)] * 3
    assert session.compiled_frames - programs == 3  # the frame, its two padded lengths
    assert len(session.history.fidelity) == 3


def test_losses_do_not_depend_on_how_the_steps_are_cut(monkeypatch):
    """The same 192 steps as one call and as calls of other lengths (each padded to a power
    of two, one program per padded length): the same losses, measured on the same steps."""

    def run(cuts: list[int]) -> tuple:
        brainstate.random.seed(0)
        model, x0, data = etp_sine(num_hidden=4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            session = Session(model, x0, data=data, steps_per_frame=256, record_every=8)
        lengths = _dispatched_lengths(session, monkeypatch)
        programs = session.compiled_frames
        for n in cuts:
            session.step(n)
        measured = np.flatnonzero(np.isfinite(session.history["grad_norm/rnn.W.weight"]))
        programs = session.compiled_frames - programs
        return np.asarray(session.history.loss), lengths, measured, programs

    cuts = [7, 100, 40, 32, 13]
    whole, whole_lengths, whole_measured, _ = run([192])
    cut, cut_lengths, cut_measured, programs = run(cuts)
    assert whole_lengths == [(192, 256)]
    assert cut_lengths == [(7, 8), (100, 128), (40, 64), (32, 32), (13, 16)]
    assert programs == 1 + 5  # the frame, its five padded lengths
    np.testing.assert_allclose(cut, whole, rtol=OTHER_PROGRAM_RTOL)
    # every 8th step of each call and each call's last
    starts = np.cumsum([0, *cuts[:-1]])
    expected = sorted({int(s + p) for s, n in zip(starts, cuts)
                       for p in [*range(7, n, 8), n - 1]})  # fmt: skip
    assert cut_measured.tolist() == expected
    assert whole_measured.tolist() == [*range(7, 192, 8)]


def test_chunks_of_new_lengths_within_a_power_of_two_compile_nothing(caplog):
    """17, 22, 30 and 25 steps all run on the 32-step program: after the first chunk, none
    compiles (each length used to be a scan XLA compiled for itself)."""
    import logging

    brainstate.random.seed(0)
    model, x0, data = etp_sine(num_hidden=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = Session(model, x0, data=data, steps_per_frame=256, record_every=8)
    session.step(17)
    programs = session.compiled_frames
    with jax.log_compiles(), caplog.at_level(logging.DEBUG):
        caplog.clear()
        for n in (22, 30, 25):
            session.step(n)
    compiles = [r.getMessage() for r in caplog.records if "ompil" in r.getMessage()]
    assert compiles == [] and session.compiled_frames == programs
    assert session.history.num_steps == 17 + 22 + 30 + 25
