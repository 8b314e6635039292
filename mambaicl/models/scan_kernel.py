"""Eq. (1) of Li et al. (2025) for every head as one compiled forward and one written-out backward (the deep stacks on a CPU).

Glossary (code name -> paper symbol):

==================  ======================================================================
``u``               layer input ``U`` token-major, ``(batch, L, D)``
``proj``            ``[w_c^T u_s | W_B u_s | W_C u_s]`` of every head: logits, keys, queries, ``(batch, L, H, D + 2m)``
``sig``, ``f``      ``sigma(w_c^T u_s)`` and ``1 - sigma(w_c^T u_s) = sigma(-w_c^T u_s)``, ``(batch, H, L, D)``
``sc``              ``scores[t, s] = u_s^T W_B^T W_C u_t`` for ``s <= t``, ``(batch, H, L, L)``
``P``               ``prod_{r=s+1}^{t} f_r``: the running product of one row ``t``, from ``s = t`` down
==================  ======================================================================

Eq. (1) with ``A = -I`` unrolled (App. 11.1) is ``o_t = sum_{s<=t} G[t, s] * u_s * scores[t, s]`` with
``G[t, s, c] = sigma(w_c^T u_s) prod_{r=s+1}^{t} (1 - sigma(w_c^T u_r))``. :func:`selective_scan_heads_fused` has the
signature of :func:`mambaicl.models.scan.selective_scan_heads` ``(u, W_B, W_C, W) -> (batch, H, L, D)`` and is one
node of the autograd graph: the three projections are one matrix product (PyTorch, as in the plain forms; their
backward two more, inside the node), the rest -- gates, scores, the causal gated sum
and its backward -- two loops compiled by Numba. Every gate is a running product of numbers in ``[0, 1]`` taken from
``t`` down to ``s`` (no exponent of a positive number, no division), so saturated gates (``|w^T u|`` in the
hundreds, as after training) stay exact where the factored form had to fall back. The arithmetic is in the
input's dtype (Numba compiles one specialisation per dtype: float32 loops for the float32 models, float64 for the
float64 tests; a float32 gate's ``exp`` to single precision, :func:`_exp_nonpositive_single`), in a fixed order (every
sum runs over its index upwards, never reordered by the compiler: no ``fastmath``; innermost loops over contiguous
channels), so the kernel's bits do not depend on the CPU's vector width, on MKL, or on the thread count (checked:
the same bytes with ``NUMBA_CPU_NAME=haswell``, AVX2, as with AVX-512). :func:`selective_scan_heads_fused_stacked`
runs the rows of every member of a :class:`mambaicl.models.deep_stack.StackedDeepModel` in one call.

The backward, for ``T[t, s, c] = g_o[t, c] scores[t, s] P[t, s, c] sigma_s u_s`` (``g_o = dLoss/do``):

* ``dLoss/dscores[t, s] = sum_c g_o[t, c] P[t, s, c] sigma_s,c u_s,c`` (:func:`_sum8`; then ``dLoss/dW_C u_t``, ``dLoss/dW_B u_s``);
* ``dLoss/dv[s, c] = sum_{t>=s} g_o[t, c] scores[t, s] P[t, s, c]`` with ``v = sigma u``;
* ``dLoss/d(w_c^T u_r) = dLoss/dv[r, c] u_r,c sigma_r f_r - sigma_r sum_{t>=r} sum_{s<r} T[t, s, c]`` (``d log f / dx =
  -sigma``: each term whose product holds ``f_r`` contributes itself times ``-sigma_r``).

Tested against the plain autograd forms (:data:`mambaicl.models.deep.PAPER_SCANS`), values and gradients in float64,
with saturated gates (``tests/test_deep_fused.py``). The choice between the two is
:func:`mambaicl.device.use_compiled` (made in :class:`mambaicl.models.deep.PaperMambaMixer`).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from numba import njit
from torch.autograd.function import once_differentiable

__all__ = ["selective_scan_heads_fused", "selective_scan_heads_fused_stacked", "rms_norm_fused"]


#: ``2^k`` for ``k = -1074, ..., 0`` (exact): the scale of :func:`_exp_nonpositive`
_POW2 = np.ldexp(1.0, np.arange(-1074, 1))
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 with its 32 low bits zero (fdlibm): n * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10
# 1 / k!, k = 2, ..., 13: the Taylor polynomial of exp on |r| <= ln(2) / 2 (truncation below 1e-17)
(_C2, _C3, _C4, _C5, _C6, _C7, _C8, _C9, _C10, _C11, _C12, _C13) = (1.0 / math.factorial(k) for k in range(2, 14))


@njit(cache=True, inline="always")
def _exp_nonpositive(x):
    """``exp(x)`` for ``x <= 0`` in plain arithmetic (so that the loops calling it vectorise and give the same bits
    on every CPU): ``x = n ln 2 + r``, ``|r| <= ln(2)/2``, a degree-13 Taylor polynomial of ``exp(r)`` times ``2^n``;
    within an ulp or two of the C library's ``exp``; 0 below -744, NaN for NaN (never an index out of the table)."""
    xc = x if x > -744.0 else -744.0  # NaN -> -744: the table index stays in range
    n = math.floor(xc * _LOG2E + 0.5)  # in [-1073, 0]
    r = (xc - n * _LN2_HI) - n * _LN2_LO
    p = ((((((((((((_C13 * r + _C12) * r + _C11) * r + _C10) * r + _C9) * r + _C8) * r + _C7) * r + _C6) * r + _C5)
              * r + _C4) * r + _C3) * r + _C2) * r + 1.0) * r + 1.0
    y = p * _POW2[int(n) + 1074]
    return y if x >= -744.0 else (0.0 if x < -744.0 else x)


@njit(cache=True, inline="always")
def _exp_nonpositive_single(x):
    """:func:`_exp_nonpositive` to single precision: the same reduction, a degree-7 Taylor polynomial (relative
    truncation below 1e-8, under half a float32 ulp), for the float32 kernels."""
    xc = x if x > -744.0 else -744.0
    n = math.floor(xc * _LOG2E + 0.5)
    r = (xc - n * _LN2_HI) - n * _LN2_LO
    p = ((((((_C7 * r + _C6) * r + _C5) * r + _C4) * r + _C3) * r + _C2) * r + 1.0) * r + 1.0
    y = p * _POW2[int(n) + 1074]
    return y if x >= -744.0 else (0.0 if x < -744.0 else x)


@njit(cache=True, error_model="numpy")
def _gates(proj, b, h, D, sig, f):
    """``sig = sigma(x)``, ``f = sigma(-x)`` of the logits ``x = proj[b, :, h, :D]`` into ``(L, D)`` rows of ``sig``, ``f``
    (only ``exp`` of a non-positive number; to single precision for float32 arrays)."""
    L = proj.shape[1]
    single = f.itemsize == 4
    for s in range(L):  # two loops: each vectorises, one loop doing both does not
        if single:
            for c in range(D):
                f[s, c] = _exp_nonpositive_single(-abs(proj[b, s, h, c]))  # e = exp(-|x|)
        else:
            for c in range(D):
                f[s, c] = _exp_nonpositive(-abs(proj[b, s, h, c]))
        for c in range(D):
            x = proj[b, s, h, c]
            e = f[s, c]
            d = 1.0 / (1.0 + e)  # sigma(|x|)
            a = e * d  # sigma(-|x|)
            sig[s, c] = d if x >= 0 else a
            f[s, c] = a if x >= 0 else d


@njit(cache=True, inline="always")
def _sum8(x):
    """``sum(x)`` of a contiguous row in one fixed order, accumulated in float64: :func:`_sum8_in` with a float64
    zero (eight interleaved partial sums, ``c = k mod 8``, the tail into the first, then added pairwise;
    independent chains, so it runs at the adders' throughput, and the same bits whether or not the compiler
    vectorises it)."""
    return _sum8_in(x, 0.0)


@njit(cache=True, inline="always")
def _sum8_in(x, zero):
    """``sum(x)`` in the order :func:`_sum8` documents, with its partial sums in ``zero``'s dtype (``x``'s own
    dtype in the scan's backward; float64 through :func:`_sum8`)."""
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
def _scores(proj, b, h, D, m, t0, kT, sc):
    """``sc[t, s] = q_t . k_s`` for ``s <= t`` (0 above) of the query rows ``t >= t0``, summed over the state index in
    order; ``kT`` ``(m, L)`` scratch."""
    L = proj.shape[1]
    for j in range(m):
        for s in range(L):
            kT[j, s] = proj[b, s, h, D + j]
    for t in range(t0, L):
        for s in range(L):
            sc[t, s] = 0.0
        for j in range(m):
            q = proj[b, t, h, D + m + j]
            for s in range(t + 1):  # vectorised over s; each sc[t, s] adds j = 0, 1, ... in order
                sc[t, s] += q * kT[j, s]


@njit(cache=True, error_model="numpy")
def _forward(u, proj, D, m, t0, o, sig_all, f_all, sc_all):
    """Fill ``o`` ``(batch, L - t0, H, D)`` (the query rows ``t >= t0``) and the saved ``sig``, ``f`` ``(batch, H, L, D)``,
    ``sc`` ``(batch, H, L, L)`` (rows ``t >= t0``).

    Row ``t``: ``s`` runs from ``t`` down, ``P *= f[s + 1]`` and ``o_t += scores[t, s] (P v_s)``, every channel at once
    (one store per inner loop, so that each vectorises)."""
    B, L, H, _ = proj.shape
    dt = u.dtype  # every array in the input's dtype: float32 loops run twice as many channels per vector
    P = np.empty(D, dt)
    acc = np.empty(D, dt)
    v = np.empty((L, D), dt)
    kT = np.empty((m, L), dt)
    for b in range(B):
        for h in range(H):
            sig, f, sc = sig_all[b, h], f_all[b, h], sc_all[b, h]
            _gates(proj, b, h, D, sig, f)
            _scores(proj, b, h, D, m, t0, kT, sc)
            for s in range(L):
                for c in range(D):
                    v[s, c] = sig[s, c] * u[b, s, c]
            for t in range(t0, L):
                for c in range(D):
                    P[c] = 1.0
                    acc[c] = 0.0
                for s in range(t, -1, -1):  # G[t, s] = P * sigma_s, P = prod_{r=s+1}^{t} f_r
                    if s < t:
                        for c in range(D):
                            P[c] *= f[s + 1, c]
                    w = sc[t, s]
                    for c in range(D):
                        acc[c] += w * (P[c] * v[s, c])
                for c in range(D):
                    o[b, t - t0, h, c] = acc[c]


@njit(cache=True, inline="always")
def _dot8(x, y, zero):
    """``sum(x * y)`` of two contiguous rows in :func:`_sum8`'s order, its partial sums in ``zero``'s dtype (each product
    rounded to that dtype first: the bits of :func:`_sum8_in` of the stored products)."""
    n = x.shape[0]
    n8 = n - n % 8
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = zero
    for c in range(0, n8, 8):
        a0 += x[c] * y[c]
        a1 += x[c + 1] * y[c + 1]
        a2 += x[c + 2] * y[c + 2]
        a3 += x[c + 3] * y[c + 3]
        a4 += x[c + 4] * y[c + 4]
        a5 += x[c + 5] * y[c + 5]
        a6 += x[c + 6] * y[c + 6]
        a7 += x[c + 7] * y[c + 7]
    for c in range(n8, n):
        a0 += x[c] * y[c]
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))


@njit(cache=True, error_model="numpy")
def _backward(g_o, o, u, proj, D, m, t0, sig_all, f_all, sc_all, g_u, g_proj):
    """From ``g_o = dLoss/do`` and the forward's ``o``, both ``(batch, L - t0, H, D)`` (the query rows ``t >= t0``):
    ``g_u`` ``(batch, L, D)`` (the values' part, summed over heads) and ``g_proj`` ``(batch, L, H, D + 2m)`` (logits,
    keys, queries).

    Row ``t``: ``s`` runs from ``t`` down with ``Q = g_o[t] P`` (``Q *= f[s + 1]``): ``dLoss/dv_s += scores[t, s] Q``
    and ``dLoss/dscores[t, s] = sum(Q v_s)`` (:func:`_dot8`). Then, ``r`` running down,
    ``A[r] = sum_{t>=r} sum_{s<r} T[t, s] = sum_{j>=r} (g_o[j] o[j] - dLoss/dv_j v_j)`` (all of row ``t``'s terms, less
    those with ``s >= r``, whose products do not hold ``f_r``), and ``A[0] = 0``."""
    B, L, H, _ = proj.shape
    dt = u.dtype
    Q = np.empty(D, dt)
    cum = np.empty(D, dt)
    v = np.empty((L, D), dt)
    gv = np.empty((L, D), dt)  # dLoss/dv
    g_sc = np.empty((L, L), dt)
    acc = np.empty(m, dt)
    gu = np.empty((L, D), dt)
    zero = np.zeros(1, dt)[0]
    for b in range(B):
        for s in range(L):
            for c in range(D):
                gu[s, c] = 0.0
        for h in range(H):
            sig, f, sc = sig_all[b, h], f_all[b, h], sc_all[b, h]
            for s in range(L):
                for c in range(D):
                    v[s, c] = sig[s, c] * u[b, s, c]
                for c in range(D):
                    gv[s, c] = 0.0
            for t in range(t0, L):
                for c in range(D):
                    Q[c] = g_o[b, t - t0, h, c]
                for s in range(t, -1, -1):
                    if s < t:
                        for c in range(D):
                            Q[c] *= f[s + 1, c]
                    w = sc[t, s]
                    for c in range(D):
                        gv[s, c] += w * Q[c]
                    g_sc[t, s] = _dot8(Q, v[s], zero)
            for c in range(D):
                cum[c] = 0.0
            for r in range(L - 1, 0, -1):  # cum = A[r]
                if r >= t0:
                    for c in range(D):
                        cum[c] += g_o[b, r - t0, h, c] * o[b, r - t0, h, c]
                for c in range(D):
                    cum[c] -= gv[r, c] * v[r, c]
                for c in range(D):
                    g_proj[b, r, h, c] = gv[r, c] * v[r, c] * f[r, c] - sig[r, c] * cum[c]
            for c in range(D):
                g_proj[b, 0, h, c] = gv[0, c] * v[0, c] * f[0, c]
            for s in range(L):
                for c in range(D):
                    gu[s, c] += gv[s, c] * sig[s, c]
            for t in range(t0):  # queries that were not asked for
                for j in range(m):
                    g_proj[b, t, h, D + m + j] = 0.0
            for t in range(t0, L):  # queries: sum_{s<=t} g_sc[t, s] k_s
                for j in range(m):
                    acc[j] = 0.0
                for s in range(t + 1):
                    w = g_sc[t, s]
                    for j in range(m):
                        acc[j] += w * proj[b, s, h, D + j]
                for j in range(m):
                    g_proj[b, t, h, D + m + j] = acc[j]
            for s in range(L):  # keys: sum_{t>=s} g_sc[t, s] q_t
                for j in range(m):
                    acc[j] = 0.0
                for t in range(max(s, t0), L):
                    w = g_sc[t, s]
                    for j in range(m):
                        acc[j] += w * proj[b, t, h, D + m + j]
                for j in range(m):
                    g_proj[b, s, h, D + j] = acc[j]
        for s in range(L):
            for c in range(D):
                g_u[b, s, c] = gu[s, c]


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().contiguous().numpy()


def _weights(W_B, W_C, W) -> torch.Tensor:
    """``[W | W_B^T | W_C^T]`` of every head side by side, ``(D, H (D + 2m))``: the one projection matrix."""
    D = W.shape[1]
    return torch.cat([W, W_B.transpose(1, 2), W_C.transpose(1, 2)], dim=2).permute(1, 0, 2).reshape(D, -1)


class _FusedScan(torch.autograd.Function):
    """``o`` ``(batch, L, H, D)`` from ``u``, ``W_B``, ``W_C``, ``W``; see :func:`selective_scan_heads_fused`.
    The projections are PyTorch matrix products inside (their backward too: one graph node for the whole scan);
    the rest is Numba, reading, writing and computing in the tensors' own dtype (float32 or float64)."""

    @staticmethod
    def forward(ctx, u, W_B, W_C, W):
        B, L, D = u.shape
        H, m = W_B.shape[:2]
        weights = _weights(W_B, W_C, W).to(u.dtype)  # (D, H (D + 2m))
        proj = (u.reshape(B * L, D) @ weights).view(B, L, H, D + 2 * m)
        u_, p_ = _np(u), _np(proj)
        o = np.empty((B, L, H, D), dtype=u_.dtype)
        sig, f = np.empty((B, H, L, D), u_.dtype), np.empty((B, H, L, D), u_.dtype)
        sc = np.empty((B, H, L, L), u_.dtype)
        _forward(u_, p_, D, m, 0, o, sig, f, sc)
        out = torch.from_numpy(o)
        ctx.saved = (u_, p_, sig, f, sc)
        ctx.save_for_backward(u, weights, out)  # the output too: its backward reads it (an in-place change is caught)
        ctx.m, ctx.w_dtype = m, W.dtype
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, g_o):
        u_, p_, sig, f, sc = ctx.saved
        u, weights, out = ctx.saved_tensors
        B, L, H, E = p_.shape
        D, m = u_.shape[2], ctx.m
        g_u, g_proj = np.empty_like(u_), np.empty_like(p_)
        _backward(_np(g_o.to(u.dtype)), _np(out), u_, p_, D, m, 0, sig, f, sc, g_u, g_proj)
        g_proj = torch.from_numpy(g_proj).view(B * L, H * E)
        g_weights = (u.reshape(B * L, D).T @ g_proj).view(D, H, E).permute(1, 0, 2)  # (H, D, D + 2m)
        g_u = torch.from_numpy(g_u) + (g_proj @ weights.T).view(B, L, D)
        g_W, g_W_B, g_W_C = (g.contiguous().to(ctx.w_dtype) for g in (
            g_weights[..., :D], g_weights[..., D:D + m].transpose(1, 2), g_weights[..., D + m:].transpose(1, 2)))
        return g_u, g_W_B, g_W_C, g_W


def selective_scan_heads_fused(u, W_B, W_C, W) -> torch.Tensor:
    """Eq. (1) for every head (``A = -I``), compiled, on the CPU; same signature and output as
    :func:`mambaicl.models.scan.selective_scan_heads`: ``(batch, H, L, D)`` (a view of a ``(batch, L, H, D)`` tensor,
    the layout :meth:`mambaicl.models.deep._HeadsMixer.combine` reads).

    Args:
        u: ``(batch, L, D)``.  W_B, W_C: ``(H, m, D)``.  W: ``(H, D, D)``.
    """
    return _FusedScan.apply(u, W_B, W_C, W).permute(0, 2, 1, 3)  # (batch, H, L, D)


def _weights_stacked(W_B, W_C, W) -> torch.Tensor:
    """:func:`_weights` of every member, ``(S, D, H (D + 2m))``."""
    S, H, D = W.shape[:3]
    return torch.cat([W, W_B.transpose(2, 3), W_C.transpose(2, 3)], dim=3).permute(0, 2, 1, 3).reshape(S, D, -1)


class _FusedScanStacked(torch.autograd.Function):
    """:class:`_FusedScan` with a member axis first: ``u`` ``(S, batch, L, D)``, ``W_B``, ``W_C`` ``(S, H, m, D)``, ``W``
    ``(S, H, D, D)`` -> ``o`` ``(S, batch, L, H, D)``. The projections are one batched matrix product (member ``k``'s
    rows by member ``k``'s matrix); the compiled loops run the ``S batch`` rows in one call. ``last_only``: the output
    of the last token only, ``(S, batch, 1, H, D)``."""

    @staticmethod
    def forward(ctx, u, W_B, W_C, W, last_only):
        S, B, L, D = u.shape
        H, m = W_B.shape[1:3]
        t0 = L - 1 if last_only else 0
        weights = _weights_stacked(W_B, W_C, W).to(u.dtype)  # (S, D, H (D + 2m))
        proj = torch.bmm(u.reshape(S, B * L, D), weights).view(S * B, L, H, D + 2 * m)
        u_, p_ = _np(u.reshape(S * B, L, D)), _np(proj)
        o = np.empty((S * B, L - t0, H, D), dtype=u_.dtype)
        sig, f = np.empty((S * B, H, L, D), u_.dtype), np.empty((S * B, H, L, D), u_.dtype)
        sc = np.empty((S * B, H, L, L), u_.dtype)
        _forward(u_, p_, D, m, t0, o, sig, f, sc)
        out = torch.from_numpy(o)
        ctx.saved = (u_, p_, sig, f, sc)
        ctx.save_for_backward(u, weights, out)  # the output too: its backward reads it (an in-place change is caught)
        ctx.m, ctx.t0, ctx.w_dtype = m, t0, W.dtype
        return out.view(S, B, L - t0, H, D)

    @staticmethod
    @once_differentiable
    def backward(ctx, g_o):
        u_, p_, sig, f, sc = ctx.saved
        u, weights, out = ctx.saved_tensors
        S, B, L, D = u.shape
        H, E = p_.shape[2:]
        m, t0 = ctx.m, ctx.t0
        g_u, g_proj = np.empty_like(u_), np.empty_like(p_)
        _backward(_np(g_o.to(u.dtype).reshape(S * B, L - t0, H, D)), _np(out), u_, p_, D, m, t0, sig, f, sc, g_u, g_proj)
        g_proj = torch.from_numpy(g_proj).view(S, B * L, H * E)
        g_weights = torch.bmm(u.reshape(S, B * L, D).transpose(1, 2), g_proj).view(S, D, H, E).permute(0, 2, 1, 3)
        g_u = torch.from_numpy(g_u).view(S, B * L, D).baddbmm_(g_proj, weights.transpose(1, 2)).view(S, B, L, D)
        g_W, g_W_B, g_W_C = (g.contiguous().to(ctx.w_dtype) for g in (
            g_weights[..., :D], g_weights[..., D:D + m].transpose(2, 3), g_weights[..., D + m:].transpose(2, 3)))
        return g_u, g_W_B, g_W_C, g_W, None


def selective_scan_heads_fused_stacked(u, W_B, W_C, W, last_only: bool = False) -> torch.Tensor:
    """:func:`selective_scan_heads_fused` of ``S`` members at once (member axis first), compiled, on the CPU.

    Args:
        u: ``(S, batch, L, D)``.  W_B, W_C: ``(S, H, m, D)``.  W: ``(S, H, D, D)``.
        last_only: compute the output of the last token only (what a stack's last layer feeds the readout): its
            row is the same as with ``False``, and the other rows' work (forward and backward) is not done.

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
