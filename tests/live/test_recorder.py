"""The recorder's host hand-over: sparse frame records expand to the dense history rows."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from etp_viz.live.history import History
from etp_viz.live.recorder import Recorder


def _recorder():
    return Recorder({"loss": (), "grad_norm/W": (), "df/r0.g0": (2,)}, capacity=4)


def _sparse(recorder, ring, losses, measured, positions, suspect=False):
    status = recorder.status_of(ring)
    status = {**status, "count": status["count"] + len(losses)}
    return recorder.pack_sparse(
        status, jnp.asarray(losses), jnp.asarray(measured), np.asarray(positions), suspect
    )


def test_a_sparse_frame_drains_sparse_and_expands_to_a_row_per_step():
    recorder = _recorder()
    ring = recorder.init(rows=False)
    assert "rows" not in ring
    measured = [[9.0, 1.0, 2.0, 3.0], [9.0, 4.0, 5.0, 6.0]]  # loss column overwritten
    recorder.pending = [_sparse(recorder, ring, [5.0, 4.0, 3.0, 2.0, 1.0], measured, [1, 4])]
    rows = recorder.drain(ring, step_offset=10)
    assert rows.steps.tolist() == [10, 11, 12, 13, 14] and rows.failure is None
    assert rows.values["loss"].tolist() == [5.0, 4.0, 3.0, 2.0, 1.0]
    assert rows.measured["grad_norm/W"].tolist() == [1, 4] and "loss" not in rows.measured
    assert rows.values["grad_norm/W"].tolist() == [1.0, 4.0]  # the measured rows only
    grad = rows.dense("grad_norm/W")
    assert np.isnan(grad[[0, 2, 3]]).all() and grad[[1, 4]].tolist() == [1.0, 4.0]
    assert rows.dense("df/r0.g0").shape == (5, 2)
    assert rows.dense("df/r0.g0")[4].tolist() == [5.0, 6.0]
    assert recorder.written == 5
    # two frames in one drain: the second frame's rows are offset by the first's length
    recorder.pending = [
        _sparse(recorder, ring, [1.0, 1.0], [[0.0, 7.0, 0.0, 0.0]], [1]),
        _sparse(recorder, ring, [2.0, 2.0, 2.0], [[0.0, 8.0, 0.0, 0.0]], [2]),
    ]
    rows = recorder.drain(ring)
    assert rows.steps.tolist() == [5, 6, 7, 8, 9] and rows.measured["grad_norm/W"].tolist() == [
        1,
        4,
    ]
    history = History()
    history.extend(rows.steps, rows.values, rows.measured)
    np.testing.assert_array_equal(history["grad_norm/W"], rows.dense("grad_norm/W"))
    np.testing.assert_array_equal(history.loss, [1.0, 1.0, 2.0, 2.0, 2.0])


def test_sparse_and_dense_frames_drain_together_in_order():
    recorder = _recorder()
    ring = recorder.init(rows=False)
    sparse = _sparse(recorder, ring, [1.0, 2.0], [[2.0, 7.0, 7.0, 7.0]], [1])
    status = recorder.status_of(ring)
    row = jnp.asarray([3.0, 8.0, 8.0, 8.0])
    status, row, written = recorder.check_row({**status, "count": status["count"] + 2}, row)
    recorder.pending = [sparse, recorder.pack(status, row[None], written[None])]
    rows = recorder.drain(ring)
    assert rows.values["loss"].tolist() == [1.0, 2.0, 3.0]
    assert rows.steps.tolist() == [0, 1, 2]
    assert rows.values["grad_norm/W"][1:].tolist() == [7.0, 8.0]


def test_a_suspect_sparse_frame_gives_no_rows_and_counts_nothing():
    recorder = _recorder()
    ring = recorder.init(rows=False)
    recorder.pending = [_sparse(recorder, ring, [1.0], [[1.0, 2.0, 3.0, 4.0]], [0], True)]
    rows = recorder.drain(ring)
    assert rows.suspect and rows.steps.size == 0 and recorder.written == 0


def test_a_ring_without_rows_and_nothing_pending_drains_nothing():
    recorder = _recorder()
    rows = recorder.drain(recorder.init(rows=False))
    assert rows.steps.size == 0 and rows.failure is None and not rows.suspect
