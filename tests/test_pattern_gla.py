"""The compiled channel-gated (GLA) kernel in pattern coordinates (mambaicl.models.pattern_gla) against independent
computations: the tensor formula of GLAStack (gla_gate, einsums, autograd) on the same prompt batch under
device.plain_kernels() and on the materialised prompt tensor, gradcheck of the written-out backward, saturated
gates, and one short training on both paths."""
import contextlib

import pytest
import torch

from mambaicl.config import DataConfig
from mambaicl.data import make_patterns, training_prompts, training_tasks
from mambaicl.device import plain_kernels
from mambaicl.models.gla import GLAStack, GateConfig
from mambaicl.models.pattern_gla import channel_table, pattern_gla_sum
from mambaicl.seeding import numpy_streams, torch_generators
from reference_kernels import three_paths

DATA = DataConfig(d=14, M1=4, M2=5, V=3, l_tr=7, p_a=0.5)


def _prompts(S: int | None, batch: int = 6, seed: int = 0):
    pat = make_patterns(DATA, torch.Generator().manual_seed(0))
    gens = numpy_streams(range(seed, seed + (S or 1)), "train")
    pr = training_prompts(pat, DATA, training_tasks(DATA.M1), batch, gens if S else gens[0])
    assert bool(pr.outlier.any())  # the outlier look-ups are exercised
    return pr


def _stack(family: str, S: int = 3, tau: float = 1.0, scale: float = 0.3) -> GLAStack:
    stack = GLAStack(GateConfig(family=family, tau=tau), DATA.d, 13, 0.3, torch_generators(range(S), "init"),
                     dtype=torch.float64)
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in stack.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return stack


@pytest.mark.parametrize("family", ["gla", "gla_app12"])
@pytest.mark.parametrize("tau", [1.0, 0.37])
def test_compiled_equals_the_tensor_formula_values_and_gradients(family, tau):
    """F and every parameter's gradient: the compiled kernel against the tensor formula on the same batch (the plain
    twin) and on the materialised prompts, float64."""
    pr = _prompts(3)
    stack = _stack(family, tau=tau)
    weights = torch.linspace(-1, 2, 3 * 6).view(3, 6).double()
    (F, g), (F_plain, g_plain), (F_tensor, g_tensor) = three_paths(stack, pr, weights)
    assert F.shape == (3, 6)
    for ref, ref_g in ((F_plain, g_plain), (F_tensor, g_tensor)):
        assert ((F - ref).abs() / ref.abs().clamp_min(1e-300)).max() < 1e-12
        for name, a, b in zip([n for n, _ in stack.named_parameters()], g, ref_g):
            assert (a - b).abs().max() <= 1e-10 * b.abs().max(), name


@pytest.mark.parametrize("recurrent", [True, False])
def test_pattern_gla_sum_gradcheck(recurrent):
    """The written-out backward against finite differences (float64) for the three tables."""
    pr = _prompts(2, batch=3)
    b = pr.basis()
    g = torch.Generator().manual_seed(3)
    n1 = b.rows.shape[0] + 1
    tables = [torch.randn(2, n1, 5, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3)]
    assert torch.autograd.gradcheck(lambda K, A, C: pattern_gla_sum(K, A, C, b, 0.7, recurrent), tuple(tables))


@pytest.mark.parametrize("family", ["gla", "gla_app12"])
def test_saturated_gates_stay_finite_and_equal_the_tensor_formula(family):
    """Gate logits of several hundred (sigma underflows or is exactly 1) give finite F and gradients, equal to the
    tensor formula's."""
    pr = _prompts(2, batch=4)
    stack = _stack(family, S=2, scale=0.0)
    with torch.no_grad():
        stack.W_alpha.mul_(400.0)
    params = list(stack.parameters())
    F = stack(pr)
    g = torch.autograd.grad(F.sum(), params)
    with plain_kernels():
        F_plain = stack(pr)
        g_plain = torch.autograd.grad(F_plain.sum(), params)
    assert torch.isfinite(F).all() and all(torch.isfinite(x).all() for x in g)
    assert (F - F_plain).abs().max() <= 1e-12 * F_plain.abs().max()
    for a, b in zip(g, g_plain):
        assert (a - b).abs().max() <= 1e-10 * b.abs().max().clamp_min(1e-300)


def test_one_seed_and_tables_broadcast_over_seeds():
    """A one-seed stack equals its plain twin, and tables without a seed axis are broadcast over the batch's seeds."""
    pr = _prompts(1)
    stack = _stack("gla", S=1)
    F = stack(pr)
    with plain_kernels():
        F_plain = stack(pr)
    assert F.shape == F_plain.shape == (1, 6)
    assert (F - F_plain).abs().max() < 1e-12
    b = _prompts(2).basis()
    Kt, At, Ct = (channel_table(getattr(stack, k)[0], b.rows) for k in ("W_B", "W_alpha", "W_C"))  # (n+1, m)
    both = pattern_gla_sum(Kt, At, Ct, b, 1.0, True)  # (2, 6): seed 0's parameters on both seeds' prompts
    for s in range(2):
        one = pattern_gla_sum(Kt[None], At[None], Ct[None], b._replace(index=b.index[s:s + 1], coef=b.coef[s:s + 1]),
                              1.0, True)
        assert torch.equal(both[s], one[0])


def test_deterministic_bits():
    pr = _prompts(2)
    stack = _stack("gla", S=2)
    out = [torch.autograd.grad(stack(pr).sum(), list(stack.parameters())) for _ in range(2)]
    assert all(torch.equal(a, b) for a, b in zip(*out))


@pytest.mark.parametrize("family", ["gla", "gla_app12"])
def test_short_training_on_both_paths_agrees(family):
    """Twenty SGD steps on fresh batches: the compiled and the plain path end at the same parameters (float64,
    rounding only)."""
    def train(plain: bool):
        stack = _stack(family, S=2)
        opt = torch.optim.SGD(stack.parameters(), lr=0.3)
        for step in range(20):
            pr = _prompts(2, batch=8, seed=10 * step)
            y = pr.z.to(torch.float64)
            with plain_kernels() if plain else contextlib.nullcontext():
                loss = torch.clamp(1 - y * stack(pr), min=0).mean(-1).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return [p.detach().clone() for p in stack.parameters()]

    for a, b in zip(train(False), train(True)):
        assert (a - b).abs().max() <= 1e-9 * b.abs().max()
