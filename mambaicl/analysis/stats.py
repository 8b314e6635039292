"""Means, standard errors and the book's one rule for claims.

**The rule: two-sided 95 % t intervals over seeds.** Every claim rests on the two-sided 95 %
interval ``mean ± t_{S-1, 0.975} SE`` over the ``S`` training seeds (Student's t with ``S - 1``
degrees of freedom); :mod:`mambaicl.analysis.verdicts` turns that interval into *holds*, *fails*
or *undecided* for each criterion of the registry of claims.

**One noise term.** ``SE`` counts every source of noise exactly once:

* *own test prompts* (every synthetic experiment: seed ``s`` draws its test prompts from the stream
  ``(s, "test/...")``): a per-seed error is the seed's true error plus its own binomial prompt noise,
  so the seed spread ``SE_seeds = sd / sqrt(S)`` already contains the prompts' part and is the whole
  standard error. ``n_prompts`` only floors it at the binomial part it must contain,
  ``SE_prompts = sqrt(mean_s p_s (1 - p_s) / n / S)`` (the whole error for one seed):
  ``SE = max(SE_seeds, SE_prompts)``;
* *shared test prompts* (``shared=True``: every seed tested on the same prompts): the seed spread
  misses the prompt sampling common to all seeds, whose variance is at most ``p (1 - p) / n``, so
  ``SE^2 = SE_seeds^2 + mean_s p_s (1 - p_s) / n`` (an upper bound of the common part);
* *SST-2's test sentences* are shared by every seed: their common part is the cross-seed covariance
  of the per-sentence residuals (:func:`shared_cluster_se`), added to the seed spread once.

For a difference between two models trained and tested on the same seeds, the per-seed
differences are used (a paired comparison). :func:`clopper_pearson` and :func:`median_iqr` report a
tail: how many seeds fail a per-seed criterion, and the median and quartiles beside the mean.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..checks import ConfigError

__all__ = ["mean_se", "binomial_se", "error_mean_se", "Comparison", "Contrast", "compare", "contrast", "t_quantile", "Interval",
           "interval", "interval_from_se", "LEVEL", "lower", "upper", "clopper_pearson", "median_iqr", "seeds_to_decide",
           "shared_cluster_se", "sign_test", "holm"]

#: the two-sided level of every interval in the book
LEVEL = 0.95


def t_quantile(df: int, q: float = 0.5 + LEVEL / 2) -> float:
    """Quantile ``q`` of Student's t with ``df`` degrees of freedom (SciPy); ``q`` = 0.975 by default."""
    from scipy.stats import t

    if df < 1:
        raise ConfigError(f"df must be a positive integer; got {df!r}")
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
        raise ConfigError(f"{name} must hold at least one value")
    return xs


def _square(x: float) -> float:
    """``x ** 2``, or ``inf`` where it overflows (``**`` raises ``OverflowError`` on floats; a product would give
    ``inf`` but rounds differently from ``**`` in about one case in a thousand)."""
    try:
        return x ** 2
    except OverflowError:
        return math.inf


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error ``sd / sqrt(n)`` (``sd`` with ``n - 1``); the error is ``nan`` for one value."""
    xs = _values("values", values)
    n = len(xs)
    m = sum(xs) / n
    if n == 1:
        return m, math.nan
    var = sum(_square(x - m) for x in xs) / (n - 1)
    return m, math.sqrt(var / n)


def binomial_se(p: float, n: int) -> float:
    """Standard error ``sqrt(p (1 - p) / n)`` of a proportion estimated from ``n`` trials."""
    if n < 1:
        raise ConfigError(f"n must be a positive number of trials; got {n!r}")
    return math.sqrt(max(p * (1 - p), 0.0) / n)


def _prompt_var(xs, n_prompts: int | None, scale: float = 1.0) -> float:
    """The binomial prompt variance of the mean of per-seed proportions ``xs`` (``scale``: their unit)."""
    if n_prompts is None:
        return 0.0
    return sum(binomial_se(x / scale, n_prompts) ** 2 for x in xs) / len(xs) ** 2 * scale ** 2


def _one_term(se_seeds: float, var_prompts: float, shared: bool) -> float:
    """The standard error with the prompts counted once (module docstring): shared prompts add their common part
    to the seed spread; each seed's own prompts are inside the seed spread, which is never read below them."""
    se_seeds = 0.0 if math.isnan(se_seeds) else se_seeds
    return math.sqrt(se_seeds ** 2 + var_prompts if shared else max(se_seeds ** 2, var_prompts))


def error_mean_se(per_seed: Sequence[float], n_prompts: int | None = None, shared: bool = False) -> tuple[float, float]:
    """Mean over seeds of an error (or any proportion) and its standard error, every noise source counted once.

    Args:
        per_seed: one value per seed (a proportion in [0, 1] when ``n_prompts`` is given).
        n_prompts: test prompts behind each value. With each seed's own prompts (the default) the seed spread
            already contains their noise: the error is the seed spread, floored at the binomial part it must
            contain (``sqrt(mean_s p_s (1 - p_s) / n / S)``; the whole error for one seed).
        shared: every seed was tested on the same prompts: their common binomial part is added to the seed spread.
    """
    xs = _values("per_seed", per_seed)
    m, se_seeds = mean_se(xs)
    return m, _one_term(se_seeds, _prompt_var(xs, n_prompts), shared)


def interval(values: Sequence[float], n_prompts: int | None = None, shared: bool = False) -> Interval:
    """The 95 % t interval of the mean of per-seed ``values``, every noise source counted once (:func:`error_mean_se`)."""
    xs = _values("values", values)
    m, se = error_mean_se(xs, n_prompts, shared)
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


def contrast(terms, n_prompts: int | None = None, scale: float = 1.0, shared: bool = False) -> Contrast:
    """``sum_i c_i a_i`` over seeds with its standard error and 95 % t interval (module docstring).

    :func:`compare` is its two-term case ``[(1, a), (-1, b)]``. The error is the seed spread of the
    per-seed contrasts, with the binomial noise of every term (terms treated as independent) counted once
    (:func:`error_mean_se`: a floor for each seed's own prompts, added for prompts ``shared`` by every seed).

    Args:
        terms: ``(c_i, per-seed values a_i)`` pairs, all measured on the same ``S`` seeds in the same order.
        n_prompts: test prompts behind each per-seed proportion.
        scale: the unit of the values: a proportion ``p`` is given as ``scale * p`` (100 for percent).
    """
    terms = [(c, _values("terms", v)) for c, v in terms]
    if not terms:
        raise ConfigError("terms must hold at least one (coefficient, values) pair")
    S = len(terms[0][1])
    if any(len(v) != S for _, v in terms):
        raise ConfigError(f"terms must hold one value per seed in every term (a contrast); got lengths {[len(v) for _, v in terms]}")
    values = [sum(c * v[s] for c, v in terms) for s in range(S)]  # (S,) per-seed contrasts
    diff, se_seeds = mean_se(values)
    se_seeds = 0.0 if math.isnan(se_seeds) else se_seeds
    var = sum(c * c * _prompt_var(v, n_prompts, scale) for c, v in terms)
    return Contrast(diff=diff, se=_one_term(se_seeds, var, shared), n_seeds=S, values=tuple(values))


def compare(a: Sequence[float], b: Sequence[float], n_prompts: int | None = None, paired: bool = True,
            shared: bool = False) -> Comparison:
    """``mean(a) - mean(b)`` with its standard error and 95 % t interval (module docstring).

    Args:
        a, b: per-seed values of the two quantities (same seeds, in the same order, when ``paired``).
        n_prompts: test prompts behind each per-seed proportion (their binomial noise counted once, as in
            :func:`error_mean_se`).
        paired: use the per-seed differences (same seeds for both, the :func:`contrast` ``[(1, a), (-1, b)]``);
            else two independent samples.
    """
    a, b = _values("a", a), _values("b", b)
    if paired and len(a) != len(b):
        raise ConfigError(f"a and b must hold one value per seed each (a paired comparison); got {len(a)} and {len(b)}")
    if paired:
        c = contrast([(1, a), (-1, b)], n_prompts, shared=shared)
        return Comparison(diff=c.diff, se=c.se, n_seeds=c.n_seeds)
    (ma, sa), (mb, sb) = error_mean_se(a, n_prompts, shared), error_mean_se(b, n_prompts, shared)
    return Comparison(diff=ma - mb, se=math.hypot(sa, sb), n_seeds=min(len(a), len(b)))


def lower(mean: float, se: float, n: int) -> float:
    """Lower end of the 95 % t interval ``mean - t_{n-1} se`` (``n`` seeds): the book's "above" test is ``lower > x``."""
    return interval_from_se(mean, se, n).low


def upper(mean: float, se: float, n: int) -> float:
    """Upper end of the 95 % t interval ``mean + t_{n-1} se`` (``n`` seeds): the book's "below" test is ``upper < x``."""
    return interval_from_se(mean, se, n).high


# ------------------------------------------------------------------------------------------ tails and power


def clopper_pearson(k: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided ``level`` interval of a proportion ``k / n``: the ``(1 - level) / 2``
    quantile of Beta(k, n - k + 1) and the ``(1 + level) / 2`` quantile of Beta(k + 1, n - k) (0 and 1 at the ends)."""
    from scipy.stats import beta

    if not (isinstance(n, int) and n >= 1) or not (isinstance(k, int) and 0 <= k <= n):
        raise ConfigError(f"k and n must be integers with 0 <= k <= n and n >= 1; got k={k!r}, n={n!r}")
    a = (1 - level) / 2
    low = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return low, high


def median_iqr(values: Sequence[float]) -> tuple[float, float, float]:
    """Median and the first and third quartiles (linear interpolation between order statistics, NumPy's default)."""
    xs = sorted(_values("values", values))

    def q(p: float) -> float:
        h = (len(xs) - 1) * p
        i = int(math.floor(h))
        return xs[i] + (h - i) * (xs[min(i + 1, len(xs) - 1)] - xs[i])

    return q(0.5), q(0.25), q(0.75)


def seeds_to_decide(se: float, n: int, distance: float, cap: int = 100_000, q: float = 0.5 + LEVEL / 2,
                    se_shared: float = 0.0) -> int | None:
    """The fewest seeds whose t half-width (quantile ``q``: 0.975 by default, the 95 % interval; a part that can
    fail only after Holm's correction asks a higher one), at the spread measured now (``sd = se sqrt(n)``), is
    below ``distance`` (how far the mean sits from the nearest decision point); ``None`` when no number of seeds
    would (a mean exactly on the decision point, or no spread measured), or more than ``cap`` would.

    ``se_shared``: the part of ``se`` that every seed shares and more seeds do not shrink (SST-2's test sentences,
    reused by every seed: :func:`shared_cluster_se`); at ``N`` seeds the standard error is then
    ``sqrt((se² - se_shared²) n / N + se_shared²)``, and ``None`` where the shared part alone keeps the interval
    across the decision point."""
    if not (math.isfinite(se) and se > 0 and n >= 1 and math.isfinite(distance) and distance > 0
            and math.isfinite(se_shared) and se_shared >= 0):
        return None
    if se_shared > 0:
        own = max(se * se - se_shared * se_shared, 0.0) * n  # the seeds' own variance, times n

        def half(N: int) -> float:
            return t_quantile(N - 1, q) * math.sqrt(own / N + se_shared * se_shared)
    else:
        sd = se * math.sqrt(n)

        def half(N: int) -> float:
            return t_quantile(N - 1, q) * sd / math.sqrt(N)
    if half(cap) >= distance:
        return None
    lo, hi = 2, cap  # the half-width falls with the number of seeds: bisect
    while lo < hi:
        mid = (lo + hi) // 2
        if half(mid) < distance:
            hi = mid
        else:
            lo = mid + 1
    return lo


def sign_test(values: Sequence[float], threshold: float = 0.0) -> dict:
    """The exact sign test of per-seed ``values`` against ``threshold`` (McNemar's exact test when each value is a
    paired difference of two 0/1 indicators, e.g. without minus with: only the discordant seeds count).

    Returns ``{"n_pos", "n_neg", "n_ties", "p_above", "p_below"}``: the counts above, below and at ``threshold``
    (ties dropped), and the one-sided exact p-values ``P(Bin(N, 1/2) >= n_pos)`` (evidence that values lie above)
    and ``P(Bin(N, 1/2) >= n_neg)`` (below), ``N = n_pos + n_neg``; both 1 when ``N = 0``."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n_pos = sum(x > threshold for x in xs)
    n_neg = sum(x < threshold for x in xs)
    N = n_pos + n_neg

    def tail(k: int) -> float:  # P(Bin(N, 1/2) >= k), exact
        return 1.0 if N == 0 else sum(math.comb(N, i) for i in range(k, N + 1)) / 2 ** N

    return {"n_pos": n_pos, "n_neg": n_neg, "n_ties": len(xs) - N, "p_above": tail(n_pos), "p_below": tail(n_neg)}


def holm(p_values: Sequence[float], level: float) -> list:
    """Holm's step-down adjusted p-values of ``p_values`` (``None`` entries are not in the family and stay
    ``None``): the ``i``-th smallest of ``k`` is ``max_{j <= i} min(1, (k - j) p_(j))`` (0-based ``j``); a hypothesis
    is rejected at family level ``level`` when its adjusted p-value is at most ``level``."""
    idx = [i for i, p in enumerate(p_values) if p is not None]
    k = len(idx)
    order = sorted(idx, key=lambda i: p_values[i])
    adj, run = [None] * len(p_values), 0.0
    for rank, i in enumerate(order):
        run = max(run, min(1.0, (k - rank) * float(p_values[i])))
        adj[i] = run
    return adj


def shared_cluster_se(resid, n_prompts: int, scale: float = 1.0) -> float:
    """The standard error of a seed-averaged proportion that comes from test items (SST-2's sentences) *shared by
    every seed*, each noise source counted once.

    ``resid[s][j]``: seed ``s``'s sum over its ``n_prompts`` prompts on item ``j`` of ``correct - accuracy`` (one
    prompt set per seed, items reused by all seeds). Each seed's own prompt noise is already in the seed spread;
    what the seeds share is the items' effect, whose variance is the cross-seed covariance of the per-item
    residuals, ``J/(J-1) sum_{s != s'} sum_j r_sj r_s'j / (S (S-1) n^2)`` (clipped at 0). With one seed nothing
    separates the two parts and the whole cluster variance ``J/(J-1) sum_j r_j^2 / n^2`` is returned.
    """
    import torch

    r = torch.stack([torch.as_tensor(x, dtype=torch.float64) for x in resid]) / n_prompts  # (S, J)
    S, J = r.shape
    fix = J / max(J - 1, 1)
    if S == 1:
        return scale * math.sqrt(fix * float((r[0] * r[0]).sum()))
    tot = r.sum(0)  # (J,)
    cross = float((tot * tot).sum() - (r * r).sum()) / (S * (S - 1))
    return scale * math.sqrt(max(fix * cross, 0.0))
