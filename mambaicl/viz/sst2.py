"""Chapter 6 figures: the SST-2 tables as bars with error bars, the alpha sweep, the filter's margin curve.

Each function draws into axes it is given. Colours come from :data:`mambaicl.viz.style.PALETTE`
(a run takes its model kind's colour; several runs of one kind get lighter shades of it), the
paper's numbers are yellow diamonds (``PALETTE["paper"]``), the encoder's ceiling a black dashed
line (``PALETTE["oracle"]``); every colour has a legend entry.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np
from matplotlib.colors import to_rgb
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .style import LABELS, PALETTE

__all__ = ["run_colors", "plot_table_bars", "plot_alpha_sweep", "plot_margin_curve", "margin_figure", "regimes_figure",
           "table_figure", "alpha_sweep_figure"]


def run_colors(runs: Sequence) -> Dict[str, tuple]:
    """``{run name: colour}``: the kind's palette colour; the k-th run of a kind is mixed ``0.2 k`` with white."""
    seen: Dict[str, int] = {}
    out = {}
    for r in runs:
        k = seen.get(r.kind, 0)
        seen[r.kind] = k + 1
        base = np.array(to_rgb(PALETTE[r.kind]))
        out[r.name] = tuple(base + (1 - base) * min(0.2 * k, 0.8))
    return out


def _label(run) -> str:
    return run.name if run.name not in LABELS else LABELS[run.name]


def plot_table_bars(ax, table, res: dict, alpha: float, title: str = "", ylim: Optional[tuple] = None) -> None:
    """One table at test fraction ``alpha``: per placement, a bar per run (mean, +-1 SE error bar), the
    paper's value as a diamond on the bar, the oracle ceiling as a dashed line over the group."""
    n = len(table.runs)
    width = 0.8 / n
    colors = run_colors(table.runs)
    for i, p in enumerate(table.placements):
        for j, r in enumerate(table.runs):
            x = i - 0.4 + width * (j + 0.5)
            ax.bar(x, res["acc"][r.name][(alpha, p)], width * 0.9, yerr=res["se"][r.name][(alpha, p)],
                   color=colors[r.name], capsize=3, ecolor="black")
            paper = table.paper.get(r.name, {}).get((alpha, p))
            if paper is not None:
                ax.plot(x, paper, "D", color=PALETTE["paper"], mec="black", ms=6, zorder=5)
        ax.plot([i - 0.42, i + 0.42], [res["oracle"][(alpha, p)]] * 2, ls="--", color=PALETTE["oracle"], lw=1.5)
    ax.set_xticks(range(len(table.placements)), table.placements)
    ax.set_xlabel("placement of the outlier examples")
    ax.set_ylabel("test accuracy (%)")
    if ylim:
        ax.set_ylim(*ylim)
    ax.set_title(title or f"{table.name}, $\\alpha$ = {alpha}")
    handles = [Patch(color=colors[r.name], label=_label(r)) for r in table.runs]
    handles.append(Line2D([], [], ls="--", color=PALETTE["oracle"], label=LABELS["oracle"]))
    if any(table.paper.get(r.name, {}).get((alpha, p)) is not None for r in table.runs for p in table.placements):
        handles.append(Line2D([], [], marker="D", ls="", color=PALETTE["paper"], mec="black", label="paper"))
    ax.legend(handles=handles, fontsize=8, loc="lower left")


def plot_alpha_sweep(axes, table, res: dict, runs: Optional[Sequence[str]] = None) -> None:
    """App. Tables 3-4 as curves: one panel per placement, accuracy against ``alpha`` per run (+-1 SE
    band), the paper's values dotted, the oracle ceiling dashed."""
    alphas = sorted(table.alphas)
    chosen = [r for r in table.runs if runs is None or r.name in runs]
    colors = run_colors(table.runs)
    for ax, p in zip(axes, table.placements):
        for r in chosen:
            m = np.array([res["acc"][r.name][(a, p)] for a in alphas])
            se = np.array([res["se"][r.name][(a, p)] for a in alphas])
            ax.plot(alphas, m, marker="o", ms=4, color=colors[r.name], label=_label(r))
            ax.fill_between(alphas, m - se, m + se, color=colors[r.name], alpha=0.25, lw=0)
            paper = [table.paper.get(r.name, {}).get((a, p)) for a in alphas]
            if all(v is not None for v in paper):
                ax.plot(alphas, paper, ls=":", marker="D", ms=4, color=colors[r.name], mfc=PALETTE["paper"],
                        mec="black", label=f"{_label(r)}, paper")
        ax.plot(alphas, [res["oracle"][(a, p)] for a in alphas], ls="--", color=PALETTE["oracle"], label=LABELS["oracle"])
        ax.set_title(f"placement {p}")
        ax.set_xlabel(r"test outlier fraction $\alpha$")
        ax.set_xticks(alphas)
    axes[0].set_ylabel("test accuracy (%)")
    axes[0].legend(fontsize=7, loc="lower left")


def plot_margin_curve(ax, curve: Sequence[dict]) -> None:
    """The filter's trade-off: probe accuracy and oracle ceiling (%) against the fraction of sentences kept."""
    keep = [100 * r["keep"] for r in curve]
    ax.plot(keep, [r["probe_scored"] for r in curve], marker="o", color=PALETTE["clean"],
            label="probe, held-out training rows")
    ax.plot(keep, [r["probe_reserved"] for r in curve], marker="s", color=PALETTE["same"],
            label="probe, set-aside full sentences (test pool)")
    ax.plot(keep, [r["probe_dev"] for r in curve], marker="^", color=PALETTE["other"], label="probe, dev sentences")
    ax.plot(keep, [r["oracle_balanced"] for r in curve], ls="--", color=PALETTE["oracle"],
            label=r"oracle, $\alpha$ = 0.75, 6 outliers per prompt")
    ax.plot(keep, [r["oracle_binomial"] for r in curve], ls=":", color=PALETTE["oracle"],
            label=r"oracle, $\alpha$ = 0.75, Binomial(8, 0.75) outliers")
    ax.axhline(95, color=PALETTE["theory"], lw=1, label="95% target")
    ax.invert_xaxis()
    ax.set_xlabel("sentences kept, by probe margin (%)")
    ax.set_ylabel("accuracy (%)")
    ax.legend(fontsize=7, loc="lower left")


# ---------------------------------------------------------------- Chapter 9's figures, assembled


def margin_figure(curve: Sequence[dict]):
    """The filter's margin curve (:func:`plot_margin_curve`) in a figure of its own."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    plot_margin_curve(ax, curve)
    fig.tight_layout()
    return fig


def regimes_figure(table, confident: dict, held_out: dict, alpha: float):
    """One table at ``alpha`` in the confident (left) and held-out (right) regimes (:func:`plot_table_bars`)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    plot_table_bars(axes[0], table, confident, alpha, title="confident regime", ylim=(40, 101))
    plot_table_bars(axes[1], table, held_out, alpha, title="held-out regime", ylim=(40, 101))
    fig.tight_layout()
    return fig


def table_figure(table, res: dict, alpha: float, title: str = ""):
    """One table at ``alpha`` (:func:`plot_table_bars`) in a figure of its own."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    plot_table_bars(ax, table, res, alpha, title=title, ylim=(40, 101))
    fig.tight_layout()
    return fig


def alpha_sweep_figure(table, res: dict):
    """The α sweep (:func:`plot_alpha_sweep`), one panel per placement."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8), sharey=True)
    plot_alpha_sweep(axes, table, res)
    fig.tight_layout()
    return fig
