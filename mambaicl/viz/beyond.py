"""Figures of Chapter 7 ("beyond the paper"): phase diagrams, gate families, multi-class and regression curves.

Every function draws into axes it is given, labels both axes, takes its colours from
:data:`mambaicl.viz.style.PALETTE` and adds a legend entry for every colour and line style it uses.
Gate families share colours by kind of gate (see :data:`FAMILY_STYLE`): solid lines are gates that
depend on the token itself, dashed / dotted lines gates set only by later tokens or by position.
"""
from __future__ import annotations

import math

import numpy as np
from matplotlib.lines import Line2D

from .figures import integer_ticks
from .style import LABELS, PALETTE

__all__ = ["FAMILY_STYLE", "FAMILY_LABELS", "MODEL_KEYS", "plot_phase_diagram", "plot_boundary_vs_ratio", "plot_boundary_vs_length",
           "plot_family_errors", "plot_family_gates", "plot_multiclass", "plot_regression_curve"]

#: family -> (palette key, line style, marker, legend label)
FAMILY_STYLE = {
    "mamba": ("mamba", "-", "o", "Mamba (Eq. 3)"),
    "mamba2": ("mamba_merged", "-", "s", "Mamba-2 (with $\\Delta_i$ on the input)"),
    "mamba2_app12": ("mamba_merged", "--", "s", "Mamba-2 as in App. 12"),
    "gated_retention": ("softmax", "--", "^", "gated retention"),
    "retnet": ("oracle", ":", "v", "RetNet (fixed $\\gamma$)"),
    "gla": ("mamba1", "--", "D", "GLA (recurrence)"),
    "gla_app12": ("mamba1", "-", "D", "GLA as in App. 12 (own key gate)"),
    "none": ("linear", "-", "x", "no gate (linear Transformer)"),
}
FAMILY_LABELS = {family: style[3] for family, style in FAMILY_STYLE.items()}
#: result keys of the regression experiment -> (palette key, line style, label)
MODEL_KEYS = {
    "one_layer/mamba": ("mamba", "-", "Mamba, 1 layer"),
    "one_layer/linear": ("linear", "-", "linear Transformer, 1 layer"),
    "deep/mamba": ("mamba", "--", "Mamba, 3 layers"),
    "deep/linear": ("linear", "--", "linear Transformer, 3 layers"),
    "mamba": ("mamba", "-", LABELS["mamba"]),
    "mamba_merged": ("mamba_merged", "-", LABELS["mamba_merged"]),
    "linear": ("linear", "-", LABELS["linear"]),
    "least_squares": ("oracle", ":", "least squares on the clean examples"),
    "predict_zero": ("other", "-.", "predict 0"),
}


def _cells(result) -> list:
    """``(ratio, j, k)`` of every (p_a, l_ts) cell, sorted by the ratio (then p_a)."""
    cells = [(result.ratio[j][k], j, k) for j in range(len(result.p_as)) for k in range(len(result.l_tss))]
    return sorted(cells)


def plot_phase_diagram(ax, result, kind: str, *, title: str | None = None, legend: bool = True):
    """Test error over (cell, alpha) for one model; cells sorted by ``r = p_a l_tr / l_ts``.

    Draws both predicted boundaries (Theorem 2(c): ``min(1, r)``; Theorem 4(c): ``1/2``) and the measured
    one (``alpha*``, mean over seeds with +-1 SE; open markers where a seed never reached the level).
    Returns the mesh (for a colour bar).
    """
    cells = _cells(result)
    alphas = np.asarray(result.alphas, dtype=float)
    Z = np.array([[result.errors[kind][j][k][i] for (_, j, k) in cells] for i in range(len(alphas))])
    x_edges = np.arange(len(cells) + 1) - 0.5
    mids = (alphas[1:] + alphas[:-1]) / 2
    y_edges = np.concatenate([[alphas[0] - (mids[0] - alphas[0])], mids, [alphas[-1] + (alphas[-1] - mids[-1])]])
    mesh = ax.pcolormesh(x_edges, y_edges, Z, cmap="Greys", vmin=0.0, vmax=1.0, shading="flat")
    for c, (r, j, k) in enumerate(cells):
        ax.plot([c - 0.5, c + 0.5], [min(1.0, r)] * 2, color=PALETTE["theory"], lw=2.2, solid_capstyle="butt")
        b = result.boundary[kind][j][k]
        ax.errorbar(c, b["mean"], yerr=b["se"], color=PALETTE[kind], marker="o" if not any(b["censored"]) else "^",
                    ms=4, mfc="white" if any(b["censored"]) else PALETTE[kind], lw=1)
    ax.axhline(result.predicted_linear, color=PALETTE["theory"], ls="--", lw=1.6)
    labels = [f"{r:.2f}" for (r, _, _) in cells]
    ax.set_xticks(range(len(cells)))
    ax.set_xticklabels(labels, rotation=90, fontsize=6)
    ax.set_xlim(-0.5, len(cells) - 0.5)
    ax.set_ylim(y_edges[0], min(1.0, y_edges[-1]))
    ax.set_xlabel("$r = p_a l_{tr} / l_{ts}$ (one column per $(p_a, l_{ts})$)")
    ax.set_ylabel(r"test outlier fraction $\alpha$")
    ax.set_title(title or LABELS.get(kind, kind))
    ax.grid(False)
    if legend:
        ax.legend(handles=[
            Line2D([], [], color=PALETTE["theory"], lw=2.2, label="Thm 2(c): $\\min(1, r)$"),
            Line2D([], [], color=PALETTE["theory"], lw=1.6, ls="--", label="Thm 4(c): $1/2$"),
            Line2D([], [], color=PALETTE[kind], marker="o", lw=0, label=f"measured $\\alpha^*$ (error = {result.level:g})"),
            Line2D([], [], color=PALETTE[kind], marker="^", mfc="white", lw=0, label="a seed never reached it"),
        ], loc="lower right", fontsize=6, frameon=True)
    return mesh


def plot_boundary_vs_ratio(ax, result, models=None):
    """Measured ``alpha*`` (mean +- SE over seeds) against ``r`` for each model, with both predictions."""
    models = models or list(result.errors)
    r_all = sorted({r for row in result.ratio for r in row})
    grid = np.geomspace(min(r_all) * 0.9, max(r_all) * 1.1, 200)
    ax.plot(grid, np.minimum(1.0, grid), color=PALETTE["theory"], lw=2, label="Thm 2(c) (Mamba): $\\min(1, r)$")
    ax.axhline(result.predicted_linear, color=PALETTE["theory"], ls="--", lw=1.5, label="Thm 4(c) (linear): $1/2$")
    markers = ["o", "s", "^", "D", "v", "P"]
    offsets = np.linspace(-0.03, 0.03, len(models))
    for m_i, kind in enumerate(models):
        for j in range(len(result.p_as)):
            for k in range(len(result.l_tss)):
                b = result.boundary[kind][j][k]
                ax.errorbar(result.ratio[j][k] * (1 + offsets[m_i]), b["mean"], yerr=b["se"], color=PALETTE[kind],
                            marker=markers[k % len(markers)], ms=3.5, lw=0.8,
                            mfc="white" if any(b["censored"]) else PALETTE[kind])
    ax.set_xscale("log")
    ax.set_xlabel("$r = p_a l_{tr} / l_{ts}$")
    ax.set_ylabel(r"measured boundary $\alpha^*$")
    handles, _ = ax.get_legend_handles_labels()
    handles += [Line2D([], [], color=PALETTE[k], lw=0, marker="o", label=LABELS.get(k, k)) for k in models]
    handles += [Line2D([], [], color="grey", lw=0, marker=markers[k % len(markers)], label=f"$l_{{ts}} = {l}$")
                for k, l in enumerate(result.l_tss)]
    ax.legend(handles=handles, fontsize=6, loc="lower right", ncol=2, frameon=True)


def plot_family_errors(ax, result, families=None, dots_at: float = 0.8):
    """Figure 2 (rule A) for every gate family: error against alpha with a +-1 SE band over seeds, and one dot per
    seed at the ``alpha`` nearest ``dots_at`` (families side by side), so that a failing seed shows as itself."""
    alphas = np.asarray(result.alphas, dtype=float)
    fams = list(families or result.families)
    i_dot = int(np.argmin(np.abs(alphas - dots_at)))
    width = 0.6 * (float(np.min(np.diff(alphas))) if len(alphas) > 1 else 0.1)
    for j, fam in enumerate(fams):
        key, ls, marker, _ = FAMILY_STYLE[fam]
        mean, se = np.asarray(result.errors[fam]), np.asarray(result.errors_se[fam])
        ax.plot(alphas, mean, color=PALETTE[key], ls=ls, marker=marker, ms=4, label=FAMILY_LABELS[fam])
        ax.fill_between(alphas, mean - se, mean + se, color=PALETTE[key], alpha=0.15, lw=0)
        seeds = np.asarray([row[i_dot] for row in result.errors_per_seed[fam]], dtype=float)  # (S,)
        x = alphas[i_dot] + width * ((j + 0.5) / len(fams) - 0.5)
        ax.scatter(np.full(seeds.shape, x), seeds, s=8, color=PALETTE[key], marker=marker, alpha=0.6, lw=0, zorder=3)
    ax.axhline(0.5, color="black", lw=0.6)
    ax.set_xlabel(r"test outlier fraction $\alpha$ (rule A)")
    ax.set_ylabel("test error")
    ax.legend(fontsize=7, ncol=2)


def plot_family_gates(ax, result, family: str, *, legend: bool = False):
    """Median learned gate against the distance from the query, clean vs outlier examples (+-1 SE over seeds)."""
    prof = result.gate_profile[family]
    for cls in ("clean", "outlier"):
        arr = np.asarray(prof[cls], dtype=float)  # (S, l)
        dist = np.arange(1, arr.shape[1] + 1)
        m = np.nanmean(arr, axis=0)
        n = np.sum(np.isfinite(arr), axis=0)
        se = np.where(n > 1, np.nanstd(arr, axis=0, ddof=1) / np.sqrt(np.maximum(n, 1)), 0.0) if arr.shape[0] > 1 \
            else np.zeros_like(m)
        ax.plot(dist, m, color=PALETTE[cls], marker="o", ms=2.5, lw=1, label=f"{cls} example")
        ax.fill_between(dist, np.clip(m - se, 1e-12, None), m + se, color=PALETTE[cls], alpha=0.25, lw=0)
    ax.set_yscale("log")
    integer_ticks(ax, "x")
    ax.set_xlabel("distance from the query")
    ax.set_ylabel("median gate $G_{i,l+1}$")
    ax.set_title(FAMILY_LABELS[family], fontsize=8)
    if legend:
        ax.legend(fontsize=7)


def plot_multiclass(ax, result, C: int, models=None, independent: bool = True):
    """Multi-class error (a prompt counts as right only if every level is) against alpha, for ``C`` classes: the
    mean over seeds as a line and every seed as a dot (models side by side), so that a failing seed shows."""
    alphas = np.asarray(result.alphas, dtype=float)
    kinds = list(models or result.errors_all)
    width = 0.5 * (float(np.min(np.diff(alphas))) if len(alphas) > 1 else 0.1)
    for j, kind in enumerate(kinds):
        ax.plot(alphas, result.errors_all[kind][str(C)], color=PALETTE[kind], marker="o", ms=4,
                label=LABELS.get(kind, kind))
        ys = np.asarray(result.errors_all_per_seed[kind][str(C)], dtype=float)  # (S, len(alphas))
        xs = np.broadcast_to(alphas + width * ((j + 0.5) / len(kinds) - 0.5), ys.shape)
        ax.scatter(xs.ravel(), ys.ravel(), s=7, color=PALETTE[kind], alpha=0.5, lw=0, zorder=3)
        if independent:
            ax.plot(alphas, result.independent_prediction[kind][str(C)], color=PALETTE[kind], ls=":", lw=1)
    if independent:
        ax.plot([], [], color="grey", ls=":", label="$1 - \\prod_h (1 - e_h)$ (levels independent)")
    ax.set_xlabel(r"test outlier fraction $\alpha$ (rule A)")
    ax.set_ylabel("error (any level wrong)")
    H = int(round(math.log2(C)))
    ax.set_title(f"C = {C} classes (H = {H} level{'s' if H > 1 else ''})")
    ax.legend(fontsize=7)


def plot_regression_curve(ax, x, curves: dict, *, xlabel: str, ylabel: str, integer_x: bool = False,
                          ylim=None):
    """Mean +- SE curves keyed like :data:`MODEL_KEYS` (``curves[key]`` a list of ``{"mean", "se"}``)."""
    x = np.asarray(x, dtype=float)
    for key, pts in curves.items():
        colour, ls, label = MODEL_KEYS[key]
        mean = np.array([p["mean"] for p in pts], dtype=float)
        se = np.array([p["se"] for p in pts], dtype=float)
        ax.plot(x, mean, color=PALETTE[colour], ls=ls, marker="o", ms=3.5, label=label)
        ax.fill_between(x, mean - se, mean + se, color=PALETTE[colour], alpha=0.15, lw=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if integer_x:
        integer_ticks(ax, "x")
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.legend(fontsize=7)


def plot_boundary_vs_length(ax, result, models=None):
    """Measured ``alpha*`` against ``l_ts``: one marker per ``p_a`` (mean over seeds), a line through the mean over
    ``p_a``; with the limits of Theorems 2(d) and 4(d) (constants set to 1)."""
    models = models or list(result.errors)
    l = np.asarray(result.l_tss, dtype=float)
    ax.plot(l, result.predicted_mamba_d, color=PALETTE["theory"], lw=2, label="Thm 2(d): $1 - \\log M_1 / l_{ts}$")
    ax.plot(l, result.predicted_linear_d, color=PALETTE["theory"], lw=1.5, ls="--", label="Thm 4(d) (constants 1)")
    for kind in models:
        cells = np.array([[result.boundary[kind][j][k]["mean"] for k in range(len(l))] for j in range(len(result.p_as))])
        ax.plot(np.repeat(l[None, :], len(result.p_as), 0).ravel(), cells.ravel(), lw=0, marker=".", ms=4,
                color=PALETTE[kind], alpha=0.6)
        ax.plot(l, cells.mean(0), color=PALETTE[kind], marker="o", ms=4, label=f"{LABELS.get(kind, kind)} (mean over $p_a$)")
    ax.plot([], [], color="grey", lw=0, marker=".", label="one $p_a$ (mean over seeds)")
    ax.set_xticks(l)
    ax.set_xlabel("test prompt length $l_{ts}$")
    ax.set_ylabel(r"measured boundary $\alpha^*$")
    ax.legend(fontsize=6, loc="center right", frameon=True)
