"""The expected descent directions of Algorithm 1 at initialisation: what Lemmas 3-4's early rates are at ``t = 0``.

Glossary (code name -> paper symbol):

=====================  ===================================================================
``gate_sums_at_zero``  ``S_G = sum_{i<=l} G_{i,l+1}`` and ``S_L = sum_{i<=l} G_{i,l+1} (l - i)`` at ``w = 0``,
                       where every ``sigma(w^T p) = 1/2`` and ``G_{i,l+1} = 2^-(l+2-i)``
``lemma3_init_rate``   growth per step of ``mean_j (mu_j^T, 0) W_B (mu_j^T, 0)^T`` (the same for ``W_C``)
``lemma4_v_init_rate`` fall per step of ``mean_s v*_s^T w``
``lemma4_mu_init_rate`` fall per step of ``mean_j (mu_j^T, 0) w``
=====================  ===================================================================

**The derivation** (Algorithm 1's initialisation ``W_B = W_C = delta diag(I_d, 0)``, taken at ``w = 0``).
At initialisation every margin ``z F`` is far below 1 (``|F| <= delta^2 max |x_i^T x_query| sum_i G_i``),
so the hinge loss is linear and the descent direction is ``E[z grad F]``. With
``F = sum_i G_i y_i delta^2 x_i^T x_query``:

* ``grad_{W_C} F = sum_i G_i y_i W_B p_i p_query^T``. Along ``(mu_j, 0)`` on both sides only ``j = c``
  (the query's pattern) survives, ``mu_c^T x_query = beta^2``, and ``mu_c^T x_i = beta^2`` for examples of
  pattern ``c``; ``E[z y_i] = 1`` for a clean example of pattern ``c`` (probability ``(1-p_a)/2``) and ``0``
  for an outlier (a coin-flip label). Averaged over ``j`` (a factor ``1/M1``):
  ``eta delta beta^4 (1-p_a) S_G / (2 M1)`` per step.
* ``grad_w G_i = G_i [(1-sigma_i) p_i - sum_{k>i} sigma_k p_k]`` (``k`` up to the query). Only clean
  examples of the query's pattern carry ``E[z y_i delta^2 x_i^T x_query] = delta^2 beta^2 (1-p_a)/2``.
  Along ``v*_s``: clean ``p_i`` have no outlier; a later ``p_k`` carries ``kappa_a v*_s`` with probability
  ``p_a / V``: ``v*^T w`` falls by ``eta delta^2 beta^2 p_a (1-p_a) kappa_a ||v*||^2 S_L / (4 V)``.
  Along ``mean_j mu_j``: every token has ``mean_j mu_j^T x = beta^2 / M1``: ``(mu_j, 0) w`` falls by
  ``eta delta^2 beta^4 (1-p_a) S_L / (4 M1)``.

So at ``t = 0`` the rates grow as ``beta^4`` (Lemma 3 and ``(mu_j, 0) w``: the paper says ``beta`` and
``beta^2``; ``mu`` has norm ``beta`` and enters twice through ``x_i^T x_query``) and ``v*^T w`` as
``beta^2 ||v*||^2`` and ``p_a (1-p_a)`` (the paper: ``1-p_a``; the outlier examples that push ``w`` away
from ``v*`` must exist), ``1/M1`` for the pattern quantities, nothing in ``l_tr`` once ``l`` is a few
gates long. For a random ``w^(0)`` the gate sums ``S_G``, ``S_L`` become averages over the prompts,
which change the constants but not these factors to first order.
"""
from __future__ import annotations

from ..config import check_int

__all__ = ["gate_sums_at_zero", "lemma3_init_rate", "lemma4_v_init_rate", "lemma4_mu_init_rate", "init_rates"]


def gate_sums_at_zero(l: int) -> tuple[float, float]:
    """``(sum_{i<=l} G_{i,l+1}, sum_{i<=l} G_{i,l+1} (l - i))`` at ``w = 0``: ``G_{i,l+1} = 2^-(l+2-i)``
    (Eq. (3)'s gate with every ``sigma = 1/2``, the query's own factor included)."""
    check_int("l", l, 1)
    G = [2.0 ** -(l + 2 - i) for i in range(1, l + 1)]
    return sum(G), sum(g * (l - i) for i, g in zip(range(1, l + 1), G))


def lemma3_init_rate(lr: float, delta: float, beta: float, p_a: float, M1: int, l: int) -> float:
    """Lemma 3 at ``t = 0``: ``eta delta beta^4 (1-p_a) S_G / (2 M1)``, the expected growth per step of
    ``mean_j (mu_j^T, 0) W_C (mu_j^T, 0)^T`` (and of ``W_B``'s) at ``w = 0``."""
    return lr * delta * beta ** 4 * (1 - p_a) * gate_sums_at_zero(l)[0] / (2 * M1)


def lemma4_v_init_rate(lr: float, delta: float, beta: float, p_a: float, kappa_a: float, outlier_norm: float,
                       V: int, l: int) -> float:
    """Lemma 4 at ``t = 0``: ``eta delta^2 beta^2 p_a (1-p_a) kappa_a ||v*||^2 S_L / (4 V)``, the expected fall
    per step of ``mean_s v*_s^T w`` at ``w = 0``."""
    return lr * delta ** 2 * beta ** 2 * p_a * (1 - p_a) * kappa_a * outlier_norm ** 2 * gate_sums_at_zero(l)[1] / (4 * V)


def lemma4_mu_init_rate(lr: float, delta: float, beta: float, p_a: float, M1: int, l: int) -> float:
    """Lemma 4 at ``t = 0``: ``eta delta^2 beta^4 (1-p_a) S_L / (4 M1)``, the expected fall per step of
    ``mean_j (mu_j^T, 0) w`` at ``w = 0``."""
    return lr * delta ** 2 * beta ** 4 * (1 - p_a) * gate_sums_at_zero(l)[1] / (4 * M1)


def init_rates(data, lr: float, delta: float) -> dict:
    """The three rates at ``t = 0`` for data ``data`` (a :class:`~mambaicl.config.DataConfig`) and step size ``lr``,
    with the ratio of the two gate rates: ``{"lemma3", "lemma4_v", "lemma4_mu", "lemma4_ratio"}``."""
    d = data
    v = lemma4_v_init_rate(lr, delta, d.beta, d.p_a, d.kappa_a, d.outlier_norm, d.V, d.l_tr)
    mu = lemma4_mu_init_rate(lr, delta, d.beta, d.p_a, d.M1, d.l_tr)
    return {"lemma3": lemma3_init_rate(lr, delta, d.beta, d.p_a, d.M1, d.l_tr), "lemma4_v": v, "lemma4_mu": mu,
            "lemma4_ratio": mu / v}
