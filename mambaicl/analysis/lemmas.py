"""The quantities Lemmas 3-6 describe, measured on a one-layer model during or after training.

Glossary (code name -> paper symbol):

=================  ===========================================================
``pad``            ``(mu_j^T, 0^T)^T``: a pattern padded with zeros to ``n`` entries
``lemma3``         ``(mu_j^T, 0) W (mu_j^T, 0)^T`` for ``W in {W_B, W_C}`` (Lemma 3)
``pattern_attn``   ``(mu_i^T, 0) W_B^T W_C (mu_j^T, 0)^T``, ``(M1, M1)`` (Corollary 1)
``w_v``, ``w_mu``  ``v*_s^T w`` and ``(mu_j^T, 0) w`` (Lemmas 4-5)
``wp_clean``       mean ``w^T p_i`` over clean / outlier context examples (Eq. (12)-(14))
``gate_sum``       ``sum_i G_{i,l+1}(w)`` over context examples (Lemma 6 bounds it by 1)
``lemma6``         ``sum_i G_{i,l+1}(w) (l - i + 1)`` (Lemma 6)
``lemma4_rates``   Lemma 4's per-step rates ``eta beta^2 kappa_a (1-p_a) / V`` (for ``v*^T w``)
                   and ``eta (1-p_a) beta^2 / M1`` (for ``(mu_j^T, 0) w``)
``lemma4_horizon`` Lemma 4's early phase ``t <~ min{...}`` with the hidden constant set to 1
=================  ===========================================================

The probes of :func:`make_probes` take a single one-layer model (a member of a seed stack:
:meth:`mambaicl.models.OneLayerStack.member`); :func:`stack_probes` measures the same quantities
for every member of a :class:`mambaicl.models.OneLayerStack` at once, on stacked prompts.
"""
from __future__ import annotations

import math

import torch

from ..config import check_int
from ..data import Patterns, Prompts, cyclic_distance
from ..models import gate_from_logits

__all__ = ["pad", "lemma3", "pattern_attention", "gate_logit_means", "lemma6_sums", "make_probes", "stack_probes",
           "lemma4_rates", "lemma4_horizon"]


def pad(vectors: torch.Tensor, n: int) -> torch.Tensor:
    """Rows ``(u^T, 0^T)`` of length ``n``: patterns of R^d embedded in the token space, ``(k, n)``."""
    check_int("n", n, vectors.shape[1])  # no shorter than the vectors
    out = vectors.new_zeros(vectors.shape[0], n)
    out[:, : vectors.shape[1]] = vectors
    return out


def lemma3(W: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    """``(mu_j^T, 0) W (mu_j^T, 0)^T`` for each ``j`` (Lemma 3, Eq. (10)), ``(M1,)``; ``W`` is ``(m, d+1)``."""
    left, right = pad(mu, W.shape[0]), pad(mu, W.shape[1])  # (M1, m), (M1, d+1)
    return torch.einsum("jm,mn,jn->j", left, W.to(mu.dtype), right)


def pattern_attention(M: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    """Entry ``(i, j)`` is ``(mu_i^T, 0) M (mu_j^T, 0)^T`` with ``M = W_B^T W_C`` (or the merged ``W``):
    the attention a context example with ``mu_i`` receives from a query with ``mu_j`` (the quantity
    summed in Corollary 1), ``(M1, M1)``. Pass ``model.bilinear()``."""
    U = pad(mu, M.shape[-1])  # (M1, d+1)
    return U @ M.to(mu.dtype) @ U.T  # (M1, M1)


def gate_logit_means(w: torch.Tensor, pr: Prompts) -> tuple[float, float]:
    """Mean ``w^T p_i`` over clean and over outlier context examples (Lemmas 4-5, Eq. (12)-(14))."""
    logits = (pr.P @ w.to(pr.P.dtype))[..., :-1]  # (batch, l)
    clean, bad = logits[~pr.outlier], logits[pr.outlier]
    nan = float("nan")
    return (float(clean.mean()) if clean.numel() else nan, float(bad.mean()) if bad.numel() else nan)


def lemma6_sums(w: torch.Tensor, P: torch.Tensor) -> tuple[float, float]:
    """Mean over prompts of ``sum_{i<=l} G_{i,l+1}`` and of ``sum_{i<=l} G_{i,l+1} (l - i + 1)`` (Lemma 6)."""
    G = gate_from_logits(P @ w.to(P.dtype))[:, :-1]  # (batch, l)
    l = G.shape[1]
    dist = torch.arange(l, 0, -1, dtype=G.dtype)  # (l,): l - i + 1 for i = 1..l
    return float(G.sum(1).mean()), float((G * dist).sum(1).mean())


def make_probes(pat: Patterns, pr: Prompts, gated: bool) -> dict:
    """``name -> probe(model) -> float`` for :func:`mambaicl.train.train`, measured on the fixed prompts ``pr``.

    ``muWBmu`` / ``muWCmu``: mean Lemma 3 diagonal (paper parametrisation only); ``attn_dist{k}``:
    mean :func:`pattern_attention` over pattern pairs ``k`` steps apart on the training cycle; for a
    gated model also ``w_v``, ``w_mu``, ``wp_clean``, ``wp_outlier``, ``gate_sum`` and ``lemma6``.
    """
    dist = cyclic_distance(pat.mu.shape[0])
    probes = {}
    probes["muWBmu"] = lambda m: lemma3(m.W_B, pat.mu).mean() if hasattr(m, "W_B") else float("nan")
    probes["muWCmu"] = lambda m: lemma3(m.W_C, pat.mu).mean() if hasattr(m, "W_C") else float("nan")
    for k in range(int(dist.max()) + 1):
        probes[f"attn_dist{k}"] = lambda m, k=k: pattern_attention(m.bilinear(), pat.mu)[dist == k].mean()
    if gated:
        probes.update({
            "w_v": lambda m: (pad(pat.v, m.w.shape[0]) @ m.w.to(pat.v.dtype)).mean(),
            "w_mu": lambda m: (pad(pat.mu, m.w.shape[0]) @ m.w.to(pat.mu.dtype)).mean(),
            "wp_clean": lambda m: gate_logit_means(m.w, pr)[0],
            "wp_outlier": lambda m: gate_logit_means(m.w, pr)[1],
            "gate_sum": lambda m: lemma6_sums(m.w, pr.P)[0],
            "lemma6": lambda m: lemma6_sums(m.w, pr.P)[1],
        })
    return probes


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` over the entries where ``mask`` holds, per leading (seed) index; ``nan`` if none."""
    m = mask.to(x.dtype)
    dims = tuple(range(1, x.dim()))
    count = m.sum(dims)
    return torch.where(count > 0, (x * m).sum(dims) / count.clamp(min=1), torch.full_like(count, math.nan))


@torch.no_grad()
def stack_probes(stack, pat: Patterns, pr: Prompts) -> dict:
    """The probes of :func:`make_probes` for every member of a one-layer seed stack at once.

    Args:
        stack: a :class:`mambaicl.models.OneLayerStack` of ``S`` members.
        pat: the patterns the members were trained on (shared by all members).
        pr: stacked prompts ``(S, n, ...)``: member ``s`` is measured on ``pr[s]``.

    Returns:
        ``name -> (S,)`` tensor: ``attn_dist{k}`` (mean of :func:`pattern_attention` over pattern pairs
        ``k`` steps apart on the training cycle), ``muWBmu`` / ``muWCmu`` (mean Lemma 3 diagonal; paper
        parametrisation only), ``WB_dist{k}`` (the same average of ``(mu_i, 0) W_B (mu_j, 0)^T``, Lemma 3's
        own quantity; paper parametrisation only), and for gated kinds ``w_v``, ``w_mu``, ``wp_clean``, ``wp_outlier``,
        ``gate_sum``, ``lemma6`` (as in :func:`make_probes`).
    """
    mu = pat.mu
    M = stack.bilinear(mu.dtype)  # (S, D, D)
    U = pad(mu, M.shape[-1])  # (M1, D)
    A = U @ M @ U.T  # (S, M1, M1): pattern_attention of every member
    dist = cyclic_distance(mu.shape[0])
    out = {f"attn_dist{k}": A[:, dist == k].mean(-1) for k in range(int(dist.max()) + 1)}
    for name, key in (("W_B", "muWBmu"), ("W_C", "muWCmu")):
        if hasattr(stack, name):
            W = getattr(stack, name).to(mu.dtype)  # (S, m, d+1)
            out[key] = torch.einsum("jm,smn,jn->sj", pad(mu, W.shape[1]), W, pad(mu, W.shape[2])).mean(-1)
    if hasattr(stack, "W_B"):  # Lemma 3 itself: (mu_i, 0) W_B (mu_j, 0)^T by distance on the cycle
        WB = pad(mu, stack.W_B.shape[1]) @ stack.W_B.to(mu.dtype) @ pad(mu, stack.W_B.shape[2]).T  # (S, M1, M1)
        out.update({f"WB_dist{k}": WB[:, dist == k].mean(-1) for k in range(int(dist.max()) + 1)})
    if not stack.gated:
        return out
    w = stack.w.to(mu.dtype)  # (S, d+1)
    # elementwise products summed in a fixed order, not a matmul: a BLAS kernel's blocking (and so its
    # rounding) may depend on the thread count, and results must not
    out["w_v"] = (pad(pat.v, w.shape[1])[None] * w[:, None]).sum(-1).mean(-1)  # (S,)
    out["w_mu"] = (pad(mu, w.shape[1])[None] * w[:, None]).sum(-1).mean(-1)
    logits = stack.logits(pr)  # (S, n, l+1)
    l = pr.l
    ctx = logits[..., :l]
    out["wp_clean"] = _masked_mean(ctx, ~pr.outlier)
    out["wp_outlier"] = _masked_mean(ctx, pr.outlier)
    G = gate_from_logits(logits)[..., :l]  # (S, n, l)
    dist_q = torch.arange(l, 0, -1, dtype=G.dtype, device=G.device)  # l - i + 1 for i = 1..l
    out["gate_sum"] = G.sum(-1).mean(-1)
    out["lemma6"] = (G * dist_q).sum(-1).mean(-1)
    return out


def lemma4_rates(lr: float, p_a: float, beta: float, kappa_a: float, M1: int, V: int) -> tuple[float, float]:
    """Lemma 4's per-step rates of decrease (hidden constants set to 1), the linear terms only:
    ``eta beta^2 kappa_a (1 - p_a) / V`` for ``v*_s^T w`` and ``eta (1 - p_a) beta^2 / M1`` for
    ``(mu_j^T, 0) w``. Their ratio, ``V / (M1 kappa_a)``, is free of ``eta``, ``beta`` and ``p_a``."""
    return lr * beta ** 2 * kappa_a * (1 - p_a) / V, lr * (1 - p_a) * beta ** 2 / M1


def lemma4_horizon(lr: float, p_a: float, beta: float, kappa_a: float, M1: int, V: int) -> float:
    """Lemma 4's early phase ``t <~ min{eta^-1 beta^-2 kappa_a^-1 (1-p_a)^-1 V,
    eta^-1 M1^(2/3) beta^(-2/3) kappa_a^(-1/3) (1-p_a)^-1 V^(1/3)}`` with the hidden constant set to 1."""
    a = V / (lr * beta ** 2 * kappa_a * (1 - p_a))
    b = M1 ** (2 / 3) * beta ** (-2 / 3) * kappa_a ** (-1 / 3) * V ** (1 / 3) / (lr * (1 - p_a))
    return min(a, b)
