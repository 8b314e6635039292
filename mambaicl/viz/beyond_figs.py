"""Chapter 10's figures, assembled: each function lays out the panels of one figure of the chapter from a stored
result and returns the figure (the chapter calls ``plt.show()``). The panels are drawn by :mod:`mambaicl.viz.beyond`."""
from __future__ import annotations

import matplotlib.pyplot as plt

from . import beyond as vb
from .style import PALETTE

__all__ = ["phase_figure", "boundary_figure", "gate_errors_figure", "gate_values_figure", "multiclass_figure",
           "regression_figure"]


def phase_figure(B):
    """The phase diagrams of the three models side by side, with one colour bar."""
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.4), sharey=True)
    for ax, kind in zip(axes, B.spec.models):
        mesh = vb.plot_phase_diagram(ax, B, kind)
    fig.colorbar(mesh, ax=axes, label="test error", fraction=0.02, pad=0.01)
    return fig


def boundary_figure(B):
    """The measured boundary against r (left) and against l_ts (right)."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.2))
    vb.plot_boundary_vs_ratio(ax1, B)
    vb.plot_boundary_vs_length(ax2, B)
    fig.tight_layout()
    return fig


def gate_errors_figure(G):
    """Figure 2 (rule A) for every gate family."""
    fig, ax = plt.subplots(figsize=(8, 4.6))
    vb.plot_family_errors(ax, G)
    fig.tight_layout()
    return fig


def gate_values_figure(G):
    """The learned gates of clean and outlier examples, one panel per family."""
    fig, axes = plt.subplots(2, 4, figsize=(14, 6.2), sharex=True)
    for ax, f in zip(axes.ravel(), G.families):
        vb.plot_family_gates(ax, G, f, legend=(f == "mamba"))
    fig.tight_layout()
    return fig


def multiclass_figure(MC):
    """The all-levels error against alpha for each number of classes."""
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=True)
    for ax, C in zip(axes, MC.classes):
        vb.plot_multiclass(ax, MC, C)
    fig.tight_layout()
    return fig


def regression_figure(R):
    """Linear regression against the prompt length and against alpha, and App. 14's squared error."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.0))
    vb.plot_regression_curve(axes[0], R.lengths, R.linreg_vs_length, xlabel="context examples $l$",
                             ylabel="squared error / $d$", integer_x=True)
    vb.plot_regression_curve(axes[1], R.alphas, R.linreg_vs_alpha, xlabel=r"test outlier fraction $\alpha$",
                             ylabel="squared error / $d$", ylim=(0, 1.5))
    vb.plot_regression_curve(axes[2], R.app14["alphas"], R.app14["squared"],
                             xlabel=r"test outlier fraction $\alpha$ (rule C)", ylabel="squared error $(F - z)^2$")
    axes[2].axhline(1.0, color=PALETTE["other"], ls="-.", lw=1, label="predict 0")
    axes[2].legend(fontsize=7)
    axes[0].set_title(f"linear regression, $\\alpha$ = {R.alpha_lengths:g}")
    axes[1].set_title(f"linear regression, $l$ = {R.l_alphas}")
    axes[2].set_title("App. 14: Figure 2's data, squared loss")
    fig.tight_layout()
    return fig
