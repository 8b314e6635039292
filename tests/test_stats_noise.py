"""The book's one noise term and its tail statistics (mambaicl.analysis.stats), each against an independent
computation: simulated measurements whose true standard error is known, SciPy's beta distribution, NumPy."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mambaicl.analysis.stats import (clopper_pearson, error_mean_se, interval, median_iqr, seeds_to_decide,
                                     shared_cluster_se, t_quantile)


def _seeds_with_own_prompts(rng, R, S, n):
    """R replications of S seeds, each seed with its own true error p_s ~ U(0.05, 0.25) and its own n prompts."""
    p = rng.uniform(0.05, 0.25, size=(R, S))
    return rng.binomial(n, p) / n


def test_own_prompts_are_counted_once_against_the_known_standard_error():
    """Each seed draws its own prompts: the true variance of the mean over S seeds is
    (Var p + E[p (1 - p)] / n) / S, known in closed form for p ~ U(a, b). The book's error (seed spread, floored
    at the binomial part) estimates it without bias, and its 95 % t interval covers the true mean 95 % of the time;
    adding the binomial part to the seed spread (the old rule) overestimates it by E[p (1 - p)] / n / S."""
    rng = np.random.default_rng(0)
    R, S, n, a, b = 4000, 5, 100, 0.05, 0.25
    var_p, mean_p = (b - a) ** 2 / 12, (a + b) / 2
    e_pq = mean_p - (var_p + mean_p ** 2)  # E[p (1 - p)]
    true_var = (var_p + e_pq / n) / S
    x = _seeds_with_own_prompts(rng, R, S, n)
    se2 = np.array([error_mean_se(row, n)[1] ** 2 for row in x])
    assert se2.mean() == pytest.approx(true_var, rel=0.04)
    old = se2 + np.mean(x * (1 - x) / n, axis=1) / S  # seeds + prompts: the prompts twice
    assert old.mean() > true_var * 1.15
    ivs = [interval(row, n) for row in x]
    cover = np.mean([iv.low <= mean_p <= iv.high for iv in ivs])
    assert abs(cover - 0.95) < 0.015


def test_one_seed_uses_the_binomial_error():
    m, se = error_mean_se([0.2], n_prompts=400)
    assert m == 0.2 and se == pytest.approx(math.sqrt(0.2 * 0.8 / 400))


def _shared_sentences(gen, S, n, J, sd_item=0.15, sd_seed=0.02):
    """One replication: a fresh pool of J sentences (difficulties shared by every seed), S seeds with their own
    offsets and their own n prompts (random query sentences). Returns per-seed accuracies and residual sums."""
    d = torch.randn(J, generator=gen, dtype=torch.float64) * sd_item
    acc, resid = [], []
    for _ in range(S):
        b = float(torch.randn(1, generator=gen, dtype=torch.float64)) * sd_seed
        q = torch.randint(J, (n,), generator=gen)
        y = (torch.rand(n, generator=gen, dtype=torch.float64) < (0.7 + d[q] + b).clamp(0, 1)).double()
        acc.append(float(y.mean()))
        resid.append(torch.zeros(J, dtype=torch.float64).index_add_(0, q, y - y.mean()))
    return acc, resid


def test_shared_sentences_are_counted_once_against_the_empirical_standard_error():
    """SST-2's case: sentences shared by every seed, prompts of each seed its own. Over many replications (fresh
    sentence pools), the seed spread plus the shared part (cross-seed covariance of per-sentence residuals) matches
    the empirical variance of the seed-averaged accuracy; the full cluster variance (which holds each seed's prompt
    noise again) overshoots it."""
    gen = torch.Generator().manual_seed(1)
    R, S, n, J = 600, 5, 400, 100
    means, est, full = [], [], []
    for _ in range(R):
        acc, resid = _shared_sentences(gen, S, n, J)
        m = sum(acc) / S
        se_seeds2 = sum((a - m) ** 2 for a in acc) / (S - 1) / S
        means.append(m)
        est.append(se_seeds2 + shared_cluster_se(resid, n) ** 2)
        u = sum(resid) / (S * n)
        full.append(se_seeds2 + float((u * u).sum()) * J / (J - 1))
    emp = np.var(means, ddof=1)
    assert np.mean(est) == pytest.approx(emp, rel=0.2)
    assert np.mean(full) > np.mean(est) * 1.1


def test_shared_cluster_se_by_hand():
    r = [torch.tensor([1.0, -1.0, 2.0]), torch.tensor([0.5, -0.5, 1.0])]
    cross = 2 * (1.0 * 0.5 + 1.0 * 0.5 + 2.0 * 1.0)  # sum over ordered pairs s != s'
    want = math.sqrt(cross / (2 * 1) * 3 / 2) / 10
    assert shared_cluster_se(r, 10) == pytest.approx(want)
    assert shared_cluster_se([torch.tensor([1.0, -1.0])], 2) == pytest.approx(math.sqrt(2 * 2 / 4))


@pytest.mark.parametrize("k,n", [(0, 20), (1, 20), (3, 10), (10, 10), (5, 5), (7, 50)])
def test_clopper_pearson_against_scipy_beta(k, n):
    from scipy.stats import beta

    lo, hi = clopper_pearson(k, n)
    assert lo == (0.0 if k == 0 else pytest.approx(beta.ppf(0.025, k, n - k + 1)))
    assert hi == (1.0 if k == n else pytest.approx(beta.ppf(0.975, k + 1, n - k)))


def test_clopper_pearson_table_values():
    """Closed forms: 0 of n gives the upper end 1 - 0.025^(1/n) (0.1684 for 20); n of n the lower end 0.025^(1/n);
    1 of 20 gives [0.0013, 0.2487] to four digits."""
    assert clopper_pearson(0, 20)[1] == pytest.approx(1 - 0.025 ** (1 / 20))
    assert clopper_pearson(0, 20)[1] == pytest.approx(0.1684, abs=1e-4)
    assert clopper_pearson(5, 5)[0] == pytest.approx(0.025 ** (1 / 5))
    lo, hi = clopper_pearson(1, 20)
    assert lo == pytest.approx(0.0013, abs=1e-4) and hi == pytest.approx(0.2487, abs=1e-4)
    with pytest.raises(ValueError, match=r"^k and n must be integers with 0 <= k <= n and n >= 1; got k=3, n=2"):
        clopper_pearson(3, 2)


def test_median_iqr_against_numpy():
    x = [0.3, 0.1, 0.7, 0.2, 0.25, 0.9]
    assert median_iqr(x) == pytest.approx((np.median(x), np.percentile(x, 25), np.percentile(x, 75)))


def test_seeds_to_decide_is_the_first_count_whose_half_width_fits():
    se, n, dist = 0.01, 5, 0.012  # sd = 0.0224
    k = seeds_to_decide(se, n, dist)
    sd = se * math.sqrt(n)
    assert t_quantile(k - 1) * sd / math.sqrt(k) < dist <= t_quantile(k - 2) * sd / math.sqrt(k - 1)
    assert seeds_to_decide(se, n, 0.0) is None and seeds_to_decide(0.0, n, 0.1) is None


def test_mean_se_of_huge_finite_values_is_infinite_not_an_overflow_error():
    """A step size that has not fully diverged yet leaves hinge losses of 1e150: the spread overflows to inf
    (a float product), where ``** 2`` raised OverflowError and crashed step_size_search."""
    from mambaicl.analysis.stats import mean_se

    m, se = mean_se([1e150, 3e155, 2e152])
    assert math.isfinite(m) and se == math.inf
    m, se = mean_se([1.0, 2.0, 4.0])  # ordinary values: the usual sd / sqrt(n)
    assert m == 7 / 3 and abs(se - math.sqrt(((1 - 7 / 3) ** 2 + (2 - 7 / 3) ** 2 + (4 - 7 / 3) ** 2) / 2 / 3)) < 1e-15
