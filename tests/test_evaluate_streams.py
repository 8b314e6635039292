"""Each item of a sweep draws from its own stream: an α's (or a task group's) error does not depend on the other
items of the list it sits in, and a seed-batched model's seed s sees the prompts seed s sees alone."""
import pytest

from mambaicl.config import ConfigError, DataConfig, TestConfig
from mambaicl.data import all_tasks, make_patterns
from mambaicl.evaluate import alpha_sweep, errors_by_task_group
from mambaicl.models import build_model
from mambaicl.seeding import torch_generator, torch_generators


@pytest.fixture(scope="module")
def setup():
    data = DataConfig()
    pat = make_patterns(data, torch_generator(0, "patterns"))
    model = build_model("mamba", data.d, generator=torch_generator(0, "init"))
    return data, pat, model


def test_an_alpha_does_not_depend_on_its_neighbours(setup):
    data, pat, model = setup
    tasks, test = all_tasks(data.M1), TestConfig(kappa_a_prime=6.67)
    alone = alpha_sweep(model, pat, test, tasks, [0.5], 300, 4)
    listed = alpha_sweep(model, pat, test, tasks, [0.0, 0.2, 0.5], 300, 4)
    assert alone[0] == listed[2]
    with pytest.raises(ConfigError, match=r"^alphas\[0\] must be a real number in \[0\.0, 1\.0\)"):
        alpha_sweep(model, pat, test, tasks, [1.0], 10, 4)
    with pytest.raises(ConfigError, match="^n must be an integer in"):
        alpha_sweep(model, pat, test, tasks, [0.5], 0, 4)


def test_groups_have_their_own_streams_and_seeds_of_a_stack_match_single_seeds(setup):
    data, pat, model = setup
    test = TestConfig(kappa_a_prime=6.67, alpha=0.3)
    one = errors_by_task_group(model, pat, test, 200, 4)
    stack = build_model("mamba", data.d, generators=torch_generators([4, 9], "init"))
    both = errors_by_task_group(stack, pat, test, 200, [4, 9])
    single = build_model("mamba", data.d, generator=torch_generator(9, "init"))
    alone = errors_by_task_group(single, pat, test, 200, 9)
    assert set(one) == set(both) == set(alone)
    for g in both:
        assert len(both[g]) == 2 and both[g][1] == pytest.approx(alone[g], abs=1e-12)
