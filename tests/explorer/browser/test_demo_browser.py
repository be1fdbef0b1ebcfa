"""The README's first command end to end: ``python -m etp_viz demo`` writes an offline HTML;
Chromium opens it via file:// with no network and draws the graph and the recorded history
(controls disabled: no kernel). 0 requests, 0 page errors, a screenshot that is not blank."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

pytestmark = pytest.mark.browser

STEPS = 48
FIDELITY_EVERY = 12  # the demo measures fidelity by default; make it land inside the run


@pytest.fixture(scope="module")
def demo_html(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "demo.html"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "etp_viz",
            "demo",
            "--steps",
            str(STEPS),
            "--fidelity-every",
            str(FIDELITY_EVERY),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert out.is_file() and f"{STEPS} steps" in result.stdout
    return out


def drawn_pixels(page, name):
    return page.page.evaluate(
        """(name) => { const c = document.querySelector(`canvas[data-live="${name}"]`);
          const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          let n = 0; for (let i = 3; i < d.length; i += 4) n += d[i] > 0; return n; }""",
        name,
    )


def test_demo_html_renders_graph_and_history_offline(open_page, demo_html, tmp_path):
    from PIL import Image

    page = open_page(None)  # file:// only; anything else is aborted and counted
    page.page.goto(demo_html.as_uri())
    # the page's CSP forbids eval: wait with selectors
    page.page.wait_for_selector(".etp-graph-pane svg g.node", timeout=30000)
    page.page.wait_for_selector("[data-region=live]:not([hidden])")
    page.page.wait_for_selector("g.etp-trace-coloured")
    assert page.page.is_visible("[data-live-note]")
    assert "no kernel" in page.page.text_content("[data-live-note]")
    for action in ("step", "run", "pause", "reset"):
        assert page.page.is_disabled(f"button[data-live-action={action}]")
    status = page.page.text_content("[data-live-status]")
    assert f"step {STEPS}" in status and "device cpu" in status.lower(), status
    panels = page.page.eval_on_selector_all(
        "canvas[data-live]", "cs => cs.map(c => c.dataset.live)"
    )
    assert {"loss", "traces"} <= set(panels) and any(p.startswith("df/") for p in panels)
    assert any(p.startswith("dhdh/") for p in panels)
    for name in panels:
        assert drawn_pixels(page, name) > 500, name
    assert page.page.is_visible(".etp-live-legend")
    data = page.page.screenshot(path=str(tmp_path / "demo.png"), full_page=True)
    image = Image.open(io.BytesIO(data)).convert("L")
    low, high = image.getextrema()
    assert high - low > 100 and len(set(image.resize((200, 130)).tobytes())) > 20
    assert page.errors == [], page.errors
    assert page.aborted == [], f"network requests from an offline page: {page.aborted}"
