"""etp_viz.live: headless online-learning runs (no widget packages needed).

A :class:`Session` steps an online learner on a task's data in compiled frames
(``frame_step``), gathers each frame's inputs (``frame_data``, ``sources``), records the per-
step metrics on the device (``recorder``: a frame of a live run is recorded there) and lands
them in a :class:`History` (``history``); ``runner`` runs and paces the frames, ``probe``
chooses what is measured, ``fidelity`` compares online gradients with BPTT, ``lesson`` scores a
finished lesson (final scores, the gap to the exact reference: :func:`lesson_summary`). A
:class:`Comparison` (``compare``) runs several learners in lockstep on copies of one model
(compare mode).

Example
-------
>>> import etp_viz
>>> task = etp_viz.tasks.get_task("sine")
>>> session = etp_viz.live.Session(task.suggested_model(), task.example_input(), task=task)
>>> _ = session.step(5)
>>> len(session.history.loss)
5
"""

from .compare import Comparison as Comparison
from .history import History as History
from .history import load_history as load_history
from .lesson import episode_scores as episode_scores
from .lesson import lesson_summary as lesson_summary
from .lesson import loss_gap as loss_gap
from .session import SESSION_OPTIONS as SESSION_OPTIONS
from .session import Session as Session
from .sources import UserCodeError as UserCodeError
