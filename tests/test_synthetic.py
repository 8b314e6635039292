"""Synthetic data (§3.2, Def. 1-2, Cond. 1), configs, probes and theory, each against an independent computation."""
import dataclasses
import math

import numpy as np
import pytest
import torch

from mambaicl import OneLayerMamba
from mambaicl import config as C
from mambaicl import data as D
from mambaicl.config import FIG2, PLAIN, DataConfig, Preset, TrainConfig, get_preset
from mambaicl.data import (all_tasks, check_condition_1, make_patterns, training_prompts, training_tasks,
                           unseen_tasks)
from mambaicl.data.prompts import outlier_mask
from mambaicl.evaluate import zero_one_error
from mambaicl.probes import cyclic_distance, lemma3, lemma6_sums, pattern_attention, task_groups
from mambaicl import theory

BAD = [
    (DataConfig, dict(d=19), "d must exceed"),  # d <= M1 + M2 + V
    (DataConfig, dict(d=10, M1=6, M2=3, V=1), "d must exceed"),
    (DataConfig, dict(M1=2), "M1"),
    (DataConfig, dict(M2=0), "M2"),
    (DataConfig, dict(V=0), "V"),
    (DataConfig, dict(beta=0.5), "beta"),
    (DataConfig, dict(beta=-3.0), "beta"),
    (DataConfig, dict(outlier_norm=0.0), "outlier_norm"),
    (DataConfig, dict(kappa_a=0.0), "kappa_a"),
    (DataConfig, dict(p_a=1.0), "p_a"),
    (DataConfig, dict(p_a=-0.1), "p_a"),
    (DataConfig, dict(K=0.6), "K"),
    (DataConfig, dict(l_tr=0), "l_tr"),
    (DataConfig, dict(l_tr=2.5), "l_tr"),
    (C.TestConfig, dict(alpha=1.0), "alpha"),
    (C.TestConfig, dict(alpha=-0.2), "alpha"),
    (C.TestConfig, dict(l_ts=0), "l_ts"),
    (C.TestConfig, dict(K_prime=1.0), "K_prime"),
    (C.TestConfig, dict(kappa_a_prime=0.0), "kappa_a_prime"),
    (C.TestConfig, dict(rule="D"), "rule"),
    (C.TestConfig, dict(placement="middle"), "placement"),
    (C.TestConfig, dict(target_label=0), "target_label"),
    (C.TestConfig, dict(v_coeffs=((0.1, 0.1, 0.0),)), "v_coeffs"),
    (C.TestConfig, dict(alpha=float("nan")), "alpha"),
    (TrainConfig, dict(eta=0.0), "eta"),
    (TrainConfig, dict(eta=1.5), "eta"),
    (TrainConfig, dict(B=0), "B"),
    (TrainConfig, dict(T=0), "T"),
    (TrainConfig, dict(delta=0.3), "delta"),
    (TrainConfig, dict(delta=0.0), "delta"),
    (Preset, dict(name="x", train_mamba=TrainConfig(m=20)), "m must be >="),
    (Preset, dict(name="x", alphas=(0.5, 1.0)), "alphas"),
    (Preset, dict(name="x", rules=("A", "Z")), "rules"),
    (Preset, dict(name="x", n_test=0), "n_test"),
]


@pytest.mark.parametrize("cls,kwargs,match", BAD, ids=[f"{c.__name__}-{k}" for c, k, _ in BAD])
def test_bad_configs_raise(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**kwargs)


def test_presets_valid_and_lookup():
    assert get_preset("fig2") is FIG2 and get_preset("plain") is PLAIN
    with pytest.raises(ValueError, match="unknown preset"):
        get_preset("nope")
    assert FIG2.test.kappa_a_prime * FIG2.test.L >= FIG2.data.kappa_a - 1e-2


def test_patterns_orthogonal_with_norms():
    cfg = DataConfig(outlier_norm=2.0)
    pat = make_patterns(cfg, torch.Generator().manual_seed(0))
    X = torch.cat([pat.mu, pat.nu, pat.v]).numpy()
    norms = np.r_[np.full(cfg.M1 + cfg.M2, cfg.beta), np.full(cfg.V, 2.0)]
    np.testing.assert_allclose(X @ X.T, np.diag(norms**2), atol=1e-10)


def test_test_outliers_match_formula():
    pat = make_patterns(DataConfig(), torch.Generator().manual_seed(1))
    vt = D.test_outliers(pat.v, C.TestConfig().v_coeffs).numpy()
    v = pat.v.numpy()
    np.testing.assert_allclose(vt[0], 0.7 * v[0] + 0.6 * v[1] - 0.4 * v[2], atol=1e-12)
    np.testing.assert_allclose(vt[2], -0.7 * v[0] + 0.5 * v[1] + 0.5 * v[2], atol=1e-12)


def test_tasks_and_condition_1():
    tr = training_tasks(6)
    assert tr.tolist() == [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 0]]
    assert check_condition_1(tr, 6)
    assert not check_condition_1(torch.tensor([[0, 1], [1, 2]]), 6)
    assert len(all_tasks(6)) == 30 and len(unseen_tasks(6)) == 24
    assert not ({tuple(t) for t in unseen_tasks(6).tolist()} & {tuple(t) for t in tr.tolist()})


def _decode(P, pat):
    """Independent reading of a prompt: relevant index, outlier flag by projection."""
    x = P[..., :-1]
    rel = (x @ pat.mu.T).argmax(-1)
    out = (x @ pat.v.T).abs().sum(-1) > 1e-9
    return rel, out


def test_training_prompts_follow_definition_1():
    cfg = DataConfig()
    pat = make_patterns(cfg, torch.Generator().manual_seed(0))
    pr = training_prompts(pat, cfg, training_tasks(6), 3000, torch.Generator().manual_seed(1))
    rel, out = _decode(pr.P, pat)
    assert torch.equal(rel, pr.relevant) and torch.equal(out[:, :-1], pr.outlier)
    assert not out[:, -1].any() and torch.all(pr.P[:, -1, -1] == 0)  # query: no outlier, label 0
    a, b = training_tasks(6)[pr.task].T
    expect = torch.where(rel == a[:, None], 1.0, -1.0).double()
    assert torch.all(pr.P[:, :-1, -1][~pr.outlier] == expect[:, :-1][~pr.outlier])
    assert torch.equal(pr.z, expect[:, -1])
    assert abs(pr.outlier.double().mean().item() - cfg.p_a) < 0.01
    assert abs(pr.P[:, :-1, -1][pr.outlier].mean().item()) < 0.02  # random labels on outliers
    kappa = (pr.P[..., :-1] @ pat.nu.T).abs().max(-1).values / cfg.beta**2
    assert kappa.max() <= cfg.K


@pytest.mark.parametrize("rule", ["A", "B", "C"])
def test_test_prompts_labelling_rules(rule):
    pat = make_patterns(DataConfig(), torch.Generator().manual_seed(0))
    test = C.TestConfig(alpha=0.5, rule=rule, kappa_a_prime=5.0, K_prime=2.0)
    pr = D.test_prompts(pat, test, all_tasks(6), 3000, torch.Generator().manual_seed(2))
    a, b = all_tasks(6)[pr.task].T
    true = torch.where(pr.relevant == a[:, None], 1.0, -1.0).double()[:, :-1]
    y = pr.P[:, :-1, -1]
    assert torch.all(y[~pr.outlier] == true[~pr.outlier])
    if rule == "A":
        assert torch.all(y[pr.outlier] == -true[pr.outlier])
    elif rule == "B":
        assert torch.all(y[pr.outlier] == 1)
    else:
        assert abs(y[pr.outlier].mean().item()) < 0.03
    assert abs(pr.outlier.double().mean().item() - 0.5) < 0.01
    proj = pr.P[..., :-1] @ pat.v.T  # (batch, l+1, V)
    assert torch.all(proj[:, -1].abs() < 1e-9)  # query clean


def test_placements():
    g = torch.Generator().manual_seed(0)
    far = outlier_mask(2000, 20, 0.4, "far", g)
    close = outlier_mask(2000, 20, 0.4, "close", g)
    for m in (far, close):
        assert abs(m.double().mean().item() - 0.4) < 0.01
    n = far.sum(1)
    assert torch.all(far[torch.arange(20)[None] < n[:, None]])  # contiguous from the start
    n = close.sum(1)
    assert torch.all(close[torch.arange(20)[None] >= 20 - n[:, None]])


def test_zero_one_error_counts_nan():
    F = torch.tensor([1.0, -1.0, float("nan"), 0.0])
    z = torch.tensor([1.0, 1.0, 1.0, 1.0])
    assert zero_one_error(F, z).tolist() == [0.0, 1.0, 1.0, 0.0]


def test_probes_against_loops():
    g = torch.Generator().manual_seed(0)
    pat = make_patterns(DataConfig(), g)
    W_B, W_C = torch.randn(31, 31, generator=g, dtype=torch.float64), torch.randn(31, 31, generator=g, dtype=torch.float64)
    A = pattern_attention(W_B, W_C, pat.mu).numpy()
    mu = np.c_[pat.mu.numpy(), np.zeros(6)]
    for i in range(6):
        for j in range(6):
            assert math.isclose(A[i, j], mu[i] @ W_B.numpy().T @ W_C.numpy() @ mu[j], rel_tol=1e-10, abs_tol=1e-9)
        assert math.isclose(lemma3(W_B, pat.mu)[i].item(), mu[i] @ W_B.numpy() @ mu[i], rel_tol=1e-10)
    assert cyclic_distance(6)[0].tolist() == [0, 1, 2, 3, 2, 1]
    groups = task_groups(all_tasks(6), 6)
    assert sorted({g_: groups.count(g_) for g_ in groups}.items()) == [
        ("distance 2", 12), ("distance 3", 6), ("reversed", 6), ("training", 6)]


def test_lemma6_sums_loop():
    g = torch.Generator().manual_seed(3)
    P = torch.randn(5, 8, 4, generator=g, dtype=torch.float64)
    w = torch.randn(4, generator=g, dtype=torch.float64)
    s1, s2 = lemma6_sums(w, P)
    sig = lambda t: 1 / (1 + math.exp(-t))
    tot1 = tot2 = 0.0
    for n in range(5):
        for i in range(7):
            G = sig(float(P[n, i] @ w))
            for j in range(i + 1, 8):
                G *= 1 - sig(float(P[n, j] @ w))
            tot1 += G
            tot2 += G * (7 - i)
    assert math.isclose(s1, tot1 / 5, rel_tol=1e-10) and math.isclose(s2, tot2 / 5, rel_tol=1e-10)


def test_theory():
    assert theory.alpha_threshold_mamba(0.6, 20, 20) == 0.6
    assert theory.alpha_threshold_mamba(0.6, 40, 20) == 1.0
    assert theory.alpha_threshold_lt() == 0.5
    assert math.isclose(theory.T_M(0.1, 0.6, 3.0, 6) / theory.T_T(0.1, 0.6, 3.0, 6, 20), 20)
    assert theory.l_ts_lower_lt(0.5, 6) == math.inf
    assert math.isclose(theory.l_ts_lower_lt(0.4, 6), 0.4 / 0.01 * math.log(6))
    with pytest.raises(ValueError, match="alpha"):
        theory.l_ts_lower_mamba(1.0, 6)


def test_classification_error_and_corollary_probes():
    from mambaicl import OneLayerMamba
    from mambaicl.evaluate import classification_error
    from mambaicl.probes import corollary1_sums, corollary2_gates

    class Fixed(torch.nn.Module):
        def forward(self, P):
            return P[:, 0, 0]

    P = torch.zeros(4, 2, 2, dtype=torch.float64)
    P[:, 0, 0] = torch.tensor([1.0, -1.0, 0.0, float("nan")])
    z = torch.ones(4, dtype=torch.float64)
    assert classification_error(Fixed(), P, z) == 0.75  # F = 0 and NaN count as errors
    cfg = DataConfig()
    pat = make_patterns(cfg, torch.Generator().manual_seed(0))
    pr = training_prompts(pat, cfg, training_tasks(6), 50, torch.Generator().manual_seed(1))
    model = OneLayerMamba(30, 31, 0.2, generator=torch.Generator().manual_seed(2)).double()
    same, other = corollary1_sums(model, pr)
    scores = model.attention(pr.P)
    for n in range(3):
        s = sum(scores[n, i].item() for i in range(20) if pr.relevant[n, i] == pr.relevant[n, -1])
        o = sum(scores[n, i].item() for i in range(20) if pr.relevant[n, i] != pr.relevant[n, -1])
        assert math.isclose(same[n].item(), s, rel_tol=1e-10) and math.isclose(other[n].item(), o, abs_tol=1e-9)
    g_out, g_clean = corollary2_gates(model, pr)
    assert g_out.numel() == int(pr.outlier.sum()) and g_clean.numel() == int((~pr.outlier).sum())
