"""Synthetic data (§3.2, Def. 1-2, Cond. 1), configs, probes and theory, each against an independent computation."""
import math

import numpy as np
import pytest
import torch

from mambaicl import OneLayerMamba
from mambaicl import config as C
from mambaicl import data as D
from mambaicl.analysis import theory
from mambaicl.analysis.lemmas import lemma3, lemma6_sums, pattern_attention
from mambaicl.config import ConfigError, DataConfig
from mambaicl.data import (all_tasks, check_condition_1, cyclic_distance, make_patterns, task_groups,
                           training_prompts, training_tasks, unseen_tasks)
from mambaicl.data.prompts import outlier_mask
from mambaicl.evaluate import zero_one_error
from mambaicl.experiments.fig2 import FIG2, PLAIN, PRESETS

def test_presets_valid_and_lookup():
    assert PRESETS["fig2"] is FIG2 and PRESETS["plain"] is PLAIN
    assert FIG2.test.kappa_a_prime * FIG2.test.L >= FIG2.data.kappa_a - 1e-2
    assert FIG2.models == ("mamba", "mamba_merged", "linear")


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


def _training_prompts(n: int):
    """Figure 2's default data: the patterns (seed 0) and ``n`` training prompts (seed 1)."""
    cfg = DataConfig()
    pat = make_patterns(cfg, torch.Generator().manual_seed(0))
    return cfg, pat, training_prompts(pat, cfg, training_tasks(6), n, np.random.default_rng(1))


def test_training_prompts_follow_definition_1():
    cfg, pat, pr = _training_prompts(3000)
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
    pr = D.test_prompts(pat, test, all_tasks(6), 3000, np.random.default_rng(2))
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
    u = torch.rand(2000, 20, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    far, close, rnd = (outlier_mask(u, 0.4, p) for p in ("far", "close", "random position"))
    for m in (far, close, rnd):
        assert abs(m.double().mean().item() - 0.4) < 0.01
    assert torch.equal(far.sum(1), rnd.sum(1)) and torch.equal(close.sum(1), rnd.sum(1))  # same counts
    n = far.sum(1)
    assert torch.equal(far, torch.arange(20)[None] < n[:, None])  # contiguous from the far end
    assert torch.equal(close, torch.arange(20)[None] >= 20 - n[:, None])  # contiguous next to the query


@pytest.mark.parametrize("kappa_a_prime,K_prime", [(2.0, 1.5), (6.67, 3.0)])
def test_test_prompts_outlier_magnitudes_and_irrelevant_range(kappa_a_prime, K_prime):
    """Definition 2 / Eq. (5): outliers carry exactly kappa_a' v'_s (v' from §4.1), kappa' spans U(-K', K')."""
    cfg = DataConfig()
    pat = make_patterns(cfg, torch.Generator().manual_seed(0))
    test = C.TestConfig(alpha=0.5, kappa_a_prime=kappa_a_prime, K_prime=K_prime)
    pr = D.test_prompts(pat, test, all_tasks(6), 4000, np.random.default_rng(3))
    x = pr.P[..., :-1].numpy()
    vt = D.test_outliers(pat.v, test.v_coeffs).numpy()  # (3, d)
    # the component of each outlier example along the span of v*: exactly kappa_a' times one row of v'
    V = pat.v.numpy()
    comp = (x[:, :-1] @ V.T) @ np.linalg.inv(V @ V.T) @ V  # projection on span(v*)
    out = pr.outlier.numpy()
    dist = np.stack([np.linalg.norm(comp - kappa_a_prime * vt[s], axis=-1) for s in range(3)], -1).min(-1)
    assert dist[out].max() < 1e-9 and np.abs(comp[~out]).max() < 1e-9
    kappa = (x @ pat.nu.numpy().T) / cfg.beta ** 2  # (batch, l+1, M2): one non-zero per token
    k = kappa[np.arange(kappa.shape[0])[:, None], np.arange(21)[None], pr.irrelevant.numpy()]
    assert np.abs(k).max() <= K_prime and np.abs(k).max() > 0.98 * K_prime  # fills (-K', K')
    assert abs(k.mean()) < 0.02 * K_prime and abs(np.mean(np.abs(k)) - K_prime / 2) < 0.02 * K_prime


def test_zero_one_error_counts_ties_and_non_finite_outputs():
    F = torch.tensor([1.0, -1.0, float("nan"), 0.0, float("inf"), -0.5])
    z = torch.tensor([1.0, 1.0, 1.0, 1.0, 1.0, -1.0])
    assert zero_one_error(F, z) == pytest.approx(4 / 6)  # -1 wrong, NaN wrong, tie wrong, inf wrong
    assert zero_one_error(torch.zeros(5), torch.ones(5)) == 1.0  # an all-zero model is always wrong
    with pytest.raises(ValueError, match=r"^F and z must have the same non-empty shape; got \(3,\) and \(2,\)"):
        zero_one_error(torch.zeros(3), torch.ones(2))


def test_probes_against_loops():
    g = torch.Generator().manual_seed(0)
    pat = make_patterns(DataConfig(), g)
    W_B, W_C = torch.randn(31, 31, generator=g, dtype=torch.float64), torch.randn(31, 31, generator=g, dtype=torch.float64)
    A = pattern_attention(W_B.T @ W_C, pat.mu).numpy()
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
    with pytest.raises(ValueError, match=r"^alpha must lie in \[0, 1\); got 1.0"):
        theory.l_ts_lower_mamba(1.0, 6)


def test_corollary_sums_against_loops():
    from mambaicl.analysis.corollaries import attention_sums, split_gates

    cfg, pat, pr = _training_prompts(50)
    model = OneLayerMamba(30, 31, 0.2, generator=torch.Generator().manual_seed(2)).double()
    same, other = attention_sums(model.attention(pr.P), pr.relevant)
    P = pr.P.numpy()
    M = (model.W_B.T @ model.W_C).detach().numpy()
    for n in range(3):
        scores = [P[n, i] @ M @ P[n, -1] for i in range(20)]  # recomputed from the parameters
        s = sum(sc for i, sc in enumerate(scores) if pr.relevant[n, i] == pr.relevant[n, -1])
        o = sum(sc for i, sc in enumerate(scores) if pr.relevant[n, i] != pr.relevant[n, -1])
        assert math.isclose(same[n].item(), s, rel_tol=1e-10) and math.isclose(other[n].item(), o, abs_tol=1e-9)
    g_out, g_clean = split_gates(model.gate(pr.P), pr.outlier)
    assert g_out.numel() == int(pr.outlier.sum()) and g_clean.numel() == int((~pr.outlier).sum())


def test_every_display_label_names_one_rule_or_one_placement():
    """Rule C and placement R are both "random" in the paper's words: their display labels must differ, so that a
    label read back (e.g. from a table) names one of them only; each label maps to its own letter."""
    from mambaicl.data.vocabulary import PLACEMENT_LABELS, RULE_LABELS, placement_id, rule_id

    assert not set(RULE_LABELS.values()) & set(PLACEMENT_LABELS.values())
    assert [rule_id(v) for v in RULE_LABELS.values()] == list(RULE_LABELS)
    assert [placement_id(v) for v in PLACEMENT_LABELS.values()] == list(PLACEMENT_LABELS)
    with pytest.raises(ConfigError, match=r"^rule must be one of .*; got 'random'"):
        rule_id("random")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_materialize_compiled_pass_equals_its_tensor_twin_bit_for_bit(dtype):
    """Prompts.P on the CPU (one compiled pass, data.prompts._materialize_fill) against the tensor operations
    (device.plain_kernels()): the same bits, for training prompts of several seeds, one seed, a seed's slice and
    test prompts (outliers v' of another norm)."""
    from mambaicl.data.prompts import materialize
    from mambaicl.device import plain_kernels
    from mambaicl.seeding import numpy_streams

    cfg = DataConfig(d=30, M1=6, M2=10, V=3, l_tr=20, p_a=0.6)
    pat = make_patterns(cfg, torch.Generator().manual_seed(0))
    gens = numpy_streams(range(3), "train")
    train = D.training_prompts(pat, cfg, D.training_tasks(cfg.M1), 64, gens)  # (3, 64, ...)
    one = D.training_prompts(pat, cfg, D.training_tasks(cfg.M1), 64, gens[0])  # (64, ...)
    test = D.test_prompts(pat, C.TestConfig(alpha=0.5, rule="A", kappa_a_prime=5.0, K_prime=2.0), all_tasks(6), 200,
                          np.random.default_rng(2))
    for pr in (train, one, train[1], test):
        pr = pr.to_dtype(dtype)
        compiled = materialize(pr)
        with plain_kernels():
            plain = materialize(pr)
        assert compiled.dtype == plain.dtype == dtype and compiled.shape == plain.shape
        assert torch.equal(compiled, plain)
