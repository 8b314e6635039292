"""The closed form of a one-layer Mamba: linear attention followed by a gate, Eq. (3).

Glossary (code name -> paper symbol):

================  =========================================================
``P``             prompt ``P = (p_1, ..., p_l, p_query)`` token-major, ``(..., l+1, d+1)``
``W_B``, ``W_C``  key / query matrices of the equivalent linear attention, ``(m, d+1)``
``M``             the bilinear form ``W_B^T W_C`` of the attention, ``(d+1, d+1)``
``w``             gate vector ``w = w_{d0}``, ``(d+1,)``
``logits``        ``w^T p_i`` for every token, ``(..., l+1)``
``attention``     ``p_i^T W_B^T W_C p_query`` for ``i = 1..l+1``, ``(..., l+1)``
``gate``          ``G_{i,l+1}(w)``, ``(..., l+1)``
``F``             ``F(Psi; P) = sum_i G_{i,l+1}(w) y_i p_i^T W_B^T W_C p_query``, ``(...)``
================  =========================================================

:func:`gate_from_logits` is the gate for any shape and along any axis (the gate of the one-layer models'
diagnostics, of the deep stacks' probes and of the lemmas' probes), computed in log space, ``log G_i = log
sigma(w^T p_i) + sum_{j>i} log(1 - sigma(w^T p_j))``, with one reverse cumulative sum
(:func:`mambaicl.models.kernels.suffix_after`): O(l) work and no overflow for any logit. :func:`gate_naive` is
the O(l^2) product written exactly as in Eq. (3). :func:`gated_sum` is Eq. (3)'s output given the logits and the
scores, the one that training differentiates: per prompt, :func:`gate_row_forward` (the gate as a running product
from the last token back) and its written-out backward :func:`gate_row_backward`, compiled by Numba; every model
of Eq. (3) computes ``F`` through them (the token-basis kernel of :mod:`mambaicl.models.pattern_eq3` calls the same
two functions). :func:`mamba_output` is the formula as written on a prompt tensor (Chapter 1). The models themselves
are in :mod:`mambaicl.models.one_layer`. Implements Eq. (3) of Li et al. (2025).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F_
from numba import njit
from torch.autograd.function import once_differentiable

from ..config import ConfigError
from ..device import serial_elementwise, use_compiled
from .kernels import scores, suffix_after, suffix_sum

__all__ = [
    "check_prompt",
    "gate_row_forward",
    "gate_row_backward",
    "bilinear_scores",
    "attention_scores",
    "log_gate",
    "gate_from_logits",
    "gate_values",
    "gate_naive",
    "gate_grad_w",
    "gated_sum",
    "mamba_output",
]


def check_prompt(P: torch.Tensor, d: int | None = None) -> None:
    """Raise a :class:`~mambaicl.config.ConfigError` unless ``P`` is a batch of prompts in the layout of Eq. (2).

    Args:
        P: ``(..., l+1, d+1)``; the last token is the query and its label entry must be 0.
        d: the data dimension the model expects, or ``None`` to skip that check.
    """
    if not isinstance(P, torch.Tensor):
        raise ConfigError(f"P must be a torch.Tensor of shape (batch, l+1, d+1); got {type(P).__name__}")
    if P.dim() < 3:
        raise ConfigError(
            f"P must have shape (batch, l+1, d+1) with the query as the last token; got shape {tuple(P.shape)}"
        )
    if d is not None and P.shape[-1] != d + 1:
        raise ConfigError(
            f"P's last dimension must be d+1 = {d + 1} (d = {d} features plus the label row); got {P.shape[-1]}"
        )
    if P.shape[-2] < 1:
        raise ConfigError("P must contain at least the query token (l+1 >= 1)")
    if torch.any(P[..., -1, -1] != 0):
        raise ConfigError(
            "the query (last token of P) must have label entry 0, as in Eq. (2); "
            f"got nonzero label entries in {int((P[..., -1, -1] != 0).sum())} prompt(s)"
        )


# ---------------------------------------------------------------- Eq. (3) on a prompt tensor


def _per_prompt(v: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
    """Give a per-model vector ``v`` ``(..., D)`` the prompt batch axis of ``P``: ``(..., 1, D)`` if stacked."""
    return v if v.dim() == 1 else v.unsqueeze(-2)


def _token_logits(P: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``w^T p_i`` for every token, ``(..., l+1)``; ``w`` is ``(D,)`` or stacked ``(S, D)``."""
    return (P @ _per_prompt(w, P).unsqueeze(-1)).squeeze(-1)


def bilinear_scores(P: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
    """``p_i^T M p_query`` for every token, ``(..., l+1)``; ``M`` is ``(D, D)`` or stacked ``(S, D, D)``."""
    query = P[..., -1, :]  # (..., D)
    v = query @ M.transpose(-1, -2)  # (..., D): M p_query (batched over a leading seed axis if M is stacked)
    return scores(P, v.unsqueeze(-2)).squeeze(-2)  # (..., l+1): the tokens as keys, M p_query as the query


def attention_scores(P: torch.Tensor, W_B: torch.Tensor, W_C: torch.Tensor) -> torch.Tensor:
    """Linear-attention scores ``p_i^T W_B^T W_C p_query`` of Eq. (3), ``(..., l+1)``."""
    return bilinear_scores(P, W_B.transpose(-1, -2) @ W_C)


def log_gate(log_sig: torch.Tensor, log_keep: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``log G_i = log sigma_i + sum_{j>i} log(1 - sigma_j)`` from every token's ``log sigma`` and ``log(1 - sigma)``."""
    return log_sig + suffix_after(log_keep, dim)


def gate_from_logits(logits: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``G_i = sigma(x_i) prod_{j>i} (1 - sigma(x_j))`` from logits ``x`` along axis ``dim`` (default: the last).

    In log space with one reverse cumulative sum, O(L), any shape; ``log(1 - sigma(x)) = log sigma(-x)``. The
    exponential is taken in slices PyTorch does not split across threads (:func:`mambaicl.device.serial_elementwise`):
    a gate read-out is the same bits at any thread count.
    """
    return serial_elementwise(torch.exp, log_gate(F_.logsigmoid(logits), F_.logsigmoid(-logits), dim))


def gate_values(P: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Gate ``G_{i,l+1}(w)`` of Eq. (3) in O(l), computed in log space, ``(..., l+1)``.

    ``G_i = sigma(w^T p_i) prod_{j=i+1}^{l+1} (1 - sigma(w^T p_j))``; for the query
    (``i = l+1``) the product is empty and ``G = sigma(w^T p_query)``.
    """
    return gate_from_logits(_token_logits(P, w))


def gate_naive(P: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Gate of Eq. (3) as the literal O(l^2) product; the plain twin of :func:`gate_values`."""
    sig = torch.sigmoid(_token_logits(P, w))  # (..., L)
    L = sig.shape[-1]
    later = torch.triu(torch.ones(L, L, dtype=torch.bool, device=P.device), diagonal=1)  # (i, j): j > i
    factors = torch.where(later, 1 - sig.unsqueeze(-2), torch.ones_like(sig).unsqueeze(-2))  # (..., i, j)
    return sig * torch.prod(factors, dim=-1)  # (..., L)


def gate_grad_w(P: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Analytic ``dG_i/dw`` from the proof of Lemma 4 (App. 11.3), ``(batch, l+1, d+1)``.

    ``dG_i/dw = G_i ((1 - sigma_i) p_i - sum_{s>i} sigma_s p_s)``. The proof of Lemma 4
    writes ``G_i (sum_{s>i} sigma_s p_s - (1 - sigma_i) p_i)``, which is the same vector with
    the opposite sign: it enters ``d loss / dw = -z dF/dw``.
    """
    sig = torch.sigmoid(P @ w)  # (batch, L)
    G = gate_values(P, w)  # (batch, L)
    weighted = sig.unsqueeze(-1) * P  # (batch, L, d+1): sigma_s p_s
    after = suffix_sum(weighted, dim=-2) - weighted  # (batch, L, d+1): sum_{s>i} sigma_s p_s
    return G.unsqueeze(-1) * ((1 - sig).unsqueeze(-1) * P - after)  # (batch, L, d+1)


@njit(cache=True)
def gate_row_forward(x, a, y, sig, G):
    """Eq. (3)'s gated sum of one prompt: ``F = sum_i G_i y_i a_i`` with ``G_i = sigma_i prod_{j>i} (1 - sigma_j)``,
    from the logits ``x``, scores ``a`` and labels ``y`` ``(L,)``; fills ``sig`` and ``G`` ``(L,)``.

    From the last token back, one ``exp`` per token: ``sigma`` and ``1 - sigma`` from ``e = exp(-|x|)`` (never
    the exponential of a large positive number), the product of the later ``1 - sigma_j`` carried along. The one
    gate of Eq. (3) that training differentiates (compiled by Numba; plain float64 arithmetic in a fixed order).
    """
    keep = 1.0  # prod_{j>i} (1 - sigma_j)
    f = 0.0
    for i in range(x.shape[0] - 1, -1, -1):
        e = math.exp(-abs(x[i]))
        r = 1.0 / (1.0 + e)
        sg = r if x[i] >= 0.0 else e * r
        kp = e * r if x[i] >= 0.0 else r
        sig[i] = sg
        G[i] = sg * keep
        keep *= kp
        f += G[i] * y[i] * a[i]
    return f


@njit(cache=True)
def gate_row_backward(g, sig, G, a, y, g_x, g_a):
    """The one written-out backward of Eq. (3)'s gated sum, for one prompt: given ``g = dLoss/dF`` and
    :func:`gate_row_forward`'s ``sig``, ``G``, fills ``g_x = dLoss/dx`` and ``g_a = dLoss/da`` ``(L,)`` with
    ``dF/dx_k = c_k (1 - sigma_k) - sigma_k sum_{i<k} c_i`` and ``dF/da_i = G_i y_i`` (``c_i = G_i y_i a_i``)."""
    before = 0.0  # sum_{i<k} c_i
    for i in range(sig.shape[0]):
        Gy = G[i] * y[i]
        c = Gy * a[i]
        g_x[i] = g * (c * (1.0 - sig[i]) - sig[i] * before)
        g_a[i] = g * Gy
        before += c


@njit(cache=True)
def _rows_forward(x, a, y, sig, G, F):
    for p in range(x.shape[0]):
        F[p] = gate_row_forward(x[p], a[p], y[p], sig[p], G[p])


@njit(cache=True)
def _rows_backward(g, sig, G, a, y, g_x, g_a):
    for p in range(sig.shape[0]):
        gate_row_backward(g[p], sig[p], G[p], a[p], y[p], g_x[p], g_a[p])


def _rows(t: torch.Tensor, L: int) -> np.ndarray:
    """``t`` as a C-contiguous float64 ``(N, L)`` array (a copy only if needed)."""
    return np.ascontiguousarray(t.detach().reshape(-1, L).numpy(), dtype=np.float64)


class _GatedSum(torch.autograd.Function):
    """``F = sum_i G_i(x) y_i a_i`` with the gate of Eq. (3), prompt by prompt through :func:`gate_row_forward` and
    :func:`gate_row_backward` (see :func:`gated_sum`)."""

    @staticmethod
    def forward(ctx, logits, att, y):
        L = logits.shape[-1]
        x, a, yy = _rows(logits, L), _rows(att, L), _rows(y, L)
        sig, G, F = np.empty_like(x), np.empty_like(x), np.empty(x.shape[0])
        _rows_forward(x, a, yy, sig, G, F)
        ctx.saved, ctx.shape = (sig, G, a, yy), logits.shape
        return torch.from_numpy(F).view(logits.shape[:-1]).to(logits.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, gF):
        sig, G, a, yy = ctx.saved
        g_x, g_a = np.empty_like(sig), np.empty_like(sig)
        _rows_backward(np.ascontiguousarray(gF.reshape(-1).numpy(), dtype=np.float64), sig, G, a, yy, g_x, g_a)
        back = lambda v: torch.from_numpy(v).view(ctx.shape).to(gF.dtype)  # noqa: E731
        return back(g_x), back(g_a), None


def gated_sum(logits: torch.Tensor, att: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``F = sum_i G_{i,L}(x) y_i a_i`` (Eq. (3) given the logits ``x_i = w^T p_i`` and scores ``a_i``), ``(...)``.

    On the CPU: :func:`gate_row_forward` per prompt and the written-out backward :func:`gate_row_backward`
    (``dF/da_i = G_i y_i``, ``dF/dx_k = c_k (1 - sigma_k) - sigma_k sum_{i<k} c_i``, ``c_i = G_i y_i a_i``), tested
    against autograd through a looped gate (``tests/reference_kernels.py``). On other devices: the same formula
    with :func:`gate_from_logits` and autograd.
    """
    logits, att, y = torch.broadcast_tensors(logits, att, y)
    if not use_compiled(logits.device):  # other devices, or the CPU under device.plain_kernels()
        return (gate_from_logits(logits) * y * att).sum(-1)
    return _GatedSum.apply(logits, att, y)


def mamba_output(P: torch.Tensor, W_B: torch.Tensor, W_C: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``F(Psi; P)`` of Eq. (3): gated linear attention read at the query, ``(...)``.

    The formula as written, with autograd; the models compute the same ``F`` through :func:`gated_sum`.
    """
    y = P[..., -1]  # (..., l+1): labels, 0 at the query
    return (gate_values(P, w) * y * attention_scores(P, W_B, W_C)).sum(dim=-1)
