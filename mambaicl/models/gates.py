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
    "suffix_after",
    "decay_gate_from_log_decays",
    "mamba2_gate_from_logits",
    "gated_retention_gate_from_logits",
    "retnet_gate_any",
    "gla_gate_from_logits",
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


# ---------------------------------------------------------------- any leading shape (seed-stacked models)
#
# The functions above take one batch ``(batch, L)``. The gated-linear-attention stack of
# :mod:`mambaicl.models.gla` works on ``(S, batch, L)`` logits (seeds stacked); the forms below act
# on the last axis of any shape. Each ``*_from_logits`` has its plain twin in the tests (a loop over
# ``j > i``, and the functions above on the same numbers).


def suffix_after(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``sum_{j>i} x_j`` along axis ``dim``, any shape (a reverse cumulative sum, O(L), no subtraction)."""
    suffix = torch.flip(torch.cumsum(torch.flip(x, [dim]), dim), [dim])  # sum_{j>=i}
    return torch.cat([suffix.narrow(dim, 1, x.shape[dim] - 1), torch.zeros_like(suffix.narrow(dim, 0, 1))], dim=dim)


def decay_gate_from_log_decays(log_gamma: torch.Tensor) -> torch.Tensor:
    """``G_i = prod_{j>i} gamma_j`` from ``log gamma`` ``(..., L)``: :func:`gate_from_log_decays` for any shape."""
    return torch.exp(suffix_after(log_gamma))


def mamba2_gate_from_logits(logits: torch.Tensor, a: torch.Tensor, input_step: bool) -> torch.Tensor:
    """Mamba-2's gate from ``x_j = w^T p_j`` ``(..., L)`` and the scalar ``a`` (broadcast over ``(..., L)``).

    ``log gamma_j = -softplus(x_j) e^a`` (App. 12). With ``input_step=False`` this is App. 12's form,
    ``G_i = prod_{j>i} gamma_j`` (the token's own weight is 1); with ``input_step=True`` the token is
    also scaled by its own step ``Delta_i = softplus(x_i)``, as in the Mamba-2 recurrence
    ``h_i = exp(Delta_i A) h_{i-1} + Delta_i B_i x_i`` (Dao and Gu, 2024):
    ``G_i = Delta_i prod_{j>i} exp(-Delta_j e^a)``.
    """
    step = F_.softplus(logits)  # (..., L): Delta_j
    log_G = suffix_after(-step * torch.exp(a))
    if input_step:
        log_G = log_G + torch.log(step)
    return torch.exp(log_G)


def gated_retention_gate_from_logits(logits: torch.Tensor, tau: float) -> torch.Tensor:
    """Gated retention's ``G_i = prod_{j>i} sigma(x_j)^{1/tau}`` (App. 12) from logits ``(..., L)``."""
    if not tau > 0:
        raise ValueError(f"tau must be positive; got {tau!r}")
    return decay_gate_from_log_decays(F_.logsigmoid(logits) / tau)


def retnet_gate_any(shape: tuple, gamma: float, dtype=torch.float64, device=None) -> torch.Tensor:
    """RetNet's ``G_i = gamma^{L-i}`` (``i = 1..L``, App. 12) broadcast to ``shape = (..., L)``."""
    if not (0 < gamma <= 1):
        raise ValueError(f"gamma must lie in (0, 1]; got {gamma!r}")
    L = shape[-1]
    dist = torch.arange(L - 1, -1, -1, dtype=dtype, device=device)  # (L,): L - i
    return (gamma ** dist).expand(*shape)


def gla_gate_from_logits(logits: torch.Tensor, tau: float, recurrent: bool) -> torch.Tensor:
    """Channel-wise gates of gated linear attention from ``x_{j,c} = (W_alpha p_j)_c`` ``(..., L, m)``.

    ``recurrent=True``: the GLA recurrence ``h_i = h_{i-1} diag(alpha_i) + v_i k_i^T`` with
    ``alpha_i = sigma(x_i)^{1/tau}`` unrolls to ``G_{i,c} = prod_{j>i} alpha_{j,c}`` (Yang et al., 2024;
    App. 12's first display). ``recurrent=False``: App. 12's output formula, which gates each key by its
    *own* ``sigma(x_{i,c})^{1/tau}`` (``G_{i,c} = alpha_{i,c}``), a different model.
    """
    if not tau > 0:
        raise ValueError(f"tau must be positive; got {tau!r}")
    log_alpha = F_.logsigmoid(logits) / tau  # (..., L, m)
    if not recurrent:
        return torch.exp(log_alpha)
    return torch.exp(suffix_after(log_alpha, dim=-2))
