"""Knobs: the numeric options of a learner that a course moves and watches the gap to BPTT
change -- ES-D-RTRL's trace ``decay``, truncated BPTT's ``window``, e-prop's
``kappa_filter_decay``, SnAp's ``n``.

A knob's name is the registry's option name (:attr:`~etp_viz.learn.registry.LearnerSpec.
options`: what :func:`etp_viz.sweep` sweeps and ``live_set(decay=...)`` sets), so which learners
take a knob is the registry's answer. Here each knob says the values it takes (checked before
anything is rebuilt), what a slider of it shows, how a learner class spells it as a parameter
and how to read it off a built learner.

>>> KNOBS["window"].check(8), KNOBS["decay"].check(0)
(8, 0.0)
>>> KNOBS["n"].check(0)
Traceback (most recent call last):
...
ValueError: n: SnAp's order n (steps of reach kept) takes an integer >= 1, got 0.
"""

from __future__ import annotations

import dataclasses
import inspect
import numbers
from typing import Any

from .contract import DecayingTraces
from .etp.eprop import EProp
from .influence.algorithms import SnAp
from .influence.tbptt import BPTT, TruncatedBPTT
from .registry import name_of, spec_of

__all__ = ["KNOBS", "Knob", "knob_value", "knobs_of", "learner_options"]


@dataclasses.dataclass(frozen=True)
class Knob:
    """One knob: its values and its slider.

    Attributes
    ----------
    name : str
        The registry's option name (``"decay"``, ``"window"``, ...).
    summary : str
        What it is, in a few words (the slider's label and its errors).
    integer : bool
        Whether it takes integers (else floats).
    low : float
        The smallest value (included).
    high : float or None
        The largest value (excluded for a float knob, included for an integer one); None:
        no bound.
    slider : tuple of float
        ``(min, max, step)`` of its slider (a value set beyond ``max`` widens it).
    parameters : tuple of str
        Its name as a learner class's parameter (ES-D-RTRL's class says ``decay_or_rank``).
    """

    name: str
    summary: str
    integer: bool
    low: float
    high: float | None
    slider: tuple[float, float, float]
    parameters: tuple[str, ...]

    def range_text(self) -> str:
        if self.integer:
            bound = "" if self.high is None else f" and <= {int(self.high)}"
            return f"an integer >= {int(self.low)}{bound}"
        return f"a number in [{self.low:g}, {self.high:g})"

    def check(self, value: Any) -> int | float:
        """``value`` as this knob's type, else a TypeError (not a number) or a ValueError (out
        of range, or not whole for an integer knob) saying what it takes."""
        what = f"{self.name}: {self.summary} takes {self.range_text()}, got {value!r}."
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(what)
        number = float(value)
        if self.integer:
            if not number.is_integer():
                raise ValueError(what)
            number = int(number)
        below = number < self.low
        above = self.high is not None and (
            number > self.high if self.integer else number >= self.high
        )
        if below or above or number != number:  # NaN
            raise ValueError(what)
        return number


#: The knobs, by the registry's option names.
KNOBS: dict[str, Knob] = {
    knob.name: knob
    for knob in (
        Knob(
            "decay",
            "the ES-D-RTRL trace decay (alpha_x = alpha_f)",
            False,
            0.0,
            1.0,
            (0.0, 0.99, 0.01),
            ("decay", "decay_or_rank"),
        ),
        Knob(
            "window",
            "truncated BPTT's window (steps backpropagated)",
            True,
            1,
            None,
            (1, 64, 1),
            ("window",),
        ),
        Knob(
            "kappa_filter_decay",
            "e-prop's filter decay kappa of the eligibility trace",
            False,
            0.0,
            1.0,
            (0.0, 0.99, 0.01),
            ("kappa_filter_decay",),
        ),
        Knob(
            "n",
            "SnAp's order n (steps of reach kept)",
            True,
            1,
            None,
            (1, 8, 1),
            ("n",),
        ),
    )
}


def knob_value(learner: Any, name: str) -> Any:
    """The value of knob ``name`` on a built learner (a decay pair when ``alpha_x`` and
    ``alpha_f`` differ), or None when the learner has no such knob."""
    if name == "decay" and isinstance(learner, DecayingTraces):
        alphas = (float(learner.alpha_x), float(learner.alpha_f))
        return alphas[0] if alphas[0] == alphas[1] else alphas
    if name == "window" and isinstance(learner, TruncatedBPTT) and not isinstance(learner, BPTT):
        return int(learner.window)
    if name == "kappa_filter_decay" and isinstance(learner, EProp):
        return float(learner.kappa)
    if name == "n" and isinstance(learner, SnAp):
        return int(learner.n)
    return None


def knobs_of(learner: Any) -> dict[str, Any]:
    """``{knob: value}`` of the knobs a built learner takes: its registry entry's options
    that are knobs (a learner the registry does not know takes none).

    >>> import brainstate, etp_viz
    >>> net = etp_viz.nn.GRUCell(2, 3)
    >>> _ = brainstate.nn.init_all_states(net)
    >>> knobs_of(etp_viz.SnAp(net, n=3)), knobs_of(etp_viz.RTRL(net))
    ({'n': 3}, {})
    """
    name = name_of(learner)
    if name is None:
        return {}
    options = spec_of(name).options
    values = {knob: knob_value(learner, knob) for knob in KNOBS if knob in options}
    return {knob: value for knob, value in values.items() if value is not None}


def learner_options(learner: Any) -> dict[str, Any]:
    """``{option: value}`` of a built learner's registry options that are not at their
    defaults: what tells two runs of one learner apart (e-prop's ``feedback='random'``,
    ES-D-RTRL's ``decay=0.5``), for a run's record and status. A default is the registry
    factory's where it names one, else the learner class's; a knob is read as
    :func:`knob_value` reads it, another option as the learner keeps it under its name; values
    that are not plain numbers or text (a mesh, a dtype) are left out.

    >>> import brainstate, etp_viz
    >>> net = etp_viz.nn.GRUCell(2, 3)
    >>> _ = brainstate.nn.init_all_states(net)
    >>> learner_options(etp_viz.EProp(net, feedback="random")), learner_options(etp_viz.EProp(net))
    ({'feedback': 'random'}, {})
    >>> learner_options(etp_viz.ES_D_RTRL(net, 0.5))
    {'decay': 0.5}
    """
    name = name_of(learner)
    if name is None:
        return {}
    spec = spec_of(name)
    defaults = {**_defaults(type(learner).__init__), **_defaults(spec.factory)}
    options: dict[str, Any] = {}
    for option in spec.options:
        if option in KNOBS:
            value = _plain(knob_value(learner, option))
            default = next((defaults[p] for p in KNOBS[option].parameters if p in defaults), None)
        else:
            value, default = _plain(vars(learner).get(option)), defaults.get(option)
        if value is not None and value != default:
            options[option] = value
    return options


def _defaults(function: Any) -> dict[str, Any]:
    """The default of each keyword parameter of ``function`` (none for a ``**kw`` factory)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}


def _plain(value: Any) -> Any:
    """``value`` as JSON-plain text or numbers (a decay pair as a list), else None."""
    if isinstance(value, str | numbers.Real):
        return value
    if isinstance(value, tuple) and all(isinstance(v, numbers.Real) for v in value):
        return list(value)
    return None
