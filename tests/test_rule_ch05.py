"""Counterfactual tests of Chapter 8's statistics under the rule of issue 41 (measurements built so that the answer
is known): Corollary 1 as linear contrasts per seed and task group (``other − ε/(1−p_a)·same``, ``|other|`` for the
never-met distance-3 pairs) in rows ``cor1`` and ``fig3``; ``rmsnorm`` on a continuous per-seed statistic by the
exact sign test; ``locality`` judged on the three-layer stack, with the one-layer model's difference a diagnostic.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from mambaicl.analysis.claims import CLAIMS, COR1_BOUND, FIG2_EPSILON
from mambaicl.analysis.text import GROUP_ORDER
from mambaicl.experiments.mechanism import MechanismResult

S = 10


def _spread(mean: float, sd: float, n: int = S) -> list:
    """n values with this mean and a symmetric spread (deterministic)."""
    return [mean + sd * (1 if i % 2 else -1) for i in range(n)]


def _fake(same: dict, other: dict):
    """A stand-in with a result's ``group_sums`` (``{group: per-seed list}`` for each sum, first layer)."""
    groups = {g: {"same": [[v] for v in same[g]], "other": [[v] for v in other[g]]} for g in GROUP_ORDER}
    fake = SimpleNamespace(group_sums=groups)
    fake.group_sum = lambda g, which, layer=0: MechanismResult.group_sum(fake, g, which, layer)
    return fake


def _cor1(same_level: float, other: dict, sd: float = 0.05):
    same = {g: _spread(same_level, 0.1) for g in GROUP_ORDER}
    sds = sd if isinstance(sd, dict) else {g: sd for g in GROUP_ORDER}
    fake = _fake(same, {g: _spread(other[g], sds[g]) for g in GROUP_ORDER})
    con = MechanismResult.cor1_contrasts(fake, COR1_BOUND)
    same_all = [sum(v) / len(v) for v in zip(*same.values())]
    return CLAIMS["cor1"].judge(parts=[same_all] + [con[g] for g in GROUP_ORDER]), con


def test_cor1_bound_is_epsilon_over_one_minus_the_mechanism_p_a():
    assert COR1_BOUND == pytest.approx(FIG2_EPSILON / (1 - 0.4))  # §4.1: ε = 0.01, p_a = 0.4
    assert [p.threshold for p in CLAIMS["cor1"].parts[1:]] == [0.0] * 4
    assert CLAIMS["fig3"].parts[2:] == CLAIMS["cor1"].parts[1:] or all(
        p.kind == "below" and p.threshold == 0.0 for p in CLAIMS["fig3"].parts[2:])


def test_cor1_contrast_holds_when_other_is_small_or_negative():
    j, con = _cor1(10.0, {"training": -3.0, "reversed": -3.0, "distance 2": 0.0, "distance 3": 0.0})
    assert j.verdict == "reproduced"
    # the contrast is other − bound·same per seed, |other| at distance 3
    assert con["training"][0] == pytest.approx(-3.05 - COR1_BOUND * 9.9)
    assert con["distance 3"][0] == pytest.approx(0.05 - COR1_BOUND * 9.9)


def test_cor1_contrast_fails_when_other_exceeds_its_share_of_same():
    j, _ = _cor1(10.0, {"training": -3.0, "reversed": -3.0, "distance 2": 2.0, "distance 3": 0.0})
    assert j.outcomes() == [True, True, True, False, True] and j.verdict == "partly reproduced"


def test_never_met_pairs_are_judged_on_the_absolute_value():
    # a strongly negative coupling at distance 3 passes a signed bound but not App. 10.2's |.|
    j, _ = _cor1(10.0, {"training": -3.0, "reversed": -3.0, "distance 2": -3.0, "distance 3": -3.0})
    assert j.outcomes() == [True, True, True, True, False]


def test_cor1_contrast_undecided_near_the_bound():
    # other ≈ bound·same, with seed spread: the interval straddles 0
    j, _ = _cor1(10.0, {"training": -3.0, "reversed": -3.0, "distance 2": COR1_BOUND * 10.0, "distance 3": 0.0},
                 sd={"training": 0.05, "reversed": 0.05, "distance 2": 0.5, "distance 3": 0.05})
    assert j.outcomes()[3] is None and j.verdict == "undecided"


def test_a_ratio_near_a_zero_denominator_no_longer_decides_the_row():
    """The motivating case: one seed's same sum near 0 (+3.56 on one code path, −0.55 on another). A per-seed ratio
    other/same jumps by orders of magnitude; the contrast moves by about bound·4, far less than its spread."""
    same = {g: [5.0] * S for g in GROUP_ORDER}
    other = {g: _spread(-2.0, 0.3) for g in GROUP_ORDER}
    a, b = dict(same), dict(same)
    a["distance 2"] = [3.56] + [5.0] * (S - 1)
    b["distance 2"] = [-0.55] + [5.0] * (S - 1)
    ca = MechanismResult.cor1_contrasts(_fake(a, other), COR1_BOUND)["distance 2"]
    cb = MechanismResult.cor1_contrasts(_fake(b, other), COR1_BOUND)["distance 2"]
    assert abs(ca[0] - cb[0]) < 0.1
    ra, rb = other["distance 2"][0] / a["distance 2"][0], other["distance 2"][0] / b["distance 2"][0]
    assert ra < 0 < rb  # the ratio flips sign


@pytest.mark.parametrize("values,verdict", [
    ([0.5] * 9 + [-0.1], "reproduced"),  # 9 of 10 above: p = 11/1024 < 0.025
    ([-0.5] * 10, "contradicted"),  # 10 of 10 below in every layer: p = 1/1024, Holm x3 still < 0.025
    ([-0.5] * 9 + [0.1], "undecided"),  # 9 of 10 below (p = 0.011 alone) in all three layers: Holm x3 = 0.032
    ([0.5] * 7 + [-0.1] * 3, "undecided"),  # 7 of 10: p = 0.17
])
def test_rmsnorm_log_ratio_by_the_exact_sign_test(values, verdict):
    c = CLAIMS["rmsnorm"]
    assert all(p.test == "sign" for p in c.parts)
    assert c.judge(parts=[values] * 3).outcome == verdict


def test_rmsnorm_statistic_is_continuous_not_an_indicator():
    # two seeds just either side of 1/M1 in both stacks: an indicator difference would be 0/1, the log ratio is not
    r_rms, r_none = [1 / 6 + 1e-3, 0.5], [1 / 6 - 1e-3, 0.1]
    log_ratio = [math.log10(a) - math.log10(b) for a, b in zip(r_rms, r_none)]
    assert 0 < log_ratio[0] < 0.01 and log_ratio[1] == pytest.approx(math.log10(5))


def test_locality_judges_three_layers_and_shows_one_layer_as_a_diagnostic():
    loc, one = CLAIMS["locality"], CLAIMS["locality-one-layer"]
    assert loc.criterion.kind == "above" and "three layers" in loc.criterion.text
    assert one.criterion.kind == "diagnostic"
    assert loc.judge(per_seed=_spread(0.19, 0.05)).verdict == "reproduced"
    assert loc.judge(per_seed=_spread(-0.19, 0.05)).verdict == "contradicted"
    assert loc.judge(per_seed=_spread(0.01, 0.05)).verdict == "undecided"
    # a one-layer CQ ≈ FQ no longer makes the row fail or stay undecided
    assert one.judge(per_seed=_spread(0.007, 0.01)).verdict == "diagnostic"
