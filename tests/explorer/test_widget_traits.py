"""js/src/types.js `WidgetTraits` lists every synced trait of Explorer and LiveExplorer."""

from __future__ import annotations

import re
from pathlib import Path

from etp_viz.explorer.live_explorer import LiveExplorer
from etp_viz.explorer.widget import Explorer

TYPES_JS = Path(__file__).resolve().parents[2] / "js" / "src" / "types.js"
ANYWIDGET_INTERNAL = {"_esm", "_css", "_anywidget_id"}


def widget_traits_block() -> str:
    text = TYPES_JS.read_text()
    start = text.index("@typedef {object} WidgetTraits")
    return text[start : text.index("*/", start)]


def synced(cls) -> set[str]:
    """The synced traits the class itself declares (not ipywidgets' own layout, tooltip, …)."""
    import ipywidgets

    names = set(cls.class_trait_names(sync=True))
    names -= set(ipywidgets.DOMWidget.class_trait_names(sync=True))
    return {n for n in names if not n.startswith("_") and n not in ANYWIDGET_INTERNAL}


def documented() -> set[str]:
    return set(re.findall(r"@property \{[^}]*\} \[?(\w+)\]?", widget_traits_block()))


def test_every_synced_trait_is_in_widget_traits():
    python = synced(Explorer) | synced(LiveExplorer)
    assert {"view_shell", "expanded", "error", "live_panels", "live_status"} <= python
    assert "view_model" not in python  # the full view model stays in Python (parts.py)
    missing = python - documented()
    assert not missing, f"js/src/types.js WidgetTraits lacks {sorted(missing)}"


def test_widget_traits_lists_nothing_python_does_not_send():
    sent = synced(Explorer) | synced(LiveExplorer) | {"live_history", "view_parts"}
    assert documented() <= sent, sorted(documented() - sent)


def test_widget_traits_names_the_python_files():
    block = widget_traits_block()
    assert "etp_viz/explorer/widget.py" in block and "etp_viz/explorer/live_explorer.py" in block
