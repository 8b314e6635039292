"""An explorer of a trained model's gates and attention on test prompts (Chapter 5).

Glossary (code name -> paper symbol):

=================  ==============================================================
``alpha``          fraction of test examples with an outlier, Eq. (5)
``kappa_a_prime``  test outlier magnitude ``kappa_a'``, Eq. (5)
``placement``      where the outliers sit: ``"R"`` (random), ``"FQ"`` (far from the query), ``"CQ"`` (close to it)
``index``          which of the ``n`` drawn test prompts is shown (0-based; shown from 1)
=================  ==============================================================

:func:`draw` makes the figure; :func:`make_explorer` wraps it in ``ipywidgets`` sliders that
redraw it live (Jupyter, Colab); :func:`static_explorer` draws it once with the explorer's
defaults; :func:`html_explorer` renders a small grid of frames (alpha x kappa_a' x placement) to
PNG and returns an HTML snippet whose plain HTML/JavaScript controls switch between them, which
is what the built HTML book shows: it needs no kernel and no network.
"""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import html
import io
import json

import matplotlib.pyplot as plt
import torch

from matplotlib.patches import Patch

from ..analysis.corollaries import query_terms
from ..config import ConfigError, TestConfig
from ..data import Patterns, test_prompts
from ..data.vocabulary import PLACEMENTS
from ..seeding import numpy_stream
from .figures import gate_legend, integer_ticks
from .style import PALETTE

__all__ = ["defaults", "draw", "static_explorer", "make_explorer", "frame_grid", "html_explorer", "frames_html"]

#: The grid of the kernel-free explorer (the test setting's own values are added to it).
GRID_ALPHAS = (0.0, 0.3, 0.6, 0.8)
GRID_KAPPAS = (0.5, 2.0)
PLACEMENT_NAMES = {"R": "random (R)", "FQ": "far from the query (FQ)", "CQ": "close to the query (CQ)"}


def defaults(test: TestConfig) -> dict:
    """The explorer's first frame: ``test``'s alpha, kappa_a' and placement, prompt 0."""
    return {"alpha": test.alpha, "kappa_a_prime": test.kappa_a_prime, "placement": test.placement, "index": 0}


def _prompt(pat, test, tasks, alpha, kappa_a_prime, placement, index, n, seed):
    if not (0 <= index < n):
        raise ConfigError(f"index must lie in [0, {n}); got {index!r}")
    cfg = dataclasses.replace(test, alpha=float(alpha), kappa_a_prime=float(kappa_a_prime), placement=placement)
    pr = test_prompts(pat, cfg, tasks, n, numpy_stream(seed, "test/explorer"))
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
        raise ConfigError(f"layer must lie in [0, {len(terms)}); got {layer!r}")
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
        "placement": W.Dropdown(options=[(PLACEMENT_NAMES[p], p) for p in PLACEMENTS], value=d["placement"], description="placement"),
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


def _axis(values, default) -> tuple:
    """Sorted unique floats of ``values`` plus ``default`` (so the first frame is the explorer's default)."""
    return tuple(sorted({round(float(v), 6) for v in (*values, default)}))


def frame_grid(model, pat: Patterns, test: TestConfig, tasks: torch.Tensor, *, alphas=GRID_ALPHAS,
               kappas=GRID_KAPPAS, placements=PLACEMENTS, index: int = 0, layer: int = 0, n: int = 32,
               seed: int = 0, dpi: int = 90) -> dict:
    """Every frame of the grid ``alphas x kappas x placements`` as PNG bytes.

    ``test``'s own alpha and kappa_a' are added to the grids, so the grid contains the explorer's
    first frame (:func:`defaults`). Each frame is :func:`draw` of prompt ``index`` at that setting.

    Returns:
        ``{"alpha": (...), "kappa_a_prime": (...), "placement": (...), "frames": {(a, k, p): png}}``
        with ``a``, ``k``, ``p`` indices into the three axes.
    """
    unknown = set(placements) - set(PLACEMENTS)
    if unknown or not placements:
        raise ConfigError(f"placements must be a non-empty subset of {PLACEMENTS}; got {tuple(placements)!r}")
    if test.placement not in placements:
        placements = (test.placement, *placements)
    grid = {"alpha": _axis(alphas, test.alpha), "kappa_a_prime": _axis(kappas, test.kappa_a_prime),
            "placement": tuple(placements), "frames": {}}
    fig = plt.figure(figsize=(8, 4.6))
    try:
        for a, alpha in enumerate(grid["alpha"]):
            for k, kappa in enumerate(grid["kappa_a_prime"]):
                for p, placement in enumerate(grid["placement"]):
                    draw(model, pat, test, tasks, alpha=alpha, kappa_a_prime=kappa, placement=placement,
                         index=index, layer=layer, n=n, seed=seed, fig=fig)
                    buf = io.BytesIO()
                    # white, opaque frames: readable on the site's light and dark backgrounds alike
                    fig.savefig(buf, format="png", dpi=dpi, facecolor="white", metadata={"Software": None})
                    grid["frames"][(a, k, p)] = _quantize(buf.getvalue())
    finally:
        plt.close(fig)
    return grid


def _quantize(png: bytes) -> bytes:
    """The PNG with an adaptive 256-colour palette (a third of the size; the bars' colours are exact)."""
    try:
        from PIL import Image
    except ImportError:  # Pillow comes with matplotlib; keep the full-colour PNG otherwise
        return png
    im = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    im.save(out, format="PNG", optimize=True)
    return out.getvalue()


_JS = """(function () {
  var root = document.getElementById(%(uid)s);
  var data = JSON.parse(root.querySelector('script.mx-frames').textContent);
  var img = root.querySelector('img.mx-frame');
  var inputs = root.querySelectorAll('[data-axis]');
  function update() {
    var key = [];
    inputs.forEach(function (el) {
      var i = parseInt(el.value, 10);
      key.push(i);
      var out = root.querySelector('output[data-for="' + el.dataset.axis + '"]');
      if (out) { out.textContent = data.labels[el.dataset.axis][i]; }
    });
    img.src = 'data:image/png;base64,' + data.frames[key.join(',')];
    img.alt = data.alt + ' ' + key.map(function (i, j) { return data.axes[j] + ' = ' + data.labels[data.axes[j]][i]; }).join(', ');
    root.dataset.frame = key.join(',');
  }
  inputs.forEach(function (el) { el.addEventListener('input', update); el.addEventListener('change', update); });
  update();
})();"""


def html_explorer(model, pat: Patterns, test: TestConfig, tasks: torch.Tensor, *, alphas=GRID_ALPHAS,
                  kappas=GRID_KAPPAS, placements=PLACEMENTS, index: int = 0, layer: int = 0, n: int = 32,
                  seed: int = 0, dpi: int = 90) -> str:
    """The explorer without a kernel: :func:`frame_grid`'s frames behind plain HTML/JavaScript controls.

    Two range inputs (alpha, kappa_a') and a menu (the placement) choose one of the precomputed
    frames, embedded as base64 PNGs: the snippet needs no kernel, no widget library and no network,
    so it works in the built book opened from disk. Show it with ``IPython.display.HTML``. The
    controls start at :func:`defaults` (``test``'s setting), the frame :func:`static_explorer` draws.
    The snippet's root ``div`` carries ``data-frame="a,k,p"``, the indices of the frame shown.

    Returns:
        The HTML snippet (a ``str``).
    """
    grid = frame_grid(model, pat, test, tasks, alphas=alphas, kappas=kappas, placements=placements, index=index,
                      layer=layer, n=n, seed=seed, dpi=dpi)
    axes = ("alpha", "kappa_a_prime", "placement")
    labels = {"alpha": [f"{a:.2f}" for a in grid["alpha"]],
              "kappa_a_prime": [f"{k:.2f}" for k in grid["kappa_a_prime"]],
              "placement": [PLACEMENT_NAMES[p] for p in grid["placement"]]}
    start = (grid["alpha"].index(round(float(test.alpha), 6)),
             grid["kappa_a_prime"].index(round(float(test.kappa_a_prime), 6)),
             grid["placement"].index(test.placement))
    names = {"alpha": "&alpha;", "kappa_a_prime": "&kappa;<sub>a</sub>&prime;", "placement": "placement"}
    controls = [(axis, names[axis], "select" if axis == "placement" else "range", labels[axis]) for axis in axes]
    return frames_html(grid["frames"], controls, start,
                       alt=f"Gates and attention of layer {layer + 1}, prompt {index + 1} of {n}:")


def frames_html(frames: dict, controls: list, start: tuple, *, alt: str) -> str:
    """Precomputed PNG frames behind plain HTML/JavaScript controls: the kernel-free explorer's snippet.

    Args:
        frames: ``{(i_1, ..., i_k): png bytes}``, one index per control.
        controls: ``[(axis, label_html, "range" | "select", [value labels])]`` in key order; a range input
            shows its value in an ``<output>``, a select lists the labels as options.
        start: the key of the first frame shown.
        alt: the images' alternative text (the controls' values are appended).

    Returns:
        An HTML ``str``; its root ``div.mambaicl-explorer`` carries ``data-frame`` (the key shown).
    """
    axes = [c[0] for c in controls]
    labels = {c[0]: list(c[3]) for c in controls}
    frames = {",".join(map(str, key)): base64.b64encode(png).decode("ascii") for key, png in frames.items()}
    uid = "mx-" + hashlib.sha1("".join(frames[k] for k in sorted(frames)).encode()).hexdigest()[:10]
    payload = json.dumps({"axes": axes, "labels": labels, "frames": frames, "alt": alt},
                         sort_keys=True).replace("</", "<\\/")
    html_controls = []
    for j, (axis, name, kind, values) in enumerate(controls):
        if kind == "range":
            html_controls.append(
                f'<label style="margin-right:1.5em">{name} '
                f'<input type="range" data-axis="{axis}" min="0" max="{len(values) - 1}" step="1" '
                f'value="{start[j]}" aria-label="{axis}" style="vertical-align:middle"> '
                f'<output data-for="{axis}">{values[start[j]]}</output></label>')
        else:
            options = "".join(f'<option value="{i}"{" selected" if i == start[j] else ""}>{html.escape(v)}</option>'
                              for i, v in enumerate(values))
            html_controls.append(f'<label>{name} <select data-axis="{axis}" aria-label="{axis}">{options}</select></label>')
    first = frames[",".join(map(str, start))]
    return (f'<div class="mambaicl-explorer" id="{uid}" data-frame="{",".join(map(str, start))}">'
            f'<div class="mx-controls" style="margin:0.25em 0 0.5em 0">{"".join(html_controls)}</div>'
            f'<img class="mx-frame" style="max-width:100%;height:auto" src="data:image/png;base64,{first}" '
            f'alt="the explorer\'s frame">'
            f'<script type="application/json" class="mx-frames">{payload}</script>'
            f'<script>{_JS % {"uid": json.dumps(uid)}}</script></div>')
