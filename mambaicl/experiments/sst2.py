"""Chapter 6: the SST-2 "James Bond" experiments of §4.2 and App. 8.1-8.2, as named presets and runners.

Glossary (code name -> paper symbol):

===================  ========================================================================
``Regime``           a named :class:`~mambaicl.data.sst2_split.SST2Data` (sentences, encoder, ``d`` = 72,
                     ``l`` = 8) with its definition and the tables run in it
``Run``              one trained model: kind, heads ``H``, layers, training ``p_a`` and schedule
``Table``            runs + test ``alpha`` values + placements (FQ / R / CQ) + rule (B) + the paper's numbers
``p_a``              fraction of training examples with the phrase (Eq. 4 / Def. 1)
``alpha``            fraction of test examples with the phrase (Eq. 5 / Def. 2)
``curriculum``       App. 8.1: placement R for the first half of training, CQ for the second
===================  ========================================================================

The module holds the presets (with the paper's numbers) and the protocol (:func:`run`); the
parts live where the layout puts them, and every name is re-exported here:

* :mod:`mambaicl.data.sst2_split`: the two regimes' sentence split, the confidence filter, the PCA
  features (:class:`SST2Data`, :func:`prepare_features`);
* :mod:`mambaicl.data.poisoning`: the task on SST-2: a prompt's task ``f`` says which sentiment is
  labelled +1; the query's label is ``z = f * s_query``; outlier examples carry the phrase
  "James Bond" and, at test time, the targeted label +1 of Example 1 (rule B);
* :mod:`mambaicl.analysis.sst2`: accuracies, the encoder's ceilings (``oracle``), the filter's margin
  curve, App. Table 5, memorisation, the claims and the tables as text.

Hyperparameters the paper does not give (``d_model``, steps, learning rate, batch size, the
sentences, the probes' penalty, the filter) are fields of the presets below, validated on creation.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch
from tqdm.auto import tqdm

from ..analysis.sst2 import (CLAIM_KEYS, KEEPS, PCA_KS, accuracy, accuracy_sentences, acc_stats, contrast, format_table,
                             judge, margin_curve, memorisation, oracle_accuracy, paired_gap, pca_paired, pca_table,
                             probe_ceilings,
                             sentence_contrast, sentence_stats, table_json)
from ..analysis.sst2 import claims as sst2_claims
from ..analysis.stats import Comparison
from ..recipes.stepsize import RecordedStep, search_seeds, warn_if_chosen_on
from ..config import (DEEP_KINDS, LOSSES, OPTIMIZERS, PLACEMENTS, RULES, Config, ConfigError, check_choices,
                      check_instances, check_int, check_text, choice, choices, flag, instance, integer, integers, real, reals)
from ..data.features import linear_probe
from ..data.poisoning import COUNTS, LABELS, EmbeddedPool, sst2_prompts
from ..data.sst2_split import REGIMES, SST2Data, SST2Features, fill_cache, prepare_features, texts_to_embed
from ..data.vocabulary import PLACEMENT_LABELS, PLACEMENTS_FAR_TO_CLOSE, RULE_LABELS, placement_id, rule_id
from ..seeding import numpy_stream, substage
from ..recipes.base import Preset, Result, internal, resolve_seeds
from ..recipes.sst2 import trained_models as _trained, validation_curve as _validation_curve

__all__ = [
    "REGIMES", "COUNTS", "LABELS", "SST2Data", "Run", "Table", "Regime", "SST2Features", "PAPER", "HELD_OUT", "CONFIDENT",
    "SEARCHED_LR", "SCHEDULES", "MAIN_TABLE", "TABLE_1", "TABLE_2", "CURRICULUM", "PCA_KS", "KEEPS", "PRESETS",
    "DEFAULT_PRESET", "DEFAULT_SEEDS", "texts_to_embed", "prepare_features", "fill_embedding_cache", "margin_curve",
    "probe_ceilings", "pca_table", "trained_models", "accuracy", "oracle_accuracy", "run_table", "memorisation",
    "validation_curve", "Comparison", "contrast", "sentence_contrast", "claims", "judge", "CLAIM_KEYS", "format_table",
    "SST2Preset", "SST2Result", "run", "data_numbers", "overview_numbers", "probe_numbers", "margin_numbers",
    "memorisation_numbers", "preset_numbers", "steps_numbers", "sentence_numbers", "main_numbers", "gate_numbers",
    "table1_numbers", "table2_numbers", "tables3_4_numbers", "curriculum_numbers", "table5_numbers", "timing_numbers"]


@dataclass(frozen=True)
class Run(Config):
    """One model to train: architecture (§4.2: 3 layers) and training schedule."""

    name: str
    kind: str = choice("mamba", tuple(k for k in DEEP_KINDS if k != "mamba1"))  # mambaicl.models.deep
    n_heads: int = integer(2, 1)
    n_layers: int = integer(3, 1)
    d_model: int = integer(80, 1)  # >= d+1: the prompt enters the residual stream by zero padding
    p_a: float = real(0.25, 0.0, 1.0, high_open=True)
    steps: int = integer(1500, 1)  # the cap: training ends earlier, when the validation loss stops improving
    every: int = integer(50, 1)  # steps between readings of the validation loss
    patience: int = integer(2, 1)  # readings without a new lowest validation loss before a member stops (2: the budget)
    n_val: int = integer(500, 10)  # validation prompts (500: half the readings' cost of 1,000; the first build's budget) (from the regime's validation sentences)
    batch_size: int = integer(64, 1)  # 64, not 128: the first build's 10-minute budget (book/exec_stats.md)
    lr: float = real(3e-3, 0.0, 1.0, low_open=True)
    optimizer: str = choice("adam", OPTIMIZERS)
    loss: str = choice("hinge", LOSSES)  # Section 2
    curriculum: bool = flag(False)  # App. 8.1: R first, CQ after `switch` steps
    switch: int = integer(300, 1)  # curriculum: steps on R (Mamba's length on R); the stopping rule starts here

    def _check(self) -> None:
        check_text("name", self.name)
        if self.curriculum:
            check_int("switch", self.switch, 1, self.steps - 1)


@dataclass(frozen=True)
class Table(Config):
    """Runs evaluated at test fractions ``alphas`` and ``placements``; ``paper[run][(alpha, placement)]`` in %.

    Placements and the rule are the paper's letters (§4.2: FQ / R / CQ; §4.1: A / B / C); their display
    labels (``"far"``, ``"targeted"``, ... in :data:`LABELS`) are accepted too and stored as the letters.
    """

    name: str
    runs: Tuple[Run, ...]
    alphas: Tuple[float, ...] = reals((0.75,), 0.0, 1.0)
    placements: Tuple[str, ...] = choices(PLACEMENTS_FAR_TO_CLOSE, PLACEMENTS + tuple(PLACEMENT_LABELS.values()))
    rule: str = choice("B", RULES + tuple(RULE_LABELS.values()))  # Example 1: outliers labelled +1 (targeted)
    n_prompts: int = integer(2400, 1)  # per (alpha, placement, seed), same for every run: 12,000 per accuracy (5 seeds)
    paper: Dict[str, Dict[Tuple[float, str], float]] = field(default_factory=dict)

    def _check(self) -> None:
        check_text("name", self.name)
        check_instances("runs", self.runs, Run)
        object.__setattr__(self, "rule", rule_id(self.rule))  # a display label becomes its letter, once, here
        placements = tuple(placement_id(p, f"placements[{i}]") for i, p in enumerate(self.placements))
        object.__setattr__(self, "placements", check_choices("placements", placements, PLACEMENTS))
        if len({r.name for r in self.runs}) != len(self.runs):
            raise ConfigError(f"run names must be unique; got {[r.name for r in self.runs]}")


def _col(fq: float, r: float, cq: float, alpha: float) -> Dict[Tuple[float, str], float]:
    return {(alpha, "FQ"): fq, (alpha, "R"): r, (alpha, "CQ"): cq}


def _sweep(rows: Dict[str, Tuple[float, ...]], alphas: Tuple[float, ...]) -> Dict[Tuple[float, str], float]:
    return {(a, p): rows[p][i] for p in rows for i, a in enumerate(alphas)}


ALPHAS_3_4 = (0.4, 0.5, 0.6, 0.7, 0.8)
PAPER = {  # accuracies in %, App. 8.1-8.2 of Li et al. (2025); the main table's numbers are not in our copy
    "table1": {"linear H=1": _col(93.68, 94.12, 93.96, 0.5), "linear H=2": _col(93.90, 95.08, 94.18, 0.5),
               "linear H=3": _col(92.86, 93.10, 92.74, 0.5), "linear H=4": _col(91.54, 90.90, 90.86, 0.5)},
    "table2": {"mamba": _col(99.73, 99.67, 82.73, 0.5), "linear": _col(93.68, 94.12, 93.96, 0.5),
               "softmax": _col(99.40, 99.26, 99.28, 0.5)},
    "table3_softmax": _sweep({"FQ": (99.60, 99.40, 99.14, 98.40, 94.80), "R": (99.63, 99.26, 99.02, 98.04, 95.58),
                              "CQ": (99.60, 99.38, 99.12, 98.24, 99.60)}, ALPHAS_3_4),
    "table4_linear": _sweep({"FQ": (96.54, 93.68, 89.68, 81.18, 69.10), "R": (96.48, 94.12, 90.66, 81.00, 67.78),
                             "CQ": (96.30, 93.96, 90.08, 80.82, 68.70)}, ALPHAS_3_4),
    "curriculum": {"mamba (R then CQ)": {(0.75, "FQ"): 98.00, (0.75, "R"): 98.25, (0.75, "CQ"): 95.45}},
    "table5": {5: 74.08, 7: 76.72, 10: 78.90, "all": 80.05},  # DistilBERT, 768 dimensions
}
# App. Table 2 at alpha = 0.5, App. Tables 3 (softmax) and 4 (linear) at the other alphas
_PAPER_T2 = {"mamba": dict(PAPER["table2"]["mamba"]),
             "linear": {**PAPER["table4_linear"], **PAPER["table2"]["linear"]},
             "softmax": {**PAPER["table3_softmax"], **PAPER["table2"]["softmax"]}}


# Five seeds (issue 17): Chapter 5 and the appendix share their Mamba-1 runs (experiments.store) to make room.
DEFAULT_SEEDS = (0, 1, 2, 3, 4)
# Step size per kind: validation_curve (lr in {1e-3, 3e-3, 1e-2}, up to 800 steps, lowest validation hinge loss;
# the main table's Mamba and linear runs, App. Table 2's softmax) on the seeds 5-6 after DEFAULT_SEEDS, by hand:
# Mamba 1e-3 (0.173; 0.281 at 3e-3, 0.306 at 1e-2), linear 1e-3 (0.161; 0.175, 0.194), softmax 1e-2 (0.165; 0.166,
# 0.170 at 1e-3). On seeds 3-4 the search had chosen 3e-3 for both Transformers (linear 0.163 vs 0.179 at 1e-3,
# softmax 0.156 vs 0.177): with two search seeds their choice is not stable. (These searches drew their prompts
# from torch's Mersenne Twister streams; the prompts now come from NumPy streams and the search was not run
# again.) Runs train until the validation
# loss stops improving (Run.every, Run.patience; the engine's early stopping), at most Run.steps.
SEARCHED_LR = {k: RecordedStep(lr, (1e-3, 3e-3, 1e-2), search_seeds(DEFAULT_SEEDS, 2), "validation_curve's hinge loss")
               for k, lr in {"mamba": 1e-3, "linear": 1e-3, "softmax": 1e-2}.items()}
SCHEDULES = {k: {"lr": r.lr} for k, r in SEARCHED_LR.items()}
_MAMBA = Run("mamba", "mamba", **SCHEDULES["mamba"])
_LINEAR = Run("linear", "linear", **SCHEDULES["linear"])
MAIN_TABLE = Table("main (§4.2)", (_MAMBA, _LINEAR), alphas=(0.75,))
TABLE_1 = Table("App. Table 1", tuple(Run(f"linear H={h}", "linear", n_heads=h, p_a=0.4, **SCHEDULES["linear"])
                                      for h in (1, 2, 3, 4)),
                alphas=(0.5,), paper=PAPER["table1"])
TABLE_2 = Table("App. Tables 2-4", (Run("mamba", "mamba", n_heads=1, p_a=0.4, **SCHEDULES["mamba"]),
                                    Run("linear", "linear", n_heads=1, p_a=0.4, **SCHEDULES["linear"]),
                                    Run("softmax", "softmax", n_heads=1, p_a=0.4, **SCHEDULES["softmax"])),
                alphas=(0.5,) + tuple(a for a in ALPHAS_3_4 if a != 0.5), paper=_PAPER_T2)
TABLES_3_4 = TABLE_2  # App. Tables 3-4 are the alpha sweep of Table 2's softmax and linear runs
CURRICULUM = Table("App. 8.1 curriculum", (dataclasses.replace(_MAMBA, name="mamba (R then CQ)", curriculum=True),),
                   alphas=(0.75,), paper=PAPER["curriculum"])

# Held-out regime: 800 training and 200 validation sentences, the sizes of the confident regime's pool (so the
# two regimes differ in which sentences they hold, not in how many); each with its poisoned twin, embedded in
# float64 in the first build (2,000 and 1,000 until the first build's budget needed the time).
HELD_OUT = SST2Data(n_train=800, n_val=200)
# Confident regime: the filter probe is fit on 4,000 rows and scores the next 5,000; the kept fraction is
# chosen on those scored *training* rows (keep=None: the largest of KEEPS at which the probe reads them at
# 97 % or more, sst2_split.choose_keep), never on test sentences; the kept rows form the training pool (200 of
# them set aside for validation). Scoring every remaining row (about 33,000) cost about ten CPU-minutes of
# float64 embedding on a cold cache, so a first build could not finish in 10 minutes on 2 cores; for the same
# reason the probe is fit on 4,000 rows (8,000 until issue 17's longer training needed the time).
# N_RESERVED full sentences are set aside as test candidates: enough that the sentence-level standard
# error of each accuracy is below a point (analysis.sst2.sentence_contrast). 5,000 halved that error at the
# cost of 3,000 more float64 embeddings (about 50 s of the first build); 2,500 keep it below a point.
N_RESERVED = 2500
N_PROBE = 4000
CONFIDENT = SST2Data(regime="confident", n_train=None, keep=None, count="balanced", n_probe=N_PROBE, n_scored=5000,
                     n_val=200, n_reserved=N_RESERVED)


@dataclass(frozen=True)
class Regime(Config):
    """A named data regime, its definition (written to ``results.json``) and the tables run in it."""

    name: str
    definition: str
    data: SST2Data = instance(SST2Data, SST2Data())
    tables: Tuple[Table, ...] = ()

    def _check(self) -> None:
        check_text("name", self.name)
        check_text("definition", self.definition)
        check_instances("tables", self.tables, Table)


DEFINITIONS = {
    "held-out": (f"{HELD_OUT.n_train:,} random rows of train.tsv for training prompts; test prompts from GLUE's dev split "
                 "(872 sentences never seen in training); each context example independently an outlier with "
                 "probability alpha (Definition 2, Eq. (5))."),
    "confident": (f"the rows of train.tsv that a logistic probe (fit on {N_PROBE:,} other rows) reads with the largest "
                  "margin, the largest fraction at which it reads those training rows at 97% or more; test sentences "
                  f"are {N_RESERVED:,} full sentences set aside beforehand (every phrase of them removed "
                  "from training and probe rows) and kept by the same margin threshold; a test prompt holds "
                  "floor(alpha l) or ceil(alpha l) outlier examples, alpha l on average (never l while alpha l <= l - 1)."),
}


# ---------------------------------------------------------------- sentences and embeddings


def fill_embedding_cache(preset: "SST2Preset" = None, *, path=None, cache_dir=None, device=None,
                         progress=True) -> Dict[str, object]:
    """Embed every sentence (and poisoned twin) that :func:`run` needs for ``preset`` (default: the paper's)
    into the cache (:func:`mambaicl.data.sst2_split.fill_cache`, which gives the returned counts).

    Chapter 6 calls this in a cell of its own before the experiment, so that a cold cache is filled
    and the experiment's cells then only read it; ``python -m mambaicl embed-sst2`` calls it too.
    """
    preset = PAPER_PRESET if preset is None else preset
    return fill_cache([r.data for r in preset.regimes], path=path, cache_dir=cache_dir, device=device,
                      progress=progress, with_val=True)


# ---------------------------------------------------------------- training and evaluation


def trained_models(run: Run, feat: SST2Features, seeds=(0,), cfg: SST2Data = HELD_OUT, device=None,
                   progress: bool = False) -> Tuple[list, list]:
    """Train ``run`` for every seed as one batch of members until each one's validation loss stops improving
    (:func:`mambaicl.recipes.sst2.trained_models`); returns ``(models, records)``, one per seed,
    each model exactly the one a run of that seed alone gives, each record with its ``best_step``."""
    return _trained(run, feat, cfg, seeds, device=device, progress=progress)


def _test_prompts(table: Table, pool: EmbeddedPool, cfg: SST2Data, seed: int, stage: str = "test/sst2"):
    """Seed ``seed``'s test prompts, the same for every run of a seed: ``{(alpha, placement): SST2Prompts}``."""
    return {(a, p): sst2_prompts(pool, table.n_prompts, l=cfg.l, alpha=a, placement=p, rule=table.rule,
                                 count=cfg.count, stream=numpy_stream(seed, substage(stage, a, p)))
            for a in table.alphas for p in table.placements}


def run_table(table: Table, feat: SST2Features, seeds=(0,), cfg: SST2Data = HELD_OUT, device=None,
              progress: bool = True, models: Optional[dict] = None, stopping: Optional[dict] = None) -> dict:
    """Train every run of ``table`` once per seed (or reuse ``models[name]``, one model per seed, with their
    ``stopping`` records) and evaluate them on each seed's test prompts (the same prompts for every run of a
    seed); accuracies with their sentence-level errors (test sentences as clusters).

    Returns ``{"acc": {run: {(alpha, placement): mean %}}, "acc_seeds": {run: [per-seed dicts]},
    "se": {run: {(alpha, placement): SE}}, "se_sentences": {run: {(alpha, placement): sentence-level SE}},
    "resid": {run: [per-seed {(alpha, placement): per-sentence residual sums}]}, "oracle": {(alpha, placement):
    mean %}, "oracle_seeds", "oracle_se", "seeds", "n_prompts", "n_sentences", "seconds": {run: s},
    "models": {run: [models]}, "stopping": {run: [per-seed stopping records]}}`` (:func:`accuracy_sentences`).
    """
    seeds = resolve_seeds(seeds)
    prompts = {s: _test_prompts(table, feat.test, cfg, s) for s in seeds}
    w = linear_probe(feat.train.x, feat.train.s, cfg.probe_l2)
    oracle = [oracle_accuracy(prompts[s], w) for s in seeds]
    keys = list(prompts[seeds[0]])
    o_mean, o_se = acc_stats(oracle, keys, table.n_prompts)
    J = len(feat.test.s)
    res = {"acc": {}, "acc_seeds": {}, "se": {}, "se_sentences": {}, "resid": {}, "seconds": {},
           "models": dict(models or {}), "stopping": dict(stopping or {}), "oracle": o_mean, "oracle_se": o_se,
           "oracle_seeds": oracle, "seeds": seeds, "n_prompts": table.n_prompts, "n_sentences": J}
    for run in tqdm(table.runs, desc=table.name, disable=not progress):
        if run.name not in res["models"]:
            t0 = time.perf_counter()
            res["models"][run.name], res["stopping"][run.name] = trained_models(run, feat, seeds, cfg, device)
            res["seconds"][run.name] = time.perf_counter() - t0
        both = [accuracy_sentences(m, prompts[s], J, device) for m, s in zip(res["models"][run.name], seeds)]
        res["acc_seeds"][run.name] = [a for a, _ in both]
        res["resid"][run.name] = [e for _, e in both]
        res["acc"][run.name], res["se"][run.name], res["se_sentences"][run.name] = sentence_stats(
            res["acc_seeds"][run.name], res["resid"][run.name], keys, table.n_prompts)
    return res


def validation_curve(run: Run, feat: SST2Features, cfg: SST2Data, lrs=(1e-3, 3e-3, 1e-2), steps: int = 800,
                     every: int = 100, seeds=None, n_prompts: int = 2000, alpha: Optional[float] = None,
                     device=None) -> Dict[float, dict]:
    """Step size and length of training chosen on the *validation* sentences, on search seeds disjoint from
    :data:`DEFAULT_SEEDS` (default: two of them): :func:`mambaicl.recipes.sst2.validation_curve`."""
    return _validation_curve(run, feat, cfg, DEFAULT_SEEDS, lrs=lrs, steps=steps, every=every, seeds=seeds,
                             n_prompts=n_prompts, alpha=alpha, device=device)


# ---------------------------------------------------------------- the paper's claims (mambaicl.analysis.sst2)


def claims(raw: Dict[str, dict], pca: Optional[dict] = None, n_test: Optional[int] = None,
           paired: Optional[dict] = None) -> Dict[str, List[dict]]:
    """Every comparison the paper states for SST-2 on the tables of this module
    (:func:`mambaicl.analysis.sst2.claims` with :data:`MAIN_TABLE`, :data:`TABLE_1`, :data:`TABLE_2`,
    :data:`CURRICULUM` and App. Table 5's gap of :data:`PAPER`, judged on the paired counts ``paired``,
    :func:`mambaicl.analysis.sst2.pca_paired`)."""
    return sst2_claims(raw, pca, n_test, tables=CLAIM_TABLES, paper_gap=PAPER["table5"]["all"] - PAPER["table5"][10],
                       paired=paired)


# ---------------------------------------------------------------- the experiment protocol


@dataclass(frozen=True)
class SST2Preset(Preset):
    """The whole SST-2 experiment: one or more regimes with their tables, PCA sizes of App. Table 5,
    the kept fractions of the filter's margin curve."""

    regimes: Tuple[Regime, ...] = ()
    pca_ks: Tuple[int, ...] = integers(PCA_KS, 1)
    keeps: Tuple[float, ...] = reals(KEEPS, 0.0, 1.0, low_open=True)

    def _check(self) -> None:
        check_instances("regimes", self.regimes, Regime)
        if len({r.name for r in self.regimes}) != len(self.regimes):
            raise ConfigError(f"regime names must be unique; got {[r.name for r in self.regimes]}")


ALL_TABLES = (MAIN_TABLE, TABLE_1, TABLE_2, CURRICULUM)
CLAIM_TABLES = {"main": MAIN_TABLE, "table1": TABLE_1, "table2": TABLE_2, "curriculum": CURRICULUM}
PAPER_PRESET = SST2Preset(name="paper", regimes=(
    Regime("held-out", DEFINITIONS["held-out"], HELD_OUT, (MAIN_TABLE,)),
    Regime("confident", DEFINITIONS["confident"], CONFIDENT, ALL_TABLES)))
FULL_PRESET = SST2Preset(name="full", regimes=(
    Regime("held-out", DEFINITIONS["held-out"], HELD_OUT, ALL_TABLES),
    Regime("confident", DEFINITIONS["confident"], CONFIDENT, ALL_TABLES)))
PRESETS = {"paper": PAPER_PRESET, "full": FULL_PRESET}
DEFAULT_PRESET = "paper"


@dataclass
class SST2Result(Result):
    """Per regime: its definition and data, probe ceilings, the filter's margin curve, App. Table 5, every
    table (per seed, mean, SE, the paper's number, the oracle ceiling), memorisation, the claims."""

    preset: str
    seeds: list
    regimes: dict
    raw: dict = internal()  # {regime: {table name: run_table(...) output, with the models}}
    features: dict = internal()  # {regime: SST2Features}


    def claims(self) -> dict:
        """Chapter 6's rows (``sst2-main``, ``-table1``, ``-table2``, ``-tables3-4``, ``-curriculum`` on the confident
        regime, ``-table5`` on the held-out one): each regime's checks (:func:`mambaicl.analysis.sst2.claims`) as
        the registry's inputs, with the row's text (:class:`~mambaicl.analysis.claims.ClaimParts`)."""
        from ..analysis.sst2 import claim_parts

        R = self.to_dict()["regimes"]
        held, conf, raw, S, a = R["held-out"], R["confident"], self.raw["confident"], len(self.seeds), 0.75
        fqrcq = ("FQ", "R", "CQ")
        main, t1, t2, cur = (raw[t.name] for t in (MAIN_TABLE, TABLE_1, TABLE_2, CURRICULUM))
        acc_m, acc_l, acc2 = main["acc"]["mamba"], main["acc"]["linear"], t2["acc"]
        c_lin = sentence_contrast([(s_, [d[(a, p)] for d in main["acc_seeds"]["linear"]],
                                    [e[(a, p)] for e in main["resid"]["linear"]]) for s_, p in ((1, "CQ"), (-1, "FQ"))],
                                  main["n_prompts"])
        fq = {h: t1["acc"][f"linear H={h}"][(0.5, "FQ")] for h in (1, 2, 3, 4)}
        lo, hi = min(TABLE_2.alphas), max(TABLE_2.alphas)
        fall = {n: sum(acc2[n][(lo, p)] - acc2[n][(hi, p)] for p in TABLE_2.placements) / 3 for n in acc2}
        c34 = conf["claims"]["tables3_4"][0]
        c = cur["acc"]["mamba (R then CQ)"]
        drop_m = acc_m[(a, "FQ")] - acc_m[(a, "CQ")]
        recovered = (c[(a, "CQ")] - acc_m[(a, "CQ")]) / drop_m
        se_recovered = conf["claims"]["curriculum"][1]["se"] / drop_m  # delta method: the half-recovery contrast's SE
        t5 = {k: held["pca"][str(k)] for k in (*PCA_KS, "all")}
        pg = held.get("pca_paired")
        paired = (f"; all − 10 = {t5['all'][0] - t5[10][0]:.1f} ± {paired_gap(pg['all_only'], pg['top_only'], pg['n']).se:.1f} "
                  f"paired ({pg['all_only']} / {pg['top_only']} sentences read right by one probe only)") if pg else ""
        return {
            "sst2-main": claim_parts(conf["claims"], "main", (
                "Mamba " + " / ".join(f"{acc_m[(a, p)]:.1f}" for p in fqrcq)
                + ", linear " + " / ".join(f"{acc_l[(a, p)]:.1f}" for p in fqrcq)
                + f" (FQ / R / CQ, ± ≤ {max(max(main['se'][n].values()) for n in main['se']):.1f}, "
                + f"{S} seeds, confident regime; ceiling {min(main['oracle'].values()):.1f}+); "
                + f"linear CQ - FQ {c_lin.diff:+.1f} ± {c_lin.se:.1f}")),
            "sst2-table1": claim_parts(conf["claims"], "table1", (
                "FQ " + " / ".join(f"{fq[h]:.1f}" for h in (1, 2, 3, 4))
                + f" (H = 1…4, α = 0.5, ± ≤ {max(max(v.values()) for v in t1['se'].values()):.1f}, {S} seeds, "
                "confident regime)")),
            "sst2-table2": claim_parts(conf["claims"], "table2", (
                "; ".join(f"{n} " + " / ".join(f"{acc2[n][(0.5, p)]:.1f}" for p in fqrcq)
                          for n in ("mamba", "linear", "softmax"))
                + f" (FQ / R / CQ, α = 0.5, ± ≤ {max(max(se.values()) for se in t2['se'].values()):.1f}, {S} seeds)")),
            "sst2-tables3-4": claim_parts(conf["claims"], "tables3_4", (
                f"from α = {lo} to {hi}: linear loses {fall['linear']:.1f}, softmax {fall['softmax']:.1f} "
                f"points (mean over placements; difference {c34['diff']:.1f} ± {c34['se']:.1f})")),
            "sst2-curriculum": claim_parts(conf["claims"], "curriculum", (
                " / ".join(f"{c[(a, p)]:.1f} ± {cur['se']['mamba (R then CQ)'][(a, p)]:.1f}" for p in fqrcq)
                + f" (FQ / R / CQ, {S} seeds, confident regime); recovers {100 * recovered:.0f} ± "
                  f"{100 * se_recovered:.0f} % of the CQ loss")),
            "sst2-table5": claim_parts(held["claims"], "table5", (
                " / ".join(f"{t5[k][0]:.1f}" for k in (*PCA_KS, "all"))
                + f" (5 / 7 / 10 / all 384 components, ± {t5['all'][1]:.1f}; all-MiniLM-L6-v2, dev){paired}")),
        }


def run(preset: SST2Preset = PAPER_PRESET, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True,
        path=None, cache_dir=None) -> SST2Result:
    """Load, embed (cached), train and evaluate every table of every regime of ``preset`` for every seed."""
    seeds = resolve_seeds(seeds)
    warn_if_chosen_on({SEARCHED_LR[r.kind] for g in preset.regimes for t in g.tables for r in t.runs
                       if r.kind in SEARCHED_LR and r.lr == SEARCHED_LR[r.kind].lr}, seeds, "sst2.run")
    raw_all, feats, regimes = {}, {}, {}
    for regime in preset.regimes:
        cfg = regime.data
        feat = prepare_features(cfg, path=path, cache_dir=cache_dir, device=device, progress=progress, with_val=True)
        raw, tables, shared = {}, {}, {}
        for table in regime.tables:
            reuse = {r.name: shared[_run_key(r)] for r in table.runs if _run_key(r) in shared}
            res = run_table(table, feat, seeds, cfg, device=device, progress=progress,
                            models={k: v[0] for k, v in reuse.items()}, stopping={k: v[1] for k, v in reuse.items()})
            for r in table.runs:
                shared.setdefault(_run_key(r), (res["models"][r.name], res["stopping"][r.name]))
            raw[table.name] = res
            tables[table.name] = table_json(table, res)
        pca = pca_table(feat, preset.pca_ks, cfg)
        paired = pca_paired(feat, 10, cfg)  # App. Table 5's two probes on the same sentences: the discordant ones
        found = claims(raw, pca, len(feat.test.s), paired)
        entry = {"definition": regime.definition, "data": dataclasses.asdict(cfg), "sizes": feat.sizes,
                 "ceilings": probe_ceilings(feat, cfg), "pca": {str(k): list(v) for k, v in pca.items()},
                 "pca_paired": paired,
                 "tables": tables, "claims": found, "verdicts": {k: judge(found, k).verdict for k in found}}
        if MAIN_TABLE.name in raw:
            memo = memorisation(raw[MAIN_TABLE.name], feat, cfg, n_prompts=MAIN_TABLE.n_prompts, device=device)
            entry["memorisation"] = {pool: {r: {"mean": v[0], "se": v[1], "per_seed": v[2]} for r, v in d.items()}
                                     for pool, d in memo.items()}
            raw["memorisation"] = memo
        if feat.filter is not None:
            entry["filter"] = {k: v for k, v in feat.filter.items() if not isinstance(v, torch.Tensor)}
            entry["margin_curve"] = margin_curve(feat, preset.keeps, l=cfg.l)
        regimes[regime.name] = entry
        raw_all[regime.name], feats[regime.name] = raw, feat
    return SST2Result(preset=preset.name, seeds=list(seeds), regimes=regimes, raw=raw_all, features=feats)


def _run_key(run: Run) -> tuple:
    """Two runs with equal settings (up to the name) are trained once and shared between tables."""
    return tuple(getattr(run, f.name) for f in dataclasses.fields(run) if f.name != "name")


# ---------------------------------------------------------------- Chapter 9's numbers (what the prose quotes)
#
# Each function below returns ``(text, numbers)``: the lines the chapter prints and the values it glues
# (``{glue name: text}``), derived once here from the stored result, with the checks the chapter's prose relies on.


def _regimes(result: SST2Result) -> dict:
    return result.to_dict()["regimes"]


def _lines(*lines: str) -> str:
    return "\n".join(lines)


def data_numbers(data: dict) -> tuple:
    """GLUE SST-2 as loaded (:func:`mambaicl.data.sst2.load_sst2`): its sizes, how many rows of ``train.tsv`` are
    full sentences (not a phrase of another row), and the share of prompts with no clean example."""
    from ..data.sst2 import maximal_phrases

    n_train_all, n_val = len(data["train"]), len(data["validation"])
    train_sentences = [s for s, _ in data["train"]]
    n_unique = len(set(train_sentences))
    n_maximal = len(maximal_phrases(train_sentences))
    assert (n_train_all, n_val) == (67349, 872)
    assert n_maximal < 0.15 * n_unique  # most rows are pieces of other rows
    text = _lines(f"train: {n_train_all:,} rows ({n_unique:,} distinct), dev: {n_val} rows; e.g. {data['validation'][0]}",
                  f"rows of train.tsv that are not a phrase of another row (full sentences): {n_maximal:,}")
    return text, {"ch6_n_train_all": f"{n_train_all:,}", "ch6_n_maximal": f"{n_maximal:,}",
                  "ch6_nested_pct": f"{100 * (1 - n_maximal / n_unique):.0f}",
                  "ch6_p_none_75": f"{100 * 0.75 ** 8:.0f}", "ch6_p_none_80": f"{100 * 0.8 ** 8:.0f}"}


def overview_numbers(result: SST2Result, filled: dict) -> tuple:
    """Each regime's definition and sizes, the confident regime's filter, the number of trained models."""
    R = _regimes(result)
    held, conf = R["held-out"], R["confident"]
    lines = []
    for name, reg in R.items():
        lines.append(f"{name:>9}: {reg['definition']}")
        lines.append(f"{'':>9}  sentences: " + ", ".join(f"{k} {v:,}" for k, v in reg["sizes"].items()))
    f = conf["filter"]
    assert f["n_test"] >= 300 and conf["sizes"]["train"] >= 500
    n_models = sum(len(t["runs"]) for reg in R.values() for t in reg["tables"].values())
    return _lines(*lines), {
        "ch6_n_models": str(n_models * len(result.seeds)), "ch6_n_seeds": str(len(result.seeds)),
        "ch6_ho_train": f"{held['sizes']['train']:,}", "ch6_reserved": f"{f['n_reserved']:,}",
        "ch6_dropped": f"{f['n_dropped']:,}", "ch6_n_probe": f"{f['n_probe']:,}", "ch6_n_scored": f"{f['n_scored']:,}",
        "ch6_keep_pct": f"{100 * f['keep']:.0f}", "ch6_cf_test": f"{f['n_test']:,}",
        "ch6_cf_train": f"{conf['sizes']['train']:,}", "ch6_cf_test_frac": f"{100 * f['n_test'] / f['n_reserved']:.0f}",
        "ch6_n_embedded": f"{round(filled['sentences'], -3):,}"}  # distinct sentences and twins embedded


def probe_numbers(result: SST2Result) -> tuple:
    """The linear probe's sentiment accuracy in each regime (:func:`probe_ceilings`), and what it says."""
    R = _regimes(result)
    c_ho, c_cf = R["held-out"]["ceilings"], R["confident"]["ceilings"]
    lines = ["probe accuracy (%)              held-out   confident"]
    lines += [f"{k:>28}  {c_ho[k]:8.1f}  {c_cf[k]:9.1f}" for k in c_ho]
    assert c_ho["features"] < 85  # the held-out ceiling: far below the paper's 99%
    assert all(c["phrase detection"] > 95 for c in (c_ho, c_cf))  # the phrase is linearly detectable
    shift = max(abs(c["features, poisoned"] - c["features"]) for c in (c_ho, c_cf))
    return _lines(*lines), {
        "ch6_ho_probe": f"{c_ho['embeddings']:.1f}", "ch6_ho_probe72": f"{c_ho['features']:.1f}",
        "ch6_cf_probe": f"{c_cf['embeddings']:.1f}", "ch6_cf_probe72": f"{c_cf['features']:.1f}",
        "ch6_detect": f"{c_cf['phrase detection']:.1f}", "ch6_bond_shift": f"{shift:.1f}",
        "ch6_cf_sep_words": "nearly separable (97% or more)" if min(c_cf["features"], c_cf["embeddings"]) >= 97 else
        "high, but below the 97% the regime was designed to reach",
        "ch6_bond_words": "barely moves" if shift < 2 else "moves only a little"}


def margin_numbers(result: SST2Result) -> tuple:
    """The filter's margin curve as a table, the chosen cut and the oracle ceilings at it."""
    conf = _regimes(result)["confident"]
    curve, f = conf["margin_curve"], conf["filter"]
    lines = [" kept   margin  held-out rows  set-aside  dev (n)      oracle a=0.75: 6 outliers  Binomial"]
    lines += [f"{100 * r['keep']:4.0f}%  {r['threshold']:6.2f}  {r['probe_scored']:12.1f}  {r['probe_reserved']:9.1f}"
              f"  {r['probe_dev']:5.1f} ({r['n_dev']:3d})  {r['oracle_balanced']:22.1f}  {r['oracle_binomial']:8.1f}"
              for r in curve]
    by_keep = {r["keep"]: r for r in curve}
    chosen = by_keep[f["keep"]]
    assert by_keep[1.0]["probe_scored"] < 85 < chosen["probe_scored"]
    # the cut was chosen on the scored training rows alone (sst2_split.choose_keep): the curve's column agrees
    by_val = max((r["keep"] for r in curve if r["probe_scored"] >= CONFIDENT.keep_target), default=min(KEEPS))
    assert by_val == f["keep"]
    assert chosen["oracle_binomial"] < chosen["oracle_balanced"] - 3  # the prompts with no clean example
    numbers = {}
    for k in (1.0, 0.5, 0.3):
        numbers[f"ch6_curve_{int(100 * k)}"] = f"{by_keep[k]['probe_scored']:.1f}"
        numbers[f"ch6_curve_res_{int(100 * k)}"] = f"{by_keep[k]['probe_reserved']:.1f}"
    numbers.update({
        "ch6_curve_chosen": f"{chosen['probe_scored']:.1f}", "ch6_curve_chosen_res": f"{chosen['probe_reserved']:.1f}",
        "ch6_curve_chosen_dev": f"{chosen['probe_dev']:.1f}", "ch6_oracle_bal": f"{chosen['oracle_balanced']:.1f}",
        "ch6_oracle_bin": f"{chosen['oracle_binomial']:.1f}",
        "ch6_keep_rule": " / ".join(f"{100 * float(k):.0f}% {v:.1f}" for k, v in f["keep_rule"].items())})
    return _lines(*lines), numbers


def memorisation_numbers(result: SST2Result) -> tuple:
    """Accuracy on prompts of training sentences beside test sentences (:func:`memorisation`), and the gain."""
    R = _regimes(result)
    held, conf = R["held-out"], R["confident"]
    lines = ["accuracy (%), alpha = 0.75, R      training sentences   test sentences"]
    memo_gap = {}
    for name, reg in R.items():
        m = reg["memorisation"]
        for run in ("mamba", "linear", "oracle"):
            tr, te = m["train"][run], m["test"][run]
            lines.append(f"{name:>9} {run:>7}            {tr['mean']:5.1f} ± {tr['se']:.1f}        "
                         f"{te['mean']:5.1f} ± {te['se']:.1f}")
        memo_gap[name] = m["train"]["mamba"]["mean"] - m["test"]["mamba"]["mean"]
    m_ho = held["memorisation"]
    se_gap = (m_ho["train"]["mamba"]["se"] ** 2 + m_ho["test"]["mamba"]["se"] ** 2) ** 0.5
    above_oracle = m_ho["train"]["mamba"]["mean"] > m_ho["train"]["oracle"]["mean"]
    return _lines(*lines), {
        "ch6_memo_ho_train": f"{held['memorisation']['train']['mamba']['mean']:.1f}",
        "ch6_memo_ho_test": f"{held['memorisation']['test']['mamba']['mean']:.1f}",
        "ch6_memo_ho_oracle": f"{held['memorisation']['train']['oracle']['mean']:.1f}",
        "ch6_memo_cf_train": f"{conf['memorisation']['train']['mamba']['mean']:.1f}",
        "ch6_memo_cf_test": f"{conf['memorisation']['test']['mamba']['mean']:.1f}",
        "ch6_memo_ho_gap": f"{memo_gap['held-out']:.1f}",
        "ch6_memo_words": ("a gain distinguishable from 0 (95 %, normal)" if memo_gap["held-out"] - 1.96 * se_gap > 0
                           else "a gain not distinguishable from 0 (95 %, normal)")
        + (" and more than the oracle reaches on the same sentences: the model has memorised sentences beyond what "
           "a linear read-out of their features allows" if above_oracle else
           ", not above the oracle on the same sentences"),
        "ch6_memo_far_words": "Yet it stays far below 99%." if m_ho["train"]["mamba"]["mean"] < 90 else
        "It comes closer to the paper's levels there."}


def preset_numbers(seeds=DEFAULT_SEEDS) -> tuple:
    """The main table's runs (everything the paper leaves open), the step sizes and the stopping rule."""
    from ..analysis.stats import t_quantile

    r0 = MAIN_TABLE.runs[0]
    assert all(not set(r.seeds) & set(seeds) for r in SEARCHED_LR.values())  # searched on seeds not reported
    return _lines(*(str(run) for run in MAIN_TABLE.runs)), {
        "ch6_batch": str(r0.batch_size), "ch6_dmodel": str(r0.d_model), "ch6_nprompts": f"{MAIN_TABLE.n_prompts:,}",
        "ch6_lrs": " / ".join(f"{r.name} {r.lr:g}" for r in MAIN_TABLE.runs),
        "ch6_schedules": "; ".join(f"{k} {v['lr']:g}" for k, v in SCHEDULES.items()),
        "ch6_search_seeds": " and ".join(str(s_) for s_ in SEARCHED_LR["mamba"].seeds),
        "ch6_t_df": str(len(seeds) - 1), "ch6_t_crit": f"{t_quantile(len(seeds) - 1):.2f}",
        "ch6_stop_rule": f"every {r0.every} steps, on {r0.n_val:,} fixed validation prompts; a model stops after "
                         f"{r0.patience} readings without a new lowest loss and is reported at its lowest reading; "
                         f"cap {r0.steps:,} steps",
        "ch6_every": str(r0.every), "ch6_patience": str(r0.patience), "ch6_cap": f"{r0.steps:,}",
        "ch6_switch": str(CURRICULUM.runs[0].switch)}


def steps_numbers(result: SST2Result) -> tuple:
    """The steps each model trained (median and range over seeds) and how many reached the cap."""
    R = _regimes(result)
    r0 = MAIN_TABLE.runs[0]
    lines = [f"{'regime':>9} {'table':>20} {'run':>18}   steps (median [min, max] over seeds)   capped"]
    stop_rows = {}
    for reg_name, reg in R.items():
        for tname, t in reg["tables"].items():
            for run, cells in t["runs"].items():
                st = sorted(cells["steps"])
                stop_rows[(reg_name, run)] = st
                lines.append(f"{reg_name:>9} {tname:>20} {run:>18}   {st[len(st) // 2]:5d} [{st[0]}, {st[-1]}]"
                             f"{'':>22}{sum(cells['capped'])}/{len(st)}")
    n_capped = sum(sum(c["capped"]) for reg in R.values() for t in reg["tables"].values() for c in t["runs"].values())
    med = {k: v[len(v) // 2] for k, v in stop_rows.items()}
    return _lines(*lines), {
        "ch6_steps_main": "; ".join(f"{run} {med[('confident', run)]} [{stop_rows[('confident', run)][0]}, "
                                    f"{stop_rows[('confident', run)][-1]}]"
                                    for run in ("mamba", "linear", "linear H=1", "softmax")),
        "ch6_capped_words": "no model reached the cap" if n_capped == 0 else
        f"{n_capped} models reached the cap of {r0.steps:,} steps with their validation loss still falling"}


def sentence_numbers(result: SST2Result) -> tuple:
    """The sentence-level standard error of every accuracy (test sentences as clusters), per regime."""
    R = _regimes(result)
    lines, se_sent = [], {}
    for reg_name, reg in R.items():
        cells = [c["se_sentences"] for t in reg["tables"].values() for run, rc in t["runs"].items()
                 for k, c in rc.items() if isinstance(c, dict)]
        n_sent = next(iter(reg["tables"].values()))["n_sentences"]
        se_sent[reg_name] = (max(cells), n_sent)
        lines.append(f"{reg_name:>9}: {n_sent:,} test sentences; sentence-level SE of an accuracy: at most "
                     f"{max(cells):.2f} points (median {sorted(cells)[len(cells) // 2]:.2f}, {len(cells)} cells)")
    return _lines(*lines), {
        "ch6_sent_se_cf": f"{se_sent['confident'][0]:.2f}", "ch6_sent_se_ho": f"{se_sent['held-out'][0]:.2f}",
        "ch6_n_test_cf": f"{se_sent['confident'][1]:,}",
        "ch6_sent_se_words": "below one point in every cell" if se_sent["confident"][0] < 1 else
        "above one point in some cells: more sentences would be needed",
        "ch6_sent_se_ho_words": "below one point as well" if se_sent["held-out"][0] < 1 else
        "above one point: dev has only 872 sentences"}


def _iv(c: dict) -> str:
    """A check's 95 % t interval as text."""
    return f"[{c['low']:+.1f}, {c['high']:+.1f}]"


def _check_lines(checks: dict) -> list:
    return [f"{name:>9}: {c['claim']}: {c['diff']:+.1f} ± {c['se']:.1f} [{c['low']:+.1f}, {c['high']:+.1f}] -> "
            f"{'holds' if c['holds'] else 'does not hold'}" for name, cs in checks.items() for c in cs]


def main_numbers(result: SST2Result, judged: dict) -> tuple:
    """The main table (§4.2) in both regimes, its checks and what the prose says of them; ``judged``: the chapter's
    rows as judged (``glue_claims(result)``)."""
    from ..analysis.claims import judge_all
    from ..analysis.sst2 import claim_parts

    R = _regimes(result)
    held = R["held-out"]
    main, main_ho = result.raw["confident"][MAIN_TABLE.name], result.raw["held-out"][MAIN_TABLE.name]
    checks = {name: R[name]["claims"]["main"] for name in R}
    text = _lines("confident regime (mean ± SE (paper)); last column: oracle ceiling", format_table(MAIN_TABLE, main),
                  "", "held-out regime", format_table(MAIN_TABLE, main_ho), "", *_check_lines(checks))
    a, fqrcq = 0.75, ("FQ", "R", "CQ")
    acc_m, acc_l = main["acc"]["mamba"], main["acc"]["linear"]
    n = {}
    for p in fqrcq:
        n[f"ch6_main_m_{p}"] = f"{acc_m[(a, p)]:.1f}"
        n[f"ch6_main_l_{p}"] = f"{acc_l[(a, p)]:.1f}"
        n[f"ch6_main_o_{p}"] = f"{main['oracle'][(a, p)]:.1f}"
    c_fq, c_r, c_drop, c_rel, c_unaff = checks["confident"]
    ho_main = judge_all({"sst2-main": claim_parts(held["claims"], "main")})["sst2-main"]  # held-out regime: not a row
    m_ho, l_ho = main_ho["acc"]["mamba"], main_ho["acc"]["linear"]
    c_lin = sentence_contrast([(s_, [d[(a, p)] for d in main["acc_seeds"]["linear"]],
                                [e[(a, p)] for e in main["resid"]["linear"]]) for s_, p in ((1, "CQ"), (-1, "FQ"))],
                              main["n_prompts"])
    ceilings = [v for t in result.raw["confident"].values() if "oracle" in t for v in t["oracle"].values()]
    ho = held["claims"]["main"]
    n.update({
        "ch6_main_margin_FQ": f"{c_fq['diff']:.1f} ± {c_fq['se']:.1f}",
        "ch6_main_margin_R": f"{c_r['diff']:.1f} ± {c_r['se']:.1f}",
        "ch6_main_drop_m": f"{c_drop['diff']:.1f} ± {c_drop['se']:.1f}",
        "ch6_main_drop_rel": f"{c_rel['diff']:.1f} ± {c_rel['se']:.1f}",
        "ch6_main_ho_verdict": held["verdicts"]["main"],
        "ch6_main_ho_fails": "; ".join(ho_main.parts_failing()) or "none",
        "ch6_main_ho": "Mamba " + " / ".join(f"{m_ho[(a, p)]:.1f}" for p in fqrcq)
                       + ", linear " + " / ".join(f"{l_ho[(a, p)]:.1f}" for p in fqrcq),
        "ch6_main_lin_cq": f"{c_lin.diff:+.1f} ± {c_lin.se:.1f}",
        "ch6_min_ceiling": f"{min(ceilings):.1f}",
        "ch6_main_verdict": judged["sst2-main"].verdict,
        "ch6_main_fqr_words": "both 95 % t intervals above 0, as the paper says" if c_fq["holds"] and c_r["holds"] else
        f"95 % t intervals {_iv(c_fq)} and {_iv(c_r)}: " + ("only under FQ" if c_fq["holds"] else "only under R"
                                                           if c_r["holds"] else "under neither")
        + " distinguishably above 0",
        "ch6_main_drop_words": f"95 % t interval {_iv(c_drop)}, " + ("above 0" if c_drop["holds"] else "not above 0"),
        "ch6_main_rel_words": f"{_iv(c_rel)}, " + ("above 0" if c_rel["holds"] else "not above 0"),
        "ch6_main_lin_words": (f"its 95 % t interval {_iv(c_unaff)} contains 0, as \"much less affected\" requires"
                               if c_unaff["holds"] else
                               f"FQ minus CQ has the 95 % t interval {_iv(c_unaff)}, away from 0: a "
                               + ("gain" if c_unaff["high"] < 0 else "loss")
                               + " under CQ, so not \"much less affected\" in the registry's reading (no change)"),
        "ch6_ho_words": "Mamba is above the linear Transformer under FQ and drops under CQ" if (
            ho[0]["holds"] and ho[2]["holds"] and ho[3]["holds"]) else "the FQ advantage and the CQ drop do not all hold"})
    return text, n


def gate_numbers(result: SST2Result, n_prompts: int = 2000) -> tuple:
    """The first layer's label-channel gate of the main table's first-seed Mamba on outlier and clean examples
    (R placement, α = 0.75), against the bound by which Chapter 8 judges Corollary 2(i)."""
    from ..analysis.claims import CLAIMS

    feat, main = result.features["confident"], result.raw["confident"][MAIN_TABLE.name]
    pr = sst2_prompts(feat.test, n_prompts, alpha=0.75, placement="R", count="balanced",
                      stream=numpy_stream(0, "ch6/gate"))
    mamba = main["models"]["mamba"][0]  # the first seed's model
    G = mamba.probe(pr.P)[0]["gate"]  # (batch, H, l+1, d_model)
    g = G[:, :, :-1, mamba.label_channel].mean(1)  # (batch, l): gate of each context example
    g_out, g_clean = g[pr.outlier].mean().item(), g[~pr.outlier].mean().item()
    bound = CLAIMS["cor2i"].criterion.threshold
    return f"mean gate: outlier examples {g_out:.4f}, clean examples {g_clean:.4f}", {
        "ch6_gate_seed": str(result.seeds[0]), "ch6_gate_out": f"{g_out:.4f}", "ch6_gate_clean": f"{g_clean:.4f}",
        "ch6_gate_ratio": f"{g_clean / g_out:.1f}", "ch6_gate_out_over_clean": f"{g_out / g_clean:.2f}",
        "ch6_cor2i_bound": f"{bound:.3g}",
        "ch6_gate_words": "the trained Mamba has learned to turn the outliers down" if g_out < g_clean else
        "the trained Mamba does not turn the outliers down",
        "ch6_gate_cor2i_words": "above" if g_out / g_clean > bound else "below"}


def table1_numbers(result: SST2Result, judged: dict) -> tuple:
    """App. Table 1 (heads), its checks and what the prose says of them."""
    t1, conf = result.raw["confident"][TABLE_1.name], _regimes(result)["confident"]
    S = len(result.seeds)
    checks1 = conf["claims"]["table1"]
    lines = [format_table(TABLE_1, t1)]
    lines += [f"{c['claim']}: {c['diff']:+.1f} ± {c['se']:.1f} -> "
              f"{c['verdict'].replace('a ', 'first ').replace(' b', ' second')}" for c in checks1]
    fq = {h: t1["acc"][f"linear H={h}"][(0.5, "FQ")] for h in (1, 2, 3, 4)}
    d32, d42 = checks1[1]["diff"], checks1[2]["diff"]
    below = [h for h, c in ((3, checks1[1]), (4, checks1[2])) if c["holds"]]
    above = [h for h, c in ((3, checks1[1]), (4, checks1[2])) if c["low"] > 0]  # distinguishably above H = 2
    return _lines(*lines), {
        "ch6_t1_spread": f"{max(fq.values()) - min(fq.values()):.1f}",
        "ch6_t1_h21": f"{checks1[0]['diff']:+.1f} ± {checks1[0]['se']:.1f}",
        "ch6_t1_h32": f"{checks1[1]['diff']:+.1f} ± {checks1[1]['se']:.1f}",
        "ch6_t1_h42": f"{checks1[2]['diff']:+.1f} ± {checks1[2]['se']:.1f}",
        "ch6_t1_verdict": judged["sst2-table1"].verdict,
        "ch6_t1_h21_words": "its 95 % interval above 0, as in the paper" if checks1[0]["holds"] else
        ("positive, as in the paper, but" if checks1[0]["diff"] > 0 else "negative, against the paper, and")
        + f" not distinguishable from 0 with {S} seeds",
        "ch6_t1_h3442_words": ("H = " + " and ".join(map(str, below)) + " distinguishably below H = 2 (95 % t)"
                               + ("" if len(below) == 2 else ", the other not")) if below else
        ("both negative, the paper's direction, but neither distinguishable from 0" if d32 < 0 and d42 < 0 else
         "both positive, against the paper's order" + (", one distinguishably" if max(checks1[1]["low"], checks1[2]["low"]) > 0
                                                        else ", neither distinguishable from 0") if d32 > 0 and d42 > 0
         else "of mixed sign, neither distinguishably below H = 2"),
        "ch6_t1_decline_words": "The paper's decline with more heads reproduces" if len(below) == 2 else
        "The paper's decline with more heads does not reproduce" if above else
        f"With {S} seeds the paper's decline with more heads is undecided"}


def _holds_lines(checks: list) -> list:
    return [f"{c['claim']}: {c['diff']:+.1f} ± {c['se']:.1f} -> {'holds' if c['holds'] else 'does not hold'}"
            for c in checks]


def table2_numbers(result: SST2Result, judged: dict) -> tuple:
    """App. Table 2 (softmax attention), its checks and what the prose says of them."""
    t2, conf = result.raw["confident"][TABLE_2.name], _regimes(result)["confident"]
    checks2 = conf["claims"]["table2"]
    acc2 = t2["acc"]
    c_soft_lin, c_m_drop, c_s_drop, c_m_vs_s = checks2
    n = {f"ch6_t2_{name}": " / ".join(f"{acc2[name][(0.5, p)]:.1f}" for p in ("FQ", "R", "CQ"))
         for name in ("mamba", "linear", "softmax")}
    n.update({
        "ch6_t2_soft_lin": f"{c_soft_lin['diff']:+.1f} ± {c_soft_lin['se']:.1f}",
        "ch6_t2_m_drop": f"{c_m_drop['diff']:.1f} ± {c_m_drop['se']:.1f}",
        "ch6_t2_s_drop": f"{c_s_drop['diff']:+.1f} ± {c_s_drop['se']:.1f}",
        "ch6_t2_m_vs_s": f"{c_m_vs_s['diff']:+.1f} ± {c_m_vs_s['se']:.1f}",
        "ch6_t2_s_drop_words": "its 95 % interval contains 0: no CQ drop, as in the paper" if c_s_drop["holds"] else
        "its 95 % interval excludes 0: softmax attention does change under CQ, against the paper",
        "ch6_t2_m_drop_words": "its 95 % interval above 0" if c_m_drop["holds"] else
        f"with {len(result.seeds)} seeds its 95 % interval contains 0",
        "ch6_t2_m_vs_s_words": "distinguishably more" if c_m_vs_s["holds"] else "not distinguishably more",
        "ch6_t2_m_frac": f"{c_m_drop['diff'] / (99.73 - 82.73):.0%}",  # the paper's FQ - CQ drop: 17.0 points
        "ch6_t2_soft_lin_words": "ours is too (95 % t)" if c_soft_lin["holds"] else
        ("ours is not distinguishably better" if c_soft_lin["high"] > 0 else "ours is distinguishably worse"),
        "ch6_t2_verdict": judged["sst2-table2"].verdict})
    return _lines(format_table(TABLE_2, t2), *_holds_lines(checks2)), n


def tables3_4_numbers(result: SST2Result, judged: dict) -> tuple:
    """App. Tables 3-4 (the α sweep): the accuracy each model loses from the lowest α to the highest, the checks."""
    t2, conf = result.raw["confident"][TABLE_2.name], _regimes(result)["confident"]
    acc2 = t2["acc"]
    lo, hi = min(TABLE_2.alphas), max(TABLE_2.alphas)
    fall = {n: sum(acc2[n][(lo, p)] - acc2[n][(hi, p)] for p in TABLE_2.placements) / 3 for n in acc2}
    lines = [f"{n:>8}: accuracy lost from alpha = {lo} to {hi} (mean over placements): {v:5.1f} points"
             for n, v in fall.items()]
    c34, c34_half = conf["claims"]["tables3_4"]
    return _lines(*lines, *_holds_lines([c34, c34_half])), {
        "ch6_fall_linear": f"{fall['linear']:.1f}", "ch6_fall_softmax": f"{fall['softmax']:.1f}",
        "ch6_fall_mamba": f"{fall['mamba']:.1f}", "ch6_fall_diff": f"{c34['diff']:.1f} ± {c34['se']:.1f}",
        "ch6_t34_verdict": judged["sst2-tables3-4"].verdict,
        "ch6_fall_words": "95 % interval above 0" if c34["holds"] else
        f"with {len(result.seeds)} seeds its 95 % interval includes 0" if c34["diff"] > 0 else "in the wrong direction",
        "ch6_fall_more_words": "falls faster than" if c34["diff"] > 0 else "does not fall faster than",
        "ch6_fall_half_words": "it loses less than half as much as the linear one (95 % t), as the paper's softmax does"
        if c34_half["holds"] else "our softmax Transformer does not \"avoid the sharp drop\": it loses more than half as "
        "much as the linear one" if c34_half["diff"] < 0 else
        "it loses less than half as much as the linear one on average, not distinguishably",
        "ch6_fall_least_words": "Mamba degrades least." if fall["mamba"] < min(fall["linear"], fall["softmax"]) else
        "Mamba is not the model that degrades least."}


def curriculum_numbers(result: SST2Result, judged: dict) -> tuple:
    """App. 8.1's curriculum: its table, its checks, the share of Mamba's CQ loss it recovers."""
    raw, conf = result.raw["confident"], _regimes(result)["confident"]
    cur, main = raw[CURRICULUM.name], raw[MAIN_TABLE.name]
    checks_c = conf["claims"]["curriculum"]
    a, S = 0.75, len(result.seeds)
    acc_m = main["acc"]["mamba"]
    c = cur["acc"]["mamba (R then CQ)"]
    drop_m = acc_m[(a, "FQ")] - acc_m[(a, "CQ")]
    recovered = (c[(a, "CQ")] - acc_m[(a, "CQ")]) / drop_m
    # its SE by the delta method: the SE of (gain - r drop) at r = recovered, which the half-recovery contrast
    # (r = 1/2) approximates, divided by the drop
    se_recovered = checks_c[1]["se"] / drop_m
    return _lines(format_table(CURRICULUM, cur), *_holds_lines(checks_c)), {
        "ch6_cur": " / ".join(f"{c[(a, p)]:.1f}" for p in ("FQ", "R", "CQ")),
        "ch6_cur_recovered": f"{100 * recovered:.0f} ± {100 * se_recovered:.0f}",
        "ch6_cur_verdict": judged["sst2-curriculum"].verdict,
        "ch6_cur_half_words": "more than half of it (95 % t)" if checks_c[1]["holds"] else
        (f"more than half on average, not distinguishably with {S} seeds" if checks_c[1]["diff"] > 0
         else "less than half of it, so not \"most of the CQ loss\""),
        "ch6_cur_raise_words": "raises Mamba's CQ accuracy (95 % t)" if checks_c[0]["holds"] else
        ("raises Mamba's CQ accuracy on average, but not distinguishably with these seeds" if checks_c[0]["diff"] > 0
         else "does not raise Mamba's CQ accuracy")}


def table5_numbers(result: SST2Result) -> tuple:
    """App. Table 5 in both regimes beside the paper's DistilBERT row; the top-10 share of the above-chance accuracy."""
    R = _regimes(result)
    held, conf = R["held-out"], R["confident"]
    paper5 = PAPER["table5"]
    lines = ["components   held-out (dev)   confident (test pool)   paper (DistilBERT, dev)"]
    for k in (*PCA_KS, "all"):
        h, cf = held["pca"][str(k)], conf["pca"][str(k)]
        lines.append(f"{str(k):>10}  {h[0]:6.1f} ± {h[1]:.1f}   {cf[0]:10.1f} ± {cf[1]:.1f}   {paper5[k]:14.2f}")
    t5 = {k: held["pca"][str(k)] for k in (*PCA_KS, "all")}
    share10 = (t5[10][0] - 50) / (t5["all"][0] - 50)
    assert all(t5[k][0] < t5["all"][0] for k in PCA_KS) and share10 > 0.75
    (c5,) = held["claims"]["table5"]
    pg = held["pca_paired"]
    lines.append(f"all minus top 10, paired over the {pg['n']} dev sentences: {t5['all'][0] - t5[10][0]:.1f} ± "
                 f"{c5['se']:.1f} points ({pg['all_only']} sentences read right only with all components, "
                 f"{pg['top_only']} only with the top 10)")
    return _lines(*lines), {"ch6_pca10": f"{t5[10][0]:.1f}", "ch6_pca_all": f"{t5['all'][0]:.1f}",
                            "ch6_pca10_share": f"{100 * share10:.0f}",
                            "ch6_pca_gap": f"{t5['all'][0] - t5[10][0]:.1f}",
                            "ch6_pca_gap_se": f"{c5['se']:.1f}",
                            "ch6_pca_all_only": str(pg["all_only"]), "ch6_pca_top_only": str(pg["top_only"]),
                            "ch6_pca_diff_iv": f"[{c5['low']:+.1f}, {c5['high']:+.1f}]",
                            "ch6_pca_diff_words": "contains 0" if c5["low"] <= 0 <= c5["high"] else "excludes 0",
                            "ch6_ex4_words": ("But the difference is not meaningful at this scale: as the section on "
                                              "App. Table 5 notes, the 95 % interval of the difference between the two "
                                              f"gaps (the paired sampling error of the {pg['n']} dev sentences) "
                                              f"contains 0, {_iv(c5)}." if c5["low"] <= 0 <= c5["high"] else
                                              "The difference is larger than the sampling of the dev sentences "
                                              f"explains: the 95 % interval of the difference between the two gaps "
                                              f"(the paired sampling error of the {pg['n']} dev sentences) is "
                                              f"{_iv(c5)}, away from 0.")}


def timing_numbers(result: SST2Result, wall: float, cpu: float, filled: dict) -> tuple:
    """The run's training times per model and the chapter's own time (``wall`` and ``cpu`` seconds since the chapter
    started, less the embedding cache's fill, ``filled``)."""
    lines = [f"{reg_name:>9} {tname:>22} {run:>18}: {s:5.1f} s training ({len(result.seeds)} seeds)"
             for reg_name, reg_raw in result.raw.items() for tname, res in reg_raw.items()
             for run, s in res.get("seconds", {}).items()]
    total, cpu = wall - filled["seconds"], cpu - filled["cpu_seconds"]
    lines.append(f"features {sum(f.seconds for f in result.features.values()):.0f} s; whole chapter {total / 60:.1f} "
                 f"min wall-clock, {cpu / 60:.1f} min CPU time of this kernel (embedding cache: "
                 f"{filled['seconds']:.0f} s more)")
    return _lines(*lines), {"ch6_total_min": f"{total / 60:.1f}", "ch6_cpu_min": f"{cpu / 60:.1f}"}
