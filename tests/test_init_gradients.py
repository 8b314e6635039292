"""The expected descent directions at initialisation (mambaicl.analysis.init_gradients) against autograd."""
import dataclasses

import pytest
import numpy as np
import torch

from mambaicl.analysis.init_gradients import (gate_sums_at_zero, lemma3_init_rate, lemma4_mu_init_rate,
                                              lemma4_v_init_rate)
from mambaicl.config import DataConfig
from mambaicl.data import make_patterns, training_tasks
from mambaicl.data.prompts import training_prompts


def test_gate_sums_at_zero_by_the_product_formula():
    l = 7
    sig = torch.full((l + 1,), 0.5, dtype=torch.float64)
    G = [float(sig[i] * torch.prod(1 - sig[i + 1:])) for i in range(l)]  # Eq. (3) literally, query factor included
    S_G, S_L = gate_sums_at_zero(l)
    assert S_G == pytest.approx(sum(G), rel=1e-14)
    assert S_L == pytest.approx(sum(g * (l - 1 - i) for i, g in enumerate(G)), rel=1e-14)


def _autograd_rates(cfg: DataConfig, delta: float, n: int, chunks: int, seed: int) -> torch.Tensor:
    """Per chunk of prompts: the descent direction -grad of the mean hinge loss at W_B = W_C = delta diag(I, 0),
    w = 0, projected as the three probes (mean_j mu_j^T W_C mu_j growth, v*^T w fall, mu^T w fall), ``(chunks, 3)``."""
    gen = torch.Generator().manual_seed(seed)
    pat = make_patterns(cfg, gen)
    stream = np.random.default_rng(seed)
    tasks = training_tasks(cfg.M1)
    D = cfg.d + 1
    out = []
    for _ in range(chunks):
        pr = training_prompts(pat, cfg, tasks, n, stream)
        P = pr.P  # (n, l+1, D)
        W_B = torch.zeros(D, D, dtype=torch.float64)
        W_B[:cfg.d, :cfg.d] = delta * torch.eye(cfg.d, dtype=torch.float64)
        W_C = W_B.clone().requires_grad_(True)
        W_B.requires_grad_(True)
        w = torch.zeros(D, dtype=torch.float64, requires_grad=True)
        sig = torch.sigmoid(P @ w)  # (n, l+1)
        later = torch.triu(torch.ones(P.shape[1], P.shape[1], dtype=torch.bool), diagonal=1)
        G = sig * torch.where(later, 1 - sig.unsqueeze(-2), torch.ones_like(sig).unsqueeze(-2)).prod(-1)  # Eq. (3)
        att = torch.einsum("nid,ed,ef,nf->ni", P, W_B, W_C, P[:, -1])  # p_i^T W_B^T W_C p_query
        y = P[..., -1]  # labels (0 for the query)
        F = (G * y * att).sum(-1)
        loss = torch.clamp(1 - pr.z.to(F.dtype) * F, min=0).mean()
        gB, gC, gw = torch.autograd.grad(loss, (W_B, W_C, w))
        mu = torch.nn.functional.pad(pat.mu, (0, 1))  # (M1, D)
        v = torch.nn.functional.pad(pat.v, (0, 1))
        out.append(torch.stack([-(mu @ gC @ mu.T).diagonal().mean(), (v @ gw).mean(), (mu @ gw).mean()]))
    return torch.stack(out)


@pytest.mark.parametrize("change", [{}, {"beta": 2.0, "outlier_norm": 1.5}, {"p_a": 0.3, "M1": 4, "l_tr": 10}])
def test_expected_descent_at_initialisation_matches_the_derivation(change):
    cfg = dataclasses.replace(DataConfig(), **change)
    delta = 0.2
    R = _autograd_rates(cfg, delta, n=1000, chunks=8, seed=1)
    mean, se = R.mean(0), R.std(0) / R.shape[0] ** 0.5
    pred = torch.tensor([lemma3_init_rate(1.0, delta, cfg.beta, cfg.p_a, cfg.M1, cfg.l_tr),
                         lemma4_v_init_rate(1.0, delta, cfg.beta, cfg.p_a, cfg.kappa_a, cfg.outlier_norm, cfg.V,
                                            cfg.l_tr),
                         lemma4_mu_init_rate(1.0, delta, cfg.beta, cfg.p_a, cfg.M1, cfg.l_tr)], dtype=torch.float64)
    assert torch.all((mean - pred).abs() <= 4 * se + 1e-3 * pred.abs()), (mean, se, pred)


def test_init_rates_collects_the_three_formulas():
    from mambaicl.analysis.init_gradients import init_rates

    d = DataConfig()
    r = init_rates(d, 0.3, 0.2)
    assert r["lemma3"] == lemma3_init_rate(0.3, 0.2, d.beta, d.p_a, d.M1, d.l_tr)
    assert r["lemma4_ratio"] == pytest.approx(r["lemma4_mu"] / r["lemma4_v"])
    # the ratio of the two gate rates: beta^2 V / (p_a kappa_a ||v*||^2 M1), free of eta, delta and the gate sums
    assert r["lemma4_ratio"] == pytest.approx(d.beta ** 2 * d.V / (d.p_a * d.kappa_a * d.outlier_norm ** 2 * d.M1))
