"""Chapter 4's ablations: other Condition-1 training sets, their task groups, Theorem 4(d)'s forms and the
length sweep of the linear Transformer (each against an independent computation)."""
import dataclasses
import math

import pytest
import torch

from mambaicl.analysis import thm4d
from mambaicl.config import ConfigError, TestConfig
from mambaicl.data import all_tasks, check_condition_1, make_patterns, task_groups, test_prompts
from mambaicl.data.task_sets import TASK_SETS, groups_for, meeting_distance, task_set, tasks_by_group_for
from mambaicl.experiments import fig2, fig2_ablations as fa
from mambaicl.metric import zero_one_error
from mambaicl.models import build_model
from mambaicl.seeding import numpy_streams, torch_generator, torch_generators


@pytest.mark.parametrize("name", TASK_SETS)
def test_every_task_set_satisfies_condition_1(name):
    tasks = task_set(name, 6)
    assert check_condition_1(tasks, 6)
    assert len({tuple(t) for t in tasks.tolist()}) == tasks.shape[0]  # no task twice


def test_the_constructions_by_hand():
    assert task_set("two 3-cycles", 6).tolist() == [[0, 1], [1, 2], [2, 0], [3, 4], [4, 5], [5, 3]]
    assert task_set("reversal pairs", 6).tolist() == [[0, 1], [1, 0], [2, 3], [3, 2], [4, 5], [5, 4]]
    assert sorted(map(tuple, task_set("cycle+reversed", 4).tolist())) == sorted(
        [(0, 1), (1, 2), (2, 3), (3, 0), (1, 0), (2, 1), (3, 2), (0, 3)])
    with pytest.raises(ConfigError, match=r"^task set 'reversal pairs' needs an even M1; got 7"):
        task_set("reversal pairs", 7)
    with pytest.raises(ConfigError, match=r"^task set 'two 3-cycles' needs M1 = 6; got 8"):
        task_set("two 3-cycles", 8)
    with pytest.raises(ConfigError, match=r"^task set must be one of .*; got 'star'"):
        task_set("star", 6)


@pytest.mark.parametrize("M1", [6, 8])
def test_groups_of_the_cycle_are_task_groups(M1):
    """For App. 9's cycle the meeting-graph names equal the cyclic names of mambaicl.data.task_groups."""
    tasks = all_tasks(M1)
    assert groups_for(tasks, task_set("cycle", M1), M1) == task_groups(tasks, M1)


def test_groups_of_other_sets_by_hand():
    names = dict(zip(map(tuple, all_tasks(6).tolist()), groups_for(all_tasks(6), task_set("two 3-cycles", 6), 6)))
    assert names[0, 1] == "training" and names[0, 2] == "reversed" and names[0, 3] == "never met"
    names = dict(zip(map(tuple, all_tasks(6).tolist()), groups_for(all_tasks(6), task_set("cycle+reversed", 6), 6)))
    assert names[1, 0] == "training" and names[0, 2] == "distance 2" and names[0, 3] == "distance 3"
    dist = meeting_distance(task_set("reversal pairs", 6), 6)
    assert dist[0, 1] == 1 and math.isinf(dist[0, 2]) and dist[3, 3] == 0
    groups = tasks_by_group_for(task_set("reversal pairs", 6), 6)
    assert {g: len(v) for g, v in groups.items()} == {"never met": 24, "training": 6}


def test_forms_and_fits_recover_known_curves():
    alphas = (0.2, 0.3, 0.4, 0.45)
    assert thm4d.form("statement", 0.3) == pytest.approx(0.3 / 0.04)
    assert thm4d.form("proof", 0.3) == pytest.approx(1 / (0.3 * 0.04))
    assert thm4d.form("clt", 0.3) == pytest.approx(0.21 / 0.04)
    for name in thm4d.FORMS:
        C, rms = thm4d.fit_form(name, alphas, [7.0 * thm4d.form(name, a) for a in alphas])
        assert C == pytest.approx(7.0) and rms == pytest.approx(0.0, abs=1e-12)
    for a_true in (-1.0, 0.5, 1.0):
        needed = [3.0 * a ** a_true / (0.5 - a) ** 2 for a in alphas]
        assert thm4d.alpha_exponent(alphas, needed) == pytest.approx(a_true)
    with pytest.raises(ConfigError, match=r"^alpha must lie in \(0, 1/2\); got 0.5"):
        thm4d.form("clt", 0.5)
    with pytest.raises(ConfigError, match=r"^needed lengths must be finite and positive; got \[1.0, 2.0, inf, 3.0\]"):
        thm4d.fit_form("statement", alphas, [1.0, 2.0, math.inf, 3.0])


def _lt_stack(d=30, seeds=(0, 1)):
    stack = build_model("linear", d, m=31, generators=[torch_generator(s, "init") for s in seeds])
    with torch.no_grad():  # a trained-looking attention form: random, not the identity
        g = torch.Generator().manual_seed(3)
        stack.W_C.add_(0.3 * torch.randn(stack.W_C.shape, generator=g, dtype=stack.W_C.dtype))
    return stack


def test_error_by_length_equals_prompts_of_each_length():
    """The cumulative sum over the first L examples of one long prompt is F on the prompt truncated to L
    examples (and the query), computed by the model itself."""
    pat = fig2.patterns(fig2.FIG2)
    test = dataclasses.replace(fig2.FIG2.test, alpha=0.3)
    stack, seeds, lengths = _lt_stack(), (0, 1), (1, 3, 8, 20)
    got = fa.error_by_length(stack, pat, test, all_tasks(6), 300, lengths, numpy_streams(seeds, "t"), chunk=120)
    pr = test_prompts(pat, dataclasses.replace(test, l_ts=20), all_tasks(6), 300, numpy_streams(seeds, "t"))
    for i, L in enumerate(lengths):
        keep = torch.cat([torch.arange(L), torch.tensor([20])])
        cut = dataclasses.replace(pr, **{f: getattr(pr, f)[..., keep] for f in ("relevant", "irrelevant", "kappa", "y")},
                                  **{f: getattr(pr, f)[..., :L] for f in ("outlier", "outlier_index", "outlier_scale")})
        with torch.no_grad():
            F = stack(cut)  # (S, n)
        assert got[i] == [zero_one_error(F[s], pr.z[s]) for s in range(len(seeds))]


def test_error_by_length_refuses_a_gated_model():
    pat = fig2.patterns(fig2.FIG2)
    mamba = build_model("mamba", 30, m=31, generators=[torch_generator(0, "init")])
    with pytest.raises(ConfigError, match=r"^error_by_length needs an ungated model \(the linear Transformer\)"):
        fa.error_by_length(mamba, pat, fig2.FIG2.test, all_tasks(6), 10, (1, 2), numpy_streams((0,), "t"))


def test_lengths_needed_and_fits_per_seed():
    lengths = (2, 4, 8, 16)
    errors = [[0.4, 0.3], [0.2, 0.25], [0.05, 0.2], [0.01, 0.15]]  # [length][seed]
    got = fa.lengths_needed(lengths, errors, 0.1)
    assert got[0] == pytest.approx(math.exp(math.log(4) + (math.log(0.1) - math.log(0.2)) * math.log(2)
                                            / (math.log(0.05) - math.log(0.2))))
    assert math.isinf(got[1])
    fits = fa.alpha_fits((0.2, 0.4), [[3.0, 5.0], [30.0, math.inf]])
    assert math.isnan(fits["exponent"][1]) and math.isfinite(fits["exponent"][0])


@pytest.mark.parametrize("change, message", [
    ({"m_small": 30}, "m_small must be below d"),
    ({"large_M1": 20}, "large_M1 \\+ M2 \\+ V"),
    ({"task_sets": ("cycle",)}, "task_sets"),
    ({"alphas_4d": (0.3, 0.5)}, "alphas_4d"),
])
def test_preset_errors_name_the_field(change, message):
    with pytest.raises(ConfigError, match=message):
        dataclasses.replace(fa.ABLATIONS, **change)
