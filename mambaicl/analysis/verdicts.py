"""The rule of the claims registry: measurements, criteria, claims and computed verdicts.

:mod:`mambaicl.analysis.claims` declares the rows (the paper's words and a criterion fixed in advance);
this module holds what turns a chapter's measurement into a verdict, the same for every row: the
:class:`Measured` summary (95 % t interval over seeds, :mod:`mambaicl.analysis.stats`), the
:class:`Criterion` kinds, :class:`Claim` and its :class:`Judgement`, and :func:`verdict_of` /
:func:`outcome_of`, which ``.ci/results_page.py`` re-applies to ``book/results.json``. The criterion
kinds and the statistical rule are documented in :mod:`mambaicl.analysis.claims`.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Optional, Sequence

from ..checks import ConfigError
from .stats import interval, interval_from_se

__all__ = ["VERDICTS", "KINDS", "Criterion", "Measured", "Claim", "Judgement", "verdict_of", "outcome_of",
           "part_holds", "part_wrong_side", "boundary_margins", "below", "above", "contains", "identity", "diagnostic",
           "all_of", "FIG2_EPSILON"]

VERDICTS = ("identity verified", "reproduced", "partly reproduced", "not reproduced", "contradicted", "diagnostic",
            "beyond the paper")
KINDS = ("below", "above", "contains", "identity", "diagnostic", "all")

#: §4.1: "the classification error of Mamba is smaller than 0.01": the error level the paper's
#: experiments read as the theorems' epsilon (used for Corollary 1's epsilon / (1 - p_a))
FIG2_EPSILON = 0.01
#: §4.1's synthetic setting: M1 = 6 relevant patterns (our Figure 2 preset uses the same)
M1_PAPER = 6


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
    """A measurement: mean, its 95 % interval ``[low, high]``, the number of seeds and the per-seed values."""

    mean: float
    low: float
    high: float
    n_seeds: int
    values: tuple = ()

    @classmethod
    def of(cls, values: Sequence[float], n_prompts: Optional[int] = None) -> "Measured":
        """The book's rule: the 95 % t interval over seeds (``df = seeds - 1``), prompts counted with ``n_prompts``."""
        vals = tuple(float(v) for v in values)
        iv = interval(vals, n_prompts)
        return cls(iv.mean, iv.low, iv.high, len(vals), vals)

    @classmethod
    def from_se(cls, mean: float, se: float, n_seeds: int, values: Sequence[float] = ()) -> "Measured":
        """From a mean and a standard error that already counts every source of noise (t with ``n_seeds - 1`` df;
        with one seed the normal 95 % interval of a sampling standard error)."""
        if n_seeds < 2:
            half = 1.959963984540054 * se
            return cls(float(mean), float(mean - half), float(mean + half), n_seeds, tuple(map(float, values)))
        iv = interval_from_se(float(mean), float(se), int(n_seeds))
        return cls(iv.mean, iv.low, iv.high, int(n_seeds), tuple(map(float, values)))

    @classmethod
    def exact(cls, value: float) -> "Measured":
        """A deterministic quantity (a rounding error): the interval is the value itself."""
        return cls(float(value), float(value), float(value), 1, (float(value),))

    def to_json(self) -> dict:
        return {"mean": _r(self.mean), "low": _r(self.low), "high": _r(self.high), "n_seeds": int(self.n_seeds),
                "values": [_r(v) for v in self.values]}

    @classmethod
    def from_json(cls, d: dict) -> "Measured":
        f = (lambda v: math.nan if v is None else float(v))
        return cls(f(d["mean"]), f(d["low"]), f(d["high"]), int(d["n_seeds"]), tuple(f(v) for v in d.get("values", ())))


def _as_measured(x, n_prompts: Optional[int] = None) -> Measured:
    if isinstance(x, Measured):
        return x
    if hasattr(x, "diff") and hasattr(x, "se") and hasattr(x, "n_seeds"):  # a stats.Comparison
        return Measured.from_se(x.diff, x.se, x.n_seeds)
    if isinstance(x, dict) and "slope" in x:  # an exponent fit: mean and 95 % t interval over per-seed slopes
        return Measured(float(x["slope"]), float(x["low"]), float(x["high"]), len(x.get("per_seed", ())),
                        tuple(map(float, x.get("per_seed", ()))))
    if isinstance(x, (int, float)):
        return Measured.exact(x)
    return Measured.of(list(x), n_prompts)


@dataclass(frozen=True)
class Criterion:
    """A criterion fixed in advance: ``kind`` (:data:`KINDS`), ``threshold`` (the paper's bound or prediction),
    ``text`` (the criterion in words) and, for ``all``, its ``parts``."""

    kind: str
    threshold: Optional[float] = None
    text: str = ""
    parts: tuple = ()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"criterion kind must be one of {KINDS}; got {self.kind!r}")
        if self.kind == "all" and (not self.parts or any(p.kind in ("all", "diagnostic") for p in self.parts)):
            raise ValueError("an 'all' criterion needs parts, none of them 'all' or 'diagnostic'")
        if self.kind in ("below", "above", "contains", "identity") and self.threshold is None:
            raise ValueError(f"a {self.kind!r} criterion needs a threshold")

    def to_json(self) -> dict:
        d = {"kind": self.kind, "threshold": self.threshold, "text": self.text}
        if self.kind == "all":
            d["all"] = [p.to_json() for p in self.parts]
        return d


def below(threshold: float, text: str) -> Criterion:
    return Criterion("below", float(threshold), text)


def above(threshold: float, text: str) -> Criterion:
    return Criterion("above", float(threshold), text)


def contains(value: float, text: str) -> Criterion:
    return Criterion("contains", float(value), text)


def identity(tolerance: float, text: str) -> Criterion:
    return Criterion("identity", float(tolerance), text)


def diagnostic(text: str) -> Criterion:
    return Criterion("diagnostic", None, text)


def all_of(text: str, *parts: Criterion) -> Criterion:
    return Criterion("all", None, text, tuple(parts))


# ------------------------------------------------------------------------------------------ semantics (JSON level)


def _f(v):
    return math.nan if v is None else float(v)


def part_holds(kind: str, threshold, m: dict) -> bool:
    """Whether one criterion holds for one measurement (both as JSON dicts' fields)."""
    t, lo, hi, mean = _f(threshold), _f(m.get("low")), _f(m.get("high")), _f(m.get("mean"))
    if kind == "below":
        return hi < t
    if kind == "above":
        return lo > t
    if kind == "contains":
        return lo <= t <= hi
    if kind == "identity":
        return abs(mean) <= t
    raise ValueError(f"no holds for kind {kind!r}")


def part_wrong_side(kind: str, threshold, m: dict) -> bool:
    """The whole interval lies on the wrong side of the threshold (``below``/``above`` only)."""
    t, lo, hi = _f(threshold), _f(m.get("low")), _f(m.get("high"))
    if kind == "below":
        return lo > t
    if kind == "above":
        return hi < t
    return False


def outcome_of(criterion: dict, measured: dict) -> str:
    """The verdict of ``criterion`` on ``measured`` (JSON dicts, as in ``book/results.json``), by the semantics above."""
    kind = criterion["kind"]
    if kind == "diagnostic":
        return "diagnostic"
    if kind == "identity":
        return "identity verified" if part_holds(kind, criterion["threshold"], measured) else "not reproduced"
    if kind in ("below", "above", "contains"):
        if part_holds(kind, criterion["threshold"], measured):
            return "reproduced"
        return "contradicted" if part_wrong_side(kind, criterion["threshold"], measured) else "not reproduced"
    if kind == "all":
        parts, ms = criterion["all"], measured["all"]
        if len(parts) != len(ms):
            raise ValueError(f"criterion has {len(parts)} parts but {len(ms)} measurements")
        held = [part_holds(p["kind"], p["threshold"], m) for p, m in zip(parts, ms)]
        if all(held):
            return "reproduced"
        if any(held):
            return "partly reproduced"
        if all(part_wrong_side(p["kind"], p["threshold"], m) for p, m in zip(parts, ms)):
            return "contradicted"
        return "not reproduced"
    raise ValueError(f"unknown criterion kind {kind!r}")


def verdict_of(row: dict) -> str:
    """The verdict of one ``book/results.json`` row, recomputed from its ``criterion`` and ``measured``."""
    out = outcome_of(row["criterion"], row["measured"])
    return "beyond the paper" if row["criterion"].get("beyond") else out


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

    def __post_init__(self) -> None:
        # How many seeds a verdict rests on is a fact of the run, recorded by the measurement (``n_seeds``), not
        # a word of the declaration: a count typed here would go stale when a preset's seeds change.
        if re.search(r"\d+\s*seeds?\b", self.tasks):
            raise ConfigError(f"{self.key}: tasks must not state a seed count (the measurement records n_seeds); "
                              f"got {self.tasks!r}")

    def judge(self, per_seed=None, *, parts=None, n_prompts: Optional[int] = None, value=None) -> "Judgement":
        """The verdict of this claim on a measurement.

        Args:
            per_seed: per-seed values of the measured quantity (or a :class:`Measured`, or a Comparison).
            parts: for an ``all`` criterion, one measurement per part, in the criterion's order (each as above).
            n_prompts: test prompts behind each per-seed proportion (counts the prompt sampling).
            value: a single deterministic number (an ``identity`` criterion's deviation).
        """
        c = self.criterion
        if c.kind == "all":
            if parts is None or len(parts) != len(c.parts):
                raise ValueError(f"{self.key}: needs parts= with {len(c.parts)} measurements, one per part")
            ms = [_as_measured(p, n_prompts) for p in parts]
            return Judgement(self, ms, self._verdict(ms))
        if parts is not None:
            raise ValueError(f"{self.key}: a {c.kind!r} criterion takes per_seed= or value=, not parts=")
        if value is not None:
            m = Measured.exact(value)
        elif per_seed is not None:
            m = _as_measured(per_seed, n_prompts)
        else:
            raise ValueError(f"{self.key}: no measurement given")
        return Judgement(self, m, self._verdict(m))

    def _measured_json(self, m) -> dict:
        if isinstance(m, list):
            means = [x.mean for x in m]
            return {"mean": None, "low": None, "high": None, "n_seeds": min(x.n_seeds for x in m), "values": [],
                    "all": [x.to_json() for x in m]} if means else {}
        return m.to_json()

    def _verdict(self, m) -> str:
        return verdict_of({"criterion": self.criterion_json(), "measured": self._measured_json(m)})

    def criterion_json(self) -> dict:
        d = self.criterion.to_json()
        if self.beyond:
            d["beyond"] = True
        return d


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

    def parts_failing(self) -> list:
        """The words of the parts that do not hold (``all`` criteria), for the prose."""
        if self.claim.criterion.kind != "all":
            return []
        return [p.text for p, m in zip(self.claim.criterion.parts, self.measured)
                if not part_holds(p.kind, p.threshold, m.to_json())]

    def glue(self, ours: str) -> None:
        """Glue ``res_<key>_ours`` (our number, as text), ``res_<key>_verdict`` and ``res_<key>_measured`` (JSON).

        Returns ``None``, so a cell that ends with it displays nothing."""
        from ..notebook import glue

        name = self.claim.key.replace("-", "_")
        glue(f"res_{name}_ours", ours)
        glue(f"res_{name}_verdict", self.verdict)
        glue(f"res_{name}_measured", json.dumps(self.measured_json(), sort_keys=True))

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
    from ..experiments.boundary import alpha_limit_lt_d, alpha_limit_mamba_d
    from .theory import alpha_threshold_lt, alpha_threshold_mamba

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
