"""Eq. (3) on prompts given in a token basis: one compiled forward and backward for a batch of synthetic prompts.

Glossary (code name -> paper symbol):

================  ==========================================================================
``basis``         a :class:`mambaicl.data.TokenBasis`: token ``p_i = sum_k coef_{ik} e_{index_{ik}}`` over
                  ``e_a = (rows_a; 0)`` (``rows = [mu; nu; v]``, Eq. (4)/(5)) and ``e_n = (0; 1)``, the label entry
``T``             the logit table ``T[a] = w^T e_a``, ``(S, n + 1)``: ``w_{1:d}^T [mu; nu; v]`` and ``w_{d+1}``
``Q``             the attention table ``Q[b, a] = (W_C e_b) . (W_B e_a) = e_a^T W_B^T W_C e_b``, ``(S, n + 1, n + 1)``:
                  row ``b`` a query basis vector, column ``a`` a key
================  ==========================================================================

With these tables a token's logit ``w^T p_i = sum_k coef_{ik} T[index_{ik}]`` and its score
``p_i^T W_B^T W_C p_query = sum_k coef_{ik} U[index_{ik}]``, ``U[a] = sum_k coef_{query,k} Q[index_{query,k}, a]``,
are each four look-ups, so a training step costs ``O(S batch l)`` instead of ``O(S batch l d)``.
:func:`pattern_gated_sum` is ``F(Psi; P) = sum_i G_{i,l+1}(w) y_i p_i^T W_B^T W_C p_query`` (Eq. (3) of Li et al.,
2025): per prompt, the logits and scores by look-ups, then Eq. (3)'s one gate and its one written-out backward
(:func:`mambaicl.models.gated_attention.gate_row_forward` / :func:`~mambaicl.models.gated_attention.gate_row_backward`),
whose ``dLoss/dx`` and ``dLoss/da`` are sent back into the tables. The two passes are loops compiled by Numba: plain float64 arithmetic in a fixed order, so the
same bits on every CPU and for every seed count. They are tested against the formula as written on materialised
prompts (:func:`mambaicl.models.gated_attention.mamba_output`, autograd) and by ``gradcheck``
(``tests/test_pattern_eq3.py``). :func:`pattern_sum` is the ungated sum ``sum_i y_i p_i^T W_B^T W_C p_query``
(linear attention, the ``linear`` kind) by the same look-ups. On a GPU the models use the tensor formula instead.
:func:`basis_logits` and :func:`basis_scores` are the same look-ups in PyTorch (autograd, any device), in the same
order, for the models' ``logits`` and ``attention`` on a prompt batch.
"""
from __future__ import annotations

import numpy as np
import torch
from numba import njit
from torch.autograd.function import once_differentiable

from .gated_attention import gate_row_backward, gate_row_forward
from .kernels import scores

__all__ = ["attention_table", "logit_table", "basis_logits", "basis_scores", "pattern_gated_sum", "pattern_sum",
           "pattern_scores"]


def logit_table(w: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``T[a] = w^T e_a``, ``(S, n + 1)``: ``w_{1:d}^T rows_a`` and, last, ``w_{d+1}`` (the label entry), for ``w``
    ``(S, d+1)`` and ``rows`` ``(n, d)``."""
    d = rows.shape[-1]
    Tx = (w[..., None, :d] * rows).sum(-1)  # (S, n); not a matmul: MKL's (S, d) @ (d, n) is thread-dependent
    return torch.cat([Tx, w[..., d:]], dim=-1)


def _basis_vectors(rows: torch.Tensor) -> torch.Tensor:
    """``E = [e_0; ...; e_n]``, ``(n + 1, d + 1)``: ``(rows_a; 0)`` and ``(0; 1)``."""
    n, d = rows.shape
    E = rows.new_zeros(n + 1, d + 1)
    E[:n, :d], E[n, d] = rows, 1
    return E


def attention_table(rows: torch.Tensor, *, M: torch.Tensor | None = None, W_B: torch.Tensor | None = None,
                    W_C: torch.Tensor | None = None) -> torch.Tensor:
    """``Q[b, a] = e_a^T M e_b``, ``(S, n + 1, n + 1)``, from ``M`` ``(S, D, D)`` or its factors ``W_B``, ``W_C``
    ``(S, m, D)`` (``M = W_B^T W_C``, never formed): :func:`mambaicl.models.kernels.scores` of the keys
    ``W_B e_a`` against the queries ``W_C e_b`` (or of ``e_a`` against ``M e_b``)."""
    E = _basis_vectors(rows)  # (n+1, D)
    if M is None:
        return scores((W_B @ E.T).transpose(-1, -2), (W_C @ E.T).transpose(-1, -2))  # (S, n+1, n+1)
    return scores(E, E @ M.transpose(-1, -2))  # (S, n+1, n+1): queries (M e_b)^T


def _in_order(terms: torch.Tensor) -> torch.Tensor:
    """``terms[..., 0] + terms[..., 1] + ...`` added left to right (as the compiled kernel adds them)."""
    parts = terms.unbind(-1)  # one backward node (a stack), not one zero-filled gradient per term
    out = parts[0]
    for part in parts[1:]:
        out = out + part
    return out


def basis_logits(T: torch.Tensor, basis) -> torch.Tensor:
    """``w^T p_i = sum_k coef_{ik} T[index_{ik}]`` for every token, ``(S, B, L)``, from ``T`` ``(S, n + 1)``."""
    S = basis.index.shape[0]
    looked = T.expand(S, -1).gather(1, basis.index.reshape(S, -1)).view(basis.index.shape)  # (S, B, L, K)
    return _in_order(basis.coef * looked)


def basis_scores(Q: torch.Tensor, basis) -> torch.Tensor:
    """``p_i^T M p_query = sum_k coef_{ik} U[index_{ik}]`` for every token, ``(S, B, L)``, from ``Q``
    ``(S, n + 1, n + 1)``; ``U = M p_query`` in the basis, ``U[a] = sum_k coef_{query,k} Q[index_{query,k}, a]``."""
    S, B, L, K = basis.index.shape
    n1 = Q.shape[-1]
    Q = Q.expand(S, -1, -1)
    q_index, q_coef = basis.index[..., -1, :], basis.coef[..., -1, :]  # (S, B, K): the query's terms
    U = q_coef[..., 0, None] * Q.gather(1, q_index[..., 0, None].expand(S, B, n1))  # (S, B, n+1)
    for k in range(1, K):  # added left to right, as in _in_order
        U = U + q_coef[..., k, None] * Q.gather(1, q_index[..., k, None].expand(S, B, n1))
    looked = U.gather(2, basis.index.reshape(S, B, -1)).view(S, B, L, K)
    return _in_order(basis.coef * looked)


@njit(cache=True)
def _query_scores(Q, index, coef, s, b, U):
    """``U[a] = sum_k coef_{query,k} Q[index_{query,k}, a]`` for prompt ``(s, b)`` (``U = M p_query`` in the basis)."""
    L, K = index.shape[2], index.shape[3]
    for a in range(U.shape[0]):
        acc = 0.0
        for k in range(K):
            acc += coef[s, b, L - 1, k] * Q[s, index[s, b, L - 1, k], a]
        U[a] = acc


@njit(cache=True)
def _forward(T, Q, index, coef, sig, G, att, F):
    """Eq. (3) per prompt: the logits and scores by look-ups, then :func:`gate_row_forward`; fills ``sig``, ``G``,
    ``att`` ``(S, B, L)`` and ``F`` ``(S, B)``."""
    S, B, L, K = index.shape
    n1 = T.shape[1]
    U = np.empty(n1)
    x = np.empty(L)
    for s in range(S):
        for b in range(B):
            _query_scores(Q, index, coef, s, b, U)  # U = M p_query in the basis: the query is the last token
            for i in range(L):
                x_i = 0.0
                a_i = 0.0
                for k in range(K):
                    j = index[s, b, i, k]
                    x_i += coef[s, b, i, k] * T[s, j]
                    a_i += coef[s, b, i, k] * U[j]
                x[i] = x_i
                att[s, b, i] = a_i
            F[s, b] = gate_row_forward(x, att[s, b], coef[s, b, :, K - 1], sig[s, b], G[s, b])


@njit(cache=True)
def _backward(gF, index, coef, sig, G, att, gT, gQ):
    """Add ``dLoss/dT`` and ``dLoss/dQ`` into ``gT`` ``(S, n + 1)`` and ``gQ`` ``(S, n + 1, n + 1)`` from
    ``gF = dLoss/dF`` ``(S, B)`` and the forward's ``sig``, ``G``, ``att``: :func:`gate_row_backward`, then the
    look-ups' transposes (scatter-adds)."""
    S, B, L, K = index.shape
    n1 = gT.shape[1]
    gU = np.empty(n1)
    g_x, g_a = np.empty(L), np.empty(L)
    for s in range(S):
        for b in range(B):
            gate_row_backward(gF[s, b], sig[s, b], G[s, b], att[s, b], coef[s, b, :, K - 1], g_x, g_a)
            for a in range(n1):
                gU[a] = 0.0
            for i in range(L):
                for k in range(K):
                    j = index[s, b, i, k]
                    gT[s, j] += g_x[i] * coef[s, b, i, k]
                    gU[j] += g_a[i] * coef[s, b, i, k]
            for k in range(K):  # U[a] = sum_k coef_{query,k} Q[index_{query,k}, a]
                j = index[s, b, L - 1, k]
                cq = coef[s, b, L - 1, k]
                for a in range(n1):
                    gQ[s, j, a] += gU[a] * cq


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().contiguous().numpy()


class _PatternEq3(torch.autograd.Function):
    """``F`` of Eq. (3) from the tables ``T``, ``Q`` and a :class:`~mambaicl.data.TokenBasis`; see
    :func:`pattern_gated_sum`."""

    @staticmethod
    def forward(ctx, T, Q, index, coef):
        S, B, L, _ = index.shape
        sig, G, att = (np.empty((S, B, L)) for _ in range(3))
        F = np.empty((S, B))
        idx, cf = _np(index), _np(coef).astype(np.float64, copy=False)
        _forward(_np(T).astype(np.float64, copy=False), _np(Q).astype(np.float64, copy=False), idx, cf, sig, G, att, F)
        ctx.saved = (idx, cf, sig, G, att)
        ctx.shape = (tuple(T.shape), tuple(Q.shape))
        return torch.from_numpy(F).to(T.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, gF):
        idx, cf, sig, G, att = ctx.saved
        gT, gQ = np.zeros(ctx.shape[0]), np.zeros(ctx.shape[1])
        _backward(_np(gF).astype(np.float64, copy=False), idx, cf, sig, G, att, gT, gQ)
        dtype = gF.dtype
        return torch.from_numpy(gT).to(dtype), torch.from_numpy(gQ).to(dtype), None, None


def pattern_gated_sum(T: torch.Tensor, Q: torch.Tensor, basis) -> torch.Tensor:
    """``F(Psi; P) = sum_i G_{i,l+1}(w) y_i p_i^T M p_query`` (Eq. (3)) of stacked prompts given in a token basis
    (``S`` seeds, :meth:`mambaicl.data.Prompts.basis`), ``(S, batch)``, on the CPU.

    ``T`` ``(S, n + 1)`` (:func:`logit_table`), ``Q`` ``(S, n + 1, n + 1)`` (:func:`attention_table`). The
    backward is written out: ``dF/dx_k = c_k (1 - sigma_k) - sigma_k sum_{i<k} c_i`` and ``dF/da_i = G_i y_i``,
    sent back to the tables through the same look-ups.
    """
    return _PatternEq3.apply(T, Q, basis.index, basis.coef)


@njit(cache=True)
def _sum_forward(Q, index, coef, F):
    """Eq. (3) without its gate per prompt: ``F[s, b] = sum_i y_i a_i`` (``i`` in order), the scores ``a_i`` by
    look-ups; ``y_i`` is each token's last basis coefficient (the label entry)."""
    S, B, L, K = index.shape
    U = np.empty(Q.shape[2])
    for s in range(S):
        for b in range(B):
            _query_scores(Q, index, coef, s, b, U)
            f = 0.0
            for i in range(L):
                a_i = 0.0
                for k in range(K):
                    a_i += coef[s, b, i, k] * U[index[s, b, i, k]]
                f += coef[s, b, i, K - 1] * a_i
            F[s, b] = f


@njit(cache=True)
def _scores_transpose(g_a, index, coef, s, b, gU, gQ):
    """Add prompt ``(s, b)``'s ``dLoss/dQ`` into ``gQ`` from ``g_a = dLoss/da`` ``(L,)`` of its scores ``a_i``: the
    look-ups' transposes (scatter-adds), through ``gU = dLoss/dU`` ``(n + 1,)``."""
    L, K = index.shape[2], index.shape[3]
    for a in range(gU.shape[0]):
        gU[a] = 0.0
    for i in range(L):
        for k in range(K):
            gU[index[s, b, i, k]] += g_a[i] * coef[s, b, i, k]
    for k in range(K):  # U[a] = sum_k coef_{query,k} Q[index_{query,k}, a]
        j = index[s, b, L - 1, k]
        cq = coef[s, b, L - 1, k]
        for a in range(gU.shape[0]):
            gQ[s, j, a] += gU[a] * cq


@njit(cache=True)
def _sum_backward(gF, index, coef, gQ):
    """Add ``dLoss/dQ`` into ``gQ`` ``(S, n + 1, n + 1)`` from ``gF = dLoss/dF`` ``(S, B)``: ``dF/da_i = y_i``,
    then the look-ups' transposes (:func:`_scores_transpose`)."""
    S, B, L, K = index.shape
    gU, g_a = np.empty(gQ.shape[2]), np.empty(L)
    for s in range(S):
        for b in range(B):
            for i in range(L):
                g_a[i] = gF[s, b] * coef[s, b, i, K - 1]
            _scores_transpose(g_a, index, coef, s, b, gU, gQ)


class _TableLookUp(torch.autograd.Function):
    """A look-up function of the table ``Q`` ``(S, n + 1, n + 1)`` on a :class:`~mambaicl.data.TokenBasis`:
    ``forward(Q, index, coef, out)`` fills ``out`` of ``dims`` leading axes of ``index`` (float64, returned in
    ``Q``'s dtype); ``backward(g, index, coef, gQ)`` adds ``dLoss/dQ`` into zeros. :func:`pattern_sum` and
    :func:`pattern_scores`."""

    @staticmethod
    def forward(ctx, Q, index, coef, forward, backward, dims):
        out = np.empty(tuple(index.shape[:dims]))
        idx, cf = _np(index), _np(coef).astype(np.float64, copy=False)
        forward(_np(Q).astype(np.float64, copy=False), idx, cf, out)
        ctx.saved, ctx.shape, ctx.kernel = (idx, cf), tuple(Q.shape), backward
        return torch.from_numpy(out).to(Q.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        idx, cf = ctx.saved
        gQ = np.zeros(ctx.shape)
        ctx.kernel(_np(g).astype(np.float64, copy=False), idx, cf, gQ)
        return torch.from_numpy(gQ).to(g.dtype), None, None, None, None, None


def pattern_sum(Q: torch.Tensor, basis) -> torch.Tensor:
    """``F(Psi; P) = sum_i y_i p_i^T M p_query`` (Eq. (3) with every gate 1: linear attention) of stacked prompts
    given in a token basis, ``(S, batch)``, on the CPU; ``Q`` ``(S, n + 1, n + 1)`` (:func:`attention_table`).
    The backward is written out: ``dF/da_i = y_i``, sent back to ``Q`` through the look-ups."""
    return _TableLookUp.apply(Q, basis.index, basis.coef, _sum_forward, _sum_backward, 2)


@njit(cache=True)
def _scores_forward(Q, index, coef, att):
    """``att[s, b, i] = p_i^T M p_query`` of every token by look-ups, ``(S, B, L)``: :func:`basis_scores`'s values,
    each term added in its order."""
    S, B, L, K = index.shape
    U = np.empty(Q.shape[2])
    for s in range(S):
        for b in range(B):
            _query_scores(Q, index, coef, s, b, U)
            for i in range(L):
                a_i = 0.0
                for k in range(K):
                    a_i += coef[s, b, i, k] * U[index[s, b, i, k]]
                att[s, b, i] = a_i


@njit(cache=True)
def _scores_backward(g_att, index, coef, gQ):
    """Add ``dLoss/dQ`` into ``gQ`` ``(S, n + 1, n + 1)`` from ``g_att = dLoss/datt`` ``(S, B, L)``
    (:func:`_scores_transpose` per prompt)."""
    S, B = index.shape[:2]
    gU = np.empty(gQ.shape[2])
    for s in range(S):
        for b in range(B):
            _scores_transpose(g_att[s, b], index, coef, s, b, gU, gQ)


def pattern_scores(Q: torch.Tensor, basis) -> torch.Tensor:
    """``p_i^T M p_query`` for every token of stacked prompts given in a token basis, ``(S, batch, l+1)``, on the
    CPU: :func:`basis_scores` (its plain twin: PyTorch look-ups, what a GPU runs) in one compiled pass, with a
    written-out backward into ``Q`` ``(S, n + 1, n + 1)`` (:func:`attention_table`)."""
    S = basis.index.shape[0]
    return _TableLookUp.apply(Q.expand(S, -1, -1), basis.index, basis.coef, _scores_forward, _scores_backward, 3)
