"""What the three forms of a one-layer Mamba cost: Chapter 1's benchmark.

=================  ==========================================================
form               what it computes ``F(Psi; P)`` with
=================  ==========================================================
``closed_form``    Eq. (3): one attention vector and a log-space suffix sum, O(l d)
``naive_product``  Eq. (3) with the gate's products written out, O(l^2)
``recurrence``     Eq. (1) token by token, state ``(d+1, m)``, O(l d m)
=================  ==========================================================
"""
from __future__ import annotations

import time
from typing import Callable

import torch

from .models.gated_attention import attention_scores, gate_naive, mamba_output
from .models.recurrence import selective_scan

__all__ = ["forward_forms", "time_forward_forms"]


def forward_forms(P: torch.Tensor, W_B: torch.Tensor, W_C: torch.Tensor, W: torch.Tensor) -> dict[str, Callable[[], torch.Tensor]]:
    """The three ways of computing ``F`` for the same prompt and parameters, as thunks."""
    w = W[:, -1]  # (d+1,): the gate vector is the last column of W
    y = P[:, :, -1]  # (batch, l+1)
    return {
        "closed_form": lambda: mamba_output(P, W_B, W_C, w),
        "naive_product": lambda: (gate_naive(P, w) * y * attention_scores(P, W_B, W_C)).sum(1),
        "recurrence": lambda: selective_scan(P, W_B, W_C, W)[:, -1, -1],
    }


def _best_time(fn: Callable[[], torch.Tensor], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


@torch.no_grad()
def time_forward_forms(ls=(20, 200, 2000), d: int = 30, batch: int = 1, repeats: int = 5,
                       seed: int = 0, device=None, threads: int | None = 1) -> list[dict]:
    """Best-of-``repeats`` wall-clock seconds of each form of ``F``, for prompts of ``l`` examples.

    The state size is ``m = l + 1`` as in Section 2 of the paper. Returns one dict per ``l``
    with the three timings, and checks on the way that the three forms agree. ``threads``
    sets PyTorch's intra-op threads for the measurement (restored afterwards): these tensors
    are small, and on a busy 2-core machine thread hand-offs would dominate what we measure.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1; got {repeats}")
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _time_all(ls, d, batch, repeats, seed, device)
    finally:
        torch.set_num_threads(previous)


def _time_all(ls, d, batch, repeats, seed, device) -> list[dict]:
    device = torch.device(device or "cpu")
    g = torch.Generator().manual_seed(seed)
    rows = []
    for l in ls:
        if l < 1:
            raise ValueError(f"every l must be >= 1; got {l}")
        P = torch.randn(batch, l + 1, d + 1, generator=g, dtype=torch.float64)  # (batch, l+1, d+1)
        P[:, :, -1] = torch.sign(P[:, :, -1])
        P[:, -1, -1] = 0
        W_B = 0.2 * torch.randn(l + 1, d + 1, generator=g, dtype=torch.float64) / d ** 0.5  # (m, d+1)
        W_C = 0.2 * torch.randn(l + 1, d + 1, generator=g, dtype=torch.float64) / d ** 0.5  # (m, d+1)
        W = torch.randn(d + 1, d + 1, generator=g, dtype=torch.float64) / (d + 1) ** 0.5  # (d+1, d+1)
        P, W_B, W_C, W = (t.to(device) for t in (P, W_B, W_C, W))
        forms = forward_forms(P, W_B, W_C, W)
        values = {name: fn() for name, fn in forms.items()}
        ref = values["closed_form"]
        for name, value in values.items():
            if not torch.allclose(value, ref, rtol=1e-9, atol=1e-9):
                raise AssertionError(f"{name} disagrees with the closed form at l = {l}")
        row = {"l": l}
        for name, fn in forms.items():
            row[name] = _best_time(fn, 1 if name == "recurrence" and l >= 1000 else repeats)
        rows.append(row)
    return rows
