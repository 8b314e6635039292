"""Chapter 3's absolute iteration counts, Eq. (13) inside Lemma 4's window and the theorems' conditions.

==================  ===================================================================
function            what it measures
==================  ===================================================================
``epsilon_count``   Theorems 1 and 3's own quantity: the first step at which the population hinge
                    loss is at most an absolute ``epsilon`` (``nan`` when the run never gets there)
``censored``        counts with the runs that never reach ``epsilon`` set to the run length (a lower
                    bound on their count)
``eq13_inside``     where Eq. (13)'s order ``w^T p_outlier < w^T p_clean < 0`` holds inside Lemma 4's
                    early window, per seed
``theorem_conditions``  Theorem 1's / 3's conditions with every hidden constant set to 1
``initial_margin``  the linear Transformer's mean initial margin
==================  ===================================================================
"""
from __future__ import annotations

import math

import torch

from .fits import crossing

__all__ = ["epsilon_count", "censored", "eq13_inside", "theorem_conditions", "initial_margin"]


def epsilon_count(steps, loss: torch.Tensor, epsilon: float) -> list:
    """Per seed (columns of ``loss``, ``(n_records, S)``): the first step at which the loss is at most
    ``epsilon`` (Theorems 1 and 3: "after T iterations E[loss] <= epsilon"), interpolated linearly between
    records; ``nan`` when no record reaches it, ``steps[0]`` when the first already does."""
    return [crossing(steps, loss[:, s].tolist(), epsilon, rising=False, never=math.nan) for s in range(loss.shape[1])]


def censored(counts, run_length: float) -> list:
    """``counts`` with ``nan`` (never reached) replaced by ``run_length``: a lower bound on those counts."""
    return [run_length if math.isnan(c) else c for c in counts]


def eq13_inside(steps, C: dict, window: float) -> dict:
    """Eq. (13)'s order ``w^T p_outlier < w^T p_clean < 0`` inside Lemma 4's early window ``t <= window``.

    Returns per seed: ``first`` (the first record at which it holds, ``nan`` if none in the whole run),
    ``fraction`` (the share of records with ``t <= window`` at which it holds) and ``at_window`` (whether it
    holds at the last record inside the window)."""
    ok = (C["wp_outlier"] < C["wp_clean"]) & (C["wp_clean"] < 0)  # (n_records, S)
    inside = [i for i, t in enumerate(steps) if t <= window]
    first, frac, at_end = [], [], []
    for s in range(ok.shape[1]):
        hits = ok[:, s].nonzero()
        first.append(float(steps[int(hits[0])]) if len(hits) else math.nan)
        frac.append(float(ok[inside, s].double().mean()))
        at_end.append(bool(ok[inside[-1], s]))
    return {"first": first, "fraction": frac, "at_window": at_end}


def theorem_conditions(setting, batch_size: int, epsilon: float) -> dict:
    """Theorem 1's (Mamba) or Theorem 3's (linear Transformer) conditions with every hidden constant set to 1.

    ``setting`` has ``kind`` and ``data``. Returns ``name -> margin``: the ratio of the two sides, ``>= 1``
    when the condition holds with constant 1. ``p_a^-1 poly(M1^kappa_a) >~ l_tr`` is left out (the paper does
    not give the degree).
    """
    d, eps = setting.data, epsilon
    log_e = math.log(1 / eps)
    out = {"B >~ eps^-2 log(1/eps)": batch_size / (eps ** -2 * log_e),
           "B >~ M1 (1-p_a)^-1 log(1/eps)": batch_size / (d.M1 / (1 - d.p_a) * log_e),
           "kappa_a <~ V beta (1-p_a) / (p_a eps)": d.V * d.beta * (1 - d.p_a) / (d.p_a * eps) / d.kappa_a,
           "l_tr >~ (1-p_a)^-1 log M1": d.l_tr / (math.log(d.M1) / (1 - d.p_a))}
    if setting.kind == "mamba":
        out["B >~ beta^-4 V^2 kappa_a^-2 (1-p_a)^-2 log(1/eps)"] = batch_size / (
            d.beta ** -4 * d.V ** 2 * d.kappa_a ** -2 * (1 - d.p_a) ** -2 * log_e)
        out["kappa_a >~ V beta^-4"] = d.kappa_a / (d.V * d.beta ** -4)
    return out


def initial_margin(setting, delta: float) -> float:
    """The linear Transformer's mean initial margin ``E[z F^(0)] ~ delta^2 beta^2 l_tr (1 - p_a) / 2``: with
    ``W_B^(0) = W_C^(0) = delta I``, ``F^(0) = delta^2 sum_i y_i x_i^T x_query`` and about ``l_tr (1 - p_a) / 2``
    clean examples share the query's pattern (outlier examples' labels are coin flips)."""
    d = setting.data
    return delta ** 2 * d.beta ** 2 * d.l_tr * (1 - d.p_a) / 2
