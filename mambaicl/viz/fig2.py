"""The figures of Chapter 4 (Figure 2 and its diagnosis). Each function draws into axes it is given.

=============================  ==================================================================
function                       draws
=============================  ==================================================================
``plot_figure2``               paper Figure 2: error against ``alpha``, one panel per labelling rule,
                               every model's mean over seeds with one dot per seed, Mamba's 18-task curve,
                               the paper's 0.01 line, Theorem 2(c)'s and 4(c)'s bounds
``plot_figure2_by_training_set`` Figure 2 once per training set (one row each: e.g. App. 9's cycle, T18,
                               all 30 tasks), every model's mean with one dot per seed, tested on all tasks
``plot_attention_matrices``    heat maps of ``(mu_i, 0) M (mu_j, 0)^T`` (1-based pattern numbers)
``plot_attention_by_distance`` mean pattern attention against the distance on the training cycle
``plot_group_errors``          error per task group, several models, +-1 SE error bars
``plot_eta_table``            validation hinge loss and test error against the step size
``plot_lengths``               error against the test prompt length (Theorem 4(d))
=============================  ==================================================================

Colours come from :data:`mambaicl.viz.style.PALETTE`; every colour and line style has a legend entry.
"""
from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D

from ..checks import ConfigError
from ..data.vocabulary import RULES
from .figures import integer_ticks, plot_mean_band
from .style import LABELS, PALETTE

__all__ = ["RULE_TITLES", "palette_key", "plot_figure2", "plot_figure2_by_training_set", "plot_attention_matrices", "plot_attention_by_distance",
           "plot_group_errors", "plot_eta_table", "plot_lengths"]

#: panel titles of Figure 2 (§4.1's labelling rules for the outlier examples)
RULE_TITLES = {"A": "(A) outlier labels flipped", "B": "(B) outlier labels set to +1", "C": "(C) outlier labels random"}
_PALETTE_KEY = {"mamba": "mamba", "mamba_merged": "mamba_merged", "linear_transformer": "linear", "linear": "linear"}


def palette_key(key: str) -> str:
    """The palette key of a results.json model key (``"linear_transformer"`` -> ``"linear"``)."""
    try:
        return _PALETTE_KEY[key]
    except KeyError:
        raise ConfigError(f"key must be a results.json model key, one of {sorted(_PALETTE_KEY)}; got {key!r}") from None


def _band(ax, x, mean, se, key, label, ls="-", marker="o"):
    mean, se = np.asarray(mean, dtype=float), np.asarray(se, dtype=float)
    plot_mean_band(ax, x, mean, np.minimum(se, mean), key, label=label, ls=ls, marker=marker)


def _seed_dots(ax, x, per_seed, key: str, offset: float) -> None:
    """One dot per seed at every ``x`` (``per_seed[s][i]``), shifted by ``offset`` so that models do not overlap."""
    ys = np.asarray(per_seed, dtype=float)  # (S, len(x))
    xs = np.broadcast_to(np.asarray(x, dtype=float) + offset, ys.shape)
    ax.scatter(xs.ravel(), ys.ravel(), s=9, color=PALETTE[key], alpha=0.55, lw=0, zorder=3)


def plot_figure2(axes, alphas, errors: dict, errors_per_seed: dict, *, claim: tuple | None = None,
                 rules=RULES, bound_mamba: float, bound_lt: float = 0.5, level: float = 0.01,
                 n_tasks: tuple = (30, 18), legend: bool = True) -> list:
    """Paper Figure 2 with seeds: test error against ``alpha`` for each rule (one axis each), one dot per seed.

    Args:
        errors: ``errors[key][rule]`` means over seeds (results.json keys): the lines.
        errors_per_seed: ``errors_per_seed[key][rule][s][i]``, seed ``s`` at ``alphas[i]``: the dots (every seed is
            drawn, so a seed that fails shows as a dot far above the others rather than widening a band).
        claim: ``(mean, per_seed)`` of Mamba on the claim tasks, ``mean[rule]`` lists over ``alphas`` and
            ``per_seed[rule][s][i]`` (dashed line, square dots).
        bound_mamba: Theorem 2(c)'s ``min(1, p_a l_tr / l_ts)``; bound_lt: Theorem 4(c)'s ``1/2``.
        level: the paper's "< 0.01" (a horizontal line).

    The y axis is linear below 1e-3 and logarithmic above (symlog), so that 0.01 and 0.9 are both legible.
    Returns the legend handles.
    """
    labels = {"mamba": f"Mamba, all {n_tasks[0]} tasks", "mamba_merged": LABELS["mamba_merged"] + f", all {n_tasks[0]}",
              "linear_transformer": LABELS["linear"] + f", all {n_tasks[0]}"}
    step = float(np.min(np.diff(alphas))) if len(alphas) > 1 else 0.1
    offsets = {"linear_transformer": -0.2 * step, "mamba": -0.07 * step, "mamba_merged": 0.07 * step}
    for ax, rule in zip(axes, rules):
        for key in ("linear_transformer", "mamba", "mamba_merged"):
            if key in errors:
                ax.plot(alphas, errors[key][rule], color=PALETTE[palette_key(key)], marker="o", ms=4, label=labels[key])
                _seed_dots(ax, alphas, errors_per_seed[key][rule], palette_key(key), offsets[key])
        if claim is not None:
            ax.plot(alphas, claim[0][rule], color=PALETTE["mamba"], ls="--", marker="s", ms=4,
                    label=f"Mamba, {n_tasks[1]} tasks (see text)")
            _seed_dots(ax, alphas, claim[1][rule], "mamba", 0.2 * step)
        ax.axhline(level, color=PALETTE["paper"], lw=2.0, ls="-", zorder=0)
        ax.axvline(bound_mamba, color=PALETTE["theory"], lw=1.5, ls="-.")
        ax.axvline(bound_lt, color=PALETTE["theory"], lw=1.5, ls=":")
        ax.set_yscale("symlog", linthresh=1e-3, linscale=0.3)
        ax.set_ylim(0, 1.05)
        ax.set_xlim(-0.02, max(alphas) + 0.02)
        ax.set_title(RULE_TITLES[rule])
        ax.set_xlabel(r"outlier fraction $\alpha$")
    axes[0].set_ylabel("test error (symlog scale)")
    handles, _ = axes[0].get_legend_handles_labels()
    handles += [Line2D([], [], color=PALETTE["paper"], lw=2.0, label=f"paper: error < {level:g}"),
                Line2D([], [], color=PALETTE["theory"], lw=1.5, ls="-.",
                       label=rf"Theorem 2(c): Mamba for $\alpha$ < {bound_mamba:g}"),
                Line2D([], [], color=PALETTE["theory"], lw=1.5, ls=":",
                       label=rf"Theorem 4(c): linear Transformer for $\alpha$ < {bound_lt:g}")]
    if legend:
        axes[0].figure.legend(handles=handles, loc="lower center", ncol=4, fontsize=8, bbox_to_anchor=(0.5, -0.02))
    return handles


def plot_figure2_by_training_set(axes, alphas, errors: dict, errors_per_seed: dict, *, rules=RULES,
                                 bound_mamba: float, bound_lt: float = 0.5, level: float = 0.01,
                                 n_test_tasks: int = 30) -> list:
    """Figure 2 once per training set: ``axes[row][col]`` is training set ``row`` (the keys of ``errors``, in order)
    and rule ``rules[col]``; each panel as :func:`plot_figure2` (means and one dot per seed, the paper's 0.01,
    Theorems 2(c) and 4(c)), all models tested on all ``n_test_tasks`` tasks. ``errors[set][key][rule]`` and
    ``errors_per_seed[set][key][rule][s][i]`` as in ``fig2_complete``'s result. Returns the legend handles."""
    axes = np.atleast_2d(np.asarray(axes, dtype=object))
    if axes.shape[0] != len(errors):
        raise ConfigError(f"axes must have one row per training set ({len(errors)}); got {axes.shape[0]}")
    handles = []
    for row, (name, errs) in zip(axes, errors.items()):
        handles = plot_figure2(list(row), alphas, errs, errors_per_seed[name], rules=rules, bound_mamba=bound_mamba,
                               bound_lt=bound_lt, level=level, n_tasks=(n_test_tasks, 0), legend=False)
        row[0].set_ylabel(f"trained on {name}\ntest error, all {n_test_tasks} tasks")
    for ax in axes[:-1].ravel():
        ax.set_xlabel("")
    for ax in axes[1:].ravel():
        ax.set_title("")
    axes[0][0].figure.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, bbox_to_anchor=(0.5, -0.02))
    return handles


def plot_attention_matrices(axes, mats: dict, *, colorbar: bool = True):
    """Heat maps of pattern attention matrices ``{title: (M1, M1) array}`` on one symmetric colour scale.

    Entry ``(i, j)``: the attention a context example with ``mu_i`` receives from a query with ``mu_j``.
    Pattern numbers are 1-based. Returns the last image (for a colour bar).
    """
    arrays = {t: np.asarray(A, dtype=float) for t, A in mats.items()}
    vmax = max(np.abs(A).max() for A in arrays.values())
    im = None
    for ax, (title, A) in zip(axes, arrays.items()):
        im = ax.imshow(A, cmap="RdBu_r", vmin=-vmax, vmax=vmax)
        M1 = A.shape[0]
        ax.set_xticks(range(M1), [str(j + 1) for j in range(M1)])
        ax.set_yticks(range(M1), [str(i + 1) for i in range(M1)])
        ax.grid(False)
        ax.set_xlabel(r"query pattern $\mu_j$")
        ax.set_ylabel(r"context pattern $\mu_i$")
        ax.set_title(title, fontsize=9)
    if colorbar and im is not None:
        axes[-1].figure.colorbar(im, ax=list(axes), shrink=0.85, label="attention (red +, blue -)")
    return im


def plot_attention_by_distance(ax, by_dist: dict) -> None:
    """Grouped bars: mean pattern attention (over seeds, +-1 SE) against the distance on the training cycle.

    Args:
        by_dist: ``{label: (palette key, hatch, (S, K) array)}``, ``K`` distances ``0..K-1``.
    """
    n = len(by_dist)
    width = 0.8 / n
    for i, (label, (key, hatch, values)) in enumerate(by_dist.items()):
        v = np.asarray(values, dtype=float)
        mean = v.mean(0)
        se = v.std(0, ddof=1) / np.sqrt(v.shape[0]) if v.shape[0] > 1 else np.zeros_like(mean)
        x = np.arange(v.shape[1]) + (i - (n - 1) / 2) * width
        ax.bar(x, mean, width, yerr=se, color=PALETTE[key], hatch=hatch, edgecolor="black", lw=0.5,
               capsize=2, label=label)
    ax.axhline(0, color="black", lw=0.6)
    integer_ticks(ax, "x")
    ax.set_xlabel("distance between the two patterns on the training cycle")
    ax.set_ylabel(r"mean $(\mu_i, 0)\, M\, (\mu_j, 0)^\top$")
    ax.legend(fontsize=8)


def plot_group_errors(ax, groups: dict, n_prompts: int, order=("training", "reversed", "distance 2", "distance 3"),
                      log: bool = True) -> None:
    """Grouped bars: test error per task group (mean over seeds, +-1 SE), one bar series per model.

    Args:
        groups: ``{label: (palette key, hatch, {group: [error of seed s]})}``.
        n_prompts: test prompts behind each per-seed error (for the standard error).
    """
    from ..analysis.stats import error_mean_se

    n = len(groups)
    width = 0.8 / n
    for i, (label, (key, hatch, by_group)) in enumerate(groups.items()):
        stats = [error_mean_se(by_group[g], n_prompts) for g in order]
        mean = np.array([m for m, _ in stats])
        se = np.array([s for _, s in stats])
        x = np.arange(len(order)) + (i - (n - 1) / 2) * width
        ax.bar(x, mean, width, yerr=np.vstack([np.minimum(se, mean), se]), color=PALETTE[key], hatch=hatch,
               edgecolor="black", lw=0.5, capsize=2, label=label)
    ax.set_xticks(range(len(order)), list(order))
    ax.set_xlabel("task group (relation of the test task to the training cycle)")
    ax.set_ylabel("test error")
    if log:
        ax.set_yscale("symlog", linthresh=1e-3, linscale=0.3)
        ax.set_ylim(0, 1)
    ax.legend(fontsize=8)


def plot_eta_table(axes, searches: dict, test_errors: dict | None = None, alpha_label: str = r"$\alpha = 0$",
                    level: float = 0.01) -> None:
    """Left: validation hinge loss (training distribution) against the step size, +-1 SE, the best circled.
    Right: the post-hoc test error (all tasks) of the same models against the step size.

    Args:
        searches: ``{kind: StepSizeSearch}`` (:func:`mambaicl.experiments.fig2.eta_table`); test_errors: ``{kind: {lr: [error of seed s]}}`` at one alpha.
    """
    from ..analysis.stats import error_mean_se

    for kind, s in searches.items():
        key = palette_key(kind)
        axes[0].errorbar(s.lrs, s.mean, yerr=s.se, color=PALETTE[key], marker="o", ms=4, capsize=2,
                         label=LABELS[key])
        axes[0].plot([s.best], [s.mean[s.lrs.index(s.best)]], "o", ms=11, mfc="none", mec=PALETTE[key], mew=1.5)
        if test_errors is not None:
            stats = [error_mean_se(test_errors[kind][lr]) for lr in s.lrs]
            mean = np.array([m for m, _ in stats])
            se = np.array([e for _, e in stats])
            axes[1].errorbar(s.lrs, mean, yerr=np.vstack([np.minimum(se, mean), se]), color=PALETTE[key],
                             marker="o", ms=4, capsize=2, label=LABELS[key])
            axes[1].plot([s.best], [mean[s.lrs.index(s.best)]], "o", ms=11, mfc="none", mec=PALETTE[key], mew=1.5)
    axes[0].set_xscale("log")
    axes[0].set_yscale("log")
    axes[0].set_xlabel(r"step size $\eta$")
    axes[0].set_ylabel("validation hinge loss (Definition 1 prompts)")
    handles, _ = axes[0].get_legend_handles_labels()
    handles.append(Line2D([], [], ls="none", marker="o", ms=11, mfc="none", mec="black", label="selected (lowest)"))
    axes[0].legend(handles=handles, fontsize=8)
    if test_errors is not None:
        axes[1].axhline(level, color=PALETTE["paper"], lw=2.0, zorder=0, label=f"paper: error < {level:g}")
        axes[1].set_xscale("log")
        axes[1].set_yscale("symlog", linthresh=1e-3, linscale=0.3)
        axes[1].set_ylim(0, 0.3)
        axes[1].set_xlabel(r"step size $\eta$")
        axes[1].set_ylabel(f"test error, all tasks, {alpha_label}")
        axes[1].legend(fontsize=8)


def plot_lengths(ax, lengths, curves: dict, key: str = "linear", level: float | None = None) -> None:
    """Error against the test prompt length ``l_ts`` (log axis), one curve per ``alpha`` (+-1 SE bands).

    Args:
        curves: ``{alpha: (mean, se)}`` over ``lengths``; styles tell the alphas apart (legend).
        level: an error level drawn as a thin black dashed line (with a legend entry).
    """
    styles = ["-", "--", ":", "-."]
    markers = ["o", "s", "^", "D"]
    for i, (alpha, (mean, se)) in enumerate(curves.items()):
        _band(ax, lengths, mean, se, key, rf"$\alpha$ = {alpha:g}", ls=styles[i % 4], marker=markers[i % 4])
    if level is not None:
        ax.axhline(level, color="black", lw=0.7, ls="--", label=f"error {level:g}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(lengths), [str(v) for v in lengths])
    ax.minorticks_off()
    ax.set_xlabel(r"context examples in the test prompt $l_{ts}$")
    ax.set_ylabel("test error (linear Transformer)")
    ax.legend(fontsize=8, title=LABELS[key], title_fontsize=8)

