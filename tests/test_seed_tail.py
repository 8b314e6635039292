"""Chapter 8's seed tail: the declared predictor from the weights, Spearman's rho and the AUC against scipy,
and a tiny end-to-end run."""
import math

import numpy as np
import pytest
import torch
from scipy.stats import mannwhitneyu, spearmanr

from mambaicl.analysis.claims import CLAIMS
from mambaicl.config import SYNTHETIC_TEST
from mambaicl.experiments import seed_tail as st


def test_predictor_is_the_largest_test_outlier_logit():
    g = torch.Generator().manual_seed(0)
    v = torch.randn(3, 30, generator=g, dtype=torch.float64)
    w = torch.randn(4, 31, generator=g, dtype=torch.float64)
    pred, logits, proj = st.predictor(w, v, SYNTHETIC_TEST)
    for s in range(4):
        for i, c in enumerate(SYNTHETIC_TEST.v_coeffs):  # v'_i = sum_r c_r v*_r, by hand
            vt = sum(cr * v[r] for r, cr in enumerate(c))
            assert logits[s, i].item() == pytest.approx(SYNTHETIC_TEST.kappa_a_prime * float(vt @ w[s, :30]))
        assert pred[s].item() == pytest.approx(max(logits[s].tolist()))
        assert proj[s].tolist() == pytest.approx((v @ w[s, :30]).tolist())


def test_spearman_and_auc_against_scipy():
    rng = np.random.default_rng(1)
    x = rng.normal(size=50)
    y = x + rng.normal(size=50)
    y[3] = y[4]  # a tie
    r = st.spearman(x, y)
    assert r["rho"] == pytest.approx(spearmanr(x, y).statistic)
    z = math.atanh(r["rho"])
    assert r["low"] == pytest.approx(math.tanh(z - 1.96 * math.sqrt(1.06 / 47)), abs=1e-4)
    pos = y > 1.0
    a = st.auc(x, pos)
    assert a["auc"] == pytest.approx(mannwhitneyu(x[pos], x[~pos]).statistic / (pos.sum() * (~pos).sum()))
    assert a["low"] <= a["auc"] <= a["high"]
    assert math.isnan(st.auc(x, np.zeros(50, bool))["auc"])


def test_tiny_run_and_registry_rows():
    res = st.run(st.TINY, seeds=(0, 1, 2, 3, 4), progress=False)
    assert len(res.predictor) == 5 and set(res.group_errors["A"]) == {"training", "reversed", "distance 2", "distance 3"}
    for s in range(5):  # 6 + 6 + 12 + 6 tasks
        g = {k: v[s] for k, v in res.group_errors["A"].items()}
        want = (6 * g["training"] + 6 * g["reversed"] + 12 * g["distance 2"] + 6 * g["distance 3"]) / 30
        assert res.all_error["A"][s] == pytest.approx(want)
    assert res.bound_all == pytest.approx((12 * 0.8 ** 20 + 18 * 0.9 ** 20) / 60)
    assert '"spearman"' in res.to_json()
    for key in ("fig2-information-bound", "fig2-seed-tail"):
        assert CLAIMS[key].beyond and CLAIMS[key].chapter == "ch08_open_questions"
