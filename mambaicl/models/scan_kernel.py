"""Eq. (1) of Li et al. (2025) for every head as one compiled forward and one written-out backward (the deep stacks on a CPU).

Glossary (code name -> paper symbol):

==================  ======================================================================
``u``               layer input ``U`` token-major, ``(batch, L, D)``
``proj``            ``[w_c^T u_s | W_B u_s | W_C u_s]`` of every head: logits, keys, queries, ``(batch, L, H, D + 2m)``
``sig``, ``f``      ``sigma(w_c^T u_s)`` and ``1 - sigma(w_c^T u_s) = sigma(-w_c^T u_s)``, ``(batch, L, H, D)``
``sc``              ``scores[t, s] = u_s^T W_B^T W_C u_t`` (read for ``s <= t``), ``(batch, H, L - t0, L)``
``P``               ``prod_{r=s+1}^{t} f_r``: the running product of one row ``t``, from ``s = t`` down
``t0``              the first query row computed: 0, or ``L - 1`` for a stack's last layer (``last_only``)
==================  ======================================================================

Eq. (1) with ``A = -I`` unrolled (App. 11.1) is ``o_t = sum_{s<=t} G[t, s] * u_s * scores[t, s]`` with
``G[t, s, c] = sigma(w_c^T u_s) prod_{r=s+1}^{t} (1 - sigma(w_c^T u_r))``. :func:`selective_scan_heads_fused` has the
signature of :func:`mambaicl.models.scan.selective_scan_heads` ``(u, W_B, W_C, W) -> (batch, H, L, D)``;
:func:`selective_scan_heads_fused_stacked` runs the rows of every member of a
:class:`mambaicl.models.deep_stack.StackedDeepModel` in one call. Each is one node of the autograd graph:

* PyTorch: the three projections (one batched matrix product; their backward two more), the gates ``sigma(x)`` and
  ``sigma(-x)`` (``torch.sigmoid``: exactly 0 or 1 at saturation, never a NaN), the scores ``q_t . k_s`` and, in the
  backward, ``dLoss/dW_C u_t``, ``dLoss/dW_B u_s`` from ``dLoss/dscores`` (batched products);
* Numba: the causal gated sum (:func:`_forward`) and its backward (:func:`_backward`, per row and head :func:`_pairs`
  and :func:`_logit_grads`). Every gate is a running product
  of numbers in ``[0, 1]`` taken from ``t`` down to ``s`` (no exponent of a positive number, no division), so
  saturated gates (``|w^T u|`` in the hundreds, as after training) stay exact where the factored form had to fall
  back. The arithmetic is in the input's dtype (float32 loops for the float32 models, float64 for the float64
  tests), elementwise loops over contiguous channels in a fixed order; the one reduction over channels,
  ``dLoss/dscores``, is compiled with reassociation (:func:`_dot`), so its last bit may differ between CPUs of
  different vector widths (as MKL's products do); on one machine every run gives the same bytes.

With ``last_only`` (a stack's last layer, whose output the readout reads at the last token only) the forward
computes query row ``L - 1`` alone -- that row of the full output, up to the last bit of its scores' matrix product --
and the backward runs that row alone.

The backward, for ``T[t, s, c] = g_o[t, c] scores[t, s] P[t, s, c] sigma_s u_s`` (``g_o = dLoss/do``):

* ``dLoss/dscores[t, s] = sum_c g_o[t, c] P[t, s, c] sigma_s,c u_s,c`` (then ``dLoss/dW_C u_t``, ``dLoss/dW_B u_s``);
* ``dLoss/dv[s, c] = sum_{t>=s} g_o[t, c] scores[t, s] P[t, s, c]`` with ``v = sigma u``;
* ``dLoss/d(w_c^T u_r) = dLoss/dv[r, c] v_r,c f_r - sigma_r A[r, c]`` with
  ``A[r] = sum_{t>=r} sum_{s<r} T[t, s] = sum_{j>=r} (g_o[j] o_j - dLoss/dv_j v_j)`` (``d log f / dx = -sigma``: each
  term whose product holds ``f_r`` contributes itself times ``-sigma_r``; those are all of row ``t``'s terms but the
  ones with ``s >= r``), one reverse cumulative sum.

Tested against the plain autograd forms (:data:`mambaicl.models.deep.PAPER_SCANS`), values and gradients in float64,
with saturated gates (``tests/test_deep_fused.py``). The choice between the two is
:func:`mambaicl.device.use_compiled` (made in :class:`mambaicl.models.deep.PaperMambaMixer` and
:class:`mambaicl.models.deep_stack.StackedDeepModel`).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from numba import njit
from torch.autograd.function import once_differentiable

__all__ = ["selective_scan_heads_fused", "selective_scan_heads_fused_stacked", "rms_norm_fused"]


@njit(cache=True, inline="always")
def _sum8(x):
    """``sum(x)`` of a contiguous row in one fixed order, accumulated in float64: :func:`_sum8_in` with a float64
    zero (eight interleaved partial sums, ``c = k mod 8``, the tail into the first, then added pairwise;
    independent chains, so it runs at the adders' throughput, and the same bits whether or not the compiler
    vectorises it)."""
    return _sum8_in(x, 0.0)


@njit(cache=True, inline="always")
def _sum8_in(x, zero):
    """``sum(x)`` in the order :func:`_sum8` documents, with its partial sums in ``zero``'s dtype (float64 through
    :func:`_sum8`, the RMSNorm's sums of squares)."""
    n = x.shape[0]
    n8 = n - n % 8
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = zero
    for c in range(0, n8, 8):
        a0 += x[c]
        a1 += x[c + 1]
        a2 += x[c + 2]
        a3 += x[c + 3]
        a4 += x[c + 4]
        a5 += x[c + 5]
        a6 += x[c + 6]
        a7 += x[c + 7]
    for c in range(n8, n):
        a0 += x[c]
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))


@njit(cache=True, error_model="numpy")
def _forward(u, sig, f, sc_all, t0, o):
    """Fill ``o`` ``(batch, L - t0, H, D)`` (the query rows ``t >= t0``) from ``u`` ``(batch, L, D)``, the gates ``sig``,
    ``f`` ``(batch, L, H, D)`` and the scores ``sc`` ``(batch, H, L - t0, L)`` (row ``t - t0`` is query ``t``).

    Row ``t``: ``s`` runs from ``t`` down, ``P *= f[s + 1]`` and ``o_t += scores[t, s] (P v_s)``, every channel at once
    (one store per inner loop, so that each vectorises)."""
    B, L, H, D = sig.shape
    dt = u.dtype  # every array in the input's dtype: float32 loops run twice as many channels per vector
    P = np.empty(D, dt)
    acc = np.empty(D, dt)
    v = np.empty((L, D), dt)
    for b in range(B):
        for h in range(H):
            sc = sc_all[b, h]
            for s in range(L):
                for c in range(D):
                    v[s, c] = sig[b, s, h, c] * u[b, s, c]
            for t in range(t0, L):
                for c in range(D):
                    P[c] = 1.0
                    acc[c] = 0.0
                for s in range(t, -1, -1):  # G[t, s] = P * sigma_s, P = prod_{r=s+1}^{t} f_r
                    if s < t:
                        for c in range(D):
                            P[c] *= f[b, s + 1, h, c]
                    w = sc[t - t0, s]
                    for c in range(D):
                        acc[c] += w * (P[c] * v[s, c])
                for c in range(D):
                    o[b, t - t0, h, c] = acc[c]


@njit(cache=True, fastmath={"reassoc", "nsz"}, error_model="numpy")
def _dot(x, y, zero):
    """``sum(x * y)`` of two contiguous rows, accumulated in ``zero``'s dtype. The one loop compiled with reassociation
    (``fastmath`` ``reassoc``): the compiler sums in vector lanes, an order fixed by the build of this function for
    this CPU (the same bits run after run on one machine; another CPU's vector width may round the last bit
    differently). The products are rounded as written; nothing else in this module is reassociated."""
    a = zero
    for c in range(x.shape[0]):
        a += x[c] * y[c]
    return a


@njit(cache=True, error_model="numpy")
def _pairs(g_o, f, sc, g_sc, v, gv, Q, t0, b, h, zero):
    """One ``(row b, head h)`` of :func:`_backward`: ``dLoss/dv`` into ``gv`` ``(L, D)`` and ``dLoss/dscores`` into
    ``g_sc`` ``(L - t0, L)`` (0 above the diagonal), every query row ``t >= t0`` with ``s`` running from ``t`` down."""
    L, D = v.shape
    for t in range(t0, L):
        for c in range(D):
            Q[c] = g_o[b, t - t0, h, c]
        for s in range(L - 1, t, -1):
            g_sc[t - t0, s] = 0.0
        for s in range(t, -1, -1):
            if s < t:
                for c in range(D):
                    Q[c] *= f[b, s + 1, h, c]
            w = sc[t - t0, s]
            for c in range(D):
                gv[s, c] += w * Q[c]
            g_sc[t - t0, s] = _dot(Q, v[s], zero)


@njit(cache=True, error_model="numpy")
def _logit_grads(g_o, o, sig, f, v, gv, cum, g_proj, gu, t0, b, h):
    """One ``(row b, head h)`` of :func:`_backward`: ``dLoss/d(w_c^T u_r)`` into the first ``D`` channels of
    ``g_proj[b, :, h]`` (``A[r]`` in ``cum``, ``r`` running down) and the values' part of ``dLoss/du`` added to ``gu``.
    Each loop reads few arrays besides the one it writes (a loop reading more compiled several times slower)."""
    L, D = v.shape
    for s in range(L):
        for c in range(D):
            g_proj[b, s, h, c] = gv[s, c] * v[s, c]  # dLoss/dv_s v_s, for now
    for c in range(D):
        cum[c] = 0.0
    for r in range(L - 1, 0, -1):  # cum = A[r]
        if r >= t0:
            for c in range(D):
                cum[c] += g_o[b, r - t0, h, c] * o[b, r - t0, h, c]
        for c in range(D):
            cum[c] -= g_proj[b, r, h, c]
        for c in range(D):
            g_proj[b, r, h, c] = g_proj[b, r, h, c] * f[b, r, h, c] - sig[b, r, h, c] * cum[c]
    for c in range(D):
        g_proj[b, 0, h, c] = g_proj[b, 0, h, c] * f[b, 0, h, c]
    for s in range(L):
        for c in range(D):
            gu[s, c] += gv[s, c] * sig[b, s, h, c]


@njit(cache=True, error_model="numpy")
def _backward(g_o, o, u, sig, f, sc_all, t0, g_u, g_proj, g_sc_all):
    """From ``g_o = dLoss/do`` and the forward's ``o``, both ``(batch, L - t0, H, D)`` (the query rows ``t >= t0``):
    ``g_u`` ``(batch, L, D)`` (the values' part, summed over heads), ``g_x = dLoss/d(w_c^T u_s)`` into the first ``D``
    channels of ``g_proj`` ``(batch, L, H, E)`` and ``g_sc = dLoss/dscores`` ``(batch, H, L - t0, L)`` (0 above the
    diagonal).

    Per ``(b, h)``: :func:`_pairs` (row ``t``: ``s`` runs from ``t`` down with ``Q = g_o[t] P`` (``Q *= f[s + 1]``):
    ``dLoss/dv_s += scores[t, s] Q`` and ``dLoss/dscores[t, s] = sum(Q v_s)`` (:func:`_dot`)), then
    :func:`_logit_grads` (``r`` running down, ``A[r] = sum_{t>=r} sum_{s<r} T[t, s] = sum_{j>=r} (g_o[j] o[j] -
    dLoss/dv_j v_j)``: all of row ``t``'s terms, less those with ``s >= r``, whose products do not hold ``f_r``;
    ``A[0] = 0``). Small compiled functions per ``(b, h)``, each loop reading few arrays: the same arithmetic in one
    function holding every loop made the FIG3 training step about 5 % slower (the bits are the same)."""
    B, L, H, D = sig.shape
    dt = u.dtype
    Q = np.empty(D, dt)
    cum = np.empty(D, dt)
    v = np.empty((L, D), dt)
    gv = np.empty((L, D), dt)  # dLoss/dv
    gu = np.empty((L, D), dt)
    zero = np.zeros(1, dt)[0]
    for b in range(B):
        for s in range(L):
            for c in range(D):
                gu[s, c] = 0.0
        for h in range(H):
            for s in range(L):
                for c in range(D):
                    v[s, c] = sig[b, s, h, c] * u[b, s, c]
                for c in range(D):
                    gv[s, c] = 0.0
            _pairs(g_o, f, sc_all[b, h], g_sc_all[b, h], v, gv, Q, t0, b, h, zero)
            _logit_grads(g_o, o, sig, f, v, gv, cum, g_proj, gu, t0, b, h)
        for s in range(L):
            for c in range(D):
                g_u[b, s, c] = gu[s, c]


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().contiguous().numpy()


def _weights_stacked(W_B, W_C, W) -> torch.Tensor:
    """``[W | W_B^T | W_C^T]`` of every head side by side, for every member: ``(S, D, H (D + 2m))``, the one projection
    matrix of each member."""
    S, H, D = W.shape[:3]
    return torch.cat([W, W_B.transpose(2, 3), W_C.transpose(2, 3)], dim=3).permute(0, 2, 1, 3).reshape(S, D, -1)


def _gates_scores(proj: torch.Tensor, D: int, m: int, t0: int):
    """From ``proj`` ``(N, L, H, D + 2m)``: the gates ``sigma(x)``, ``sigma(-x)`` of the logits ``x`` ``(N, L, H, D)``
    (PyTorch's sigmoid, exact at saturation: 0 or 1, never a NaN), the keys ``(N, H, L, m)``, the queries of the rows
    ``t >= t0`` ``(N, H, L - t0, m)`` and their scores ``q_t . k_s`` ``(N, H, L - t0, L)`` (one batched product)."""
    N, L, H, _ = proj.shape
    logits = proj[..., :D]  # (N, L, H, D)
    sig = torch.sigmoid(logits, out=proj.new_empty((N, L, H, D)))
    f = torch.neg(logits, out=proj.new_empty((N, L, H, D)))
    torch.sigmoid(f, out=f)
    keys = proj[..., D:D + m].transpose(1, 2)  # (N, H, L, m)
    queries = proj[:, t0:, :, D + m:].transpose(1, 2)  # (N, H, L - t0, m)
    sc = torch.matmul(queries, keys.transpose(2, 3)).contiguous()  # (N, H, L - t0, L); read for s <= t only
    return sig, f, keys, queries, sc


class _FusedScanStacked(torch.autograd.Function):
    """``o`` ``(S, batch, L, H, D)`` from ``u`` ``(S, batch, L, D)``, ``W_B``, ``W_C`` ``(S, H, m, D)``, ``W``
    ``(S, H, D, D)``; see :func:`selective_scan_heads_fused_stacked`. One node of the autograd graph: the projections
    (one batched matrix product, member ``k``'s rows by member ``k``'s matrix), the gates and the scores are PyTorch
    (their backward too), the causal gated sum and its backward two Numba loops over the ``S batch`` rows, in the
    tensors' own dtype (float32 or float64). ``last_only``: the output of the last token only, ``(S, batch, 1, H, D)``."""

    @staticmethod
    def forward(ctx, u, W_B, W_C, W, last_only):
        S, B, L, D = u.shape
        H, m = W_B.shape[1:3]
        t0 = L - 1 if last_only else 0
        weights = _weights_stacked(W_B, W_C, W).to(u.dtype)  # (S, D, H (D + 2m))
        proj = torch.bmm(u.reshape(S, B * L, D), weights).view(S * B, L, H, D + 2 * m)
        sig, f, keys, queries, sc = _gates_scores(proj, D, m, t0)
        u_ = _np(u.reshape(S * B, L, D))
        o = np.empty((S * B, L - t0, H, D), dtype=u_.dtype)
        _forward(u_, sig.numpy(), f.numpy(), sc.numpy(), t0, o)
        out = torch.from_numpy(o)
        # the output too: its backward reads it (an in-place change is caught)
        ctx.save_for_backward(u, weights, out, sig, f, keys, queries, sc)
        ctx.m, ctx.t0, ctx.w_dtype = m, t0, W.dtype
        return out.view(S, B, L - t0, H, D)

    @staticmethod
    @once_differentiable
    def backward(ctx, g_o):
        u, weights, out, sig, f, keys, queries, sc = ctx.saved_tensors
        S, B, L, D = u.shape
        N, H = S * B, sig.shape[2]
        m, t0 = ctx.m, ctx.t0
        E = D + 2 * m
        u_ = _np(u.reshape(N, L, D))
        g_u, g_p, g_sc = np.empty_like(u_), np.empty((N, L, H, E), u_.dtype), np.empty((N, H, L - t0, L), u_.dtype)
        _backward(_np(g_o.to(u.dtype).reshape(N, L - t0, H, D)), _np(out), u_, sig.numpy(), f.numpy(), sc.numpy(),
                  t0, g_u, g_p, g_sc)
        g_sc = torch.from_numpy(g_sc)  # (N, H, L - t0, L), 0 above the diagonal
        g_proj = torch.from_numpy(g_p)  # the logits' part filled; keys and queries from g_sc:
        g_proj[..., D:D + m] = torch.matmul(g_sc.transpose(2, 3), queries).transpose(1, 2)  # keys
        g_proj[:, :t0, :, D + m:] = 0.0  # queries that were not asked for
        g_proj[:, t0:, :, D + m:] = torch.matmul(g_sc, keys).transpose(1, 2)
        g_proj = g_proj.view(S, B * L, H * E)
        g_weights = torch.bmm(u.reshape(S, B * L, D).transpose(1, 2), g_proj).view(S, D, H, E).permute(0, 2, 1, 3)
        g_u = torch.from_numpy(g_u).view(S, B * L, D).baddbmm_(g_proj, weights.transpose(1, 2)).view(S, B, L, D)
        g_W, g_W_B, g_W_C = (g.contiguous().to(ctx.w_dtype) for g in (
            g_weights[..., :D], g_weights[..., D:D + m].transpose(2, 3), g_weights[..., D + m:].transpose(2, 3)))
        return g_u, g_W_B, g_W_C, g_W, None


def selective_scan_heads_fused(u, W_B, W_C, W, last_only: bool = False) -> torch.Tensor:
    """Eq. (1) for every head (``A = -I``), compiled, on the CPU; same signature and output as
    :func:`mambaicl.models.scan.selective_scan_heads`: ``(batch, H, L, D)`` (a view of a ``(batch, L, H, D)`` tensor,
    the layout :meth:`mambaicl.models.deep._HeadsMixer.combine` reads). :func:`selective_scan_heads_fused_stacked`
    with one member.

    Args:
        u: ``(batch, L, D)``.  W_B, W_C: ``(H, m, D)``.  W: ``(H, D, D)``.
        last_only: the last token's output only, ``(batch, H, 1, D)`` (see the stacked function).
    """
    o = _FusedScanStacked.apply(u.unsqueeze(0), W_B.unsqueeze(0), W_C.unsqueeze(0), W.unsqueeze(0), last_only)
    return o.squeeze(0).permute(0, 2, 1, 3)  # (batch, H, L, D)


def selective_scan_heads_fused_stacked(u, W_B, W_C, W, last_only: bool = False) -> torch.Tensor:
    """:func:`selective_scan_heads_fused` of ``S`` members at once (member axis first), compiled, on the CPU.

    Args:
        u: ``(S, batch, L, D)``.  W_B, W_C: ``(S, H, m, D)``.  W: ``(S, H, D, D)``.
        last_only: compute the output of the last token only (what a stack's last layer feeds the readout): the
            last row of the output with ``False`` (up to the last bit of its scores' matrix product), without the
            other rows' work, forward and backward.

    Returns:
        ``o`` ``(S, batch, L, H, D)`` (token-major: the layout the heads' combination reads); ``(S, batch, 1, H, D)``
        with ``last_only``.
    """
    return _FusedScanStacked.apply(u, W_B, W_C, W, bool(last_only))


# ---------------------------------------------------------------- RMSNorm, compiled


@njit(cache=True, error_model="numpy")
def _rms_forward(x, weight, eps, y, r):
    """``y = x r weight[k]`` with ``r = 1 / sqrt(mean(x^2) + eps)`` per row of ``x`` ``(S, N, D)`` (member ``k`` of ``S``
    has its own ``weight[k]``, ``(S, D)``); ``r`` ``(S, N)`` kept."""
    S, N, D = x.shape
    sq = np.empty(D)
    for k in range(S):
        for i in range(N):
            for c in range(D):
                sq[c] = float(x[k, i, c]) * x[k, i, c]
            ri = 1.0 / math.sqrt(_sum8(sq) / D + eps)
            r[k, i] = ri
            for c in range(D):
                y[k, i, c] = x[k, i, c] * ri * weight[k, c]


@njit(cache=True, error_model="numpy")
def _rms_backward(g, x, weight, r, gx, gw):
    """``gx = r (weight g) - x r^3 sum_c(weight g x) / D`` per row, ``gw[k] = sum_rows g x r`` (rows in order)."""
    S, N, D = x.shape
    t = np.empty(D)
    acc = np.empty(D)
    for k in range(S):
        for c in range(D):
            acc[c] = 0.0
        for i in range(N):
            ri = r[k, i]
            for c in range(D):
                t[c] = weight[k, c] * g[k, i, c] * x[k, i, c]
            q = _sum8(t) * ri * ri * ri / D
            for c in range(D):
                gx[k, i, c] = ri * (weight[k, c] * g[k, i, c]) - x[k, i, c] * q
            for c in range(D):
                acc[c] += g[k, i, c] * x[k, i, c] * ri
        for c in range(D):
            gw[k, c] = acc[c]


class _RMSNorm(torch.autograd.Function):
    """:func:`rms_norm_fused`: one compiled pass forward, one backward; float64 inside, the input's dtype outside.
    ``x`` ``(S, ..., D)`` with ``weight`` ``(S, D)`` (one weight per member), viewed as ``(S, N, D)``."""

    @staticmethod
    def forward(ctx, x, weight, eps):
        S, D = weight.shape
        x_, w_ = _np(x.reshape(S, -1, D)), _np(weight.to(x.dtype))
        y, r = np.empty_like(x_), np.empty(x_.shape[:2])
        _rms_forward(x_, w_, float(eps), y, r)
        ctx.saved, ctx.shape = (x_, w_, r), x.shape
        return torch.from_numpy(y).view(x.shape)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x_, w_, r = ctx.saved
        gx, gw = np.empty_like(x_), np.empty((x_.shape[0], x_.shape[2]))
        _rms_backward(_np(g.reshape(x_.shape)), x_, w_, r, gx, gw)
        return torch.from_numpy(gx).view(ctx.shape), torch.from_numpy(gw).to(g.dtype), None


def rms_norm_fused(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last axis (:class:`mambaicl.models.deep.RMSNorm`), compiled, on
    the CPU: the same value as the module's plain expression, each row's sum of squares in :func:`_sum8`'s order.
    ``weight`` ``(D,)``; or ``(S, D)`` with ``x`` ``(S, ..., D)``: member ``k``'s rows scaled by ``weight[k]``."""
    if weight.dim() == 1:
        return _RMSNorm.apply(x.unsqueeze(0), weight.unsqueeze(0), eps).squeeze(0)
    return _RMSNorm.apply(x, weight, eps)
