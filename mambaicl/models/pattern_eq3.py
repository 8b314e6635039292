"""Eq. (3) in pattern coordinates: one fused forward and a hand-written backward for a batch of synthetic prompts.

Glossary (code name -> paper symbol):

================  ==========================================================================
``coords``        a :class:`mambaicl.data.PatternCoords`: every token as pattern indices and coefficients,
                  ``x_i = mu_{j_i} + kappa_i nu_{k_i} + c_i v_{s_i}``, ``p_i = (x_i; y_i)`` (Eq. (4)/(5))
``T``             the logit table ``w_{1:d}^T [mu; nu; v]``, ``(S, M1 + M2 + V)``; ``w_label`` is ``w_{d+1}``, ``(S,)``
``R``             the attention table ``R[a, b] = e_a^T W_B^T W_C q_b``, ``(S, M1 + M2 + V + 1, M1 + M2)``: ``e_a``
                  runs over the token basis ``(mu; 0), (nu; 0), (v; 0), (0; 1)`` and ``q_b`` over the query
                  basis ``(mu; 0), (nu; 0)`` (the query has no outlier and label 0)
================  ==========================================================================

With these tables a token's logit ``w^T p_i`` and score ``p_i^T W_B^T W_C p_query`` are each four
look-ups, so a training step of a seed stack costs ``O(S batch l)`` elementwise work in a handful of
large operations instead of ``O(S batch l d)`` (and ~40 small autograd nodes). :func:`pattern_gated_sum`
is ``F(Psi; P) = sum_i G_{i,l+1}(w) y_i p_i^T W_B^T W_C p_query`` (Eq. (3) of Li et al., 2025) with the
gate of :func:`mambaicl.models.gated_attention.gated_sum` and its backward written out; it is tested
against the autograd formula on materialised prompts (:func:`mambaicl.models.gated_attention.mamba_output`)
and by ``gradcheck`` (``tests/test_pattern_eq3.py``). :func:`attention_table` builds ``R``.
"""
from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from ..data.prompts import take
from .gated_attention import gate_backward, gated_votes

__all__ = ["attention_table", "logit_table", "pattern_gated_sum"]


def logit_table(w: torch.Tensor, patterns: torch.Tensor) -> torch.Tensor:
    """``T = w_{1:d}^T [mu; nu; v]``, ``(S, M1 + M2 + V)``, for ``w`` ``(S, d+1)`` and the pattern rows ``(n, d)``."""
    return (w[..., None, : patterns.shape[-1]] * patterns).sum(-1)  # not a matmul: MKL's (S, d) @ (d, n) is thread-dependent


def attention_table(patterns: torch.Tensor, n_query: int, *, M: torch.Tensor | None = None,
                    W_B: torch.Tensor | None = None, W_C: torch.Tensor | None = None) -> torch.Tensor:
    """``R[a, b] = e_a^T M q_b`` (see the glossary), ``(S, n + 1, n_query)``, from ``M`` ``(S, D, D)`` or its
    factors ``W_B``, ``W_C`` ``(S, m, D)`` (``M = W_B^T W_C``, never formed); ``patterns`` ``(n, d)`` holds
    ``[mu; nu; v]`` and its first ``n_query`` rows are the query basis ``[mu; nu]``."""
    d = patterns.shape[-1]
    queries = patterns[:n_query]  # (n_q, d)
    if M is None:
        keys = torch.cat([W_B[..., :d] @ patterns.T, W_B[..., d:]], dim=-1)  # (S, m, n+1): W_B e_a
        return keys.transpose(-1, -2) @ (W_C[..., :d] @ queries.T)  # (S, n+1, n_q)
    Mq = M[..., :d] @ queries.T  # (S, D, n_q): M q_b
    return torch.cat([patterns @ Mq[..., :d, :], Mq[..., d:, :]], dim=-2)  # (S, n+1, n_q)


class _PatternEq3(torch.autograd.Function):
    """``F`` of Eq. (3) from the tables ``T``, ``w_label``, ``R`` and the prompts' coordinates; see :func:`pattern_gated_sum`."""

    @staticmethod
    def forward(ctx, T, w_label, R, c):
        S, B, L = c.y.shape
        l, M1, M2 = L - 1, c.M1, c.M2
        n = T.shape[1]
        # logits w^T p_i: (S, B, L)
        x = take(T[:, :M1], c.relevant) + c.kappa * take(T[:, M1 : M1 + M2], c.irrelevant)
        x = x + c.y * w_label[:, None, None]
        x[..., :l] += c.outlier_scale * take(T[:, M1 + M2 :], c.outlier_index)
        # U[s, b, a] = e_a^T M p_query: the query is mu_{j_q} + kappa_q nu_{k_q}, (S, B, n+1)
        Rt = R.transpose(1, 2)  # (S, n_q, n+1)
        j_q, k_q = c.relevant[..., -1:], c.irrelevant[..., -1:] + M1  # (S, B, 1)
        U = Rt.gather(1, j_q.expand(S, B, n + 1)) + c.kappa[..., -1:] * Rt.gather(1, k_q.expand(S, B, n + 1))
        # scores p_i^T M p_query: (S, B, L)
        att = U[..., :M1].gather(2, c.relevant) + c.kappa * U[..., M1 : M1 + M2].gather(2, c.irrelevant)
        att = att + c.y * U[..., n:]
        att[..., :l] += c.outlier_scale * U[..., M1 + M2 : n].gather(2, c.outlier_index)
        log_sig, Gy, votes = gated_votes(x, att, c.y)  # the gate and the gated sum, as in gated_sum
        ctx.save_for_backward(log_sig, Gy, votes)
        ctx.coords, ctx.shape = c, (S, B, L, n, R.shape[2])
        return votes.sum(-1)

    @staticmethod
    @once_differentiable
    def backward(ctx, gF):
        log_sig, Gy, votes = ctx.saved_tensors
        c, (S, B, L, n, n_q) = ctx.coords, ctx.shape
        l, M1, M2 = L - 1, c.M1, c.M2
        gT = gw = gR = None
        g_x, g_att = gate_backward(gF.unsqueeze(-1), log_sig, Gy, votes,
                                   logits=ctx.needs_input_grad[0] or ctx.needs_input_grad[1],
                                   att=ctx.needs_input_grad[2])  # dF/dx_k and dF/da_i
        if g_x is not None:
            gT = g_x.new_zeros(S, n)
            gT[:, :M1].scatter_add_(1, c.relevant.reshape(S, -1), g_x.reshape(S, -1))
            gT[:, M1 : M1 + M2].scatter_add_(1, c.irrelevant.reshape(S, -1), (g_x * c.kappa).reshape(S, -1))
            gT[:, M1 + M2 :].scatter_add_(1, c.outlier_index.reshape(S, -1),
                                          (g_x[..., :l] * c.outlier_scale).reshape(S, -1))
            gw = (g_x * c.y).sum((1, 2))
        if g_att is not None:
            gU = g_att.new_zeros(S, B, n + 1)
            gU[..., :M1].scatter_add_(2, c.relevant, g_att)
            gU[..., M1 : M1 + M2].scatter_add_(2, c.irrelevant, g_att * c.kappa)
            gU[..., M1 + M2 : n].scatter_add_(2, c.outlier_index, g_att[..., :l] * c.outlier_scale)
            gU[..., n] = (g_att * c.y).sum(-1)
            gRt = gU.new_zeros(S, n_q, n + 1)
            gRt.scatter_add_(1, c.relevant[..., -1:].expand(S, B, n + 1), gU)
            gRt.scatter_add_(1, (c.irrelevant[..., -1:] + M1).expand(S, B, n + 1), gU * c.kappa[..., -1:])
            gR = gRt.transpose(1, 2)
        return gT, gw, gR, None


def pattern_gated_sum(T: torch.Tensor, w_label: torch.Tensor, R: torch.Tensor, coords) -> torch.Tensor:
    """``F(Psi; P) = sum_i G_{i,l+1}(w) y_i p_i^T M p_query`` (Eq. (3)) of stacked prompts given by their
    coordinates (``S`` seeds, :meth:`mambaicl.data.Prompts.coordinates`), ``(S, batch)``.

    ``T`` ``(S, M1 + M2 + V)`` (:func:`logit_table`), ``w_label`` ``(S,)``, ``R`` (:func:`attention_table`).
    One fused forward; the backward is written out: ``dF/dx_k = c_k (1 - sigma_k) - sigma_k sum_{i<k} c_i``
    and ``dF/da_i = G_i y_i`` (as in :func:`mambaicl.models.gated_attention.gated_sum`), sent back to the
    tables by the same look-ups (scatter-adds).
    """
    return _PatternEq3.apply(T, w_label, R, coords)
