"""The quantities Lemmas 3-6 describe, measured on a model during or after training.

Glossary (code name -> paper symbol):

=================  ===========================================================
``pad``            ``(mu_j^T, 0^T)^T``: a pattern padded with zeros to ``n`` entries
``lemma3``         ``(mu_j^T, 0) W (mu_j^T, 0)^T`` for ``W in {W_B, W_C}`` (Lemma 3)
``pattern_attn``   ``(mu_i^T, 0) W_B^T W_C (mu_j^T, 0)^T``, ``(M1, M1)`` (Corollary 1)
``w_v``, ``w_mu``  ``v*_s^T w`` and ``(mu_j^T, 0) w`` (Lemmas 4-5)
``wp_clean``       mean ``w^T p_i`` over clean / outlier context examples (Eq. (12)-(14))
``gate_sum``       ``sum_i G_{i,l+1}(w)`` over context examples (Lemma 6 bounds it by 1)
``lemma6``         ``sum_i G_{i,l+1}(w) (l - i + 1)`` (Lemma 6)
=================  ===========================================================
"""
from __future__ import annotations

import torch

from .data import Patterns, Prompts
from .models import gate_values

__all__ = ["pad", "lemma3", "pattern_attention", "gate_logit_means", "lemma6_sums", "make_probes", "cyclic_distance", "task_groups",
           "corollary1_sums", "corollary2_gates"]


def pad(vectors: torch.Tensor, n: int) -> torch.Tensor:
    """Rows ``(u^T, 0^T)`` of length ``n``: patterns of R^d embedded in the token space, ``(k, n)``."""
    if vectors.shape[1] > n:
        raise ValueError(f"cannot pad vectors of length {vectors.shape[1]} to shorter length n = {n}")
    out = vectors.new_zeros(vectors.shape[0], n)
    out[:, : vectors.shape[1]] = vectors
    return out


def lemma3(W: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    """``(mu_j^T, 0) W (mu_j^T, 0)^T`` for each ``j`` (Lemma 3, Eq. (10)), ``(M1,)``; ``W`` is ``(m, d+1)``."""
    left, right = pad(mu, W.shape[0]), pad(mu, W.shape[1])  # (M1, m), (M1, d+1)
    return torch.einsum("jm,mn,jn->j", left, W, right)


def pattern_attention(W_B: torch.Tensor, W_C: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    """Entry ``(i, j)`` is ``(mu_i^T, 0) W_B^T W_C (mu_j^T, 0)^T``: the attention a context example with
    ``mu_i`` receives from a query with ``mu_j`` (the quantity summed in Corollary 1), ``(M1, M1)``."""
    U = pad(mu, W_B.shape[1])  # (M1, d+1)
    return U @ W_B.T @ W_C @ U.T  # (M1, M1)


def cyclic_distance(M1: int) -> torch.Tensor:
    """``min(|i - j|, M1 - |i - j|)``: how far apart two patterns are on the training cycle, ``(M1, M1)``."""
    i = torch.arange(M1)
    diff = (i[:, None] - i[None, :]).abs()
    return torch.minimum(diff, M1 - diff)


def gate_logit_means(w: torch.Tensor, pr: Prompts) -> tuple[float, float]:
    """Mean ``w^T p_i`` over clean and over outlier context examples (Lemmas 4-5, Eq. (12)-(14))."""
    logits = (pr.P @ w)[:, :-1]  # (batch, l)
    clean = logits[~pr.outlier]
    bad = logits[pr.outlier]
    nan = float("nan")
    return (float(clean.mean()) if clean.numel() else nan, float(bad.mean()) if bad.numel() else nan)


def lemma6_sums(w: torch.Tensor, P: torch.Tensor) -> tuple[float, float]:
    """Mean over prompts of ``sum_{i<=l} G_{i,l+1}`` and of ``sum_{i<=l} G_{i,l+1} (l - i + 1)`` (Lemma 6)."""
    G = gate_values(P, w)[:, :-1]  # (batch, l)
    l = G.shape[1]
    dist = torch.arange(l, 0, -1, dtype=G.dtype)  # (l,): l - i + 1 for i = 1..l
    return float(G.sum(1).mean()), float((G * dist).sum(1).mean())


def make_probes(pat: Patterns, pr: Prompts, gated: bool) -> dict:
    """``name -> probe(model) -> float`` for :func:`mambaicl.fit.fit`, measured on the fixed prompts ``pr``.

    ``muWBmu`` / ``muWCmu``: mean Lemma 3 diagonal; ``attn_dist{k}``: mean ``pattern_attention`` over
    pattern pairs ``k`` steps apart on the training cycle; for a gated model also ``w_v``, ``w_mu``,
    ``wp_clean``, ``wp_outlier``, ``gate_sum`` and ``lemma6``.
    """
    dist = cyclic_distance(pat.mu.shape[0])
    probes = {"muWBmu": lambda m: lemma3(m.W_B, pat.mu).mean(), "muWCmu": lambda m: lemma3(m.W_C, pat.mu).mean()}
    for k in range(int(dist.max()) + 1):
        probes[f"attn_dist{k}"] = lambda m, k=k: pattern_attention(m.W_B, m.W_C, pat.mu)[dist == k].mean()
    if gated:
        probes.update({
            "w_v": lambda m: (pad(pat.v, m.w.shape[0]) @ m.w).mean(),
            "w_mu": lambda m: (pad(pat.mu, m.w.shape[0]) @ m.w).mean(),
            "wp_clean": lambda m: gate_logit_means(m.w, pr)[0],
            "wp_outlier": lambda m: gate_logit_means(m.w, pr)[1],
            "gate_sum": lambda m: lemma6_sums(m.w, pr.P)[0],
            "lemma6": lambda m: lemma6_sums(m.w, pr.P)[1],
        })
    return probes


def task_groups(tasks: torch.Tensor, M1: int) -> list:
    """Name each task ``(a, b)`` by its relation to the cyclic training set: ``"training"`` if
    ``b = a + 1``, ``"reversed"`` if ``a = b + 1`` (mod ``M1``), else ``"distance k"``."""
    names = []
    for a, b in tasks.tolist():
        if b == (a + 1) % M1:
            names.append("training")
        elif a == (b + 1) % M1:
            names.append("reversed")
        else:
            names.append(f"distance {min(abs(a - b), M1 - abs(a - b))}")
    return names


@torch.no_grad()
def corollary1_sums(model, pr: Prompts) -> tuple[torch.Tensor, torch.Tensor]:
    """Corollary 1, Eq. (6): per prompt, the sum of attention scores ``p_i^T W_B^T W_C p_query`` over
    context examples sharing the query's relevant pattern, and over the others; two ``(batch,)`` tensors."""
    scores = model.attention(pr.P)[:, :-1]  # (batch, l)
    same = pr.relevant[:, :-1] == pr.relevant[:, -1:]  # (batch, l)
    return (scores * same).sum(1), (scores * ~same).sum(1)


@torch.no_grad()
def corollary2_gates(model, pr: Prompts) -> tuple[torch.Tensor, torch.Tensor]:
    """Corollary 2(i), Eq. (7): gate values ``G_{i,l+1}(w)`` on outlier examples and on clean examples
    (flattened over the batch); compare their medians."""
    G = model.gate(pr.P)[:, :-1]  # (batch, l)
    return G[pr.outlier], G[~pr.outlier]
