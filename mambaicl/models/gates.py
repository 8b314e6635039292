"""Gate families of App. 12 of Li et al. (2025): other SSMs / linear RNNs as gated linear attention.

Glossary (code name -> paper symbol):

==============  ===============================================================
``P``           tokens ``p_1, ..., p_L`` (query last), ``(batch, L, d0)``
``w``, ``a``    gate parameters ``w`` ``(d0,)`` and the scalar ``a`` (Mamba-2)
``gamma``       RetNet's fixed decay ``gamma`` in ``(0, 1]``
``tau``         temperature ``tau > 0`` of gated retention
``G``           ``G_{i,L}``: weight of token ``i`` in the output read at the last token, ``(batch, L)``
==============  ===============================================================

Each recurrence ``h_t = gamma_t h_{t-1} + v_t k_t^T`` unrolls to ``h_t = sum_i G_{i,t} v_i k_i^T``
with ``G_{i,t} = prod_{j=i+1}^t gamma_j`` (``G_{t,t} = 1``). The fast forms below use a
log-space reverse cumulative sum (O(L)); :func:`gate_from_decays_naive` is the written-out
product, their plain twin. Mamba's own gate, Eq. (3), is
:func:`mambaicl.models.gated_attention.gate_values`.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F_

__all__ = [
    "gate_from_log_decays",
    "gate_from_decays_naive",
    "mamba2_log_decay",
    "mamba2_gate",
    "retnet_gate",
    "gated_retention_log_decay",
    "gated_retention_gate",
]


def gate_from_log_decays(log_gamma: torch.Tensor) -> torch.Tensor:
    """``G_{i,L} = prod_{j=i+1}^{L} gamma_j`` from ``log gamma_j`` ``(batch, L)``, in O(L); ``(batch, L)``."""
    suffix = torch.flip(torch.cumsum(torch.flip(log_gamma, [1]), 1), [1])  # (batch, L): sum_{j>=i}
    after = torch.cat([suffix[:, 1:], torch.zeros_like(suffix[:, :1])], dim=1)  # (batch, L): sum_{j>i}
    return torch.exp(after)


def gate_from_decays_naive(gamma: torch.Tensor) -> torch.Tensor:
    """Plain twin of :func:`gate_from_log_decays` taking ``gamma`` itself: the product, written out."""
    batch, L = gamma.shape
    cols = []
    for i in range(L):
        g = torch.ones(batch, dtype=gamma.dtype, device=gamma.device)
        for j in range(i + 1, L):
            g = g * gamma[:, j]
        cols.append(g)
    return torch.stack(cols, dim=1)  # (batch, L)


def mamba2_log_decay(P: torch.Tensor, w: torch.Tensor, a: float) -> torch.Tensor:
    """``log gamma(w, a; j) = -softplus(w^T p_j) e^a`` (App. 12, Mamba-2), ``(batch, L)``."""
    return -F_.softplus(P @ w) * torch.exp(torch.as_tensor(a, dtype=P.dtype))


def mamba2_gate(P: torch.Tensor, w: torch.Tensor, a: float) -> torch.Tensor:
    """Mamba-2's gate ``G_{i,L}(w, a) = prod_{j>i} exp(-softplus(w^T p_j) e^a)`` (App. 12), ``(batch, L)``."""
    return gate_from_log_decays(mamba2_log_decay(P, w, a))


def retnet_gate(batch: int, L: int, gamma: float, dtype=torch.float32, device=None) -> torch.Tensor:
    """RetNet's gate ``G_{i,L} = gamma^{L-i}`` (App. 12): fixed, no input dependence; ``(batch, L)``."""
    if not (0 < gamma <= 1):
        raise ValueError(f"gamma must lie in (0, 1]; got {gamma!r}")
    dist = torch.arange(L - 1, -1, -1, dtype=dtype, device=device)  # (L,): L - i
    return (gamma ** dist).expand(batch, L)


def gated_retention_log_decay(P: torch.Tensor, w: torch.Tensor, tau: float) -> torch.Tensor:
    """``log gamma(w; j) = log sigma(w^T p_j) / tau`` (App. 12, gated retention), ``(batch, L)``."""
    if not tau > 0:
        raise ValueError(f"tau must be positive; got {tau!r}")
    return F_.logsigmoid(P @ w) / tau


def gated_retention_gate(P: torch.Tensor, w: torch.Tensor, tau: float) -> torch.Tensor:
    """Gated retention's gate ``G_{i,L}(w) = prod_{j>i} sigma(w^T p_j)^{1/tau}`` (App. 12), ``(batch, L)``."""
    return gate_from_log_decays(gated_retention_log_decay(P, w, tau))
