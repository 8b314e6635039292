"""Figure assembly of Chapter 7 (robustness to outliers): whole figures built from a result, so the chapter's cells
only name what they show. The panels themselves are drawn by :mod:`mambaicl.viz.fig2`."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..analysis import thm4d
from ..analysis.stats import mean_se

__all__ = ["alpha_forms_figure"]


def alpha_forms_figure(alphas, needed: dict):
    """Theorem 4(d)'s alpha-dependence: per seed (grey) and mean (black) the examples ``needed`` (``{alpha: [per
    seed]}``) for the error level, and the three forms of :data:`mambaicl.analysis.thm4d.FORMS`, each with its
    constant fitted to the seed means. Returns the figure."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for s in range(len(needed[alphas[0]])):
        ax.plot(alphas, [needed[a][s] for a in alphas], "o", color="0.7", ms=3)
    means = [mean_se(needed[a])[0] for a in alphas]
    ax.plot(alphas, means, "o", color="black", label="measured (mean)")
    grid = np.linspace(alphas[0], alphas[-1], 60)
    for f, ls in zip(thm4d.FORMS, ("--", ":", "-")):
        C = thm4d.fit_form(f, alphas, means)[0]
        ax.plot(grid, [C * thm4d.form(f, a) for a in grid], ls, label=thm4d.FORM_LABELS[f])
    ax.set_yscale("log")
    ax.set_xlabel(r"outlier fraction $\alpha$")
    ax.set_ylabel(r"examples needed, $l^*$")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
