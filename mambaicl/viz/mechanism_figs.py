"""Chapter 8's figures and printed summaries, assembled (book/myst/ch05_mechanism.md; only that chapter uses them).

Each ``*_figure`` function builds one figure of the chapter from the drawing functions of
:mod:`mambaicl.viz.mechanism` and returns it (the chapter shows it); each ``*_text`` function returns the text a
chapter cell prints. The inputs are :class:`mambaicl.experiments.mechanism.MechanismResult` objects (this module
does not import the experiment).

==========================  ===========================================================
function                    figure / text
==========================  ===========================================================
``sums_figure``             Corollary 1's two sums of one layer along training (Fig. 3 and its one-layer twin)
``gates_figure``            one prompt's gates and the clean gates' decay by rank (gate figure and its twin)
``group_errors_figure``     test error by task group, the one-layer model and the three deep models
``app45_figure``            App. Figures 4-5: layers 2 and 3's sums and gates
``placements_figure``       the cost of locality: FQ / R / CQ, one and three layers
``one_layer_text``          the one-layer run's test error and its per-layer table
``deep_fit_text``           how each deep model was fitted, and its errors by task group
``ratio_text``              first layer's signed other/same sum ratio by task group, one and three layers
``rmsnorm_text``            per layer, the gate ratios and suppressing seeds; the token norms before each gate
==========================  ===========================================================
"""
from __future__ import annotations

import matplotlib.pyplot as plt

from ..analysis.text import GROUP_ORDER, mean_se_text, median_range_text
from . import mechanism as vm

__all__ = ["sums_figure", "gates_figure", "group_errors_figure", "app45_figure", "placements_figure",
           "one_layer_text", "deep_fit_text", "ratio_text", "rmsnorm_text", "MODEL_STYLES"]

#: the bar style of each model of the chapter (palette key, or (key, hatch): variants keep the model's colour)
MODEL_STYLES = {"one layer": "mamba", "three layers, RMSNorm": ("mamba", "//"),
                "three layers, no normalisation": ("mamba", ".."), "three Mamba-1 blocks": "mamba1"}


def sums_figure(result, layer: int, title: str):
    """Corollary 1's sums of ``layer`` along training (mean ± 1 SE over seeds), with a legend."""
    fig, ax = plt.subplots(figsize=(6, 3.2))
    vm.plot_sums(ax, result, layer, title)
    ax.legend(fontsize=8)
    return fig


def gates_figure(result, alpha: float, example_title: str, rank_label: str):
    """Left: the first layer's gates of the test prompt with about ``alpha l`` outliers; right: the median gate of
    the j-th closest clean example. Returns ``(figure, index of the prompt)``."""
    k = vm.typical_prompt(result.prompts.outlier, alpha)
    fig, axs = plt.subplots(1, 2, figsize=(10, 3.2))
    vm.plot_gate_example(axs[0], result, 0, k, title=example_title)
    vm.plot_rank(axs[1], result, 0, rank_label)
    plt.tight_layout()
    return fig, k


def group_errors_figure(results: dict):
    """Test error by task group of the models in ``results`` (``{label: result}``, labels of :data:`MODEL_STYLES`)."""
    fig, ax = plt.subplots(figsize=(9, 3.4))
    vm.plot_group_errors(ax, results, MODEL_STYLES)
    return fig


def app45_figure(deep, k: int):
    """App. Figures 4-5: top, layers 2 and 3's sums along training; bottom, their gates of prompt ``k``."""
    fig, axs = plt.subplots(2, 2, figsize=(10, 6))
    for col, layer in enumerate((1, 2)):
        vm.plot_sums(axs[0, col], deep, layer, f"layer {layer + 1}: attention sums (App. Fig. 4)")
        vm.plot_gate_example(axs[1, col], deep, layer, k, title=f"layer {layer + 1}: gates (App. Fig. 5)")
    axs[0, 0].legend(fontsize=8)
    plt.tight_layout()
    return fig


def placements_figure(one, deep):
    """Test error with the outliers far from (FQ), random (R) and close to (CQ) the query, one and three layers."""
    fig, ax = plt.subplots(figsize=(7, 3.2))
    results = {"one layer": one, "three layers, RMSNorm": deep}
    vm.plot_placements(ax, results, {k: MODEL_STYLES[k] for k in results})
    return fig


def one_layer_text(one) -> str:
    """The one-layer run's test error at its alpha and its Corollaries 1-2 per layer."""
    return (f"test error at alpha = {one.config['alpha']}: {mean_se_text(one.test_error, 3, one.config['n_test'])}\n"
            + vm.layer_table(one))


def deep_fit_text(deep_runs: dict) -> str:
    """Per deep model: step size and its search, kept checks, diverged seeds, validation loss, test error, and the
    error by task group."""
    lines = []
    for name, res in deep_runs.items():
        n_g = res.config["n_group"]
        lines.append(f"{name}: step size {res.lr:g}, searched over {res.search['lrs']} on seeds {res.search['seeds']}; "
                     f"kept checks at {median_range_text(res.best_step, 'g')} updates (median [min, max] over seeds), "
                     f"diverged seeds {sum(res.diverged)}; validation loss "
                     f"{mean_se_text(res.val_loss, 3)}; test error {mean_se_text(res.test_error, 3, res.config['n_test'])}")
        lines.append("    by task group: " + ", ".join(f"{g} {mean_se_text(res.groups[g], 3, n_g, seeds=False)}"
                                                       for g in GROUP_ORDER))
    return "\n".join(lines)


def ratio_text(results: dict) -> str:
    """Per result (``{name: result}``), the first layer's other/same sum ratio by task group (mean ± SE over seeds)."""
    return "\n".join(f"{name:>4s}, layer 1, other/same: " + "; ".join(
        f"{g} {mean_se_text(r, 2, seeds=False)}" for g, r in res.ratio_by_group().items()) for name, res in results.items())


def rmsnorm_text(deep, none) -> str:
    """Per layer, with and without RMSNorm: the median outlier/clean gate, the seeds whose gate suppresses outliers
    (ratio below row ``cor2i``'s 1/M1), and the outlier/clean norms of the residual stream and of the token each gate
    reads."""
    from ..analysis.claims import CLAIMS

    suppress = CLAIMS["cor2i"].criterion.threshold
    lines = ["median outlier/clean gate (mean ± SE over seeds) and the seeds whose gate suppresses outliers:"]
    for name, res in (("FIG3 (RMSNorm)", deep), ("FIG3_NONE (no norm)", none)):
        sup = res.suppressing(suppress)
        for layer in range(3):
            lines.append(f"  {name:>20s}, layer {layer + 1}: "
                         f"{mean_se_text(res.per_seed(layer, 'gate_ratio'), 2, seeds=False)}"
                         f"   suppressing: {sum(sup[layer])}/{len(res.seeds)}")
    for name, res in (("RMSNorm", deep), ("no norm", none)):
        for layer in range(3):
            tn = res.token_norms[layer]
            lines.append(f"  {name:>8s}, layer {layer + 1}: outlier/clean norm of the residual stream x "
                         f"{mean_se_text(tn['x_ratio'], 2, seeds=False)}, of the token the gate reads "
                         f"{mean_se_text(tn['u_ratio'], 2, seeds=False)}")
    return "\n".join(lines)
