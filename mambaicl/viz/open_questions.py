"""Figures of Chapter 8 (what the book settles beyond its audit): Figure 2 against its reader bound,
and the seed tail against the declared predictor."""
from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D

from .figures import plot_mean_band
from .style import PALETTE

__all__ = ["plot_bound_by_group", "plot_seed_tail", "plot_context_lengths", "plot_gate_after_zero"]

_TITLES = {"all": "all 30 tasks", "training": "training tasks", "reversed": "reversed tasks",
           "distance 2": "distance 2 (never met)", "distance 3": "distance 3 (never met)"}


def plot_bound_by_group(axes, alphas, errors: dict, bound, *, order=("all", "training", "reversed", "distance 2",
                                                                     "distance 3"), level: float = 0.01) -> list:
    """Mamba's test error against ``alpha`` per task group (mean over seeds as a line, every seed as a dot), with
    the reader bound of the group (orange) and the paper's "< 0.01" (yellow), symlog y axis.

    Args:
        errors: ``{group: [[error of seed s at alphas[i]] for s]}`` (:func:`mambaicl.experiments.seed_tail.group_sweep`).
        bound: ``bound(group, alpha)``: the bound of a group (``"all"``: over all tasks).
    Returns the legend handles.
    """
    grid = np.linspace(0, max(alphas), 91)
    for ax, g in zip(axes, order):
        e = np.asarray(errors[g], dtype=float)  # (S, A)
        ax.plot(alphas, e.mean(0), color=PALETTE["mamba"], marker="o", ms=4, label="Mamba (mean over seeds)")
        xs = np.broadcast_to(np.asarray(alphas, dtype=float), e.shape)
        ax.scatter(xs.ravel(), e.ravel(), s=6, color=PALETTE["mamba"], alpha=0.35, lw=0, zorder=3)
        ax.plot(grid, [bound(g, a) for a in grid], color=PALETTE["theory"], lw=2.0, ls="--")
        ax.axhline(level, color=PALETTE["paper"], lw=2.0, zorder=0)
        ax.set_yscale("symlog", linthresh=1e-3, linscale=0.3)
        ax.set_ylim(0, 1.05)
        ax.set_title(_TITLES.get(g, g))
        ax.set_xlabel(r"outlier fraction $\alpha$")
    axes[0].set_ylabel("test error, rule A (symlog)")
    return [Line2D([], [], color=PALETTE["mamba"], marker="o", label="Mamba, mean over seeds (dots: single seeds)"),
            Line2D([], [], color=PALETTE["theory"], lw=2.0, ls="--", label="reader bound (Corollary 1 model)"),
            Line2D([], [], color=PALETTE["paper"], lw=2.0, label=f"paper: error < {level:g}")]


def plot_seed_tail(ax, predictor, error, failing, *, level: float) -> list:
    """Each seed's declared predictor (x) against its test error at alpha = 0.8 (y, log scale); failing seeds
    (error above ``level``, dashed line) in the outlier colour. Returns the legend handles."""
    x, y, f = np.asarray(predictor, float), np.asarray(error, float), np.asarray(failing, bool)
    ax.scatter(x[~f], y[~f], s=22, color=PALETTE["mamba"], alpha=0.8)
    ax.scatter(x[f], y[f], s=50, color=PALETTE["outlier"], marker="D")
    ax.axhline(level, color=PALETTE["outlier"], lw=1.2, ls="--")
    ax.set_yscale("log")
    ax.set_xlabel(r"predictor $\kappa_a' \max_s v_s'^\top w$ (gate logit of the least-suppressed test outlier)")
    ax.set_ylabel(r"test error at $\alpha = 0.8$ (rule A, 18 tasks)")
    return [Line2D([], [], ls="", marker="o", color=PALETTE["mamba"], label="seed"),
            Line2D([], [], ls="", marker="D", color=PALETTE["outlier"], label=f"failing seed (error > {level:g})"),
            Line2D([], [], color=PALETTE["outlier"], ls="--", label="failure level (declared)")]


def plot_context_lengths(axes, l_grid, errors: dict, alphas, *, level: float) -> list:
    """Test error against the number of context examples ``l_ts`` (log x), one axis per ``alpha``, both models
    (mean over seeds, band ±1 SE); the declared level dashed. ``errors[kind][alpha index][s][l index]``.
    Returns the legend handles."""
    from .style import LABELS

    for i, (ax, a) in enumerate(zip(axes, alphas)):
        for kind in ("linear", "mamba"):
            e = np.asarray(errors[kind][i], dtype=float)  # (S, n_l)
            mean, se = e.mean(0), e.std(0, ddof=1) / np.sqrt(e.shape[0])
            plot_mean_band(ax, l_grid, mean, np.minimum(se, mean), kind)
        ax.axhline(level, color="black", lw=1.0, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_title(rf"$\alpha$ = {a:g}")
        ax.set_xlabel(r"context examples $l_{ts}$")
    axes[0].set_ylabel("test error, rule A (18 tasks)")
    return [Line2D([], [], color=PALETTE["mamba"], marker="o", label=LABELS["mamba"]),
            Line2D([], [], color=PALETTE["linear"], marker="o", label=LABELS["linear"]),
            Line2D([], [], color="black", ls="--", label=f"declared level {level:g}")]


def plot_gate_after_zero(axes, steps, val_hinge, log_ratio, zero_step, *, M1: int, layer: int = 0) -> list:
    """Two panels along training, one line per seed: the validation hinge loss (left, symlog) and layer
    ``layer``'s log outlier/clean gate ratio (right), each seed's line dotted from the record where its
    validation hinge reaches zero (marked); the right panel's dashed line is suppression, ``log(1/M1)``.

    Args:
        val_hinge: ``[s][record]``; log_ratio: ``[s][record][layer]``; zero_step: ``[s]`` (``-1``: never).
    Returns the legend handles.
    """
    t = np.asarray(steps, dtype=float)
    for s, (h, r, z) in enumerate(zip(val_hinge, log_ratio, zero_step)):
        y = np.asarray([row[layer] for row in r], dtype=float)
        k = int(np.searchsorted(t, z)) if z >= 0 else len(t) - 1
        for ax, v in zip(axes, (np.asarray(h, dtype=float), y)):
            ax.plot(t[: k + 1], v[: k + 1], color=PALETTE["mamba"], lw=1.0, alpha=0.8)
            ax.plot(t[k:], v[k:], color=PALETTE["mamba"], lw=1.0, ls=":", alpha=0.8)
            if z >= 0:
                ax.plot([t[k]], [v[k]], ls="", marker="o", ms=4, color=PALETTE["outlier"])
    axes[0].set_yscale("symlog", linthresh=1e-3, linscale=0.3)
    axes[0].set_ylabel("validation hinge loss (symlog)")
    axes[1].axhline(np.log(1 / M1), color=PALETTE["theory"], lw=1.5, ls="--")
    axes[1].set_ylabel(f"layer {layer + 1}: log(outlier gate / clean gate)")
    for ax in axes:
        ax.set_xlabel("updates")
    return [Line2D([], [], color=PALETTE["mamba"], lw=1.0, label="one seed, until its validation hinge is zero"),
            Line2D([], [], color=PALETTE["mamba"], lw=1.0, ls=":", label="the same seed afterwards"),
            Line2D([], [], ls="", marker="o", color=PALETTE["outlier"], label="validation hinge reaches zero"),
            Line2D([], [], color=PALETTE["theory"], lw=1.5, ls="--", label=r"suppression: $\log(1/M_1)$")]
