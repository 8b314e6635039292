"""The pictures of Part I ("Learn"): seven figure functions and the small computations they show.

Glossary (code name -> paper symbol):

================  ==========================================================
``score``         linear-attention score ``p_i^T W_B^T W_C p_query`` of each token, ``(l+1,)``
``gate``          ``G_{i,l+1}(w)`` of Eq. (3), ``(l+1,)`` (ones for the linear Transformer)
``vote``          ``G_{i,l+1} y_i p_i^T W_B^T W_C p_query``: token ``i``'s share of ``F`` (Eq. (3))
``logits``        gate logits ``w^T p_i``; ``sigma = sigmoid(logit)``
``outlier``       which context examples carry an outlier pattern, ``(l,)`` bool
================  ==========================================================

Each ``fig_*`` function returns a :class:`matplotlib.figure.Figure` and draws nothing it did not
receive, so a chapter computes with the package and hands the numbers over:

=======================  ===========================================  ===================
function                 figure name in the book                      chapter
=======================  ===========================================  ===================
:func:`fig_attention_map`  ``fig-attention-map``                      Learn, Chapter 1
:func:`fig_skip_erase`     ``fig-skip-erase``                         Learn, Chapter 1
:func:`fig_training_graph` ``fig-training-graph``                     Learn, Chapter 2
:func:`fig_votes`          ``fig-votes``                              Learn: mechanism
:func:`fig_gate_training`  ``fig-gate-training``                      Learn: dynamics
:func:`fig_floor`          ``fig-learn-floor``                        Learn: robustness
:func:`fig_intro_summary`  ``fig-intro-summary`` (a committed SVG)    the introduction
=======================  ===========================================  ===================

:func:`html_vote_explorer` (site, no kernel) and :func:`make_vote_explorer` (Jupyter, Colab) show the votes of one
test prompt as the outlier fraction and the gate change (:func:`draw_votes` draws one frame).

This module trains nothing: the Learn part's small one-layer Mamba and linear Transformer are trained by
:func:`mambaicl.recipes.learn.illustrative_pair` (seconds, float64; Part II trains and audits the paper's runs).
"""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch

from ..config import LEARN_SEED  # the Learn part's seed, re-exported: the chapters read it here
from .style import LABELS, PALETTE

__all__ = ["softmax_weights", "votes", "cycle_pairs", "fig_attention_map",
           "fig_skip_erase", "fig_training_graph", "fig_votes", "fig_gate_training", "fig_floor", "fig_intro_summary",
           "write_intro_summary", "binomial_tail", "GATE_SETTINGS", "draw_votes", "html_vote_explorer",
           "make_vote_explorer", "LEARN_SEED"]


# ---------------------------------------------------------------- small computations the figures show


def softmax_weights(score: torch.Tensor) -> torch.Tensor:
    """Softmax attention weights ``softmax_i(q^T k_i)`` over the context examples (query excluded), ``(l,)``."""
    return torch.softmax(score[..., :-1], dim=-1)


def votes(model, P: torch.Tensor) -> dict:
    """Eq. (3) of one prompt, term by term: ``{"score", "gate", "y", "vote", "F"}`` of a one-layer model.

    Args:
        model: a one-layer model of :mod:`mambaicl.models` (``attention`` and ``gate`` methods).
        P: one prompt ``(l+1, d+1)``, query last.

    Returns:
        tensors ``(l+1,)`` (``vote = gate * y * score``) and ``F = vote.sum()``, which equals ``model(P)``.
    """
    with torch.no_grad():
        score, gate = model.attention(P[None])[0], model.gate(P[None])[0]  # (l+1,), (l+1,)
    y = P[:, -1]
    vote = gate * y * score
    return {"score": score, "gate": gate, "y": y, "vote": vote, "F": vote.sum()}


def cycle_pairs(M1: int) -> dict:
    """The unordered pattern pairs of the cyclic training set (App. 9) by their distance on the cycle:
    ``{1: [(i, j), ...], 2: [...], ...}`` (0-based); distance 1 are the training pairs."""
    out: dict = {}
    for i in range(M1):
        for j in range(i + 1, M1):
            out.setdefault(min(j - i, M1 - (j - i)), []).append((i, j))
    return out


# ---------------------------------------------------------------- the six figures


def _bars(ax, values, outlier, color, title, ylabel):
    x = np.arange(1, len(values) + 1)
    edge = [PALETTE["outlier"] if o else "none" for o in outlier]
    ax.bar(x, values, color=color, edgecolor=edge, linewidth=2)
    ax.axhline(0, color="black", lw=0.6)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel)
    ax.set_xticks(x)


def fig_attention_map(score, gate, outlier, *, same=None) -> plt.Figure:
    """``fig-attention-map``: one prompt through softmax attention and through Mamba's gated linear attention.

    Args:
        score: ``q^T k_i = p_i^T W_B^T W_C p_query`` of the context examples and the query, ``(l+1,)``.
        gate: Mamba's ``G_{i,l+1}(w)``, ``(l+1,)``.
        outlier: ``(l,)`` bool, outlined in red.
        same: ``(l,)`` bool, examples with the query's relevant pattern (blue; others grey).
    """
    score, gate = np.asarray(score, dtype=float), np.asarray(gate, dtype=float)
    l = len(outlier)
    given_same = same is not None
    same = np.ones(l, bool) if same is None else np.asarray(same)
    colors = [PALETTE["same"] if s else PALETTE["other"] for s in same]
    soft = softmax_weights(torch.as_tensor(score)).numpy()
    fig, axs = plt.subplots(1, 3, figsize=(12, 3.2), sharex=True)
    _bars(axs[0], soft, outlier, colors, "softmax attention: softmax$_i(q^\\top k_i)$", "weight on $v_i = y_i$")
    _bars(axs[1], gate[:l], outlier, PALETTE["mamba"], "Mamba's gate $G_{i,l+1}(w)$", "gate")
    axs[1].set_yscale("log")
    _bars(axs[2], gate[:l] * score[:l], outlier, colors, "Mamba: $G_{i,l+1}\\, q^\\top k_i$", "weight on $v_i = y_i$")
    for ax in axs:
        ax.set_xlabel("context example $i$ (query to the right)")
        ax.tick_params(axis="x", labelsize=7)
    if given_same or np.any(outlier):
        axs[2].legend(handles=[Patch(color=PALETTE["same"], label="query's pattern"),
                               Patch(color=PALETTE["other"], label="other pattern"),
                               Patch(facecolor="white", edgecolor=PALETTE["outlier"], lw=2, label="outlier")],
                      fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    return fig


def fig_skip_erase(gates: dict, k: int) -> plt.Figure:
    """``fig-skip-erase``: the gates ``G_{i,l+1}`` of every token when token ``k`` (1-based) has a given gate
    value ``sigma_k``; ``gates`` maps a label (e.g. ``"sigma_k = 0.001"``) to ``(l+1,)`` gates."""
    fig, ax = plt.subplots(figsize=(7, 3.2))
    keys = list(gates)
    width = 0.8 / len(keys)
    cols = [PALETTE["clean"], PALETTE["theory"], PALETTE["outlier"]] + [PALETTE["other"]] * len(keys)
    for n, key in enumerate(keys):
        g = np.asarray(gates[key], dtype=float)
        x = np.arange(1, len(g) + 1) + (n - (len(keys) - 1) / 2) * width
        ax.bar(x, g, width=width, color=cols[n], label=key)
    ax.axvline(k, color="black", ls=":", lw=1)
    ax.text(k, ax.get_ylim()[1] * 0.95, f" token {k}", va="top", fontsize=8)
    ax.set_xlabel("token $i$ (the last one is the query)")
    ax.set_ylabel("gate $G_{i,l+1}(w)$")
    ax.set_xticks(np.arange(1, len(np.asarray(gates[keys[0]])) + 1))
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def fig_training_graph(M1: int, train_tasks, *, seen=None) -> plt.Figure:
    """``fig-training-graph``: the ``M1`` relevant patterns on a circle; training tasks as arrows
    (``mu_a -> +1``, ``mu_b -> -1``), pattern pairs two and three steps apart dashed and dotted.

    Args:
        train_tasks: ``(n, 2)`` 0-based ordered pairs ``(a, b)``.
        seen: optional set of unordered pairs met in sampled training prompts (checked to be the tasks).
    """
    angle = np.pi / 2 - 2 * np.pi * np.arange(M1) / M1
    xy = np.stack([np.cos(angle), np.sin(angle)], 1)
    fig, ax = plt.subplots(figsize=(4.8, 4.4))
    styles = {2: ("--", PALETTE["theory"], "2 steps apart (never meet)"),
              3: (":", PALETTE["other"], "3 steps apart (never meet)")}
    for dist, pairs in cycle_pairs(M1).items():
        if dist not in styles:
            continue
        ls, col, lab = styles[dist]
        for n, (i, j) in enumerate(pairs):
            ax.plot(*xy[[i, j]].T, ls=ls, color=col, lw=1.5, label=lab if n == 0 else None, zorder=1)
    for n, (a, b) in enumerate(np.asarray(train_tasks).tolist()):
        ax.add_patch(FancyArrowPatch(xy[a] * 0.86, xy[b] * 0.86, arrowstyle="-|>", mutation_scale=14,
                                     color=PALETTE["mamba"], lw=2.2, zorder=2,
                                     label="training task $(a, b)$" if n == 0 else None))
    for i in range(M1):
        ax.add_patch(plt.Circle(xy[i], 0.13, color="white", ec="black", zorder=3))
        ax.text(*xy[i], f"$\\mu_{i + 1}$", ha="center", va="center", fontsize=11, zorder=4)
    ax.set_xlim(-1.35, 1.35), ax.set_ylim(-1.35, 1.35)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.01), ncol=1, frameon=False)
    fig.tight_layout()
    return fig


def fig_votes(per_model: dict, outlier, *, same=None, z: float = 1.0) -> plt.Figure:
    """``fig-votes``: each context example's vote for the true label ``z G_i y_i q^T k_i`` for each model,
    outliers marked, the sum ``z F`` shown (positive: the model is right).

    Args:
        per_model: ``{kind: votes(model, P)}`` (see :func:`votes`), e.g. ``"mamba"`` and ``"linear"``.
        outlier: ``(l,)`` bool.
        same: ``(l,)`` bool, examples with the query's relevant pattern.
    """
    l = len(outlier)
    same = np.ones(l, bool) if same is None else np.asarray(same)
    fig, axs = plt.subplots(1, len(per_model), figsize=(5.4 * len(per_model), 3.4))
    for ax, (kind, v) in zip(np.atleast_1d(axs), per_model.items()):
        vote = z * np.asarray(v["vote"], dtype=float)[:l]
        colors = [PALETTE["same"] if s else PALETTE["other"] for s in same]
        zF = z * float(v["F"])
        _bars(ax, vote, outlier, colors, f"{LABELS.get(kind, kind)}: $zF$ = {zF:+.2f} ({'right' if zF > 0 else 'wrong'})",
              "vote for the true label, $z\\, G_i\\, y_i\\, q^\\top k_i$")
        ax.set_xlabel("context example $i$ (query to the right)")
        ax.tick_params(axis="x", labelsize=7)
    np.atleast_1d(axs)[-1].legend(handles=[Patch(color=PALETTE["same"], label="query's pattern"),
                                           Patch(color=PALETTE["other"], label="other pattern"),
                                           Patch(facecolor="white", edgecolor=PALETTE["outlier"], lw=2,
                                                 label="outlier (label flipped)")],
                                  fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    return fig


def fig_gate_training(steps, gates, outlier, sigmas=None) -> plt.Figure:
    """``fig-gate-training``: one fixed prompt along training, as heat maps (rows: SGD steps, columns:
    context examples; outliers marked with a red triangle): each token's own gate value
    ``sigma(w^T p_i)`` (left, when ``sigmas`` is given) and its gate ``log10 G_{i,l+1}`` (right).

    Args:
        steps: the recorded SGD steps, ``(n,)``.
        gates: ``(n, l)`` gates of the context examples at those steps.
        outlier: ``(l,)`` bool.
        sigmas: optional ``(n, l)`` values ``sigma(w^T p_i)``.
    """
    panels = [] if sigmas is None else [(np.asarray(sigmas, dtype=float), "$\\sigma(w^\\top p_i)$", 0, 1)]
    G = np.log10(np.clip(np.asarray(gates, dtype=float), 1e-12, None))
    panels.append((G, "$\\log_{10} G_{i,l+1}(w)$", max(G.min(), -8), 0))
    l = G.shape[1]
    fig, axs = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 3.6), squeeze=False)
    out = np.flatnonzero(np.asarray(outlier)) + 1
    for ax, (values, label, lo, hi) in zip(axs[0], panels):
        im = ax.imshow(values, aspect="auto", cmap="viridis", vmin=lo, vmax=hi,
                       extent=(0.5, l + 0.5, len(steps) - 0.5, -0.5))
        ax.set_yticks(range(len(steps)))
        ax.set_yticklabels([str(s) for s in steps])
        ax.set_xticks(range(1, l + 1))
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(False)
        ax.plot(out, [-0.5] * len(out), "v", color=PALETTE["outlier"], ms=8, clip_on=False, label="outlier example")
        ax.set_xlabel("context example $i$ (query to the right)")
        ax.set_ylabel("SGD step")
        fig.colorbar(im, ax=ax, label=label)
    axs[0, 0].legend(fontsize=8, loc="lower left", bbox_to_anchor=(0.0, 1.02), frameon=False)
    fig.tight_layout()
    return fig


def fig_floor(groups, counts, errors: dict, bound: dict, *, alpha: float) -> plt.Figure:
    """``fig-learn-floor``: a model's test error on each task group at two outlier fractions, beside the
    reader bound of Chapter 10 at the larger one.

    Args:
        groups: the task groups in order, e.g. ``["training", "reversed", "distance 2", "distance 3"]``.
        counts: ``{group: number of tasks}``.
        errors: ``{label: {group: error}}``, e.g. ``{"alpha = 0": {...}, "alpha = 0.8": {...}}`` (two or three).
        bound: ``{group: bound}`` at ``alpha``.
    """
    fig, ax = plt.subplots(figsize=(7, 3.4))
    x = np.arange(len(groups))
    width = 0.8 / len(errors)
    cols = [PALETTE["mamba"], PALETTE["outlier"], PALETTE["other"]]
    for n, (label, err) in enumerate(errors.items()):
        ax.bar(x + (n - (len(errors) - 1) / 2) * width, [err[g] for g in groups], width=width, color=cols[n],
               label=label)
    ax.scatter(x + (len(errors) - 1) / 2 * width, [bound[g] for g in groups], marker="_", s=400, lw=2.5,
               color="black", zorder=3, label=f"reader bound at $\\alpha = {alpha}$ (Chapter 10)")
    ax.axhline(0.01, color=PALETTE["theory"], ls=":", lw=1.2, label="the paper's 0.01")
    ax.set_xticks(x)
    ax.set_xticklabels([f"{g}\n({counts[g]} tasks)" for g in groups])
    ax.set_ylabel("test error (rule A)")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def fig_intro_summary() -> plt.Figure:
    """``fig-intro-summary``: the book's argument in one diagram, prompt -> attention x gate -> vote -> sign.

    Drawn from the idealised values of the hand-worked prompt of the Learn part's mechanism chapter (no
    model): attention scores +-1, gate sigma = 1/2 on clean tokens and 0 on outliers, four examples of
    which two carry an outlier with a flipped label; query mu_1, true label +1. Mamba's F is +3/8; the
    linear Transformer's is 0, a tie, which the book counts as an error.
    """
    rows = [("$\\mu_1$", 1, False), ("$\\mu_2$", -1, False), ("$\\mu_1 + \\kappa_a v^*$", -1, True),
            ("$\\mu_1 + \\kappa_a v^*$", -1, True)]
    att = [1.0 if "mu_1" in x else -1.0 for x, _, _ in rows]
    sig = [0.0 if out else 0.5 for _, _, out in rows] + [0.5]  # the query last
    gate = [sig[i] * float(np.prod([1 - s for s in sig[i + 1:]])) for i in range(len(rows))]
    fig, ax = plt.subplots(figsize=(10, 3.5))
    ax.set_xlim(0, 10), ax.set_ylim(0.25, 3.9)
    ax.axis("off")
    cols = {"prompt": 0.2, "att": 3.1, "gate": 5.0, "vote": 7.0}
    heads = {"prompt": "prompt: example $x_i$, label $y_i$", "att": "attention\n$q^\\top k_i$",
             "gate": "gate\n$G_{i,l+1}$", "vote": "vote $G_i\\, y_i\\, q^\\top k_i$\nMamba    linear T."}
    for key, x in cols.items():
        ax.text(x + (1.0 if key == "prompt" else 0.9), 3.6, heads[key], ha="center", va="center", fontsize=9)
    minus = "\u2212"
    for r, ((x_text, y, out), a, g) in enumerate(zip(rows, att, gate)):
        yc = 2.9 - 0.55 * r
        ax.add_patch(FancyBboxPatch((cols["prompt"], yc - 0.2), 2.0, 0.4, boxstyle="round,pad=0.02",
                                    fc="white", ec=PALETTE["outlier"] if out else PALETTE["clean"], lw=2))
        ax.text(cols["prompt"] + 1.0, yc, f"{x_text},  y = {'+1' if y > 0 else minus + '1'}", ha="center",
                va="center", fontsize=9)
        ax.text(cols["att"] + 0.9, yc, ("+1" if a > 0 else minus + "1"), ha="center", va="center", fontsize=10,
                color=PALETTE["same"] if a > 0 else PALETTE["other"])
        ax.text(cols["gate"] + 0.9, yc, "\u2248 0" if out else f"{g:.3f}", ha="center", va="center", fontsize=10,
                color=PALETTE["outlier"] if out else PALETTE["clean"])
        vote_m = g * y * a
        ax.text(cols["vote"] + 0.45, yc, "0" if out else f"+{vote_m:.3f}", ha="center", va="center",
                fontsize=10, color=PALETTE["mamba"])
        ax.text(cols["vote"] + 1.55, yc, ("+1" if y * a > 0 else minus + "1"), ha="center", va="center",
                fontsize=10, color=PALETTE["linear"])
        for a_col, b_col, x0 in (("prompt", "att", 2.25), ("att", "gate", 1.3), ("gate", "vote", 1.3)):
            ax.add_patch(FancyArrowPatch((cols[a_col] + x0, yc), (cols[b_col] + 0.35 - (0.3 if b_col == "vote" else 0), yc),
                                         arrowstyle="->", color="grey", mutation_scale=10))
    f_m = sum(g * y * a for (_, y, _), a, g in zip(rows, att, gate))
    f_l = sum(y * a for (_, y, _), a in zip(rows, att))
    ax.plot([cols["vote"], cols["vote"] + 2.0], [0.94, 0.94], color="black", lw=0.8)
    ax.text(cols["vote"] + 0.45, 0.62, f"F = +{f_m:.3f}\nright", ha="center", va="center", fontsize=9,
            color=PALETTE["mamba"])
    verdict = "tie: wrong" if f_l == 0 else ("right" if f_l > 0 else "wrong")
    ax.text(cols["vote"] + 1.55, 0.62, f"F = {f_l:.0f}\n{verdict}", ha="center", va="center", fontsize=9,
            color=PALETTE["linear"])
    ax.text(0.2, 0.62, "Query $\\mu_1$, true label +1. Two of four examples carry an outlier $v^*$\n"
            "and a flipped label. Attention selects the query's pattern;\nthe gate switches the outliers off.",
            fontsize=9, va="center")
    return fig


def write_intro_summary(path) -> None:
    """Write :func:`fig_intro_summary` as a deterministic SVG (no date, fixed ids): the introduction's figure."""
    with plt.rc_context({"svg.hashsalt": "mambaicl", "svg.fonttype": "path"}):
        fig = fig_intro_summary()
        fig.savefig(path, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    plt.close(fig)


def binomial_tail(n: int, alpha: float, *, ties: bool = True) -> float:
    """The error of an equal-weight vote of ``n`` same-pattern examples, each flipped with probability ``alpha``
    (the vote-count argument, Learn part).

    With ``ties=True`` (the book's one convention: ``z F <= 0`` is an error, so a tied count, ``F = 0``, is
    wrong) it is ``P(K >= n/2)``; with ``ties=False``, ``P(K > n/2)``. A trained model's scores are never
    exactly equal, so its ties are broken one way or the other and its error lies between the two."""
    k0 = n // 2 if (ties and n % 2 == 0) else n // 2 + 1
    return sum(math.comb(n, k) * alpha ** k * (1 - alpha) ** (n - k) for k in range(k0, n + 1))


# ---------------------------------------------------------------- the vote explorer of the mechanism chapter

#: the gate settings of the vote explorer: the model's trained gate, an untrained gate (w = 0, sigma = 1/2 on
#: every token: recency only) and no gate at all (G = 1: the linear Transformer's vote, same scores)
GATE_SETTINGS = {"trained": "trained gate", "w=0": "untrained gate (w = 0)", "none": "no gate (G = 1)"}
EXPLORER_ALPHAS = (0.0, 0.3, 0.5, 0.7, 0.9)


def _explorer_prompt(pat, test, tasks, alpha: float, index: int, n: int, seed: int):
    import dataclasses

    from ..data import test_prompts
    from ..seeding import numpy_stream

    pr = test_prompts(pat, dataclasses.replace(test, alpha=float(alpha)), tasks, n,
                      numpy_stream(seed, f"learn/explorer/{float(alpha)}"))
    return pr.P[index], pr.outlier[index], pr.relevant[index, :-1] == pr.relevant[index, -1], float(pr.z[index])


def draw_votes(model, pat, test, tasks, *, alpha: float, gate: str = "trained", index: int = 0, n: int = 16,
               seed: int = LEARN_SEED, fig=None) -> plt.Figure:
    """Each context example's vote for the true label, ``z G_i y_i q^T k_i``, of one test prompt (Eq. (3)) under
    a gate setting of :data:`GATE_SETTINGS`; the title gives ``z F``. Prompts come from the stream
    ``(seed, "learn/explorer/<alpha>")``, one per alpha (``index`` picks one of ``n``)."""
    from ..models.gated_attention import gate_from_logits

    if gate not in GATE_SETTINGS:
        raise ValueError(f"gate must be one of {tuple(GATE_SETTINGS)}; got {gate!r}")
    P, outlier, same, z = _explorer_prompt(pat, test, tasks, alpha, index, n, seed)
    with torch.no_grad():
        score = model.attention(P[None])[0]                               # (l+1,)
        G = {"trained": lambda: model.gate(P[None])[0], "w=0": lambda: gate_from_logits(torch.zeros_like(score)),
             "none": lambda: torch.ones_like(score)}[gate]()
    vote = (z * G * P[:, -1] * score)[:-1].numpy()                      # (l,)
    zF = float(vote.sum())
    fig = fig or plt.figure(figsize=(7.5, 3.4))
    fig.clear()
    ax = fig.subplots()
    colors = [PALETTE["same"] if s else PALETTE["other"] for s in np.asarray(same)]
    _bars(ax, vote, np.asarray(outlier), colors, f"alpha = {alpha:.1f}, {GATE_SETTINGS[gate]}: "
          f"$zF$ = {zF:+.2f} ({'right' if zF > 0 else 'wrong'})", "vote for the true label")
    ax.set_xlabel("context example $i$ (query to the right)")
    ax.legend(handles=[Patch(color=PALETTE["same"], label="query's pattern"),
                       Patch(color=PALETTE["other"], label="other pattern"),
                       Patch(facecolor="white", edgecolor=PALETTE["outlier"], lw=2, label="outlier (label flipped)")],
              fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    return fig


def html_vote_explorer(model, pat, test, tasks, *, alphas=EXPLORER_ALPHAS, gates=tuple(GATE_SETTINGS), index: int = 0,
                       n: int = 16, seed: int = LEARN_SEED, dpi: int = 80) -> str:
    """:func:`draw_votes` on the grid ``alphas x gates``, behind plain HTML controls (no kernel; see
    :func:`mambaicl.viz.explorer.frames_html`). Starts at the first alpha with the trained gate."""
    import io

    from .explorer import _quantize, frames_html

    frames = {}
    fig = plt.figure(figsize=(7.5, 3.4))
    try:
        for a, alpha in enumerate(alphas):
            for g, gate in enumerate(gates):
                draw_votes(model, pat, test, tasks, alpha=alpha, gate=gate, index=index, n=n, seed=seed, fig=fig)
                buf = io.BytesIO()
                fig.savefig(buf, format="png", dpi=dpi, facecolor="white", metadata={"Software": None})
                frames[(a, g)] = _quantize(buf.getvalue())
    finally:
        plt.close(fig)
    controls = [("alpha", "&alpha;", "range", [f"{a:.1f}" for a in alphas]),
                ("gate", "gate", "select", [GATE_SETTINGS[g] for g in gates])]
    return frames_html(frames, controls, (0, 0), alt=f"Votes of test prompt {index + 1} of {n}:")


def make_vote_explorer(model, pat, test, tasks, *, n: int = 16, seed: int = LEARN_SEED):
    """Live sliders (Jupyter, Colab; needs ``ipywidgets``) for alpha, the gate setting and the prompt."""
    import ipywidgets as W
    from IPython.display import display

    controls = {"alpha": W.FloatSlider(value=0.0, min=0.0, max=0.95, step=0.05, description="alpha"),
                "gate": W.Dropdown(options=[(v, k) for k, v in GATE_SETTINGS.items()], value="trained",
                                   description="gate"),
                "index": W.IntSlider(value=1, min=1, max=n, description="prompt")}
    out = W.Output()

    def redraw(_=None):
        with out:
            out.clear_output(wait=True)
            v = {k: c.value for k, c in controls.items()}
            fig = draw_votes(model, pat, test, tasks, alpha=v["alpha"], gate=v["gate"], index=v["index"] - 1, n=n,
                             seed=seed)
            display(fig)
            plt.close(fig)

    for c in controls.values():
        c.observe(redraw, names="value")
    redraw()
    return W.VBox([W.HBox(list(controls.values())), out])
