"""Gated linear attention with one gate per state channel (App. 12's GLA) on prompts given in a token basis: one
compiled forward and backward for a batch of synthetic prompts.

Glossary (code name -> paper symbol):

================  ==========================================================================
``basis``         a :class:`mambaicl.data.TokenBasis`: token ``p_i = sum_k coef_{ik} e_{index_{ik}}``; its last term
                  is the label entry, ``coef_{i,K-1} = y_i`` (0 at the query)
``Kt``            the key table ``Kt[a, c] = (W_B e_a)_c``, ``(S, n + 1, m)``
``At``            the gate-logit table ``At[a, c] = (W_alpha e_a)_c``, ``(S, n + 1, m)``
``Ct``            the query table ``Ct[a, c] = (W_C e_a)_c``, ``(S, n + 1, m)``
``x_{i,c}``       the gate logit ``(W_alpha p_i)_c``; ``log alpha_{i,c} = log sigma(x_{i,c}) / tau``
``G_{i,c}``       the weight of token ``i`` in channel ``c``, read at the query: ``prod_{j>i} alpha_{j,c}``
                  (``recurrent``, the GLA recurrence) or ``alpha_{i,c}`` (App. 12's output formula)
================  ==========================================================================

:func:`pattern_gla_sum` is ``F = sum_c (W_C p_query)_c sum_i y_i G_{i,c} (W_B p_i)_c`` (App. 12 of Li et al., 2025,
GLA in the frame of Eq. (3); :class:`mambaicl.models.gla.GLAStack`'s ``forward`` for the families ``gla`` and
``gla_app12``). With the three tables every key, logit and query entry is four look-ups, so a prompt costs
``O(l m)`` instead of the ``O(l m d)`` of its projections. Of the tensor formula's ``(S, batch, l+1, m)`` arrays
(logits, their log-sigmoid, the reverse cumulative sum, the gates, the gated keys, and their gradients) only two
are written, once, for the backward: the gates ``G`` and ``sigma(-x)``, so that it takes no exponential (each gate
costs one, ``exp(-|x|)``, at ``tau = 1``); keys and logits are looked up again. The backward is written out:

* ``dF/d(W_C p_query)_c = sum_i y_i G_{i,c} (W_B p_i)_c`` and ``dF/d(W_B p_i)_c = y_i G_{i,c} (W_C p_query)_c``;
* with ``t_{i,c} = y_i G_{i,c} (W_B p_i)_c (W_C p_query)_c``: ``dF/d log alpha_{j,c} = sum_{i<j} t_{i,c}``
  (recurrent: ``alpha_j`` enters every ``G_i`` with ``i < j``) or ``t_{j,c}`` (own gate), and
  ``d log alpha / dx = sigma(-x) / tau``;

sent back to the tables through the same look-ups. Plain float64 arithmetic in a fixed order: the same bits on every
CPU and for every seed count. Tested against the tensor formula (``GLAStack`` under
:func:`mambaicl.device.plain_kernels`, which is also what a GPU runs) and by ``gradcheck``
(``tests/test_pattern_gla.py``).
"""
from __future__ import annotations

import numpy as np
import torch
from numba import njit
from torch.autograd.function import once_differentiable

from .pattern_eq3 import _basis_vectors, _np

__all__ = ["channel_table", "pattern_gla_sum"]


def channel_table(W: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``T[a, c] = (W e_a)_c`` of every seed, ``(S, n + 1, m)``, for ``W`` ``(S, m, d+1)`` and ``rows`` ``(n, d)``
    (the basis vectors ``e_a = (rows_a; 0)``, ``e_n = (0; 1)``)."""
    return (W @ _basis_vectors(rows).T).transpose(-1, -2)  # (S, n+1, m)


@njit(cache=True, error_model="numpy")
def _alpha(x, tau):
    """``(alpha, sigma(-x))`` of one logit: ``alpha = sigma(x)^{1/tau}`` (``sigma(x)`` itself at ``tau = 1``) and
    ``sigma(-x) = 1 - sigma(x)``, both from one ``exp(-|x|)``: finite for every ``x``."""
    e = np.exp(-abs(x))
    if x >= 0.0:
        sig, sneg = 1.0 / (1.0 + e), e / (1.0 + e)
    else:
        sig, sneg = e / (1.0 + e), 1.0 / (1.0 + e)
    if tau == 1.0:
        return sig, sneg
    return np.exp((min(x, 0.0) - np.log1p(e)) / tau), sneg  # exp(log sigma(x) / tau)


@njit(cache=True, error_model="numpy")
def _look_up(Kt, At, Ct, index, coef, s, b, key, lx, q):
    """Prompt ``(s, b)``'s keys ``key[i, c] = (W_B p_i)_c``, logits ``lx[i, c] = (W_alpha p_i)_c`` ``(L, m)`` and
    query ``q[c] = (W_C p_query)_c`` ``(m,)`` by look-ups (terms added in the basis's order)."""
    L, K = index.shape[2], index.shape[3]
    m = Kt.shape[2]
    for c in range(m):
        q[c] = 0.0
    for k in range(K):
        j = index[s, b, L - 1, k]
        cf = coef[s, b, L - 1, k]
        for c in range(m):
            q[c] += cf * Ct[s, j, c]
    for i in range(L):
        for c in range(m):
            key[i, c] = 0.0
            lx[i, c] = 0.0
        for k in range(K):
            j = index[s, b, i, k]
            cf = coef[s, b, i, k]
            for c in range(m):
                key[i, c] += cf * Kt[s, j, c]
                lx[i, c] += cf * At[s, j, c]


@njit(cache=True, error_model="numpy")
def _forward(Kt, At, Ct, index, coef, tau, recurrent, G, sneg, col, F):
    """``F[s, b] = sum_c q_c sum_i y_i G_{i,c} key_{i,c}`` for every prompt, ``(S, B)`` (tokens from the query back,
    then channels in order). ``G_{i,c}`` is the running product ``prod_{j>i} alpha_{j,c}`` (recurrent) or
    ``alpha_{i,c}``. Keeps ``G`` and ``sneg = sigma(-x)`` ``(S, B, L, m)`` and the channel sums ``col`` ``(S, B, m)``
    for the backward."""
    S, B, L, K = index.shape
    m = Kt.shape[2]
    key, lx, q, run = np.empty((L, m)), np.empty((L, m)), np.empty(m), np.empty(m)
    for s in range(S):
        for b in range(B):
            _look_up(Kt, At, Ct, index, coef, s, b, key, lx, q)
            for c in range(m):
                run[c] = 1.0
                col[s, b, c] = 0.0
            for i in range(L - 1, -1, -1):
                y = coef[s, b, i, K - 1]
                for c in range(m):
                    a, sn = _alpha(lx[i, c], tau)
                    if recurrent:
                        g_ic = run[c]
                        run[c] *= a
                    else:
                        g_ic = a
                    G[s, b, i, c] = g_ic
                    sneg[s, b, i, c] = sn
                    col[s, b, c] += y * g_ic * key[i, c]
            f = 0.0
            for c in range(m):
                f += col[s, b, c] * q[c]
            F[s, b] = f


@njit(cache=True, error_model="numpy")
def _backward(gF, Kt, At, Ct, index, coef, tau, recurrent, G, sneg, col, gKt, gAt, gCt):
    """Add ``dLoss/dKt``, ``dLoss/dAt``, ``dLoss/dCt`` ``(S, n + 1, m)`` into ``gKt``, ``gAt``, ``gCt`` from
    ``gF = dLoss/dF`` ``(S, B)`` and the forward's ``G``, ``sneg``, ``col`` (the module docstring's derivatives,
    then the look-ups' transposes)."""
    S, B, L, K = index.shape
    m = Kt.shape[2]
    key, lx, q, before = np.empty((L, m)), np.empty((L, m)), np.empty(m), np.empty(m)
    g_key, g_lx = np.empty((L, m)), np.empty((L, m))
    for s in range(S):
        for b in range(B):
            _look_up(Kt, At, Ct, index, coef, s, b, key, lx, q)
            g = gF[s, b]
            for c in range(m):
                before[c] = 0.0  # sum_{i<j} t_{i,c}
            for i in range(L):
                gy = g * coef[s, b, i, K - 1]
                for c in range(m):
                    gk = gy * G[s, b, i, c] * q[c]
                    g_key[i, c] = gk
                    t = gk * key[i, c]
                    if recurrent:
                        g_lx[i, c] = before[c] * sneg[s, b, i, c] / tau
                        before[c] += t
                    else:
                        g_lx[i, c] = t * sneg[s, b, i, c] / tau
            for k in range(K):
                j = index[s, b, L - 1, k]
                cf = coef[s, b, L - 1, k]
                for c in range(m):
                    gCt[s, j, c] += cf * g * col[s, b, c]
            for i in range(L):
                for k in range(K):
                    j = index[s, b, i, k]
                    cf = coef[s, b, i, k]
                    for c in range(m):
                        gKt[s, j, c] += cf * g_key[i, c]
                        gAt[s, j, c] += cf * g_lx[i, c]


class _PatternGLA(torch.autograd.Function):
    """``F`` of the channel-gated families from the tables and a :class:`~mambaicl.data.TokenBasis`; see
    :func:`pattern_gla_sum`."""

    @staticmethod
    def forward(ctx, Kt, At, Ct, index, coef, tau, recurrent):
        S, B, L, _ = index.shape
        m = Kt.shape[2]
        F, G, sneg, col = np.empty((S, B)), np.empty((S, B, L, m)), np.empty((S, B, L, m)), np.empty((S, B, m))
        tables = tuple(_np(t).astype(np.float64, copy=False) for t in (Kt, At, Ct))
        idx, cf = _np(index), _np(coef).astype(np.float64, copy=False)
        _forward(*tables, idx, cf, float(tau), bool(recurrent), G, sneg, col, F)
        ctx.saved = (tables, idx, cf, float(tau), bool(recurrent), G, sneg, col)
        return torch.from_numpy(F).to(Kt.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, gF):
        tables, idx, cf, tau, recurrent, G, sneg, col = ctx.saved
        grads = tuple(np.zeros(t.shape) for t in tables)
        _backward(_np(gF).astype(np.float64, copy=False), *tables, idx, cf, tau, recurrent, G, sneg, col, *grads)
        return (*(torch.from_numpy(g).to(gF.dtype) for g in grads), None, None, None, None)


def pattern_gla_sum(Kt: torch.Tensor, At: torch.Tensor, Ct: torch.Tensor, basis, tau: float,
                    recurrent: bool) -> torch.Tensor:
    """``F = sum_c (W_C p_query)_c sum_i y_i G_{i,c} (W_B p_i)_c`` (App. 12's GLA in the frame of Eq. (3)) of
    stacked prompts given in a token basis (``S`` seeds, :meth:`mambaicl.data.Prompts.basis`), ``(S, batch)``, on
    the CPU.

    ``Kt``, ``At``, ``Ct`` ``(S, n + 1, m)``: :func:`channel_table` of ``W_B``, ``W_alpha``, ``W_C``. ``G_{i,c}`` is
    ``prod_{j>i} sigma(x_{j,c})^{1/tau}`` with ``recurrent`` (the GLA recurrence, family ``gla``), else
    ``sigma(x_{i,c})^{1/tau}`` (App. 12's output formula, ``gla_app12``); :func:`mambaicl.models.gates.gla_gate`.
    """
    S = basis.index.shape[0]
    Kt, At, Ct = (t.expand(S, -1, -1) for t in (Kt, At, Ct))
    return _PatternGLA.apply(Kt, At, Ct, basis.index, basis.coef, tau, recurrent)
