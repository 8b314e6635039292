"""Figures of Chapter 3 (training dynamics, Lemmas 3-6, Theorems 1 and 3 as scaling laws).

Each function draws into the axes it is given, labels both axes, uses :data:`PALETTE` colours with a
legend entry for every colour, and shows a +-1 standard-error band (over seeds) wherever there are seeds.
Curves come from :class:`mambaicl.experiments.dynamics.DynamicsResult`: ``steps`` and a dict of
``(n_records, S)`` tensors.
"""
from __future__ import annotations

import math

import numpy as np
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator

from ..analysis.stats import mean_se
from .style import LABELS, PALETTE

__all__ = ["mean_band", "plot_loss_curves", "plot_attention_by_distance", "plot_gate_projections",
           "plot_gate_logits", "plot_scaling", "DIST_COLORS"]

#: colours of pattern pairs 0, 1, 2, 3 steps apart on the training cycle
DIST_COLORS = (PALETTE["same"], PALETTE["mamba1"], PALETTE["softmax"], PALETTE["other"])
_DIST_LABELS = ("same pattern (0 apart)", "training partners (1 apart)", "2 apart (never meet)", "3 apart (never meet)")


def _mean_se(Y) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``Y`` ``(n, S)``: :func:`mambaicl.analysis.stats.mean_se` over the seeds (SE 0 for one seed)."""
    rows = [mean_se(y) for y in np.asarray(Y, dtype=float)]  # (n,) of (mean, se)
    return np.array([m for m, _ in rows]), np.array([0.0 if math.isnan(se) else se for _, se in rows])


def mean_band(ax, x, Y, color: str, label: str, ls: str = "-", marker=None) -> None:
    """Mean over the columns (seeds) of ``Y`` ``(n, S)`` against ``x`` with a +-1 SE band."""
    m, se = _mean_se(Y)
    x = np.asarray(x, dtype=float)
    ax.plot(x, m, color=color, ls=ls, marker=marker, ms=3, label=label)
    ax.fill_between(x, m - se, m + se, color=color, alpha=0.2, lw=0)


def _symlog_steps(ax, steps) -> None:
    ax.set_xscale("symlog", linthresh=1)
    top = max(steps)
    ticks = [0, 1] + [10 ** k for k in range(1, 6) if 10 ** k <= top]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlabel("SGD iteration $t$ (symmetric log scale)")


def plot_loss_curves(ax, runs: dict, counts: dict | None = None, fraction: float = 0.5) -> None:
    """Population hinge loss against the iteration for each model (``runs[kind] = (steps, curves)``).

    With ``counts[kind]`` (per-seed iteration counts) the mean count is marked on each curve.
    """
    for kind, (steps, C) in runs.items():
        mean_band(ax, steps, C["loss"], PALETTE[kind], LABELS.get(kind, kind))
        if counts is not None:
            T = float(np.mean(counts[kind]))
            L0, Lend = float(C["loss"][0].mean()), float(C["loss"][-1].mean())
            ax.plot([T], [Lend + fraction * (L0 - Lend)], marker="v", ms=9, color=PALETTE[kind], ls="none",
                    markeredgecolor="black", label=f"{LABELS.get(kind, kind)}: count $T$ (mean)")
    _symlog_steps(ax, steps)
    ax.set_ylabel("population hinge loss (Def. 1 prompts)")


def plot_attention_by_distance(ax, steps, C: dict, title: str = "", key: str = "attn_dist",
                               ylabel: str = r"mean $(\mu_i, 0)\, W_B^\top W_C\, (\mu_j, 0)^\top$") -> None:
    """Lemma 3: mean ``(mu_i, 0) W (mu_j, 0)^T`` over pattern pairs ``k`` steps apart on the cycle; ``key``
    ``"attn_dist"`` for ``W = W_B^T W_C``, ``"WB_dist"`` for ``W = W_B``."""
    for k in range(4):
        if f"{key}{k}" in C:
            mean_band(ax, steps, C[f"{key}{k}"], DIST_COLORS[k], _DIST_LABELS[k])
    ax.axhline(0, color="black", lw=0.5)
    _symlog_steps(ax, steps)
    ax.set_ylabel(ylabel)
    ax.set_title(title)


def plot_gate_projections(ax, steps, C: dict, window: float, t_max: int = 40) -> None:
    """Lemma 4: ``v*^T w`` and ``(mu_j, 0) w`` over the first ``t_max`` iterations; the early window shaded."""
    keep = [i for i, t in enumerate(steps) if t <= t_max]
    x = [steps[i] for i in keep]
    mean_band(ax, x, C["w_v"][keep], PALETTE["outlier"], r"$v_s^{*\top} w$ (mean over $s$)", marker="o")
    mean_band(ax, x, C["w_mu"][keep], PALETTE["clean"], r"$(\mu_j, 0)\, w$ (mean over $j$)", marker="o")
    ax.axvspan(0, window, color=PALETTE["theory"], alpha=0.15, lw=0, label="early window (Lemma 4)")
    ax.set_xlabel("SGD iteration $t$")
    ax.set_ylabel("projection of the gate vector $w$")


def plot_gate_logits(ax, steps, C: dict, M1: int) -> None:
    """Lemmas 4-5: mean ``w^T p_i`` over clean and over outlier context examples, with ``-log M1``."""
    mean_band(ax, steps, C["wp_clean"], PALETTE["clean"], "clean examples")
    mean_band(ax, steps, C["wp_outlier"], PALETTE["outlier"], "outlier examples")
    ax.axhline(-math.log(M1), color=PALETTE["theory"], ls="--", label=r"$-\log M_1$ (Lemma 5)")
    _symlog_steps(ax, steps)
    ax.set_ylabel(r"mean gate logit $w^\top p_i$")


def plot_scaling(ax, factor_label: str, data: dict, exponents: dict, predicted: dict, log_x: bool = True) -> None:
    """Iteration count against one factor, log-log, for each model: means +-1 SE over seeds, the fitted
    power law (solid) and the predicted exponent through the same geometric mean (dashed).

    Args:
        data: ``{kind: (values, T)}`` with ``T`` a list over values of per-seed counts.
        exponents: ``{kind: fitted slope}``; predicted: ``{kind: predicted slope}``.
    """
    for kind, (xs, T) in data.items():
        xs = np.asarray(xs, dtype=float)
        T = np.asarray(T, dtype=float)  # (n_values, S)
        m, se = _mean_se(T)
        ax.errorbar(xs, m, yerr=se, color=PALETTE[kind], marker="o", ms=4, ls="none", capsize=2,
                    label=f"{LABELS.get(kind, kind)} (mean $\\pm$ SE)")
        lx, ly = np.log(xs), np.log(T).mean(axis=1)
        cx, cy = lx.mean(), ly.mean()
        grid = np.linspace(lx.min(), lx.max(), 20)
        if math.isfinite(exponents[kind]):
            ax.plot(np.exp(grid), np.exp(cy + exponents[kind] * (grid - cx)), color=PALETTE[kind], lw=1)
        ax.plot(np.exp(grid), np.exp(cy + predicted[kind] * (grid - cx)), color=PALETTE[kind], lw=1, ls="--")
    ax.plot([], [], color=PALETTE["other"], lw=1, label="fitted exponent")
    ax.plot([], [], color=PALETTE["other"], lw=1, ls="--", label="predicted exponent")
    if log_x:
        ax.set_xscale("log")
    ax.set_yscale("log")
    values = sorted({float(v) for xs, _ in data.values() for v in xs})
    ax.xaxis.set_major_locator(FixedLocator(values))  # ticks at the swept values (integers stay integers)
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([f"{v:g}" for v in values])
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # 10, 20, 50 rather than 2 x 10^1
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(factor_label)
    ax.set_ylabel("iteration count $T$")
