"""The one training loop: Algorithm 1 step, determinism, records, non-finite stop, seed batching, checks."""
import dataclasses
import io

import pytest
import torch

from mambaicl import OneLayerMamba
from mambaicl.config import DataConfig
from mambaicl.data import make_patterns, test_prompts, training_tasks, all_tasks
from mambaicl.config import TestConfig
from mambaicl.models import build_model
from mambaicl.seeding import torch_generator, torch_generators
from mambaicl.train import ALGORITHM_1, fit, hinge_loss, logistic_loss, squared_loss, synthetic_sampler


def sampler(d=4, l=6):
    def sample_batch(batch_size, generator):
        P = torch.randn(batch_size, l + 1, d + 1, generator=generator, dtype=torch.float64)
        P[:, :, -1] = torch.sign(P[:, :, -1])
        P[:, -1, -1] = 0
        z = torch.where(P[:, -1, 0] > 0, 1.0, -1.0).double()
        return P, z
    return sample_batch


def test_losses_against_their_formulas():
    F = torch.tensor([2.0, 0.5, -1.0])
    z = torch.tensor([1.0, 1.0, 1.0])
    assert hinge_loss(F, z).item() == pytest.approx((0 + 0.5 + 2.0) / 3)
    assert logistic_loss(F, z).item() == pytest.approx(sum(__import__("math").log1p(__import__("math").exp(-f))
                                                           for f in (2.0, 0.5, -1.0)) / 3)
    assert squared_loss(F, z).item() == pytest.approx((1.0 + 0.25 + 4.0) / 6)


def test_one_sgd_step_is_algorithm_1():
    model = OneLayerMamba(4, 5, generator=torch.Generator().manual_seed(0)).double()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    P, z = sampler()(8, torch_generator(3, "train"))  # the batch fit draws at its first step
    ref = OneLayerMamba(4, 5, generator=torch.Generator().manual_seed(0)).double()
    torch.clamp(1 - z * ref(P), min=0).mean().backward()
    fit(model, sampler(), steps=1, batch_size=8, lr=0.5, seed=3, progress=False, **ALGORITHM_1)
    for n, p in model.named_parameters():
        expected = before[n] - 0.5 * dict(ref.named_parameters())[n].grad
        assert torch.allclose(p.detach(), expected, atol=1e-12), n


def test_deterministic_and_records():
    runs = []
    for _ in range(2):
        model = OneLayerMamba(4, 5, generator=torch.Generator().manual_seed(1)).double()
        h = fit(model, sampler(), steps=25, batch_size=16, lr=0.1, seed=7, record_every=10, progress=False,
                probes={"w_norm": lambda m: m.w.norm().item()})
        runs.append((h, model.w.detach().clone()))
    (h1, w1), (h2, w2) = runs
    assert torch.equal(w1, w2) and h1.loss == h2.loss
    assert h1.steps == [0, 10, 20, 25] and len(h1.probes["w_norm"]) == 4


def test_non_finite_loss_stops_with_step_and_lr():
    model = OneLayerMamba(4, 5, generator=torch.Generator().manual_seed(1)).double()

    def blows_up(batch_size, generator):
        P, z = sampler()(batch_size, generator)
        return P * 1e200, z  # products overflow to inf

    with pytest.raises(FloatingPointError, match=r"step 0 \(lr = 0.3"):
        fit(model, blows_up, steps=3, batch_size=4, lr=0.3, progress=False)


@pytest.mark.parametrize("kwargs, message", [
    ({"steps": -1}, "steps must be"), ({"batch_size": 0}, "batch_size must be"), ({"lr": 0}, "lr must be"),
    ({"lr": "fast"}, "lr must be"), ({"optimizer": "lbfgs"}, "optimizer must be one of"),
    ({"loss": "mse"}, "loss must be one of"), ({"record_every": 0}, "record_every must be"),
    ({"seed": -1}, "seed must be"), ({"seed": [0, 0]}, "seed must be distinct"),
])
def test_bad_arguments(kwargs, message):
    args = {"steps": 1, "batch_size": 2, "lr": 0.1} | kwargs
    with pytest.raises(ValueError, match=message):
        fit(OneLayerMamba(4, 5), sampler(), progress=False, **args)


# ---------------------------------------------------------------- seeds as a batch dimension


def _train(kind, seeds, steps=300):
    """Train one stack of len(seeds) models (float64) on Definition 1 prompts of Figure 2's data."""
    data = DataConfig()
    pat = make_patterns(data, torch_generator(0, "patterns"))
    stack = build_model(kind, data.d, generators=torch_generators(seeds, "init"))
    fit(stack, synthetic_sampler(pat, data, training_tasks(data.M1)), steps=steps, batch_size=32,
        lr=0.1, seed=list(seeds), progress=False)
    return stack, pat


@pytest.mark.parametrize("kind", ["mamba", "mamba_merged", "linear"])
def test_batched_seeds_equal_separate_runs(kind):
    """Seeds trained as one batch equal each seed trained alone: parameters to 1e-6 relative after 300
    float64 steps, and identical predictions on test prompts."""
    seeds = (3, 0, 7)
    stack, pat = _train(kind, seeds)
    test = dataclasses.replace(TestConfig(kappa_a_prime=6.67), alpha=0.5)
    pr = test_prompts(pat, test, all_tasks(6), 2000, torch_generator(11, "test"))
    for i, s in enumerate(seeds):
        alone, _ = _train(kind, (s,))
        for name, p in alone.named_parameters():
            q = getattr(stack, name)[i]
            assert (p[0] - q).abs().max() <= 1e-6 * p[0].abs().max(), (kind, s, name)
        with torch.no_grad():
            assert torch.equal(torch.sign(alone.member(0)(pr)), torch.sign(stack.member(i)(pr)))


def test_batched_run_is_byte_identical_on_a_rerun():
    blobs = []
    for _ in range(2):
        stack, _ = _train("mamba", (0, 1), steps=50)
        buf = io.BytesIO()
        torch.save({k: v.detach() for k, v in stack.state_dict().items()}, buf)
        blobs.append(buf.getvalue())
    assert blobs[0] == blobs[1]


def test_non_finite_loss_of_a_stack_names_the_seed():
    data = DataConfig()
    pat = make_patterns(data, torch_generator(0, "patterns"))
    stack = build_model("mamba", data.d, generators=torch_generators([4, 9], "init"))
    sample = synthetic_sampler(pat, data, training_tasks(data.M1))

    def poisoned(batch, gens):
        pr, z = sample(batch, gens)
        with torch.no_grad():
            stack.w[1].fill_(float("nan"))  # seed 9's model breaks
        return pr, z

    with pytest.raises(FloatingPointError, match=r"step 0 \(lr = 0.1, seed 9\)"):
        fit(stack, poisoned, steps=2, batch_size=4, lr=0.1, seed=[4, 9], progress=False)
