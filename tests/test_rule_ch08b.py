"""Counterfactual tests of Chapter 12's new statistics (issue 41, items 4-5): the batch penalty where Theorems 1 and
3 predict B_M > B_T, the error gap over test lengths, the kappa_a sweep; each judged by the exact sign test, with a
constructed measurement that holds, one that fails and one that is undecided, and "decided by about N seeds" giving
its direction (and absent where more seeds cannot decide)."""
import math

import pytest

from mambaicl.analysis.claims import CLAIMS, judge_all
from mambaicl.analysis.verdicts import FIG2_EPSILON
from mambaicl.experiments import batch_size as bs
from mambaicl.experiments import context_examples as ce
from mambaicl.experiments import kappa_lower_bound as kl

N = 20


# ---------------------------------------------------------------- the formulas of Theorems 1 and 3


def test_figure2_values_give_b_m_equal_to_b_t():
    """At Figure 2's values (V = 3, beta = 3, kappa_a = 2, p_a = 0.6, M1 = 6, epsilon = 0.01) the kappa_a term of
    B_M is below 1, M1 (1-p_a)^-1 log eps^-1 is about 69 and eps^-2 log eps^-1 about 46,052: B_M = B_T."""
    b = bs.FIG2.bounds("fig2")
    assert b["kappa_term"] == pytest.approx(9 / 81 / 4 / 0.16 * math.log(100))
    assert b["kappa_term"] < 1
    assert b["M1_term"] == pytest.approx(6 / 0.4 * math.log(1 / FIG2_EPSILON)) and 68 < b["M1_term"] < 70
    assert b["B_T"] == pytest.approx(1e4 * math.log(100)) and b["B_M"] == b["B_T"] and b["ratio"] == 1.0


def test_theory_setting_predicts_b_m_at_least_twice_b_t():
    b = bs.FIG2.bounds("theory")
    assert bs.FIG2.setting_data("theory").kappa_a == pytest.approx(2 * 3 / 81, rel=1e-5)
    assert b["B_T"] == pytest.approx(15 * math.log(1 / 0.3))  # the M1 term: eps^-2 = 11.1 < 15
    assert b["B_M"] == pytest.approx(81 / 4 * 6.25 * math.log(1 / 0.3), rel=1e-4)  # beta^4 / 4 (1-p_a)^-2 log eps^-1
    assert b["ratio"] >= 2 and b["ratio"] == pytest.approx(8.4375, rel=1e-4)
    # the judged batches straddle B_T, both below B_M (8 < B_T < 32 < B_M)
    assert bs.FIG2.batches[0] < b["B_T"] < bs.FIG2.batches[1] < b["B_M"]


# ---------------------------------------------------------------- batch-size: the paired penalty, sign test


def _batch_result(mamba_small, linear_small, cap=1.0):
    """A BatchResult whose reference losses are 0.1 (both models) and whose B = 8 and B = 32 losses are given."""
    ref = [0.1] * N
    hinge = {st: {"mamba": [[min(v, cap) for v in mamba_small]] * 2 + [ref],
                  "linear": [[min(v, cap) for v in linear_small]] * 2 + [ref]} for st in bs.SETTINGS}
    return bs.BatchResult(preset="t", seeds=list(range(N)), batches=[8, 32, 128],
                          kappas={"fig2": 2.0, "theory": 0.074074},
                          bounds={st: bs.FIG2.bounds(st) for st in bs.SETTINGS}, cap=cap, hinge=hinge,
                          diverged={st: {"mamba": [[], [], []], "linear": [[], [], []]} for st in bs.SETTINGS})


def test_batch_penalty_holds_fails_undecided():
    up = _batch_result([0.2 + 0.01 * s for s in range(N)], [0.15] * N)  # Mamba suffers more in every seed
    j = judge_all(up.claims())["batch-size"]
    assert up.difference()[0][0] == pytest.approx((0.2 - 0.1) - (0.15 - 0.1))
    assert j.outcome == "reproduced" and all(m["holds"] for m in j.measured_json()["all"])
    down = _batch_result([0.12] * N, [0.2] * N)  # the linear Transformer suffers more in every seed
    assert judge_all(down.claims())["batch-size"].outcome == "contradicted"
    split = _batch_result([0.2 if s % 2 else 0.12 for s in range(N)], [0.15] * N)  # 10 of 20 each way
    js = judge_all(split.claims())["batch-size"]
    assert js.outcome == "undecided"
    for m in js.measured_json()["all"]:  # an even split: more seeds cannot decide, so no count is printed
        assert m["holds"] is None and "seeds_to_decide" not in m and "decides_toward" not in m


def test_batch_penalty_direction_of_more_seeds():
    lean = _batch_result([0.2 if s < 13 else 0.12 for s in range(N)], [0.15] * N)  # 13 of 20 above: undecided
    m = judge_all(lean.claims())["batch-size"].measured_json()["all"][0]
    assert m["holds"] is None and m["decides_toward"] == "holds" and m["seeds_to_decide"] > N
    back = _batch_result([0.12 if s < 13 else 0.2 for s in range(N)], [0.15] * N)  # 13 of 20 below
    m = judge_all(back.claims())["batch-size"].measured_json()["all"][0]
    assert m["holds"] is None and m["decides_toward"] == "fails"


def test_a_diverged_run_counts_as_the_cap_not_as_a_dropped_seed():
    """A diverged Mamba seed scores the cap (1): its penalty is finite and counts for the paper's side."""
    r = _batch_result([math.inf if s < 16 else 0.1 for s in range(N)], [0.15] * N)
    d = r.difference()[0]
    assert all(math.isfinite(v) for v in d)
    assert sum(v > 0 for v in d) == 16 and sum(v < 0 for v in d) == 4
    assert judge_all(r.claims())["batch-size"].measured_json()["all"][0]["n_pos"] == 16


# ---------------------------------------------------------------- context-examples: the error gap over l_ts


def _context_result(gap30, gap45, l_grid=(2, 8, 32)):
    def curves(g):  # Mamba 0.05 at every l_ts, the linear Transformer 0.05 + g at every l_ts
        return [[0.05] * len(l_grid) for _ in range(N)], [[0.05 + g[s]] * len(l_grid) for s in range(N)]

    m30, l30 = curves(gap30)
    m45, l45 = curves(gap45)
    return ce.ContextResult(preset="t", seeds=list(range(N)), alphas=[0.3, 0.45], l_grid=list(l_grid), level=0.05,
                            n_test=1000, errors={"mamba": [m30, m45], "linear": [l30, l45]},
                            needed={k: [[2] * N, [2] * N] for k in ("mamba", "linear")})


def test_context_gap_by_hand_and_its_outcomes():
    r = _context_result([0.01 * (s + 1) for s in range(N)], [0.02] * N)
    assert r.gap(0.3)[4] == pytest.approx(0.05)
    assert judge_all(r.claims())["context-examples"].outcome == "reproduced"
    r = _context_result([-0.01] * N, [-0.02] * N)
    assert judge_all(r.claims())["context-examples"].outcome == "contradicted"
    r = _context_result([0.01] * N, [0.02 if s < 12 else -0.02 for s in range(N)])  # 12 of 20: undecided
    j = judge_all(r.claims())["context-examples"]
    parts = j.measured_json()["all"]
    assert j.outcome == "undecided" and parts[0]["holds"] is True and parts[1]["holds"] is None
    assert parts[1]["decides_toward"] == "holds"


def test_context_gap_is_continuous_not_a_grid_step():
    """A change of the linear Transformer's error smaller than any grid step still moves the statistic."""
    a = _context_result([0.01] * N, [0.02] * N)
    b = _context_result([0.011] * N, [0.02] * N)
    assert b.gap(0.3)[0] - a.gap(0.3)[0] == pytest.approx(0.001)


# ---------------------------------------------------------------- kappa-lower-bound: the sweep


def _kappa_result(excess_by_ratio):
    """Mamba's hinge rises by ``excess`` at each ratio, the linear Transformer's not at all."""
    bound = kl.lower_bound(3, 3.0)
    kappas = [2.0] + [r * bound for r in excess_by_ratio]
    mamba = [[0.01] * N] + [[0.01 + e[s] for s in range(N)] for e in excess_by_ratio.values()]
    linear = [[0.08] * N for _ in kappas]
    return kl.KappaResult(preset="t", seeds=list(range(N)), kappas=kappas, n_val=100, V=3, beta=3.0,
                          hinge={"mamba": mamba, "linear": linear}, error={"mamba": mamba, "linear": linear})


def test_kappa_sweep_locates_where_the_excess_rise_disappears():
    up, even = [0.1] * N, [0.1 if s % 2 else -0.1 for s in range(N)]
    r = _kappa_result({0.1: up, 0.3: up, 1.0: up, 3.0: even, 10.0: even})
    assert [round(x["ratio"], 6) for x in r.sweep()] == [0.1, 0.3, 1.0, 3.0, 10.0]
    assert r.excess(1) == pytest.approx(up)
    assert r.vanishes() == (pytest.approx(1.0), pytest.approx(3.0))
    assert judge_all(r.claims())["kappa-lower-bound"].outcome == "reproduced"
    none = _kappa_result({0.1: even, 0.3: even, 1.0: even, 3.0: even, 10.0: even})
    assert none.vanishes() == (None, pytest.approx(0.1))
    j = judge_all(none.claims())["kappa-lower-bound"].measured_json()
    assert j["holds"] is None and "seeds_to_decide" not in j  # an even split: more seeds cannot decide
    down = _kappa_result({0.1: [-0.1] * N, 0.3: even, 1.0: even, 3.0: even, 10.0: even})
    assert judge_all(down.claims())["kappa-lower-bound"].outcome == "contradicted"


def test_the_declarations_are_sign_tests_at_the_declared_settings():
    for key in ("batch-size", "context-examples", "kappa-lower-bound"):
        assert all(p.test == "sign" and p.kind == "above" and p.threshold == 0 for p in CLAIMS[key].parts)
    assert kl.FIG2.kappas[0] == 2.0 and [round(k / kl.lower_bound(3, 3.0), 3) for k in kl.FIG2.kappas[1:]] == \
        list(kl.RATIOS)
    assert tuple(bs.FIG2.batches) == (8, 32, 128) and bs.FIG2.kappa_ratio == 2.0 and bs.FIG2.epsilon == 0.3
