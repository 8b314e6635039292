"""One plotting style for the book: ``use_style()`` and a palette keyed by model."""
from __future__ import annotations

import matplotlib as mpl

__all__ = ["PALETTE", "use_style"]

# colour-blind-safe (Okabe-Ito) colours, one per model family used in the book
PALETTE = {
    "mamba": "#0072B2",
    "linear_transformer": "#D55E00",
    "linear": "#D55E00",
    "softmax": "#009E73",
    "mamba1": "#CC79A7",
    "clean": "#009E73",
    "outlier": "#D55E00",
}


def use_style() -> None:
    """Apply the book's matplotlib style (sizes, grid, colour cycle) to the current session."""
    mpl.rcParams.update({
        "figure.dpi": 100,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "font.size": 10,
        "legend.frameon": False,
        "axes.prop_cycle": mpl.cycler(color=[PALETTE[k] for k in ("mamba", "linear_transformer", "softmax", "mamba1")]),
    })
