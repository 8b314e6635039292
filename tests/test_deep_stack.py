"""Deep stacks of several seeds as one model (models.deep_stack.StackedDeepModel) against the members run alone."""
import contextlib

import pytest
import torch

from mambaicl.config import TrainConfig
from mambaicl.device import plain_kernels
from mambaicl.members import MemberStack, build_members, member_model
from mambaicl.models import DeepICLModel, build_model
from mambaicl.models.deep_stack import StackedDeepModel
from mambaicl.models.scan_kernel import selective_scan_heads_fused, selective_scan_heads_fused_stacked
from mambaicl.train import Member, SampledData, train


def rel(a, b) -> float:
    a, b = a.detach(), b.detach()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


def members_alone(kind, S, dtype=torch.float64, **kw):
    return [build_model(kind, 4, n_layers=3, d_model=8, n_heads=2, generator=torch.Generator().manual_seed(10 + s),
                        **kw).to(dtype) for s in range(S)]


def prompts(S, batch=5, L=7, d=4, dtype=torch.float64, seed=1):
    P = torch.randn(S, batch, L, d + 1, generator=torch.Generator().manual_seed(seed), dtype=dtype)
    P[..., -1, -1] = 0
    return P


@pytest.mark.parametrize("kind", ["mamba", "linear", "softmax"])
@pytest.mark.parametrize("plain", [False, True])
def test_stacked_model_equals_its_members_alone(kind, plain):
    """Values and every parameter's gradient, float64, to 1e-10 relative, on the compiled and the plain path."""
    models = members_alone(kind, 3)
    stack = StackedDeepModel(models)
    P = prompts(3)
    w = torch.randn(3, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with plain_kernels() if plain else contextlib.nullcontext():
        F = stack(P)
        (F * w).sum().backward()
        alone = []
        for k, m in enumerate(models):
            f = m(P[k])
            (f * w[k]).sum().backward()
            alone.append(f)
    assert F.shape == (3, 5) and rel(F, torch.stack(alone)) <= 1e-10
    for k, m in enumerate(models):
        for name, p in m.named_parameters():
            assert rel(stack.get_parameter(name).grad[k], p.grad) <= 1e-10, (k, name)


def test_member_model_round_trip():
    models = members_alone("mamba", 3, norm="after_first")
    stack = StackedDeepModel(models)
    for k, m in enumerate(models):
        back = member_model(stack, k)
        assert isinstance(back, DeepICLModel) and back.kind == "mamba"
        a, b = dict(back.named_parameters()), dict(m.named_parameters())
        assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)
    assert StackedDeepModel([member_model(stack, k) for k in range(3)]).state_dict().keys() == stack.state_dict().keys()


def test_resting_members_are_not_run_and_the_others_are_unchanged():
    stack = StackedDeepModel(members_alone("mamba", 3))
    P = prompts(3)
    full = stack(P).detach()
    stack.resting = {1}
    part = stack(P)
    assert torch.equal(part[1], torch.zeros(5, dtype=part.dtype))
    assert rel(part[[0, 2]], full[[0, 2]]) <= 1e-12


def test_the_fused_stacked_scan_equals_the_fused_scan_per_member():
    g = torch.Generator().manual_seed(3)
    S, B, L, D, H, m = 3, 2, 9, 6, 2, 3
    u = torch.randn(S, B, L, D, generator=g, dtype=torch.float64, requires_grad=True)
    W_B, W_C = (torch.randn(S, H, m, D, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(2))
    W = (30 * torch.randn(S, H, D, D, generator=g, dtype=torch.float64)).requires_grad_()  # saturated gates
    o = selective_scan_heads_fused_stacked(u, W_B, W_C, W)
    ref = torch.stack([selective_scan_heads_fused(u[k], W_B[k], W_C[k], W[k]).permute(0, 2, 1, 3) for k in range(S)])
    assert rel(o, ref) <= 1e-12
    w = torch.randn(o.shape, generator=g, dtype=torch.float64)
    ga = torch.autograd.grad((o * w).sum(), (u, W_B, W_C, W))
    gb = torch.autograd.grad((ref * w).sum(), (u, W_B, W_C, W))
    for a, b in zip(ga, gb):
        assert rel(a, b) <= 1e-10


def test_the_fused_scan_in_float32_is_close_to_float64_and_deterministic():
    g = torch.Generator().manual_seed(5)
    u = torch.randn(2, 3, 21, 16, generator=g, dtype=torch.float64)
    W_B, W_C = (torch.randn(2, 1, 4, 16, generator=g, dtype=torch.float64) / 4 for _ in range(2))
    W = torch.randn(2, 1, 16, 16, generator=g, dtype=torch.float64) / 4
    o64 = selective_scan_heads_fused_stacked(u, W_B, W_C, W)
    args32 = [x.float() for x in (u, W_B, W_C, W)]
    o32 = selective_scan_heads_fused_stacked(*args32)
    assert o32.dtype == torch.float32 and rel(o32.double(), o64) <= 1e-5
    assert torch.equal(o32, selective_scan_heads_fused_stacked(*args32))


def _sampler(batch, streams):
    Ps, zs = [], []
    for rng in streams:
        P = torch.from_numpy(rng.standard_normal((batch, 7, 5)))
        P[:, -1, -1] = 0
        Ps.append(P)
        zs.append(torch.from_numpy(rng.choice([-1.0, 1.0], size=batch)))
    return torch.stack(Ps), torch.stack(zs)


@pytest.mark.parametrize("kind", ["mamba", "softmax"])
def test_one_members_training_alone_and_in_a_stack_ends_at_the_same_parameters(kind):
    data = SampledData(_sampler, 4, key="test_deep_stack")
    cfg = TrainConfig(steps=6, batch_size=8, optimizer="sgd", loss="hinge")
    opts = dict(n_layers=3, dtype=torch.float64, options=(("d_model", 8), ("n_heads", 2)))
    group = [Member(s, kind, data, lr, **opts) for s, lr in ((0, 0.5), (1, 0.3), (2, 0.2))]
    stacked = train(group, cfg, progress=False)
    assert isinstance(stacked.model(0), StackedDeepModel)
    alone = train([group[1]], cfg, progress=False).member_model(0)
    back = stacked.member_model(1)
    for name, p in alone.named_parameters():
        assert rel(dict(back.named_parameters())[name], p) <= 1e-10, name


def test_build_members_stacks_the_deep_kinds_but_mamba1():
    data = SampledData(_sampler, 4, key="test_deep_stack")
    for kind, cls in (("mamba", StackedDeepModel), ("linear", StackedDeepModel), ("mamba1", MemberStack)):
        group = [Member(s, kind, data, 0.1, n_layers=2) for s in (0, 1)]
        model = build_members(group, "cpu")
        assert isinstance(model, cls)
        if cls is StackedDeepModel:  # each member's initial model is its own (seed, "init") draw, as alone
            alone = build_members(group[1:], "cpu")
            a, b = dict(member_model(model, 1).named_parameters()), dict(member_model(alone, 0).named_parameters())
            assert all(torch.equal(a[n], b[n]) for n in a)


def test_the_tiny_preset_stops_at_the_same_step_on_both_paths_with_two_seeds():
    from mambaicl.experiments.mechanism import PRESETS, seed_runs

    preset = PRESETS["tiny"]
    fused = seed_runs(preset, (0, 1))
    with plain_kernels():
        plain = seed_runs(preset, (0, 1))
    for a, b in zip(fused, plain):
        assert a.stopped < preset.train.steps
        assert (a.best_step, a.stopped) == (b.best_step, b.stopped)
        assert abs(a.val_loss - b.val_loss) <= 1e-4
