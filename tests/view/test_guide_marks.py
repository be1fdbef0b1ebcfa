"""Every mark the explorer draws is explained in the user guide's "Reading the explorer" part:
each legend entry (``palette.LEGEND``) by its label, and each glyph the front end writes into
labels, chips and marks (``js/src``) by itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from etp_viz.view.palette import LEGEND

ROOT = Path(__file__).resolve().parents[2]
#: the graph view's and the panels' modules (js/src/*.js; the live run's panels, js/src/live/,
#: are not part of "Reading the explorer"): every one is scanned, since labels, chips and marks
#: are written by several (./dot-style.js node labels, ./panels.js chips, ./legend.js keys) and
#: a glyph moved to a new module must still be checked
JS_SRC = ROOT / "js" / "src"


def _reading_the_explorer() -> str:
    guide = (ROOT / "docs" / "user-guide.md").read_text(encoding="utf-8")
    start = guide.index("## Reading the explorer")
    end = guide.index("\n## ", start + 1)
    return guide[start:end]


def _string_literals(path: Path) -> str:
    """The text of every string or template literal of a JS module, comments left out."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip().startswith(("//", "*", "/*")):
            continue
        out += ["".join(parts) for parts in re.findall(r'"([^"\n]*)"|`([^`\n]*)`', line)]
    return "\n".join(out)


def _glyphs() -> dict[str, str]:
    """Non-ASCII characters in the front-end modules' literals -> a module writing them."""
    found: dict[str, str] = {}
    modules = sorted(JS_SRC.glob("*.js"))
    assert len(modules) > 10, f"only {len(modules)} modules under {JS_SRC}"
    for path in modules:
        for char in _string_literals(path):
            if ord(char) > 127:
                found.setdefault(char, path.name)
    return found


@pytest.mark.parametrize("entry", LEGEND, ids=[e.key for e in LEGEND])
def test_every_legend_entry_is_a_row_of_the_guide(entry):
    assert f"**{entry.label}**" in _reading_the_explorer(), (
        f"legend entry {entry.key!r} ({entry.label!r}) is not explained in docs/user-guide.md "
        "'Reading the explorer' (add a row to 'Every mark on the page')"
    )


def test_every_glyph_the_front_end_draws_is_in_the_guide():
    glyphs = _glyphs()
    assert {"◆", "▸", "⟨", "✓", "✗", "≈", "∅"} <= set(glyphs), glyphs  # the scan sees them
    section = _reading_the_explorer()
    missing = {char: module for char, module in glyphs.items() if char not in section}
    assert not missing, f"glyphs drawn but not explained in the guide: {missing}"


def test_claim_signs_and_the_learning_signal_diamond_are_explained():
    panels = (ROOT / "js" / "src" / "panels.js").read_text(encoding="utf-8")
    signs = re.search(r"CLAIM_SIGN = \{([^}]*)\}", panels)
    assert signs, "panels.js no longer defines CLAIM_SIGN: update this test"
    section = _reading_the_explorer()
    for kind, sign in re.findall(r'(\w+): "([^"]+)"', signs.group(1)):
        assert f"`d_rtrl {sign}`" in section and f"**{kind}**" in section, (kind, sign)
    annotate = (ROOT / "etp_viz" / "view" / "annotate.py").read_text(encoding="utf-8")
    assert 'label=f"p[{text}]"' in annotate  # the diamond's label, as the guide shows it
    assert "`p[rnn.h]`" in section
