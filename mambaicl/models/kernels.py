"""The scan primitives every gate and every attention layer of the package is built from.

Glossary (code name -> paper symbol):

==================  ======================================================================
``x``               a sequence of per-token terms along axis ``dim`` (any leading shape)
``suffix_sum``      ``sum_{j>=i} x_j``; ``suffix_after``: ``sum_{j>i} x_j``, the exponent of every gate
                    ``G_{i,L} = ... prod_{j>i} ...``
``running_sum``     ``sum_{j<=i} x_j``: the exponent of a gate read at every position at once
``keys``            ``W_B u_s`` of every head, ``(batch, H, L, m)``
``queries``         ``W_C u_t`` of every head, ``(batch, H, L, m)``
``scores``          ``u_s^T W_B^T W_C u_t``, row ``t`` reads column ``s`` (zero for ``s > t`` if causal)
==================  ======================================================================

Every gate of the book (Eq. (3), the channel-wise gate of Eq. (1) unrolled in App. 11.1, the
App. 12 families, the S6 gate of Mamba-1) is ``exp`` of a sum of per-token log-terms over the
tokens after (or up to) a position: :func:`suffix_sum` (with :func:`suffix_after`) and
:func:`running_sum` are the only cumulative sums of :mod:`mambaicl.models`. Every score is :func:`scores`;
every softmax is :func:`row_softmax`, whose sums are running sums, so its bits do not depend on the CPU's
vector width.
"""
from __future__ import annotations

import torch

__all__ = ["suffix_sum", "suffix_after", "running_sum", "causal_mask", "heads_keys_queries", "scores", "causal_scores",
           "row_softmax"]


def suffix_sum(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``sum_{j>=i} x_j`` along axis ``dim``, any shape: the one reverse cumulative sum, O(L)."""
    return torch.flip(torch.cumsum(torch.flip(x, [dim]), dim), [dim])


def suffix_after(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``sum_{j>i} x_j`` along axis ``dim``, any shape: :func:`suffix_sum` shifted by one, no subtraction.

    ``log G_i = log sigma_i + suffix_after(log(1 - sigma))_i`` is the gate of Eq. (3);
    ``exp(suffix_after(log gamma))`` is every decay gate of App. 12.
    """
    suffix = suffix_sum(x, dim)  # sum_{j>=i}
    return torch.cat([suffix.narrow(dim, 1, x.shape[dim] - 1), torch.zeros_like(suffix.narrow(dim, 0, 1))], dim=dim)


def running_sum(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``sum_{j<=i} x_j`` along axis ``dim``, any shape (a cumulative sum)."""
    return torch.cumsum(x, dim=dim)


def causal_mask(L: int, device=None) -> torch.Tensor:
    """``(L, L)`` boolean, ``True`` where column ``s`` is at or before row ``t``."""
    return torch.tril(torch.ones(L, L, dtype=torch.bool, device=device))


def heads_keys_queries(u: torch.Tensor, W_B: torch.Tensor, W_C: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys ``W_B u_s`` and queries ``W_C u_t`` of every head, each ``(batch, H, L, m)``.

    Args:
        u: ``(batch, L, D)``.  W_B, W_C: ``(H, m, D)``.
    """
    keys = torch.einsum("bld,hmd->bhlm", u, W_B)  # (batch, H, L, m): W_B u_s
    queries = torch.einsum("bld,hmd->bhlm", u, W_C)  # (batch, H, L, m): W_C u_t
    return keys, queries


def scores(keys: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """``scores[..., t, s] = queries_t . keys_s``, ``(..., L_q, L_k)`` from keys ``(..., L_k, m)`` and queries
    ``(..., L_q, m)``: the one score computation of the package. The deep stacks' causal scores
    (:func:`causal_scores`), Eq. (3)'s scores of the query against every token
    (:func:`mambaicl.models.gated_attention.bilinear_scores`) and the attention table of a token basis
    (:func:`mambaicl.models.pattern_eq3.attention_table`) are all this product."""
    return queries @ keys.transpose(-1, -2)


def causal_scores(keys: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """``scores[..., t, s] = queries_t . keys_s`` for ``s <= t``, else 0; ``(..., L, L)`` from ``(..., L, m)``."""
    return scores(keys, queries) * causal_mask(keys.shape[-2], keys.device)


class _RowSoftmax(torch.autograd.Function):
    """Softmax over the last axis whose only sums are :func:`running_sum` (a sequential scan): the same bits on
    every CPU. ``torch.softmax`` sums a row in the CPU's vector width (8 float32 lanes with AVX2, 16 with
    AVX-512), so the float32 Transformers of Chapter 6 trained differently on two machines of the same kind."""

    @staticmethod
    def forward(ctx, x):
        e = torch.exp(x - x.amax(-1, keepdim=True))  # the maximum is exact in any order
        y = e / running_sum(e)[..., -1:]
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        gy = g * y
        return gy - y * running_sum(gy)[..., -1:]  # y (g - sum_s g_s y_s)


def row_softmax(x: torch.Tensor) -> torch.Tensor:
    """``softmax`` over the last axis (``-inf`` entries get weight 0; a row needs one finite entry), with every
    sum a running sum in a fixed order, forward and backward, so that the result does not depend on the CPU."""
    return _RowSoftmax.apply(x)
