"""The generic training loop: Algorithm 1 step, determinism, records, argument checks."""
import pytest
import torch

from mambaicl import OneLayerMamba
from mambaicl.fit import fit, hinge_loss_mean, logistic_loss_mean


def sampler(d=4, l=6):
    def sample_batch(batch_size, generator):
        P = torch.randn(batch_size, l + 1, d + 1, generator=generator)
        P[:, :, -1] = torch.sign(P[:, :, -1])
        P[:, -1, -1] = 0
        z = torch.where(P[:, -1, 0] > 0, 1.0, -1.0)
        return P, z
    return sample_batch


def test_losses():
    F = torch.tensor([2.0, 0.5, -1.0])
    z = torch.tensor([1.0, 1.0, 1.0])
    assert hinge_loss_mean(F, z).item() == pytest.approx((0 + 0.5 + 2.0) / 3)
    assert logistic_loss_mean(F, z).item() == pytest.approx(torch.log1p(torch.exp(-F)).mean().item())


def test_one_sgd_step_is_algorithm_1():
    torch.manual_seed(0)
    model = OneLayerMamba(4, 5, generator=torch.Generator().manual_seed(0))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    P, z = sampler()(8, torch.Generator().manual_seed(3))
    ref = OneLayerMamba(4, 5, generator=torch.Generator().manual_seed(0))
    hinge_loss_mean(ref(P), z).backward()
    fit(model, sampler(), steps=1, batch_size=8, lr=0.5, seed=3, progress=False)
    for n, p in model.named_parameters():
        expected = before[n] - 0.5 * dict(ref.named_parameters())[n].grad
        assert torch.allclose(p.detach(), expected, atol=1e-6), n


def test_deterministic_and_records():
    runs = []
    for _ in range(2):
        model = OneLayerMamba(4, 5, generator=torch.Generator().manual_seed(1))
        h = fit(model, sampler(), steps=25, batch_size=16, lr=0.1, seed=7, record_every=10, progress=False,
                probes={"w_norm": lambda m: m.w.norm().item()})
        runs.append((h, model.w.detach().clone()))
    (h1, w1), (h2, w2) = runs
    assert torch.equal(w1, w2) and h1.loss == h2.loss
    assert h1.steps == [0, 10, 20, 25] and len(h1.probes["w_norm"]) == 4


@pytest.mark.parametrize("kwargs, message", [
    ({"steps": -1}, "steps must be"), ({"batch_size": 0}, "batch_size must be"), ({"lr": 0}, "lr must be"),
    ({"optimizer": "lbfgs"}, "optimizer must be one of"), ({"loss": "mse"}, "loss must be one of"),
    ({"record_every": 0}, "record_every must be"),
])
def test_bad_arguments(kwargs, message):
    args = {"steps": 1, "batch_size": 2, "lr": 0.1} | kwargs
    with pytest.raises(ValueError, match=message):
        fit(OneLayerMamba(4, 5), sampler(), progress=False, **args)
