"""A standard Mamba-1 block (Gu & Dao 2023): selective scan S6, short causal conv, SiLU gate.

Glossary (code name -> symbol of Gu & Dao (2023), Alg. 2; the paper's Eq. (1) in brackets):

=============  ==========================================================================
``x``          the SSM input after in-projection, conv and SiLU, ``(batch, L, E)``, E = expand * d_model
``z``          the output-gate branch of the in-projection, ``(batch, L, E)``
``delta``      ``Delta_t = softplus(dt_proj(x_proj(x)) + bias)`` per channel ``(batch, L, E)``  [Delta_{j,i}]
``A``          ``A = -exp(A_log)``, one diagonal per channel, ``(E, N)``                    [A = -I]
``B``, ``C``   input-dependent ``B_t``, ``C_t``, ``(batch, L, N)``                            [W_B u_i, W_C u_i]
``D``          skip connection, ``(E,)``
``h``          state ``h_t``, ``(batch, E, N)``
``K``          the scan's mixing matrix, ``y_t = sum_{s<=t} K[t, s] * x_s + D x_t``, ``(batch, L, L, E)``
=============  ==========================================================================

The recurrence (zero-order hold for A, Euler for B, as in the reference implementation):
``h_t = exp(Delta_t A) h_{t-1} + Delta_t B_t x_t`` and ``y_t = C_t^T h_t + D x_t``. Unrolled,
``K[t, s, c] = sum_n C_{t,n} B_{s,n} * Delta_{s,c} exp(A_{c,n} sum_{r=s+1}^{t} Delta_{r,c})``:
the selection scores ``C_t^T B_s`` are the paper's ``p_s^T W_B^T W_C p_t`` and the second factor
plays the role of its gate ``G`` (with one decay rate per state instead of ``A = -I``).

Three forms with one signature, ``(x, delta, A, B, C, D) -> y``:
:func:`selective_scan_s6_seq` (the plain loop, reference), :func:`selective_scan_s6`
(fast: the same loop without autograd bookkeeping, a hand-written reverse scan for the
backward pass; compiled on a CPU, :mod:`mambaicl.models.s6_numba`, its plain twin :class:`_S6Scan`
elsewhere) and :func:`selective_scan_s6_kernel` (the attention-like form that
materialises ``K``; used by the probes).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F_
from torch import nn
from torch.autograd.function import once_differentiable

from ..config import ConfigError, check_choice, check_int, check_real
from ..device import use_compiled
from .kernels import causal_mask, running_sum
from .s6_numba import COMPILED_DTYPES, s6_kernel_compiled, s6_scan_compiled
from .shapes import check_shapes

__all__ = [
    "selective_scan_s6_seq",
    "selective_scan_s6",
    "selective_scan_s6_kernel",
    "s6_kernel",
    "s6_gate",
    "causal_conv",
    "Mamba1Block",
    "MAMBA1_SCANS",
]

#: the forms of the S6 scan a :class:`Mamba1Block` can run
MAMBA1_SCANS = ("fast", "sequential", "kernel")


def _check_s6(x, delta, A, B, C, D) -> None:
    check_shapes(x=(x, "batch L E"), delta=(delta, "batch L E"), A=(A, "E N"), B=(B, "batch L N"),
                 C=(C, "batch L N"), D=(D, "E"))


def selective_scan_s6_seq(x, delta, A, B, C, D) -> torch.Tensor:
    """S6 selective scan (Gu & Dao 2023, Alg. 2) as a plain loop over time; the reference.

    Args:
        x, delta: ``(batch, L, E)``; ``delta > 0``.
        A: ``(E, N)``, negative entries.  B, C: ``(batch, L, N)``.  D: ``(E,)``.

    Returns:
        ``y`` of shape ``(batch, L, E)``.
    """
    _check_s6(x, delta, A, B, C, D)
    batch, L, E = x.shape
    h = x.new_zeros(batch, E, A.shape[1])  # (batch, E, N)
    ys = []
    for t in range(L):
        A_bar = torch.exp(delta[:, t].unsqueeze(-1) * A)  # (batch, E, N)
        Bx = (delta[:, t] * x[:, t]).unsqueeze(-1) * B[:, t].unsqueeze(1)  # (batch, E, N)
        h = A_bar * h + Bx  # (batch, E, N)
        ys.append(torch.einsum("ben,bn->be", h, C[:, t]) + D * x[:, t])  # (batch, E)
    return torch.stack(ys, dim=1)  # (batch, L, E)


#: target size (elements) of one block's ``(rows, L, N, E)`` state tensor in the fast scan: the
#: few such tensors of a block (4 bytes per element) stay in the CPU cache while it is processed
BLOCK_ELEMENTS = 1 << 18

_LOG2E = 1.0 / math.log(2.0)


def _blocking(batch: int, L: int, N: int, E: int) -> tuple[int, int]:
    """``(n_blocks, rows)``: batch rows per block so that ``rows * L * N * E`` is about :data:`BLOCK_ELEMENTS`."""
    target = max(1, min(batch, BLOCK_ELEMENTS // max(1, L * N * E)))
    n_blocks = -(-batch // target)
    return n_blocks, -(-batch // n_blocks)


def _block_states(d, u, A2, Bt, a, h) -> None:
    """Fill ``a[:, t] = exp(Delta_t A)`` and the states ``h[:, t]`` of one block, ``(rows, L, N, E)``, in place.

    ``d``, ``u`` = ``Delta x``: ``(rows, L, E)``; ``A2`` = ``A^T log2(e)``: ``(N, E)``; ``Bt``: ``(rows, L, N)``.
    """
    torch.mul(d.unsqueeze(2), A2, out=a)
    a.exp2_()  # exp(Delta_t A) = 2^(Delta_t A log2 e); exp2 is the faster kernel on CPUs
    torch.mul(Bt.unsqueeze(-1), u.unsqueeze(2), out=h)  # b_t = Delta_t B_t x_t
    a_, h_ = a.unbind(1), h.unbind(1)  # one call for all time slices (cheaper than indexing each)
    for t in range(1, len(h_)):
        h_[t].addcmul_(a_[t], h_[t - 1])  # h_t = a_t h_{t-1} + b_t


class _S6Scan(torch.autograd.Function):
    """The S6 scan without ``D``: ``y = scan(x, delta, A, B, C)`` with a hand-written backward.

    The state is laid out ``(batch, L, N, E)`` (channels contiguous) and processed in blocks of
    batch rows (:func:`_blocking`), so that the few state-sized tensors of one block stay in the
    CPU cache: every pass over them (exp, the recurrence, the contractions with ``C``, ``B``,
    ``x``) then runs from cache instead of main memory, which is what limits these thin,
    elementwise-heavy shapes. Only the ``(batch, L, *)`` inputs are saved; the backward pass
    recomputes ``a_t = exp(Delta_t A)`` and the states of each block (cheaper than writing them
    to and reading them back from memory) and differentiates ``h_t = a_t h_{t-1} + b_t``,
    ``b_t = (Delta_t x_t) B_t``, ``y_t = C_t^T h_t`` directly.
    """

    @staticmethod
    def forward(ctx, x, delta, A, B, C):
        ref = x
        for name, t in (("delta", delta), ("A", A), ("B", B), ("C", C)):
            if t.dtype != ref.dtype or t.device != ref.device:
                raise ConfigError(f"selective_scan_s6: {name} is {t.dtype} on {t.device} but x is {ref.dtype} on "
                                  f"{ref.device}; every input must share x's dtype and device")
        if not ref.is_floating_point():
            raise ConfigError(f"selective_scan_s6: x must be a floating-point tensor; got {ref.dtype}")
        x, delta, B, C = x.contiguous(), delta.contiguous(), B.contiguous(), C.contiguous()
        batch, L, E = x.shape
        N = A.shape[1]
        nb, rows = _blocking(batch, L, N, E)
        u = delta * x  # (batch, L, E): Delta_t x_t
        A2 = (A.T * _LOG2E).contiguous()  # (N, E)
        buf = x.new_empty(2, rows * L * N * E)  # a and h of one block
        y = x.new_empty(batch, L, E)
        for r0 in range(0, batch, rows):
            r1 = min(batch, r0 + rows)
            M = (r1 - r0) * L
            a, h = buf[:, : M * N * E].view(2, r1 - r0, L, N, E).unbind(0)
            _block_states(delta[r0:r1], u[r0:r1], A2, B[r0:r1], a, h)
            torch.bmm(C[r0:r1].view(M, 1, N), h.view(M, N, E), out=y[r0:r1].view(M, 1, E))  # C_t^T h_t
        ctx.save_for_backward(x, delta, u, A, B, C)
        return y  # (batch, L, E)

    @staticmethod
    @once_differentiable
    def backward(ctx, gy):  # gy: (batch, L, E)
        need_x, need_delta, need_A, need_B, need_C = ctx.needs_input_grad
        x, delta, u, A, B, C = ctx.saved_tensors
        gy = gy.contiguous()
        batch, L, E = x.shape
        N = A.shape[1]
        nb, rows = _blocking(batch, L, N, E)
        A2 = (A.T * _LOG2E).contiguous()  # (N, E)
        AT = A.T.contiguous()  # (N, E)
        buf = x.new_empty(4, rows * L * N * E)  # a, h, G and a work tensor of one block
        g_u = torch.empty_like(x)  # dloss/d(Delta x)
        g_dd = torch.empty_like(x)  # dloss/dDelta through the decay a_t
        g_B, g_C = torch.empty_like(B), torch.empty_like(C)
        g_A = A.new_empty(nb, N * E)  # dloss/dA^T of each block
        for k, r0 in enumerate(range(0, batch, rows)):
            r1 = min(batch, r0 + rows)
            M = (r1 - r0) * L
            a, h, G, w = buf[:, : M * N * E].view(4, r1 - r0, L, N, E).unbind(0)
            _block_states(delta[r0:r1], u[r0:r1], A2, B[r0:r1], a, h)
            # G_t = dloss/dh_t summed over all later outputs: G_t = C_t gy_t + a_{t+1} G_{t+1}
            torch.mul(C[r0:r1].unsqueeze(-1), gy[r0:r1].unsqueeze(2), out=G)
            as_, Gs = a.unbind(1), G.unbind(1)
            for t in range(L - 2, -1, -1):
                Gs[t].addcmul_(as_[t + 1], Gs[t + 1])
            # contractions as batched (row vector) x (matrix) products, one per (b, t)
            hT, GT = h.view(M, N, E).transpose(1, 2), G.view(M, N, E).transpose(1, 2)  # (M, E, N)
            if need_C:
                torch.bmm(gy[r0:r1].view(M, 1, E), hT, out=g_C[r0:r1].view(M, 1, N))  # sum_e gy h
            if need_B:
                torch.bmm(u[r0:r1].view(M, 1, E), GT, out=g_B[r0:r1].view(M, 1, N))  # sum_e G Delta x
            torch.bmm(B[r0:r1].view(M, 1, N), G.view(M, N, E), out=g_u[r0:r1].view(M, 1, E))  # sum_n B G
            if need_delta or need_A:
                # q_t = dloss/d(Delta_t A) = G_t a_t h_{t-1} (zero for t = 0, where h_{-1} = 0)
                w[:, 0].zero_()
                torch.mul(G[:, 1:], h[:, :-1], out=w[:, 1:])
                w.mul_(a)
                torch.sum(torch.mul(w, AT, out=a), 2, out=g_dd[r0:r1])  # sum_n A q
                if need_A:
                    torch.mul(w, delta[r0:r1].unsqueeze(2), out=a)  # Delta q
                    torch.sum(a.view(M, N * E), 0, out=g_A[k])  # sum over (b, t)
        g_delta = g_dd.addcmul_(g_u, x) if need_delta else None
        return (g_u.mul_(delta) if need_x else None, g_delta, g_A.sum(0).view(N, E).T if need_A else None,
                g_B if need_B else None, g_C if need_C else None)


def _compiled_scan(x, delta, A, B, C) -> bool:
    """Whether :func:`selective_scan_s6` takes the compiled scan: :func:`mambaicl.device.use_compiled` on ``x``'s
    device, ``x`` float32 or float64 and ``delta``, ``A``, ``B``, ``C`` of its dtype and device (any other case takes
    :class:`_S6Scan`, which also reports a mismatch)."""
    if not use_compiled(x.device) or x.dtype not in COMPILED_DTYPES:
        return False
    return all(t.dtype == x.dtype and t.device == x.device for t in (delta, A, B, C))


def selective_scan_s6(x, delta, A, B, C, D) -> torch.Tensor:
    """S6 selective scan, fast form; same signature and output as :func:`selective_scan_s6_seq`.

    On a CPU (:func:`mambaicl.device.use_compiled`) in float32 or float64 the scan is the compiled
    :func:`mambaicl.models.s6_numba.s6_scan_compiled` (Gu & Dao 2023, Alg. 2, a Numba loop forward and backward);
    elsewhere, and within :func:`mambaicl.device.plain_kernels`, its plain twin :class:`_S6Scan`.
    """
    _check_s6(x, delta, A, B, C, D)
    scan = s6_scan_compiled if _compiled_scan(x, delta, A, B, C) else _S6Scan.apply
    return scan(x, delta, A, B, C) + D * x  # (batch, L, E)


def s6_gate(delta: torch.Tensor, A: torch.Tensor, t: int) -> torch.Tensor:
    """Gate of token ``s`` seen from position ``t``: ``Delta_{s,c} exp(A_{c,n} sum_{r=s+1}^t Delta_{r,c})``.

    The analogue of ``G_{s,t}`` of Eq. (3) (which it equals, up to ``Delta`` vs ``sigma``, when
    ``A = -1``); zero for ``s > t``.

    Args:
        delta: ``(batch, L, E)``.  A: ``(E, N)``.  t: the position that reads (0-based).

    Returns:
        ``(batch, L, E, N)``.
    """
    Lam = running_sum(delta, dim=1)  # (batch, L, E): sum_{r<=s} Delta_r
    decay = (Lam[:, t : t + 1] - Lam).clamp_min(0)  # (batch, L, E): sum_{r=s+1}^t Delta_r for s <= t
    # clamp_min only removes float rounding below 0; rows s > t are zeroed by the mask below
    G = delta.unsqueeze(-1) * torch.exp(decay.unsqueeze(-1) * A)  # (batch, L, E, N)
    mask = (torch.arange(delta.shape[1], device=delta.device) <= t).to(delta.dtype)  # (L,)
    return G * mask[None, :, None, None]


def _compiled_kernel(delta, A, B, C) -> bool:
    """Whether :func:`s6_kernel` takes the compiled :func:`mambaicl.models.s6_numba.s6_kernel_compiled` (forward
    only): :func:`mambaicl.device.use_compiled` on ``delta``'s device, ``delta`` float32 or float64, ``A``, ``B``,
    ``C`` of its dtype and device, and no gradient wanted (grad mode off, as in the probes, or no input requiring
    one); any other case takes the plain twin, through which autograd runs."""
    if not use_compiled(delta.device) or delta.dtype not in COMPILED_DTYPES:
        return False
    if not all(t.dtype == delta.dtype and t.device == delta.device for t in (A, B, C)):
        return False
    return not (torch.is_grad_enabled() and any(t.requires_grad for t in (delta, A, B, C)))


def s6_kernel(delta, A, B, C) -> torch.Tensor:
    """Mixing matrix of the S6 scan, ``K[t, s, c] = sum_n C_{t,n} B_{s,n} G[t, s, c, n]``, ``(batch, L, L, E)``.

    Built one reading position ``t`` at a time (memory ``batch * L * E * N`` per step). On a CPU in float32 or
    float64 with no gradient wanted (:func:`_compiled_kernel`) it is the compiled
    :func:`mambaicl.models.s6_numba.s6_kernel_compiled` (the same decay sums, 1 ulp exponentials, the sum over ``n``
    in a fixed order); elsewhere, and within :func:`mambaicl.device.plain_kernels`, the plain loop below.
    """
    if _compiled_kernel(delta, A, B, C):
        return s6_kernel_compiled(delta, A, B, C)
    rows = []
    for t in range(delta.shape[1]):
        G = s6_gate(delta, A, t)  # (batch, L, E, N)
        rows.append(torch.einsum("bn,bsn,bsen->bse", C[:, t], B, G))  # (batch, L, E)
    return torch.stack(rows, dim=1)  # (batch, L(t), L(s), E)


def selective_scan_s6_kernel(x, delta, A, B, C, D) -> torch.Tensor:
    """S6 in its attention-like form ``y_t = sum_s K[t, s] * x_s + D x_t``; same signature as the scans."""
    _check_s6(x, delta, A, B, C, D)
    K = s6_kernel(delta, A, B, C)  # (batch, L, L, E)
    return torch.einsum("btse,bse->bte", K, x) + D * x  # (batch, L, E)


def causal_conv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Depthwise causal convolution ``x'_t = bias + sum_k weight[:, k] * x_{t - (K-1) + k}``, ``(batch, L, E)``.

    Same result as ``conv1d(..., padding=K-1, groups=E)[..., :L]`` (tested), written as ``K``
    shifted multiply-adds, which is several times faster on a CPU for ``K = 4``.
    """
    K, L = weight.shape[1], x.shape[1]
    taps = weight.T.contiguous()  # (K, E): each tap a contiguous row (a strided column is ~10x slower to broadcast)
    out = bias.expand_as(x)
    for k in range(K):
        shift = K - 1 - k  # x_{t - shift}
        shifted = x if shift == 0 else F_.pad(x, (0, 0, shift, 0))[:, :L]  # (batch, L, E)
        out = out + taps[k] * shifted
    return out


def _uniform_(t: torch.Tensor, bound: float, generator) -> None:
    with torch.no_grad():
        t.copy_((torch.rand(t.shape, generator=generator, dtype=torch.float64) * 2 - 1) * bound)


class Mamba1Block(nn.Module):
    """One Mamba-1 mixer (Gu & Dao 2023, Fig. 3): in-proj, causal conv + SiLU, S6, SiLU(z) gate, out-proj.

    Initialisation follows the reference implementation (``A = -(1..N)``, ``Delta`` in
    ``[dt_min, dt_max]`` log-uniform, ``D = 1``); all random draws come from ``generator``.

    Args:
        d_model: width of the residual stream.
        d_state: ``N``.  expand: ``E / d_model``.  d_conv: causal conv width.
        dt_rank: rank of the ``Delta`` projection (``ceil(d_model / 16)`` by default).
        generator: ``torch.Generator`` on the CPU, or ``None`` for the global one.
    """

    def __init__(self, d_model: int, d_state: int = 16, expand: int = 2, d_conv: int = 4,
                 dt_rank: int | None = None, dt_min: float = 1e-3, dt_max: float = 0.1,
                 generator: torch.Generator | None = None) -> None:
        super().__init__()
        for name, v in (("d_model", d_model), ("d_state", d_state), ("expand", expand), ("d_conv", d_conv)):
            check_int(name, v, 1)
        check_real("dt_min", dt_min, 0.0, low_open=True)
        check_real("dt_max", dt_max, dt_min, low_open=True)
        self.d_inner = E = expand * d_model
        self.d_state, self.d_conv = d_state, d_conv
        self.dt_rank = dt_rank or math.ceil(d_model / 16)
        self.in_proj = nn.Linear(d_model, 2 * E, bias=False)
        self.conv_weight = nn.Parameter(torch.empty(E, d_conv))  # depthwise causal filter
        self.conv_bias = nn.Parameter(torch.empty(E))
        self.x_proj = nn.Linear(E, self.dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, E, bias=True)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1, dtype=torch.float32)).repeat(E, 1))
        self.D = nn.Parameter(torch.ones(E))
        self.out_proj = nn.Linear(E, d_model, bias=False)
        self._init(generator, dt_min, dt_max)

    def _init(self, g, dt_min, dt_max) -> None:
        for lin in (self.in_proj, self.x_proj, self.out_proj):
            _uniform_(lin.weight, lin.in_features ** -0.5, g)
        _uniform_(self.conv_weight, self.d_conv ** -0.5, g)
        _uniform_(self.conv_bias, self.d_conv ** -0.5, g)
        _uniform_(self.dt_proj.weight, self.dt_rank ** -0.5, g)
        u = torch.rand(self.d_inner, generator=g, dtype=torch.float64)
        dt = torch.exp(u * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)).clamp_min(1e-4)
        with torch.no_grad():
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus^{-1}(dt)

    def ssm_inputs(self, u: torch.Tensor) -> dict[str, torch.Tensor]:
        """Everything the scan needs from the block input ``u`` ``(batch, L, d_model)``."""
        x, z = self.in_proj(u).chunk(2, dim=-1)  # (batch, L, E) each
        x = F_.silu(causal_conv(x, self.conv_weight, self.conv_bias))  # (batch, L, E)
        dt, B, C = torch.split(self.x_proj(x), [self.dt_rank, self.d_state, self.d_state], dim=-1)
        delta = F_.softplus(self.dt_proj(dt))  # (batch, L, E)
        A = -torch.exp(self.A_log)  # (E, N)
        return {"x": x, "z": z, "delta": delta, "A": A, "B": B, "C": C}

    def forward(self, u: torch.Tensor, scan: str = "fast", probe: bool = False):
        """``out_proj(S6(x) * silu(z))``, ``(batch, L, d_model)``.

        Args:
            u: ``(batch, L, d_model)``.
            scan: ``"fast"`` (:func:`selective_scan_s6`), ``"sequential"``
                (:func:`selective_scan_s6_seq`) or ``"kernel"`` (:func:`selective_scan_s6_kernel`).
            probe: also return a dict: ``"attention"`` the scores ``C_t^T B_s`` ``(batch, 1, L, L)``
                (row ``t``, column ``s``, zero above the diagonal), ``"gate"`` the gate of every
                token seen from the last position averaged over the ``N`` states ``(batch, 1, L, E)``,
                ``"gate_states"`` ``(batch, L, E, N)``, ``"kernel"`` ``K`` and ``"delta"``. The
                output is then computed from the very ``K`` returned (``scan`` is ignored).
        """
        check_choice("scan", scan, MAMBA1_SCANS)
        s = self.ssm_inputs(u)
        args = (s["x"], s["delta"], s["A"], s["B"], s["C"], self.D)
        if probe:
            _check_s6(*args)
            K = s6_kernel(s["delta"], s["A"], s["B"], s["C"])  # (batch, L, L, E)
            y = torch.einsum("btse,bse->bte", K, s["x"]) + self.D * s["x"]  # (batch, L, E)
        elif scan == "fast":
            y = selective_scan_s6(*args)
        elif scan == "sequential":
            y = selective_scan_s6_seq(*args)
        else:
            y = selective_scan_s6_kernel(*args)
        out = self.out_proj(y * F_.silu(s["z"]))  # (batch, L, d_model)
        if not probe:
            return out
        L = u.shape[1]
        scores = torch.einsum("btn,bsn->bts", s["C"], s["B"]) * causal_mask(L, u.device)  # (batch, L, L): C_t^T B_s
        gate = s6_gate(s["delta"], s["A"], L - 1)  # (batch, L, E, N), read from the query
        return out, {"attention": scores.unsqueeze(1),  # (batch, 1, L, L)
                     "gate": gate.mean(dim=-1).unsqueeze(1),  # (batch, 1, L, E): mean over the N states
                     "gate_states": gate, "kernel": K, "delta": s["delta"]}
