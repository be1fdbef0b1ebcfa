"""The widget packages (anywidget, traitlets), or headless stand-ins for them.

The explorer classes are anywidget widgets. Without the ``[explorer]`` extra they are built on
stand-ins instead: the same traits as plain attributes (with the same defaults), no front end,
nothing sent. That is all the offline HTML export needs (``save_html`` reads
``frontend_state()``), so ``python -m etp_viz demo`` and ``Explorer(graph).save_html(path)`` run
with the core dependencies only; :func:`require_widget_packages` is what ``etp_viz.show()``
calls first, so a notebook without the extra gets an ``ImportError`` naming the install.

Example
-------
>>> from etp_viz.explorer.headless import INSTALL_HINT
>>> INSTALL_HINT
'pip install "etp-viz[explorer]"'
"""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

__all__ = [
    "INSTALL_HINT",
    "WIDGET_IMPORT_ERROR",
    "anywidget",
    "require_widget_packages",
    "traitlets",
]

INSTALL_HINT = 'pip install "etp-viz[explorer]"'


class _Trait:
    """A trait of a headless widget: a per-instance attribute with a copied default."""

    def __init__(self, *args: Any, default_value: Any = None, allow_none: bool = False):
        self.default = default_value

    def tag(self, **_metadata: Any) -> _Trait:
        return self

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type) -> Any:
        if instance is None:
            return self
        if self.name not in instance.__dict__:
            instance.__dict__[self.name] = copy.copy(self.default)
        return instance.__dict__[self.name]

    def __set__(self, instance: Any, value: Any) -> None:
        old = instance.__dict__.get(self.name, self.default)
        instance.__dict__[self.name] = value
        for handler in instance.__dict__.get("_observers", {}).get(self.name, ()):
            if value is not old:  # traitlets: a change notifies, a re-set of the same does not
                handler({"name": self.name, "old": old, "new": value, "owner": instance,
                         "type": "change"})  # fmt: skip


class _Dict(_Trait):
    def __init__(self, *args: Any, default_value: Any = None, allow_none: bool = False):
        self.default = {} if default_value is None and not allow_none else default_value


class _List(_Trait):
    def __init__(self, *args: Any, default_value: Any = None, allow_none: bool = False):
        self.default = list(default_value or [])


class _Unicode(_Trait):
    def __init__(self, default_value: str = "", **_options: Any):
        self.default = default_value


class _Float(_Trait):
    def __init__(self, default_value: float = 0.0, **_options: Any):
        self.default = default_value


class HeadlessWidget:
    """Stands in for ``anywidget.AnyWidget`` without the widget packages: the traits given to
    ``__init__`` are set, messages to a front end go nowhere (there is none)."""

    def __init__(self, **traits: Any):
        for name, value in traits.items():
            setattr(self, name, value)

    def on_msg(self, callback: Any) -> None:
        pass

    def observe(self, handler: Any, names: Any = None) -> None:
        """Call ``handler(change)`` when one of the traits ``names`` is set to a new value
        (``change``: a dict with ``name``, ``old``, ``new``, as traitlets gives)."""
        observers = self.__dict__.setdefault("_observers", {})
        for name in [names] if isinstance(names, str) else list(names or ()):
            observers.setdefault(name, []).append(handler)

    def send(self, content: Any, buffers: Any = None) -> None:
        pass

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        return {}


try:
    import anywidget as _anywidget
    import traitlets as _traitlets
except ImportError as error:  # the [explorer] extra is not installed
    WIDGET_IMPORT_ERROR: ImportError | None = error
    anywidget: Any = SimpleNamespace(AnyWidget=HeadlessWidget)
    traitlets: Any = SimpleNamespace(Dict=_Dict, List=_List, Unicode=_Unicode, Float=_Float)
else:
    WIDGET_IMPORT_ERROR = None
    anywidget = _anywidget
    traitlets = _traitlets


def require_widget_packages(what: str = "etp_viz.show()") -> None:
    """Raise an ``ImportError`` naming the install when the widget packages are missing."""
    if WIDGET_IMPORT_ERROR is None:
        return
    missing = WIDGET_IMPORT_ERROR.name or str(WIDGET_IMPORT_ERROR)
    raise ImportError(
        f"{what} displays a Jupyter widget, which needs the explorer extra (anywidget, "
        f"ipywidgets; missing here: {missing}). Install it with:\n    {INSTALL_HINT}\n"
        "Without it everything else works: etp_viz.live.Session runs headless, "
        "etp_viz.Explorer(graph).save_html(path) and `python -m etp_viz demo` write an offline "
        "page."
    ) from WIDGET_IMPORT_ERROR
