"""Means, standard errors and the book's rule for claims.

**The 2-standard-error rule.** A comparison between two quantities is asserted as a claim only
when their difference exceeds two standard errors of the difference; otherwise the book reports
it as "not distinguishable at this scale". Both sources of noise are counted:

* *seeds*: the spread of the per-seed values (each seed a fresh initialisation and fresh
  training prompts), ``SE_seeds = sd / sqrt(S)``;
* *test prompts*: each per-seed error is a binomial estimate from ``n`` prompts,
  ``SE_prompts = sqrt(mean_s p_s (1 - p_s) / n) / sqrt(S)``.

The reported standard error is ``sqrt(SE_seeds^2 + SE_prompts^2)``. This counts the prompt
noise twice (it is already inside the seed spread) and so errs on the side of *not* claiming.
For a difference between two models trained and tested on the same seeds, the per-seed
differences are used (a paired comparison).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

__all__ = ["mean_se", "binomial_se", "error_mean_se", "Comparison", "compare", "CLAIM_SE"]

#: a difference is claimed when it exceeds this many standard errors of the difference
CLAIM_SE = 2.0


def _values(name: str, xs) -> list[float]:
    xs = [float(x) for x in xs]
    if not xs:
        raise ValueError(f"{name} must hold at least one value")
    return xs


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error ``sd / sqrt(n)`` (``sd`` with ``n - 1``); the error is ``nan`` for one value."""
    xs = _values("values", values)
    n = len(xs)
    m = sum(xs) / n
    if n == 1:
        return m, math.nan
    var = sum((x - m) ** 2 for x in xs) / (n - 1)
    return m, math.sqrt(var / n)


def binomial_se(p: float, n: int) -> float:
    """Standard error ``sqrt(p (1 - p) / n)`` of a proportion estimated from ``n`` trials."""
    if n < 1:
        raise ValueError(f"n must be a positive number of trials; got {n!r}")
    return math.sqrt(max(p * (1 - p), 0.0) / n)


def error_mean_se(per_seed: Sequence[float], n_prompts: int | None = None) -> tuple[float, float]:
    """Mean over seeds of an error (or any proportion) and its standard error, seeds and prompts counted.

    Args:
        per_seed: one value per seed (a proportion in [0, 1] when ``n_prompts`` is given).
        n_prompts: test prompts behind each value; ``None`` counts the seed spread only.
    """
    xs = _values("per_seed", per_seed)
    m, se_seeds = mean_se(xs)
    se_seeds = 0.0 if math.isnan(se_seeds) else se_seeds
    se_prompts = 0.0
    if n_prompts is not None:
        se_prompts = math.sqrt(sum(binomial_se(p, n_prompts) ** 2 for p in xs) / len(xs)) / math.sqrt(len(xs))
    return m, math.sqrt(se_seeds ** 2 + se_prompts ** 2)


@dataclass(frozen=True)
class Comparison:
    """``a - b`` over seeds with its standard error and the verdict of the 2-SE rule."""

    diff: float
    se: float
    n_seeds: int

    @property
    def significant(self) -> bool:
        """``|a - b| > 2 SE``: the difference may be claimed."""
        return abs(self.diff) > CLAIM_SE * self.se

    @property
    def verdict(self) -> str:
        """``"a > b"``, ``"a < b"`` or ``"not distinguishable at this scale"``."""
        if not self.significant:
            return "not distinguishable at this scale"
        return "a > b" if self.diff > 0 else "a < b"

    def __str__(self) -> str:
        return f"{self.diff:+.4f} ± {self.se:.4f} (SE, {self.n_seeds} seeds): {self.verdict}"


def compare(a: Sequence[float], b: Sequence[float], n_prompts: int | None = None, paired: bool = True) -> Comparison:
    """``mean(a) - mean(b)`` with its standard error (module docstring) for the 2-SE rule.

    Args:
        a, b: per-seed values of the two quantities (same seeds, in the same order, when ``paired``).
        n_prompts: test prompts behind each per-seed proportion (adds the binomial noise of both).
        paired: use the per-seed differences (same seeds for both); else two independent samples.
    """
    a, b = _values("a", a), _values("b", b)
    if paired and len(a) != len(b):
        raise ValueError(f"a paired comparison needs one value per seed in both; got {len(a)} and {len(b)}")
    if paired:
        d = [x - y for x, y in zip(a, b)]
        diff, se_seeds = mean_se(d)
    else:
        (ma, sa), (mb, sb) = mean_se(a), mean_se(b)
        diff, se_seeds = ma - mb, math.sqrt((0 if math.isnan(sa) else sa) ** 2 + (0 if math.isnan(sb) else sb) ** 2)
    se_seeds = 0.0 if math.isnan(se_seeds) else se_seeds
    se_prompts = 0.0
    if n_prompts is not None:
        va = sum(binomial_se(p, n_prompts) ** 2 for p in a) / len(a) ** 2
        vb = sum(binomial_se(p, n_prompts) ** 2 for p in b) / len(b) ** 2
        se_prompts = math.sqrt(va + vb)
    return Comparison(diff=diff, se=math.sqrt(se_seeds ** 2 + se_prompts ** 2), n_seeds=min(len(a), len(b)))
