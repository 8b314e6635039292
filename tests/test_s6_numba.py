"""The compiled S6 scan (mambaicl.models.s6_numba) against its plain twin (_S6Scan) and the plain loop: values,
gradients, gradcheck, partial gradients, a short training run and determinism; the compiled mixing matrix
(s6_kernel_compiled) against its plain twin (s6_kernel), the block and model probes."""
import contextlib

import pytest
import torch

import mambaicl.models.mamba1 as m1
import mambaicl.models.s6_numba as s6n
from mambaicl.device import plain_kernels
from mambaicl.models import build_model
from mambaicl.models.mamba1 import Mamba1Block, selective_scan_s6, selective_scan_s6_kernel, selective_scan_s6_seq
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


# ---- the mixing matrix K (s6_kernel): compiled (s6_kernel_compiled, forward only) against the plain twin ----

def kernel_inputs(batch, L, E, N, seed=0, dtype=torch.float64, delta_scale=1.0):
    _, delta, A, B, C, _ = s6_inputs(batch, L, E, N, seed=seed, dtype=dtype, delta_scale=delta_scale)
    return delta, A, B, C


def check_kernel_against_plain(args, tol, atol):
    """Compiled against plain: relative to the largest entry, and entry by entry against the sum of the terms'
    magnitudes (the plain twin on ``|B|``, ``|C|``, taken ``|.|``): a wrong entry cannot hide below a large one."""
    K_c = m1.s6_kernel(*args)
    with plain_kernels():
        K_p = m1.s6_kernel(*args)
        delta, A, B, C = args
        K_abs = m1.s6_kernel(delta, A, B.abs(), C.abs()).abs()  # sum_n |C_t,n B_s,n| |Delta_s| exp(...)
    assert K_c.shape == K_p.shape and K_c.dtype == K_p.dtype
    assert bool(torch.isfinite(K_c).all())
    assert rel(K_c, K_p) <= tol
    assert bool(((K_c - K_p).abs() <= tol * K_abs + atol).all())
    L = args[0].shape[1]
    above = ~torch.tril(torch.ones(L, L, dtype=torch.bool))  # s > t
    assert bool((K_c[:, above] == 0).all())  # exact zeros above the diagonal
    return K_c, K_p


def test_kernel_dispatch(monkeypatch):
    """Compiled on the CPU in float32/float64 when no gradient is wanted; the plain twin within plain_kernels, for
    another dtype, for mixed dtypes and whenever autograd must go through K."""
    calls = []
    monkeypatch.setattr(m1, "s6_kernel_compiled", lambda *a: calls.append("compiled") or s6n.s6_kernel_compiled(*a))
    args = kernel_inputs(2, 5, 3, 2)
    m1.s6_kernel(*args)
    m1.s6_kernel(*[a.float() for a in args])
    assert calls == ["compiled", "compiled"]
    with plain_kernels():
        m1.s6_kernel(*args)
    m1.s6_kernel(*[a.to(torch.bfloat16) for a in args])
    m1.s6_kernel(args[0].float(), *args[1:])
    leaves = [a.clone().requires_grad_(i == 2) for i, a in enumerate(args)]
    K = m1.s6_kernel(*leaves)  # B requires grad: the plain twin, differentiable
    assert calls == ["compiled", "compiled"] and K.requires_grad
    (g_B,) = torch.autograd.grad(K.sum(), [leaves[2]])
    assert g_B.abs().sum() > 0
    with torch.no_grad():  # grad mode off: compiled although B requires grad
        K_ng = m1.s6_kernel(*leaves)
    assert calls == ["compiled", "compiled", "compiled"] and not K_ng.requires_grad
    assert rel(K_ng, K.detach()) <= 1e-12


KERNEL_SHAPES = [(1, 1, 1, 1), (1, 1, 5, 3), (1, 9, 5, 3), (3, 1, 7, 4), (2, 13, 7, 5), (4, 21, 16, 8), (3, 6, 17, 9)]


@pytest.mark.parametrize("delta_scale", [1.0, 1e3, 1e-6, -1.0])
@pytest.mark.parametrize("shape", KERNEL_SHAPES)
def test_kernel_compiled_equals_plain_float64(shape, delta_scale):
    """``delta_scale = 1e3``: most exponentials underflow to 0 (all but the diagonal's ``exp(0) = 1`` and the smallest
    ``|A|``); ``1e-6``: every decay is 1 - tiny; ``-1``: negative steps (no softplus output, but the same formula),
    so that every decay sum is negative and clamped at 0 as in the plain twin."""
    args = kernel_inputs(*shape, seed=sum(shape) + 1, delta_scale=delta_scale)
    K_c, _ = check_kernel_against_plain(args, 1e-12, 1e-300)
    if delta_scale == 1e3 and shape[1] > 1:
        assert bool((K_c == 0).any())  # some exponentials did underflow


@pytest.mark.parametrize("delta_scale", [1.0, 1e2, 1e-4])
@pytest.mark.parametrize("shape", [(1, 9, 5, 3), (4, 21, 16, 8), (3, 6, 17, 9), (2, 21, 64, 16)])
def test_kernel_compiled_equals_plain_float32(shape, delta_scale):
    args = kernel_inputs(*shape, seed=3, dtype=torch.float32, delta_scale=delta_scale)
    K_c, _ = check_kernel_against_plain(args, 1e-5, 1e-37)
    assert K_c.dtype == torch.float32


def test_kernel_equals_the_scan():
    """``y_t = sum_{s<=t} K[t, s] x_s + D x_t`` with the compiled K equals the plain loop (a check independent of the
    plain twin of K)."""
    x, delta, A, B, C, D = s6_inputs(3, 15, 9, 5, seed=21)
    y = selective_scan_s6_kernel(x, delta, A, B, C, D)
    assert rel(y, selective_scan_s6_seq(x, delta, A, B, C, D)) <= 1e-12


def test_kernel_compiled_is_deterministic():
    args = kernel_inputs(7, 21, 64, 16, seed=9, dtype=torch.float32)
    assert torch.equal(m1.s6_kernel(*args), m1.s6_kernel(*args))
    args = kernel_inputs(3, 13, 17, 9, seed=9)
    assert torch.equal(m1.s6_kernel(*args), m1.s6_kernel(*args))


def test_kernel_compiled_keeps_nan():
    """A NaN in ``Delta_r`` reaches the entries ``K[t, s]``, ``s <= t``, that the plain twin's reach (every one with
    ``t >= r``: the running sums from ``r`` on are NaN); above the diagonal the compiled K stays exactly 0, where the
    plain twin's mask multiplies a NaN (``0 * NaN``) for ``s >= r``."""
    delta, A, B, C = kernel_inputs(1, 6, 3, 2, seed=4)
    delta[0, 3, 1] = float("nan")
    K_c = m1.s6_kernel(delta, A, B, C)
    with plain_kernels():
        K_p = m1.s6_kernel(delta, A, B, C)
    low = torch.tril(torch.ones(6, 6, dtype=torch.bool))  # s <= t
    assert torch.equal(torch.isnan(K_c[:, low]), torch.isnan(K_p[:, low]))
    assert bool(torch.isnan(K_c[0, 3:, :, 1][low[3:]]).all()) and not bool(torch.isnan(K_c[0, :3]).any())
    assert bool((K_c[:, ~low] == 0).all())
    ok = ~torch.isnan(K_p)
    assert rel(K_c[ok], K_p[ok]) <= 1e-12


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_block_probe_compiled_equals_plain(monkeypatch, dtype, tol):
    """``Mamba1Block.forward(u, probe=True)`` under no_grad (as the probes run it): the output and every entry of
    the dict, compiled (checked taken) against plain."""
    calls = []
    monkeypatch.setattr(m1, "s6_kernel_compiled", lambda *a: calls.append(1) or s6n.s6_kernel_compiled(*a))
    blk = Mamba1Block(12, d_state=5, generator=torch.Generator().manual_seed(3)).to(dtype)
    u = torch.randn(3, 13, 12, generator=torch.Generator().manual_seed(4), dtype=dtype)
    with torch.no_grad():
        out_c, rec_c = blk(u, probe=True)
        assert calls == [1]
        with plain_kernels():
            out_p, rec_p = blk(u, probe=True)
    assert calls == [1]
    assert rel(out_c, out_p) <= tol
    assert rec_c.keys() == rec_p.keys()
    for name in rec_p:
        assert rec_c[name].shape == rec_p[name].shape and rec_c[name].dtype == dtype, name
        assert rel(rec_c[name], rec_p[name]) <= tol, name


def test_block_probe_with_gradients_takes_the_plain_twin(monkeypatch):
    """Outside no_grad the block's parameters require grad: the plain twin, and gradients flow through K."""
    calls = []
    monkeypatch.setattr(m1, "s6_kernel_compiled", lambda *a: calls.append(1) or s6n.s6_kernel_compiled(*a))
    blk = Mamba1Block(8, d_state=4, generator=torch.Generator().manual_seed(0)).double()
    u = torch.randn(2, 7, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    out, rec = blk(u, probe=True)
    assert calls == [] and rec["kernel"].requires_grad
    grads = torch.autograd.grad(out.sum(), list(blk.parameters()), allow_unused=True)
    assert any(g is not None and g.abs().sum() > 0 for g in grads)
    with torch.no_grad():
        out_ng, rec_ng = blk(u, probe=True)
    assert calls == [1] and rel(out_ng, out.detach()) <= 1e-12 and rel(rec_ng["kernel"], rec["kernel"]) <= 1e-12


def test_model_probe_compiled_equals_plain():
    """The probes of a two-layer Mamba-1 stack (``build_model("mamba1")``, ``probe`` runs under no_grad)."""
    model = build_model("mamba1", 6, n_layers=2, d_model=8, d_state=4, generator=torch.Generator().manual_seed(0))
    model = model.double()
    P = torch.randn(5, 9, 7, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    P[:, -1, -1] = 0
    rec_c = model.probe(P)
    with plain_kernels():
        rec_p = model.probe(P)
    assert len(rec_c) == len(rec_p) == 2
    for a, b in zip(rec_c, rec_p):
        assert a.keys() == b.keys()
        for name in b:
            assert rel(a[name], b[name]) <= 1e-12, name
