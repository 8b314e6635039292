"""The Figure 2 experiment's helpers (Chapter 4): batched step-size search, sweeps, task groups, attention by
distance, the 95 % t-interval "below 0.01" rule, break-down points, crossing lengths, and the chapter's figure functions.
Every check compares with an independent computation."""
import dataclasses
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from mambaicl.analysis.stats import error_mean_se  # noqa: E402
from mambaicl.experiments import fig2  # noqa: E402

SMALL = dataclasses.replace(fig2.TINY, train={k: dataclasses.replace(v, steps=40) for k, v in fig2.TINY.train.items()},
                            n_test=200)


def test_claim_tasks_are_the_18_tasks_not_two_apart():
    tasks = fig2.claim_tasks(6).tolist()
    assert len(tasks) == 18
    for a, b in tasks:
        d = min(abs(a - b), 6 - abs(a - b))
        assert d != 2 and a != b
    # the 12 left out: every ordered pair two steps apart on the cycle
    two_apart = [(a, b) for a in range(6) for b in range(6) if min(abs(a - b), 6 - abs(a - b)) == 2]
    assert len(two_apart) == 12 and not set(map(tuple, tasks)) & set(two_apart)


def test_below_up_to_applies_the_t_interval_rule():
    alphas = [0.0, 0.1, 0.2, 0.3]
    assert fig2.below_up_to(alphas, [0.001, 0.002, 0.02, 0.001], [0.001] * 4, 5) == 0.1  # stops at the first failure
    # mean 0.008 with SE 0.001 over 5 seeds: 0.008 + 2.776 * 0.001 = 0.0108 is not below 0.01 (2 SE would be)
    assert math.isnan(fig2.below_up_to(alphas, [0.008, 0.001, 0.001, 0.001], [0.001] * 4, 5))
    assert fig2.below_up_to(alphas, [0.008, 0.001, 0.001, 0.001], [0.001] * 4, 1000) == 0.3  # t -> 1.96
    assert fig2.below_up_to(alphas, [0.001] * 4, [0.0] * 4, 5) == 0.3
    with pytest.raises(ValueError, match=r"^alphas, mean and se must be non-empty and aligned; got 4, 1, 1"):
        fig2.below_up_to(alphas, [0.0], [0.0], 5)


@pytest.fixture(scope="module")
def small():
    pat = fig2.patterns(SMALL)
    stacks = {k: s for k, (s, _) in fig2.trained_models(SMALL, pat, (0, 1)).items()}
    return pat, stacks


def test_attention_by_distance_matches_a_loop_over_pairs(small):
    pat, stacks = small
    A = fig2.attention_by_distance(stacks["mamba"], pat.mu)
    assert A.shape == (2, 4)
    for s in range(2):
        member = stacks["mamba"].member(s)
        M = (member.W_B.T @ member.W_C).detach()
        mu = torch.nn.functional.pad(pat.mu, (0, 1))
        for k in range(4):
            vals = [float(mu[i] @ M @ mu[j]) for i in range(6) for j in range(6) if min(abs(i - j), 6 - abs(i - j)) == k]
            assert A[s, k].item() == pytest.approx(sum(vals) / len(vals), rel=1e-9, abs=1e-12)


def test_sweep_means_are_the_means_of_the_seeds_and_streams_differ(small):
    pat, stacks = small
    sw = fig2.sweep({"mamba": stacks["mamba"]}, pat, SMALL, (0, 1), rules=["A"], alphas=(0.0, 0.8), n=300)
    per = np.array(sw.per_seed["mamba"]["A"])  # (seeds, alphas)
    assert per.shape == (2, 2)
    for i in range(2):
        m, se = error_mean_se(per[:, i].tolist(), 300)
        assert sw.mean["mamba"]["A"][i] == pytest.approx(m) and sw.se["mamba"]["A"][i] == pytest.approx(se)
    other = fig2.sweep({"mamba": stacks["mamba"]}, pat, SMALL, (0, 1), rules=["A"], alphas=(0.0, 0.8), n=300,
                       stage="elsewhere")
    again = fig2.sweep({"mamba": stacks["mamba"]}, pat, SMALL, (0, 1), rules=["A"], alphas=(0.0, 0.8), n=300)
    assert again.per_seed == sw.per_seed  # deterministic
    assert other.per_seed != sw.per_seed or per.max() == 0  # another stage draws other prompts


def test_group_errors_partition_the_all_task_error(small):
    """Equal-size groups weighted by their task counts give back the all-task error (in expectation)."""
    pat, stacks = small
    test = dataclasses.replace(SMALL.test, alpha=0.0)
    g = fig2.group_errors(stacks["mamba"], pat, test, (0, 1), 2000, "groups")
    assert set(g) == {"training", "reversed", "distance 2", "distance 3"}
    counts = {"training": 6, "reversed": 6, "distance 2": 12, "distance 3": 6}
    weighted = sum(counts[k] * np.mean(v) for k, v in g.items()) / 30
    total = fig2.sweep({"mamba": stacks["mamba"]}, pat, SMALL, (0, 1), rules=["A"], alphas=(0.0,), n=4000,
                       stage="total").mean["mamba"]["A"][0]
    assert abs(weighted - total) < 0.03


def test_eta_table_picks_the_lowest_mean_hinge_and_compares_paired():
    s = fig2.eta_table(SMALL, "linear", (0.001, 0.01, 0.1), seeds=(20, 21), n_val=500)
    assert len(s.per_seed) == 3 and all(len(h) == 2 for h in s.per_seed)
    means = [sum(h) / 2 for h in s.per_seed]
    assert s.mean == pytest.approx(means)
    assert s.best == s.lrs[int(np.argmin(means))]
    assert s.versus_best(s.best).diff == 0.0
    te = fig2.eta_test_errors(s, SMALL, (0.0, 0.5), n=200)
    assert set(te) == set(s.lrs) and np.array(te[0.01]).shape == (2, 2)
    assert all(0 <= e <= 1 for rows in te.values() for row in rows for e in row)


def test_eta_table_rejects_bad_input():
    with pytest.raises(ValueError, match=r"^lrs\[1\] must be a real number in \(0.0, 1.0\]; got 2.0"):
        fig2.eta_table(SMALL, "mamba", (0.1, 2.0))
    with pytest.raises(ValueError, match=r"^kind must be one of \('mamba', 'mamba_merged', 'linear'\); got 'softmax'"):
        fig2.eta_table(SMALL, "softmax", (0.1,))


def test_breakdown_is_the_first_alpha_with_a_jump(small):
    pat, stacks = small
    bd = fig2.breakdown_sweep(SMALL, pat, (0, 1), p_as=(0.6,), l_tss=(20,), kinds=("linear",),
                              trained={0.6: {"linear": stacks["linear"]}}, n=300, jump=0.05)
    rows = bd.errors["linear_transformer"][0.6, 20]
    for s, row in enumerate(rows):
        first = next((a for a, e in zip(SMALL.alphas, row) if e > row[0] + 0.05), 1.0)
        assert bd.per_seed["linear_transformer"][0.6, 20][s] == first
    assert bd.bound_mamba[0.6, 20] == pytest.approx(0.6)


def test_figure_functions_draw_every_legend_entry(small):
    pat, stacks = small
    alphas = [0.0, 0.5, 0.8]
    errs = {k: {r: [0.01, 0.02, 0.3] for r in "ABC"} for k in ("mamba", "mamba_merged", "linear_transformer")}
    per_seed = {k: {r: [[0.01, 0.02, 0.3], [0.0, 0.03, 0.2], [0.02, 0.01, 0.9]] for r in "ABC"} for k in errs}
    fig, axes = plt.subplots(1, 3)
    handles = fig2_viz().plot_figure2(axes, alphas, errs, per_seed, claim=(errs["mamba"], per_seed["mamba"]),
                                      bound_mamba=0.6)
    assert len(handles) == 4 + 3  # four curves, the paper's line, two bounds
    dots = [c for c in axes[0].collections if c.get_offsets().shape[0] == 3 * 3]  # one dot per seed and alpha
    assert len(dots) == 4 and sorted(dots[0].get_offsets()[:, 1].tolist()) == sorted([0.01, 0.02, 0.3, 0.0, 0.03,
                                                                                      0.2, 0.02, 0.01, 0.9])
    plt.close(fig)
    fig, axes = plt.subplots(1, 3)
    A = fig2.attention_by_distance(stacks["mamba"], pat.mu).numpy()
    fig2_viz().plot_attention_matrices(axes[:2], {"a": np.eye(6), "b": -np.eye(6)})
    fig2_viz().plot_attention_by_distance(axes[2], {"Mamba": ("mamba", "", A)})
    assert [t.get_text() for t in axes[0].get_xticklabels()] == [str(j) for j in range(1, 7)]  # 1-based
    plt.close(fig)
    with pytest.raises(ValueError, match=r"^key must be a results.json model key, one of .*; got .softmax_transformer."):
        fig2_viz().palette_key("softmax_transformer")


def fig2_viz():
    from mambaicl.viz import fig2 as vf

    return vf


def test_eta_table_marks_a_diverging_step_size_and_keeps_the_others():
    """A step size at which training diverges scores inf (0-1 error 1); the others are as if searched alone."""
    pre = dataclasses.replace(SMALL, train={**SMALL.train, "linear": dataclasses.replace(SMALL.train["linear"], steps=300)})
    both = fig2.eta_table(pre, "linear", (0.01, 1.0), seeds=(20, 21), n_val=300)
    assert both.mean[1] == math.inf and both.per_seed[1] == [math.inf, math.inf] and both.error[1] == 1.0
    alone = fig2.eta_table(pre, "linear", (0.01,), seeds=(20, 21), n_val=300)
    np.testing.assert_allclose(both.per_seed[0], alone.per_seed[0], rtol=1e-10)
    assert both.best == 0.01 and both.error[0] == alone.error[0]


def test_eta_table_default_seeds_are_not_the_figure_s():
    s = fig2.eta_table(dataclasses.replace(SMALL, train={"mamba": dataclasses.replace(SMALL.train["mamba"], steps=2)}),
                        "mamba", (0.1,), n_val=50)
    assert s.seeds == [20, 21, 22, 23, 24] and not set(s.seeds) & set(fig2.DEFAULT_SEEDS)
