"""The kernel-free explorer of Chapter 5 (``mambaicl.viz.explorer.html_explorer``): a grid of frames
behind plain HTML/JavaScript controls. The browser test (tests/test_site.py) moves its controls on
the built page; here the snippet itself is checked."""
from __future__ import annotations

import base64
import json
import re

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from mambaicl.config import DataConfig, TestConfig  # noqa: E402
from mambaicl.data import all_tasks, make_patterns  # noqa: E402
from mambaicl.models import OneLayerMamba  # noqa: E402
from mambaicl.viz.explorer import defaults, frame_grid, html_explorer  # noqa: E402


@pytest.fixture(scope="module")
def setup():
    torch.set_num_threads(1)
    data = DataConfig(d=16, M1=4, M2=4, V=3, l_tr=8)
    pat = make_patterns(data, torch.Generator().manual_seed(0))
    test = TestConfig(l_ts=8, alpha=0.3, kappa_a_prime=4.0, placement="R")
    model = OneLayerMamba(data.d, 2 * data.l_tr + 1, generator=torch.Generator().manual_seed(0)).double()
    return model, pat, test, all_tasks(data.M1)


#: One grid for both tests (each frame costs ~0.4 s of matplotlib): alpha 0.6 with the test's 0.3 sorted
#: in front of it, kappa_a' 1.0 with the test's 4.0 after it, CQ with the test's own placement R added first.
GRID = {"alphas": (0.6,), "kappas": (1.0,), "placements": ("CQ",), "n": 4, "dpi": 40}


@pytest.fixture(scope="module")
def grid(setup):
    """frame_grid's 2 x 2 x 2 frames, rendered once for the module."""
    return frame_grid(*setup, **GRID)


@pytest.fixture(scope="module")
def snippet(setup):
    """html_explorer on the same grid: its frames are rendered a second time, independently of :func:`grid`."""
    return html_explorer(*setup, **GRID)


def test_frame_grid_contains_the_default_frame(setup, grid):
    model, pat, test, tasks = setup
    assert grid["alpha"] == (0.3, 0.6) and grid["kappa_a_prime"] == (1.0, 4.0)  # sorted, the test's own added
    assert grid["placement"] == ("R", "CQ")  # the test's own placement is added, first
    assert len(grid["frames"]) == 8
    pngs = list(grid["frames"].values())
    assert all(p.startswith(b"\x89PNG") for p in pngs)
    assert len(set(pngs)) > 1, "different settings should draw different frames"
    # the test's own values already on the axes are not added twice; its frame is the grid's default frame
    own = frame_grid(model, pat, test, tasks, alphas=(0.3,), kappas=(4.0,), placements=("R",), n=4, dpi=40)
    assert (own["alpha"], own["kappa_a_prime"], own["placement"]) == ((0.3,), (4.0,), ("R",))
    assert own["frames"] == {(0, 0, 0): grid["frames"][(0, 1, 0)]}
    with pytest.raises(ValueError, match=r"^placements must be a non-empty subset of \('R', 'FQ', 'CQ'\); got \('nowhere',\)"):
        frame_grid(model, pat, test, tasks, placements=("nowhere",))


def test_html_snippet_is_self_contained(setup, grid, snippet, monkeypatch):
    assert "http" not in snippet and "require(" not in snippet, "no network, no widget library"
    assert len(re.findall(r'<input type="range" data-axis="(alpha|kappa_a_prime)"', snippet)) == 2
    assert '<select data-axis="placement"' in snippet
    payload = json.loads(re.search(r'<script type="application/json" class="mx-frames">(.*?)</script>', snippet,
                                   re.S).group(1))
    assert payload["axes"] == ["alpha", "kappa_a_prime", "placement"]
    assert payload["labels"]["alpha"] == ["0.30", "0.60"]
    assert len(payload["frames"]) == 2 * 2 * 2
    for b64 in payload["frames"].values():
        assert base64.b64decode(b64).startswith(b"\x89PNG")
    d = defaults(setup[2])
    start = re.search(r'data-frame="([0-9,]+)"', snippet).group(1)
    assert start == "0,1,0"  # alpha 0.3, kappa_a' 4.0, random: the explorer's defaults
    assert payload["labels"]["alpha"][0] == f"{d['alpha']:.2f}"
    first = re.search(r'<img class="mx-frame"[^>]*src="data:image/png;base64,([^"]+)"', snippet).group(1)
    assert first == payload["frames"][start]
    # deterministic: the same model and setting give the same snippet (stored outputs stay stable). The
    # snippet's frames were rendered independently of `grid`'s: every frame is byte-identical, and the
    # snippet built around `grid`'s rendering is byte-identical to the one built around its own.
    assert payload["frames"] == {",".join(map(str, k)): base64.b64encode(png).decode("ascii")
                                 for k, png in grid["frames"].items()}
    from mambaicl.viz import explorer

    def rendered(*args, **kw):
        assert all(a is b for a, b in zip(args, setup, strict=True)) and kw == {**GRID, "index": 0, "layer": 0, "seed": 0}, (args, kw)
        return grid

    monkeypatch.setattr(explorer, "frame_grid", rendered)
    assert html_explorer(*setup, **GRID) == snippet
