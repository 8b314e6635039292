"""The book's one plotting style and palette.

Every figure of the book takes its colours from :data:`PALETTE` (Okabe-Ito, colour-blind safe):
a model, or a kind of example, has the same colour in every chapter.
"""
from __future__ import annotations

import matplotlib as mpl

from ..checks import ConfigError

__all__ = ["PALETTE", "LABELS", "use_style", "color"]

PALETTE = {
    # models
    "mamba": "#0072B2",  # blue
    "mamba_merged": "#56B4E9",  # sky blue
    "linear": "#D55E00",  # vermillion
    "softmax": "#009E73",  # bluish green
    "mamba1": "#CC79A7",  # reddish purple
    "oracle": "#000000",  # the encoder's ceiling
    # examples
    "clean": "#009E73",  # bluish green
    "outlier": "#D55E00",  # vermillion
    "same": "#0072B2",  # context example with the query's relevant pattern (N_1 of Corollary 1)
    "other": "#999999",  # grey: any other relevant pattern
    # reference lines
    "theory": "#E69F00",  # orange: a bound or prediction of the paper
    "paper": "#F0E442",  # yellow: a number reported by the paper
}

from ..models import LABELS  # noqa: E402 - the models' names, defined once beside the models


def color(key: str) -> str:
    """The palette colour of ``key`` (a model kind or an example kind); a :class:`~mambaicl.config.ConfigError` names the keys."""
    if key not in PALETTE:
        raise ConfigError(f"key must be one of the palette's keys {sorted(PALETTE)}; got {key!r} (no colour)")
    return PALETTE[key]


def use_style() -> None:
    """Apply the book's matplotlib style (sizes, grid, colour cycle) to the current session.

    Figures are drawn on an opaque white card with dark text, whatever the reader's own
    matplotlib settings: the site shows them as light cards in its light and dark modes alike
    (the browser test, ``tests/test_site.py``, checks both), and the PDF prints them as they are.
    """
    mpl.rcParams.update({
        "figure.facecolor": "white",
        "axes.facecolor": "white",
        "savefig.facecolor": "white",
        "savefig.transparent": False,
        "text.color": "black",
        "axes.labelcolor": "black",
        "xtick.color": "black",
        "ytick.color": "black",
        "figure.dpi": 100,
        "savefig.dpi": 100,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "font.size": 10,
        "legend.frameon": False,
        "axes.prop_cycle": mpl.cycler(color=[PALETTE[k] for k in ("mamba", "linear", "softmax", "mamba1",
                                                                  "mamba_merged")]),
    })
