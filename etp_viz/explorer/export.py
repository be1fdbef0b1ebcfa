"""Export the explorer as one self-contained, offline HTML file.

``save_html(explorer, path)`` inlines the standalone front-end bundle (Graphviz wasm and the
layout worker included) and the widget state into a single page. A mock widget model stands in
for the kernel, so the page stays interactive (selection, expansion, search, export) with no
kernel and no network: a Content-Security-Policy forbids every fetch.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from .bundle import STANDALONE_BUNDLE, bundle_text

#: A minimal anywidget model over a plain state dict (no kernel). Requests to Python are
#: answered with an error saying there is no kernel. Also used by the browser-test harness.
MOCK_MODEL_JS = """
function etpCreateModel(state) {
  const listeners = {};
  const sent = [];
  const emit = (event, ...args) => (listeners[event] || []).slice().forEach((cb) => cb(...args));
  return {
    get: (name) => state[name],
    set: (name, value) => { state[name] = value; emit("change:" + name, null, value); },
    save_changes: () => {},
    on: (event, cb) => { (listeners[event] = listeners[event] || []).push(cb); },
    off: (event, cb) => { listeners[event] = (listeners[event] || []).filter((x) => x !== cb); },
    send: (content, callbacks, buffers) => {
      sent.push(content);
      if (content && content.type === "request") {
        setTimeout(() => emit("msg:custom", { type: "response", id: content.id, result: null,
          error: "no kernel: this is a saved page" }, []), 0);
      }
    },
    emit, state, sent,
  };
}
"""

# No network at all: inline scripts and styles, blob: workers, wasm compilation.
CSP = (
    "default-src 'none'; script-src 'unsafe-inline' 'wasm-unsafe-eval' blob:; "
    "worker-src blob:; style-src 'unsafe-inline'; img-src data: blob:"
)


def script_safe(text: str) -> str:
    """Text that cannot end the enclosing <script> element early."""
    return text.replace("</script", "<\\/script").replace("<!--", "<\\!--")


#: the saved explorer page's style (a lesson page passes its own)
PAGE_STYLE = "body { margin: 0; padding: 8px; font-family: sans-serif; }"


def json_script(element_id: str, value: Any, *, compact: bool = False) -> str:
    r"""``value`` as a ``<script type="application/json">`` element the page reads back with
    ``JSON.parse`` (``<`` and ``>`` escaped: no text in it can end the element or open one);
    ``compact``: no space after ``,`` and ``:``.

    >>> json_script("etp-state", {"title": "</script>"})
    '<script type="application/json" id="etp-state">{"title": "\\u003c/script\\u003e"}</script>'
    """
    separators = (",", ":") if compact else None
    text = json.dumps(value, separators=separators).replace("<", "\\u003c").replace(">", "\\u003e")
    return f'<script type="application/json" id="{html.escape(element_id)}">{text}</script>'


def page_shell(title: str, body: str, *, bundle: str, boot: str, style: str = PAGE_STYLE) -> str:
    """One offline page: the head (charset, the :data:`CSP` that forbids every request, the
    escaped ``title``, ``style``), then ``body`` (trusted HTML: the page's markup and its
    :func:`json_script` data), the front-end ``bundle`` inlined and the script ``boot``
    after :data:`MOCK_MODEL_JS` (its ``etpCreateModel`` stands in for the kernel).

    The saved explorer page (:func:`render_html`) and a course lesson's page
    (:mod:`etp_viz.course.page`) are both this shell.

    >>> page = page_shell("a <b>", "<main></main>", bundle="/* js */", boot="run();")
    >>> page.startswith("<!DOCTYPE html>"), "<title>a &lt;b&gt;</title>" in page
    (True, True)
    """
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{html.escape(CSP)}">
<title>{html.escape(title)}</title>
<style>{style}</style>
</head>
<body>
{body}
<script>{script_safe(bundle)}</script>
<script>
{MOCK_MODEL_JS}
{script_safe(boot)}
</script>
</body>
</html>
"""


#: the saved explorer page's script: one explorer over the saved state
EXPLORER_BOOT = """(function () {
  const state = JSON.parse(document.getElementById("etp-state").textContent);
  const el = document.getElementById("etp-explorer");
  window.etpModel = etpCreateModel(state);
  EtpVizExplorer.default.render({ model: window.etpModel, el });
})();"""


def render_html(state: dict[str, Any], bundle: str, *, title: str = "etp_viz explorer") -> str:
    """The HTML page for a widget state (see ``Explorer.frontend_state``)."""
    body = f'<div id="etp-explorer"></div>\n{json_script("etp-state", state)}'
    return page_shell(title, body, bundle=bundle, boot=EXPLORER_BOOT)


def save_html(explorer: Any, path: str | Path, *, title: str | None = None) -> Path:
    """Write ``explorer`` (an ``Explorer``) as a self-contained offline HTML file.

    Example
    -------
    >>> ex.save_html("model.html")                 # doctest: +SKIP
    """
    state = explorer.frontend_state()
    bundle = bundle_text(STANDALONE_BUNDLE)
    page_title = title or f"etp_viz — {(explorer.view_model or {}).get('title', 'explorer')}"
    path = Path(path)
    path.write_text(render_html(state, bundle, title=page_title), encoding="utf-8")
    return path
