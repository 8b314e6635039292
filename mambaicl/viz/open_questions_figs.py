"""Chapter 12's figures, assembled (figure size, panels, legend, layout) around the plotting functions of
:mod:`mambaicl.viz.open_questions`, so that the chapter's figure cells hold one call each.

Each function draws a new figure and returns it; the chapter shows it with ``plt.show()``.
"""
from __future__ import annotations

import matplotlib.pyplot as plt

from ..analysis import information
from . import open_questions as vo

__all__ = ["bound_figure", "seed_tail_figure", "gate_after_zero_figure"]


def bound_figure(alphas, sweep: dict, l_ts: int, M1: int):
    """Five panels (all tasks and each task group): the per-seed errors of ``sweep`` (``[group][seed][alpha]``)
    against the group's reader bound at each alpha (App. 9's cycle)."""
    fig, axes = plt.subplots(1, 5, figsize=(16, 3.8), sharey=True)
    bound = lambda g, a: (information.information_bound_all_tasks(a, l_ts, M1) if g == "all"  # noqa: E731
                          else information.information_bound(a, l_ts, g))
    handles = vo.plot_bound_by_group(axes, alphas, sweep, bound)
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, bbox_to_anchor=(0.5, -0.03))
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def seed_tail_figure(seeds, predictor, error, failing, *, level: float):
    """Each seed's error against its predictor, the ``failing`` seeds marked, the failure ``level`` dashed."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    fails = [s in failing for s in seeds]
    ax.legend(handles=vo.plot_seed_tail(ax, predictor, error, fails, level=level), fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def gate_after_zero_figure(steps, val_hinge, log_ratio, zero_step, *, M1: int):
    """Two panels along training (validation hinge; layer 1's log gate ratio), one line per seed."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    handles = vo.plot_gate_after_zero(axes, steps, val_hinge, log_ratio, zero_step, M1=M1)
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=8, bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig
