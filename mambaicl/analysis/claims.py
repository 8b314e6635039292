"""The registry of claims: every row of "Results at a glance", declared once, before any chapter runs.

Each :class:`Claim` holds the paper's statement (quoted, with its section), the quantity the book
measures, the task set and preset it is measured on, the statistical test, and a
:class:`Criterion` whose threshold or predicted value comes from the paper's text, never from our
measurement. A chapter computes the measurement (per-seed values) and hands it to the registry,
``CLAIMS[key].judge(per_seed=[...])`` or, for a claim of several parts,
``CLAIMS[key].judge(parts=[[...], [...]])``; the verdict is computed here and the chapter glues it
with :meth:`Judgement.glue`. No chapter writes or chooses a verdict.

**The statistical rule** (the only one in the book, :mod:`mambaicl.analysis.stats`): every measured
quantity is summarised by its two-sided 95 % interval from Student's t with ``seeds - 1`` degrees of
freedom, the test-prompt sampling counted (``n_prompts``). A quantity measured once with a sampling
standard error (one PCA fit, one timing) uses the normal 95 % interval. A claim of several parts
requires *every* part (an intersection-union test: each part at 95 % gives the conjunction a level
of at most 5 %, so no Holm correction is needed); the verdict says which parts fail.

**Criterion kinds** (the semantics :func:`verdict_of` implements and ``book/results.json`` records):

``below``      holds when ``high < threshold``; contradicted when ``low > threshold``
``above``      holds when ``low > threshold``; contradicted when ``high < threshold``
``contains``   holds when ``low <= threshold <= high`` (a predicted value, e.g. an exponent)
``identity``   holds when ``|mean| <= threshold`` (a rounding tolerance): ``identity verified``
``diagnostic`` no verdict: a breakdown that explains another row
``all``        every part holds: ``reproduced``; some: ``partly reproduced``; none: ``not reproduced``,
               or ``contradicted`` when every part's interval lies entirely on the wrong side

A single ``below``/``above``/``contains`` criterion gives ``reproduced``, ``contradicted`` (wrong
side) or ``not reproduced``. A claim of ours (``beyond=True``) keeps the verdict ``beyond the
paper``; its own criterion, declared here in advance, and whether it held are recorded as
``outcome``.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

from .stats import interval, interval_from_se

__all__ = ["VERDICTS", "KINDS", "Criterion", "Measured", "Claim", "Judgement", "CLAIMS", "verdict_of", "outcome_of",
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


# ------------------------------------------------------------------------------------------ the rows

_T = "95 % t interval over seeds (df = seeds - 1), test prompts counted"
_T_PARTS = _T + "; every part must hold (intersection-union, no Holm correction needed)"
_SST = ("95 % t interval over seeds of the per-seed contrast (df = seeds - 1), binomial noise of the test prompts "
        "counted; every part must hold. The test sentences are reused across prompts and seeds: their sampling is "
        "not yet counted by a cluster standard error (see the chapter)")
_EPS_COR1 = FIG2_EPSILON / (1 - 0.6)  # Corollary 1's epsilon / (1 - p_a) at Figure 2's p_a = 0.6


def _lemma4_parts() -> tuple:
    from ..experiments.dynamics import FACTORS, LEMMA_PREDICTED

    names = {"lemma4_v": "v*ᵀw rate", "lemma4_mu": "(μ_j,0)w rate", "lemma4_ratio": "rate ratio μ/v"}
    factors = {"lr": "η", "one_minus_p_a": "1−p_a", "beta": "β", "M1": "M1", "l_tr": "l_tr"}
    return tuple(contains(LEMMA_PREDICTED[n][f], f"{label} ∝ {factors[f]}^{LEMMA_PREDICTED[n][f]:g}")
                 for n, label in names.items() for f in FACTORS)


def _cor1_parts(model: str) -> tuple:
    return (above(1.0, f"{model}: same-pattern sum >= Θ(1) (above 1)"),) + tuple(
        below(_EPS_COR1, f"{model}, {g}: signed other/same <= ε/(1−p_a) = {_EPS_COR1:g}")
        for g in ("training", "reversed", "distance 2", "distance 3"))


_ROWS = [
    Claim("eq3-closed-form", "ch01_selective_scan",
          "Eq. (3) from Eq. (1) (App. 11.1): one-layer Mamba = gated linear attention",
          "the one-layer Mamba ... can be written as F(Ψ; P) = Σ_i G_{i,l+1}(w) y_i p_i^T W_B^T W_C p_query "
          "(Eq. (3), derived from the recurrence Eq. (1))", "§2, App. 11.1",
          "largest |recurrence − closed form| over every output entry (float64)", "random prompts, float64",
          "deterministic: rounding tolerance", identity(1e-10, "|recurrence − closed form| ≤ 1e-10 (float64 rounding)")),
    Claim("lemma4-gradient", "ch01_selective_scan", "Gradient of the gate in the proof of Lemma 4 (App. 11.3)",
          "the gradient of the loss with respect to w (proof of Lemma 4)", "App. 11.3",
          "largest |paper's expression − autograd| (float64)", "random prompts, float64",
          "deterministic: rounding tolerance", identity(1e-12, "|analytic − autograd| ≤ 1e-12 (float64 rounding)")),
    Claim("definitions", "ch02_data_model", "Data model: Eq. (4)-(5), Definitions 1-2, Condition 1",
          "a training prompt P ~ D with l_tr context examples is constructed as follows ... (Definition 1)",
          "§3.2, Definitions 1-2",
          "largest violation of the exact properties: clean labels follow the task, the query carries no outlier",
          "20,000 training prompts of Figure 2's setting", "deterministic: exact properties",
          identity(1e-12, "clean labels follow the task and queries are clean: violation ≤ 1e-12")),
    Claim("ch3-lemma3", "ch03_training_dynamics", "Lemma 3: W_B, W_C along relevant patterns during training",
          "the same-pattern component grows at least as η(1−p_a)β/M1 per step; for j' not forming a training task "
          "with j the component receives no gradient", "App. 9, Lemma 3",
          "per-seed changes of W_B's components over training; log-log exponents of the growth rate",
          "Chapter 3 base setting and sweeps (DYNAMICS preset)", _T_PARTS,
          all_of("grows along the same pattern, falls for training partners, zero for pairs that never meet; rate ∝ η/M1",
                 above(0, "same pattern: final − initial > 0"),
                 below(0, "training partners: change < 0"),
                 contains(0, "never-meeting pairs: change = 0 (no gradient)"),
                 contains(1, "growth rate ∝ η^1"),
                 contains(-1, "growth rate ∝ M1^-1"))),
    Claim("ch3-lemma45", "ch03_training_dynamics", "Lemmas 4-5: the two phases of the gate vector w",
          "v*_s^T w^(t) ≲ −ηβ²tκ_a(1−p_a)/V ...; w^(t)T p_i ≲ −log M1 for p_i that contains a v*_s, "
          "and ≳ −Θ(1) for p_i that does not", "App. 9, Lemmas 4-5",
          "log-log exponents of the early rates (15, each against its prediction); late outlier and clean logits",
          "Chapter 3 sweeps (DYNAMICS preset)", _T_PARTS,
          all_of("every early-rate exponent as Lemma 4 predicts (15); late outlier logit below −log M1, clean above it",
                 *_lemma4_parts(),
                 below(-math.log(M1_PAPER), "late outlier logit < −log M1"),
                 above(-math.log(M1_PAPER), "late clean logit > −log M1"))),
    Claim("ch3-lemma6", "ch03_training_dynamics", "Lemma 6: the distance-weighted gate sum",
          "Σ_{i=1}^l G_{i,l+1}(w^(t))(l−i+1) ≤ Θ(1)", "App. 9, Lemma 6",
          "exponent in l_tr of the early-phase max of Σ_i G_i (l−i+1)", "Chapter 3 sweeps", _T,
          diagnostic("no verdict: the bound already holds at initialisation (Σ_i G_i = 1 − Π(1−σ) < 1 and the "
                     "gates decay geometrically), so training does not test it; the exponent in l_tr is reported")),
    Claim("ch3-theorem1", "ch03_training_dynamics",
          "Theorem 1 as a scaling law: Mamba's iterations against η, 1−p_a, β, M1, l_tr",
          "after T ≥ T_M = Θ(η^-1 (1−p_a)^-1 β^-2 M1) iterations", "§3.3, Theorem 1, Eq. (2)",
          "log-log exponents of the iterations to the loss target, per seed", "Chapter 3 sweeps (5 seeds)", _T_PARTS,
          all_of("each exponent's interval contains the theorem's",
                 contains(-1, "η^-1"), contains(-1, "(1−p_a)^-1"), contains(-2, "β^-2"), contains(1, "M1^1"),
                 contains(0, "l_tr^0"))),
    Claim("ch3-theorem3", "ch03_training_dynamics",
          "Theorem 3 as a scaling law: the linear Transformer's iterations, and T_M/T_T",
          "after T ≥ T_T = Θ(η^-1 (1−p_a)^-1 β^-2 l_tr^-1 M1) iterations ... we have E[ℓ] ≤ ε",
          "§3.4, Theorem 3, Remark 4",
          "log-log exponents of the linear Transformer's iterations; exponent of T_M/T_T in l_tr; its final loss",
          "Chapter 3 sweeps (5 seeds)", _T_PARTS,
          all_of("each exponent contains the theorem's, T_M/T_T ∝ l_tr, and the loss reaches the target",
                 contains(-1, "η^-1"), contains(-1, "(1−p_a)^-1"), contains(-2, "β^-2"), contains(1, "M1^1"),
                 contains(-1, "l_tr^-1"), contains(1, "T_M/T_T ∝ l_tr^1"),
                 below(FIG2_EPSILON, "final training loss (hinge) ≤ ε = 0.01 at the base setting"))),
    Claim("fig2-mamba", "ch04_robustness", "Fig. 2 (§4.1): one-layer Mamba, all 30 tasks, rules A/B/C",
          "the classification error of Mamba is smaller than 0.01 even when α is close to 0.8", "§4.1, Figure 2",
          "test error at α = 0.8, per seed", "all 30 tasks of 𝒯 (§2: the error is computed across all tasks), FIG2 preset",
          _T_PARTS,
          all_of("error at α = 0.8 below 0.01 under each rule",
                 below(0.01, "rule A (flipped)"), below(0.01, "rule B (targeted)"), below(0.01, "rule C (random)"))),
    Claim("fig2-mamba-18", "ch04_robustness",
          "Fig. 2: one-layer Mamba on the 18 tasks whose patterns met in training or sit opposite on the cycle",
          "the classification error of Mamba is smaller than 0.01 even when α is close to 0.8", "§4.1, Figure 2",
          "test error at α = 0.8 on 18 of the 30 tasks", "18 tasks chosen after the fact, FIG2 preset", _T,
          diagnostic("no verdict: a breakdown of the all-task row (the paper averages over all tasks, §2)")),
    Claim("fig2-lt", "ch04_robustness", "Fig. 2: one-layer linear Transformer",
          "the classification error of linear Transformers is large as long as α > 1/2", "§4.1, Figure 2",
          "per seed: linear Transformer's error minus Mamba's (all tasks), at each α > 1/2 and rule; its error at α = 0",
          "all 30 tasks, FIG2 preset", _T_PARTS,
          all_of("above Mamba at every α > 1/2 under every rule (smallest per-seed difference), fine without outliers",
                 above(0, "smallest over (rule, α > 1/2) of linear − Mamba"),
                 below(0.01, "error at α = 0 below 0.01 (worst rule)"))),
    Claim("fig2-merged", "ch04_robustness", "Fig. 2 with W = W_B^T W_C trained as one matrix (merged product)",
          "(not in the paper: the paper trains W_B and W_C separately)", "§2 Eq. (3) (our variant)",
          "per seed, merged minus the paper's parametrisation, error at α = 0 (worst rule)", "all 30 tasks, FIG2 preset",
          _T, below(0, "the merged product errs less than the paper's parametrisation at α = 0 under every rule"),
          beyond=True),
    Claim("breakdown", "ch07_beyond", "Theorems 2(c) and 4(c): where each model breaks down",
          "(c) α < min(1, p_a l_tr/l_ts), and (d) l_ts ≳ (1−α)^-1 log M1 [Mamba]; (c) α ∈ [0, 1/2), "
          "(d) l_ts ≥ max{Θ((1−α)^-1), Θ(α/(0.5−α)²)} log M1 [linear Transformer] — sufficient conditions "
          "(§3.4: the comparison 'is made between sufficient conditions')", "§3.3-3.4, Theorems 2 and 4",
          "per seed, the smallest margin over the 25 (p_a, l_ts) cells of the measured boundary α* (error level of "
          "the BOUNDARY preset) above the boundary the theorems guarantee (conditions (c) and (d), constants 1)",
          "all 30 tasks, BOUNDARY preset (3 seeds)", _T_PARTS,
          all_of("neither model breaks down inside its guarantee",
                 above(0, "Mamba: α* − min(1, p_a l_tr/l_ts, 1 − log M1/l_ts) > 0 in every cell"),
                 above(0, "linear Transformer: α* − min(1/2, Thm 4(d) limit) > 0 in every cell"))),
    Claim("thm4d", "ch04_robustness", "Theorem 4(d): examples the linear Transformer needs as α → 1/2",
          "l_ts ≥ max{Θ((1−α)^-1), Θ(α/(0.5−α)^2)} log M1", "§3.4, Theorem 4(d), Eq. (3)",
          "per seed, the ratio of the prompt lengths needed for error 0.1 at α = 0.4 and α = 0.3",
          "all tasks, FIG2 linear Transformers", _T,
          contains((0.4 / 0.1 ** 2) / (0.3 / 0.2 ** 2),
                   "ratio = (0.4/0.1²)/(0.3/0.2²) = 5.33 (the statement's α/(½−α)² branch)")),
    Claim("cor1", "ch05_mechanism", "Corollary 1 (one layer): attention sums over same-pattern and other examples",
          "Σ_{i∈N1} p̃_i^T W_B^T W_C p̃_query ≥ Θ(1); Σ_{i∉N1} ... ≤ Θ(ε/(1−p_a))", "§3.5, Corollary 1, Eq. (6)",
          "per seed: the same-pattern sum; the signed other/same ratio per task group",
          "one layer, ONE_LAYER preset, all four task groups (the same for the three-layer row)", _T_PARTS,
          all_of("same ≥ 1 and, in every task group, signed other/same ≤ ε/(1−p_a) with ε = 0.01 (§4.1)",
                 *_cor1_parts("one layer"))),
    Claim("cor2i", "ch05_mechanism", "Corollary 2(i) (one layer): gates of outlier examples",
          "G_{i,l_ts+1}(w^(T)) ≤ O(poly(M1)^-1) on examples with outliers", "§3.5, Corollary 2, Eq. (7)",
          "per seed, median outlier gate / median clean gate", "one layer, ONE_LAYER preset", _T,
          below(1 / M1_PAPER, "outlier/clean gate < 1/M1 = 1/6")),
    Claim("cor2ii", "ch05_mechanism", "Corollary 2(ii) (one layer): gates of clean examples by distance",
          "G_{h(j),l_ts+1}(w^(T)) ≥ Θ(1/2^{j−1})", "§3.5, Corollary 2, Eq. (8)",
          "per seed, the fitted factor by which clean gates fall per clean example", "one layer, ONE_LAYER preset", _T,
          above(0.5, "clean gates fall by less than a factor 1/2 per clean example (decay factor > 1/2)")),
    Claim("three-layer-error", "ch05_mechanism", "Where a three-layer Mamba's test error comes from (by task group)",
          "(not in the paper)", "§4.1 (three-layer Mamba, our breakdown)",
          "test error by task group", "FIG3 preset", _T,
          diagnostic("no verdict: a breakdown of the three-layer rows by task group")),
    Claim("fig3", "ch05_mechanism", "Fig. 3 (§4.1): first-layer attention sums of a three-layer Mamba",
          "the sum of attention scores on the examples with the same pattern as the query is significantly larger "
          "than that on examples with other patterns, and this gap increases during training. This verifies "
          "Corollary 1", "§4.1, Figure 3",
          "per seed, layer 1: gap growth; the same-pattern sum; signed other/same per task group",
          "three layers, FIG3 preset, all four task groups (as the one-layer row)", _T_PARTS,
          all_of("the gap grows, and Corollary 1's criterion (as for one layer) in layer 1",
                 above(0, "three layers: same − other grows over training"),
                 *_cor1_parts("three layers"))),
    Claim("gate-figure", "ch05_mechanism", "Gate figure (§4.1, α = 0.3): first-layer gates",
          "the first-layer gating values with α = 0.3 of outlier-containing examples are very small (red bars), "
          "while those of clean examples are relatively large and exhibit an approximately exponential decay",
          "§4.1, gate figure; Corollary 2",
          "per seed, layer 1: median outlier/clean gate; decay factor of clean gates", "three layers, FIG3 preset",
          _T_PARTS,
          all_of("outlier gates very small (Cor. 2(i)) and clean gates decay no faster than 1/2 (Cor. 2(ii))",
                 below(1 / M1_PAPER, "outlier/clean gate < 1/M1"),
                 above(0.5, "decay factor > 1/2"))),
    Claim("app-figs45", "ch05_mechanism", "App. Figs. 4–5: layers 2 and 3",
          "The results of attention scores and gating values in the other two layers exhibit the same trend as the "
          "first layer", "§4.1, App. 8.1 Figures 4-5",
          "per seed, layers 2 and 3: same − other; outlier/clean gate", "three layers, FIG3 preset", _T_PARTS,
          all_of("same > other and outlier gates very small, in layers 2 and 3",
                 above(0, "layer 2: same − other > 0"), below(1 / M1_PAPER, "layer 2: outlier/clean gate < 1/M1"),
                 above(0, "layer 3: same − other > 0"), below(1 / M1_PAPER, "layer 3: outlier/clean gate < 1/M1"))),
    Claim("rmsnorm", "ch05_mechanism", "RMSNorm and the gate mechanism in three layers",
          "(not in the paper)", "§4.1 (our variant)",
          "per seed, whether some layer suppresses outliers (gate ratio < 1/M1): without minus with RMSNorm",
          "FIG3 and FIG3_NONE presets", _T,
          above(0, "more seeds suppress outliers without normalisation than with it"), beyond=True),
    Claim("locality", "ch05_mechanism", "The cost of locality: outliers far from (FQ) or close to (CQ) the query",
          "Mamba is more sensitive to the position of outliers ... when outliers are placed close to the query, the "
          "clean examples ... are pushed farther away, and the gating values ... decay exponentially",
          "§4.2, App. Table 2",
          "per seed, CQ minus FQ test error", "one layer (the paper's model) and three layers, α = 0.3", _T_PARTS,
          all_of("CQ errs more than FQ, for the paper's one-layer model and for three layers",
                 above(0, "one layer: CQ − FQ > 0"), above(0, "three layers: CQ − FQ > 0"))),
    Claim("sst2-main", "ch06_sst2", "SST-2 main table (§4.2): 3 layers, 2 heads, p_a = 0.25, α = 0.75, FQ / R / CQ",
          "Mamba's performance in the scenario of FQ and R placements is clearly better than that of the linear "
          "Transformer. However, Mamba is more sensitive to the position of outliers, whereas the linear Transformer "
          "(LT) is much less affected", "§4.2, main table",
          "per-seed accuracy contrasts (points)", "SST-2, confident regime, MAIN_TABLE (3 seeds)", _SST,
          all_of("Mamba above LT under FQ and R; Mamba drops under CQ, more than LT; LT unaffected by CQ",
                 above(0, "Mamba − LT, FQ"), above(0, "Mamba − LT, R"), above(0, "Mamba FQ − CQ"),
                 above(0, "Mamba's CQ drop − LT's"), contains(0, "LT FQ − CQ = 0 (much less affected)"))),
    Claim("sst2-table1", "ch06_sst2", "App. Table 1: linear Transformer with H = 1…4 heads (α = 0.5)",
          "increasing the number of heads to H = 2 slightly improves the performance of the linear Transformer, but "
          "H = 3, 4 degrade the performance", "App. 8.1, Table 1",
          "per-seed accuracy contrasts (points, mean over FQ, R, CQ)", "SST-2, confident regime, TABLE_1", _SST,
          all_of("H = 2 above H = 1; H = 3 and H = 4 below H = 2",
                 above(0, "H2 − H1"), below(0, "H3 − H2"), below(0, "H4 − H2"))),
    Claim("sst2-table2", "ch06_sst2", "App. Table 2 (α = 0.5): Mamba, linear and softmax Transformers",
          "the performance of softmax attention is better than linear attention and close to Mamba. Meanwhile, there "
          "is no significant [drop] ... under CQ", "App. 8.1, Table 2",
          "per-seed accuracy contrasts (points)", "SST-2, confident regime, TABLE_2", _SST,
          all_of("softmax above linear; Mamba drops under CQ; softmax does not; Mamba's drop exceeds softmax's",
                 above(0, "softmax − linear"), above(0, "Mamba FQ − CQ"), contains(0, "softmax FQ − CQ = 0"),
                 above(0, "Mamba's CQ drop − softmax's"))),
    Claim("sst2-tables3-4", "ch06_sst2", "App. Tables 3–4: α = 0.4 … 0.8, softmax and linear Transformers",
          "compared with the linear Transformer, the softmax Transformer avoids the sharp [drop]", "App. 8.1, Tables 3-4",
          "per-seed accuracy contrasts (points, mean over placements)", "SST-2, confident regime, TABLE_2 alphas", _SST,
          all_of("linear falls more than softmax from α = 0.4 to 0.8, and softmax less than half as much",
                 above(0, "linear fall − softmax fall"), above(0, "half the linear fall − softmax fall"))),
    Claim("sst2-curriculum", "ch06_sst2", "App. 8.1: the CQ curriculum (R first, CQ second half)",
          "we first train on data where outliers appear at random positions, and in the second half of training, we "
          "switch all data to the CQ data ... indicating that the low accuracy of CQ is mitigated", "App. 8.1",
          "per seed, CQ accuracy with the curriculum minus without (points)", "SST-2, confident regime, CURRICULUM",
          _SST, above(0, "the curriculum raises Mamba's CQ accuracy")),
    Claim("sst2-table5", "ch06_sst2", "App. Table 5: PCA components 5 / 7 / 10 / all",
          "when keeping the top few principal components, i.e., 10 out of 768 in total, the classification "
          "performance using these principal components is already close to the baseline", "App. 8.2, Table 5",
          "our all-minus-10 accuracy gap minus the paper's 1.15 points (one probe fit; SE over test sentences)",
          "SST-2 dev, all-MiniLM-L6-v2", "normal 95 % interval of the sampling SE over test sentences (one fit)",
          contains(0, "our gap between all components and the top 10 equals the paper's (80.05 − 78.90 = 1.15)")),
    Claim("boundary", "ch07_beyond",
          "Where the robustness boundary lies: α* over a grid of p_a and l_ts (Theorems 2(c), 4(c))",
          "(c) α < min(1, p_a l_tr/l_ts) ... which can be close to 1 if ... p_a l_tr/l_ts ≥ 1", "§3.3, Remark 3",
          "per seed, Mamba's α* at the longest minus the shortest l_ts (mean over p_a)", "BOUNDARY preset (3 seeds)", _T,
          above(0, "α* rises with l_ts (condition (c) predicts it falls)"), beyond=True),
    Claim("gates", "ch07_beyond", "Which gates give robustness: App. 12's gate families on Figure 2's task",
          "Our theoretical analysis can be extended to a broader range of SSM or Linear RNN architectures",
          "App. 12", "per seed, error at α = 0.8 of the decay-only gates (smallest) minus 1/2", "GATES preset (3 seeds)",
          _T, above(0.5, "every decay-only or fixed gate follows the flipped majority (error > 1/2) at α = 0.8"),
          beyond=True),
    Claim("multiclass", "ch07_beyond", "Multi-class with C = 2, 4, 8 classes (App. 13, Eq. 36)",
          "Our theoretical analysis can be extended from binary classification to a basic setting of "
          "multi-classification problems", "App. 13",
          "per seed, Mamba minus linear Transformer error, C = 8, α = 0.6", "MULTICLASS preset (3 seeds)", _T,
          below(0, "Mamba errs less than the linear Transformer at C = 8, α = 0.6"), beyond=True),
    Claim("regression", "ch07_beyond", "Regression with outliers (App. 14; Park et al.'s finding cited in Remark 6)",
          "This conclusion is consistent with the empirical findings of [22], which observed that Mamba outperforms "
          "linear Transformers in many-outlier regression tasks", "§3.4 (Theorem 4 discussion), App. 14",
          "per seed, Mamba minus linear squared error at α = 0.8 (App. 14 setting)", "REGRESSION preset (3 seeds)", _T,
          below(0, "Mamba's squared error below the linear Transformer's at α = 0.8 (App. 14)"), beyond=True),
    Claim("mamba1-mechanism", "appendix_mamba1", "A standard Mamba-1 stack: Corollaries 1–2 probed",
          "(not in the paper: App. 8's three-layer models with a Mamba-1 block)", "App. 8 (our variant)",
          "per seed, layer 1 median outlier/clean gate", "MAMBA1 preset (5 seeds)", _T,
          below(1 / M1_PAPER, "the Mamba-1 gate suppresses outliers (outlier/clean gate < 1/M1)"), beyond=True),
    Claim("mamba1-speed", "appendix_mamba1", "Mamba-1 training step: fast scan vs the plain loop (and mambapy)",
          "(not in the paper)", "(engineering)", "speed-up of the fast scan over the plain loop (one timing)",
          "this build's machine", "one timing: no interval",
          diagnostic("no verdict: a timing on this build's machine")),
]

CLAIMS = {c.key: c for c in _ROWS}
if len(CLAIMS) != len(_ROWS):
    raise RuntimeError("duplicate claim keys")
