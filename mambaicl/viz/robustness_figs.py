"""Figure assembly of Chapter 7 (robustness to outliers): whole figures built from a result, so the chapter's cells
only name what they show. The panels themselves are drawn by :mod:`mambaicl.viz.fig2`."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..analysis import thm4d
from ..analysis.lemmas import pattern_attention
from ..analysis.stats import mean_se
from . import fig2 as vf

__all__ = ["STYLE", "figure2", "figure2_by_training_set", "group_errors_figure", "attention_figure", "eta_figure",
           "lengths_figure", "alpha_forms_figure"]

#: the diagnosis's models: (palette key, hatch)
STYLE = {"Mamba": ("mamba", ""), "merged product": ("mamba_merged", ""), "Mamba, $W_B$ frozen": ("mamba", "//"),
         "linear Transformer": ("linear", "")}


def figure2(alphas, errors, per_seed, claim: dict, *, bound_mamba: float, bound_lt: float, n_tasks: tuple):
    """Figure 2: one panel per rule (:func:`mambaicl.viz.fig2.plot_figure2`), Mamba on the claim tasks dashed
    (``claim``: a ``Fig2Result.claim``). Returns the figure."""
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.4), sharey=True)
    vf.plot_figure2(axes, alphas, errors, per_seed, claim=(claim["errors"]["mamba"], claim["errors_per_seed"]["mamba"]),
                    bound_mamba=bound_mamba, bound_lt=bound_lt, n_tasks=n_tasks)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def figure2_by_training_set(comp, *, bound_mamba: float, bound_lt: float):
    """Figure 2 per complete training set (rows) of a ``CompleteResult``. Returns the figure."""
    fig, axes = plt.subplots(len(comp.task_sets), 3, figsize=(13, 8), sharey=True, sharex=True)
    vf.plot_figure2_by_training_set(axes, comp.alphas, comp.errors, comp.errors_per_seed, bound_mamba=bound_mamba,
                                    bound_lt=bound_lt)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def group_errors_figure(groups: dict, n_test: int):
    """Error by task group at each alpha of ``groups`` (``{alpha: {model name: {group: per seed}}}``, names of
    :data:`STYLE`), one panel per alpha. Returns the figure."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 3.8), sharey=True)
    for ax, a in zip(axes, groups):
        vf.plot_group_errors(ax, {name: (*STYLE[name], g) for name, g in groups[a].items()}, n_test)
        ax.set_title(rf"$\alpha$ = {a} (rule A)")
    fig.tight_layout()
    return fig


def attention_figure(models: dict, mu, by_dist: dict):
    """The pattern attention matrices of seed 1 (paper's parametrisation and merged product, ``models`` of a
    ``Fig2Result``) and the mean attention by distance on the cycle (``by_dist``: ``{name: (seeds, distance)}``).
    Returns the figure."""
    mats = {"paper: $W_B^\\top W_C$": pattern_attention(models["mamba"].member(0).bilinear(), mu),
            "merged product: $W$": pattern_attention(models["mamba_merged"].member(0).bilinear(), mu)}
    fig = plt.figure(figsize=(13, 3.9))
    gs = fig.add_gridspec(1, 3, width_ratios=(1, 1, 1.4))
    ax_m = [fig.add_subplot(gs[0, 0]), fig.add_subplot(gs[0, 1])]
    vf.plot_attention_matrices(ax_m, {t: A.detach() for t, A in mats.items()})
    ax_b = fig.add_subplot(gs[0, 2])
    vf.plot_attention_by_distance(ax_b, {name: (*STYLE[name], A.numpy()) for name, A in by_dist.items()})
    return fig


def eta_figure(searches: dict, at0: dict):
    """The step-size search (:func:`mambaicl.viz.fig2.plot_eta_table`). Returns the figure."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.9))
    vf.plot_eta_table(axes, searches, at0)
    fig.tight_layout()
    return fig


def lengths_figure(lengths, len_stats: dict, level: float, alphas=(0.3, 0.4, 0.45)):
    """Theorem 4(d): error against the prompt length at every other length of the grid (powers of two), one curve
    per alpha of ``alphas`` (``len_stats``: ``{alpha: [(mean, SE) per length]}``). Returns the figure."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    pick = list(range(0, len(lengths), 2))  # every other length: powers of two
    vf.plot_lengths(ax, [lengths[i] for i in pick], {a: ([len_stats[a][i][0] for i in pick],
                                                        [len_stats[a][i][1] for i in pick]) for a in alphas}, level=level)
    fig.tight_layout()
    return fig


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
