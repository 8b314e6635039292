"""mambaicl.viz.learn: the Learn part's computations against independent ones, and its figures."""
import importlib.util
import itertools
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from mambaicl.data import training_tasks  # noqa: E402
from mambaicl.models import OneLayerLinearTransformer, OneLayerMamba, attention_scores, gate_naive  # noqa: E402
from mambaicl.viz import learn  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _prompt(l=6, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    P = torch.randn(l + 1, d + 1, generator=g, dtype=torch.float64)
    P[:, -1] = torch.sign(P[:, -1])
    P[-1, -1] = 0
    return P


def test_votes_add_up_to_the_model_output_term_by_term():
    P = _prompt()
    model = OneLayerMamba(5, 7, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with torch.no_grad():
        model.W_B.add_(0.3 * torch.randn(7, 6, generator=torch.Generator().manual_seed(2), dtype=torch.float64))
    v = learn.votes(model, P)
    gate = gate_naive(P[None], model.w.detach())[0]  # the product form of Eq. (3), written out
    score = attention_scores(P[None], model.W_B.detach(), model.W_C.detach())[0]
    assert torch.allclose(v["vote"], gate * P[:, -1] * score, atol=1e-12)
    assert torch.allclose(v["F"], model(P[None])[0], atol=1e-12)
    lt = OneLayerLinearTransformer(5, 7, dtype=torch.float64)
    assert torch.equal(learn.votes(lt, P)["gate"], torch.ones(7, dtype=torch.float64))


def test_softmax_weights_by_hand():
    score = torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=torch.float64)  # three examples and the query
    e = [pow(2.718281828459045, s) for s in (1.0, -2.0, 0.5)]
    assert torch.allclose(learn.softmax_weights(score), torch.tensor([x / sum(e) for x in e], dtype=torch.float64))


@pytest.mark.parametrize("n", [1, 4, 7, 10])
def test_binomial_tail_by_enumeration(n):
    for alpha in (0.2, 0.5, 0.7):
        total = strict = 0.0
        for flips in itertools.product((0, 1), repeat=n):
            k = sum(flips)
            p = alpha ** k * (1 - alpha) ** (n - k)
            total += p * (2 * k >= n)  # a tie (F = 0) is an error: the book's one convention
            strict += p * (2 * k > n)
        assert abs(learn.binomial_tail(n, alpha) - total) < 1e-12
        assert abs(learn.binomial_tail(n, alpha, ties=False) - strict) < 1e-12


def test_cycle_pairs_are_the_training_cycle_and_its_chords():
    pairs = learn.cycle_pairs(6)
    assert {k: len(v) for k, v in pairs.items()} == {1: 6, 2: 6, 3: 3}
    assert set(pairs[1]) == {tuple(sorted(t)) for t in training_tasks(6).tolist()}


def test_figures_draw():
    score, gate = torch.linspace(-1, 2, 7), torch.linspace(0.01, 0.5, 7)
    out = [False, True, False, True, False, False]
    figs = [learn.fig_attention_map(score, gate, out, same=[True] * 6),
            learn.fig_skip_erase({"a": gate, "b": gate / 2}, k=3),
            learn.fig_training_graph(6, training_tasks(6)),
            learn.fig_votes({"mamba": {"vote": score, "F": score.sum()}, "linear": {"vote": score, "F": score.sum()}}, out),
            learn.fig_gate_training([0, 10], torch.stack([gate[:-1], gate[:-1] / 10]), out),
            learn.fig_gate_training([0, 10], torch.stack([gate[:-1], gate[:-1] / 10]), out, sigmas=torch.rand(2, 6)),
            learn.fig_intro_summary()]
    assert [len(f.axes) for f in figs] == [3, 1, 1, 2, 2, 4, 1]
    for f in figs:
        plt.close(f)


def test_intro_figure_is_up_to_date(tmp_path):
    spec = importlib.util.spec_from_file_location("intro_figure", ROOT / ".ci" / "intro_figure.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fresh = mod.main(tmp_path / "intro_summary.svg")
    assert fresh.read_bytes() == mod.TARGET.read_bytes(), "book/images/intro_summary.svg is stale: python .ci/intro_figure.py"


def test_vote_explorer_frames_and_controls():
    """The kernel-free vote explorer holds one frame per (alpha, gate setting) behind an alpha range and a gate menu."""
    import json
    import re

    from mambaicl.config import SYNTHETIC_DATA, SYNTHETIC_TEST
    from mambaicl.data import all_tasks, make_patterns
    from mambaicl.models import OneLayerMamba
    from mambaicl.seeding import torch_generator

    pat = make_patterns(SYNTHETIC_DATA, torch_generator(0, "patterns"))
    model = OneLayerMamba(SYNTHETIC_DATA.d, SYNTHETIC_DATA.d + 1, generator=torch_generator(0, "init"), dtype=torch.float64)
    tasks = all_tasks(SYNTHETIC_DATA.M1)
    snippet = learn.html_vote_explorer(model, pat, SYNTHETIC_TEST, tasks, alphas=(0.0, 0.5), dpi=20)
    payload = json.loads(re.search(r'class="mx-frames">(.*?)</script>', snippet, re.S)[1].replace("<\\/", "</"))
    assert payload["axes"] == ["alpha", "gate"] and len(payload["frames"]) == 2 * len(learn.GATE_SETTINGS)
    assert 'input type="range" data-axis="alpha"' in snippet and 'select data-axis="gate"' in snippet
    with pytest.raises(ValueError):
        learn.draw_votes(model, pat, SYNTHETIC_TEST, tasks, alpha=0.5, gate="open")
