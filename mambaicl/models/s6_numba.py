"""The S6 selective scan of Mamba-1 (Gu & Dao 2023, Alg. 2) as one compiled forward and one written-out backward (CPU).

Glossary (code name -> symbol of Gu & Dao (2023), Alg. 2; as in :mod:`mambaicl.models.mamba1`):

=============  ==========================================================================
``x``          the SSM input ``x_t``, ``(batch, L, E)``
``delta``      the step ``Delta_t`` per channel, ``(batch, L, E)``
``AT``         ``A^T``: one diagonal per channel, stored ``(N, E)`` (channels contiguous); ``A`` is ``(E, N)``
``B``, ``C``   input-dependent ``B_t``, ``C_t``, ``(batch, L, N)``
``u``          ``Delta_t x_t``, ``(E,)`` for one row and time step
``a``          ``a_t = exp(Delta_t A)`` (zero-order hold), ``(N, E)`` per row and time step
``h``          the state ``h_t``, ``(N, E)`` per row
``G``          ``dLoss/dh_t`` summed over all later outputs, ``(N, E)``
=============  ==========================================================================

The recurrence ``h_t = a_t h_{t-1} + (Delta_t x_t) B_t`` (``h_{-1} = 0``) and ``y_t = C_t^T h_t`` (the skip term
``D x_t`` is added by the caller, :func:`mambaicl.models.mamba1.selective_scan_s6`). :func:`s6_scan_compiled` has the
signature ``(x, delta, A, B, C) -> y`` of :class:`mambaicl.models.mamba1._S6Scan` (its plain twin, which a GPU runs and
:func:`mambaicl.device.plain_kernels` forces) and differentiates the same formulas:

* ``G_t = C_t gy_t + a_{t+1} G_{t+1}`` (the reverse recurrence; ``gy = dLoss/dy``);
* ``dLoss/dC_t = sum_e gy_{t,e} h_t[:, e]``, ``dLoss/dB_t = sum_e u_{t,e} G_t[:, e]``,
  ``dLoss/du_t = sum_n B_{t,n} G_t[n]``;
* ``q_t = G_t a_t h_{t-1}`` (``dLoss/d(Delta_t A)``, zero at ``t = 0``): ``dLoss/dDelta_t = sum_n A_n q_t[n] +
  x_t dLoss/du_t``, ``dLoss/dx_t = Delta_t dLoss/du_t`` and ``dLoss/dA = sum_{b, t} Delta_t q_t``.

Two Numba loops (``@njit``, one thread) over the batch rows, each row's time steps in order (the forward) or reversed
(the backward), every elementwise loop over the ``E`` contiguous channels (so that it vectorises without
reassociation); the state of one row, ``(N, E)``, is the forward's only buffer. When a gradient is wanted the forward
also keeps every ``a_t`` (``batch L N E`` numbers, up to :data:`SAVE_DECAYS_MAX`), so that the backward recomputes only
the states ``h_t`` of one row (one multiply-add each) instead of their exponentials; above that size it recomputes
both. ``exp`` is :func:`_exp`, written out so that these loops vectorise (the C library's ``exp`` would be called once
per element, about three times slower), within 1 ulp like the plain twin's PyTorch ``exp2``. The arithmetic is in
the inputs' dtype (float32 or float64). Every sum has one fixed order: over ``n`` ascending (``y``, ``dLoss/du``,
``dLoss/dDelta``), over ``t`` descending then the rows ascending (``dLoss/dA``: one partial per row, then the rows in
order); the two sums over channels, ``dLoss/dB`` and ``dLoss/dC``, are the one loop compiled with reassociation
(:func:`_dot`, ``fastmath`` ``reassoc`` as in :mod:`mambaicl.models.scan_kernel`: an order fixed by the build for this
CPU). So the same inputs give the same bytes on one machine, run after run; the plain twin agrees to rounding
(``tests/test_s6_numba.py``: 1e-12 relative in float64, values, 1e-10 gradients, and a short training run).

The scan's mixing matrix ``K[t, s, c] = sum_n C_{t,n} B_{s,n} Delta_{s,c} exp(A_{c,n} sum_{r=s+1}^t Delta_{r,c})``
(``s <= t``, 0 above), which the probes materialise, is :func:`s6_kernel_compiled` (forward only: no gradient), the
plain twin :func:`mambaicl.models.mamba1.s6_kernel`. It forms the decay sum as that twin does, ``Lam_t - Lam_s`` of
the running sums ``Lam_s = sum_{r<=s} Delta_r`` (each rounded to the dtype from a float64 running sum, as PyTorch's
``cumsum`` on a CPU accumulates), clamped at 0, so that the exponents are the twin's to the bit; one :func:`_exp`
per ``(t, s <= t, n, c)``, the sum over ``n`` ascending, then times ``Delta_{s,c}``.
"""
from __future__ import annotations

import numpy as np
import torch
from numba import njit, types
from numba.extending import overload
from torch.autograd.function import once_differentiable

__all__ = ["s6_scan_compiled", "s6_kernel_compiled", "COMPILED_DTYPES"]

#: the dtypes the compiled scan runs in (any other takes the plain twin)
COMPILED_DTYPES = (torch.float32, torch.float64)


_SHIFT64 = 6755399441055744.0  # 1.5 * 2^52: x + _SHIFT64 - _SHIFT64 rounds x to an integer (|x| < 2^51)
_SHIFT32 = np.float32(12582912.0)  # 1.5 * 2^23, the same for float32


def _exp(x):
    """``exp(x)`` of a float32 or float64 scalar, written so that a loop of it vectorises (see :func:`_exp_impl`)."""
    raise NotImplementedError  # compiled only (its implementation is chosen by :func:`_exp_impl`)


@overload(_exp, inline="always")
def _exp_impl(x):
    """``exp(x)`` in ``x``'s dtype from arithmetic alone (no call into the C library, which a loop cannot vectorise
    without Intel's SVML): ``x = k ln 2 + r`` with ``k = round(x / ln 2)`` (``x + 1.5 2^p - 1.5 2^p``, which also
    leaves ``k`` in the low bits, read by a bit view), ``r`` by Cody and Waite's two-part ``ln 2`` (its high part has
    trailing zeros, so ``k ln2_hi`` is exact), ``exp(r)``, ``|r| <= ln 2 / 2``, by its Taylor polynomial in Horner's
    form (degree 13 in float64, 7 in float32: the truncation is below a tenth of an ulp), then times ``2^k`` as two
    factors ``2^(k >> 1) 2^(k - (k >> 1))`` (built from their exponent bits; two, so that subnormal results and
    ``k = 1024`` come out right). ``x`` is first clamped to where ``exp`` is neither 0 nor inf in that dtype (beyond,
    the result rounds to 0 or overflows to inf as it should); a NaN stays NaN. Within 1 ulp of the correctly rounded
    value (measured on millions of points in ``[-800, 800]``, as the C library's); not bitwise the C library's."""
    if isinstance(x, types.Float) and x.bitwidth == 32:
        def impl32(x):
            f = np.float32
            xc = x
            if xc < f(-104.0):
                xc = f(-104.0)
            if xc > f(89.0):
                xc = f(89.0)
            z = xc * f(1.44269504088896341) + _SHIFT32
            kf = z - _SHIFT32
            k = np.float32(z).view(np.int32) - np.float32(_SHIFT32).view(np.int32)
            r = (xc - kf * f(0.693359375)) - kf * f(-2.12194440e-4)
            p = f(1.0 / 5040.0)
            p = p * r + f(1.0 / 720.0)
            p = p * r + f(1.0 / 120.0)
            p = p * r + f(1.0 / 24.0)
            p = p * r + f(1.0 / 6.0)
            p = p * r + f(0.5)
            p = p * r + f(1.0)
            p = p * r + f(1.0)
            k1 = k >> 1
            s1 = np.int32((k1 + np.int32(127)) << np.int32(23)).view(np.float32)
            s2 = np.int32((k - k1 + np.int32(127)) << np.int32(23)).view(np.float32)
            return p * s1 * s2
        return impl32

    def impl64(x):
        xc = x
        if xc < -746.0:
            xc = -746.0
        if xc > 710.0:
            xc = 710.0
        z = xc * 1.4426950408889634 + _SHIFT64
        kf = z - _SHIFT64
        k = np.float64(z).view(np.int64) - np.float64(_SHIFT64).view(np.int64)
        r = (xc - kf * 6.93147180369123816490e-01) - kf * 1.90821492927058770002e-10
        p = 1.0 / 6227020800.0
        p = p * r + 1.0 / 479001600.0
        p = p * r + 1.0 / 39916800.0
        p = p * r + 1.0 / 3628800.0
        p = p * r + 1.0 / 362880.0
        p = p * r + 1.0 / 40320.0
        p = p * r + 1.0 / 5040.0
        p = p * r + 1.0 / 720.0
        p = p * r + 1.0 / 120.0
        p = p * r + 1.0 / 24.0
        p = p * r + 1.0 / 6.0
        p = p * r + 0.5
        p = p * r + 1.0
        p = p * r + 1.0
        k1 = k >> 1
        s1 = np.int64((k1 + 1023) << 52).view(np.float64)
        s2 = np.int64((k - k1 + 1023) << 52).view(np.float64)
        return p * s1 * s2
    return impl64


@njit(cache=True, fastmath={"reassoc", "nsz"}, error_model="numpy")
def _dot(x, y, zero):
    """``sum_e x[e] y[e]`` of two contiguous rows, accumulated in ``zero``'s dtype. The one loop of this module
    compiled with reassociation (``fastmath`` ``reassoc``, as :func:`mambaicl.models.scan_kernel._dot`): the compiler
    sums in vector lanes, an order fixed by the build of this function for this CPU and the row length (the same
    bits run after run on one machine; another CPU's vector width may round the last bit differently). A sum in
    one written order is a chain of dependent additions, several times slower here (these sums, ``dLoss/dB`` and
    ``dLoss/dC``, are the only reductions over channels). The products are rounded as written."""
    a = zero
    for c in range(x.shape[0]):
        a += x[c] * y[c]
    return a


@njit(cache=True, error_model="numpy")
def _forward(x, delta, AT, B, C, y, a_all):
    """Fill ``y`` ``(batch, L, E)`` with ``y_t = C_t^T h_t``, ``h_t = exp(Delta_t A) h_{t-1} + (Delta_t x_t) B_t``
    (Gu & Dao 2023, Alg. 2), from ``x``, ``delta`` ``(batch, L, E)``, ``AT`` ``(N, E)``, ``B``, ``C`` ``(batch, L, N)``.
    The state ``h`` ``(N, E)`` of one row at a time; ``y_t`` summed over ``n`` ascending. ``a_all``: ``(batch, L, N,
    E)`` to keep every ``a_t = exp(Delta_t A)`` for the backward (``a_all[:, 0]`` is not written), or ``(0, 0, 0, 0)``
    to keep none."""
    batch, L, E = x.shape
    N = AT.shape[0]
    dt = x.dtype
    save = a_all.shape[0] > 0
    h = np.empty((N, E), dt)  # (N, E): h_t of the current row
    scratch = np.empty((N, E), dt)  # a_t when it is not kept
    u = np.empty(E, dt)  # Delta_t x_t
    acc = np.empty(E, dt)  # y_t
    for b in range(batch):
        for t in range(L):
            d = delta[b, t]  # (E,)
            for e in range(E):
                u[e] = d[e] * x[b, t, e]
                acc[e] = 0.0
            at = a_all[b, t] if save and t > 0 else scratch  # (N, E)
            for n in range(N):
                Bn, Cn = B[b, t, n], C[b, t, n]
                if t == 0:  # h_0 = (Delta_0 x_0) B_0
                    for e in range(E):
                        hv = Bn * u[e]
                        h[n, e] = hv
                        acc[e] += Cn * hv
                else:
                    for e in range(E):
                        av = _exp(d[e] * AT[n, e])
                        at[n, e] = av
                        hv = Bn * u[e] + av * h[n, e]
                        h[n, e] = hv
                        acc[e] += Cn * hv
            for e in range(E):
                y[b, t, e] = acc[e]


@njit(cache=True, error_model="numpy")
def _backward(gy, x, delta, AT, B, C, a_all, need_A, need_B, need_C, g_x, g_delta, g_AT, g_B, g_C):
    """From ``gy = dLoss/dy`` ``(batch, L, E)`` and the forward's inputs: ``g_x``, ``g_delta`` ``(batch, L, E)``,
    ``g_AT = dLoss/dA^T`` ``(N, E)``, ``g_B``, ``g_C`` ``(batch, L, N)`` (those not needed are left unwritten).

    Per row: ``a_t`` (the forward's ``a_all``, or recomputed as the forward computes it if ``a_all`` is empty) and
    ``h_t`` recomputed for every ``t``, then ``t`` from ``L - 1`` down with ``G_t = C_t gy_t + a_{t+1} G_{t+1}``;
    ``dLoss/dA^T`` summed over ``t`` (descending) into the row's partial, the rows' partials added in order."""
    batch, L, E = x.shape
    N = AT.shape[0]
    dt = x.dtype
    zero = np.zeros(1, dt)[0]
    saved = a_all.shape[0] > 0
    abuf = np.empty((L, N, E), dt)  # a_t = exp(Delta_t A) of one row when not saved (a[0] unused)
    h = np.empty((L, N, E), dt)  # h_t of one row
    G = np.empty((N, E), dt)  # G_t
    u = np.empty((L, E), dt)  # Delta_t x_t
    gu = np.empty(E, dt)  # dLoss/du_t
    gdd = np.empty(E, dt)  # dLoss/dDelta_t through a_t
    part = np.empty((N, E), dt)  # this row's dLoss/dA^T
    for n in range(N):
        for e in range(E):
            g_AT[n, e] = 0.0
    for b in range(batch):
        a = a_all[b] if saved else abuf  # (L, N, E)
        # the forward again: u_t, (a_t) and h_t of every t
        for t in range(L):
            d = delta[b, t]  # (E,)
            for e in range(E):
                u[t, e] = d[e] * x[b, t, e]
            for n in range(N):
                Bn = B[b, t, n]
                if t == 0:
                    for e in range(E):
                        h[0, n, e] = Bn * u[0, e]
                elif saved:
                    for e in range(E):
                        h[t, n, e] = Bn * u[t, e] + a[t, n, e] * h[t - 1, n, e]
                else:
                    for e in range(E):
                        av = _exp(d[e] * AT[n, e])
                        a[t, n, e] = av
                        h[t, n, e] = Bn * u[t, e] + av * h[t - 1, n, e]
        if need_A:
            for n in range(N):
                for e in range(E):
                    part[n, e] = 0.0
        for t in range(L - 1, -1, -1):
            g = gy[b, t]  # (E,)
            d = delta[b, t]  # (E,)
            for e in range(E):
                gu[e] = 0.0
                gdd[e] = 0.0
            for n in range(N):
                Cn, Bn = C[b, t, n], B[b, t, n]
                if t == L - 1:  # G_t = C_t gy_t + a_{t+1} G_{t+1}
                    for e in range(E):
                        G[n, e] = Cn * g[e]
                else:
                    for e in range(E):
                        G[n, e] = Cn * g[e] + a[t + 1, n, e] * G[n, e]
                for e in range(E):
                    gu[e] += Bn * G[n, e]
                if need_C:
                    g_C[b, t, n] = _dot(g, h[t, n], zero)  # sum_e gy_t h_t
                if need_B:
                    g_B[b, t, n] = _dot(u[t], G[n], zero)  # sum_e (Delta_t x_t) G_t
                if t > 0:  # q_t = G_t a_t h_{t-1}: dLoss/d(Delta_t A)
                    if need_A:
                        for e in range(E):
                            q = G[n, e] * h[t - 1, n, e] * a[t, n, e]
                            gdd[e] += AT[n, e] * q
                            part[n, e] += d[e] * q
                    else:
                        for e in range(E):
                            gdd[e] += AT[n, e] * (G[n, e] * h[t - 1, n, e] * a[t, n, e])
            for e in range(E):
                g_x[b, t, e] = gu[e] * d[e]
                g_delta[b, t, e] = gdd[e] + gu[e] * x[b, t, e]
        if need_A:
            for n in range(N):
                for e in range(E):
                    g_AT[n, e] += part[n, e]


#: the largest ``batch L N E`` for which the forward keeps every ``a_t = exp(Delta_t A)`` for the backward (when a
#: gradient is wanted); above it the backward recomputes them (two exponentials per state instead of one)
SAVE_DECAYS_MAX = 1 << 24


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().contiguous().numpy()


class _S6ScanCompiled(torch.autograd.Function):
    """``y = scan(x, delta, A, B, C)`` (no ``D``) by :func:`_forward`, its backward by :func:`_backward`; see
    :func:`s6_scan_compiled`. Saved: the inputs and, when a gradient is wanted and ``batch L N E`` is at most
    :data:`SAVE_DECAYS_MAX`, the decays ``a_t`` (the backward then recomputes only the states ``h_t``, one multiply-add
    each; otherwise it recomputes both)."""

    @staticmethod
    def forward(ctx, x, delta, A, B, C, keep):
        x_, d_, B_, C_ = _np(x), _np(delta), _np(B), _np(C)
        AT = _np(A.T)  # (N, E)
        batch, L, E = x_.shape
        N = AT.shape[0]
        a_all = np.empty((batch, L, N, E) if keep else (0, 0, 0, 0), x_.dtype)
        y = np.empty_like(x_)  # (batch, L, E)
        _forward(x_, d_, AT, B_, C_, y, a_all)
        ctx.save_for_backward(x, delta, A, B, C)
        ctx.a_all = a_all
        return torch.from_numpy(y)

    @staticmethod
    @once_differentiable
    def backward(ctx, gy, *_):  # gy: (batch, L, E)
        need_x, need_delta, need_A, need_B, need_C = ctx.needs_input_grad[:5]
        x, delta, A, B, C = ctx.saved_tensors
        a_all = ctx.a_all  # kept (not dropped) so that a retained graph can run its backward again
        x_, d_, B_, C_ = _np(x), _np(delta), _np(B), _np(C)
        AT = _np(A.T)  # (N, E)
        g_x, g_delta = np.empty_like(x_), np.empty_like(x_)
        g_AT, g_B, g_C = np.empty_like(AT), np.empty_like(B_), np.empty_like(C_)
        _backward(_np(gy.to(x.dtype)), x_, d_, AT, B_, C_, a_all, need_A, need_B, need_C, g_x, g_delta, g_AT, g_B,
                  g_C)
        return (torch.from_numpy(g_x) if need_x else None, torch.from_numpy(g_delta) if need_delta else None,
                torch.from_numpy(g_AT).T if need_A else None, torch.from_numpy(g_B) if need_B else None,
                torch.from_numpy(g_C) if need_C else None, None)


def s6_scan_compiled(x, delta, A, B, C) -> torch.Tensor:
    """The S6 scan without ``D`` (Gu & Dao 2023, Alg. 2), compiled, on the CPU: ``y_t = C_t^T h_t``,
    ``h_t = exp(Delta_t A) h_{t-1} + Delta_t B_t x_t``; the plain twin is :class:`mambaicl.models.mamba1._S6Scan`.

    Args:
        x, delta: ``(batch, L, E)``.  A: ``(E, N)``.  B, C: ``(batch, L, N)``; all CPU tensors of one dtype
            (:data:`COMPILED_DTYPES`).

    Returns:
        ``y`` ``(batch, L, E)``.
    """
    keep = (torch.is_grad_enabled() and any(t.requires_grad for t in (x, delta, A, B, C))
            and x.shape[0] * x.shape[1] * x.shape[2] * A.shape[1] <= SAVE_DECAYS_MAX)
    return _S6ScanCompiled.apply(x, delta, A, B, C, keep)


@njit(cache=True, error_model="numpy")
def _kernel(delta, AT, B, C, K):
    """Fill ``K`` ``(batch, L, L, E)`` with ``K[t, s, c] = Delta_{s,c} sum_n C_{t,n} B_{s,n} exp(A_{c,n}
    (Lam_{t,c} - Lam_{s,c}))`` for ``s <= t`` and 0 for ``s > t`` (the unrolled recurrence of Gu & Dao 2023, Alg. 2),
    from ``delta`` ``(batch, L, E)``, ``AT`` ``(N, E)``, ``B``, ``C`` ``(batch, L, N)``.

    ``Lam_s = sum_{r<=s} Delta_r`` is a float64 running sum (``r`` ascending) rounded to the dtype at each ``s`` (as
    PyTorch's CPU ``cumsum``, the plain twin's :func:`mambaicl.models.kernels.running_sum`); the decay
    ``Lam_t - Lam_s`` is clamped at 0 (which only removes rounding below 0; a NaN stays NaN), the exponent is
    ``A_{c,n}`` times it, both as the twin rounds them. The sum over ``n`` ascending, each term ``(C_{t,n} B_{s,n})
    exp(...)``; the sum then times ``Delta_{s,c}``."""
    batch, L, E = delta.shape
    N = AT.shape[0]
    dt = delta.dtype
    Lam = np.empty((L, E), dt)  # (L, E): Lam_s of the current row
    run = np.empty(E, np.float64)  # the running sum in float64
    dec = np.empty(E, dt)  # Lam_t - Lam_s, clamped at 0
    acc = np.empty(E, dt)  # sum_n C_{t,n} B_{s,n} exp(A_n dec)
    for b in range(batch):
        for e in range(E):
            run[e] = 0.0
        for s in range(L):
            for e in range(E):
                run[e] += delta[b, s, e]
                Lam[s, e] = run[e]
        for t in range(L):
            for s in range(L):
                Kts = K[b, t, s]  # (E,)
                if s > t:
                    for e in range(E):
                        Kts[e] = 0.0
                    continue
                for e in range(E):
                    dv = Lam[t, e] - Lam[s, e]
                    if dv < 0.0:
                        dv = 0.0
                    dec[e] = dv
                    acc[e] = 0.0
                for n in range(N):
                    w = C[b, t, n] * B[b, s, n]
                    for e in range(E):
                        acc[e] += w * _exp(AT[n, e] * dec[e])
                d = delta[b, s]  # (E,)
                for e in range(E):
                    Kts[e] = acc[e] * d[e]


def s6_kernel_compiled(delta, A, B, C) -> torch.Tensor:
    """The S6 mixing matrix (Gu & Dao 2023, Alg. 2 unrolled), compiled, on the CPU, forward only (no gradient):
    ``K[t, s, c] = sum_n C_{t,n} B_{s,n} Delta_{s,c} exp(A_{c,n} sum_{r=s+1}^t Delta_{r,c})`` for ``s <= t``, 0 above
    (exact zeros); the plain twin is :func:`mambaicl.models.mamba1.s6_kernel`.

    Args:
        delta: ``(batch, L, E)``.  A: ``(E, N)``.  B, C: ``(batch, L, N)``; all CPU tensors of one dtype
            (:data:`COMPILED_DTYPES`).

    Returns:
        ``K`` ``(batch, L, L, E)``, not attached to any graph. Above the diagonal exact zeros even where an input is
        NaN (the plain twin's mask there multiplies by 0, which leaves a NaN); on and below it a NaN spreads as in the
        plain twin.
    """
    d_ = _np(delta)
    AT = _np(A.T)  # (N, E)
    batch, L, E = d_.shape
    K = np.empty((batch, L, L, E), d_.dtype)
    _kernel(d_, AT, _np(B), _np(C), K)
    return torch.from_numpy(K)
