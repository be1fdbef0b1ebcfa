"""The palette stays readable with colour-vision deficiency and in the dark theme.

Colours are simulated with the Machado, Oliveira & Fernandes (2009) matrices at severity 1
(applied to linear RGB, as in colorspacious and DaltonLens), converted to CIELAB (D65) and
compared with the CIE76 colour difference. A difference of ~2.3 is just noticeable; the
categorical colours a student tells apart (how a weight is learned and claimed, the edge
kinds) must stay >= ``MIN_DELTA_E`` apart for normal vision, deuteranopia and protanopia, and
>= ``MIN_DELTA_E_TRITAN`` for the rarer tritanopia.
"""

from __future__ import annotations

import itertools
import math

import pytest

from etp_viz.view.palette import COLOURS, DARK_COLOURS, dark_colour, palette_json, theme_colours

MIN_DELTA_E = 20.0
MIN_DELTA_E_TRITAN = 15.0

#: Machado et al. 2009, severity 1.0 (linear RGB -> linear RGB)
MACHADO = {
    "deuteranopia": (
        (0.367322, 0.860646, -0.227968),
        (0.280085, 0.672501, 0.047413),
        (-0.011820, 0.042940, 0.968881),
    ),
    "protanopia": (
        (0.152286, 1.052583, -0.204868),
        (0.114503, 0.786281, 0.099216),
        (-0.003882, -0.048116, 1.051998),
    ),
    "tritanopia": (
        (1.255528, -0.076749, -0.178779),
        (-0.078411, 0.930809, 0.147602),
        (0.004733, 0.691367, 0.303900),
    ),
}
IDENTITY = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))

#: how a weight is learned and claimed (status chips, node borders, claim chips) and the
#: dropped term that makes a claim approximate
CLAIM_COLOURS = ("online", "exact", "approximate", "not_learned", "dropped")
#: the edge kinds (each also has its own line style)
EDGE_COLOURS = ("edge", "slice", "transition", "readout", "bypass", "dropped")


def linear(hex_colour: str) -> tuple[float, float, float]:
    channels = (int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return tuple(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)


def simulate(hex_colour: str, matrix=IDENTITY) -> tuple[float, float, float]:
    """CIELAB (D65) of a colour as seen through ``matrix`` (a Machado simulation)."""
    rgb = linear(hex_colour)
    r, g, b = (min(1.0, max(0.0, sum(m * c for m, c in zip(row, rgb)))) for row in matrix)
    x = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047
    y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b
    z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def closest_pair(names, colours, matrix) -> tuple[float, str, str]:
    return min(
        (math.dist(simulate(colours[a], matrix), simulate(colours[b], matrix)), a, b)
        for a, b in itertools.combinations(names, 2)
    )


def luminance(hex_colour: str) -> float:
    r, g, b = linear(hex_colour)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    low, high = sorted((luminance(a), luminance(b)))
    return (high + 0.05) / (low + 0.05)


def test_the_simulation_reproduces_known_confusions():
    """The oracle works: red and green (the old online / not-learned pair, 37 apart for normal
    vision) collapse for a deuteranope, and black/white stay far apart."""
    red, green = "#d62728", "#2ca02c"
    assert math.dist(simulate(red), simulate(green)) > 60
    deuteranope = MACHADO["deuteranopia"]
    assert math.dist(simulate(red, deuteranope), simulate(green, deuteranope)) < 15
    assert math.dist(simulate("#000000"), simulate("#ffffff")) == pytest.approx(100, abs=0.01)


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("vision", ["normal", "deuteranopia", "protanopia", "tritanopia"])
@pytest.mark.parametrize("names", [CLAIM_COLOURS, EDGE_COLOURS], ids=["claims", "edges"])
def test_categorical_colours_stay_apart(names, vision, theme):
    colours = theme_colours(theme)
    matrix = MACHADO.get(vision, IDENTITY)
    distance, a, b = closest_pair(names, colours, matrix)
    floor = MIN_DELTA_E_TRITAN if vision == "tritanopia" else MIN_DELTA_E
    pair = f"{a} {colours[a]} and {b} {colours[b]}"
    assert distance >= floor, f"{vision} ({theme}): {pair} are {distance:.1f} apart"


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_categorical_colours_read_on_the_background(theme):
    """Lines and borders of >= 3:1 contrast against the page (WCAG's non-text contrast); the
    approximate chip (dark text on it) only needs to stand out from the page."""
    colours = theme_colours(theme)
    for name in set(CLAIM_COLOURS + EDGE_COLOURS) - {"edge", "approximate"}:
        ratio = contrast(colours[name], colours["background"])
        assert ratio >= 3, f"{name} {colours[name]} on {colours['background']}: {ratio:.2f}"
    assert contrast(colours["approximate"], colours["background"]) >= 2
    # node text on every node fill
    for fill in ("op_fill", "etp", "not_learned_fill", "hidden", "state", "io", "param",
                 "perturb_fill", "collapsed", "group_fill"):  # fmt: skip
        assert contrast(colours["text"], colours[fill]) >= 7, (theme, fill)


def test_dark_theme_is_one_mapping_from_light_colours():
    """One light colour -> one dark colour (the legend maps its swatches by hex), and the view
    model carries both."""
    for name, light in COLOURS.items():
        assert dark_colour(light) == DARK_COLOURS.get(name, light), name
    assert set(DARK_COLOURS) <= set(COLOURS)
    palette = palette_json()
    assert {k: v for k, v in palette.items() if not k.startswith("dark.")} == COLOURS
    assert {k[5:]: v for k, v in palette.items() if k.startswith("dark.")} == DARK_COLOURS
    with pytest.raises(ValueError, match="theme must be"):
        theme_colours("sepia")
