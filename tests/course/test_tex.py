"""TeX to MathML for the lesson pages: every construct the lesson notebooks write, the
markdown around it (code spans and escaped dollars untouched), unknown commands shown, HTML
escaped, and every formula of the four lesson notebooks drawn as ``<math>``."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ElementTree

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from etp_viz.course import lessons
from etp_viz.course.page import render_markdown
from etp_viz.course.tex import tex_to_mathml


def body(tex: str) -> str:
    """The drawn part of the MathML (the TeX annotation left out)."""
    return re.sub(r"<annotation.*?</annotation>", "", tex_to_mathml(tex), flags=re.S)


def visible_text(markup: str) -> str:
    """The text a reader sees: the annotations dropped, then every tag."""
    markup = re.sub(r"<annotation.*?</annotation>", "", markup, flags=re.S)
    return ElementTree.fromstring(f"<root>{markup}</root>").itertext()


#: (TeX, a piece its MathML must hold): each construct of notebooks 07-10, then the rest of
#: the subset (Greek, fonts, accents, fences, relations)
CONSTRUCTS = [
    (r"h_{t-1}", "<msub><mi>h</mi><mrow><mi>t</mi><mo>−</mo><mn>1</mn></mrow></msub>"),
    (r"f(h, x_t; \theta)", "<mo>(</mo><mi>h</mi><mo>,</mo>"),
    (r"f(h, x_t; \theta)", "<mo>;</mo><mi>θ</mi><mo>)</mo>"),
    (r"\mathrm{d}h_t/\mathrm{d}\theta", '<mi mathvariant="normal">d</mi><msub>'),
    (r"h_t/\mathrm{d}", "</msub><mo>/</mo>"),
    (
        r"\frac{\partial f}{\partial \theta}",
        "<mfrac><mrow><mi>∂</mi><mi>f</mi></mrow><mrow><mi>∂</mi><mi>θ</mi></mrow></mfrac>",
    ),
    (r"J_t\, M", '</msub><mspace width="0.1667em"></mspace><mi>M</mi>'),
    (r"a \;(n)", '<mspace width="0.2778em"></mspace>'),
    (r"a, \qquad J", '<mo>,</mo><mspace width="2.0em"></mspace>'),
    (r"n \times p", "<mi>n</mi><mo>×</mo><mi>p</mi>"),
    (r"\sum_t L_t", "<munder><mo>∑</mo><mi>t</mi></munder><msub>"),
    (r"\sum_{t=1}^T", "<munderover><mo>∑</mo><mrow><mi>t</mi><mo>=</mo><mn>1</mn></mrow>"),
    (r"y^*_t", "<msubsup><mi>y</mi><mi>t</mi><mo>∗</mo></msubsup>"),
    (r"W_{out}^T", "<msubsup><mi>W</mi><mrow><mi>o</mi><mi>u</mi><mi>t</mi></mrow><mi>T</mi>"),
    (r"h \leftarrow a\,h", "<mi>h</mi><mo>←</mo><mi>a</mi>"),
    (r"(1-a)\tanh(x W_{in})", "<mo>(</mo><mn>1</mn><mo>−</mo><mi>a</mi><mo>)</mo><mi>tanh</mi>"),
    (r"\sigma(\text{decay\_logit})", "<mi>σ</mi><mo>(</mo><mtext>decay_logit</mtext><mo>)</mo>"),
    (r"dh/dh", "<mi>d</mi><mi>h</mi><mo>/</mo><mi>d</mi><mi>h</mi>"),
    (r"x = 0.25", "<mo>=</mo><mn>0.25</mn>"),
    (r"\alpha \Gamma", '<mi>α</mi><mi mathvariant="normal">Γ</mi>'),
    (r"\epsilon \varepsilon \lambda", "<mi>ϵ</mi><mi>ε</mi><mi>λ</mi>"),
    (r"a \odot b \cdot c", "<mi>a</mi><mo>⊙</mo><mi>b</mi><mo>⋅</mo><mi>c</mi>"),
    (r"a \approx b \le c \ge d", "<mo>≈</mo><mi>b</mi><mo>≤</mo><mi>c</mi><mo>≥</mo>"),
    (r"\mathbf{x}", "<mi>𝐱</mi>"),
    (r"\mathbf{W}_{12}", "<msub><mi>𝐖</mi><mrow><mn>12</mn></mrow></msub>"),
    (r"\mathrm{out}", "<mi>out</mi>"),
    (r"\mathbb{R}^n", "<msup><mi>ℝ</mi><mi>n</mi></msup>"),
    (r"\hat{y}", '<mover accent="true"><mrow><mi>y</mi></mrow><mo>^</mo></mover>'),
    (r"\bar x", '<mover accent="true"><mi>x</mi><mo>¯</mo></mover>'),
    (r"\tilde{h}", '<mover accent="true"><mrow><mi>h</mi></mrow><mo>˜</mo></mover>'),
    (
        r"\left( \frac{a}{b} \right)",
        '<mrow><mo fence="true">(</mo><mfrac><mrow><mi>a</mi></mrow><mrow><mi>b</mi></mrow>'
        '</mfrac><mo fence="true">)</mo></mrow>',
    ),
    (r"\left. x \right|", '<mrow><mi>x</mi><mo fence="true">|</mo></mrow>'),
    (r"\sqrt{x}", "<msqrt><mrow><mi>x</mi></mrow></msqrt>"),
    (r"\exp(-t)", "<mi>exp</mi><mo>(</mo><mo>−</mo><mi>t</mi>"),
    (r"x^{10}", "<msup><mi>x</mi><mrow><mn>10</mn></mrow></msup>"),
    (r"x^10", "<msup><mi>x</mi><mn>1</mn></msup><mn>0</mn>"),  # TeX: one digit is raised
]


@pytest.mark.parametrize(("tex", "piece"), CONSTRUCTS, ids=[c[0] for c in CONSTRUCTS])
def test_each_construct_becomes_its_mathml(tex, piece):
    assert piece in body(tex)
    assert "tex-unknown" not in body(tex)


def test_a_displayed_formula_is_a_block_and_keeps_its_tex():
    mathml = tex_to_mathml(r"M_t = J_t\, M_{t-1}", display=True)
    assert mathml.startswith('<math display="block"><semantics><mrow>')
    assert '<annotation encoding="application/x-tex">M_t = J_t\\, M_{t-1}</annotation>' in mathml
    assert tex_to_mathml("x").startswith("<math><semantics>")


def test_an_unknown_command_is_shown_as_escaped_text_and_its_argument_kept():
    shown = body(r"\foo{x} + \<y")
    assert '<mtext class="tex-unknown">\\foo</mtext><mrow><mi>x</mi></mrow><mo>+</mo>' in shown
    assert '<mtext class="tex-unknown">\\&lt;</mtext><mi>y</mi>' in shown


def test_html_in_a_formula_is_escaped():
    mathml = tex_to_mathml(r'</math><script>alert(1)</script> \text{<b>&"} a<b')
    assert "<script" not in mathml and "<b>" not in mathml
    assert "<mtext>&lt;b&gt;&amp;&quot;</mtext>" in mathml
    assert "<mi>a</mi><mo>&lt;</mo><mi>b</mi>" in mathml
    ElementTree.fromstring(mathml)  # well-formed: nothing closed the element early


#: pieces of TeX, well-formed or not (unbalanced braces, stray scripts, a trailing backslash)
PIECES = ["y", "z", "7", "2.5", "+", "-", "<", "&", '"', "{", "}", "^", "_", "(", ")", "[",
          "]", "'", " ", "$", "|", ".", "\\", "\\frac", "\\left", "\\right", "\\foo",
          "\\text", "\\sqrt", "\\hat", "\\,", "\\sum", "\\{", "\\mathrm", "\\mathbf",
          "\\alpha", "\\times"]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=16).map("".join))
def test_any_source_gives_well_formed_mathml_and_loses_no_character(tex):
    mathml = tex_to_mathml(tex)
    ElementTree.fromstring(mathml)
    shown = "".join(visible_text(mathml))
    for char in "yz7":  # in no command's name: each one written is drawn (mathbf's is bold)
        bold = chr(0x1D431) if char == "y" else chr(0x1D433) if char == "z" else chr(0x1D7D5)
        assert shown.count(char) + shown.count(bold) == tex.count(char), (tex, mathml)


def test_markdown_math_beside_code_spans_and_dollars():
    html = render_markdown(r"Cost `$x$ stays` and $a_t$, price \$5 and $10, $$b$$ *c*")
    assert "<code>$x$ stays</code>" in html
    assert html.count("<math>") == 1 and html.count('<math display="block">') == 1
    assert "<msub><mi>a</mi><mi>t</mi></msub>" in html
    assert "price $5 and $10" in html  # an escaped dollar, then no closing one before a digit
    assert "<em>c</em>" in html
    assert "$ 1 and 2 $" in render_markdown("$ 1 and 2 $")  # spaces inside: no formula


def test_a_star_in_a_formula_is_no_emphasis():
    html = render_markdown(r"with $L_t = B\,(y_t - y^*_t)$ and *this*")
    assert "<mo>∗</mo>" in html and html.count("<em>") == 1


def test_html_in_markdown_math_is_escaped():
    html = render_markdown(r"a $x < y \text{<img src=x onerror=alert(1)>}$ b")
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def _formula_counts(source: str) -> tuple[int, int]:
    """(displayed, inline) formulas of a markdown source, counted by its dollars alone."""
    prose = re.sub(r"`[^`]*`", "", source)
    display = prose.count("$$") // 2
    return display, (prose.count("$") - 4 * display) // 2


@pytest.mark.parametrize("lesson", lessons(), ids=lambda lesson: lesson.name)
def test_every_formula_of_the_lesson_notebooks_is_mathml(lesson):
    notebook = json.loads(lesson.notebook_path.read_text(encoding="utf-8"))
    cells = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown"]
    formulas = 0
    for source in cells:
        html = render_markdown(source)
        prose = re.sub(r"<code>.*?</code>|<annotation.*?</annotation>", "", html, flags=re.S)
        display, inline = _formula_counts(source)
        assert "$" not in prose, (source, html)
        assert prose.count('<math display="block">') == display
        assert prose.count("<math") == display + inline
        assert "\\" not in prose and "tex-unknown" not in prose  # every command was read
        formulas += display + inline
    assert formulas >= 1  # each lesson notebook writes math
