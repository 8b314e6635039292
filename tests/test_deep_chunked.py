"""The chunked scan of the paper's layer (scan.selective_scan_heads_chunked) against the literal recurrence."""
import pytest
import torch

from mambaicl.config import ConfigError
from mambaicl.models import build_model
from mambaicl.models.scan import (
    FACTORED_LOG_LIMIT,
    selective_scan_heads,
    selective_scan_heads_chunked,
    selective_scan_heads_factored,
)
from reference_kernels import selective_scan_heads_seq


def params(scale, L=21, seed=0):
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(3, L, 5, generator=g, dtype=torch.float64)
    W_B, W_C = (torch.randn(2, 4, 5, generator=g, dtype=torch.float64) for _ in range(2))
    W = scale * torch.randn(2, 5, 5, generator=g, dtype=torch.float64)
    return u, W_B, W_C, W


@pytest.mark.parametrize("scale", [0.3, 30.0])  # 30: saturated gates, -cum far beyond FACTORED_LOG_LIMIT
@pytest.mark.parametrize("L,chunk", [(1, 7), (5, 2), (21, 7), (21, 4), (21, 1), (20, 30)])
def test_chunked_scan_matches_the_literal_recurrence(scale, L, chunk):
    u, W_B, W_C, W = params(scale, L)
    ref = selective_scan_heads_seq(u, W_B, W_C, W)
    out = selective_scan_heads_chunked(u, W_B, W_C, W, chunk=chunk)
    assert out.shape == ref.shape
    assert (out - ref).abs().max() < 1e-10 * max(1.0, float(ref.abs().max()))


def test_saturated_gates_take_the_materialised_path_and_stay_finite_in_float32():
    u, W_B, W_C, W = (t.float() for t in params(60.0))
    cum = torch.cumsum(torch.nn.functional.logsigmoid(-torch.einsum("bld,hdc->bhlc", u, W)), dim=2)
    assert float(-cum.min()) > 10 * FACTORED_LOG_LIMIT  # exp(-cum) would overflow float32
    params_ = [p.requires_grad_() for p in (W_B, W_C, W)]
    out = selective_scan_heads_chunked(u, *params_)
    grads = torch.autograd.grad(out.sum(), params_)
    assert torch.isfinite(out).all() and all(torch.isfinite(g).all() for g in grads)
    ref = selective_scan_heads_seq(u.double(), *(p.detach().double() for p in params_))
    assert (out.double() - ref).abs().max() < 1e-4 * max(1.0, float(ref.abs().max()))


@pytest.mark.parametrize("scale", [0.3, 30.0])
def test_chunked_gradients_match_the_quadratic_form(scale):
    u, *ps = params(scale, 13, seed=3)
    ps = [p.requires_grad_() for p in ps]
    w = torch.randn(3, 2, 13, 5, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    g1 = torch.autograd.grad((selective_scan_heads_chunked(u, *ps, chunk=4) * w).sum(), ps)
    g2 = torch.autograd.grad((selective_scan_heads(u, *ps) * w).sum(), ps)
    for a, b in zip(g1, g2):
        assert (a - b).abs().max() < 1e-9 * max(1.0, float(b.abs().max()))


def test_factored_scan_falls_back_to_the_chunked_scan(monkeypatch):
    import mambaicl.models.scan as scan

    calls = []
    monkeypatch.setattr(scan, "selective_scan_heads_chunked", lambda *a: calls.append(1) or selective_scan_heads_chunked(*a))
    u, W_B, W_C, W = params(30.0)
    ref = selective_scan_heads_seq(u, W_B, W_C, W)
    assert (selective_scan_heads_factored(u, W_B, W_C, W) - ref).abs().max() < 1e-10 * float(ref.abs().max())
    assert calls == [1]


def test_chunked_is_a_scan_option_and_chunk_is_validated():
    model = build_model("mamba", 4, n_layers=2, d_model=8, scan="chunked", generator=torch.Generator().manual_seed(0))
    ref = build_model("mamba", 4, n_layers=2, d_model=8, scan="quadratic", generator=torch.Generator().manual_seed(0))
    P = torch.randn(3, 6, 5, generator=torch.Generator().manual_seed(1))
    P[:, -1, -1] = 0  # the query has no label (Eq. (2))
    assert (model(P) - ref(P)).abs().max() < 1e-5
    with pytest.raises(ConfigError, match="^chunk must be an integer"):
        selective_scan_heads_chunked(*params(1.0), chunk=0)
