"""Gate families of App. 12 of Li et al. (2025): other SSMs / linear RNNs as gated linear attention.

Glossary (code name -> paper symbol):

==============  ===============================================================
``logits``      ``x_j = w^T p_j`` of every token (GLA: ``(W_alpha p_j)_c`` per state channel), ``(..., L)``
``a``           Mamba-2's scalar ``a`` (``A = -e^a``), broadcast over ``(..., L)``
``gamma``       RetNet's fixed decay ``gamma`` in ``(0, 1]``
``tau``         temperature ``tau > 0`` of gated retention and GLA
``G``           ``G_{i,L}``: weight of token ``i`` in the output read at the last token, ``(..., L)``
==============  ===============================================================

Each recurrence ``h_t = gamma_t h_{t-1} + v_t k_t^T`` unrolls to ``h_t = sum_i G_{i,t} v_i k_i^T``
with ``G_{i,t} = prod_{j=i+1}^t gamma_j`` (``G_{t,t} = 1``): :func:`decay_gate`, one reverse
cumulative sum in log space (:func:`mambaicl.models.kernels.suffix_after`). Every gate here acts
on the last axis of any shape (one batch ``(batch, L)`` or seed-stacked ``(S, batch, L)``). Mamba's
own gate, Eq. (3), is :func:`mambaicl.models.gated_attention.gate_from_logits`; the written-out
products the tests compare these with are in ``tests/reference_kernels.py``.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F_

from ..config import check_real
from .kernels import suffix_after

__all__ = [
    "decay_gate",
    "mamba2_log_decay",
    "mamba2_gate",
    "gated_retention_log_decay",
    "gated_retention_gate",
    "retnet_gate",
    "gla_gate",
]


def decay_gate(log_gamma: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``G_i = prod_{j>i} gamma_j`` from ``log gamma`` along axis ``dim``, any shape, O(L)."""
    return torch.exp(suffix_after(log_gamma, dim))


def mamba2_log_decay(logits: torch.Tensor, a) -> torch.Tensor:
    """``log gamma_j = -softplus(x_j) e^a`` (App. 12, Mamba-2), ``(..., L)``; ``a`` a number or a tensor."""
    return -F_.softplus(logits) * torch.exp(torch.as_tensor(a, dtype=logits.dtype, device=logits.device))


def mamba2_gate(logits: torch.Tensor, a, input_step: bool = False) -> torch.Tensor:
    """Mamba-2's gate from ``x_j = w^T p_j`` ``(..., L)`` and the scalar ``a`` (broadcast over ``(..., L)``).

    ``log gamma_j = -softplus(x_j) e^a`` (App. 12). With ``input_step=False`` this is App. 12's form,
    ``G_i = prod_{j>i} gamma_j`` (the token's own weight is 1); with ``input_step=True`` the token is
    also scaled by its own step ``Delta_i = softplus(x_i)``, as in the Mamba-2 recurrence
    ``h_i = exp(Delta_i A) h_{i-1} + Delta_i B_i x_i`` (Dao and Gu, 2024):
    ``G_i = Delta_i prod_{j>i} exp(-Delta_j e^a)``.
    """
    step = F_.softplus(logits)  # (..., L): Delta_j
    log_G = suffix_after(-step * torch.exp(torch.as_tensor(a, dtype=logits.dtype, device=logits.device)))
    if input_step:
        log_G = log_G + torch.log(step)
    return torch.exp(log_G)


def gated_retention_log_decay(logits: torch.Tensor, tau: float) -> torch.Tensor:
    """``log gamma_j = log sigma(x_j) / tau`` (App. 12, gated retention), ``(..., L)``."""
    check_real("tau", tau, 0.0, low_open=True)
    return F_.logsigmoid(logits) / tau


def gated_retention_gate(logits: torch.Tensor, tau: float) -> torch.Tensor:
    """Gated retention's ``G_i = prod_{j>i} sigma(x_j)^{1/tau}`` (App. 12) from logits ``(..., L)``."""
    return decay_gate(gated_retention_log_decay(logits, tau))


def retnet_gate(shape: tuple, gamma: float, dtype=torch.float64, device=None) -> torch.Tensor:
    """RetNet's ``G_i = gamma^{L-i}`` (``i = 1..L``, App. 12): fixed, no input dependence; ``shape = (..., L)``."""
    check_real("gamma", gamma, 0.0, 1.0, low_open=True)
    L = shape[-1]
    dist = torch.arange(L - 1, -1, -1, dtype=dtype, device=device)  # (L,): L - i
    return (gamma ** dist).expand(*shape)


def gla_gate(logits: torch.Tensor, tau: float, recurrent: bool) -> torch.Tensor:
    """Channel-wise gates of gated linear attention from ``x_{j,c} = (W_alpha p_j)_c`` ``(..., L, m)``.

    ``recurrent=True``: the GLA recurrence ``h_i = h_{i-1} diag(alpha_i) + v_i k_i^T`` with
    ``alpha_i = sigma(x_i)^{1/tau}`` unrolls to ``G_{i,c} = prod_{j>i} alpha_{j,c}`` (Yang et al., 2024;
    App. 12's first display). ``recurrent=False``: App. 12's output formula, which gates each key by its
    *own* ``sigma(x_{i,c})^{1/tau}`` (``G_{i,c} = alpha_{i,c}``), a different model.
    """
    log_alpha = gated_retention_log_decay(logits, tau)  # (..., L, m)
    if not recurrent:
        return torch.exp(log_alpha)
    return decay_gate(log_alpha, dim=-2)
