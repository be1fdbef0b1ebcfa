"""etp_viz.live: headless online-learning runs (no widget packages needed).

A :class:`Session` steps an online learner on a task's data in compiled frames
(``frame_step``), gathers each frame's inputs (``frame_data``, ``sources``), records the
per-step metrics on the device (``recorder``: a frame of a live run is recorded there) and lands
them in a :class:`History` (``history``); ``pacer`` sizes the frames, ``probe`` chooses what is
measured, ``fidelity`` compares online gradients with BPTT. A :class:`Comparison`
(``compare``) runs several learners in lockstep on copies of one model (compare mode).

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
from .session import SESSION_OPTIONS as SESSION_OPTIONS
from .session import Session as Session
from .sources import UserCodeError as UserCodeError
