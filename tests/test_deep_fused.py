"""The compiled scan of the deep Mamba stacks (models.scan_kernel) against its plain autograd twins (models.scan)."""
import pytest
import torch

from mambaicl.device import plain_kernels
from mambaicl.models import build_model
from mambaicl.models import deep as deep_module
from mambaicl.models.scan import selective_scan_heads, selective_scan_heads_chunked
from mambaicl.models.scan_kernel import selective_scan_heads_fused, selective_scan_heads_fused_stacked
from reference_kernels import selective_scan_heads_seq


def params(batch, L, D, H, m, scale, seed=0):
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(batch, L, D, generator=g, dtype=torch.float64)
    W_B, W_C = (torch.randn(H, m, D, generator=g, dtype=torch.float64) for _ in range(2))
    W = scale * torch.randn(H, D, D, generator=g, dtype=torch.float64)
    return u, W_B, W_C, W


def rel(a, b) -> float:
    a, b = a.detach(), b.detach()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


SHAPES = [(3, 21, 5, 2, 4), (2, 1, 3, 1, 2), (4, 7, 9, 3, 1), (2, 21, 64, 1, 16), (1, 30, 10, 2, 6)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("scale", [0.3, 3.0, 30.0, 300.0])  # 30, 300: saturated gates (|w^T u| in the hundreds)
def test_fused_scan_values_and_gradients_match_the_plain_forms(shape, scale):
    u, W_B, W_C, W = params(*shape, scale)
    leaves = [p.clone().requires_grad_() for p in (u, W_B, W_C, W)]
    twins = [p.clone().requires_grad_() for p in (u, W_B, W_C, W)]
    out = selective_scan_heads_fused(*leaves)
    ref = selective_scan_heads_chunked(*twins)  # the plain form that never exponentiates a positive number
    assert out.shape == ref.shape == (shape[0], shape[3], shape[1], shape[2]) and out.dtype == torch.float64
    assert rel(out, ref) <= 1e-10
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for a, b in zip(torch.autograd.grad((out * w).sum(), leaves), torch.autograd.grad((ref * w).sum(), twins)):
        assert torch.isfinite(a).all() and rel(a, b) <= 1e-10


def test_fused_scan_matches_the_literal_recurrence_and_the_quadratic_form():
    u, W_B, W_C, W = params(3, 12, 5, 2, 4, 1.0)
    out = selective_scan_heads_fused(u, W_B, W_C, W)
    assert rel(out, selective_scan_heads_seq(u, W_B, W_C, W)) <= 1e-10
    assert rel(out, selective_scan_heads(u, W_B, W_C, W)) <= 1e-10


def test_fused_scan_passes_gradcheck():
    u, W_B, W_C, W = (p.requires_grad_() for p in params(2, 6, 3, 2, 2, 2.0))
    assert torch.autograd.gradcheck(selective_scan_heads_fused, (u, W_B, W_C, W))


def test_fused_scan_is_deterministic_and_keeps_the_input_dtype():
    u, W_B, W_C, W = (p.float().requires_grad_() for p in params(4, 21, 16, 1, 4, 30.0))
    runs = []
    for _ in range(2):
        out = selective_scan_heads_fused(u, W_B, W_C, W)
        runs.append((out, *torch.autograd.grad(out.square().sum(), (u, W_B, W_C, W))))
    assert runs[0][0].dtype == torch.float32
    assert all(torch.equal(a, b) for a, b in zip(*runs))
    assert all(torch.isfinite(t).all() for t in runs[0])


@pytest.mark.parametrize("scale", [0.3, 300.0])  # 300: saturated gates
def test_the_last_row_alone_is_that_row_of_the_full_scan_with_its_gradients(scale):
    """``last_only``: the full scan's last row and the gradients of a loss on that row (float64, <= 1e-10)."""
    u, W_B, W_C, W = (p.unsqueeze(0).repeat(2, *[1] * p.dim()) for p in params(3, 21, 8, 2, 4, scale))
    leaves = [p.clone().requires_grad_() for p in (u, W_B, W_C, W)]
    twins = [p.clone().requires_grad_() for p in (u, W_B, W_C, W)]
    last = selective_scan_heads_fused_stacked(*leaves, last_only=True)
    full = selective_scan_heads_fused_stacked(*twins)
    assert last.shape == (2, 3, 1, 2, 8) and rel(last, full[:, :, -1:]) <= 1e-12
    w = torch.randn(last.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    for a, b in zip(torch.autograd.grad((last * w).sum(), leaves), torch.autograd.grad((full[:, :, -1:] * w).sum(), twins)):
        assert rel(a, b) <= 1e-10


def test_a_stacks_last_layer_runs_its_last_row_only_on_both_paths():
    """The stacked model's output and gradients agree between the compiled path (last row alone) and the plain one."""
    from mambaicl.members import build_members
    from mambaicl.experiments.mechanism import FIG3, seed_members
    group = seed_members(FIG3, [0, 1])
    model = build_members(group, "cpu").double()
    P = torch.randn(2, 5, 21, model.d + 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    P[:, :, -1, -1] = 0.0  # the query's label entry (Eq. 2)
    F = model(P)
    grads = torch.autograd.grad(F.square().sum(), list(model.parameters()))
    with plain_kernels():
        F_plain = model(P)
        grads_plain = torch.autograd.grad(F_plain.square().sum(), list(model.parameters()))
    assert rel(F, F_plain) <= 1e-10
    assert all(rel(a, b) <= 1e-10 for a, b in zip(grads, grads_plain))


def test_plain_kernels_switches_the_branch(monkeypatch):
    calls = []
    monkeypatch.setattr(deep_module, "selective_scan_heads_fused",
                        lambda *a, **k: calls.append("fused") or selective_scan_heads_fused(*a, **k))
    factored = deep_module.PAPER_SCANS["factored"]
    monkeypatch.setitem(deep_module.PAPER_SCANS, "factored", lambda *a: calls.append("plain") or factored(*a))
    model = build_model("mamba", 4, n_layers=2, d_model=8, generator=torch.Generator().manual_seed(0))
    P = torch.randn(3, 6, 5, generator=torch.Generator().manual_seed(1))
    P[:, -1, -1] = 0
    F = model(P)
    assert calls == ["fused"] * 2
    calls.clear()
    with plain_kernels():
        F_plain = model(P)
    assert calls == ["plain"] * 2
    assert (F - F_plain).abs().max() < 1e-5
    calls.clear()
    chunked = build_model("mamba", 4, n_layers=2, d_model=8, scan="chunked", generator=torch.Generator().manual_seed(0))
    chunked(P)
    assert calls == []  # an explicitly chosen closed form runs as chosen


def test_a_single_deep_model_reads_its_last_layer_at_the_last_token_only():
    """DeepICLModel's forward runs its last selective scan on the last token alone (compiled ``last_only``): F and
    every gradient equal the plain path's full computation and the probe's F (float64, 1e-12 / 1e-10)."""
    model = build_model("mamba", 4, n_layers=3, d_model=8, n_heads=2, generator=torch.Generator().manual_seed(0)).double()
    P = torch.randn(5, 7, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    P[:, -1, -1] = 0
    params = list(model.parameters())
    F = model(P)
    g = torch.autograd.grad((F * torch.arange(1.0, 6.0, dtype=torch.float64)).sum(), params)
    with plain_kernels():
        F_plain = model(P)
    g_plain = torch.autograd.grad((F_plain * torch.arange(1.0, 6.0, dtype=torch.float64)).sum(), params)
    assert (F - F_plain).abs().max() < 1e-12
    assert (F - model.probe(P)[-1]["F"]).abs().max() < 1e-12
    assert all((a - b).abs().max() < 1e-10 * max(1.0, b.abs().max().item()) for a, b in zip(g, g_plain))


def test_a_deep_stack_trains_alike_on_both_paths_in_float64():
    torch.manual_seed(0)
    P = torch.randn(16, 9, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    P[:, -1, -1] = 0
    z = torch.where(torch.arange(16) % 2 == 0, 1.0, -1.0).double()
    models = []
    for plain in (False, True):
        model = build_model("mamba", 4, n_layers=3, d_model=8, n_heads=2,
                            generator=torch.Generator().manual_seed(3)).double()
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        for _ in range(5):
            with plain_kernels() if plain else _nothing():
                loss = torch.clamp(1 - z * model(P), min=0).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        models.append(model)
    for a, b in zip(*(m.parameters() for m in models)):
        assert rel(a.detach(), b.detach()) <= 1e-10


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_the_tiny_deep_preset_stops_at_the_same_step_on_both_paths():
    from mambaicl.experiments.mechanism import PRESETS, seed_runs

    preset = PRESETS["tiny"]
    fused = seed_runs(preset, (1,))[0]
    with plain_kernels():
        plain = seed_runs(preset, (1,))[0]
    assert fused.stopped < preset.train.steps  # early stopping happened
    assert (fused.best_step, fused.stopped) == (plain.best_step, plain.stopped)
    assert abs(fused.val_loss - plain.val_loss) <= 1e-4


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_compiled_rms_norm_matches_its_plain_expression(dtype):
    from mambaicl.models.deep import RMSNorm

    g = torch.Generator().manual_seed(4)
    norm = RMSNorm(13).to(dtype)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(13, generator=g, dtype=dtype))
    x = (torch.randn(4, 6, 13, generator=g, dtype=dtype) * 1e3).requires_grad_()
    w = torch.randn(4, 6, 13, generator=g, dtype=dtype)
    y = norm(x)
    grads = torch.autograd.grad((y * w).sum(), (x, norm.weight))
    with plain_kernels():
        y_plain = norm(x)
        grads_plain = torch.autograd.grad((y_plain * w).sum(), (x, norm.weight))
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    assert y.dtype == dtype and rel(y, y_plain) <= tol
    for a, b in zip(grads, grads_plain):
        assert a.dtype == dtype and rel(a, b) <= tol


def test_non_finite_inputs_propagate_and_do_not_crash():
    u, W_B, W_C, W = params(2, 5, 4, 1, 2, 1.0)
    u[0, 2, 1] = float("nan")
    out = selective_scan_heads_fused(u, W_B, W_C, W)
    assert torch.isnan(out[0, :, 2:]).any() and torch.isfinite(out[1]).all()
    big = params(2, 5, 4, 1, 2, 1.0)
    big[3][0, 0, 0] = float("inf")  # a logit of +-inf: gates exactly 0 and 1, finite outputs
    assert torch.isfinite(selective_scan_heads_fused(*big)).all()
