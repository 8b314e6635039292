"""Counterfactual tests of Chapter 12's statistics (issue 41): results built so that the answer is known.

The rows ``fig2-information-bound`` (the reader bound, per task group and rule), ``fig2-seed-tail`` (rho and the
per-seed errors it ranks), ``rmsnorm-causal`` (the paired log-gate-ratio contrast, exact sign test) and
``deep-gate-after-zero`` (rate after minus half the rate before, exact sign test): for each, a measurement that
holds, one that fails and one that stays undecided, judged by the registry's own rows through the experiments'
``claims()``.
"""
from __future__ import annotations

import math

import pytest

from mambaicl.analysis import information
from mambaicl.analysis.claims import judge_all
from mambaicl.experiments import deep_gate_training, rmsnorm_causal, seed_tail

S = 10
GROUPS = seed_tail.BOUND_GROUPS
N_TASKS = {"training": 6, "reversed": 6, "distance 2": 12, "distance 3": 6}


def _bound_result(offset: dict, spread: float = 0.002, n_test: int = 4000) -> seed_tail.SeedTailResult:
    """A seed-tail result whose error on each group is the group's reader bound plus ``offset[group]`` (seed spread
    ``spread``), the same under every rule."""
    by = information.information_bound_by_group(0.8, 20, 6)
    ge = {g: [by[g][0] + offset[g] + spread * (i - (S - 1) / 2) / S for i in range(S)] for g in GROUPS}
    err = [0.01 + 0.001 * i for i in range(S)]
    return seed_tail.SeedTailResult(
        preset="fig2", seeds=list(range(S)), alpha=0.8, n_test=n_test, group_errors={r: ge for r in "ABC"},
        all_error={r: [0.1] * S for r in "ABC"}, claim_error={r: err for r in "ABC"},
        predictor=[float(i) for i in range(S)], test_logits=[[0.0] * 3] * S, train_proj=[[0.0] * 3] * S,
        bound_all=information.information_bound_all_tasks(0.8, 20, 6),
        bound_by_group={k: list(v) for k, v in by.items()}, fail_level=seed_tail.FAIL_LEVEL, failing=[],
        spearman=seed_tail.spearman([float(i) for i in range(S)], err), auc={}, spec=seed_tail.FIG2)


def test_bayes_error_is_below_the_reader_bound_and_equal_on_met_groups():
    assert information.bayes_error(0.8, 20) == pytest.approx(0.8 ** 20 / 2)
    assert information.bayes_error(0.8, 20) == pytest.approx(information.information_bound(0.8, 20, "training"))
    assert information.bayes_error(0.8, 20) < information.information_bound(0.8, 20, "distance 2") / 5


def test_reader_bound_row_holds_fails_and_is_undecided_per_group():
    j = judge_all(_bound_result({g: 0.05 for g in GROUPS}).claims())["fig2-information-bound"]
    assert len(j.outcomes()) == 12 and j.outcome == "reproduced"
    j = judge_all(_bound_result({"training": 0.05, "reversed": 0.05, "distance 2": 0.2,
                                 "distance 3": -0.04}).claims())["fig2-information-bound"]
    assert j.outcomes() == [True, True, True, False] * 3 and j.outcome == "partly reproduced"
    j = judge_all(_bound_result({g: 0.0005 for g in GROUPS}, spread=0.01).claims())["fig2-information-bound"]
    assert j.outcomes() == [None] * 12 and j.outcome == "undecided"


def test_seed_tail_row_stores_both_series_so_rho_can_be_recomputed():
    res = _bound_result({g: 0.05 for g in GROUPS})
    j = judge_all(res.claims())["fig2-seed-tail"]
    parts = j.measured_json()["all"]
    assert parts[0]["values"] == pytest.approx(res.predictor) and parts[1]["values"] == pytest.approx(res.claim_error["A"])
    assert seed_tail.spearman(parts[0]["values"], parts[1]["values"])["rho"] == pytest.approx(parts[0]["mean"], abs=1e-5)
    assert j.outcomes() == [True, True]  # rho = 1; every error below the failure level 0.05
    res.claim_error = {r: [0.2] * S for r in "ABC"}  # every seed above the failure level: the second part fails
    assert judge_all(res.claims())["fig2-seed-tail"].outcomes()[1] is False


def _rmsnorm(after_first: list, rms: list) -> rmsnorm_causal.RmsnormCausalResult:
    n = len(after_first)
    return rmsnorm_causal.RmsnormCausalResult(
        preset="fig3", seeds=list(range(n)), gate_ratio={"after_first": [after_first] * 3, "rms": [rms] * 3},
        suppress={k: [[float(r < 1 / 6) for r in v]] * 3 for k, v in (("after_first", after_first), ("rms", rms))},
        reversed_error={"after_first": [0.01] * n, "rms": [0.01] * n}, n_group=1000, lr={"after_first": 0.03, "rms": 0.03},
        test_error={"after_first": [0.1] * n, "rms": [0.1] * n})


@pytest.mark.parametrize("after_first, expected", [
    ([0.5] * 10, True),  # every seed's gate ratio lower without the norm: p = 2^-10
    ([1.5] * 10, False),  # every seed's higher: the sign test's other side
    ([0.5] * 6 + [1.5] * 4, None),  # 6 of 10: p = 0.38, undecided
])
def test_rmsnorm_causal_contrast_by_sign_test(after_first, expected):
    j = judge_all(_rmsnorm(after_first, [1.0] * 10).claims())["rmsnorm-causal"]
    assert j.outcomes()[0] is expected
    assert j.measured[0].values == pytest.approx([math.log(a) for a in after_first])


def test_rmsnorm_causal_contrast_ignores_the_one_sixth_threshold():
    # the ratio drops from 0.17 to 0.165 in every seed: the indicator "< 1/6" flips in all ten, the contrast barely
    j = judge_all(_rmsnorm([0.165] * 10, [0.17] * 10).claims())["rmsnorm-causal"]
    assert j.outcomes()[0] is True and abs(j.measured[0].mean) < 0.05


def _deep(before: list, after: list, zero=None) -> deep_gate_training.DeepGateResult:
    n = len(before)
    zero = [50] * n if zero is None else zero
    return deep_gate_training.DeepGateResult(
        preset="fig3", seeds=list(range(n)), lr=0.03, steps=[0, 25, 50], val_hinge=[[1.0, 0.1, 0.0]] * n,
        active=[[1.0, 0.1, 0.0]] * n, log_ratio=[[[0.0]] * 3] * n, zero_step=zero,
        rate_before=before, rate_after=after, active_at_zero=[0.0] * n)


@pytest.mark.parametrize("after, expected", [
    ([0.05] * 10, True),  # far less than half the rate before (0.6) in every seed
    ([0.6] * 10, False),  # as fast after as before: above half in every seed
    ([0.05] * 6 + [0.6] * 4, None),  # 6 of 10 seeds: undecided
])
def test_deep_gate_contrast_by_sign_test(after, expected):
    j = judge_all(_deep([0.6] * 10, after).claims())["deep-gate-after-zero"]
    assert j.outcomes() == [expected]


def test_deep_gate_contrast_leaves_out_seeds_that_never_reach_zero():
    res = _deep([0.6] * 9 + [math.nan], [0.05] * 9 + [math.nan], zero=[50] * 9 + [-1])
    assert len(res.contrast()) == 9
    assert res.contrast()[0] == pytest.approx(0.05 - 0.3)
