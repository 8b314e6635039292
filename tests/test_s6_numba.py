"""The compiled S6 scan (mambaicl.models.s6_numba) against its plain twin (_S6Scan) and the plain loop: values,
gradients, gradcheck, partial gradients, a short training run and determinism."""
import contextlib

import pytest
import torch

import mambaicl.models.mamba1 as m1
import mambaicl.models.s6_numba as s6n
from mambaicl.device import plain_kernels
from mambaicl.models import build_model
from mambaicl.models.mamba1 import Mamba1Block, selective_scan_s6, selective_scan_s6_seq
from mambaicl.models.s6_numba import s6_scan_compiled


def s6_inputs(batch, L, E, N, seed=0, dtype=torch.float64, delta_scale=1.0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, L, E, generator=g, dtype=dtype)
    delta = torch.nn.functional.softplus(torch.randn(batch, L, E, generator=g, dtype=dtype)) * delta_scale
    A = -torch.exp(torch.randn(E, N, generator=g, dtype=dtype))
    B = torch.randn(batch, L, N, generator=g, dtype=dtype)
    C = torch.randn(batch, L, N, generator=g, dtype=dtype)
    D = torch.randn(E, generator=g, dtype=dtype)
    return [x, delta, A, B, C, D]


def value_and_grads(fn, args, w, plain=False):
    args = [a.detach().clone().requires_grad_() for a in args]
    with plain_kernels() if plain else contextlib.nullcontext():
        y = fn(*args)
        grads = torch.autograd.grad((y * w).sum(), args)
    return y.detach(), grads


def rel(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-300)).item()


SHAPES = [(1, 1, 1, 1), (1, 9, 5, 3), (3, 1, 7, 4), (2, 13, 7, 5), (4, 21, 16, 8), (3, 6, 17, 9)]


def test_dispatch_takes_the_compiled_scan_on_the_cpu_and_the_plain_twin_within_plain_kernels(monkeypatch):
    calls = []
    monkeypatch.setattr(m1, "s6_scan_compiled", lambda *a: calls.append("compiled") or s6_scan_compiled(*a))
    args = s6_inputs(2, 5, 3, 2)
    selective_scan_s6(*args)
    with plain_kernels():
        selective_scan_s6(*args)
    selective_scan_s6(*[a.float() for a in args])
    selective_scan_s6(*[a.to(torch.bfloat16) for a in args])  # not a compiled dtype: the plain twin
    assert calls == ["compiled", "compiled"]


@pytest.mark.parametrize("delta_scale", [1.0, 1e3, 1e-6])
@pytest.mark.parametrize("shape", SHAPES)
def test_compiled_equals_plain_twin_and_loop_float64(shape, delta_scale):
    """Values and every gradient (x, Delta, A, B, C, D) in float64; ``delta_scale = 1e3`` makes ``exp(Delta A)``
    underflow to 0, ``1e-6`` keeps it at 1 - tiny."""
    args = s6_inputs(*shape, seed=sum(shape), delta_scale=delta_scale)
    w = torch.randn(args[0].shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    y_c, g_c = value_and_grads(selective_scan_s6, args, w)
    y_p, g_p = value_and_grads(selective_scan_s6, args, w, plain=True)
    y_s, g_s = value_and_grads(selective_scan_s6_seq, args, w)
    assert rel(y_c, y_p) <= 1e-12 and rel(y_c, y_s) <= 1e-12
    for name, a, b, c in zip("x delta A B C D".split(), g_c, g_p, g_s):
        assert rel(a, b) <= 1e-10, name
        assert rel(a, c) <= 1e-10, name


def test_underflowing_decay_forgets_the_past():
    """With ``Delta A`` below -746 every decay is exactly 0: ``y_t = C_t^T B_t Delta_t x_t + D x_t``."""
    x, delta, A, B, C, D = s6_inputs(2, 6, 4, 3, delta_scale=1e6)
    y = selective_scan_s6(x, delta, A, B, C, D)
    ref = (C * B).sum(-1, keepdim=True) * delta * x + D * x
    assert rel(y, ref) <= 1e-14


@pytest.mark.parametrize("shape", [(1, 9, 5, 3), (4, 21, 16, 8), (3, 6, 17, 9)])
def test_compiled_equals_plain_twin_float32(shape):
    args = s6_inputs(*shape, seed=3, dtype=torch.float32)
    w = torch.randn(args[0].shape, generator=torch.Generator().manual_seed(4), dtype=torch.float32)
    y_c, g_c = value_and_grads(selective_scan_s6, args, w)
    y_p, g_p = value_and_grads(selective_scan_s6, args, w, plain=True)
    assert y_c.dtype == torch.float32 and all(g.dtype == torch.float32 for g in g_c)
    assert rel(y_c, y_p) <= 1e-5
    for name, a, b in zip("x delta A B C D".split(), g_c, g_p):
        assert rel(a, b) <= 1e-5, name


@pytest.mark.parametrize("keep", [True, False])
def test_gradcheck_compiled(monkeypatch, keep):
    """Both backward paths: with the forward's decays kept, and recomputed (``SAVE_DECAYS_MAX = 0``)."""
    if not keep:
        monkeypatch.setattr(s6n, "SAVE_DECAYS_MAX", 0)
    x, delta, A, B, C, _ = s6_inputs(2, 5, 3, 2, seed=11)
    args = [a.requires_grad_() for a in (x, delta, A, B, C)]
    assert torch.autograd.gradcheck(s6_scan_compiled, args)


def test_recomputed_decays_give_the_same_bytes(monkeypatch):
    args = s6_inputs(3, 11, 9, 5, seed=2)
    w = torch.randn(args[0].shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    y1, g1 = value_and_grads(selective_scan_s6, args, w)
    monkeypatch.setattr(s6n, "SAVE_DECAYS_MAX", 0)
    y2, g2 = value_and_grads(selective_scan_s6, args, w)
    assert torch.equal(y1, y2) and all(torch.equal(a, b) for a, b in zip(g1, g2))


@pytest.mark.parametrize("wanted", [(0,), (1,), (0, 1), (0, 1, 4), (2,), (3, 4, 5)])
def test_only_some_inputs_require_grad(wanted):
    args = s6_inputs(2, 7, 5, 3, seed=5)
    w = torch.randn(args[0].shape, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    _, g_all = value_and_grads(selective_scan_s6_seq, args, w)
    leaves = [a.detach().clone().requires_grad_(i in wanted) for i, a in enumerate(args)]
    y = selective_scan_s6(*leaves)
    grads = torch.autograd.grad((y * w).sum(), [leaves[i] for i in wanted])
    for i, g in zip(wanted, grads):
        assert rel(g, g_all[i]) <= 1e-10, i
    with torch.no_grad():  # and no gradient at all
        assert rel(selective_scan_s6(*args), selective_scan_s6_seq(*args)) <= 1e-12


def test_compiled_scan_is_deterministic():
    args = s6_inputs(5, 21, 33, 16, seed=9, dtype=torch.float32)
    w = torch.randn(args[0].shape, generator=torch.Generator().manual_seed(8), dtype=torch.float32)
    y1, g1 = value_and_grads(selective_scan_s6, args, w)
    y2, g2 = value_and_grads(selective_scan_s6, args, w)
    assert torch.equal(y1, y2)
    assert all(torch.equal(a, b) for a, b in zip(g1, g2))


@pytest.mark.parametrize("block_elements", [1, 300, 10_000])
def test_plain_twin_blocks_still_agree_with_the_compiled_scan(monkeypatch, block_elements):
    """The plain twin's blocking (what a GPU runs), now reached only through plain_kernels()."""
    args = s6_inputs(7, 6, 5, 4, seed=12)
    w = torch.randn(args[0].shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    y_c, g_c = value_and_grads(selective_scan_s6, args, w)
    monkeypatch.setattr(m1, "BLOCK_ELEMENTS", block_elements)
    y_p, g_p = value_and_grads(selective_scan_s6, args, w, plain=True)
    assert rel(y_p, y_c) <= 1e-12
    for a, b in zip(g_p, g_c):
        assert rel(a, b) <= 1e-10


def test_block_gradients_compiled_equal_plain():
    blk = Mamba1Block(8, d_state=4, generator=torch.Generator().manual_seed(0)).double()
    u = torch.randn(3, 11, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    w = torch.randn(3, 11, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    params = list(blk.parameters())
    g_c = torch.autograd.grad((blk(u) * w).sum(), params)
    with plain_kernels():
        g_p = torch.autograd.grad((blk(u) * w).sum(), params)
    for (name, _), a, b in zip(blk.named_parameters(), g_c, g_p):
        assert rel(a, b) <= 1e-10, name


def _train(plain: bool, dtype, steps=15):
    """A two-layer Mamba-1 stack (build_model kind "mamba1") trained by Adam on fixed random prompts; the losses."""
    torch.manual_seed(0)
    model = build_model("mamba1", 6, n_layers=2, d_model=8, d_state=4, generator=torch.Generator().manual_seed(0))
    model = model.to(dtype)
    g = torch.Generator().manual_seed(1)
    P = torch.randn(16, 9, 7, generator=g, dtype=dtype)  # (batch, l + 1, d + 1)
    P[:, -1, -1] = 0  # the query's label entry (Eq. (2))
    target = torch.randn(16, generator=g, dtype=dtype)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    with plain_kernels() if plain else contextlib.nullcontext():
        for _ in range(steps):
            opt.zero_grad()
            loss = ((model(P) - target) ** 2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return losses


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-6), (torch.float64, 1e-10)])
def test_short_training_run_compiled_equals_plain(dtype, tol):
    compiled, plain = _train(False, dtype), _train(True, dtype)
    assert compiled[-1] < compiled[0]
    for a, b in zip(compiled, plain):
        assert abs(a - b) <= tol * max(1.0, abs(b)), (compiled, plain)
