"""TeX formulas as MathML, offline: the subset the lessons' notebooks write.

A lesson page must render its notebook's ``$...$`` and ``$$...$$`` with no script from the
web (no MathJax, no KaTeX), and browsers draw ``<math>`` themselves (MathML Core). This is a
small recursive-descent reader of the TeX the notebooks use: identifiers (italic letters,
``\\mathrm`` / ``\\mathbf`` / ``\\mathbb`` / ``\\mathcal`` / ``\\text``), numbers, operators,
Greek letters, ``\\frac``, ``\\sqrt``, sub- and superscripts (``y^*_t``, ``W_{out}^T``),
``\\sum`` and other large operators, relations and binary operators (``\\approx``, ``\\le``,
``\\times``, ``\\cdot``, ``\\odot``, ``\\leftarrow``, …), functions (``\\tanh``, ``\\exp``),
accents (``\\hat``, ``\\bar``, ``\\tilde``), ``\\left( … \\right)`` and spacing (``\\,``,
``\\;``, ``\\qquad``). It never raises: a command it does not know is shown as its escaped
text (``<mtext class="tex-unknown">\\foo</mtext>``) and its arguments as ordinary groups, so
nothing is dropped; every character of the source reaches the page escaped. The TeX itself
is kept in an ``<annotation>`` (what a reader copies).

Examples
--------
>>> mathml = tex_to_mathml(r"\\frac{\\partial L}{\\partial \\theta}")
>>> mathml.count("<mfrac>"), mathml.count("<mi>∂</mi>"), mathml.count("<mi>θ</mi>")
(1, 2, 1)
"""

from __future__ import annotations

import html
import re

__all__ = ["tex_to_mathml"]

GREEK = dict(
    alpha="α", beta="β", gamma="γ", delta="δ", epsilon="ϵ", varepsilon="ε", zeta="ζ",
    eta="η", theta="θ", vartheta="ϑ", iota="ι", kappa="κ", lambda_="λ", mu="μ", nu="ν",
    xi="ξ", pi="π", rho="ρ", sigma="σ", tau="τ", upsilon="υ", phi="ϕ", varphi="φ", chi="χ",
    psi="ψ", omega="ω", Gamma="Γ", Delta="Δ", Theta="Θ", Lambda="Λ", Xi="Ξ", Pi="Π",
    Sigma="Σ", Upsilon="Υ", Phi="Φ", Psi="Ψ", Omega="Ω",
)  # fmt: skip
GREEK["lambda"] = GREEK.pop("lambda_")
#: symbols drawn as identifiers
LETTERS = {"partial": "∂", "infty": "∞", "nabla": "∇", "ell": "ℓ", "emptyset": "∅"}
#: operators, relations, arrows, dots
OPERATORS = dict(
    times="×", cdot="⋅", odot="⊙", otimes="⊗", oplus="⊕", circ="∘", pm="±", mp="∓",
    div="÷", ast="∗", star="⋆", approx="≈", sim="∼", simeq="≃", equiv="≡", propto="∝",
    le="≤", leq="≤", ge="≥", geq="≥", ne="≠", neq="≠", ll="≪", gg="≫", in_="∈", notin="∉",
    subset="⊂", subseteq="⊆", cup="∪", cap="∩", leftarrow="←", gets="←", rightarrow="→",
    to="→", Leftarrow="⇐", Rightarrow="⇒", leftrightarrow="↔", mapsto="↦", iff="⟺",
    implies="⟹", forall="∀", exists="∃", neg="¬", land="∧", lor="∨", mid="∣",
    ldots="…", cdots="⋯", vdots="⋮", dots="…", langle="⟨", rangle="⟩", lvert="|",
    rvert="|", vert="|", Vert="‖", lfloor="⌊", rfloor="⌋", lceil="⌈", rceil="⌉",
    top="⊤", perp="⊥", prime="′",
)  # fmt: skip
OPERATORS["in"] = OPERATORS.pop("in_")
LARGE_OPERATORS = {"sum": "∑", "prod": "∏", "int": "∫", "oint": "∮", "bigcup": "⋃"}
FUNCTIONS = frozenset(
    "tanh sinh cosh sin cos tan exp log ln max min arg argmax argmin det sup inf lim "
    "sgn softmax diag tr Pr".split()
)
#: widths of the spacing commands (em)
SPACES = {",": 0.1667, ":": 0.2222, ">": 0.2222, ";": 0.2778, " ": 0.25, "~": 0.25,
          "quad": 1.0, "qquad": 2.0, "enspace": 0.5, "\\": 1.0}  # fmt: skip
ACCENTS = {"hat": "^", "widehat": "^", "bar": "¯", "overline": "‾", "tilde": "˜",
           "widetilde": "˜", "vec": "→", "dot": "˙", "ddot": "¨"}  # fmt: skip
FONTS = {"mathrm": "normal", "operatorname": "normal", "mathbf": "bold", "boldsymbol": "bold",
         "mathit": "italic", "mathbb": "double-struck", "mathcal": "script"}  # fmt: skip
TEXTS = frozenset({"text", "textrm", "textit", "textbf", "mbox"})
#: characters a backslash makes literal
ESCAPED = {"_": "_", "{": "{", "}": "}", "$": "$", "%": "%", "&": "&", "#": "#", "|": "‖"}
#: how a plain character prints as an operator
PLAIN = {"-": "−", "*": "∗", "'": "′"}
#: Unicode's mathematical alphanumerics: (start of A, of a, of 0) and the letters it
#: keeps elsewhere (MathML Core draws these, not mathvariant="bold")
ALPHABETS = {
    "bold": ((0x1D400, 0x1D41A, 0x1D7CE), {}),
    "double-struck": ((0x1D538, 0x1D552, 0x1D7D8), dict(zip("CHNPQRZ", "ℂℍℕℙℚℝℤ"))),
    "script": ((0x1D49C, 0x1D4B6, None), dict(zip("BEFHILMRego", "ℬℰℱℋℐℒℳℛℯℊℴ"))),
}


def _styled(char: str, variant: str) -> str:
    """``char`` in the alphabet of ``variant`` (itself where the alphabet has none)."""
    if variant not in ALPHABETS or not char.isascii() or not char.isalnum():
        return char
    (upper, lower, digit), kept = ALPHABETS[variant]
    if char in kept:
        return kept[char]
    if char.isdigit():
        return char if digit is None else chr(digit + int(char))
    return chr((upper if char.isupper() else lower) + ord(char.lower()) - ord("a"))


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _row(items: list[str]) -> str:
    return f"<mrow>{''.join(items)}</mrow>"


class _Reader:
    """One formula's characters, read once from left to right."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.at = 0
        self.variant: str | None = None

    def peek(self) -> str:
        while self.at < len(self.source) and self.source[self.at].isspace():
            self.at += 1
        return self.source[self.at] if self.at < len(self.source) else ""

    def row(self, stop: str = "") -> list[str]:
        """Atoms until the end, a ``}`` (``stop="}"``) or a ``\\right`` (``stop="right"``)."""
        items = []
        while char := self.peek():
            if char == "}" and stop == "}":
                break
            if stop == "right" and re.match(r"\\right(?![a-zA-Z])", self.source[self.at :]):
                break
            items.append(self.scripted())
        return items

    def scripted(self) -> str:
        """An atom and its ``_`` / ``^`` scripts (in either order, one of each)."""
        large = self.peek() == "\\" and self._name_ahead() in LARGE_OPERATORS
        base, scripts = self.atom(), {}
        while (char := self.peek()) in ("_", "^") and char not in scripts:
            self.at += 1
            scripts[char] = self.argument()
        if not scripts:
            return base
        tags = ("munder", "mover", "munderover") if large else ("msub", "msup", "msubsup")
        if "_" in scripts and "^" in scripts:
            return f"<{tags[2]}>{base}{scripts['_']}{scripts['^']}</{tags[2]}>"
        tag = tags[0] if "_" in scripts else tags[1]
        return f"<{tag}>{base}{next(iter(scripts.values()))}</{tag}>"

    def argument(self) -> str:
        """A command's or script's argument: a ``{group}`` or one character."""
        char = self.peek()
        if char == "{":
            return self.atom()
        if char in ("", "}", "^", "_"):
            return "<mrow></mrow>"
        if char.isdecimal():
            self.at += 1
            return f"<mn>{char}</mn>"
        return self.atom()

    def atom(self) -> str:
        char = self.peek()
        if char == "{":
            self.at += 1
            items = self.row("}")
            self.at += self.peek() == "}"
            return _row(items)
        if char in ("^", "_"):
            return "<mrow></mrow>"  # a script with no base
        if char == "\\":
            return self.command()
        if char.isdecimal():
            number = re.match(r"\d+(?:\.\d+)?", self.source[self.at :])[0]
            self.at += len(number)
            return f"<mn>{_e(''.join(_styled(c, self.variant or '') for c in number))}</mn>"
        self.at += 1
        if char.isalpha():
            return self.identifier(char)
        return f"<mo>{_e(PLAIN.get(char, char))}</mo>"

    def identifier(self, text: str) -> str:
        if self.variant in ALPHABETS:
            return f"<mi>{_e(''.join(_styled(c, self.variant) for c in text))}</mi>"
        if self.variant == "normal" and len(text) == 1:
            return f'<mi mathvariant="normal">{_e(text)}</mi>'
        return f"<mi>{_e(text)}</mi>"

    def _name_ahead(self) -> str:
        match = re.match(r"\\([a-zA-Z]+|.?)", self.source[self.at :], re.S)
        return match[1] if match else ""

    def command(self) -> str:
        name = self._name_ahead()
        self.at += 1 + len(name)
        if not name:
            return "<mtext>\\</mtext>"  # a lone backslash at the end
        if name in GREEK:  # capitals upright, as TeX draws them
            upright = ' mathvariant="normal"' if name[0].isupper() else ""
            return f"<mi{upright}>{GREEK[name]}</mi>"
        if name in LETTERS:
            return f"<mi>{LETTERS[name]}</mi>"
        if name in OPERATORS:
            return f"<mo>{_e(OPERATORS[name])}</mo>"
        if name in LARGE_OPERATORS:
            return f"<mo>{LARGE_OPERATORS[name]}</mo>"
        if name in FUNCTIONS:
            return f"<mi>{name}</mi>"
        if name in SPACES:
            return f'<mspace width="{SPACES[name]}em"></mspace>'
        if name == "!":
            return ""  # a negative thin space: nothing to draw
        if name in ESCAPED:
            return f"<mo>{_e(ESCAPED[name])}</mo>"
        return self.structure(name)

    def structure(self, name: str) -> str:
        """Commands with arguments: fractions, roots, fonts, text, accents, fences."""
        if name in ("frac", "dfrac", "tfrac"):
            return f"<mfrac>{self.argument()}{self.argument()}</mfrac>"
        if name == "sqrt":
            return self.root()
        if name in FONTS:
            return self.font(FONTS[name])
        if name in TEXTS:
            return f"<mtext>{_e(self.raw_group())}</mtext>"
        if name in ACCENTS:
            return f'<mover accent="true">{self.argument()}<mo>{ACCENTS[name]}</mo></mover>'
        if name == "left":
            opening = self.delimiter()
            items = self.row("right")
            if re.match(r"\\right(?![a-zA-Z])", self.source[self.at :]):
                self.at += len("\\right")
            closing = self.delimiter()
            return _row([opening, *items, closing])
        if name in ("right", "middle", "big", "Big", "bigg", "Bigg", "bigl", "bigr"):
            return self.delimiter()
        return f'<mtext class="tex-unknown">{_e(chr(92) + name)}</mtext>'

    def root(self) -> str:
        index = None
        if self.peek() == "[":
            end = self.source.find("]", self.at)
            end = len(self.source) if end < 0 else end
            index = _row(_Reader(self.source[self.at + 1 : end]).row())
            self.at = end + 1
        body = self.argument()
        return f"<msqrt>{body}</msqrt>" if index is None else f"<mroot>{body}{index}</mroot>"

    def font(self, variant: str) -> str:
        saved, self.variant = self.variant, variant
        word = re.match(r"\{([A-Za-z]+)\}", self.source[self.at :].lstrip())
        if word and variant != "italic":  # \mathrm{out}: one identifier, not three
            result = self.identifier(self.raw_group())
        else:
            result = self.argument()
        self.variant = saved
        return result

    def raw_group(self) -> str:
        """The text of a ``{group}`` as written, its escapes (``\\_``, ``\\{``…) unescaped."""
        if self.peek() != "{":
            char = self.peek()
            self.at += len(char)
            return char
        depth, index, text = 0, self.at, []
        while index < len(self.source):
            char = self.source[index]
            if char == "\\" and index + 1 < len(self.source):
                following = self.source[index + 1]
                text.append(following if following in ESCAPED else char + following)
                index += 2
                continue
            depth += {"{": 1, "}": -1}.get(char, 0)
            index += 1
            if depth == 0:
                break
            text.append(char)
        self.at = index
        return "".join(text[1:])

    def delimiter(self) -> str:
        char = self.peek()
        if not char:
            return ""
        if char == "\\":
            name = self._name_ahead()
            self.at += 1 + len(name)
            text = ESCAPED.get(name) or OPERATORS.get(name) or f"\\{name}"
        else:
            self.at += 1
            text = "" if char == "." else char
        return f'<mo fence="true">{_e(text)}</mo>' if text else ""


def tex_to_mathml(source: str, *, display: bool = False) -> str:
    """``source`` (TeX math, without its ``$`` delimiters) as a ``<math>`` element.

    Parameters
    ----------
    source : str
        The formula, e.g. ``r"\\sum_t L_t\\, e_t"``.
    display : bool
        A displayed formula (``$$...$$``): ``<math display="block">``.

    Returns
    -------
    str
        MathML; the TeX kept in its ``<annotation encoding="application/x-tex">``.

    Examples
    --------
    >>> tex_to_mathml("x^2", display=True).split("<annotation")[0]
    '<math display="block"><semantics><mrow><msup><mi>x</mi><mn>2</mn></msup></mrow>'
    """
    body = _row(_Reader(source).row())
    block = ' display="block"' if display else ""
    return (
        f"<math{block}><semantics>{body}"
        f'<annotation encoding="application/x-tex">{_e(source)}</annotation></semantics></math>'
    )
