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


def test_frame_grid_contains_the_default_frame(setup):
    model, pat, test, tasks = setup
    grid = frame_grid(model, pat, test, tasks, alphas=(0.0,), kappas=(1.0,), placements=("FQ",), n=4, dpi=40)
    assert grid["alpha"] == (0.0, 0.3) and grid["kappa_a_prime"] == (1.0, 4.0)
    assert grid["placement"] == ("R", "FQ")  # the test's own placement is added, first
    assert len(grid["frames"]) == 8
    pngs = list(grid["frames"].values())
    assert all(p.startswith(b"\x89PNG") for p in pngs)
    assert len(set(pngs)) > 1, "different settings should draw different frames"
    with pytest.raises(ValueError, match=r"^placements must be a non-empty subset of \('R', 'FQ', 'CQ'\); got \('nowhere',\)"):
        frame_grid(model, pat, test, tasks, placements=("nowhere",))


def test_html_snippet_is_self_contained(setup):
    model, pat, test, tasks = setup
    snippet = html_explorer(model, pat, test, tasks, alphas=(0.0, 0.6), kappas=(1.0,), placements=("R", "CQ"),
                            n=4, dpi=40)
    assert "http" not in snippet and "require(" not in snippet, "no network, no widget library"
    assert len(re.findall(r'<input type="range" data-axis="(alpha|kappa_a_prime)"', snippet)) == 2
    assert '<select data-axis="placement"' in snippet
    payload = json.loads(re.search(r'<script type="application/json" class="mx-frames">(.*?)</script>', snippet,
                                   re.S).group(1))
    assert payload["axes"] == ["alpha", "kappa_a_prime", "placement"]
    assert payload["labels"]["alpha"] == ["0.00", "0.30", "0.60"]
    assert len(payload["frames"]) == 3 * 2 * 2
    for b64 in payload["frames"].values():
        assert base64.b64decode(b64).startswith(b"\x89PNG")
    d = defaults(test)
    start = re.search(r'data-frame="([0-9,]+)"', snippet).group(1)
    assert start == "1,1,0"  # alpha 0.3, kappa_a' 4.0, random: the explorer's defaults
    assert payload["labels"]["alpha"][1] == f"{d['alpha']:.2f}"
    first = re.search(r'<img class="mx-frame"[^>]*src="data:image/png;base64,([^"]+)"', snippet).group(1)
    assert first == payload["frames"][start]
    # deterministic: the same model and setting give the same snippet (stored outputs stay stable)
    again = html_explorer(model, pat, test, tasks, alphas=(0.0, 0.6), kappas=(1.0,), placements=("R", "CQ"),
                          n=4, dpi=40)
    assert again == snippet
