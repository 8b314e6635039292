"""Figure functions shared by the chapters (each draws into axes it is given and labels everything).

Colours come from :data:`mambaicl.viz.style.PALETTE`; every colour used has a legend entry;
integer axes get integer ticks.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from .style import LABELS, PALETTE

__all__ = ["integer_ticks", "plot_attention_sums", "plot_gate_bars", "plot_rank_decay", "plot_mean_band",
           "gate_legend"]


def integer_ticks(ax, axis: str = "x") -> None:
    """Only integer tick labels on ``axis`` (``"x"``, ``"y"`` or ``"both"``)."""
    if axis in ("x", "both"):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if axis in ("y", "both"):
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def gate_legend(ax, loc: str = "best") -> None:
    """The legend of a gate bar chart: clean (green) and outlier (red) examples."""
    ax.legend(handles=[Patch(color=PALETTE["clean"], label="clean example"),
                       Patch(color=PALETTE["outlier"], label="outlier example")], loc=loc, fontsize=8)


def plot_attention_sums(ax, steps: Sequence[int], same: Sequence[float], other: Sequence[float], *,
                        same_se=None, other_se=None, title: str = "", log_x: bool = False) -> None:
    """Figure 3 / App. Fig. 4: the two Corollary 1 sums against the training step (bands: +-1 SE)."""
    steps = np.asarray(steps)
    for vals, se, key, label in ((same, same_se, "same", "same pattern as the query ($\\mathcal{N}_1$)"),
                                 (other, other_se, "other", "other patterns")):
        vals = np.asarray(vals, dtype=float)
        ax.plot(steps, vals, color=PALETTE[key], marker="o", ms=3, label=label)
        if se is not None:
            se = np.asarray(se, dtype=float)
            ax.fill_between(steps, vals - se, vals + se, color=PALETTE[key], alpha=0.25, lw=0)
    ax.axhline(0, color="black", lw=0.5)
    if log_x:
        ax.set_xscale("symlog", linthresh=1)
    ax.set_xlabel("training step")
    ax.set_ylabel("sum of attention scores")
    ax.set_title(title)


def plot_gate_bars(ax, G_row: torch.Tensor, outlier_row: torch.Tensor, title: str = "", legend: bool = True) -> None:
    """The gate figure / App. Fig. 5: ``G_{i,l+1}`` of each context example of one prompt.

    Red: examples with an outlier; green: clean. The x axis is the distance from the query.
    """
    l = outlier_row.shape[0]
    dist = np.arange(l, 0, -1)
    ax.bar(dist, np.asarray(G_row[:l].detach().cpu(), dtype=float),
           color=[PALETTE["outlier"] if o else PALETTE["clean"] for o in outlier_row.tolist()])
    ax.set_yscale("log")
    ax.invert_xaxis()
    integer_ticks(ax, "x")
    ax.set_xlabel("distance from the query (1 = adjacent)")
    ax.set_ylabel("gate $G_{i,l+1}$")
    ax.set_title(title)
    if legend:
        gate_legend(ax)


def plot_rank_decay(ax, rank: Sequence[float], label: str, color: str | None = None, se=None) -> None:
    """Median ``G_{h(j)}`` against ``j`` with the ``2^{-(j-1)}`` trend of Eq. (8) through ``j = 1`` (dashed)."""
    j = np.arange(1, len(rank) + 1)
    rank = np.asarray(rank, dtype=float)
    color = color or PALETTE["mamba"]
    ax.semilogy(j, rank, marker="o", label=label, color=color)
    if se is not None:
        se = np.asarray(se, dtype=float)
        ax.fill_between(j, np.clip(rank - se, 1e-12, None), rank + se, color=color, alpha=0.25, lw=0)
    ax.semilogy(j, rank[0] * 2.0 ** (1 - j), ls="--", color=PALETTE["theory"], lw=1,
                label="$2^{-(j-1)}$ trend of Eq. (8)")
    integer_ticks(ax, "x")
    ax.set_xlabel("$j$ ($j$-th closest clean example)")
    ax.set_ylabel("median $G_{h(j),l+1}$")


def plot_mean_band(ax, x, mean, se, key: str, label: str | None = None, marker: str = "o", ls: str = "-") -> None:
    """A curve of means with a +-1 standard-error band, in the palette colour of ``key``."""
    x, mean, se = (np.asarray(v, dtype=float) for v in (x, mean, se))
    ax.plot(x, mean, color=PALETTE[key], marker=marker, ms=4, ls=ls, label=label or LABELS.get(key, key))
    ax.fill_between(x, mean - se, mean + se, color=PALETTE[key], alpha=0.2, lw=0)
