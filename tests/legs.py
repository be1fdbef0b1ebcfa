"""How the property tests share their examples between the CI's two stacks (issue 30).

`make test` runs the engine's tests on the oldest stack (Python 3.11) and on the newest (3.12).
A property test draws a derandomized sequence of examples, so CI is reproducible. Before, both
legs drew the same sequence: the newest leg's examples were the first ones of the oldest leg's
again, checking nothing new about the code (only the stack). Now each leg draws its own
sequence: the oldest leg the sequence hypothesis derives from the test's source
(``derandomize=True``), the newest the one of :data:`LEG_SEED`. A CI run therefore checks the
two legs' counts together as distinct examples, each stack still runs every property test,
and each leg alone stays reproducible.

``ETP_VIZ_PROPERTY_SEED`` draws another sequence on either leg (an integer), e.g. to look for
what the fixed ones miss; ``derandomize`` gives the source-derived one.

Example
-------
>>> from hypothesis import given, settings, strategies as st
>>> @leg_sequence
... @settings(max_examples=examples("UNUSED_ENV_NAME", oldest=2, newest=2), derandomize=True)
... @given(st.integers())
... def test_anything(n): ...
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TypeVar

from hypothesis import seed

T = TypeVar("T", bound=Callable)

#: True on the newest stack's leg (`make test`'s 3.12 leg)
NEWEST = sys.version_info >= (3, 12)

_override = os.environ.get("ETP_VIZ_PROPERTY_SEED", "").strip()
#: the seed of this leg's sequence; None: the sequence hypothesis derives from the test
LEG_SEED: int | None = (
    (None if _override == "derandomize" else int(_override))
    if _override
    else (29 if NEWEST else None)
)


def leg_sequence(test: T) -> T:
    """Draw this leg's own sequence of examples (apply above ``@settings`` / ``@given``)."""
    return seed(LEG_SEED)(test) if LEG_SEED is not None else test


def examples(env: str, *, oldest: int, newest: int) -> int:
    """The number of examples on this leg: ``env`` when set, else ``oldest`` / ``newest``."""
    return int(os.environ.get(env, newest if NEWEST else oldest))
