"""The registry of claims: every row of "Results at a glance", declared once, before any chapter runs.

Each :class:`Claim` holds the paper's statement (quoted, with its section), the quantity the book
measures, the task set and preset it is measured on, the statistical test, and a
:class:`Criterion` whose threshold or predicted value comes from the paper's text, never from our
measurement. An experiment's result says which claims it measures and how (``Result.claims()``: claim key →
:class:`ClaimParts`, the keyword inputs of :meth:`Claim.judge` and the row's "ours" text, computed from the
stored measurements); :func:`judge_all` judges them here, and a chapter glues what came back
(:func:`mambaicl.notebook.glue_claims`), as ``python -m mambaicl judge`` does from the result store
(:mod:`mambaicl.experiments.book`). No chapter writes or chooses a verdict.

**The statistical rule** (the only one in the book, :mod:`mambaicl.analysis.stats`): every measured
quantity is summarised by its two-sided 95 % interval from Student's t with ``seeds - 1`` degrees of
freedom, each noise source counted once (each seed draws its own test prompts, so the seed spread
already contains them; SST-2's shared test sentences are added once). A quantity measured once with a
sampling standard error (one PCA fit, one timing) uses the normal 95 % interval.

**Three outcomes per criterion** (:func:`verdicts.row_outcomes`), from the interval ``[low, high]``:

``below t``      holds when ``high < t``; fails when ``low > t`` (and Holm, below); otherwise undecided
``above t``      holds when ``low > t``; fails when ``high < t`` (and Holm, below); otherwise undecided
``within v ± m`` a predicted value with its margin (declared here, from the paper's words): holds when the
                 interval lies inside ``[v − m, v + m]``, fails when it lies wholly outside, otherwise
                 undecided. ``side="above"`` / ``"below"``: a one-sided bound, rate bound or sufficient
                 condition of the paper, judged one-sided (only ``v − m``, resp. ``v + m``, decides); a
                 sufficient count's exponent can fail only on the side its factor's limit fixes (``_sufficient``;
                 the Θ scaling-law reading is kept in separate ``*-theta`` rows)
``test="sign"``  a below/above part on per-seed 0/1 indicators (or their paired differences) judged by the
                 exact sign test (McNemar's exact test) instead of the t interval (:func:`verdicts.sign_test_of`)
``identity``     holds when ``|mean| <= threshold`` (a rounding tolerance): ``identity verified``
``diagnostic``   no verdict: a breakdown that explains another row
``all``          the claim's parts, each judged as above

**Holm before "fails".** A part fails only when, besides its interval lying wholly on the wrong side, its
one-sided p-value of failing (``p_fail``, stored per part) survives Holm's step-down correction at family level
2.5 % one-sided across the row's judged parts (``p_holm`` at most 0.025); otherwise it is undecided.

**A claim's verdict from its parts** (a single criterion is one part): all hold → ``reproduced``; all
fail → ``contradicted``; some hold and some fail → ``partly reproduced``; some fail and none holds →
``not reproduced``; none fails but not all hold → ``undecided`` (the results page names the undecided
parts, toward which side more seeds would decide each and about how many, and nothing where more seeds
cannot decide it). Requiring every part to hold is an intersection-union test: each part at 2.5 % one-sided
gives the conjunction a level of at most 2.5 %, so "holds" needs no correction; "fails" has Holm's. A claim of
ours (``beyond=True``) keeps the verdict ``beyond the paper``; its own criterion, declared here in advance, and
what it gave are recorded as ``outcome``.

**Margins, declared once** (:mod:`mambaicl.analysis.verdicts`): :data:`EXPONENT_MARGIN` for every predicted
exponent, :data:`RATIO_MARGIN` (relative) for a predicted ratio, :data:`ACCURACY_MARGIN` for SST-2's
"close" / "unaffected". A constant the paper leaves open (Θ(1), ≳, poly(M1)) is set to 1 only where the
criterion's text says so.

**Failing seeds.** A robustness row declares what a failing seed is (:class:`Failing`: the paper's ε or the
row's own threshold); the row then reports the failing count k/n with its Clopper–Pearson 95 % interval and
the median and interquartile range beside the mean.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from ..checks import ConfigError
from .theory import EARLY_FACTORS, FACTORS, LEMMA_PREDICTED, alpha_limit_lt_d, alpha_limit_mamba_d, alpha_threshold_lt
from .verdicts import (ACCURACY_MARGIN, EXPONENT_MARGIN, FIG2_EPSILON, KINDS, M1_PAPER, RATIO_MARGIN,  # noqa: F401
                       VERDICTS, Claim, Criterion, Failing, Judgement, Measured, above, all_of, below, boundary_margins,
                       diagnostic, identity, outcome_of, part_holds, part_outcome, part_outcomes, part_wrong_side,
                       row_outcomes, seeds_needed, sign_test_of, tail_text, verdict_from_outcomes, verdict_of, within)

__all__ = ["COR1_BOUND", "ClaimParts", "judge_all", "ours_text", "OUTCOME", "VERDICTS", "KINDS", "Criterion", "Measured", "Failing",
           "Claim", "Judgement", "CLAIMS", "verdict_of", "outcome_of", "part_outcome", "part_outcomes", "row_outcomes",
           "part_holds", "part_wrong_side", "verdict_from_outcomes", "seeds_needed", "sign_test_of",
           "tail_text", "boundary_margins", "below", "above", "within", "identity", "diagnostic", "all_of",
           "FIG2_EPSILON", "EXPONENT_MARGIN", "RATIO_MARGIN", "ACCURACY_MARGIN"]

# ------------------------------------------------------------------------------------------ the rows

_T = "95 % t interval over seeds (df = seeds - 1); each seed's own test prompts are inside the seed spread"
_T_PARTS = (_T + "; every part must hold (intersection-union); a part fails only when its one-sided p-value survives "
            "Holm's step-down across the row's parts at 2.5 %")
_SIGN_PARTS = ("exact one-sided sign test of the per-seed 0/1 differences (McNemar's exact test: only discordant seeds "
               "count) for the indicator parts, the 95 % t interval for the others; every part must hold; a part "
               "fails only after Holm's step-down across the row's parts at 2.5 %")
_SST = ("95 % t interval over seeds of the per-seed contrast (df = seeds - 1); its standard error adds to the seed "
        "spread (which holds each seed's own prompts) the part the seeds share through the reused test sentences, "
        "the cross-seed covariance of the per-sentence residuals (query sentence as the cluster), recorded as se_fixed: "
        "more seeds do not shrink it, so an undecided part's seeds to decide count only the seed spread's share, and "
        "none is given where the shared part alone keeps the interval across the decision point; every part "
        "must hold")
_SIGN_CONTINUOUS = ("exact one-sided sign test of the per-seed paired differences (seed s of one stack against seed s "
                    "of the other); every part must hold; a part fails only after Holm's step-down across the row's "
                    "parts at 2.5 %")
#: the training p_a of the models Corollary 1 is measured on (§4.1: "We use a three-layer Mamba. p_a = 0.4"; the
#: one-layer ONE_LAYER preset trains at the same p_a)
_P_A_MECHANISM = 0.4
#: Corollary 1's ε/(1−p_a) (Eq. (6)) at §4.1's ε = 0.01 and the mechanism models' p_a = 0.4: 1/60 (issue 41; it was
#: read at Figure 2's p_a = 0.6, 0.025, before)
COR1_BOUND = _EPS_COR1 = FIG2_EPSILON / (1 - _P_A_MECHANISM)
#: the guaranteed boundaries of the row breakdown's declared cells (constants 1; M1 = 6 as in the BOUNDARY preset)
_MAMBA_D10 = alpha_limit_mamba_d(10, 6)  # Theorem 2 at l_ts = 10 with r >= 1: condition (d) binds
_LT_D60 = min(alpha_threshold_lt(), alpha_limit_lt_d(60, 6))  # Theorem 4 at l_ts = 60


#: Lemma 4's v*ᵀw rate is a bound on its size (v*ᵀw ≲ −ηβ²tκ_a(1−p_a)/V: the rate is at least that), which with a
#: constant independent of the factors constrains an exponent on one side only: the side the factor's own limit
#: fixes (η and 1−p_a shrink towards 0, so the rate's exponent is at most the bound's; β, M1 and l_tr grow, so at
#: least). (μ_j,0)w is a Θ (two-sided). Their ratio μ/v is then bounded above, with the opposite sides.
_GROWS = {"lr": False, "one_minus_p_a": False, "beta": True, "M1": True, "l_tr": True}
_FACTOR_WORDS = {"lr": "η", "one_minus_p_a": "1−p_a", "beta": "β", "M1": "M1", "l_tr": "l_tr"}


def _lemma4_part(name: str, factor: str) -> Criterion:
    v, f = LEMMA_PREDICTED[name][factor], _FACTOR_WORDS[factor]
    label = {"lemma4_v": "v*ᵀw rate", "lemma4_mu": "(μ_j,0)w rate", "lemma4_ratio": "rate ratio μ/v"}[name]
    if name == "lemma4_mu":
        return within(v, EXPONENT_MARGIN, f"{label} ∝ {f}^{v:g} ± {EXPONENT_MARGIN:g} (Θ: two-sided)")
    at_least = _GROWS[factor] == (name == "lemma4_v")  # a lower bound (v) bites as the factor grows; an upper (ratio) too
    side, rel = ("above", "≥") if at_least else ("below", "≤")
    bound = "lower bound on v*ᵀw's rate" if name == "lemma4_v" else "v's lower bound makes the ratio an upper bound"
    return within(v, EXPONENT_MARGIN, f"{label}: exponent of {f} {rel} {v:g} {'−' if at_least else '+'} "
                  f"{EXPONENT_MARGIN:g} (one-sided: {bound})", side=side)


def _lemma4_parts(early: bool = False) -> tuple:
    return tuple(_lemma4_part(n, f) for n in ("lemma4_v", "lemma4_mu", "lemma4_ratio")
                 for f in (EARLY_FACTORS if early else FACTORS))


def _exponent(value: float, text: str) -> Criterion:
    """A predicted exponent of a Θ(·) scaling law (two-sided, :data:`EXPONENT_MARGIN`)."""
    return within(value, EXPONENT_MARGIN, f"{text} ± {EXPONENT_MARGIN:g}")


#: Theorems 1 and 3 (and Theorem 4(d)) state sufficient conditions with free constants (Remark 1): the count T* that
#: a run needs is at most C·T(x) for a constant C independent of the factors x. With a free C a finite range of x
#: constrains nothing; the bound bites in the limit each factor moves toward in the theorems' regime, where T*/T(x)
#: must stay bounded: η ≤ 1 and 1−p_a shrink toward 0, β ≥ 1, M1 and l_tr grow. With T* ∝ x^b and T ∝ x^e,
#: T*/T ∝ x^(b−e) stays bounded as x → 0 only if b ≥ e, and as x → ∞ only if b ≤ e. A sufficient count fails only
#: when the measured exponent lies wholly beyond e on that side (by more than EXPONENT_MARGIN); a count that grows
#: more slowly than T holds. The Θ scaling-law reading (two-sided) is kept as separate rows (``*-theta``).
_TOWARD_INFINITY = {"η": False, "1−p_a": False, "β": True, "M1": True, "l_tr": True}


def _sufficient(value: float, factor: str, text: str) -> Criterion:
    """A predicted exponent of a sufficient count (one-sided: only growing faster than the bound, in the factor's
    limit, can fail)."""
    up = _TOWARD_INFINITY[factor]
    limit = "∞" if up else "0"
    bound = value + EXPONENT_MARGIN if up else value - EXPONENT_MARGIN
    return within(value, EXPONENT_MARGIN, f"{text}: exponent {'≤' if up else '≥'} {bound:g} (a sufficient count: "
                  f"measured count / bound stays bounded as {factor} → {limit})", side="below" if up else "above")


def _cor1_parts(model: str) -> tuple:
    """Corollary 1 (Eq. (6)) as linear contrasts per seed and task group (issue 41: a per-seed ratio other/same has
    a denominator that can approach 0 or change sign). Eq. (6) bounds the same-pattern sum below by Θ(1) and the
    other-pattern sum above by Θ(ε/(1−p_a)); with both Θ constants read as the one the same sum measures, the second
    bound is ``other ≤ ε/(1−p_a)·same``, i.e. the contrast ``other − ε/(1−p_a)·same ≤ 0``: one-sided, on the side
    the paper states. For the distance-3 pairs, which never meet in a training task, App. 10.2 bounds the absolute
    value of a different pattern's score, so that part is ``|other| − ε/(1−p_a)·same ≤ 0``."""
    c = f"ε/(1−p_a) = 0.01/(1−0.4) = {_EPS_COR1:.4g}"
    return (above(1.0, f"{model}: same-pattern sum ≥ Θ(1), the Θ's constant set to 1 (above 1)"),) + tuple(
        below(0.0, f"{model}, {g}: other − ε/(1−p_a)·same ≤ 0 per seed (Eq. (6)'s upper bound on the other-pattern "
                   f"sum, its Θ(1) the measured same sum; one-sided), {c}")
        for g in ("training", "reversed", "distance 2")) + (
        below(0.0, f"{model}, distance 3 (patterns that never meet in training): |other| − ε/(1−p_a)·same ≤ 0 per "
                   f"seed (App. 10.2 bounds the absolute value), {c}"),)


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
          all_of("grows along the same pattern, falls for training partners, zero for pairs that never meet; the "
                 "growth at least ∝ η/M1 (Eq. (10), a lower bound: one-sided)",
                 above(0, "same pattern: final − initial > 0"),
                 below(0, "training partners: change < 0"),
                 within(0, 0.25, "never-meeting pairs: change = 0 ± 0.25 (no gradient; 0.25 is a quarter of the "
                                 "order-one growth Lemma 3 gives the same pattern by T_M, App. 10)"),
                 within(1, EXPONENT_MARGIN, f"growth rate: exponent of η ≤ 1 + {EXPONENT_MARGIN:g} (Eq. (10) is a "
                                            "lower bound; η → 0)", side="below"),
                 within(-1, EXPONENT_MARGIN, f"growth rate: exponent of M1 ≥ −1 − {EXPONENT_MARGIN:g} (Eq. (10) is a "
                                             "lower bound; M1 grows)", side="above"))),
    Claim("ch3-lemma45", "ch03_training_dynamics", "Lemmas 4-5: the two phases of the gate vector w",
          "v*_s^T w^(t) ≲ −ηβ²tκ_a(1−p_a)/V ...; w^(t)T p_i ≲ −log M1 for p_i that contains a v*_s, "
          "and ≳ −Θ(1) for p_i that does not", "App. 9, Lemmas 4-5",
          "log-log exponents of the early rates (15, each against its prediction); late outlier and clean logits",
          "Chapter 3 sweeps (DYNAMICS preset)", _T_PARTS,
          all_of("every early-rate exponent as Lemma 4 states (15; v's a bound, one-sided); late outlier logit below "
                 "−log M1, clean above it",
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
          "log-log exponents of the iterations to the loss target, per seed", "Chapter 3 sweeps (DYNAMICS preset)", _T_PARTS,
          all_of("each exponent on the side the sufficient condition allows (T ≥ T_M: the measured count grows no "
                 f"faster than T_M in each factor's limit, margin {EXPONENT_MARGIN:g})",
                 _sufficient(-1, "η", "η^-1"), _sufficient(-1, "1−p_a", "(1−p_a)^-1"), _sufficient(-2, "β", "β^-2"),
                 _sufficient(1, "M1", "M1^1"), _sufficient(0, "l_tr", "l_tr^0"))),
    Claim("ch3-theorem1-theta", "ch03_training_dynamics",
          "Theorem 1 read as a Θ scaling law (the paper's Θ; the statement itself is a sufficient condition: row "
          "ch3-theorem1)",
          "T_M = Θ(η^-1 (1−p_a)^-1 β^-2 M1)", "§3.3, Theorem 1, Eq. (2); Remark 1",
          "log-log exponents of the iterations to the loss target, per seed (the measurement of row ch3-theorem1)",
          "Chapter 3 sweeps (DYNAMICS preset)", _T_PARTS,
          all_of(f"Θ reading: each exponent within {EXPONENT_MARGIN:g} of the theorem's (two-sided)",
                 _exponent(-1, "η^-1"), _exponent(-1, "(1−p_a)^-1"), _exponent(-2, "β^-2"), _exponent(1, "M1^1"),
                 _exponent(0, "l_tr^0"))),
    Claim("ch3-theorem3", "ch03_training_dynamics",
          "Theorem 3 as a scaling law: the linear Transformer's iterations, and T_M/T_T",
          "after T ≥ T_T = Θ(η^-1 (1−p_a)^-1 β^-2 l_tr^-1 M1) iterations ... we have E[ℓ] ≤ ε",
          "§3.4, Theorem 3, Remark 4",
          "log-log exponents of the linear Transformer's iterations; exponent of T_M/T_T in l_tr; its final loss",
          "Chapter 3 sweeps (DYNAMICS preset)", _T_PARTS,
          all_of("each exponent on the side the sufficient condition allows (T ≥ T_T: the measured count grows no "
                 f"faster than T_T in each factor's limit, margin {EXPONENT_MARGIN:g}), T_M/T_T ∝ l_tr, and the loss "
                 "reaches the target",
                 _sufficient(-1, "η", "η^-1"), _sufficient(-1, "1−p_a", "(1−p_a)^-1"), _sufficient(-2, "β", "β^-2"),
                 _sufficient(1, "M1", "M1^1"), _sufficient(-1, "l_tr", "l_tr^-1"),
                 _exponent(1, "T_M/T_T ∝ l_tr^1 (Remark 4's Θ; a ratio of two sufficient counts has no one-sided "
                              "reading: two-sided)"),
                 below(FIG2_EPSILON, "final training loss (hinge) ≤ ε = 0.01 at the base setting"))),
    Claim("ch3-theorem3-theta", "ch03_training_dynamics",
          "Theorem 3 and Remark 4 read as Θ scaling laws (the paper's Θ; the statement itself is a sufficient "
          "condition: row ch3-theorem3)",
          "T_T = Θ(η^-1 (1−p_a)^-1 β^-2 l_tr^-1 M1) ... the required number of training iterations for Mamba is T_M, "
          "which equals Θ(l_tr)·T_T", "§3.4, Theorem 3, Remark 4; Remark 1",
          "log-log exponents of the linear Transformer's iterations; exponent of T_M/T_T in l_tr (the measurement of "
          "row ch3-theorem3)", "Chapter 3 sweeps (DYNAMICS preset)", _T_PARTS,
          all_of(f"Θ reading: each exponent within {EXPONENT_MARGIN:g} of the theorem's (two-sided), and T_M/T_T ∝ "
                 "l_tr (a ratio of two sufficient counts has no one-sided reading)",
                 _exponent(-1, "η^-1"), _exponent(-1, "(1−p_a)^-1"), _exponent(-2, "β^-2"), _exponent(1, "M1^1"),
                 _exponent(-1, "l_tr^-1"), _exponent(1, "T_M/T_T ∝ l_tr^1"))),
    Claim("lemma4-early", "ch03_training_dynamics",
          "Lemma 4's early rates measured over the whole early horizon (small step size)",
          "when t ≲ min{η^-1β^-2κ_a^-1(1−p_a)^-1V, ...}: v*_s^T w^(t) ≲ −ηβ²tκ_a(1−p_a)/V − ...; "
          "(μ_j^T,0) w^(t) = Θ(−η(1−p_a)β²t/M1 − ...)", "App. 9, Lemma 4",
          "log-log exponents of the least-squares rates over t ≤ Lemma 4's horizon (≥ 10 steps at every setting), "
          "against 1−p_a, β, M1, l_tr (η left out: +1 for any dynamics close to gradient flow)",
          "Mamba at η = 0.015, the DYNAMICS grids (dynamics_checks CHECKS preset)", _T_PARTS,
          all_of("every rate exponent as Lemma 4 states (12; v's a bound, one-sided)", *_lemma4_parts(early=True))),
    Claim("beta-scaled", "ch03_training_dynamics",
          "Theorems 1 and 3's β^-2 with the outlier norm scaled with β",
          "T_M = Θ(η^-1 (1−p_a)^-1 β^-2 M1) (Theorem 1); T_T = Θ(η^-1 (1−p_a)^-1 β^-2 l_tr^-1 M1) (Theorem 3)",
          "§3.3-3.4, Theorems 1 and 3",
          "log-log exponent in β of the relaxation count with ||v*_s|| = β (ratio kept at the base's 1), per seed",
          "β ∈ {1.5, 2, 3, 4.5}, Figure 2's other data (dynamics_checks CHECKS preset)", _T_PARTS,
          all_of(f"both exponents on the side the sufficient conditions allow (β ≥ 1 grows: at most −2 + "
                 f"{EXPONENT_MARGIN:g})",
                 _sufficient(-2, "β", "Mamba: β^-2"), _sufficient(-2, "β", "linear Transformer: β^-2"))),
    Claim("beta-scaled-theta", "ch03_training_dynamics",
          "Theorems 1 and 3's β^-2 with the outlier norm scaled with β, read as a Θ scaling law (row beta-scaled: "
          "the sufficient condition)",
          "T_M = Θ(η^-1 (1−p_a)^-1 β^-2 M1) (Theorem 1); T_T = Θ(η^-1 (1−p_a)^-1 β^-2 l_tr^-1 M1) (Theorem 3)",
          "§3.3-3.4, Theorems 1 and 3; Remark 1",
          "log-log exponent in β of the relaxation count with ||v*_s|| = β, per seed (the measurement of row "
          "beta-scaled)", "β ∈ {1.5, 2, 3, 4.5}, Figure 2's other data (dynamics_checks CHECKS preset)", _T_PARTS,
          all_of(f"Θ reading: both exponents within {EXPONENT_MARGIN:g} of −2 (two-sided)",
                 _exponent(-2, "Mamba: β^-2"), _exponent(-2, "linear Transformer: β^-2"))),
    Claim("thm3-epsilon", "ch03_training_dynamics",
          "Theorems 1 and 3's own quantity: iterations to an absolute ε, both models",
          "after T ≥ T_T ... iterations ... we have E[ℓ(Ψ^(T); P, z)] ≤ ε (Theorem 3; Theorem 1 alike); "
          "the required number of training iterations for Mamba is T_M, which equals Θ(l_tr)·T_T (Remark 4)",
          "§3.3-3.4, Theorems 1 and 3, Remark 4",
          "population hinge loss after 400 steps, per seed, both models; T_M(ε)/T_T(ε) with a run that never "
          "reaches ε counted at the run length (a lower bound on its count)",
          "Chapter 3 base setting (DYNAMICS preset), ε = 0.01", _T_PARTS,
          all_of("both models reach ε = 0.01 and the linear Transformer first",
                 below(FIG2_EPSILON, "Mamba: final loss ≤ ε = 0.01"),
                 below(FIG2_EPSILON, "linear Transformer: final loss ≤ ε = 0.01"),
                 above(1.0, "T_M(ε)/T_T(ε) > 1 (Remark 4: T_M = Θ(l_tr) T_T)"))),
    Claim("fig2-mamba", "ch04_robustness",
          "Fig. 2 (§4.1): one-layer Mamba trained on App. 9's cycle (the one training set the paper writes down), "
          "tested on all 30 tasks, rules A/B/C",
          "the classification error of Mamba is smaller than 0.01 even when α is close to 0.8", "§4.1, Figure 2",
          "test error at α = 0.8, per seed", "trained on App. 9's cycle; tested on all 30 tasks of 𝒯 (§2: the error is "
          "computed across all tasks), FIG2 preset",
          _T_PARTS,
          all_of("error at α = 0.8 below 0.01 under each rule",
                 below(0.01, "rule A (flipped)"), below(0.01, "rule B (targeted)"), below(0.01, "rule C (random)")),
          failing=Failing("a seed whose error at α = 0.8 is at least the paper's 0.01 under that rule")),
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
                 below(0.01, "error at α = 0 below 0.01 (worst rule)")),
          failing=Failing("a seed on the wrong side of the part's threshold (linear not above Mamba; error ≥ 0.01)")),
    Claim("fig2-merged", "ch04_robustness", "Fig. 2 with W = W_B^T W_C trained as one matrix (merged product)",
          "(not in the paper: the paper trains W_B and W_C separately)", "§2 Eq. (3) (our variant)",
          "per seed, merged minus the paper's parametrisation, error at α = 0 (worst rule)", "all 30 tasks, FIG2 preset",
          _T, below(0, "the merged product errs less than the paper's parametrisation at α = 0 under every rule"),
          beyond=True),
    Claim("fig2-mamba-complete", "ch04_robustness",
          "Fig. 2 (§4.1): one-layer Mamba trained on a complete Condition-1 set (every two patterns meet): on T18 "
          "and on all 30 tasks",
          "the classification error of Mamba is smaller than 0.01 even when α is close to 0.8",
          "§4.1, Figure 2; App. 9 Condition 1",
          "all-task test error at α = 0.8, per seed, under each rule",
          "all 30 test tasks of 𝒯; trained on T18 (18 tasks, every two patterns meet) and on all 30 tasks; "
          "FIG2 settings and step sizes, fig2_complete preset", _T_PARTS,
          all_of("error at α = 0.8 below 0.01 under each rule, on each complete training set",
                 below(0.01, "on T18: rule A (flipped)"), below(0.01, "on T18: rule B (targeted)"),
                 below(0.01, "on T18: rule C (random)"),
                 below(0.01, "on all 30 tasks: rule A (flipped)"), below(0.01, "on all 30 tasks: rule B (targeted)"),
                 below(0.01, "on all 30 tasks: rule C (random)")),
          failing=Failing("a seed whose error at α = 0.8 is at least the paper's 0.01 under that rule")),
    Claim("fig2-lt-complete", "ch04_robustness",
          "Fig. 2: one-layer linear Transformer trained on a complete Condition-1 set: on T18 and on all 30 tasks",
          "the classification error of linear Transformers is large as long as α > 1/2", "§4.1, Figure 2",
          "per seed: linear Transformer's error minus Mamba's (all tasks), smallest over α > 1/2 and rules; "
          "its error at α = 0 (worst rule)",
          "all 30 test tasks; trained on T18 and on all 30 tasks; fig2_complete preset", _T_PARTS,
          all_of("on each complete training set: above Mamba at every α > 1/2 under every rule (smallest per-seed "
                 "difference), fine without outliers",
                 above(0, "on T18: smallest over (rule, α > 1/2) of linear − Mamba"),
                 below(0.01, "on T18: error at α = 0 below 0.01 (worst rule)"),
                 above(0, "on all 30 tasks: smallest over (rule, α > 1/2) of linear − Mamba"),
                 below(0.01, "on all 30 tasks: error at α = 0 below 0.01 (worst rule)")),
          failing=Failing("a seed on the wrong side of the part's threshold (linear not above Mamba; error ≥ 0.01)")),
    Claim("fig2-merged-complete", "ch04_robustness",
          "Fig. 2 with W = W_B^T W_C trained as one matrix, on a complete Condition-1 set: on T18 and on all 30 tasks",
          "(not in the paper: the paper trains W_B and W_C separately)", "§2 Eq. (3) (our variant), §4.1",
          "all-task test error at α = 0.8, per seed, worst rule", "all 30 test tasks; trained on T18 and on all 30 "
          "tasks; fig2_complete preset", _T_PARTS,
          all_of("the merged product's error at α = 0.8 below 0.01 under every rule, on each complete training set",
                 below(0.01, "on T18: worst rule's error at α = 0.8"),
                 below(0.01, "on all 30 tasks: worst rule's error at α = 0.8")), beyond=True,
          failing=Failing("a seed whose worst-rule error at α = 0.8 is at least 0.01")),
    Claim("breakdown", "ch07_beyond", "Theorems 2(c) and 4(c): where each model breaks down",
          "(c) α < min(1, p_a l_tr/l_ts), and (d) l_ts ≳ (1−α)^-1 log M1 [Mamba]; (c) α ∈ [0, 1/2), "
          "(d) l_ts ≥ max{Θ((1−α)^-1), Θ(α/(0.5−α)²)} log M1 [linear Transformer] — sufficient conditions "
          "(§3.4: the comparison 'is made between sufficient conditions')", "§3.3-3.4, Theorems 2 and 4",
          "per seed and per cell fixed in advance, the measured boundary α* (the first α at which the test error "
          "reaches the BOUNDARY preset's level 0.25, linear interpolation on its 13-point grid merged with the 0.02 "
          "lattice within ±0.1 of the cell's guaranteed boundary; never reached: the largest α, a lower bound) minus "
          "the boundary the theorems guarantee (conditions (c) and (d), constants 1). The cells: Mamba's where "
          f"Theorem 2 guarantees the most, l_ts = 10 with p_a = 0.5, 0.65, 0.8 (r ≥ 1, so α < 1 − log M1/10 = "
          f"{_MAMBA_D10:.3f}); the linear Transformer's where Theorem 4 guarantees the most, l_ts = 60 with every p_a "
          f"(α < {_LT_D60:.3f})", "all 30 tasks, BOUNDARY preset, κ_a′ = κ_a/L", _T_PARTS,
          all_of("neither model breaks down inside its guarantee in a declared cell (sufficient conditions: one-sided, "
                 "only a breakdown inside can fail; condition (d)'s constant, which the paper leaves open, set to 1 — "
                 "a larger one shrinks the guaranteed region)",
                 *(above(0, f"Mamba, (p_a, l_ts) = ({p:g}, 10): α* − {_MAMBA_D10:.3f} > 0") for p in (0.5, 0.65, 0.8)),
                 *(above(0, f"linear Transformer, (p_a, l_ts) = ({p:g}, 60): α* − {_LT_D60:.3f} > 0")
                   for p in (0.2, 0.35, 0.5, 0.65, 0.8))),
          failing=Failing("a seed whose α* in the cell is at or below the guaranteed boundary (it breaks down inside "
                          "the guarantee)")),
    Claim("thm4d", "ch04_robustness", "Theorem 4(d): examples the linear Transformer needs as α → 1/2",
          "l_ts ≥ max{Θ((1−α)^-1), Θ(α/(0.5−α)^2)} log M1", "§3.4, Theorem 4(d), Eq. (3)",
          "per seed, the ratio of the prompt lengths needed for error 0.1 at α = 0.4 and α = 0.3",
          "all tasks, FIG2 linear Transformers", _T,
          within((0.4 / 0.1 ** 2) / (0.3 / 0.2 ** 2), RATIO_MARGIN * (0.4 / 0.1 ** 2) / (0.3 / 0.2 ** 2),
                 f"ratio ≤ (0.4/0.1²)/(0.3/0.2²) = 5.33 + {RATIO_MARGIN:.0%} (a sufficient length: as α → 1/2 the "
                 "needed length grows no faster than the statement's α/(½−α)² branch)", side="below")),
    Claim("thm4d-theta", "ch04_robustness",
          "Theorem 4(d) read as a Θ scaling law: examples the linear Transformer needs as α → 1/2 (row thm4d: the "
          "sufficient condition)",
          "l_ts ≥ max{Θ((1−α)^-1), Θ(α/(0.5−α)^2)} log M1", "§3.4, Theorem 4(d), Eq. (3); Remark 1",
          "per seed, the ratio of the prompt lengths needed for error 0.1 at α = 0.4 and α = 0.3 (the measurement of "
          "row thm4d)", "all tasks, FIG2 linear Transformers", _T,
          within((0.4 / 0.1 ** 2) / (0.3 / 0.2 ** 2), RATIO_MARGIN * (0.4 / 0.1 ** 2) / (0.3 / 0.2 ** 2),
                 f"Θ reading: ratio = (0.4/0.1²)/(0.3/0.2²) = 5.33 ± {RATIO_MARGIN:.0%} (two-sided; a ratio of two "
                 "Θ's with the same constant)")),
    Claim("thm4d-alpha", "ch04_robustness", "Theorem 4(d)'s α-dependence: examples needed at six α below 1/2",
          "l_ts ≥ max{Θ((1−α)^-1), Θ(α/(0.5−α)^2)} log M1", "§3.4, Theorem 4(d); App. 10.4",
          "per seed, the power a of α in l* = C α^a (1/2−α)^-2 fitted to the prompt lengths l* needed for error 0.1 "
          "at α = 0.2, 0.25, ..., 0.45 (where the α/(1/2−α)² branch of the maximum is the larger with unit constants); "
          "the statement, proof (α^-1) and central-limit (α(1−α)) forms fitted side by side in the chapter",
          "all tasks, FIG2 linear Transformers, rule A", _T,
          _exponent(1.0, "power of α = 1 (the statement's α/(½−α)²; the proof's form has −1)")),
    Claim("fig2-task-sets", "ch04_robustness", "Fig. 2's Mamba trained on other training sets that satisfy Condition 1",
          "For any given j ∈ [M1] and either label +1 or −1, the number of tasks in T_tr that map μ_j to that label is "
          "|T_tr|/M1 (Condition 1); ... the classification error of Mamba is smaller than 0.01", "App. 9 Condition 1, "
          "Theorem 2, §4.1",
          "per seed, the all-task test error at α = 0 of Mamba trained on each other Condition-1 training set",
          "all tasks of 𝒯, FIG2 settings, fig2_ablations preset fig2", _T_PARTS,
          all_of("all-task error below 0.01 for every other Condition-1 training set",
                 below(0.01, "cycle + its reversals (12 tasks)"), below(0.01, "three reversal pairs (6 tasks)"),
                 below(0.01, "two disjoint 3-cycles (6 tasks)"), below(0.01, "cycle on M1 = 8 patterns (8 tasks)")),
          failing=Failing("a seed whose all-task error at α = 0 is at least the paper's 0.01")),
    Claim("cor1", "ch05_mechanism", "Corollary 1 (one layer): attention sums over same-pattern and other examples",
          "Σ_{i∈N1} p̃_i^T W_B^T W_C p̃_query ≥ Θ(1); Σ_{i∉N1} ... ≤ Θ(ε/(1−p_a))", "§3.5, Corollary 1, Eq. (6)",
          "per seed: the same-pattern sum; per task group, the contrast other − ε/(1−p_a)·same of the group's two sums "
          "(|other| for the distance-3 pairs)",
          "one layer, ONE_LAYER preset, all four task groups (the same for the three-layer row)", _T_PARTS,
          all_of("same ≥ 1 and, in every task group, other − ε/(1−p_a)·same ≤ 0 per seed (|other| for the never-met "
                 "distance-3 pairs), ε = 0.01 (§4.1), p_a = 0.4 (§4.1's mechanism models)",
                 *_cor1_parts("one layer"))),
    Claim("cor2i", "ch05_mechanism", "Corollary 2(i) (one layer): gates of outlier examples",
          "G_{i,l_ts+1}(w^(T)) ≤ O(poly(M1)^-1) on examples with outliers", "§3.5, Corollary 2, Eq. (7)",
          "per seed, median outlier gate / median clean gate", "one layer, ONE_LAYER preset", _T,
          below(1 / M1_PAPER, "outlier/clean gate < 1/M1 = 1/6 (O(poly(M1)^-1) read with power and constant 1)")),
    Claim("cor2ii", "ch05_mechanism", "Corollary 2(ii) (one layer): gates of clean examples by distance",
          "G_{h(j),l_ts+1}(w^(T)) ≥ Θ(1/2^{j−1})", "§3.5, Corollary 2, Eq. (8)",
          "per seed, the fitted factor by which clean gates fall per clean example", "one layer, ONE_LAYER preset", _T,
          above(0.5, "clean gates fall by less than a factor 1/2 per clean example (decay factor > 1/2)")),
    Claim("three-layer-error", "ch05_mechanism", "Where a three-layer Mamba's test error comes from (by task group)",
          "(not in the paper)", "§4.1 (three-layer Mamba, our breakdown)",
          "test error by task group", "FIG3 preset", _T,
          diagnostic("no verdict: a breakdown of the three-layer rows by task group")),
    Claim("deep-icl", "ch05_mechanism", "Do the deep models learn in context? Every deep model on the reversed tasks",
          "(not in the paper: its three-layer Mamba is read as a model that learns in context; App. 8's variants)",
          "§4.1, App. 8 (our check)",
          "per seed, test error on the reversed tasks (the training tasks' patterns with swapped labels: a model "
          "that memorised the training tasks errs on every one)",
          "three layers with RMSNorm (FIG3), without normalisation (FIG3_NONE), three Mamba-1 blocks (MAMBA1); "
          "step size searched on held-out seeds, trained until the validation loss stops improving", _T_PARTS,
          all_of("every deep model learns in context: reversed-task error below 0.25, half the chance level "
                 "(a memoriser errs near 1)",
                 below(0.25, "three layers, RMSNorm: reversed-task error < 0.25"),
                 below(0.25, "three layers, no normalisation: reversed-task error < 0.25"),
                 below(0.25, "Mamba-1: reversed-task error < 0.25")), beyond=True,
          failing=Failing("a seed whose reversed-task error is at least 0.25 (it does not learn in context)")),
    Claim("fig3", "ch05_mechanism", "Fig. 3 (§4.1): first-layer attention sums of a three-layer Mamba",
          "the sum of attention scores on the examples with the same pattern as the query is significantly larger "
          "than that on examples with other patterns, and this gap increases during training. This verifies "
          "Corollary 1", "§4.1, Figure 3",
          "per seed, layer 1: gap growth; the same-pattern sum; per task group, other − ε/(1−p_a)·same (|other| at "
          "distance 3)",
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
          "per seed and per layer (no minimum over layers), log10 of the median outlier/clean gate ratio with RMSNorm "
          "minus without (positive: that layer's gate suppresses outliers more strongly without normalisation; a "
          "continuous statistic, issue 41, instead of the 0/1 indicator 'ratio < 1/M1', which flips for a seed near "
          "1/M1)",
          "FIG3 and FIG3_NONE presets (step size searched, trained to a validation plateau)", _SIGN_CONTINUOUS,
          all_of("in every layer, the gate suppresses outliers more strongly without normalisation than with it (a "
                 "correlation: read only where row deep-icl finds the no-normalisation stack learning in context; the "
                 "causal run, RMSNorm after the first layer only, norm='after_first', is row rmsnorm-causal)",
                 *(sign_test_of("above", 0, f"layer {k}: log10(gate ratio with RMSNorm / without) > 0 (exact sign "
                                            "test)") for k in (1, 2, 3))),
          beyond=True),
    Claim("locality", "ch05_mechanism", "The cost of locality: outliers far from (FQ) or close to (CQ) the query",
          "Mamba is more sensitive to the position of outliers ... when outliers are placed close to the query, the "
          "clean examples ... are pushed farther away, and the gating values ... decay exponentially",
          "§4.2, App. Table 2",
          "per seed, CQ minus FQ test error of the three-layer stack",
          "three layers (FIG3; §4.2's claim is made of three-layer models), α = 0.3", _T,
          above(0, "three layers (§4.2's models): CQ − FQ > 0")),
    Claim("locality-one-layer", "ch05_mechanism",
          "The cost of locality in one layer (Corollary 2's model), beside row locality",
          "(not in the paper: §4.2's claim is made of three-layer models)", "§4.2, Corollary 2(ii) (our breakdown)",
          "per seed, CQ minus FQ test error of the one-layer model", "one layer, ONE_LAYER preset, α = 0.3", _T,
          diagnostic("no verdict: a diagnostic of row locality (what Corollary 2(ii)'s decay does in the model it is "
                     "proved for; §4.2 claims the cost for three layers)")),
    Claim("sst2-main", "ch06_sst2", "SST-2 main table (§4.2): 3 layers, 2 heads, p_a = 0.25, α = 0.75, FQ / R / CQ",
          "Mamba's performance in the scenario of FQ and R placements is clearly better than that of the linear "
          "Transformer. However, Mamba is more sensitive to the position of outliers, whereas the linear Transformer "
          "(LT) is much less affected", "§4.2, main table",
          "per-seed accuracy contrasts (points)", "SST-2, confident regime, MAIN_TABLE", _SST,
          all_of("Mamba above LT under FQ and R; Mamba drops under CQ, more than LT; LT unaffected by CQ",
                 above(0, "Mamba − LT, FQ"), above(0, "Mamba − LT, R"), above(0, "Mamba FQ − CQ"),
                 above(0, "Mamba's CQ drop − LT's"),
                 within(0, ACCURACY_MARGIN, f"LT FQ − CQ = 0 ± {ACCURACY_MARGIN:g} points (much less affected)"))),
    Claim("sst2-table1", "ch06_sst2", "App. Table 1: linear Transformer with H = 1…4 heads (α = 0.5)",
          "increasing the number of heads to H = 2 slightly improves the performance of the linear Transformer, but "
          "H = 3, 4 degrade the performance", "App. 8.1, Table 1",
          "per-seed accuracy contrasts (points, mean over FQ, R, CQ)", "SST-2, confident regime, TABLE_1", _SST,
          all_of("H = 2 above H = 1 ('slightly improves'); H = 3 and H = 4 below H = 2 ('degrade')",
                 above(0, "H2 − H1"), below(0, "H3 − H2"), below(0, "H4 − H2"))),
    Claim("sst2-table2", "ch06_sst2", "App. Table 2 (α = 0.5): Mamba, linear and softmax Transformers",
          "the performance of softmax attention is better than linear attention and close to Mamba. Meanwhile, there "
          "is no significant [drop] ... under CQ", "App. 8.1, Table 2",
          "per-seed accuracy contrasts (points)", "SST-2, confident regime, TABLE_2", _SST,
          all_of("softmax above linear; Mamba drops under CQ; softmax does not; Mamba's drop exceeds softmax's",
                 above(0, "softmax − linear"), above(0, "Mamba FQ − CQ"),
                 within(0, ACCURACY_MARGIN, f"softmax FQ − CQ = 0 ± {ACCURACY_MARGIN:g} points (no significant drop)"),
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
          "our all-minus-10 accuracy gap minus the paper's 1.15 points (one fit of each probe, both read on the same "
          "dev sentences)",
          "SST-2 dev, all-MiniLM-L6-v2",
          "normal 95 % interval of the paired standard error over the 872 dev sentences: the per-sentence difference "
          "of the two probes' correctness, sqrt(b + c - (b - c)^2 / n) / n from the b sentences only the full probe "
          "and the c only the top-10 probe reads right (McNemar's discordant pairs; per fit, one fit), not two "
          "independent binomial errors; a sampling error of the sentences, which no seed count shrinks",
          below(ACCURACY_MARGIN - 1.15, f"the top 10 'already close' to all: our gap below {ACCURACY_MARGIN:g} points, "
                                        "i.e. our gap minus the paper's 1.15 (80.05 − 78.90) below "
                                        f"{ACCURACY_MARGIN - 1.15:.2f}")),
    Claim("boundary", "ch07_beyond",
          "Where the robustness boundary lies: α* over a grid of p_a and l_ts (Theorems 2(c), 4(c))",
          "(c) α < min(1, p_a l_tr/l_ts) ... which can be close to 1 if ... p_a l_tr/l_ts ≥ 1", "§3.3, Remark 3",
          "per seed, Mamba's α* at the longest minus the shortest l_ts (mean over p_a), κ_a′ = κ_a/L, error 0.25, "
          "α grid to 0.99", "BOUNDARY preset", _T,
          above(0, "α* rises with l_ts (condition (c), a sufficient condition, guarantees less as l_ts grows; it "
                   "predicts no fall of α* itself)"), beyond=True),
    Claim("boundary-kappa", "ch07_beyond",
          "Is Theorem 2(c) far from tight? The boundary at κ_a′ = κ_a as well as κ_a/L, read at error 0.25 and at a "
          "rise of 0.1 over the α = 0 error",
          "(b) the outlier magnitude κ_a′ ∈ [κ_a, ...], (c) α < min(1, p_a l_tr/l_ts) ... whereas Mamba can remain "
          "robust when α goes to 1 (Condition (c))", "§3.3 Theorem 2, §3.4",
          "per seed, the smallest α* − 1/2 over the cells with r = p_a l_tr/l_ts ≤ 1/2, where condition (c) "
          "guarantees Mamba no more than Theorem 4(c) guarantees the linear Transformer (α < 1/2); α* is the first α "
          "at which the error reaches 0.25 (absolute) or exceeds the same seed's and cell's α = 0 error by 0.1 (a "
          "rise: robustness, not the error floor), linear interpolation on the 13-point grid to 0.99 merged with every "
          "fine α tested at that (κ_a′, l_ts): at κ_a′ = κ_a the 0.02 lattice on [0.4, 0.6] (at κ_a/L every cell's α* "
          "lies far above 0.6; there only the row breakdown's lattice points at l_ts = 10 and 60 are added); a "
          "censored α* counts as 0.99", "all 30 tasks, BOUNDARY preset", _T_PARTS,
          all_of("Mamba is robust past 1/2 in every cell where condition (c) guarantees at most 1/2, at both test "
                 "outlier magnitudes, by both readings of α*",
                 above(0, "κ_a′ = κ_a, error level 0.25: α* − 1/2 > 0 in every cell with r ≤ 1/2"),
                 above(0, "κ_a′ = κ_a, error rise 0.1 over α = 0: α* − 1/2 > 0 in every cell with r ≤ 1/2"),
                 above(0, "κ_a′ = κ_a/L, error level 0.25: α* − 1/2 > 0 in every cell with r ≤ 1/2"),
                 above(0, "κ_a′ = κ_a/L, error rise 0.1 over α = 0: α* − 1/2 > 0 in every cell with r ≤ 1/2")),
          beyond=True, failing=Failing("a seed whose smallest α* − 1/2 is ≤ 0")),
    Claim("gates", "ch07_beyond", "Which gates give robustness: App. 12's gate families on Figure 2's task",
          "Our theoretical analysis can be extended to a broader range of SSM or Linear RNN architectures",
          "App. 12", "per seed, error at α = 0.8 of the decay-only gates (smallest) minus 1/2", "GATES preset",
          _T, above(0.5, "every decay-only or fixed gate follows the flipped majority (error > 1/2) at α = 0.8"),
          beyond=True, failing=Failing("a seed in which some decay-only gate's error is at most 1/2")),
    Claim("multiclass", "ch07_beyond", "Multi-class with C = 2, 4, 8 classes (App. 13, Eq. 36)",
          "Our theoretical analysis can be extended from binary classification to a basic setting of "
          "multi-classification problems", "App. 13",
          "per seed, Mamba minus linear Transformer error, C = 8, α = 0.6", "MULTICLASS preset", _T,
          below(0, "Mamba errs less than the linear Transformer at C = 8, α = 0.6"), beyond=True),
    Claim("regression", "ch07_beyond", "Regression with outliers (App. 14; Park et al.'s finding cited in Remark 6)",
          "This conclusion is consistent with the empirical findings of [22], which observed that Mamba outperforms "
          "linear Transformers in many-outlier regression tasks", "§3.4 (Theorem 4 discussion), App. 14",
          "per seed, Mamba minus linear squared error at α = 0.8 (App. 14 setting)", "REGRESSION preset", _T,
          below(0, "Mamba's squared error below the linear Transformer's at α = 0.8 (App. 14)"), beyond=True),
    Claim("mamba1-mechanism", "appendix_mamba1", "A standard Mamba-1 stack: in-context learning or memorisation?",
          "(not in the paper: App. 8's three-layer models with a Mamba-1 block)", "App. 8 (our variant)",
          "per seed, test error on the reversed tasks (beside the training tasks' and the far tasks')",
          "MAMBA1 preset (step size searched, trained to a validation plateau)", _T,
          diagnostic("no verdict: a mechanism is read only off a model that learns in context (row deep-icl); "
                     "this row reports what the Mamba-1 stack does on each task group")),
    Claim("mamba1-speed", "appendix_mamba1", "Mamba-1 training step: fast scan vs the plain loop (and mambapy)",
          "(not in the paper)", "(engineering)", "speed-up of the fast scan over the plain loop (one timing)",
          "this build's machine", "one timing: no interval",
          diagnostic("no verdict: a timing on this build's machine")),
]

CLAIMS = {c.key: c for c in _ROWS}
if len(CLAIMS) != len(_ROWS):
    raise RuntimeError("duplicate claim keys")

from .claims_open import OPEN_CLAIMS as _OPEN  # noqa: E402  (Chapter 8: issue 31 rows, declared in claims_open)
CLAIMS.update(_OPEN)


# ------------------------------------------------------------------------------------------ parts -> verdicts

#: in :attr:`ClaimParts.ours`, replaced by what the criterion gave (:attr:`Judgement.outcome`) once judged, for a
#: row whose "ours" text reports its own outcome (the claims of ours, Chapter 8)
OUTCOME = "{outcome}"


@dataclass(frozen=True)
class ClaimParts:
    """A claim's measurement as an experiment's result hands it to the registry (``Result.claims()``): exactly
    the keyword inputs of :meth:`Claim.judge` and ``ours``, the text of the results row's "ours" column.

    ``ours`` may contain :data:`OUTCOME`, filled in with the judgement's outcome (:func:`ours_text`).
    """

    ours: str
    per_seed: object = None
    parts: object = None
    n_prompts: Optional[int] = None
    value: object = None

    def __post_init__(self) -> None:
        if not isinstance(self.ours, str):
            raise ConfigError(f"ours must be a str (the results row's text); got {type(self.ours).__name__}")


def judge_all(parts: dict) -> dict:
    """``{key: Judgement}``: each claim of ``parts`` (``{key: ClaimParts}``, e.g. ``result.claims()``) judged by
    its registry row (:meth:`Claim.judge`), in the order given. An unknown key is a :class:`ConfigError`."""
    unknown = [k for k in parts if k not in CLAIMS]
    if unknown:
        raise ConfigError(f"claims {', '.join(map(repr, unknown))} are not in the registry (mambaicl.analysis.claims)")
    out = {}
    for key, p in parts.items():
        if not isinstance(p, ClaimParts):
            raise ConfigError(f"claims()[{key!r}] must be a ClaimParts; got {type(p).__name__}")
        out[key] = CLAIMS[key].judge(p.per_seed, parts=p.parts, n_prompts=p.n_prompts, value=p.value)
    return out


def ours_text(parts: ClaimParts, judgement: Judgement) -> str:
    """The row's "ours" text: ``parts.ours`` with :data:`OUTCOME` replaced by the judgement's outcome."""
    return parts.ours.replace(OUTCOME, judgement.outcome) if OUTCOME in parts.ours else parts.ours
