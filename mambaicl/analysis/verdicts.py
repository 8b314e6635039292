"""The rule of the claims registry: measurements, criteria, claims and computed verdicts.

:mod:`mambaicl.analysis.claims` declares the rows (the paper's words and a criterion fixed in advance);
this module holds what turns a chapter's measurement into a verdict, the same for every row: the
:class:`Measured` summary (95 % t interval over seeds, :mod:`mambaicl.analysis.stats`), the
:class:`Criterion` kinds, :class:`Claim` and its :class:`Judgement`; the rule on JSON rows, :func:`verdict_of` /
:func:`outcome_of`, which ``.ci/results_page.py`` re-applies to ``book/results.json``, lives in
:mod:`mambaicl.analysis.outcomes` and is re-exported here. The criterion
kinds and the statistical rule are documented in :mod:`mambaicl.analysis.claims`.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Optional, Sequence

from ..checks import ConfigError
from .outcomes import (FAMILY_LEVEL, KINDS, SIDES, TESTS, VERDICTS, annotate, decides_toward,  # noqa: F401  (re-exported)
                       decision_points, outcome_of, p_fail, part_holds, part_outcome, part_outcomes, part_wrong_side,
                       row_outcomes, seeds_needed, verdict_from_outcomes, verdict_of)
from .stats import interval, interval_from_se

__all__ = ["VERDICTS", "KINDS", "SIDES", "Criterion", "Measured", "Failing", "Claim", "Judgement", "verdict_of",
           "outcome_of", "part_outcome", "part_outcomes", "row_outcomes", "part_holds", "part_wrong_side",
           "verdict_from_outcomes", "boundary_margins", "annotate", "p_fail", "decides_toward", "sign_test_of",
           "below", "above", "within", "identity", "diagnostic", "all_of", "FIG2_EPSILON", "EXPONENT_MARGIN",
           "RATIO_MARGIN", "ACCURACY_MARGIN"]


#: §4.1: "the classification error of Mamba is smaller than 0.01": the error level the paper
#: reads as the theorems' epsilon (used for Corollary 1's epsilon / (1 - p_a))
FIG2_EPSILON = 0.01
#: §4.1's synthetic setting: M1 = 6 relevant patterns (our Figure 2 preset uses the same)
M1_PAPER = 6
#: The margin of every predicted exponent, stated once. The paper states orders (Θ, ≲, ≳) whose hidden factors
#: include slowly varying ones (its conditions carry log M1 and log ε^-1, Lemma 4's rates a second, i²-summed
#: term). One logarithmic factor log x bends a fitted power law's slope by 1 / ln x: about 0.3 at the top of our
#: sweeps (x ≈ 30), more below. We take a quarter power, a little under one such factor's bend where it is
#: smallest: an exponent within 0.25 of the paper's is its prediction, one wholly beyond is not.
EXPONENT_MARGIN = 0.25
#: The relative margin of a predicted ratio of two Θ(·) quantities with the same hidden constant: a quarter of the
#: ratio, the exponent margin's counterpart (an exponent off by 0.25 on a factor that changes by e moves the ratio
#: by e^0.25 - 1 ≈ 28 %).
RATIO_MARGIN = 0.25
#: SST-2 (App. 8): the paper calls a 1.15-point gap "already close" (App. Table 5) and reads differences of 0.1 to
#: 0.3 points as "no significant drop" (App. Table 2); "close", "unaffected" and "no significant drop" are read as
#: within 2 points, a little under twice the largest gap it calls close.
ACCURACY_MARGIN = 2.0


def _r(x):
    """Round for the JSON record (6 significant digits; nan and inf as None)."""
    if x is None:
        return None
    x = float(x)
    if not math.isfinite(x):
        return None
    return float(f"{x:.6g}")


@dataclass(frozen=True)
class Measured:
    """A measurement: mean, its 95 % interval ``[low, high]``, the number of seeds and the per-seed values; where
    part of its standard error is shared by every seed (SST-2's reused test sentences), that part, ``se_fixed``,
    which more seeds do not shrink (:func:`mambaicl.analysis.outcomes.seeds_needed`)."""

    mean: float
    low: float
    high: float
    n_seeds: int
    values: tuple = ()
    se_fixed: Optional[float] = None

    @classmethod
    def of(cls, values: Sequence[float], n_prompts: Optional[int] = None) -> "Measured":
        """The book's rule: the 95 % t interval over seeds (``df = seeds - 1``), each noise source counted once
        (:func:`mambaicl.analysis.stats.error_mean_se`: ``n_prompts`` counts only where there is no seed spread)."""
        vals = tuple(float(v) for v in values)
        iv = interval(vals, n_prompts)
        return cls(iv.mean, iv.low, iv.high, len(vals), vals)

    @classmethod
    def from_se(cls, mean: float, se: float, n_seeds: int, values: Sequence[float] = (),
                se_fixed: Optional[float] = None) -> "Measured":
        """From a mean and a standard error that already counts every source of noise (t with ``n_seeds - 1`` df;
        with one seed the normal 95 % interval of a sampling standard error); ``se_fixed``: the part of it every
        seed shares."""
        fixed = None if se_fixed is None else float(se_fixed)
        if n_seeds < 2:
            half = 1.959963984540054 * se
            return cls(float(mean), float(mean - half), float(mean + half), n_seeds, tuple(map(float, values)), fixed)
        iv = interval_from_se(float(mean), float(se), int(n_seeds))
        return cls(iv.mean, iv.low, iv.high, int(n_seeds), tuple(map(float, values)), fixed)

    @classmethod
    def exact(cls, value: float) -> "Measured":
        """A deterministic quantity (a rounding error): the interval is the value itself."""
        return cls(float(value), float(value), float(value), 1, (float(value),))

    def to_json(self) -> dict:
        d = {"mean": _r(self.mean), "low": _r(self.low), "high": _r(self.high), "n_seeds": int(self.n_seeds),
             "values": [_r(v) for v in self.values]}
        if self.se_fixed is not None:
            d["se_fixed"] = _r(self.se_fixed)
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Measured":
        f = (lambda v: math.nan if v is None else float(v))
        return cls(f(d["mean"]), f(d["low"]), f(d["high"]), int(d["n_seeds"]), tuple(f(v) for v in d.get("values", ())),
                   None if d.get("se_fixed") is None else f(d["se_fixed"]))


def _as_measured(x, n_prompts: Optional[int] = None) -> Measured:
    if isinstance(x, Measured):
        return x
    if hasattr(x, "diff") and hasattr(x, "se") and hasattr(x, "n_seeds"):  # a stats.Comparison
        return Measured.from_se(x.diff, x.se, x.n_seeds, getattr(x, "values", ()))
    if isinstance(x, dict) and "slope" in x:  # an exponent fit: mean and 95 % t interval over per-seed slopes
        return Measured(float(x["slope"]), float(x["low"]), float(x["high"]), len(x.get("per_seed", ())),
                        tuple(map(float, x.get("per_seed", ()))))
    if isinstance(x, (int, float)):
        return Measured.exact(x)
    return Measured.of(list(x), n_prompts)


@dataclass(frozen=True)
class Criterion:
    """A criterion fixed in advance: ``kind`` (:data:`KINDS`), ``threshold`` (the paper's bound, or its predicted
    value for ``within``), ``text`` (the criterion in words), for ``within`` its ``margin`` and, for a one-sided
    bound of the paper, ``side`` (only that side can fail), and for ``all`` its ``parts``; ``test`` is ``"t"`` (the
    95 % t interval, default) or ``"sign"`` (the exact sign test of the per-seed values against ``threshold``, for
    below/above: McNemar's exact test on paired 0/1 indicators)."""

    kind: str
    threshold: Optional[float] = None
    text: str = ""
    parts: tuple = ()
    margin: Optional[float] = None
    side: Optional[str] = None
    test: str = "t"

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ConfigError(f"criterion kind must be one of {KINDS}; got {self.kind!r}")
        if self.kind == "all" and (not self.parts or any(p.kind in ("all", "diagnostic") for p in self.parts)):
            raise ConfigError("parts must be non-empty for an 'all' criterion, none of them 'all' or 'diagnostic'")
        if self.kind in ("below", "above", "within", "identity") and self.threshold is None:
            raise ConfigError(f"threshold must be a number for a {self.kind!r} criterion; got None")
        if self.kind == "within" and not (self.margin is not None and self.margin >= 0):
            raise ConfigError(f"margin must be a number >= 0 for a 'within' criterion; got {self.margin!r}")
        if self.side is not None and (self.kind != "within" or self.side not in SIDES):
            raise ConfigError(f"side must be one of {SIDES}, for a 'within' criterion only; got {self.side!r}")
        if self.test not in TESTS or (self.test == "sign" and self.kind not in ("below", "above")):
            raise ConfigError(f"test must be one of {TESTS} ('sign' for a below/above criterion only); got {self.test!r}")

    def to_json(self) -> dict:
        d = {"kind": self.kind, "threshold": self.threshold, "text": self.text}
        if self.test != "t":
            d["test"] = self.test
        if self.kind == "within":
            d["margin"] = self.margin
            if self.side:
                d["side"] = self.side
        if self.kind == "all":
            d["all"] = [p.to_json() for p in self.parts]
        return d


def below(threshold: float, text: str) -> Criterion:
    """Holds when the whole interval is below ``threshold``, fails when it is wholly above."""
    return Criterion("below", float(threshold), text)


def above(threshold: float, text: str) -> Criterion:
    """Holds when the whole interval is above ``threshold``, fails when it is wholly below."""
    return Criterion("above", float(threshold), text)


def within(value: float, margin: float, text: str, side: Optional[str] = None) -> Criterion:
    """A predicted value with its margin. Two-sided: holds when the interval lies inside ``[value - margin,
    value + margin]``, fails when it lies wholly outside. ``side="above"`` (the paper: at least about ``value``) or
    ``"below"`` (at most about ``value``): only ``value - margin`` (resp. ``value + margin``) is a decision point."""
    return Criterion("within", float(value), text, margin=float(margin), side=side)


def sign_test_of(kind: str, threshold: float, text: str) -> Criterion:
    """``below``/``above`` ``threshold`` judged by the exact sign test of the per-seed values (McNemar's exact test for
    paired differences of 0/1 indicators): holds when the one-sided exact p-value of "above" (resp. "below") is
    under 2.5 %, fails when that of the other side is (after Holm across the row)."""
    if kind not in ("below", "above"):
        raise ConfigError(f"kind must be 'below' or 'above' for a sign test; got {kind!r}")
    return Criterion(kind, float(threshold), text, test="sign")


def identity(tolerance: float, text: str) -> Criterion:
    return Criterion("identity", float(tolerance), text)


def diagnostic(text: str) -> Criterion:
    return Criterion("diagnostic", None, text)


def all_of(text: str, *parts: Criterion) -> Criterion:
    return Criterion("all", None, text, tuple(parts))


@dataclass(frozen=True)
class Failing:
    """What a failing seed is, declared with a robustness row: a seed whose own value does not meet ``threshold``
    on the paper's side (``None``: each part's own threshold), e.g. an error at α = 0.8 of at least ε = 0.01."""

    text: str
    threshold: Optional[float] = None

    def fails(self, part: Criterion, value: float) -> bool:
        """Whether one seed's ``value`` fails ``part`` (on the wrong side of, or at, a decision point; not finite)."""
        p = part.to_json()
        if self.threshold is not None:
            p["threshold"] = self.threshold
        a, b = decision_points(p)
        return not (math.isfinite(value) and a < value < b)


# ------------------------------------------------------------------------------------------ claims


@dataclass(frozen=True)
class Claim:
    """One row of the results page, declared in advance."""

    key: str
    chapter: str
    item: str
    quote: str  # the paper's words
    section: str  # where the paper says it
    quantity: str  # what the book measures
    tasks: str  # task set and preset
    test: str  # the statistical test
    criterion: Criterion
    beyond: bool = False  # a finding of ours (verdict "beyond the paper"; the criterion says whether it held)
    failing: Optional[Failing] = None  # a robustness row: what a failing seed is (the tail is reported)

    def __post_init__(self) -> None:
        # How many seeds a verdict rests on is a fact of the run, recorded by the measurement (``n_seeds``), not
        # a word of the declaration: a count typed here would go stale when a preset's seeds change.
        if re.search(r"\d+\s*seeds?\b", self.tasks):
            raise ConfigError(f"{self.key}: tasks must not state a seed count (the measurement records n_seeds); "
                              f"got {self.tasks!r}")
        if self.failing is not None and self.criterion.kind in ("identity", "diagnostic"):
            raise ConfigError(f"{self.key}: a failing seed needs a below/above/within criterion")

    @property
    def parts(self) -> tuple:
        """The criterion's parts (a single criterion is its own one part)."""
        return self.criterion.parts if self.criterion.kind == "all" else (self.criterion,)

    def judge(self, per_seed=None, *, parts=None, n_prompts: Optional[int] = None, value=None) -> "Judgement":
        """The verdict of this claim on a measurement.

        Args:
            per_seed: per-seed values of the measured quantity (or a :class:`Measured`, or a Comparison).
            parts: for an ``all`` criterion, one measurement per part, in the criterion's order (each as above).
            n_prompts: test prompts behind each per-seed proportion (each seed draws its own, so they count only
                where there is no seed spread: :func:`mambaicl.analysis.stats.error_mean_se`).
            value: a single deterministic number (an ``identity`` criterion's deviation).
        """
        c = self.criterion
        if c.kind == "all":
            if parts is None or len(parts) != len(c.parts):
                raise ConfigError(f"{self.key}: parts must hold {len(c.parts)} measurements, one per part of the 'all' criterion")
            ms = [_as_measured(p, n_prompts) for p in parts]
            return Judgement(self, ms, self._verdict(ms))
        if parts is not None:
            raise ConfigError(f"{self.key}: parts must be None for a {c.kind!r} criterion (give per_seed= or value=)")
        if value is not None:
            m = Measured.exact(value)
        elif per_seed is not None:
            m = _as_measured(per_seed, n_prompts)
        else:
            raise ConfigError(f"{self.key}: per_seed or value must be given (no measurement)")
        return Judgement(self, m, self._verdict(m))

    def _part_json(self, part: Criterion, m: Measured) -> dict:
        d = m.to_json()
        if part.kind in ("diagnostic", "identity"):
            return d
        if self.failing is not None and len(m.values) == m.n_seeds and m.n_seeds >= 1:
            d["tail"] = tail(m.values, [self.failing.fails(part, v) for v in m.values])
        return d

    def _measured_json(self, m) -> dict:
        """The measurement as JSON, with what the rule derives (:func:`annotate`: each part's ``holds`` with Holm
        across the row, ``p_fail``, ``p_holm``, ``seeds_to_decide`` and ``decides_toward``)."""
        if isinstance(m, list):
            raw = {"mean": None, "low": None, "high": None, "n_seeds": min(x.n_seeds for x in m), "values": [],
                   "all": [self._part_json(p, x) for p, x in zip(self.criterion.parts, m)]} if m else {}
        else:
            raw = self._part_json(self.criterion, m)
        return annotate(self.criterion.to_json(), raw) if raw else raw

    def _verdict(self, m) -> str:
        return verdict_of({"criterion": self.criterion_json(), "measured": self._measured_json(m)})

    def criterion_json(self) -> dict:
        d = self.criterion.to_json()
        if self.beyond:
            d["beyond"] = True
        if self.failing is not None:
            d["failing_seed"] = {"text": self.failing.text, "threshold": self.failing.threshold}
        return d


def tail(values: Sequence[float], failed: Sequence[bool]) -> dict:
    """The tail of a robustness row: the failing seeds ``k`` of ``n`` with their Clopper-Pearson 95 % interval, and
    the median and quartiles of the per-seed values (:mod:`mambaicl.analysis.stats`)."""
    from .stats import clopper_pearson, median_iqr

    k, n = int(sum(bool(f) for f in failed)), len(values)
    lo, hi = clopper_pearson(k, n)
    med, q1, q3 = median_iqr(values) if all(math.isfinite(v) for v in values) else (math.nan,) * 3
    return {"failing": k, "n": n, "low": _r(lo), "high": _r(hi), "median": _r(med), "q1": _r(q1), "q3": _r(q3)}


def tail_text(t: dict, mean: float, digits: int = 3) -> str:
    """``k/n seeds fail (95 % CP [lo, hi])`` and, when the median differs from the mean, ``median m [IQR q1, q3]``."""
    text = f"{t['failing']}/{t['n']} seeds fail (95 % Clopper-Pearson [{t['low']:.2f}, {t['high']:.2f}])"
    med = t.get("median")
    if med is not None and math.isfinite(mean) and f"{med:.{digits}g}" != f"{mean:.{digits}g}":
        text += f"; median {med:.{digits}g} [IQR {t['q1']:.{digits}g}, {t['q3']:.{digits}g}]"
    return text


@dataclass
class Judgement:
    """A claim's verdict on one measurement; :meth:`glue` hands ours, the verdict and the measurement to the page."""

    claim: Claim
    measured: object  # Measured, or a list of Measured for an "all" criterion
    verdict: str

    @property
    def outcome(self) -> str:
        """What the criterion gave (for a claim of ours, whether its own criterion held)."""
        return outcome_of(self.claim.criterion.to_json(), self.measured_json())

    def measured_json(self) -> dict:
        return self.claim._measured_json(self.measured)

    def _part_jsons(self) -> list:
        m = self.measured_json()
        return m["all"] if self.claim.criterion.kind == "all" else [m]

    def outcomes(self) -> list:
        """Each part's outcome: ``True`` holds, ``False`` fails (after Holm across the row), ``None`` undecided."""
        return [m.get("holds") if p.kind != "identity" else part_outcome(p.to_json(), m)
                for p, m in zip(self.claim.parts, self._part_jsons())]

    def parts_failing(self) -> list:
        """The words of the parts that do not hold (``all`` criteria), for the prose: a part that fails as it is
        written, an undecided one followed by " (undecided)" so the prose never calls it a failure."""
        if self.claim.criterion.kind != "all":
            return []
        return [p.text + ("" if o is False else " (undecided)")
                for p, o in zip(self.claim.parts, self.outcomes()) if o is not True]

    def parts_holding(self) -> list:
        """The words of the parts that hold (``all`` criteria)."""
        return [p.text for p, o in zip(self.claim.parts, self.outcomes()) if o is True]

    def parts_failed(self) -> list:
        """The words of the parts that fail (the whole interval on the wrong side)."""
        return [p.text for p, o in zip(self.claim.parts, self.outcomes()) if o is False]

    def parts_undecided(self) -> list:
        """``(words, seeds that would decide it at the measured spread or None, "holds" / "fails" / None: the side
        those seeds would decide it toward)`` of each undecided part."""
        return [(p.text, m.get("seeds_to_decide"), m.get("decides_toward"))
                for p, m, o in zip(self.claim.parts, self._part_jsons(), self.outcomes()) if o is None]

    def tails(self) -> list:
        """Each part's tail (failing seeds, Clopper-Pearson interval, median and quartiles) when the row declares a
        failing seed; ``None`` for a part without per-seed values."""
        return [m.get("tail") for m in self._part_jsons()]

    def __str__(self) -> str:
        return self.verdict


def boundary_margins(alpha_star, p_as, l_tss, l_tr: int, M1: int, kind: str) -> list:
    """Per seed, the smallest margin over the cells of ``alpha*[j][k][s]`` above the boundary the paper allows.

    Mamba (Theorem 2): ``alpha < min(1, p_a l_tr / l_ts)`` (condition (c)) and
    ``l_ts >~ (1 - alpha)^-1 log M1`` (condition (d), constant 1), so the threshold of a cell is
    ``min(1, p_a l_tr/l_ts, 1 - log M1 / l_ts)``. Linear Transformer (Theorem 4): ``alpha < 1/2`` and
    ``l_ts >= alpha / (1/2 - alpha)^2 log M1`` (constant 1). Both conditions are sufficient: a margin
    above 0 in every cell is what the theorems guarantee; a negative one is a failure of a guarantee.
    """
    from .theory import alpha_limit_lt_d, alpha_limit_mamba_d, alpha_threshold_lt, alpha_threshold_mamba

    S = len(alpha_star[0][0])
    out = []
    for s in range(S):
        margins = []
        for j, p_a in enumerate(p_as):
            for k, l_ts in enumerate(l_tss):
                if kind == "linear":
                    thr = min(alpha_threshold_lt(), alpha_limit_lt_d(int(l_ts), M1))
                else:
                    thr = min(alpha_threshold_mamba(p_a, l_tr, l_ts), alpha_limit_mamba_d(int(l_ts), M1))
                margins.append(alpha_star[j][k][s] - thr)
        out.append(min(margins))
    return out
