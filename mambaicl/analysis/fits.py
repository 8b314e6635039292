"""Fits and summaries of measured curves: decay rates, scaling exponents, iteration counts, break-downs.

================  ===================================================================
function          what it measures
================  ===================================================================
``decay_stats``   successive ratios of a positive sequence, its fitted per-step factor
                  and the R^2 of the log-linear fit (Corollary 2(ii)'s exponential decay)
``loglog_slope``  the exponent ``b`` of ``y = a x^b`` by least squares on logs, one fit per
                  seed, with a t-interval over seeds (Theorems 1 and 3 as scaling laws)
``smooth``        a centred moving average, for plotting noisy training curves
``crossing``      THE threshold crossing of the book: the first ``x`` at which a curve reaches a
                  level (rising or falling), interpolated linearly, in log-log, or on the grid
``relaxation_time``  the time a curve needs to lose a fraction of its excess over its final
                  value (the half-life of the excess loss: Chapter 3's iteration count)
``window_slope``  the least-squares slope of a curve over an initial window (early-phase rates)
================  ===================================================================
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..config import ConfigError, check_choice
from .stats import t_quantile  # the one Student-t quantile of the book (95 % intervals)

__all__ = ["decay_stats", "SlopeFit", "loglog_slope", "smooth", "t_quantile", "crossing", "relaxation_time",
           "window_slope", "CENSOR", "needed_length"]


def decay_stats(values: Sequence[float]) -> tuple[np.ndarray, float, float]:
    """``(ratios, factor, r2)`` of a positive sequence ``g_1, ..., g_J``.

    ``ratios[j] = g_{j+1} / g_j``; ``factor = exp(slope)`` of the least-squares line through
    ``(j, log g_j)``; ``r2`` its coefficient of determination (1 for an exact geometric sequence).
    """
    g = np.asarray(values, dtype=float)
    if g.ndim != 1 or len(g) < 2 or not np.all(g > 0) or not np.all(np.isfinite(g)):
        raise ConfigError(f"values must be at least two positive finite numbers; got {values!r}")
    y, x = np.log(g), np.arange(1, len(g) + 1, dtype=float)
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (slope * x + intercept)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((resid ** 2).sum()) / ss_tot if ss_tot > 0 else 1.0
    return g[1:] / g[:-1], float(np.exp(slope)), r2


@dataclass(frozen=True)
class SlopeFit:
    """A log-log exponent: mean over seeds, its standard error and a 95% t-interval."""

    slope: float
    se: float
    low: float
    high: float
    per_seed: tuple

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in the 95% interval."""
        return self.low <= value <= self.high


def loglog_slope(x: Sequence[float], Y) -> SlopeFit:
    """Fit ``log y = b log x + c`` for each seed (row of ``Y`` ``(S, n)``) and summarise ``b`` over seeds.

    With one seed the interval is the fit's own 95% interval from its residuals (``n - 2`` degrees
    of freedom); with ``S >= 2`` seeds it is ``mean +- t_{S-1} SE`` over the per-seed slopes.
    """
    x = np.asarray(x, dtype=float)
    Y = np.atleast_2d(np.asarray(Y, dtype=float))
    if x.ndim != 1 or len(x) < 2 or Y.shape[1] != len(x):
        raise ConfigError(f"x and Y must be n >= 2 values and shape (seeds, n); got {x.shape} and {Y.shape}")
    if not (np.all(x > 0) and np.all(Y > 0) and np.all(np.isfinite(Y))):
        raise ConfigError("x and Y must be positive and finite for a log-log fit")
    lx, LY = np.log(x), np.log(Y)
    slopes = np.array([np.polyfit(lx, ly, 1)[0] for ly in LY])
    S = len(slopes)
    if S >= 2:
        se = float(slopes.std(ddof=1) / math.sqrt(S))
        half = t_quantile(S - 1) * se
    else:
        if len(x) < 3:
            return SlopeFit(float(slopes[0]), math.nan, math.nan, math.nan, tuple(slopes.tolist()))
        b, c = np.polyfit(lx, LY[0], 1)
        resid = LY[0] - (b * lx + c)
        se = float(math.sqrt((resid ** 2).sum() / (len(x) - 2) / ((lx - lx.mean()) ** 2).sum()))
        half = t_quantile(len(x) - 2) * se
    m = float(slopes.mean())
    return SlopeFit(m, se, m - half, m + half, tuple(float(s) for s in slopes))


def smooth(values: Sequence[float], k: int = 5) -> np.ndarray:
    """Centred moving average over ``k`` points (shorter windows at the ends)."""
    x = np.asarray(values, dtype=float)
    if k < 1:
        raise ConfigError(f"k must be a positive integer; got {k!r}")
    half = k // 2
    csum = np.concatenate([[0.0], np.cumsum(x)])
    lo = np.clip(np.arange(len(x)) - half, 0, len(x))
    hi = np.clip(np.arange(len(x)) + half + 1, 0, len(x))
    return (csum[hi] - csum[lo]) / (hi - lo)


def _curve(steps, values) -> tuple[np.ndarray, np.ndarray]:
    t, y = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    if t.ndim != 1 or t.shape != y.shape or len(t) < 2:
        raise ConfigError(f"steps and values must be aligned 1-d sequences of >= 2 points; got {t.shape} and {y.shape}")
    if not np.all(np.diff(t) > 0):
        raise ConfigError("steps must be strictly increasing")
    if not np.all(np.isfinite(y)):
        raise ConfigError("values must be finite")
    return t, y


_INTERPOLATIONS = ("linear", "loglog", "none", "before")


def crossing(x: Sequence[float], y: Sequence[float], level: float, *, rising: bool = True, strict: bool = False,
             interpolate: str = "linear", never: float = math.nan) -> float:
    """The first ``x`` at which the curve ``y(x)`` reaches ``level``: the one threshold crossing of the book.

    The first grid point ``k`` that reaches ``level`` is the first with ``y[k] >= level`` (``rising``) or
    ``y[k] <= level`` (falling); ``strict`` makes these ``>`` and ``<``. Then:

    * ``k = 0``: ``x[0]`` (``"before"``: ``nan``, no grid point precedes it);
    * ``interpolate="linear"``: ``x`` where the line through ``(x[k-1], y[k-1])`` and ``(x[k], y[k])`` meets
      ``level``; ``"loglog"``: the same for ``log y`` against ``log x`` (``y`` floored at ``1e-12``);
      ``"none"``: ``x[k]``; ``"before"``: ``x[k-1]``, the last grid point before the crossing;
    * no grid point reaches ``level``: ``never``.

    Used for the boundary ``alpha*`` (Chapter 7: rising, linear), the break-down ``alpha`` (Chapter 4:
    rising above the first error plus a jump, on the grid), the prompt length at which an error falls to
    ``eps`` (Chapter 4: falling, log-log), "below the level up to alpha" (Chapter 4: the last alpha before the
    interval's upper end reaches the level) and the relaxation time (Chapter 3: falling, linear).
    """
    if len(x) != len(y) or not len(x):
        raise ConfigError(f"x and y must be non-empty and aligned; got {len(x)} and {len(y)}")
    check_choice("interpolate", interpolate, _INTERPOLATIONS)
    if rising:
        hit = (lambda v: v > level) if strict else (lambda v: not v < level)
    else:
        hit = (lambda v: v < level) if strict else (lambda v: not v > level)
    k = next((i for i, v in enumerate(y) if hit(v)), None)
    if k is None:
        return float(never)
    if interpolate == "before":
        return float(x[k - 1]) if k > 0 else math.nan
    if k == 0 or interpolate == "none":
        return float(x[k])
    x0, x1, y0, y1, lv = float(x[k - 1]), float(x[k]), float(y[k - 1]), float(y[k]), float(level)
    if interpolate == "loglog":
        x0, x1, y0, y1, lv = math.log(x0), math.log(x1), math.log(max(y0, 1e-12)), math.log(max(y1, 1e-12)), math.log(lv)
        return float(math.exp(x0 + (lv - y0) * (x1 - x0) / (y1 - y0)))
    return float(x0 + (lv - y0) / (y1 - y0) * (x1 - x0))


def relaxation_time(steps: Sequence[float], values: Sequence[float], fraction: float = 0.5,
                    end: float | None = None) -> float:
    """The first time the excess ``values - end`` has fallen to ``fraction`` of its initial value.

    ``end`` defaults to the last recorded value. With ``fraction = 1/2`` this is the half-life of the
    excess: for ``y(t) = c + a exp(-t / tau)`` (and ``end = c``) it is ``tau log 2``. By construction
    the curve starts above the target (when ``values[0] > end``) and reaches it (the last value is
    ``end``), whatever its initial level.

    Raises:
        ValueError: ``fraction`` outside ``(0, 1)``, or the curve does not start above ``end``.
    """
    t, y = _curve(steps, values)
    if not 0 < fraction < 1:
        raise ConfigError(f"fraction must lie in (0, 1); got {fraction!r}")
    end = float(y[-1]) if end is None else float(end)
    if not y[0] > end:
        raise ConfigError(f"values must start above their end value {end:.6g}; it starts at {y[0]:.6g}")
    return crossing(t, y, end + fraction * (y[0] - end), rising=False)


def window_slope(steps: Sequence[float], values: Sequence[float], t_max: float) -> float:
    """Least-squares slope of ``values`` against ``steps`` over the records with ``steps <= t_max``
    (at least two records are needed)."""
    t, y = _curve(steps, values)
    keep = t <= t_max
    if keep.sum() < 2:
        raise ConfigError(f"t_max must leave at least two records (steps <= t_max = {t_max!r}); got {int(keep.sum())}")
    return float(np.polyfit(t[keep], y[keep], 1)[0])


#: the count of a seed whose error never stays at or below the level on the grid (twice the longest prompt)
CENSOR = 128


def needed_length(errors, l_grid, level: float) -> int:
    """The smallest ``l`` of ``l_grid`` from which every error (aligned with ``l_grid``) is ``<= level``;
    :data:`CENSOR` if the last one is above it."""
    out = CENSOR
    for l, e in reversed(list(zip(l_grid, errors))):
        if e > level:
            break
        out = l
    return out

