"""Eq. (1) of Li et al. (2025) for every head, in closed form: the paper's selective-scan layer without a loop.

Glossary (code name -> paper symbol):

==================  ======================================================================
``u``               layer input ``U`` token-major, ``(batch, L, D)``
``W_B``, ``W_C``    per-head key / query matrices of Eq. (1), ``(H, m, D)``
``W``               per-head gate matrix ``W = (w_1, ..., w_D)`` of Eq. (1), ``(H, D, D)``
``scores``          ``u_s^T W_B^T W_C u_t``, row ``t`` reads column ``s``, ``(batch, H, L, L)``
``G``               channel-wise gate ``G_{s,t}(W)`` of App. 11.1, ``(batch, H, L(t), L(s), D)``
``cum``             ``sum_{r<=t} log(1 - sigma(w_c^T u_r))``, ``(batch, H, L, D)``
==================  ======================================================================

Unrolled (App. 11.1), Eq. (1) with ``A = -I`` is ``o_t = sum_{s<=t} (G[t, s] * u_s) scores[t, s]``:
linear attention times a channel-wise gate. Three forms with one signature ``(u, W_B, W_C, W) ->
(batch, H, L, D)``: :func:`selective_scan_heads` materialises the gate (what the probes read),
:func:`selective_scan_heads_factored` factorises it into per-token terms (the default of the deep
stacks) and :func:`selective_scan_heads_chunked` (what the factored form falls back to when the
gates saturate) never exponentiates a positive number. With one head, :func:`selective_scan_heads`
is :func:`mambaicl.models.recurrence.selective_scan_closed_form`; all three are tested against the
literal recurrence :func:`mambaicl.models.recurrence.selective_scan` (``tests/reference_kernels.py``).
These are the plain twins (autograd, any device) of the compiled CPU kernel
:func:`mambaicl.models.scan_kernel.selective_scan_heads_fused`, which the deep stacks run on a CPU
(``tests/test_deep_fused.py`` compares them).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F_

from ..config import check_int
from .kernels import causal_mask, causal_scores, heads_keys_queries, running_sum

__all__ = ["paper_scan_terms", "gated_mix", "selective_scan_heads", "FACTORED_LOG_LIMIT",
           "selective_scan_heads_factored", "SCAN_CHUNK", "selective_scan_heads_chunked"]


def paper_scan_terms(u: torch.Tensor, W_B: torch.Tensor, W_C: torch.Tensor, W: torch.Tensor):
    """Scores and channel-wise gates of Eq. (1) unrolled (App. 11.1 of Li et al. 2025), every head.

    ``scores[t, s] = u_s^T W_B^T W_C u_t`` and
    ``G[t, s, c] = sigma(w_c^T u_s) prod_{r=s+1}^{t} (1 - sigma(w_c^T u_r))`` for ``s <= t``, else 0.

    Args:
        u: ``(batch, L, D)``.  W_B, W_C: ``(H, m, D)``.  W: ``(H, D, D)``, ``W[h][:, c] = w_c``.

    Returns:
        ``scores`` ``(batch, H, L, L)`` and ``G`` ``(batch, H, L, L, D)``, both zero for ``s > t``.
    """
    scores = causal_scores(*heads_keys_queries(u, W_B, W_C))  # (batch, H, L(t), L(s))
    logits = torch.einsum("bld,hdc->bhlc", u, W)  # (batch, H, L, D): w_c^T u_s
    cum = running_sum(F_.logsigmoid(-logits), dim=2)  # (batch, H, L, D): sum_{r<=t} log(1 - sigma)
    causal = causal_mask(u.shape[1], u.device)  # (t, s)
    log_G = F_.logsigmoid(logits).unsqueeze(2) + cum.unsqueeze(3) - cum.unsqueeze(2)  # (batch, H, t, s, D)
    G = torch.exp(log_G.masked_fill(~causal[:, :, None], -math.inf))  # (batch, H, L, L, D)
    return scores, G


def gated_mix(u: torch.Tensor, scores: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """``o_t = sum_{s<=t} (G[t, s] * u_s) scores[t, s]`` (App. 11.1), ``(batch, H, L, D)``."""
    return torch.einsum("bhtsc,bsc,bhts->bhtc", G, u, scores)  # (batch, H, L, D)


def selective_scan_heads(u, W_B, W_C, W) -> torch.Tensor:
    """Eq. (1) for every head in the quadratic closed form of App. 11.1 (gate materialised), ``(batch, H, L, D)``."""
    return gated_mix(u, *paper_scan_terms(u, W_B, W_C, W))


#: largest ``|log prod (1 - sigma)|`` for which :func:`selective_scan_heads_factored` factorises the
#: gate; exp(60) ~ 1e26 leaves a margin of 1e12 below the float32 maximum for products in the backward pass
FACTORED_LOG_LIMIT = 60.0


def selective_scan_heads_factored(u, W_B, W_C, W) -> torch.Tensor:
    """Eq. (1) for every head with the gate factorised; same signature and output as :func:`selective_scan_heads`.

    ``G[t, s, c] = exp(cum_t,c) * sigma(w_c^T u_s) exp(-cum_s,c)`` with
    ``cum_t = sum_{r<=t} log(1 - sigma(w_c^T u_r))``, so that
    ``o_t = exp(cum_t) * sum_s scores[t, s] (sigma_s exp(-cum_s) u_s)``: one batched matrix
    product, no ``(L, L, D)`` gate tensor. When ``-cum`` exceeds :data:`FACTORED_LOG_LIMIT`
    somewhere (``exp(-cum)`` could overflow: saturated gates, as after training) it returns
    :func:`selective_scan_heads_chunked` instead, which never exponentiates a positive number.
    """
    logits = torch.einsum("bld,hdc->bhlc", u, W)  # (batch, H, L, D): w_c^T u_s
    cum = running_sum(F_.logsigmoid(-logits), dim=2)  # (batch, H, L, D), <= 0
    if float(-cum.detach().min()) > FACTORED_LOG_LIMIT:
        return selective_scan_heads_chunked(u, W_B, W_C, W)
    scores = causal_scores(*heads_keys_queries(u, W_B, W_C))  # (batch, H, L(t), L(s))
    values = torch.exp(F_.logsigmoid(logits) - cum) * u.unsqueeze(1)  # (batch, H, L, D): sigma_s e^{-cum_s} u_s
    return torch.exp(cum) * (scores @ values)  # (batch, H, L, D)


#: tokens per chunk of :func:`selective_scan_heads_chunked` (measured fastest for L = 21 on a CPU)
SCAN_CHUNK = 7


def selective_scan_heads_chunked(u, W_B, W_C, W, chunk: int = SCAN_CHUNK) -> torch.Tensor:
    """Eq. (1) for every head, chunk by chunk; same signature and output as :func:`selective_scan_heads`.

    The sequence is cut into chunks of ``chunk`` tokens (the last one zero-padded; padding comes
    after every real token, so causality leaves the outputs unchanged). With ``c`` the running
    sum of ``log(1 - sigma)`` inside a chunk, the gate within a chunk is
    ``G[t, s, c] = exp(c_t) * sigma_s exp(-c_s)``: factorised as in
    :func:`selective_scan_heads_factored` when ``-c`` stays below :data:`FACTORED_LOG_LIMIT` in
    every chunk, materialised (``(chunk, chunk)`` per chunk, every exponent ``<= 0``) otherwise.
    Across chunks a state ``S = sum_s G[end, s] u_s (W_B u_s)^T`` ``(batch, H, D, m)`` is carried,
    decayed by each chunk's product of ``1 - sigma`` and read by ``exp(c_t) S W_C u_t``. No
    exponent of the inter-chunk part is positive, so saturated gates (as after training) cannot
    overflow it, which is why :func:`selective_scan_heads_factored` falls back to this form.
    """
    check_int("chunk", chunk, 1)
    batch, L, D = u.shape
    H = W_B.shape[0]
    K = -(-L // chunk)  # number of chunks
    if K * chunk > L:
        u = F_.pad(u, (0, 0, 0, K * chunk - L))  # (batch, K*chunk, D)
    logits = torch.einsum("bld,hdc->bhlc", u, W)  # (batch, H, L', D)

    def cut(x):  # (batch, H, L', ...) -> (batch, H, K, chunk, ...)
        return x.reshape(batch, H, K, chunk, *x.shape[3:])

    log_s = cut(F_.logsigmoid(logits))  # (batch, H, K, C, D): log sigma_s
    c = running_sum(cut(F_.logsigmoid(-logits)), dim=3)  # (batch, H, K, C, D): sum of log(1 - sigma) in the chunk
    keys, queries = (cut(t) for t in heads_keys_queries(u, W_B, W_C))  # (batch, H, K, C, m) each
    uc = u.reshape(batch, 1, K, chunk, D)  # (batch, 1, K, C, D)
    scores = causal_scores(keys, queries)  # (batch, H, K, C(t), C(s))
    causal = causal_mask(chunk, u.device)  # (t, s)
    if float(-c.detach().min()) <= FACTORED_LOG_LIMIT:  # within a chunk exp(-c) cannot overflow
        o = torch.exp(c) * (scores @ (torch.exp(log_s - c) * uc))  # (batch, H, K, C, D)
    else:
        log_G = (log_s - c).unsqueeze(3) + c.unsqueeze(4)  # (batch, H, K, t, s, D), <= 0 for s <= t
        G = torch.exp(log_G.masked_fill(~causal[:, :, None], -math.inf))
        o = (G * (scores.unsqueeze(-1) * uc.unsqueeze(3))).sum(4)  # (batch, H, K, C, D)
    if K > 1:
        to_end = torch.exp(log_s + c[:, :, :, -1:] - c)  # (batch, H, K, C, D): G[end of chunk, s]
        local = (to_end * uc).transpose(-1, -2) @ keys  # (batch, H, K, D, m)
        decay = torch.exp(c[:, :, :, -1]).unsqueeze(-1)  # (batch, H, K, D, 1): prod of (1 - sigma) over a chunk
        S = torch.zeros_like(local[:, :, 0])  # (batch, H, D, m): the state entering chunk 0
        entering = [S]
        for dec, loc in list(zip(decay.unbind(2), local.unbind(2)))[:-1]:
            S = dec * S + loc
            entering.append(S)
        S_in = torch.stack(entering, dim=2)  # (batch, H, K, D, m)
        o = o + torch.exp(c) * (queries @ S_in.transpose(-1, -2))  # (batch, H, K, C, D)
    return o.reshape(batch, H, K * chunk, D)[:, :, :L]  # (batch, H, L, D)
