"""Measurements on recorded training curves (Chapter 3): iteration counts, exponents, Lemma 3-6 rates.

==================  ===================================================================
function            what it measures
==================  ===================================================================
``exponent_fit``    :func:`mambaicl.analysis.fits.loglog_slope` of counts against a factor, with the
                    verdict against the predicted exponent (95 % interval)
``count``           the relaxation time of a curve (:func:`mambaicl.analysis.fits.relaxation_time`),
                    ``nan`` when the curve does not start above its end
``early_window``    Lemma 4's early phase (hidden constant 1), at least ``early_min`` steps
``lemma_rates``     Lemma 3's and Lemma 4's early rates and Lemma 6's early maximum, per seed
``eq13_from``       the first record from which Eq. (13) holds for good, per seed
``interval``        mean, SE and 95 % t interval of per-seed values with the verdict
==================  ===================================================================
"""
from __future__ import annotations

import math

from .fits import loglog_slope, relaxation_time, t_quantile, window_slope
from .lemmas import lemma4_horizon
from .stats import mean_se

__all__ = ["exponent_fit", "count", "early_window", "lemma_rates", "eq13_from", "interval"]


def exponent_fit(xs, Y, predicted: float) -> dict:
    """``loglog_slope`` of ``Y`` (seeds x values) against ``xs`` with the verdict: ``holds`` when the 95%
    interval contains ``predicted``; ``not measurable`` when a value is not positive and finite."""
    Y = [[float(v) for v in row] for row in Y]
    if not all(math.isfinite(v) and v > 0 for row in Y for v in row):
        return {"predicted": predicted, "slope": math.nan, "se": math.nan, "low": math.nan, "high": math.nan,
                "per_seed": [], "verdict": "not measurable"}
    f = loglog_slope(xs, Y)
    verdict = "holds" if f.low <= predicted <= f.high else "disagrees"
    return {"predicted": predicted, "slope": f.slope, "se": f.se, "low": f.low, "high": f.high,
            "per_seed": list(f.per_seed), "verdict": verdict}


def count(steps, values, fraction: float) -> float:
    try:
        return relaxation_time(steps, values, fraction)
    except ValueError:  # the curve does not start above its end value: no count
        return math.nan


def early_window(st, early_min: int) -> float:
    """``st`` a setting (``lr``, ``data``): Lemma 4's early phase (hidden constant 1), but at least ``early_min`` steps (so that a slope is fitted
    through ``early_min + 1`` records)."""
    d = st.data
    return max(float(early_min), lemma4_horizon(st.lr, d.p_a, d.beta, d.kappa_a, d.M1, d.V))


def lemma_rates(st, steps, C: dict, S: int, early_min: int) -> dict:
    """Per seed: Lemma 3's early growth rate of ``mu^T W_B mu``, Lemma 4's early rates of decrease of
    ``v*^T w`` and ``(mu_j^T, 0) w`` and their ratio, the early maximum of Lemma 6's weighted gate sum."""
    te = early_window(st, early_min)
    early = [i for i, t in enumerate(steps) if t <= te]
    rate = {name: [sign * window_slope(steps, C[name][:, s].tolist(), te) for s in range(S)]
            for name, sign in (("muWBmu", 1.0), ("w_v", -1.0), ("w_mu", -1.0))}
    return {"lemma3": rate["muWBmu"], "lemma4_v": rate["w_v"], "lemma4_mu": rate["w_mu"],
            "lemma4_ratio": [m / v for m, v in zip(rate["w_mu"], rate["w_v"])],
            "lemma6": C["lemma6"][early].max(0).values.tolist(), "window": te}


def eq13_from(steps, C: dict, S: int) -> list:
    """Per seed: the first record from which ``w^T p_outlier < w^T p_clean < 0`` (Eq. (13)) holds for good."""
    ok = (C["wp_outlier"] < C["wp_clean"]) & (C["wp_clean"] < 0)  # (n_records, S)
    out = []
    for s in range(S):
        bad = (~ok[:, s]).nonzero()
        out.append(float(steps[int(bad[-1]) + 1]) if len(bad) and int(bad[-1]) + 1 < len(steps)
                   else (math.inf if len(bad) else float(steps[0])))
    return out


def interval(values: list, predicted: float) -> dict:
    """Mean, SE and 95% t-interval of per-seed values, with the verdict against ``predicted``."""
    if not values or not all(math.isfinite(v) for v in values):
        return {"predicted": predicted, "mean": math.nan, "se": math.nan, "low": math.nan, "high": math.nan,
                "per_seed": list(values), "verdict": "not measurable"}
    m, se = mean_se(values)
    half = t_quantile(len(values) - 1) * se if len(values) > 1 else math.nan
    verdict = "holds" if len(values) > 1 and m - half <= predicted <= m + half else "disagrees"
    return {"predicted": predicted, "mean": m, "se": se, "low": m - half, "high": m + half,
            "per_seed": list(values), "verdict": verdict}
