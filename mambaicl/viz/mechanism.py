"""Figures and printed tables of the mechanism chapter (Corollaries 1-2, Fig. 3, the gate figure, App. Figs. 4-5).

Every function draws from a :class:`mambaicl.experiments.mechanism.MechanismResult` (per-seed
values, means and standard errors over seeds) into axes it is given; colours come from
:data:`mambaicl.viz.style.PALETTE`, every colour has a legend entry, integer axes get integer ticks.

==========================  ===========================================================
function                    draws / returns
==========================  ===========================================================
``plot_sums``               Corollary 1's two sums along training, mean +- 1 SE (Fig. 3, App. Fig. 4)
``plot_gate_example``       the gates of one test prompt, clean / outlier (gate figure, App. Fig. 5)
``plot_rank``               median ``G_{h(j)}`` against ``j``, mean +- 1 SE, with ``2^{-(j-1)}``
``plot_group_errors``       test error per task group, several models side by side
``plot_placements``         test error for outliers far from (FQ), random (R), close to (CQ) the query
``typical_prompt``          index of a test prompt with about ``alpha l`` outliers
``mean_se_text``            ``"0.072 ± 0.004"`` from per-seed values
``layer_table``             Corollaries 1-2 per layer as printable text
==========================  ===========================================================
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from ..analysis.corollaries import query_terms
from ..analysis.stats import error_mean_se
from ..analysis.text import GROUP_ORDER, mean_se_text, median_range_text  # noqa: F401  (re-exported)
from ..data.vocabulary import PLACEMENTS_FAR_TO_CLOSE
from .figures import plot_attention_sums, plot_gate_bars, plot_rank_decay
from .style import PALETTE

__all__ = ["plot_sums", "plot_gate_example", "plot_rank", "plot_group_errors", "plot_placements",
           "typical_prompt", "mean_se_text", "layer_table", "GROUP_ORDER", "PLACEMENT_TICKS"]

#: tick labels of the outlier placements (§4.2: the letters of :mod:`mambaicl.data.vocabulary`; placement R is
#: "random position", distinct from rule C's random labels)
PLACEMENT_TICKS = {"FQ": "FQ (far from query)", "R": "R (random position)", "CQ": "CQ (close to query)"}


def typical_prompt(outlier: torch.Tensor, alpha: float) -> int:
    """Index of the first test prompt whose number of outlier examples is closest to ``alpha l``."""
    count = outlier.sum(1).to(torch.float64)  # (batch,)
    return int(torch.argmin((count - alpha * outlier.shape[1]).abs()))


def plot_sums(ax, result, layer: int, title: str = "") -> None:
    """Corollary 1's sums of ``layer`` against the training step (log scale), mean +- 1 SE over seeds."""
    steps, same, same_se = result.sum_curve(layer, "same")
    _, other, other_se = result.sum_curve(layer, "other")
    plot_attention_sums(ax, steps, same, other, same_se=same_se, other_se=other_se, title=title, log_x=True)
    ax.set_xlim(0, 1.15 * max(steps))  # symlog: linear below 1, logarithmic above; no negative steps
    ax.set_xlabel("training step (log scale above 1; 0 = initialisation)")


def plot_gate_example(ax, result, layer: int, index: int, title: str = "", seed_index: int = 0) -> None:
    """The gates ``G_{i,l+1}`` of every context example of test prompt ``index`` (first seed's prompts)."""
    pr = result.prompts
    G = query_terms(result.runs[seed_index].model, pr.P[index : index + 1])[layer][1]
    plot_gate_bars(ax, G[0], pr.outlier[index], title=title)
    l = pr.outlier.shape[1]
    ax.set_xlim(l + 0.6, 0.4)  # distances l ... 1, the query's side on the right


def plot_rank(ax, result, layer: int, label: str, color: str | None = None) -> None:
    """Median ``G_{h(j),l+1}`` against ``j`` (mean +- 1 SE over seeds) with the ``2^{-(j-1)}`` trend."""
    rank = np.array(result.layers[layer]["rank"], dtype=float)  # (seeds, J)
    mean = np.nanmean(rank, axis=0)
    se = np.nanstd(rank, axis=0, ddof=1) / math.sqrt(rank.shape[0]) if rank.shape[0] > 1 else None
    plot_rank_decay(ax, mean, label, color=color, se=se)
    ax.legend(fontsize=8)


def _bar_style(styles: dict | None, label: str) -> dict:
    """Bar keyword arguments for ``label``: ``styles[label]`` is a palette key, or ``(key, hatch)``
    (a hatched bar in the key's colour: variants of one model keep the model's colour)."""
    st = (styles or {}).get(label, "mamba")
    key, hatch = (st, None) if isinstance(st, str) else st
    if hatch is None:
        return {"color": PALETTE[key]}
    return {"facecolor": "white", "edgecolor": PALETTE[key], "hatch": hatch, "linewidth": 1.0}


def plot_group_errors(ax, results: dict, keys: dict | None = None) -> None:
    """Test error per task group (bars: mean over seeds, error bars: +-1 SE), one bar style per model.

    ``results`` maps a legend label to a :class:`MechanismResult`; ``keys`` maps the same labels
    to a palette key or ``(palette key, hatch)`` (default ``"mamba"``).
    """
    labels = list(results)
    width = 0.8 / len(labels)
    x = np.arange(len(GROUP_ORDER))
    for k, label in enumerate(labels):
        res = results[label]
        stats = [res.group_error(g) for g in GROUP_ORDER]
        ax.bar(x + (k - (len(labels) - 1) / 2) * width, [m for m, _ in stats], width,
               yerr=[se for _, se in stats], capsize=3, label=label, **_bar_style(keys, label))
    ax.set_xticks(x, [f"{g}\n({_group_size(g)} tasks)" for g in GROUP_ORDER])
    ax.set_xlabel("test task group (relation to the training tasks)")
    ax.set_ylabel("test error")
    ax.legend(fontsize=8)


def _group_size(group: str, M1: int = 6) -> int:
    from ..data import all_tasks, task_groups

    return task_groups(all_tasks(M1), M1).count(group)


def plot_placements(ax, results: dict, keys: dict | None = None) -> None:
    """Test error with the outliers far from (FQ), random (R) and close to (CQ) the query, mean +- 1 SE."""
    labels = list(results)
    width = 0.8 / len(labels)
    order = PLACEMENTS_FAR_TO_CLOSE
    x = np.arange(len(order))
    for k, label in enumerate(labels):
        res = results[label]
        n = res.config["n_placement"]
        stats = [error_mean_se(res.placement[p]["error"], n) for p in order]
        ax.bar(x + (k - (len(labels) - 1) / 2) * width, [m for m, _ in stats], width,
               yerr=[se for _, se in stats], capsize=3, label=label, **_bar_style(keys, label))
    ax.set_xticks(x, [PLACEMENT_TICKS[p] for p in order])
    ax.set_xlabel("placement of the outlier examples")
    ax.set_ylabel("test error")
    ax.legend(fontsize=8)


def layer_table(result, digits: int = 2) -> str:
    """Corollaries 1-2 per layer (mean ± SE over seeds) as a text table, layers counted from 1."""
    rows = [f"{'layer':>5}  {'same-pattern sum':>18}  {'other-pattern sum':>18}  {'|other|/same':>14}  "
            f"{'gate outlier/clean':>20}  {'decay per clean example':>24}"]
    for i, L in enumerate(result.layers):
        cells = [mean_se_text(L["same"], digits, seeds=False), mean_se_text(L["other"], digits, seeds=False),
                 mean_se_text(result.per_seed(i, "other_over_same"), digits, seeds=False)]
        if "decay_factor" in L:
            cells += [mean_se_text(result.per_seed(i, "gate_ratio"), 1, seeds=False, fmt="e"),
                      mean_se_text(L["decay_factor"], digits, seeds=False)]
        else:
            cells += ["(no gate)", "(no gate)"]
        rows.append(f"{i + 1:>5}  {cells[0]:>18}  {cells[1]:>18}  {cells[2]:>14}  {cells[3]:>20}  {cells[4]:>24}")
    return "\n".join(rows)
