"""`python -m mambaicl reproduce fig2`: byte-identical results for one seed, and the saved Mamba
re-evaluated by an independent NumPy implementation of Eq. (3) on independently drawn
Definition 2 prompts (from the saved patterns and config) reproduces the reported errors."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cli(out):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run([sys.executable, "-m", "mambaicl", "reproduce", "fig2", "--out", str(out), "--seed", "0",
                    "--quiet"], check=True, env=env, cwd=ROOT, capture_output=True)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    a, b = tmp_path_factory.mktemp("a"), tmp_path_factory.mktemp("b")
    run_cli(a)
    run_cli(b)
    return a, b


def numpy_prompts(pats, cfg, alpha, rule, n, rng):
    """Definition 2 written independently: x = mu_j + kappa' nu_k (+ kappa_a' v'_s), labels by rule."""
    mu, nu, vt = pats["mu"].numpy(), pats["nu"].numpy(), pats["v_test"].numpy()
    t = cfg["test"]
    l, M1 = t["l_ts"], mu.shape[0]
    tasks = np.array([(a, b) for a in range(M1) for b in range(M1) if a != b])
    task = tasks[rng.integers(len(tasks), size=n)]
    pick_b = rng.random((n, l + 1)) < 0.5
    rel = np.where(pick_b, task[:, 1:2], task[:, 0:1])
    lab = np.where(pick_b, -1.0, 1.0)
    kap = rng.uniform(-t["K_prime"], t["K_prime"], size=(n, l + 1))
    x = mu[rel] + kap[..., None] * nu[rng.integers(nu.shape[0], size=(n, l + 1))]
    out = rng.random((n, l)) < alpha
    x[:, :l] += t["kappa_a_prime"] * out[..., None] * vt[rng.integers(vt.shape[0], size=(n, l))]
    y = lab.copy()
    bad = {"A": -lab[:, :l], "B": np.full((n, l), float(t["target_label"])),
           "C": np.where(rng.random((n, l)) < 0.5, -1.0, 1.0)}[rule]
    y[:, :l] = np.where(out, bad, lab[:, :l])
    y[:, l] = 0.0
    return np.concatenate([x, y[..., None]], axis=-1), lab[:, l]


def numpy_mamba(P, W_B, W_C, w):
    """Eq. (3): sum_i G_i y_i p_i^T W_B^T W_C p_q, G_i = sig(w^T p_i) prod_{j>i} (1 - sig(w^T p_j))."""
    sig = 1 / (1 + np.exp(-(P @ w)))
    L = P.shape[1]
    G = np.empty_like(sig)
    for i in range(L):
        G[:, i] = sig[:, i] * np.prod(1 - sig[:, i + 1:], axis=1)
    key = P[:, -1] @ W_C.T @ W_B  # (n, d+1): (W_B^T W_C p_query)^T
    scores = np.einsum("nld,nd->nl", P, key)
    return (G * P[:, :, -1] * scores).sum(1)


def test_same_seed_byte_identical(run):
    a, b = run
    assert (a / "results.json").read_bytes() == (b / "results.json").read_bytes()


def test_artifacts_layout(run):
    art = torch.load(run[0] / "artifacts.pt", weights_only=False)
    assert set(art) == {"patterns", "mamba", "linear_transformer", "config"}
    assert set(art["patterns"]) == {"mu", "nu", "v", "v_test"}
    assert art["patterns"]["mu"].shape == (6, 30) and art["patterns"]["v_test"].shape == (3, 30)
    assert set(art["mamba"]) == {"W_B", "W_C", "w"} and set(art["linear_transformer"]) == {"W_B", "W_C"}


def test_independent_reevaluation_within_two_points(run):
    res = json.loads((run[0] / "results.json").read_text())
    art = torch.load(run[0] / "artifacts.pt", weights_only=False)
    m = {k: v.numpy() for k, v in art["mamba"].items()}
    rng = np.random.default_rng(12345)
    assert res["n_test"] >= 4000
    for rule, reported in res["errors"]["mamba"].items():
        for alpha, err in zip(res["alphas"], reported):
            P, z = numpy_prompts(art["patterns"], art["config"], alpha, rule, 4000, rng)
            mine = float(np.mean(z * numpy_mamba(P, m["W_B"], m["W_C"], m["w"]) < 0))
            assert abs(mine - err) <= 0.02, (rule, alpha, mine, err)
