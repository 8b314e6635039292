"""Statistics and fits used by the chapters, each against an independent computation."""
import math

import numpy as np
import pytest

from mambaicl.analysis.fits import breakdown_alpha, decay_stats, first_below, loglog_slope, smooth
from mambaicl.analysis.stats import compare, error_mean_se, mean_se


def test_mean_se_against_numpy():
    x = [0.1, 0.4, 0.25, 0.3]
    m, se = mean_se(x)
    assert m == pytest.approx(np.mean(x)) and se == pytest.approx(np.std(x, ddof=1) / 2)
    assert math.isnan(mean_se([0.3])[1])


def test_error_mean_se_counts_seeds_and_prompts():
    m, se = error_mean_se([0.1, 0.1, 0.1], n_prompts=100)  # no seed spread: the binomial noise remains
    assert m == pytest.approx(0.1) and se == pytest.approx(math.sqrt(0.1 * 0.9 / 100) / math.sqrt(3))
    m2, se2 = error_mean_se([0.1, 0.2, 0.3], n_prompts=100)
    seeds = np.std([0.1, 0.2, 0.3], ddof=1) / math.sqrt(3)
    prompts = math.sqrt(np.mean([p * (1 - p) / 100 for p in (0.1, 0.2, 0.3)]) / 3)
    assert se2 == pytest.approx(math.sqrt(seeds ** 2 + prompts ** 2))


def test_compare_applies_the_two_se_rule():
    big = compare([0.30, 0.32, 0.31], [0.10, 0.11, 0.09])
    assert big.significant and big.verdict == "a > b" and big.diff == pytest.approx(0.21)
    noisy = compare([0.30, 0.10, 0.20], [0.20, 0.25, 0.05])
    assert not noisy.significant and noisy.verdict == "not distinguishable at this scale"
    d = np.array([0.30, 0.10, 0.20]) - np.array([0.20, 0.25, 0.05])
    assert noisy.se == pytest.approx(np.std(d, ddof=1) / math.sqrt(3))  # paired: SE of the differences
    small_n = compare([0.02], [0.01], n_prompts=100)  # one seed: only the prompt noise
    assert small_n.se == pytest.approx(math.sqrt(0.02 * 0.98 / 100 + 0.01 * 0.99 / 100))
    with pytest.raises(ValueError, match="paired"):
        compare([0.1, 0.2], [0.1])


def test_decay_stats_on_a_geometric_sequence():
    ratios, factor, r2 = decay_stats([8.0, 4.0, 2.0, 1.0])
    assert np.allclose(ratios, 0.5) and factor == pytest.approx(0.5) and r2 == pytest.approx(1.0)
    _, f2, r2b = decay_stats([1.0, 0.6, 0.5, 0.2])
    assert 0 < r2b < 1 and 0.5 < f2 < 0.7
    with pytest.raises(ValueError, match="positive"):
        decay_stats([1.0, 0.0])


def test_loglog_slope_recovers_exponents_with_an_interval():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    rng = np.random.default_rng(0)
    Y = np.stack([3.0 * x ** -1.0 * np.exp(rng.normal(0, 0.05, size=4)) for _ in range(6)])
    fit = loglog_slope(x, Y)
    assert abs(fit.slope + 1) < 0.1 and fit.low < fit.slope < fit.high
    covered = sum(loglog_slope(x, np.stack([3.0 * x ** -1.0 * np.exp(rng.normal(0, 0.05, size=4))
                                             for _ in range(6)])).contains(-1.0) for _ in range(300))
    assert 0.90 <= covered / 300 <= 0.99  # a calibrated 95% interval
    manual = [np.polyfit(np.log(x), np.log(y), 1)[0] for y in Y]
    assert fit.slope == pytest.approx(np.mean(manual))
    assert not loglog_slope(x, Y * x).contains(-1.0)  # exponent 0: the interval excludes -1
    one = loglog_slope(x, Y[:1])  # one seed: the fit's own residual interval
    assert one.contains(one.slope) and one.high > one.low


def test_first_below_smooth_and_breakdown():
    loss = [1.0, 0.9, 0.5, 0.2, 0.4, 0.1, 0.05]
    assert first_below(loss, 0.3) == 3.0
    assert first_below(loss, 0.3, window=2) == 4.0  # mean(0.4, 0.1) = 0.25 is the first window below
    assert first_below(loss, 0.3, window=2, steps=[0, 10, 20, 30, 40, 50, 60]) == 40.0
    assert first_below(loss, 0.01) == math.inf
    np.testing.assert_allclose(smooth([0, 3, 6, 9], 3), [1.5, 3.0, 6.0, 7.5])
    assert breakdown_alpha([0.0, 0.4, 0.6], [0.01, 0.05, 0.3]) == 0.6
    assert math.isnan(breakdown_alpha([0.0, 0.4], [0.01, 0.05]))
