"""Statistics and fits used by the chapters, each against an independent computation."""
import math

import numpy as np
import pytest

from mambaicl.analysis.fits import crossing, decay_stats, loglog_slope, smooth
from mambaicl.analysis.stats import compare, error_mean_se, mean_se


def test_mean_se_against_numpy():
    x = [0.1, 0.4, 0.25, 0.3]
    m, se = mean_se(x)
    assert m == pytest.approx(np.mean(x)) and se == pytest.approx(np.std(x, ddof=1) / 2)
    assert math.isnan(mean_se([0.3])[1])


def test_error_mean_se_counts_seeds_and_prompts_once():
    m, se = error_mean_se([0.1, 0.1, 0.1], n_prompts=100)  # no seed spread: the binomial floor remains
    assert m == pytest.approx(0.1) and se == pytest.approx(math.sqrt(0.1 * 0.9 / 100) / math.sqrt(3))
    m2, se2 = error_mean_se([0.1, 0.2, 0.3], n_prompts=100)  # own prompts: inside the seed spread
    seeds = np.std([0.1, 0.2, 0.3], ddof=1) / math.sqrt(3)
    prompts = math.sqrt(np.mean([p * (1 - p) / 100 for p in (0.1, 0.2, 0.3)]) / 3)
    assert prompts < seeds and se2 == pytest.approx(seeds)
    _, se3 = error_mean_se([0.1, 0.2, 0.3], n_prompts=100, shared=True)  # shared prompts: their common part added
    assert se3 == pytest.approx(math.sqrt(seeds ** 2 + prompts ** 2))


def test_compare_applies_the_t_interval_rule():
    big = compare([0.30, 0.32, 0.31], [0.10, 0.11, 0.09])
    assert big.significant and big.verdict == "a > b" and big.diff == pytest.approx(0.21)
    # 3 seeds: the 95 % interval is diff ± t_2 SE = diff ± 4.30 SE; a difference of 3 SE is not claimed
    from mambaicl.analysis.stats import t_quantile
    mid = compare([0.13, 0.05, 0.21], [0.0, 0.0, 0.0])
    assert mid.diff / mid.se == pytest.approx(0.13 / (0.08 / math.sqrt(3)))
    assert 2 < mid.diff / mid.se < t_quantile(2) and not mid.significant
    assert mid.low == pytest.approx(mid.diff - t_quantile(2) * mid.se)
    noisy = compare([0.30, 0.10, 0.20], [0.20, 0.25, 0.05])
    assert not noisy.significant and noisy.verdict == "not distinguishable at this scale"
    d = np.array([0.30, 0.10, 0.20]) - np.array([0.20, 0.25, 0.05])
    assert noisy.se == pytest.approx(np.std(d, ddof=1) / math.sqrt(3))  # paired: SE of the differences
    small_n = compare([0.02], [0.01], n_prompts=100)  # one seed: only the prompt noise
    assert small_n.se == pytest.approx(math.sqrt(0.02 * 0.98 / 100 + 0.01 * 0.99 / 100))
    with pytest.raises(ValueError, match=r"^a and b must hold one value per seed each \(a paired comparison\); got 2 and 1"):
        compare([0.1, 0.2], [0.1])


def test_decay_stats_on_a_geometric_sequence():
    ratios, factor, r2 = decay_stats([8.0, 4.0, 2.0, 1.0])
    assert np.allclose(ratios, 0.5) and factor == pytest.approx(0.5) and r2 == pytest.approx(1.0)
    _, f2, r2b = decay_stats([1.0, 0.6, 0.5, 0.2])
    assert 0 < r2b < 1 and 0.5 < f2 < 0.7
    with pytest.raises(ValueError, match=r"^values must be at least two positive finite numbers; got \[1.0, 0.0\]"):
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


def test_smooth():
    np.testing.assert_allclose(smooth([0, 3, 6, 9], 3), [1.5, 3.0, 6.0, 7.5])


def test_crossing_rising_linear_interpolates_and_censors():
    a = (0.0, 0.3, 0.6, 0.9)
    assert crossing(a, (0.1, 0.2, 0.3, 0.9), 0.25) == pytest.approx(0.45)  # halfway from 0.2 to 0.3
    assert crossing(a, (0.3, 0.4, 0.5, 0.9), 0.25) == 0.0  # already there
    assert math.isnan(crossing(a, (0.1, 0.1, 0.1, 0.2), 0.25))  # never: censored
    assert crossing(a, (0.1, 0.25, 0.1, 0.9), 0.25) == pytest.approx(0.3)  # the first crossing, level reached exactly


def test_crossing_on_the_grid_strict_and_before():
    # the break-down alpha: the first alpha whose error exceeds the first error by more than a jump
    errors = [0.01, 0.05, 0.3]
    assert crossing([0.0, 0.4, 0.6], errors, errors[0] + 0.1, strict=True, interpolate="none") == 0.6
    assert math.isnan(crossing([0.0, 0.4], [0.01, 0.05], 0.11, strict=True, interpolate="none"))
    assert crossing([0.0, 1.0], [0.0, 0.2], 0.2, strict=True, interpolate="none", never=-1.0) == -1.0  # > not >=
    # "below up to": the last grid point before the crossing; nan if the first already crosses
    assert crossing([0.0, 0.1, 0.2], [0.001, 0.002, 0.02], 0.01, interpolate="before") == 0.1
    assert math.isnan(crossing([0.0, 0.1], [0.02, 0.0], 0.01, interpolate="before"))
    assert crossing([0.0, 0.1], [0.0, 0.0], 0.01, interpolate="before", never=0.1) == 0.1


def test_crossing_falling_linear_and_loglog():
    assert crossing([0, 1, 2, 3], [1.0, 0.8, 0.4, 0.2], 0.6, rising=False) == pytest.approx(1.5)
    assert crossing([0, 10, 20], [1.0, 0.5, 0.0], 0.75, rising=False) == pytest.approx(5.0)
    assert crossing([0, 1], [0.1, 0.0], 0.5, rising=False) == 0.0  # starts below the target
    assert crossing([0, 1], [1.0, 0.9], 0.5, rising=False, never=math.inf) == math.inf
    lengths = [10, 20, 40, 80, 160]
    c, b = 5.0, 1.3  # error = c L^-b: on a log-log grid the interpolation is exact
    errors = [c * L ** -b for L in lengths]
    kw = {"rising": False, "interpolate": "loglog", "never": math.inf}
    assert crossing(lengths, errors, 0.02, **kw) == pytest.approx((c / 0.02) ** (1 / b), rel=1e-9)
    assert crossing(lengths, errors, 1.0, **kw) == 10.0
    assert crossing(lengths, errors, 1e-6, **kw) == math.inf


def test_crossing_rejects_bad_input():
    with pytest.raises(ValueError, match="^x and y must be non-empty and aligned"):
        crossing([0.0, 1.0], [0.0], 0.5)
    with pytest.raises(ValueError, match="^interpolate must be one of"):
        crossing([0.0], [0.0], 0.5, interpolate="cubic")


# ---------------------------------------------------------------- Chapter 3: counts, early rates, stacked probes


def test_relaxation_times():
    from mambaicl.analysis.fits import relaxation_time

    t = np.linspace(0, 200, 2001)
    tau = 17.0
    y = 0.2 + 0.7 * np.exp(-t / tau)
    assert relaxation_time(t, y, end=0.2) == pytest.approx(tau * math.log(2), rel=1e-3)
    assert relaxation_time(t, y, fraction=0.25, end=0.2) == pytest.approx(tau * math.log(4), rel=1e-3)
    with pytest.raises(ValueError, match=r"^values must start above their end value 0.3; it starts at 0.1"):
        relaxation_time([0, 1, 2], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match=r"^fraction must lie in \(0, 1\); got 1.0"):
        relaxation_time([0, 1], [1.0, 0.0], fraction=1.0)
    with pytest.raises(ValueError, match=r"^steps must be strictly increasing"):
        relaxation_time([0, 0], [1.0, 0.0])


def test_window_slope_of_a_line_and_a_kink():
    from mambaicl.analysis.fits import window_slope

    steps = list(range(20))
    assert window_slope(steps, [3.0 - 0.25 * t for t in steps], 5) == pytest.approx(-0.25)
    kink = [-0.1 * t if t <= 4 else -0.4 - 2.0 * (t - 4) for t in steps]
    assert window_slope(steps, kink, 4) == pytest.approx(-0.1)  # only the records up to t = 4 count
    with pytest.raises(ValueError, match=r"^t_max must leave at least two records \(steps <= t_max = 0.5\); got 1"):
        window_slope(steps, kink, 0.5)


def test_lemma4_rates_and_horizon_formulas():
    from mambaicl.analysis.lemmas import lemma4_horizon, lemma4_rates

    v, mu = lemma4_rates(0.3, 0.6, 3.0, 2.0, 6, 3)
    assert v == pytest.approx(0.3 * 9 * 2 * 0.4 / 3) and mu == pytest.approx(0.3 * 0.4 * 9 / 6)
    assert mu / v == pytest.approx(3 / (6 * 2))  # V / (M1 kappa_a)
    a = 3 / (0.3 * 9 * 2 * 0.4)
    b = 6 ** (2 / 3) * 3 ** (-2 / 3) * 2 ** (-1 / 3) * 3 ** (1 / 3) / (0.3 * 0.4)
    assert lemma4_horizon(0.3, 0.6, 3.0, 2.0, 6, 3) == pytest.approx(min(a, b))


@pytest.mark.parametrize("kind", ["mamba", "linear"])
def test_stack_probes_equal_the_single_model_probes(kind):
    import torch

    from mambaicl.analysis.lemmas import make_probes, stack_probes
    from mambaicl.config import DataConfig
    from mambaicl.data import make_patterns, training_prompts, training_tasks
    from mambaicl.models import build_model
    from mambaicl.seeding import numpy_streams, torch_generator, torch_generators

    data = DataConfig()
    pat = make_patterns(data, torch_generator(0, "patterns"))
    stack = build_model(kind, data.d, generators=torch_generators((0, 1, 2), "init"))
    with torch.no_grad():  # move away from the initialisation so that every probe is non-trivial
        for p in stack.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(3), dtype=p.dtype))
    pr = training_prompts(pat, data, training_tasks(data.M1), 50, numpy_streams((0, 1, 2), "validation"))
    got = stack_probes(stack, pat, pr)
    for s in range(3):
        single = make_probes(pat, pr[s], gated=(kind == "mamba"))
        member = stack.member(s)
        for name, probe in single.items():
            if name in got:
                with torch.no_grad():
                    expected = float(probe(member))
                assert float(got[name][s]) == pytest.approx(expected, rel=1e-9, abs=1e-12), name
    assert set(got) >= {"attn_dist0", "attn_dist1", "muWBmu", "muWCmu"}
    assert kind == "linear" or {"w_v", "w_mu", "wp_clean", "wp_outlier", "gate_sum", "lemma6"} <= set(got)
