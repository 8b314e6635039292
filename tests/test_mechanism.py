"""Corollary 1-2 measurements: sums, ranks, gates of a trained one-layer model, deep-model probes."""
import dataclasses
import math

import pytest
import torch

from mambaicl.config import FIG2, TrainConfig
from mambaicl.data import all_tasks, make_patterns, training_tasks
from mambaicl.data import test_prompts as draw_test_prompts
from mambaicl.mechanism import (
    FIG3,
    DeepMechanismConfig,
    attention_sums,
    clean_gates_by_rank,
    float_patterns,
    mechanism_report,
    placement_cost,
    query_terms,
    split_gates,
)
from mambaicl.models.deep import build_model, paper_scan_terms
from mambaicl.train import make_model, train


def small_setup(alpha=0.3, placement="random", n=16, seed=0):
    data = dataclasses.replace(FIG2.data, p_a=0.4)
    pat = make_patterns(data, torch.Generator().manual_seed(0))
    test = dataclasses.replace(FIG2.test, alpha=alpha, placement=placement)
    pr = draw_test_prompts(pat, test, all_tasks(data.M1), n, torch.Generator().manual_seed(seed))
    return data, pat, test, pr


def test_attention_sums_match_a_loop():
    _, _, _, pr = small_setup()
    att = torch.randn(pr.P.shape[:2], generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    same, other = attention_sums(att, pr.relevant)
    for b in range(att.shape[0]):
        s = sum(att[b, i] for i in range(att.shape[1] - 1) if pr.relevant[b, i] == pr.relevant[b, -1])
        o = sum(att[b, i] for i in range(att.shape[1] - 1) if pr.relevant[b, i] != pr.relevant[b, -1])
        assert abs(same[b] - s) < 1e-12 and abs(other[b] - o) < 1e-12


def test_clean_gates_by_rank_matches_a_loop():
    _, _, _, pr = small_setup(alpha=0.5)
    G = torch.rand(pr.P.shape[:2], generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    ranks = clean_gates_by_rank(G, pr.outlier, J=20)
    for b in range(G.shape[0]):
        clean_from_query = [i for i in range(pr.outlier.shape[1] - 1, -1, -1) if not pr.outlier[b, i]]
        for j in range(20):
            if j < len(clean_from_query):
                assert ranks[b, j] == G[b, clean_from_query[j]]
            else:
                assert math.isnan(ranks[b, j])
    g_out, g_clean = split_gates(G, pr.outlier)
    assert g_out.numel() + g_clean.numel() == pr.outlier.numel()


def independent_gates(w, P):
    """G_{i,l+1}(w) of Eq. (3) with Python floats: sigma(w^T p_i) prod_{j>i} (1 - sigma(w^T p_j))."""
    sig = lambda t: 1.0 / (1.0 + math.exp(-t))  # noqa: E731
    out = []
    for prompt in P.tolist():
        logits = [sum(wk * pk for wk, pk in zip(w, p)) for p in prompt]
        row = []
        for i in range(len(prompt)):
            g = sig(logits[i])
            for j in range(i + 1, len(prompt)):
                g *= 1.0 - sig(logits[j])
            row.append(g)
        out.append(row)
    return torch.tensor(out, dtype=torch.float64)


def test_trained_one_layer_gates_match_an_independent_computation_from_saved_w(tmp_path):
    data, pat, _, pr = small_setup(n=8)
    cfg = TrainConfig(eta=0.3, B=32, T=20, delta=0.2, m=31)
    model = make_model("mamba", data, cfg, torch.Generator().manual_seed(1))
    train(model, pat, data, cfg, training_tasks(data.M1), seed=2, progress=False)
    torch.save(model.state_dict(), tmp_path / "model.pt")
    w = torch.load(tmp_path / "model.pt")["w"].tolist()
    reported = query_terms(model, pr.P)[0][1]
    assert (reported - independent_gates(w, pr.P)).abs().max() < 1e-6


def test_deep_query_terms_read_the_label_channel_of_the_first_layer():
    d = 30
    model = build_model("mamba", d, n_layers=2, d_model=40, generator=torch.Generator().manual_seed(0)).double()
    _, _, _, pr = small_setup(n=4)
    terms = query_terms(model, pr.P)
    assert len(terms) == 2
    u = model.norms[0](pr.P @ model.embed.T)
    mixer = model.mixers[0]
    scores, G = paper_scan_terms(u, mixer.W_B, mixer.W_C, mixer.W)
    assert (terms[0][0] - scores[:, 0, -1]).abs().max() < 1e-12
    assert (terms[0][1] - G[:, 0, -1, :, d]).abs().max() < 1e-12
    reps = mechanism_report(model, pr, J=3)
    assert len(reps) == 2 and len(reps[0].rank) == 3 and len(reps[0].decay) == 2


def test_linear_transformer_has_no_gate():
    model = build_model("linear", 30, n_layers=1, d_model=40, generator=torch.Generator().manual_seed(0)).double()
    _, _, _, pr = small_setup(n=4)
    (att, G), = query_terms(model, pr.P)
    assert G is None and att.shape == pr.P.shape[:2]


def test_placement_cost_moves_the_first_clean_example_away_under_cq():
    data, pat, test, _ = small_setup()
    model = build_model("mamba", 30, n_layers=1, d_model=40, generator=torch.Generator().manual_seed(0)).double()
    cost = placement_cost(model, pat, test, all_tasks(data.M1), n=64, seed=0)
    assert set(cost) == {"far", "random", "close"}
    assert cost["far"]["first_clean_distance"] == 1.0
    assert cost["close"]["first_clean_distance"] > cost["random"]["first_clean_distance"]


def test_float_patterns():
    _, pat, _, _ = small_setup()
    assert float_patterns(pat).mu.dtype == torch.float32


@pytest.mark.parametrize("kw,name", [({"kind": "rnn"}, "kind"), ({"n_layers": 0}, "n_layers"), ({"p_a": 1.0}, "p_a"),
                                     ({"optimizer": "lbfgs"}, "optimizer"), ({"loss": "mse"}, "loss"),
                                     ({"lr": 0.0}, "lr"), ({"steps": -1}, "steps")])
def test_config_validation(kw, name):
    with pytest.raises(ValueError, match=name):
        DeepMechanismConfig(**kw)


def test_fig3_preset_is_the_papers_three_layer_mamba():
    assert FIG3.kind == "mamba" and FIG3.n_layers == 3 and FIG3.p_a == 0.4


def test_explorer_static_frame_and_widget():
    import matplotlib

    matplotlib.use("Agg")
    pytest.importorskip("ipywidgets")
    from mambaicl.explorer import defaults, make_explorer, static_explorer
    from mambaicl.models import OneLayerMamba

    data, pat, test, _ = small_setup()
    model = OneLayerMamba(data.d, 31, generator=torch.Generator().manual_seed(0)).double()
    fig = static_explorer(model, pat, test, all_tasks(data.M1))
    assert len(fig.axes) == 2
    assert defaults(test)["alpha"] == test.alpha
    widget = make_explorer(model, pat, test, all_tasks(data.M1))
    widget.children[1].children[0].value = "close"  # placement dropdown: redraws without error
    with pytest.raises(ValueError, match="index"):
        static_explorer(model, pat, test, all_tasks(data.M1), index=99)
