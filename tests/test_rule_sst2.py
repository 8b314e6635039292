"""Counterfactual tests of Chapter 9's issue-41 statistics (tests/test_rule_sst2.py).

* App. Table 5's gap "all components minus the top 10" is a *paired* difference: both probes are scored on the
  same dev sentences, so its standard error comes from the discordant sentences (McNemar's pairs), not from two
  independent binomial errors (:func:`mambaicl.analysis.sst2.paired_gap`); the registry's row ``sst2-table5``
  judged on it holds, fails and stays undecided as the counts say.
* "decided by about N seeds" for a contrast part of whose standard error every seed shares (SST-2's reused test
  sentences) is the number of seeds at which the shrinking part and the shared part together decide it
  (:func:`mambaicl.analysis.stats.seeds_to_decide` with ``se_shared``), and is absent where no number of seeds can.
"""
import math

import pytest

from mambaicl.analysis.claims import CLAIMS, Measured
from mambaicl.analysis.outcomes import annotate, seeds_needed
from mambaicl.analysis.sst2 import paired_gap
from mambaicl.analysis.stats import seeds_to_decide

PAPER_GAP = 80.05 - 78.90  # App. Table 5, DistilBERT: all minus the top 10 components, points


def _table5(all_only: int, top_only: int, n: int = 872):
    c = paired_gap(all_only, top_only, n)
    diff = c.diff - PAPER_GAP
    return CLAIMS["sst2-table5"].judge(Measured.from_se(diff, c.se, 1, (diff,), se_fixed=c.se))


def test_paired_gap_is_the_mean_of_per_sentence_differences():
    # 30 sentences only the full probe reads, 10 only the top-10 probe reads, 832 read alike, of 872
    c = paired_gap(30, 10, 872)
    d = [1.0] * 30 + [-1.0] * 10 + [0.0] * 832
    mean = sum(d) / len(d)
    var = sum((x - mean) ** 2 for x in d) / len(d)
    assert c.diff == pytest.approx(100 * mean)
    assert c.se == pytest.approx(100 * math.sqrt(var / len(d)))
    assert c.n_seeds == 1
    # paired: far tighter than two independent binomial errors at ~80 % accuracy on 872 sentences
    assert c.se < 0.5 * 100 * math.hypot(*(math.sqrt(0.8 * 0.2 / 872),) * 2)


@pytest.mark.parametrize("all_only, top_only, verdict", [
    (5, 5, "reproduced"),        # gap 0 +- 0.7: below the paper's 1.15 + 0.85 = 2 points
    (60, 5, "contradicted"),     # gap 6.3 +- 1.8: the whole interval above 2 points
    (30, 10, "undecided"),       # gap 2.3 +- 1.4: the interval straddles 2 points
])
def test_table5_row_on_discordant_counts(all_only, top_only, verdict):
    assert _table5(all_only, top_only).verdict == verdict


def test_table5_one_fit_has_no_seed_count_to_decide():
    m = _table5(30, 10).measured_json()
    assert m["holds"] is None and "seeds_to_decide" not in m and "decides_toward" not in m


def test_shared_noise_reduces_to_the_seed_only_count():
    for se, n, dist in ((1.0, 5, 1.5), (0.4, 5, 0.5), (2.0, 10, 1.0)):
        assert seeds_to_decide(se, n, dist, se_shared=1e-12) == seeds_to_decide(se, n, dist)


def test_shared_noise_that_alone_reaches_the_distance_cannot_be_decided():
    assert seeds_to_decide(1.0, 5, 1.5) is not None  # without the shared part more seeds would decide
    assert seeds_to_decide(1.0, 5, 1.5, se_shared=0.9) is None  # 1.96 x 0.9 > 1.5 for any number of seeds


def test_shared_noise_needs_more_seeds_than_seed_noise_alone():
    free, shared = seeds_to_decide(1.0, 5, 1.5), seeds_to_decide(1.0, 5, 1.5, se_shared=0.5)
    assert shared is not None and shared > free


def _row(mean, low, high, se_fixed=None):
    m = Measured(mean, low, high, 5, (mean,) * 5, se_fixed=se_fixed).to_json()
    return annotate({"kind": "above", "threshold": 0.0, "text": "x"}, m)


def test_annotate_gives_direction_only_where_seeds_can_decide():
    free = _row(0.3, -1.1, 1.7)  # undecided, toward holds
    assert free["holds"] is None and free["decides_toward"] == "holds" and free["seeds_to_decide"] > 5
    shared = _row(0.3, -1.1, 1.7, se_fixed=0.4)  # 1.96 x 0.4 > 0.3: the test sentences alone keep it undecided
    assert shared["holds"] is None and "seeds_to_decide" not in shared and "decides_toward" not in shared
    against = _row(-0.3, -1.7, 1.1)  # undecided, toward fails
    assert against["decides_toward"] == "fails"
    assert "decides_toward" not in _row(-0.3, -1.7, 1.1, se_fixed=0.4)


def test_measured_round_trip_keeps_the_shared_part():
    m = Measured(1.0, 0.0, 2.0, 5, (1.0,) * 5, se_fixed=0.25)
    assert Measured.from_json(m.to_json()) == m
    assert "se_fixed" not in Measured(1.0, 0.0, 2.0, 5, (1.0,) * 5).to_json()  # other rows' JSON unchanged
