"""Rows of the registry for what Chapter 8 settles (issue 31), declared before any run.

Each row follows :mod:`mambaicl.analysis.claims` (the paper's words or "beyond the paper", the quantity,
the test, a criterion fixed here); :mod:`mambaicl.analysis.claims` adds :data:`OPEN_CLAIMS` to ``CLAIMS``.
The predictor of ``fig2-seed-tail``, its error measure and its test were written here (and in
the seed-tail experiment, ``seed_tail``) before the seeds were trained; they were not chosen among others.
"""
from __future__ import annotations

from .verdicts import Claim, above, all_of, below, sign_test_of

__all__ = ["OPEN_ROWS", "OPEN_CLAIMS", "SEED_TAIL_TEST"]

_T = "95 % t interval over seeds (df = seeds - 1), test prompts counted"
_SIGN_PARTS = ("exact one-sided sign test of the per-seed paired contrasts (log gate ratios) for the first part, the "
               "95 % t interval for the other; every part must hold; a part fails only after Holm's step-down across "
               "the row's parts at 2.5 %")
_T_PARTS = ("95 % t interval over seeds (df = seeds - 1), test prompts counted; every part must hold "
            "(intersection-union); a part fails only when its one-sided p-value survives Holm's step-down across the "
            "row's parts at 2.5 %")
_SIGN_TEST = ("exact one-sided sign test of the paired per-seed values against 0 (ties dropped); every part must hold "
              "(intersection-union); a part fails only when its one-sided p-value survives Holm's step-down across the "
              "row's parts at 2.5 %")
#: the test of the seed-tail row: Spearman's rho with the Fisher-z interval of Fieller, Hartley & Pearson (1957)
SEED_TAIL_TEST = ("Spearman's rank correlation over seeds; 95 % interval from Fisher's z with standard error "
                  "sqrt(1.06 / (seeds - 3)) (Fieller, Hartley & Pearson 1957)")

OPEN_ROWS = [
    Claim("fig2-information-bound", "ch08_open_questions",
          "Figure 2 at α = 0.8 against the reader bound, task group by task group (the error of a model that reads "
          "only the examples Corollary 1 and Lemma 3 let it read; App. 9's cycle), the Bayes error beside it",
          "(not in the paper: the bound follows from Definition 2, Corollary 1 and Lemma 3; the paper's figure reports "
          "'the classification error of Mamba is smaller than 0.01 even when α is close to 0.8')",
          "§4.1, Definition 2, Corollary 1, Lemma 3 (our bound)",
          "per seed and task group (training, reversed, distance 2, distance 3 on App. 9's cycle), Mamba's test error "
          "at α = 0.8 minus the group's reader bound ½(1 − r(1 − α))^l_ts (l_ts = 20; r = 1 on the training and "
          "reversed tasks: 0.8²⁰/2, r = ½ on the tasks whose patterns never met: 0.9²⁰/2), under each rule. The reader "
          "bound is not an information bound: a Bayes predictor errs only when all l_ts examples are outliers, "
          "α^l_ts/2 = 0.8²⁰/2 under rules B and C on every group (reported beside it, not tested)",
          "the 30 tasks of 𝒯 by task group, FIG2 settings (seed_tail preset fig2)", _T_PARTS,
          all_of("Mamba does not beat the reader bound on any task group under any rule",
                 *(above(0, f"rule {rule}, {group}: error − reader bound > 0")
                   for rule in ("A", "B", "C")
                   for group in ("training tasks", "reversed tasks", "distance 2", "distance 3"))), beyond=True),
    Claim("fig2-seed-tail", "ch08_open_questions",
          "Why a seed fails: the least-suppressed test outlier's gate logit against the α = 0.8 error (a correlation "
          "over seeds)",
          "(not in the paper: Theorem 2 states that for a test outlier in 𝒱′ with κ_a′ ∈ [κ_a, …] 'the trained "
          "model Ψ^(T) satisfies L^{0−1} ≤ ε', treating the V projections v*_sᵀw alike)",
          "§3.3, Theorem 2 (our test)",
          "per seed, the predictor κ_a′ · max_s v′_sᵀw (the gate logit an outlier adds to the least-suppressed "
          "test outlier, computed from the trained w alone) and the test error at α = 0.8 (rule A, the 18 tasks "
          "of fig2.CLAIM_GROUPS). First part: Spearman's ρ between the two, its values the per-seed predictor; second "
          "part: the per-seed errors themselves (with the first part's values, ρ can be recomputed)",
          "FIG2 settings, Mamba (seed_tail preset fig2)",
          SEED_TAIL_TEST + " for the first part; the exact one-sided sign test of the per-seed errors against the "
          "failure level 0.05 for the second; every part must hold; a part fails only after Holm's step-down across "
          "the row's parts at 2.5 %",
          all_of("a seed whose least-suppressed test outlier keeps a larger gate logit errs more at α = 0.8 (a "
                 "correlation over seeds), and a failing seed is the tail, not the typical seed",
                 above(0, "ρ > 0: a seed whose least-suppressed test outlier keeps a larger gate logit errs more at "
                          "α = 0.8"),
                 sign_test_of("below", 0.05, "per seed, the error at α = 0.8 is below the failure level 0.05 "
                                             "(exact sign test)")), beyond=True),
    Claim("rmsnorm-causal", "ch08_open_questions",
          "RMSNorm's role tested by training: normalisation removed from the first layer only",
          "(not in the paper: the causal check of the row rmsnorm, which explains the three-layer stack's gates "
          "by the normalisation)", "§4.1 (our variant)",
          "per seed, layer 1: log of the median outlier/clean gate ratio with normalisation after the first layer "
          "only (norm = after_first) minus the same with RMSNorm in every layer (FIG3), a continuous paired "
          "contrast (the indicator 'ratio < 1/M1' flips for a seed near 1/M1); and the after_first stack's test "
          "error on the reversed tasks",
          "FIG3 and FIG3 with norm = after_first (each: step size searched on held-out seeds, trained to a "
          "validation plateau)", _SIGN_PARTS,
          all_of("without the first layer's normalisation its gate suppresses outliers more strongly, and the "
                 "stack still learns in context",
                 sign_test_of("below", 0, "layer 1: log gate ratio without its norm − with it < 0 (exact sign "
                                          "test)"),
                 below(0.25, "after_first: reversed-task error < 0.25 (half the chance level)")), beyond=True),
    Claim("deep-gate-after-zero", "ch08_open_questions",
          "The three-layer stack's gate after its validation hinge loss reaches zero",
          "(not in the paper: why Chapter 5's three-layer stack, trained to a validation plateau, keeps gates that "
          "do not suppress outliers; the hinge loss sends no gradient from a prompt whose margin is at least 1)",
          "§4.1 (our variant), Algorithm 1's hinge loss",
          "per seed, layer 1 of FIG3's stack trained 400 updates (its step size, no early stopping, a record every "
          "25): the change of log(median outlier gate / median clean gate) per 100 updates after the first record "
          "whose validation hinge loss is at most 1e-3, minus half the same change before it (a contrast, not a "
          "ratio of the two rates); seeds whose validation hinge never reaches that level are counted and left out",
          "FIG3 settings (deep_gate_training preset fig3), test prompts at α = 0.3",
          "exact one-sided sign test of the per-seed contrasts against 0; a fail needs the other side's sign test "
          "at 2.5 % (Holm across the row's parts)",
          all_of("the gate stops learning where the hinge loss stops sending gradients",
                 sign_test_of("below", 0, "layer 1: rate after − ½ · rate before < 0: the gate's outlier/clean "
                                          "log-ratio moves less than half as fast per update after the validation "
                                          "hinge reaches zero (exact sign test)")), beyond=True),
    Claim("app14-gates", "ch08_open_questions",
          "App. 14's gates measured: the squared-loss Mamba on outlier and clean examples",
          "Random labels for outlier examples cancel out their gradient contribution, leading the nonlinear gating "
          "to learn outlier patterns. Then, the further analysis is almost the same as the classification problem",
          "App. 14",
          "per seed, median gate of outlier examples / median gate of clean examples (Corollary 2(i)'s measure, "
          "as the row cor2i) of the one-layer Mamba trained on Figure 2's data with the squared loss, on test "
          "prompts with random outlier outputs (rule C) at α = 0.3 and α = 0.8",
          "App. 14 settings of the regression experiment (app14_gates preset app14)", _T_PARTS,
          all_of("the squared-loss gate suppresses outliers as Corollary 2(i) asks, at both α",
                 below(1 / 6, "α = 0.3: outlier/clean gate < 1/M1 = 1/6"),
                 below(1 / 6, "α = 0.8: outlier/clean gate < 1/M1 = 1/6")), beyond=True),
    Claim("context-examples", "ch08_open_questions",
          "Context examples needed: the linear Transformer against Mamba as α approaches 1/2",
          "linear Transformers require significantly more context examples than Mamba to achieve comparable "
          "generalization performance", "§1 Contribution 2; §3.4, Theorems 2(d) and 4(d)",
          "per seed, the linear Transformer's test error minus Mamba's (rule A, the 18 tasks of fig2.CLAIM_GROUPS), "
          "averaged over the test lengths l_ts = 2, 4, 6, 8, 12, 16, 24, 32, 48, 64 (the area between the two "
          "error curves on the grid, a continuous statistic), at α = 0.3 and α = 0.45 (Figure 2's trained models)",
          "FIG2 settings (context_examples preset fig2)", _SIGN_TEST,
          all_of("the linear Transformer's error is above Mamba's over the test lengths at both α",
                 sign_test_of("above", 0, "α = 0.3: mean over l_ts of (linear Transformer − Mamba) error > 0 "
                                          "(exact sign test)"),
                 sign_test_of("above", 0, "α = 0.45: mean over l_ts of (linear Transformer − Mamba) error > 0 "
                                          "(exact sign test)"))),
    Claim("kappa-lower-bound", "ch08_open_questions",
          "κ_a's lower bound: Mamba needs visible outliers, the linear Transformer does not",
          "The required conditions for κ_a for linear Transformers does not include a lower bound (Remark 4); "
          "Theorem 1 (ii): Vβ^-4 ≲ κ_a ≲ Vβ(1−p_a)p_a^-1 ε^-1", "§3.3-3.4, Theorems 1 and 3, Remark 4",
          "per seed, the rise of the validation hinge loss (Definition 1 prompts, training tasks) when κ_a drops "
          "from Figure 2's 2 to Vβ^-4/10 (Theorem 1's lower bound, constant 1, divided by 10): Mamba's rise minus "
          "the linear Transformer's; the same difference at κ_a = Vβ^-4/3, Vβ^-4, 3Vβ^-4 and 10Vβ^-4 is reported "
          "(per seed, not judged) to locate where Mamba's excess rise disappears",
          "FIG2 settings with κ_a = 2 and κ_a = (0.1, 0.3, 1, 3, 10) · Vβ^-4 (kappa_lower_bound preset fig2)",
          _SIGN_TEST,
          sign_test_of("above", 0, "Mamba's training loss rises more than the linear Transformer's below Theorem 1's "
                                   "lower bound (exact sign test)")),
    Claim("batch-size", "ch08_open_questions",
          "Batch size where Theorems 1 and 3 predict B_M ≥ 8 B_T: does Mamba need larger batches than the linear "
          "Transformer?",
          "While linear Transformers may converge faster with smaller batch sizes (§1); the required batch size for "
          "Mamba models is at least B_M, which is defined as the larger of value B_T and another constant, while the "
          "required batch size for linear Transformers is B_T (Remark 4)", "§1 Contribution 2; §3.4, Remark 4",
          "Figure 2's data with κ_a = 2Vβ^-4 (ε = 0.3 in the formulas: B_T = max{ε^-2, M1(1−p_a)^-1} log ε^-1 ≈ 18, "
          "B_M = max{B_T, β^-4V²κ_a^-2(1−p_a)^-2 log ε^-1} ≈ 152, constants 1); per seed and model, the batch "
          "penalty: the validation hinge loss (Definition 1 prompts, training tasks, capped at 1, the loss of the "
          "zero output; a diverged run counts 1) after Figure 2's 1,000 SGD steps at B = 8 and at B = 32, minus the "
          "same seed's at B = 128; Mamba's penalty minus the linear Transformer's, at each B",
          "FIG2 settings with κ_a = 2Vβ^-4, batch size varied (batch_size preset fig2)", _SIGN_TEST,
          all_of("Mamba's loss suffers more from a small batch than the linear Transformer's at both batch sizes",
                 sign_test_of("above", 0, "B = 8: Mamba's batch penalty − the linear Transformer's > 0 "
                                          "(exact sign test)"),
                 sign_test_of("above", 0, "B = 32: Mamba's batch penalty − the linear Transformer's > 0 "
                                          "(exact sign test)"))),
]

OPEN_CLAIMS = {c.key: c for c in OPEN_ROWS}
if len(OPEN_CLAIMS) != len(OPEN_ROWS):
    raise RuntimeError("duplicate claim keys")
