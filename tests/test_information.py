"""The information bound of Figure 2 (mambaicl.analysis.information) against a Monte Carlo count on the prompts
that the package's own builders draw (Definition 2): the fraction of prompts with no readable context example."""
import dataclasses
import math

import pytest
import torch

from mambaicl.analysis import information as info
from mambaicl.analysis import theory
from mambaicl.config import SYNTHETIC_DATA, SYNTHETIC_TEST, ConfigError
from mambaicl.data import all_tasks, make_patterns, test_prompts, training_prompts, training_tasks
from mambaicl.data.task_sets import groups_for, task_set
from mambaicl.seeding import numpy_stream, torch_generator

M1 = SYNTHETIC_DATA.M1


def _no_readable(pr, met: bool) -> torch.Tensor:
    """Per prompt: no clean context example whose pattern is the query's (or, if ``met``, the partner's)."""
    query = pr.relevant[..., -1:]  # (B, 1)
    same = pr.relevant[..., :-1] == query
    readable = ~pr.outlier & (torch.ones_like(same) if met else same)  # both patterns of a task are readable
    return ~readable.any(-1)


@pytest.mark.parametrize("alpha,l_ts,placement", [(0.8, 20, "R"), (0.5, 10, "R"), (0.8, 20, "CQ"), (0.3, 5, "FQ")])
def test_bound_matches_a_count_on_definition_2_prompts(alpha, l_ts, placement):
    pat = make_patterns(SYNTHETIC_DATA, torch_generator(0, "patterns"))
    tasks = all_tasks(M1)
    names = groups_for(tasks, training_tasks(M1), M1)
    test = dataclasses.replace(SYNTHETIC_TEST, alpha=alpha, l_ts=l_ts, placement=placement)
    n = 40000
    for group in ("training", "reversed", "distance 2", "distance 3"):
        sub = tasks[torch.tensor([g == group for g in names])]
        pr = test_prompts(pat, test, sub, n, numpy_stream(1, f"info/{group}"))
        p = _no_readable(pr, group in info.MET_GROUPS).double().mean().item()
        want = 2 * info.information_bound(alpha, l_ts, group)  # P(no readable example)
        se = math.sqrt(max(want * (1 - want), 1e-12) / n)
        assert abs(p - want) < 4 * se + 1e-12, (group, p, want, se)


def test_training_bound_matches_definition_1_prompts():
    pat = make_patterns(SYNTHETIC_DATA, torch_generator(0, "patterns"))
    cfg = dataclasses.replace(SYNTHETIC_DATA, p_a=0.8, l_tr=8)
    pr = training_prompts(pat, cfg, training_tasks(M1), 40000, numpy_stream(2, "info/train"))
    p = _no_readable(pr, True).double().mean().item()
    want = 2 * info.training_information_bound(0.8, 8)
    assert abs(p - want) < 4 * math.sqrt(want * (1 - want) / 40000)


def test_closed_forms_and_all_task_average():
    assert info.information_bound(0.8, 20, "training") == pytest.approx(0.8 ** 20 / 2)
    assert info.information_bound(0.8, 20, "distance 2") == pytest.approx(0.9 ** 20 / 2)
    # cycle on six patterns: 6 training, 6 reversed, 12 at distance 2, 6 at distance 3
    by = info.information_bound_by_group(0.8, 20, 6)
    assert {g: n for g, (_, n) in by.items()} == {"training": 6, "reversed": 6, "distance 2": 12, "distance 3": 6}
    assert info.information_bound_all_tasks(0.8, 20, 6) == pytest.approx((12 * 0.8 ** 20 + 18 * 0.9 ** 20) / 60)
    assert info.information_bound(0.0, 20, "distance 3") == pytest.approx(0.5 ** 21)
    assert theory.information_bound is info.information_bound  # re-exported


def test_complete_meeting_sets():
    assert not info.complete_meeting(training_tasks(6), 6)
    assert info.complete_meeting(all_tasks(6), 6)
    assert not info.complete_meeting(task_set("two 3-cycles", 6), 6)
    assert info.information_bound_all_tasks(0.8, 20, 6, all_tasks(6)) == pytest.approx(0.8 ** 20 / 2)


def test_invalid_arguments():
    with pytest.raises(ConfigError, match=r"^alpha must lie in \[0, 1\]; got 1.5"):
        info.information_bound(1.5, 20, "training")
    with pytest.raises(ConfigError, match=r"^group must be 'training', 'reversed', 'distance k' or 'never met'; got 'far'"):
        info.information_bound(0.5, 20, "far")
    with pytest.raises(ValueError, match=r"^l_ts must be an integer in \[1, inf\]; got 0"):
        info.information_bound(0.5, 0, "training")
