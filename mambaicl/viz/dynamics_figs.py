"""Chapter 3's figures, assembled from a dynamics result and its checks (read, never trained, here).

Each function draws one numbered figure of the chapter with the panels of :mod:`mambaicl.viz.dynamics` and returns
the figure. The results are read by their fields (``curves``, ``counts``, ``exponents``, ``spec``, ...), so this module
imports neither the experiments nor the engine; ``factor_labels`` are the axis labels of the five factors
(``dynamics.FACTOR_LABELS``).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..analysis.theory import FACTORS
from .dynamics import plot_attention_by_distance, plot_gate_logits, plot_gate_projections, plot_loss_curves, plot_scaling
from .figures import integer_ticks
from .style import LABELS, PALETTE

__all__ = ["loss_figure", "lemma3_figure", "gate_figure", "early_figure", "start_figure", "scaling_figure",
           "beta_figure"]


def loss_figure(res):
    """The population hinge loss along Algorithm 1 at the base settings, with each model's count."""
    P = res.spec
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    plot_loss_curves(ax, res.curves, counts=res.base_T(), fraction=P.fraction)
    ax.legend(fontsize=8)
    ax.set_title(rf"Mamba at $\eta$ = {P.lr['mamba']}, linear Transformer at $\eta$ = {P.lr['linear']}")
    fig.tight_layout()
    return fig


def lemma3_figure(res):
    """Lemma 3 along training: W_B of Mamba, and the products W_B^T W_C of both models, by pattern distance."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.6))
    plot_attention_by_distance(axes[0], *res.curves["mamba"], title=r"Mamba, $W_B$", key="WB_dist",
                               ylabel=r"mean $(\mu_i, 0)\, W_B\, (\mu_j, 0)^\top$")
    plot_attention_by_distance(axes[1], *res.curves["mamba"], title=r"Mamba, $W_B^\top W_C$")
    plot_attention_by_distance(axes[2], *res.curves["linear"], title=r"linear Transformer, $W_B^\top W_C$")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def _gate_panels(steps, C, window: float, M1: int, titles: tuple, t_max=None):
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    if t_max is None:
        plot_gate_projections(axes[0], steps, C, window)
    else:
        plot_gate_projections(axes[0], steps, C, window, t_max=t_max)
    integer_ticks(axes[0], "x")
    axes[0].set_title(titles[0])
    plot_gate_logits(axes[1], steps, C, M1)
    axes[1].set_title(titles[1])
    for ax in axes:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def gate_figure(res):
    """Lemmas 4-5 at the base settings: the projections of w over the first steps, and the gate logits."""
    steps, C = res.curves["mamba"]
    return _gate_panels(steps, C, res.window()[1], res.spec.data.M1,
                        ("Lemma 4: early phase", "Lemmas 4-5: gate logits"))


def early_figure(checks):
    """Mamba at the checks' small step size over Lemma 4's whole horizon: projections and gate logits."""
    st, h = checks.early_base()
    steps, C = checks.curves[st]
    return _gate_panels(steps, C, h, st.data.M1, (rf"Lemma 4 over its horizon ($\eta$ = {checks.spec.early_lr})",
                                                  "gate logits inside the window"), t_max=int(steps[-1]))


def start_figure(res):
    """Initial and final population hinge loss of every swept setting, one panel per factor."""
    fig, axes = plt.subplots(1, 5, figsize=(14, 3.0), sharey=True)
    for ax, factor in zip(axes, FACTORS):
        for kind in res.counts:
            c = res.counts[kind][factor]
            x = np.arange(len(c["values"]))
            ax.plot(x, np.mean(c["loss_initial"], 1), "o-", color=PALETTE[kind], label=f"{LABELS[kind]}: $L(0)$")
            ax.plot(x, np.mean(c["loss_end"], 1), "o--", mfc="white", color=PALETTE[kind],
                    label=f"{LABELS[kind]}: $L(T_{{end}})$")
        vals = res.counts["linear"][factor]["values"]
        ax.set_xticks(x)
        ax.set_xticklabels([f"{v:g}" for v in vals] if factor != "lr" else [f"{v / vals[0]:g}" for v in vals])
        ax.set_xlabel(res.factor_labels[factor] if factor != "lr" else r"$\eta$ / smallest $\eta$ of the grid")
    axes[0].set_ylabel("population hinge loss")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def scaling_figure(res, predicted: dict):
    """The iteration count against each factor, log-log, with the fitted and the predicted (``predicted[kind]
    [factor]``) power laws."""
    fig, axes = plt.subplots(1, 5, figsize=(15, 3.4))
    for ax, factor in zip(axes, FACTORS):
        series = {kind: (res.counts[kind][factor]["values"], res.counts[kind][factor]["T"]) for kind in res.counts}
        plot_scaling(ax, res.factor_labels[factor], series,
                     {kind: res.exponents[kind][factor]["slope"] for kind in res.counts},
                     {kind: predicted[kind][factor] for kind in res.counts})
        if factor == "lr":
            ax.tick_params(axis="x", labelrotation=45)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=4, fontsize=8)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def beta_figure(res, checks):
    """The count against β with the outlier norm fixed (``res``) and scaled with β (``checks``)."""
    sc, kinds = checks.scaled, list(res.counts)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), sharey=True)
    for ax, (title, series, slopes) in zip(axes, (
            ("outlier norm 3", {k: (res.counts[k]["beta"]["values"], res.counts[k]["beta"]["T"]) for k in kinds},
             {k: res.exponents[k]["beta"]["slope"] for k in kinds}),
            (r"outlier norm $= \beta$", {k: (sc[k]["values"], sc[k]["T"]) for k in kinds},
             {k: sc[k]["exponent"]["slope"] for k in kinds}))):
        plot_scaling(ax, r"$\beta$", series, slopes, {k: -2.0 for k in kinds})
        ax.set_title(title)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig
