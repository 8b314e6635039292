"""Counterfactual tests of the rule (issue 41): measurements built so that the answer is known.

A contrast that holds, fails and is undecided; Holm's correction turning a lone 2.5 % failure among many parts into
undecided (and leaving a strong failure failing); the exact sign test on 0/1 per-seed data (4 of 4 discordant seeds:
p = 1/16, undecided, where a t interval says "holds"); sufficient conditions judged on their stated side; "decided by
about N seeds" with its direction, and nothing where more seeds cannot decide.
"""
from __future__ import annotations

import math

import pytest

from mambaicl.analysis.claims import CLAIMS, EXPONENT_MARGIN
from mambaicl.analysis.outcomes import (FAMILY_LEVEL, annotate, decides_toward, outcome_of, p_fail, row_outcomes,
                                        seeds_needed)
from mambaicl.analysis.stats import holm, sign_test, t_quantile
from mambaicl.analysis.verdicts import Claim, Measured, above, all_of, below, sign_test_of, within


N = 20


def _seeds(mean: float, sd: float, n: int = N) -> list:
    """n values with exactly this mean and sample standard deviation (symmetric, deterministic)."""
    half = n // 2
    dev = [sd * math.sqrt((n - 1) / n)] * half + [-sd * math.sqrt((n - 1) / n)] * half
    return [mean + d for d in dev]


def _m(mean: float, z: float, n: int = N, threshold: float = 0.0) -> dict:
    """A stored measurement whose mean sits ``z`` standard errors from ``threshold`` (t interval, n seeds)."""
    se = 1.0
    mean = threshold + z * se
    half = t_quantile(n - 1) * se
    return {"mean": mean, "low": mean - half, "high": mean + half, "n_seeds": n, "values": []}


def test_a_contrast_holds_fails_or_is_undecided():
    c = Claim("x", "ch", "i", "q", "s", "q", "t", "test", above(0.0, "Mamba − LT > 0"))
    assert c.judge(per_seed=_seeds(0.5, 0.2)).verdict == "reproduced"
    assert c.judge(per_seed=_seeds(-0.5, 0.2)).verdict == "contradicted"
    j = c.judge(per_seed=_seeds(0.05, 0.5))
    assert j.verdict == "undecided"
    m = j.measured_json()
    assert m["decides_toward"] == "holds" and m["seeds_to_decide"] > N
    j = c.judge(per_seed=_seeds(-0.05, 0.5))
    assert j.verdict == "undecided" and j.measured_json()["decides_toward"] == "fails"


def test_holm_turns_a_lone_failure_among_many_parts_into_undecided():
    # one part just beyond the 2.5 % line (p ≈ 0.02), sixteen that hold: alone it fails, in the row it is undecided
    z = float(__import__("scipy.stats", fromlist=["t"]).t.isf(0.02, N - 1))
    lone = _m(0, z)
    crit_one = below(0.0, "x < 0")
    assert row_outcomes(crit_one.to_json(), lone) == [False]
    assert 0.015 < p_fail(crit_one.to_json(), lone) < FAMILY_LEVEL
    parts = [below(0.0, f"part {k}") for k in range(17)]
    crit = all_of("seventeen parts", *parts).to_json()
    ms = [_m(0, z)] + [_m(0, -10) for _ in range(16)]
    outs = row_outcomes(crit, {"all": ms})
    assert outs[0] is None and all(o is True for o in outs[1:])
    assert outcome_of(crit, {"all": ms}) == "undecided"
    ann = annotate(crit, {"all": ms})["all"][0]
    assert ann["p_holm"] > FAMILY_LEVEL and ann["decides_toward"] == "fails"
    # a failure strong enough for the family still fails
    ms[0] = _m(0, 8)
    assert row_outcomes(crit, {"all": ms})[0] is False
    assert outcome_of(crit, {"all": ms}) == "partly reproduced"


def test_holm_step_down_adjusted_p_values():
    adj = holm([0.01, 0.04, 0.03, None], 0.025)
    assert adj[3] is None
    assert adj[0] == pytest.approx(0.03) and adj[2] == pytest.approx(0.06) and adj[1] == pytest.approx(0.06)


def test_sign_test_on_0_1_per_seed_data():
    # 4 of 4 discordant seeds in the same direction: exact one-sided p = 1/16; a t interval would say "holds"
    vals = [0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0]
    st = sign_test(vals)
    assert (st["n_pos"], st["n_neg"], st["n_ties"]) == (4, 0, 6) and st["p_above"] == pytest.approx(1 / 16)
    t_row = Claim("t", "ch", "i", "q", "s", "q", "t", "test", above(0.0, "more seeds suppress"))
    assert t_row.judge(per_seed=vals).verdict == "reproduced"
    s_row = Claim("s", "ch", "i", "q", "s", "q", "t", "test", sign_test_of("above", 0.0, "more seeds suppress"))
    j = s_row.judge(per_seed=vals)
    m = j.measured_json()
    assert j.verdict == "undecided" and (m["n_pos"], m["n_neg"]) == (4, 0)
    assert m["decides_toward"] == "holds" and m["seeds_to_decide"] > 10
    # six of six: p = 1/64 < 0.025 holds; six of six the other way fails
    assert s_row.judge(per_seed=[1.0] * 6 + [0.0] * 4).verdict == "reproduced"
    assert s_row.judge(per_seed=[-1.0] * 6 + [0.0] * 4).verdict == "contradicted"
    # an even split: more seeds cannot decide it, and nothing is printed
    m = s_row.judge(per_seed=[1.0, -1.0] * 3).measured_json()
    assert m["holds"] is None and "seeds_to_decide" not in m and decides_toward(s_row.criterion.to_json(), m) is None


def test_rmsnorm_rows_use_the_exact_sign_test():
    for key in ("rmsnorm", "rmsnorm-causal"):
        assert CLAIMS[key].parts[0].test == "sign"


@pytest.mark.parametrize("key,factor_sides", [
    ("ch3-theorem1", ["above", "above", "below", "below", "below"]),  # η, 1−p_a shrink; β, M1, l_tr grow
    ("beta-scaled", ["below", "below"]),
])
def test_sufficient_conditions_are_one_sided(key, factor_sides):
    assert [p.side for p in CLAIMS[key].parts] == factor_sides
    theta = CLAIMS[key + "-theta"]
    assert all(p.side is None for p in theta.parts)  # the Θ reading stays two-sided, in its own row


def test_one_sided_exponents_fail_only_on_their_side():
    c = CLAIMS["beta-scaled"]
    # falling faster with β than β^-2 (−2.53): holds for the sufficient count, fails the Θ reading
    fast = Measured(-2.53, -2.72, -2.33, N)
    slow = Measured(-1.37, -1.56, -1.18, N)
    assert c.judge(parts=[fast, fast]).verdict == "reproduced"
    assert c.judge(parts=[slow, slow]).verdict == "contradicted"
    assert CLAIMS["beta-scaled-theta"].judge(parts=[fast, fast]).verdict == "contradicted"
    # η: a count that grows more slowly than η^-1 as η → 0 (exponent −0.5) holds; faster (−1.6) fails
    t1 = CLAIMS["ch3-theorem1"]
    ok = [Measured(-1.0, -1.05, -0.95, N)] * 5
    assert t1.judge(parts=[Measured(-0.5, -0.55, -0.45, N)] + [Measured(-1.0, -1.05, -0.95, N),
                                                               Measured(-2.0, -2.05, -1.95, N),
                                                               Measured(1.0, 0.95, 1.05, N),
                                                               Measured(0.0, -0.05, 0.05, N)]).verdict == "reproduced"
    bad = t1.judge(parts=[Measured(-1.6, -1.65, -1.55, N)] + [Measured(-1.0, -1.05, -0.95, N),
                                                              Measured(-2.0, -2.05, -1.95, N),
                                                              Measured(1.0, 0.95, 1.05, N),
                                                              Measured(0.0, -0.05, 0.05, N)])
    assert bad.outcomes()[0] is False and len(ok) == 5
    assert -1 - EXPONENT_MARGIN == -1.25


def test_no_seed_count_where_more_seeds_cannot_decide():
    p = within(0.0, 1.0, "x = 0 ± 1").to_json()
    on_point = {"mean": 1.0, "low": 0.5, "high": 1.5, "n_seeds": N}
    assert seeds_needed(p, on_point) is None and decides_toward(p, on_point) is None
    one_fit = {"mean": 0.5, "low": 0.1, "high": 0.9, "n_seeds": 1}  # a sampling error of one fit
    assert seeds_needed(below(0.8, "x < 0.8").to_json(), one_fit) is None
    zero_width = {"mean": 0.5, "low": 0.5, "high": 0.5, "n_seeds": N}
    assert seeds_needed(below(0.4, "x < 0.4").to_json(), zero_width) is None
