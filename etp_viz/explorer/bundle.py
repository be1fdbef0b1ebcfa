"""Where the built front end lives and how it is read (``js/`` builds it into ``static/``).

Example
-------
>>> from etp_viz.explorer.bundle import BUNDLE
>>> BUNDLE.name
'widget.js'
"""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).parent / "static"
BUNDLE = STATIC / "widget.js"
STANDALONE_BUNDLE = STATIC / "widget.standalone.js"
MISSING_BUNDLE = (
    "the explorer front end is not built ({path} is missing). Run scripts/setup.sh "
    "(or: cd js && npm ci && npm run build)."
)
# Shown in place of the widget when the bundle is missing, so the notebook still says why.
MISSING_ESM = """
export default { render({ model, el }) {
  const div = document.createElement("div");
  div.style.cssText = "color:#8a1c1c;background:#fdecea;padding:6px;font-family:monospace";
  div.textContent = "etp_viz: " + MESSAGE;
  el.append(div);
} };
"""


def bundle_text(path: Path = BUNDLE) -> str:
    """The built front end, or a clear error naming the setup step."""
    if not path.is_file():
        raise FileNotFoundError(MISSING_BUNDLE.format(path=path))
    return path.read_text(encoding="utf-8")
