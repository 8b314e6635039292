"""An explorer of a trained model's gates and attention on test prompts (Chapter 5).

Glossary (code name -> paper symbol):

=================  ==============================================================
``alpha``          fraction of test examples with an outlier, Eq. (5)
``kappa_a_prime``  test outlier magnitude ``kappa_a'``, Eq. (5)
``placement``      where the outliers sit: ``"random"`` (R), ``"far"`` (FQ), ``"close"`` (CQ)
``index``          which of the ``n`` drawn test prompts is shown (0-based; shown from 1)
=================  ==============================================================

:func:`draw` makes the figure; :func:`make_explorer` wraps it in ``ipywidgets`` sliders that
redraw it live (Jupyter, Colab); :func:`static_explorer` draws it once with the explorer's
defaults, which is what the built HTML book shows.
"""
from __future__ import annotations

import dataclasses

import matplotlib.pyplot as plt
import torch

from matplotlib.patches import Patch

from ..analysis.corollaries import query_terms
from ..config import TestConfig
from ..data import Patterns, test_prompts
from ..seeding import torch_generator
from .figures import gate_legend, integer_ticks
from .style import PALETTE

__all__ = ["defaults", "draw", "static_explorer", "make_explorer"]


def defaults(test: TestConfig) -> dict:
    """The explorer's first frame: ``test``'s alpha, kappa_a' and placement, prompt 0."""
    return {"alpha": test.alpha, "kappa_a_prime": test.kappa_a_prime, "placement": test.placement, "index": 0}


def _prompt(pat, test, tasks, alpha, kappa_a_prime, placement, index, n, seed):
    if not (0 <= index < n):
        raise ValueError(f"index must lie in [0, {n}); got {index!r}")
    cfg = dataclasses.replace(test, alpha=float(alpha), kappa_a_prime=float(kappa_a_prime), placement=placement)
    pr = test_prompts(pat, cfg, tasks, n, torch_generator(seed, "test/explorer"))
    return pr, index


def draw(model, pat: Patterns, test: TestConfig, tasks: torch.Tensor, *, alpha: float, kappa_a_prime: float,
         placement: str, index: int, layer: int = 0, n: int = 32, seed: int = 0, fig=None):
    """Gate (top) and attention (bottom) of every context example of one test prompt, read by the query.

    Red bars: examples carrying an outlier; green: clean. In the attention panel, blue bars
    share the query's relevant pattern (the set ``N_1`` of Corollary 1), grey bars do not, and a
    red outline marks an outlier example. Prompts come from the stream ``(seed, "test/explorer")``.

    Returns:
        The matplotlib figure.
    """
    pr, i = _prompt(pat, test, tasks, alpha, kappa_a_prime, placement, index, n, seed)
    terms = query_terms(model, pr.P[i : i + 1])
    if not (0 <= layer < len(terms)):
        raise ValueError(f"layer must lie in [0, {len(terms)}); got {layer!r}")
    att, G = terms[layer]
    l = pr.outlier.shape[1]
    dist = torch.arange(l, 0, -1).numpy()  # distance from the query: l ... 1
    fig = fig or plt.figure(figsize=(8, 4.6))
    fig.clear()
    ax_g, ax_a = fig.subplots(2, 1, sharex=True)
    out = pr.outlier[i]
    if G is not None:
        ax_g.bar(dist, G[0, :-1].detach().cpu().numpy(), color=[PALETTE["outlier"] if o else PALETTE["clean"] for o in out])
        ax_g.set_yscale("log")
        gate_legend(ax_g, loc="upper left")
    ax_g.set_ylabel("gate $G_{i,l+1}$")
    ax_g.set_title(f"layer {layer + 1}: alpha={alpha:.2f}, kappa_a'={kappa_a_prime:.2f}, {placement}, "
                   f"prompt {i + 1} of {n}")  # counted from 1, as in the book's prose
    same = pr.relevant[i, :-1] == pr.relevant[i, -1]
    ax_a.bar(dist, att[0, :-1].detach().cpu().numpy(), color=[PALETTE["same"] if s else PALETTE["other"] for s in same],
             edgecolor=[PALETTE["outlier"] if o else "none" for o in out], linewidth=1.5)
    ax_a.legend(handles=[Patch(color=PALETTE["same"], label="same pattern as the query"),
                         Patch(color=PALETTE["other"], label="other pattern"),
                         Patch(facecolor="white", edgecolor=PALETTE["outlier"], label="outlier (outline)")],
                fontsize=8, loc="upper left")
    ax_a.set_ylabel("attention")
    ax_a.set_xlabel("distance from the query (1 = adjacent)")
    ax_a.invert_xaxis()
    integer_ticks(ax_a, "x")
    fig.tight_layout()
    return fig


def static_explorer(model, pat, test, tasks, **kw):
    """:func:`draw` with :func:`defaults` (overridden by ``kw``): the explorer's first frame."""
    return draw(model, pat, test, tasks, **{**defaults(test), **kw})


def make_explorer(model, pat: Patterns, test: TestConfig, tasks: torch.Tensor, *, layer: int = 0,
                  n: int = 32, seed: int = 0, **overrides):
    """Sliders for alpha, kappa_a', the placement and the prompt index; the figure redraws live.

    Needs ``ipywidgets`` (``pip install ipywidgets``) and a running Jupyter or Colab kernel.
    """
    import ipywidgets as W
    from IPython.display import display

    d = {**defaults(test), **overrides}
    controls = {
        "alpha": W.FloatSlider(value=d["alpha"], min=0.0, max=0.9, step=0.05, description="alpha"),
        "kappa_a_prime": W.FloatSlider(value=d["kappa_a_prime"], min=0.5, max=12.0, step=0.25,
                                       description="kappa_a'"),
        "placement": W.Dropdown(options=["random", "far", "close"], value=d["placement"], description="placement"),
        "index": W.IntSlider(value=d["index"] + 1, min=1, max=n, description="prompt"),  # shown from 1
    }
    out = W.Output()

    def redraw(_=None):
        with out:
            out.clear_output(wait=True)
            values = {k: c.value for k, c in controls.items()}
            values["index"] -= 1  # the slider counts prompts from 1
            fig = draw(model, pat, test, tasks, layer=layer, n=n, seed=seed, **values)
            display(fig)
            plt.close(fig)

    for c in controls.values():
        c.observe(redraw, names="value")
    redraw()
    return W.VBox([W.HBox(list(controls.values())[:2]), W.HBox(list(controls.values())[2:]), out])
