"""Means, standard errors and the book's one rule for claims.

**The rule: two-sided 95 % t intervals over seeds.** Every claim rests on the two-sided 95 %
interval ``mean ± t_{S-1, 0.975} SE`` over the ``S`` training seeds (Student's t with ``S - 1``
degrees of freedom). A difference is claimed only when its interval excludes 0; a quantity is
below (above) a threshold only when its whole interval is. Otherwise the book reports "not
distinguishable at this scale". Where a verdict rests on several comparisons, every one of them
must hold at 95 % (an intersection-union test, which needs no correction for their number; see
:mod:`mambaicl.analysis.claims`). Both sources of noise are counted in ``SE``:

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

__all__ = ["mean_se", "binomial_se", "error_mean_se", "Comparison", "Contrast", "compare", "contrast", "t_quantile", "Interval",
           "interval", "interval_from_se", "LEVEL", "lower", "upper"]

#: the two-sided level of every interval in the book
LEVEL = 0.95


def t_quantile(df: int, q: float = 0.5 + LEVEL / 2) -> float:
    """Quantile ``q`` of Student's t with ``df`` degrees of freedom (SciPy); ``q`` = 0.975 by default."""
    from scipy.stats import t

    if df < 1:
        raise ValueError(f"df must be a positive integer; got {df!r}")
    return float(t.ppf(q, df))


@dataclass(frozen=True)
class Interval:
    """A mean over ``n`` seeds, its standard error and its two-sided 95 % t interval (``df = n - 1``)."""

    mean: float
    se: float
    low: float
    high: float
    n: int

    def below(self, threshold: float) -> bool:
        """The whole interval lies below ``threshold``."""
        return self.high < threshold

    def above(self, threshold: float) -> bool:
        """The whole interval lies above ``threshold``."""
        return self.low > threshold

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def __str__(self) -> str:
        return f"{self.mean:.4g} [{self.low:.4g}, {self.high:.4g}] (95 %, {self.n} seeds)"


def interval_from_se(mean: float, se: float, n: int) -> Interval:
    """The 95 % t interval ``mean ± t_{n-1} se`` (``n`` seeds); degenerate (``se`` = 0) or ``nan`` as given."""
    if math.isnan(se) or (n < 2 and se > 0):
        return Interval(mean, se, math.nan, math.nan, n)
    if se == 0:
        return Interval(mean, 0.0, mean, mean, n)
    half = t_quantile(n - 1) * se
    return Interval(mean, se, mean - half, mean + half, n)


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


def interval(values: Sequence[float], n_prompts: int | None = None) -> Interval:
    """The 95 % t interval of the mean of per-seed ``values`` (seeds and, with ``n_prompts``, prompts counted)."""
    xs = _values("values", values)
    m, se = error_mean_se(xs, n_prompts) if n_prompts is not None else mean_se(xs)
    return interval_from_se(m, se, len(xs))


@dataclass(frozen=True)
class Comparison:
    """``a - b`` over seeds with its standard error and its 95 % t interval (the book's rule)."""

    diff: float
    se: float
    n_seeds: int

    @property
    def interval(self) -> Interval:
        return interval_from_se(self.diff, self.se, self.n_seeds)

    @property
    def low(self) -> float:
        return self.interval.low

    @property
    def high(self) -> float:
        return self.interval.high

    @property
    def significant(self) -> bool:
        """The 95 % t interval of ``a - b`` excludes 0: the difference may be claimed."""
        iv = self.interval
        return iv.low > 0 or iv.high < 0

    @property
    def verdict(self) -> str:
        """``"a > b"``, ``"a < b"`` or ``"not distinguishable at this scale"``."""
        if not self.significant:
            return "not distinguishable at this scale"
        return "a > b" if self.diff > 0 else "a < b"

    def __str__(self) -> str:
        return (f"{self.diff:+.4f} ± {self.se:.4f} (SE; 95 % [{self.low:+.4f}, {self.high:+.4f}], {self.n_seeds} seeds): "
                f"{self.verdict}")


@dataclass(frozen=True)
class Contrast(Comparison):
    """A :class:`Comparison` of a linear contrast that keeps its per-seed ``values`` (for the registry of claims)."""

    values: tuple = ()


def contrast(terms, n_prompts: int | None = None, scale: float = 1.0) -> Contrast:
    """``sum_i c_i a_i`` over seeds with its standard error and 95 % t interval (module docstring).

    :func:`compare` is its two-term case ``[(1, a), (-1, b)]``. The error adds the seed spread of the
    per-seed contrasts and, with ``n_prompts``, the binomial noise of every term,
    ``sum_i c_i^2 mean_s p_is (1 - p_is) / n / S`` (terms treated as independent).

    Args:
        terms: ``(c_i, per-seed values a_i)`` pairs, all measured on the same ``S`` seeds in the same order.
        n_prompts: test prompts behind each per-seed proportion.
        scale: the unit of the values: a proportion ``p`` is given as ``scale * p`` (100 for percent).
    """
    terms = [(c, _values("terms", v)) for c, v in terms]
    if not terms:
        raise ValueError("terms must hold at least one (coefficient, values) pair")
    S = len(terms[0][1])
    if any(len(v) != S for _, v in terms):
        raise ValueError(f"a contrast needs one value per seed in every term; got lengths {[len(v) for _, v in terms]}")
    values = [sum(c * v[s] for c, v in terms) for s in range(S)]  # (S,) per-seed contrasts
    diff, se_seeds = mean_se(values)
    se_seeds = 0.0 if math.isnan(se_seeds) else se_seeds
    se_prompts = 0.0
    if n_prompts is not None:
        var = sum(c * c * sum(binomial_se(x / scale, n_prompts) ** 2 for x in v) / S ** 2 for c, v in terms)
        se_prompts = scale * math.sqrt(var)
    return Contrast(diff=diff, se=math.sqrt(se_seeds ** 2 + se_prompts ** 2), n_seeds=S, values=tuple(values))


def compare(a: Sequence[float], b: Sequence[float], n_prompts: int | None = None, paired: bool = True) -> Comparison:
    """``mean(a) - mean(b)`` with its standard error and 95 % t interval (module docstring).

    Args:
        a, b: per-seed values of the two quantities (same seeds, in the same order, when ``paired``).
        n_prompts: test prompts behind each per-seed proportion (adds the binomial noise of both).
        paired: use the per-seed differences (same seeds for both, the :func:`contrast` ``[(1, a), (-1, b)]``);
            else two independent samples.
    """
    a, b = _values("a", a), _values("b", b)
    if paired and len(a) != len(b):
        raise ValueError(f"a paired comparison needs one value per seed in both; got {len(a)} and {len(b)}")
    if paired:
        c = contrast([(1, a), (-1, b)], n_prompts)
        return Comparison(diff=c.diff, se=c.se, n_seeds=c.n_seeds)
    (ma, sa), (mb, sb) = mean_se(a), mean_se(b)
    diff, se_seeds = ma - mb, math.sqrt((0 if math.isnan(sa) else sa) ** 2 + (0 if math.isnan(sb) else sb) ** 2)
    se_prompts = 0.0
    if n_prompts is not None:
        va = sum(binomial_se(p, n_prompts) ** 2 for p in a) / len(a) ** 2
        vb = sum(binomial_se(p, n_prompts) ** 2 for p in b) / len(b) ** 2
        se_prompts = math.sqrt(va + vb)
    return Comparison(diff=diff, se=math.sqrt(se_seeds ** 2 + se_prompts ** 2), n_seeds=min(len(a), len(b)))


def lower(mean: float, se: float, n: int) -> float:
    """Lower end of the 95 % t interval ``mean - t_{n-1} se`` (``n`` seeds): the book's "above" test is ``lower > x``."""
    return interval_from_se(mean, se, n).low


def upper(mean: float, se: float, n: int) -> float:
    """Upper end of the 95 % t interval ``mean + t_{n-1} se`` (``n`` seeds): the book's "below" test is ``upper < x``."""
    return interval_from_se(mean, se, n).high
