"""Chapter 6: the SST-2 "James Bond" experiments of §4.2 and App. 8.1-8.2, as named presets and runners.

Glossary (code name -> paper symbol):

===================  ========================================================================
``SST2Data``         one *regime*: which sentences, which encoder, ``d`` after PCA (72, App. 8.1),
                     ``l`` (8), how test prompts count their outliers
``Regime``           a named ``SST2Data`` with its definition and the tables run in it
``Run``              one trained model: kind, heads ``H``, layers, training ``p_a`` and schedule
``Table``            runs + test ``alpha`` values + placements (FQ / R / CQ) + the paper's numbers
``p_a``              fraction of training examples with the phrase (Eq. 4 / Def. 1)
``alpha``            fraction of test examples with the phrase (Eq. 5 / Def. 2)
``curriculum``       App. 8.1: placement R for the first half of training, CQ for the second
``oracle``           the encoder's in-context ceiling: knows which examples are clean, infers the
                     task from them with the linear probe, applies it to the query
``filter probe``     (regime ``"confident"``) a logistic probe on the raw embeddings of sentences
                     that are then set aside; the pool keeps the sentences it reads with the
                     largest margin ``|w^T x + b|``
===================  ========================================================================

Two regimes (:data:`REGIMES`):

* ``"held-out"``: ``n_train`` random training sentences for training prompts, GLUE's dev split
  for test prompts; outlier examples drawn independently (Eq. (5), ``count="binomial"``).
* ``"confident"``: the filter probe is fit on ``n_probe`` training sentences; of the remaining
  ones the fraction ``keep`` with the largest probe margin forms the pool, split at random into
  test (``n_test``), validation (``n_val``) and training sentences (the rest). Test prompts hold
  ``floor(alpha l)`` or ``ceil(alpha l)`` outlier examples with mean ``alpha l`` (``count="balanced"``),
  so every prompt keeps a clean example to read the task from.

The task on SST-2 (module :mod:`mambaicl.data.poisoning`): a prompt's task ``f`` says which
sentiment is labelled +1; the query's label is ``z = f * s_query``. Outlier examples carry the
phrase "James Bond" and, at test time, the targeted label +1 of Example 1.

Hyperparameters the paper does not give (``d_model``, steps, learning rate, batch size, the
sentences, the probes' penalty, the filter) are fields of the presets below, validated on creation.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch
from tqdm.auto import tqdm

from ..analysis.stats import Comparison, error_mean_se
from ..config import (DEEP_KINDS, LOSSES, OPTIMIZERS, Config, check_int, choice, choices, flag, integer, integers, real, reals)
from ..data.encoders import DEFAULT_ENCODER, embedding_cache
from ..data.features import PCA, fit_pca, linear_probe, probe_accuracy
from ..data.poisoning import COUNTS, PLACEMENTS, RULES, EmbeddedPool, poison_sentences, sst2_prompts
from ..data.sst2 import inside_any, load_sst2, maximal_phrases
from ..evaluate import predict, zero_one_error
from ..models import build_model
from ..seeding import torch_generator
from ..train import fit
from .base import Preset, Result, internal, resolve_device, resolve_seeds

__all__ = [
    "REGIMES", "COUNTS", "SST2Data", "Run", "Table", "Regime", "SST2Features", "PAPER",
    "HELD_OUT", "CONFIDENT", "SCHEDULES", "MAIN_TABLE", "TABLE_1", "TABLE_2", "CURRICULUM", "PCA_KS", "KEEPS",
    "PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS", "texts_to_embed", "prepare_features", "fill_embedding_cache", "margin_curve",
    "probe_ceilings", "pca_table", "train_run", "accuracy", "oracle_accuracy", "run_table", "memorisation",
    "validation_curve", "contrast", "claims", "judge", "CLAIM_KEYS", "format_table", "SST2Preset", "SST2Result", "run",
]

REGIMES = ("held-out", "confident")


@dataclass(frozen=True)
class SST2Data(Config):
    """One regime's sentences, encoder, features and test-prompt construction (every field validated).

    ``regime="held-out"``: ``n_train`` random training sentences (``None``: all but the validation
    ones), ``n_val`` more for validation, GLUE's dev split (``n_test``: its first rows, ``None``: all
    872) for test prompts.

    ``regime="confident"``: ``n_reserved`` *maximal* training sentences (full sentences, not a phrase
    of another row) are set aside as test candidates, and every row that is a phrase of one of them
    is dropped; the filter probe is fit on ``n_probe`` of the remaining rows; of the next ``n_scored``
    (``None``: all the others) the fraction ``keep`` read with the largest margin forms the training
    pool (``n_val`` of it for validation, at most ``n_train`` for training prompts), and the candidates
    above the same margin threshold form the test pool.

    Validation sentences (``n_val``) are carved from ``train.tsv`` for choosing step sizes
    (:func:`validation_curve`); the chapter's experiment does not read them, so they are embedded only
    when asked for (``prepare_features(..., with_val=True)``).
    """

    regime: str = choice("held-out", REGIMES)
    encoder: str = DEFAULT_ENCODER
    n_train: Optional[int] = integer(2000, 10, optional=True)
    n_val: int = integer(1000, 10)  # validation sentences carved from train.tsv (step sizes; never dev)
    n_test: Optional[int] = integer(None, 10, optional=True)  # held-out: dev rows used (None: all 872)
    n_reserved: int = integer(2500, 10)  # confident: maximal training sentences set aside as test candidates
    n_probe: int = integer(8000, 10)  # confident: rows the filter probe is fit on (then set aside)
    n_scored: Optional[int] = integer(None, 100, optional=True)  # confident: rows the probe scores (None: all the rest)
    keep: float = real(1.0, 0.0, 1.0, low_open=True)  # confident: fraction of the scored rows kept, by margin
    # test prompts: Eq. (5) draws, "fixed" round(alpha l) or "balanced" floor/ceil (mean alpha l)
    count: str = choice("binomial", COUNTS)
    d: int = integer(72, 1)  # PCA components kept: the "data dimension 72" of App. 8.1
    l: int = integer(8, 1)  # context examples per prompt (§4.2)
    probe_l2: float = real(1e-2, 0.0)  # ridge penalty of the logistic linear probes (not tuned on test sentences)
    seed: int = integer(0, 0)  # the data seed: sentence split, poisoning, PCA

    def _check(self) -> None:
        if self.n_train is not None:
            check_int("d", self.d, 1, self.n_train)


@dataclass(frozen=True)
class Run(Config):
    """One model to train: architecture (§4.2: 3 layers) and training schedule."""

    name: str
    kind: str = choice("mamba", tuple(k for k in DEEP_KINDS if k != "mamba1"))  # mambaicl.models.deep
    n_heads: int = integer(2, 1)
    n_layers: int = integer(3, 1)
    d_model: int = integer(80, 1)  # >= d+1: the prompt enters the residual stream by zero padding
    p_a: float = real(0.25, 0.0, 1.0, high_open=True)
    steps: int = integer(300, 1)
    batch_size: int = integer(128, 1)
    lr: float = real(3e-3, 0.0, 1.0, low_open=True)
    optimizer: str = choice("adam", OPTIMIZERS)
    loss: str = choice("hinge", LOSSES)  # Section 2
    curriculum: bool = flag(False)  # App. 8.1: R for the first half, CQ for the second


@dataclass(frozen=True)
class Table(Config):
    """Runs evaluated at test fractions ``alphas`` and ``placements``; ``paper[run][(alpha, placement)]`` in %."""

    name: str
    runs: Tuple[Run, ...]
    alphas: Tuple[float, ...] = reals((0.75,), 0.0, 1.0)
    placements: Tuple[str, ...] = choices(("FQ", "R", "CQ"), tuple(PLACEMENTS))
    rule: str = choice("targeted", tuple(RULES))  # Example 1: outliers labelled +1
    n_prompts: int = integer(4000, 1)  # test prompts per (alpha, placement, seed), the same for every run of a seed
    paper: Dict[str, Dict[Tuple[float, str], float]] = field(default_factory=dict)

    def _check(self) -> None:
        if len({r.name for r in self.runs}) != len(self.runs):
            raise ValueError(f"run names must be unique; got {[r.name for r in self.runs]}")


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


PCA_KS = (5, 7, 10)
KEEPS = (1.0, 0.7, 0.5, 0.3, 0.2, 0.1)  # kept fractions for the margin curve of the filter
# Step size and length per model kind, chosen with validation_curve on the confident regime's validation
# sentences (lr in {1e-3, 3e-3, 1e-2}, up to 800 steps, the lowest validation hinge loss at p_a): Mamba 300
# steps at 1e-3 (its loss stops improving by then), linear 400 at 1e-3 and softmax 600 at 3e-3 (theirs
# still fall slowly there: linear 0.091 at 400 vs 0.085 at 700 steps; the chapter's time budget stops them).
SCHEDULES = {"mamba": {"lr": 1e-3, "steps": 300}, "linear": {"lr": 1e-3, "steps": 400},
             "softmax": {"lr": 3e-3, "steps": 600}}
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

HELD_OUT = SST2Data()
# Confident regime: the filter probe is fit on 8,000 rows and scores the next 5,000; the 20 % it reads with
# the largest margin (1,000 sentences) form the training pool (200 of them set aside for validation).
# Scoring every remaining row (about 33,000) gave a training pool of 5,600 sentences but cost about ten
# CPU-minutes of float64 embedding on a cold cache, more than the rest of the book together, so a first
# build could not finish in 10 minutes on 2 cores. With these sizes the probe ceilings stay at 97 % and
# the whole chapter embeds about 21,000 sentences (book/exec_stats.md gives the time).
CONFIDENT = SST2Data(regime="confident", n_train=None, keep=0.2, count="balanced", n_probe=8000, n_scored=5000,
                     n_val=200)
DATA = HELD_OUT


@dataclass(frozen=True)
class Regime:
    """A named data regime, its definition (written to ``results.json``) and the tables run in it."""

    name: str
    definition: str
    data: SST2Data
    tables: Tuple[Table, ...]

    def __post_init__(self) -> None:
        if not self.name or not self.definition:
            raise ValueError("a regime needs a name and a definition")
        if not self.tables:
            raise ValueError(f"regime {self.name!r}: tables must hold at least one Table")


DEFINITIONS = {
    "held-out": ("2,000 random rows of train.tsv for training prompts; test prompts from GLUE's dev split "
                 "(872 sentences never seen in training); each context example independently an outlier with "
                 "probability alpha (Definition 2, Eq. (5))."),
    "confident": ("the 20% of train.tsv rows that a logistic probe (fit on 8,000 other rows) reads with the largest "
                  "margin; test sentences are 2,500 full sentences set aside beforehand (every phrase of them removed "
                  "from training and probe rows) and kept by the same margin threshold; a test prompt holds "
                  "floor(alpha l) or ceil(alpha l) outlier examples, alpha l on average (never l while alpha l <= l - 1)."),
}


# ---------------------------------------------------------------- sentences, embeddings, features


@dataclass
class SST2Features:
    """One regime's pools of prompt features (clean ``x``, poisoned ``x_bond``, sentiment ``s``),
    raw embeddings, the PCA, and what the filter did (``filter``; regime ``"confident"`` only)."""

    train: EmbeddedPool
    val: Optional[EmbeddedPool]  # None unless prepare_features(..., with_val=True)
    test: EmbeddedPool
    emb_train: torch.Tensor  # (n_train, D) clean embeddings
    emb_test: torch.Tensor  # (n_test, D)
    pca: PCA
    examples: Dict[str, Tuple[str, str]]  # pool -> (a sentence, its poisoned twin)
    sizes: Dict[str, int] = field(default_factory=dict)
    filter: Optional[dict] = None
    seconds: float = 0.0


def _sentiment(labels) -> torch.Tensor:
    return torch.tensor([1.0 if y == 1 else -1.0 for y in labels])  # (n,)


def _dedup(rows):
    seen, out = set(), []
    for s, y in rows:
        if s not in seen:
            seen.add(s)
            out.append((s, y))
    return out


def _split(cfg: SST2Data, path=None) -> dict:
    """Sentence indices of every pool of ``cfg``'s regime (deterministic in ``cfg.seed``), no embedding.

    Returns ``{"rows": train rows (deduplicated), "twins": their poisoned twins, "dev": dev rows,
    "dev_twins", "train"/"val"/"test"/"probe"/"scored"/"reserved": index lists}``; test indices
    refer to ``dev`` in regime ``"held-out"`` and to ``rows`` otherwise.
    """
    data = load_sst2(path)
    rows = _dedup(data["train"])
    dev = data["validation"][: cfg.n_test] if cfg.regime == "held-out" else data["validation"]
    out = {"rows": rows, "dev": dev,
           "twins": poison_sentences([s for s, _ in rows], torch_generator(cfg.seed, "sst2/poison/train")),
           "dev_twins": poison_sentences([s for s, _ in dev], torch_generator(cfg.seed, "sst2/poison/validation"))}
    perm = torch.randperm(len(rows), generator=torch_generator(cfg.seed, "sst2/split")).tolist()
    if cfg.regime == "held-out":
        n_train = len(rows) - cfg.n_val if cfg.n_train is None else cfg.n_train
        if n_train + cfg.n_val > len(rows):
            raise ValueError(f"n_train + n_val must be at most {len(rows)} (rows of train.tsv); got {n_train + cfg.n_val}")
        out.update(train=perm[:n_train], val=perm[n_train:n_train + cfg.n_val], test=list(range(len(dev))))
        return out
    sentences = [s for s, _ in rows]
    maximal = set(maximal_phrases(sentences))
    reserved = [i for i in perm if i in maximal][: cfg.n_reserved]
    if len(reserved) < cfg.n_reserved:
        raise ValueError(f"n_reserved must be at most {len(maximal)} (maximal sentences of train.tsv); got {cfg.n_reserved}")
    res_set = set(reserved)
    others = [i for i in perm if i not in res_set]
    leak = inside_any([sentences[i] for i in others], [sentences[i] for i in reserved])
    rest = [i for i, bad in zip(others, leak) if not bad]
    if cfg.n_probe + 100 > len(rest):
        raise ValueError(f"n_probe must leave at least 100 rows to score; {len(rest)} rows remain, got {cfg.n_probe}")
    scored = rest[cfg.n_probe:] if cfg.n_scored is None else rest[cfg.n_probe:cfg.n_probe + cfg.n_scored]
    out.update(reserved=reserved, probe=rest[: cfg.n_probe], scored=scored, dropped=len(others) - len(rest))
    return out


def texts_to_embed(cfg: SST2Data, path=None, *, split: Optional[dict] = None, with_val: bool = False) -> List[str]:
    """The sentences :func:`prepare_features` embeds first for ``cfg``, in order.

    Held-out: every sentence and poisoned twin of its pools (validation ones only ``with_val``).
    Confident: the clean text of every row the filter reads (reserved, probe, scored, dev); the
    twins of the kept rows follow once the probe has read them.
    """
    sp = split or _split(cfg, path)
    rows, twins = sp["rows"], sp["twins"]
    if cfg.regime == "held-out":
        idx = sp["train"] + (sp["val"] if with_val else [])
        return ([rows[i][0] for i in idx] + [twins[i] for i in idx] + [s for s, _ in sp["dev"]] + sp["dev_twins"])
    idx = sp["reserved"] + sp["probe"] + sp["scored"]
    return [rows[i][0] for i in idx] + [s for s, _ in sp["dev"]]


def _keep_threshold(margin: torch.Tensor, keep: float) -> float:
    """The margin ``|m|`` above which the fraction ``keep`` of ``margin`` lies (ties kept)."""
    k = max(1, int(round(keep * len(margin))))
    return float(margin.abs().sort(descending=True).values[k - 1])


def prepare_features(cfg: SST2Data = HELD_OUT, *, path=None, cache_dir=None, device=None,
                     progress=False, with_val: bool = False, cache=None) -> SST2Features:
    """Load SST-2, split it by ``cfg.regime``, poison, embed (cached), filter, project to ``d`` PCA features.

    The PCA is fitted on the training sentences and their poisoned twins together, so that the
    direction the phrase adds is kept; features are scaled to unit variance per coordinate. The
    validation pool (``n_val`` sentences for :func:`validation_curve`) is embedded only ``with_val``;
    otherwise ``val`` is ``None`` (nothing else depends on it). ``cache``: an
    :class:`~mambaicl.data.encoders.EmbeddingCache` to use (default: the encoder's cache in ``cache_dir``).
    """
    t0 = time.perf_counter()
    sp = _split(cfg, path)
    rows, twins, dev, dev_twins = sp["rows"], sp["twins"], sp["dev"], sp["dev_twins"]
    cache = cache if cache is not None else embedding_cache(cfg.encoder, cache_dir=cache_dir, device=device)
    sentences = [s for s, _ in rows]
    s_rows = _sentiment([y for _, y in rows])
    s_dev = _sentiment([y for _, y in dev])
    filt = None
    if cfg.regime == "held-out":
        pools = {"train": sp["train"], "val": sp["val"]}
    else:
        E = cache.embed(texts_to_embed(cfg, split=sp), progress=progress)
        n_res, n_pr, n_sc = len(sp["reserved"]), len(sp["probe"]), len(sp["scored"])
        E_res, E_probe, E_sc, E_dev = torch.split(E, [n_res, n_pr, n_sc, len(dev)])
        w = linear_probe(E_probe, s_rows[sp["probe"]], cfg.probe_l2)
        m_sc, m_res, m_dev = (X.double() @ w[:-1] + w[-1] for X in (E_sc, E_res, E_dev))
        thr = _keep_threshold(m_sc, cfg.keep)
        kept = [i for i, m in zip(sp["scored"], m_sc.tolist()) if abs(m) >= thr]
        test = [i for i, m in zip(sp["reserved"], m_res.tolist()) if abs(m) >= thr]
        n_train = len(kept) - cfg.n_val if cfg.n_train is None else min(cfg.n_train, len(kept) - cfg.n_val)
        if n_train < cfg.d:
            raise ValueError(f"keep={cfg.keep} leaves {len(kept)} rows: too few for n_val={cfg.n_val} and d={cfg.d}")
        pools = {"train": kept[cfg.n_val:cfg.n_val + n_train], "val": kept[: cfg.n_val]}
        filt = {"threshold": thr, "margin_scored": m_sc.float(), "s_scored": s_rows[sp["scored"]],
                "margin_reserved": m_res.float(), "s_reserved": s_rows[sp["reserved"]],
                "margin_dev": m_dev.float(), "s_dev": s_dev, "n_probe": n_pr, "n_scored": n_sc,
                "n_reserved": n_res, "n_dropped": sp["dropped"], "n_kept": len(kept), "n_test": len(test)}
    texts = {k: ([sentences[i] for i in v], [twins[i] for i in v]) for k, v in pools.items()}
    labels = {k: s_rows[v] for k, v in pools.items()}
    if cfg.regime == "held-out":
        texts["test"], labels["test"] = ([s for s, _ in dev], dev_twins), s_dev
    else:
        texts["test"], labels["test"] = ([sentences[i] for i in test], [twins[i] for i in test]), s_rows[test]
    order = ("train", "val", "test") if with_val else ("train", "test")
    flat = [t for k in order for t in texts[k][0] + texts[k][1]]
    emb = cache.embed(flat, progress=progress)  # (sum 2 n_k, D)
    parts = torch.split(emb, [2 * len(texts[k][0]) for k in order])
    clean = {k: p[: len(texts[k][0])] for k, p in zip(order, parts)}
    bond = {k: p[len(texts[k][0]):] for k, p in zip(order, parts)}
    pca = fit_pca(torch.cat([clean["train"], bond["train"]]), cfg.d, unit_variance=True)
    pool = {k: EmbeddedPool(pca.transform(clean[k]).float(), pca.transform(bond[k]).float(), labels[k]) for k in order}
    return SST2Features(train=pool["train"], val=pool.get("val"), test=pool["test"], emb_train=clean["train"],
                        emb_test=clean["test"], pca=pca, examples={k: (texts[k][0][0], texts[k][1][0]) for k in order},
                        sizes={k: len(texts[k][0]) for k in ("train", "val", "test")}, filter=filt,
                        seconds=time.perf_counter() - t0)


def fill_embedding_cache(preset: "SST2Preset" = None, *, path=None, cache_dir=None, device=None,
                         progress=True) -> Dict[str, object]:
    """Embed every sentence (and poisoned twin) that :func:`run` needs for ``preset``, into the cache.

    Chapter 6 calls this in a cell of its own before the experiment, so that a cold cache is filled
    (with a progress bar: ``True`` in the notebook, or a text stream such as the terminal of the
    book's build) and the experiment's cells then only read it; ``python -m mambaicl embed-sst2``
    calls it too. Returns ``{"sentences": distinct sentences needed, "encoded": how many of them were
    encoded now (the rest came from the cache), "seconds": wall, "cpu_seconds": process CPU}``.
    """
    preset = PAPER_PRESET if preset is None else preset
    t0, c0 = time.perf_counter(), time.process_time()
    caches = {}
    for regime in preset.regimes:
        enc = regime.data.encoder
        if enc not in caches:
            caches[enc] = embedding_cache(enc, cache_dir=cache_dir, device=device)
        prepare_features(regime.data, path=path, device=device, progress=progress, cache=caches[enc])
    return {"sentences": sum(len(c.requested) for c in caches.values()),
            "encoded": sum(c.encoded for c in caches.values()),
            "seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0}


def _hit_rate(margin: torch.Tensor, s: torch.Tensor) -> float:
    """Accuracy (%) of reading sentiment ``s`` from the sign of ``margin`` (the book's 0-1 error)."""
    return 100 * (1 - zero_one_error(margin.double(), s.double())) if len(s) else math.nan


def margin_curve(feat: SST2Features, keeps=KEEPS, alpha: float = 0.75, n_prompts: int = 4000,
                 l: int = 8, seed: int = 0) -> List[dict]:
    """How the filter trades sentences for signal (regime ``"confident"``): for each kept fraction,
    the margin threshold, the filter probe's accuracy (%) on the kept scored rows, on the kept test
    candidates and on the kept dev sentences, and the oracle ceiling (%) at ``alpha`` on prompts of
    kept scored rows, with a balanced (``floor``/``ceil`` of ``alpha l``) and with a binomial number of outliers."""
    f = feat.filter
    if f is None:
        raise ValueError("margin_curve needs the features of the 'confident' regime (feat.filter is None)")
    out = []
    for keep in keeps:
        thr = _keep_threshold(f["margin_scored"], keep)
        sel = {k: f[f"margin_{k}"].abs() >= thr for k in ("scored", "reserved", "dev")}
        m, s = f["margin_scored"][sel["scored"]], f["s_scored"][sel["scored"]]
        row = {"keep": keep, "threshold": thr, "fraction": float(sel["scored"].double().mean()),
               "n_scored": int(sel["scored"].sum()), "n_dev": int(sel["dev"].sum()),
               "probe_scored": _hit_rate(m, s),
               "probe_reserved": _hit_rate(f["margin_reserved"][sel["reserved"]], f["s_reserved"][sel["reserved"]]),
               "probe_dev": _hit_rate(f["margin_dev"][sel["dev"]], f["s_dev"][sel["dev"]])}
        pool = EmbeddedPool(m[:, None], m[:, None], s)  # the probe margin is the only feature the oracle needs
        for count in ("binomial", "balanced"):
            pr = {(alpha, "R"): sst2_prompts(pool, n_prompts, l=l, alpha=alpha, placement="R", count=count,
                                             generator=torch_generator(seed, f"sst2/margin-curve/{keep}/{count}"))}
            row[f"oracle_{count}"] = oracle_accuracy(pr, torch.tensor([1.0, 0.0], dtype=torch.float64))[(alpha, "R")]
        out.append(row)
    return out


def probe_ceilings(feat: SST2Features, cfg: SST2Data = HELD_OUT) -> Dict[str, float]:
    """Sentiment accuracy (%) of the linear probe fit on the training pool, read on the test pool: raw
    embeddings, ``d`` features, the poisoned test twins (does the phrase change the sentiment read-out?),
    the training pool itself (what memorisation could reach), and whether the phrase is detectable."""
    tr, te = feat.train, feat.test
    ones_tr, ones_te = torch.ones(len(tr.s)), torch.ones(len(te.s))
    return {
        "embeddings": 100 * probe_accuracy(feat.emb_train, tr.s, feat.emb_test, te.s, cfg.probe_l2),
        "features": 100 * probe_accuracy(tr.x, tr.s, te.x, te.s, cfg.probe_l2),
        "features, poisoned": 100 * probe_accuracy(tr.x, tr.s, te.x_bond, te.s, cfg.probe_l2),
        "features, training pool": 100 * probe_accuracy(tr.x, tr.s, tr.x, tr.s, cfg.probe_l2),
        "phrase detection": 100 * probe_accuracy(torch.cat([tr.x, tr.x_bond]), torch.cat([ones_tr, -ones_tr]),
                                                 torch.cat([te.x, te.x_bond]), torch.cat([ones_te, -ones_te]),
                                                 cfg.probe_l2),
    }


def pca_table(feat: SST2Features, ks=PCA_KS, cfg: SST2Data = HELD_OUT) -> Dict[object, Tuple[float, float]]:
    """App. Table 5: probe accuracy (%) on the top-``k`` principal components of the clean embeddings, and
    on all, each with its binomial standard error over the test sentences (the probe is convex and
    deterministic: no training seed)."""
    pca = fit_pca(feat.emb_train, max(ks))
    n = len(feat.test.s)
    out = {}
    for k in ks:
        def top(X, k=k):
            return (X.double() - pca.mean) @ pca.components[:k].T  # (n, k)
        p = probe_accuracy(top(feat.emb_train), feat.train.s, top(feat.emb_test), feat.test.s, cfg.probe_l2)
        out[k] = (100 * p, 100 * math.sqrt(p * (1 - p) / n))
    p = probe_accuracy(feat.emb_train, feat.train.s, feat.emb_test, feat.test.s, cfg.probe_l2)
    out["all"] = (100 * p, 100 * math.sqrt(p * (1 - p) / n))
    return out


# ---------------------------------------------------------------- training and evaluation


class _Sampler:
    """``sample_batch(B, generator) -> (P, z)`` of training prompts (Def. 1: random outlier labels).

    With ``curriculum``, calls ``>= switch`` use placement CQ instead of R (App. 8.1).
    """

    def __init__(self, pool: EmbeddedPool, run: Run, l: int):
        self.pool, self.run, self.l, self.calls = pool, run, l, 0
        self.switch = run.steps // 2 if run.curriculum else None

    def __call__(self, batch: int, generator: torch.Generator):
        placement = "CQ" if self.switch is not None and self.calls >= self.switch else "R"
        self.calls += 1
        pr = sst2_prompts(self.pool, batch, l=self.l, alpha=self.run.p_a, placement=placement, rule="random",
                          generator=generator)
        return pr.P, pr.z


def _build(run: Run, cfg: SST2Data, seed: int, device=None):
    return build_model(run.kind, cfg.d, n_layers=run.n_layers, n_heads=run.n_heads, d_model=run.d_model,
                       generator=torch_generator(seed, "init"), device=resolve_device(device))


def train_run(run: Run, feat: SST2Features, seed: int, cfg: SST2Data = HELD_OUT, device=None, progress: bool = False):
    """Build (:func:`mambaicl.models.build_model`) and train (:func:`mambaicl.train.fit`) one run for ``seed``;
    returns (model, history). Initial values from ``(seed, "init")``, training prompts from ``(seed, "train")``."""
    model = _build(run, cfg, seed, device)
    history = fit(model, _Sampler(feat.train, run, cfg.l), steps=run.steps, batch_size=run.batch_size, lr=run.lr,
                  optimizer=run.optimizer, loss=run.loss, seed=seed, device=device, record_every=50,
                  progress=progress)
    return model.eval(), history


def _test_prompts(table: Table, pool: EmbeddedPool, cfg: SST2Data, seed: int, stage: str = "test/sst2"):
    """Seed ``seed``'s test prompts, the same for every run of a seed: ``{(alpha, placement): SST2Prompts}``."""
    return {(a, p): sst2_prompts(pool, table.n_prompts, l=cfg.l, alpha=a, placement=p, rule=table.rule,
                                 count=cfg.count, generator=torch_generator(seed, f"{stage}/{a}/{p}"))
            for a in table.alphas for p in table.placements}


@torch.no_grad()
def accuracy(model, prompts, device=None) -> Dict[Tuple[float, str], float]:
    """Accuracy (%) ``100 (1 - zero_one_error)`` on each prompt set (the book's one 0-1 error)."""
    dev = resolve_device(device)
    return {k: 100 * (1 - zero_one_error(predict(model, pr.P.to(dev)).cpu(), pr.z)) for k, pr in prompts.items()}


def oracle_accuracy(prompts, w: torch.Tensor) -> Dict[Tuple[float, str], float]:
    """The encoder's in-context ceiling (%) on each prompt set: told which examples are clean, it reads
    each clean example's sentiment with the linear probe ``w`` (weights, bias last), infers the task
    ``f`` by a margin-weighted vote and predicts ``f * probe(query)``; with no clean example it
    guesses ``f = +1``."""
    out = {}
    for k, pr in prompts.items():
        score = pr.P[..., :-1].double() @ w[:-1].double() + w[-1].double()  # (batch, l+1) probe margins
        y = pr.P[:, :-1, -1].double()  # (batch, l)
        vote = (y * score[:, :-1] * (~pr.outlier)).sum(1)  # (batch,)
        f_hat = torch.where(vote >= 0, 1.0, -1.0).double()
        out[k] = 100 * (1 - zero_one_error(f_hat * score[:, -1], pr.z.double()))
    return out


def _stats(per_seed: List[dict], keys, n: int):
    stats = {k: error_mean_se([a[k] / 100 for a in per_seed], n) for k in keys}
    return {k: 100 * m for k, (m, _) in stats.items()}, {k: 100 * se for k, (_, se) in stats.items()}


def run_table(table: Table, feat: SST2Features, seeds=(0,), cfg: SST2Data = HELD_OUT, device=None,
              progress: bool = True, models: Optional[dict] = None) -> dict:
    """Train every run of ``table`` once per seed (or reuse ``models[name]``, one model per seed) and
    evaluate them on each seed's test prompts (the same prompts for every run of a seed).

    Returns ``{"acc": {run: {(alpha, placement): mean %}}, "acc_seeds": {run: [per-seed dicts]},
    "se": {run: {(alpha, placement): SE}}, "oracle": {(alpha, placement): mean %}, "oracle_seeds",
    "oracle_se", "seeds", "n_prompts", "seconds": {run: s}, "models": {run: [models]},
    "history": {run: [histories]}}``.
    """
    seeds = resolve_seeds(seeds)
    prompts = {s: _test_prompts(table, feat.test, cfg, s) for s in seeds}
    w = linear_probe(feat.train.x, feat.train.s, cfg.probe_l2)
    oracle = [oracle_accuracy(prompts[s], w) for s in seeds]
    keys = list(prompts[seeds[0]])
    o_mean, o_se = _stats(oracle, keys, table.n_prompts)
    res = {"acc": {}, "acc_seeds": {}, "se": {}, "seconds": {}, "models": dict(models or {}), "history": {},
           "oracle": o_mean, "oracle_se": o_se, "oracle_seeds": oracle, "seeds": seeds, "n_prompts": table.n_prompts}
    for run in tqdm(table.runs, desc=table.name, disable=not progress):
        if run.name not in res["models"]:
            t0 = time.perf_counter()
            trained = [train_run(run, feat, s, cfg, device) for s in seeds]
            res["models"][run.name] = [m for m, _ in trained]
            res["history"][run.name] = [h for _, h in trained]
            res["seconds"][run.name] = time.perf_counter() - t0
        per_seed = [accuracy(m, prompts[s], device) for m, s in zip(res["models"][run.name], seeds)]
        res["acc_seeds"][run.name] = per_seed
        res["acc"][run.name], res["se"][run.name] = _stats(per_seed, keys, table.n_prompts)
    return res


def memorisation(res: dict, feat: SST2Features, cfg: SST2Data, alpha: float = 0.75, placement: str = "R",
                 n_prompts: int = 4000, device=None) -> dict:
    """The reading "test queries come from the training sentences": accuracy (%) of ``res``'s models
    (one per seed) on prompts built from the *training* pool, beside the held-out test pool, with
    the oracle ceiling of each. ``{"train"/"test": {run or "oracle": (mean, se, per-seed)}}``."""
    w = linear_probe(feat.train.x, feat.train.s, cfg.probe_l2)
    out = {}
    for name, pool in (("train", feat.train), ("test", feat.test)):
        prompts = {s: {(alpha, placement): sst2_prompts(pool, n_prompts, l=cfg.l, alpha=alpha, placement=placement,
                                                        count=cfg.count,
                                                        generator=torch_generator(s, f"test/sst2-memo/{name}"))}
                   for s in res["seeds"]}
        k = (alpha, placement)
        out[name] = {}
        for run, models in res["models"].items():
            per = [accuracy(m, prompts[s], device)[k] for m, s in zip(models, res["seeds"])]
            m, se = error_mean_se([p / 100 for p in per], n_prompts)
            out[name][run] = (100 * m, 100 * se, per)
        per = [oracle_accuracy(prompts[s], w)[k] for s in res["seeds"]]
        m, se = error_mean_se([p / 100 for p in per], n_prompts)
        out[name]["oracle"] = (100 * m, 100 * se, per)
    return out


def validation_curve(run: Run, feat: SST2Features, cfg: SST2Data, lrs=(1e-3, 3e-3, 1e-2), steps: int = 1500,
                     every: int = 100, seed: int = 0, n_prompts: int = 2000, alpha: Optional[float] = None,
                     device=None) -> Dict[float, dict]:
    """Step size and length of training chosen on the *validation* sentences (never the test ones).

    For each learning rate, trains ``run`` for ``steps`` and every ``every`` steps records the hinge
    loss and accuracy (%) on fixed validation prompts built like the training prompts (``alpha``
    defaults to the run's ``p_a``; placement R). Returns ``{lr: {"steps", "loss", "acc", "best_step",
    "best_loss"}}``; the chosen setting is the ``lr`` with the lowest ``best_loss``, trained for its
    ``best_step`` steps.
    """
    if feat.val is None:
        raise ValueError("validation_curve needs the validation pool: prepare_features(cfg, with_val=True)")
    a = run.p_a if alpha is None else alpha
    val = sst2_prompts(feat.val, n_prompts, l=cfg.l, alpha=a, placement="R", rule="random",
                       generator=torch_generator(seed, "validation"))
    dev = resolve_device(device)
    out = {}
    for lr in lrs:
        model = _build(run, cfg, seed, device)
        rec = {"steps": [], "loss": [], "acc": []}

        def probe(step, m, rec=rec):
            if (step + 1) % every:
                return
            with torch.no_grad():
                F = predict(m, val.P.to(dev)).cpu()
            rec["steps"].append(step + 1)
            rec["loss"].append(float(torch.clamp(1 - val.z * F, min=0).mean()))
            rec["acc"].append(100 * (1 - zero_one_error(F, val.z)))
            m.train()

        fit(model, _Sampler(feat.train, dataclasses.replace(run, lr=lr, steps=steps), cfg.l), steps=steps,
            batch_size=run.batch_size, lr=lr, optimizer=run.optimizer, loss=run.loss, seed=seed, device=device,
            record_every=steps, progress=False, callback=probe)
        best = min(range(len(rec["loss"])), key=rec["loss"].__getitem__)
        out[lr] = {**rec, "best_step": rec["steps"][best], "best_loss": rec["loss"][best]}
    return out


# ---------------------------------------------------------------- the paper's claims, under the book's rule


def _per_seed(res: dict, run: str, key) -> List[float]:
    return [a[key] for a in res["acc_seeds"][run]]


def _mean_placements(res: dict, run: str, alpha: float, placements) -> List[float]:
    return [sum(a[(alpha, p)] for p in placements) / len(placements) for a in res["acc_seeds"][run]]


def contrast(terms, n_prompts: Optional[int]) -> Comparison:
    """``sum_i c_i acc_i`` over seeds, in accuracy points, with its standard error (the 95 % t interval's).

    ``terms`` is a list of ``(c_i, per-seed accuracies in %)`` measured on the same seeds. As in
    :func:`mambaicl.analysis.stats.compare` (of which ``[(1, a), (-1, b)]`` is the paired case), the
    error adds the seed spread of the per-seed contrasts and the binomial noise of each accuracy's
    ``n_prompts`` test prompts, ``sum_i c_i^2 p_i (1 - p_i) / n`` per seed, treated as independent.
    """
    S = len(terms[0][1])
    if any(len(v) != S for _, v in terms):
        raise ValueError("every term needs one value per seed")
    values = [sum(c * v[s] for c, v in terms) for s in range(S)]
    mean = sum(values) / S
    var_seeds = sum((x - mean) ** 2 for x in values) / (S - 1) / S if S > 1 else 0.0
    var_prompts = 0.0
    if n_prompts is not None:
        var_prompts = sum(sum(c * c * (v[s] / 100) * (1 - v[s] / 100) / n_prompts for c, v in terms)
                          for s in range(S)) / S / S
    return _Contrast(diff=mean, se=math.sqrt(var_seeds + 1e4 * var_prompts), n_seeds=S, values=tuple(values))


@dataclass(frozen=True)
class _Contrast(Comparison):
    """A :class:`Comparison` that keeps its per-seed values (for the registry of claims)."""

    values: tuple = ()


def _check(claim: str, c: Comparison, expected: str) -> dict:
    """One comparison and whether it holds by the book's rule (the 95 % interval of the difference: excludes 0
    on the ``expected`` side for ``">"``/``"<"``, contains 0 for ``"="``). With one seed (App. Table 5's single
    fit) the interval is the normal one of the sampling standard error."""
    from ..analysis.claims import Measured

    m = Measured.from_se(c.diff, c.se, c.n_seeds, getattr(c, "values", ()))
    holds = (m.low <= 0 <= m.high) if expected == "=" else (m.low > 0 if expected == ">" else m.high < 0)
    return {"claim": claim, "diff": c.diff, "se": c.se, "low": m.low, "high": m.high, "n_seeds": c.n_seeds,
            "values": list(m.values), "expected": expected, "verdict": c.verdict, "holds": holds}


def claims(raw: Dict[str, dict], pca: Optional[dict] = None, n_test: Optional[int] = None) -> Dict[str, List[dict]]:
    """Every comparison the paper states for SST-2, under the book's rule (95 % t intervals of per-seed contrasts),
    from :func:`run_table` outputs keyed by table name (and App. Table 5's :func:`pca_table`).

    Differences are in accuracy points; ``expected`` is ``">"`` (a > b claimed), ``"<"``, or ``"="`` (no
    difference claimed: holds when the difference is not significant). Tables absent from ``raw`` are skipped.
    """
    out = {}
    main = raw.get(MAIN_TABLE.name)
    if main:
        n, a = main["n_prompts"], MAIN_TABLE.alphas[0]
        m = {p: _per_seed(main, "mamba", (a, p)) for p in ("FQ", "R", "CQ")}
        li = {p: _per_seed(main, "linear", (a, p)) for p in ("FQ", "R", "CQ")}
        out["main"] = [
            _check("Mamba above the linear Transformer under FQ", contrast([(1, m["FQ"]), (-1, li["FQ"])], n), ">"),
            _check("Mamba above the linear Transformer under R", contrast([(1, m["R"]), (-1, li["R"])], n), ">"),
            _check("Mamba drops under CQ (FQ minus CQ)", contrast([(1, m["FQ"]), (-1, m["CQ"])], n), ">"),
            _check("Mamba's CQ drop exceeds the linear Transformer's",
                   contrast([(1, m["FQ"]), (-1, m["CQ"]), (-1, li["FQ"]), (1, li["CQ"])], n), ">"),
            _check("the linear Transformer unaffected by CQ (FQ minus CQ)", contrast([(1, li["FQ"]), (-1, li["CQ"])], n), "="),
        ]
    t1 = raw.get(TABLE_1.name)
    if t1:
        n, a = 3 * t1["n_prompts"], TABLE_1.alphas[0]
        h = {k: _mean_placements(t1, f"linear H={k}", a, TABLE_1.placements) for k in (1, 2, 3, 4)}
        out["table1"] = [_check("H=2 above H=1 (mean over FQ, R, CQ)", contrast([(1, h[2]), (-1, h[1])], n), ">"),
                         _check("H=3 below H=2", contrast([(1, h[3]), (-1, h[2])], n), "<"),
                         _check("H=4 below H=2", contrast([(1, h[4]), (-1, h[2])], n), "<")]
    t2 = raw.get(TABLE_2.name)
    if t2:
        n, a = t2["n_prompts"], 0.5
        g = {(r, p): _per_seed(t2, r, (a, p)) for r in ("mamba", "linear", "softmax") for p in ("FQ", "R", "CQ")}
        out["table2"] = [
            _check("softmax above linear (mean over FQ, R, CQ)",
                   contrast([(1, _mean_placements(t2, "softmax", a, TABLE_2.placements)),
                             (-1, _mean_placements(t2, "linear", a, TABLE_2.placements))], 3 * n), ">"),
            _check("Mamba drops under CQ (FQ minus CQ)", contrast([(1, g[("mamba", "FQ")]), (-1, g[("mamba", "CQ")])], n), ">"),
            _check("no CQ drop for softmax (FQ minus CQ)",
                   contrast([(1, g[("softmax", "FQ")]), (-1, g[("softmax", "CQ")])], n), "="),
            _check("Mamba's CQ drop exceeds softmax's",
                   contrast([(1, g[("mamba", "FQ")]), (-1, g[("mamba", "CQ")]), (-1, g[("softmax", "FQ")]),
                             (1, g[("softmax", "CQ")])], n), ">"),
        ]
        lo, hi = min(TABLE_2.alphas), max(TABLE_2.alphas)
        terms = [(c * sign / 3, _per_seed(t2, r, (a_, p))) for r, c in (("linear", 1), ("softmax", -1))
                 for a_, sign in ((lo, 1), (hi, -1)) for p in TABLE_2.placements]
        half = [(c / 2 if r_c[0] == "linear" else c, v) for r_c, (c, v) in
                zip([(r, a_, p) for r in ("linear", "softmax") for a_ in (lo, hi) for p in TABLE_2.placements], terms)]
        out["tables3_4"] = [_check(f"linear falls more than softmax from alpha={lo} to {hi} (mean over placements)",
                                   contrast(terms, n), ">"),
                            _check("softmax avoids the sharp drop: it falls less than half as much as linear "
                                   "(half the linear fall minus the softmax fall)", contrast(half, n), ">")]
    cur = raw.get(CURRICULUM.name)
    if cur and main:
        a = CURRICULUM.alphas[0]
        c_cq = _per_seed(cur, CURRICULUM.runs[0].name, (a, "CQ"))
        m_fq, m_cq = _per_seed(main, "mamba", (a, "FQ")), _per_seed(main, "mamba", (a, "CQ"))
        n = cur["n_prompts"]
        out["curriculum"] = [
            _check("the curriculum raises Mamba's CQ accuracy", contrast([(1, c_cq), (-1, m_cq)], n), ">"),
            _check("it recovers more than half of the CQ loss (CQ gain minus half the FQ-CQ drop)",
                   contrast([(1, c_cq), (-0.5, m_cq), (-0.5, m_fq)], n), ">"),
        ]
    if pca is not None and n_test:
        gap = pca["all"][0] - pca[10][0]
        se = math.hypot(pca["all"][1], pca[10][1])
        c = Comparison(diff=gap - (PAPER["table5"]["all"] - PAPER["table5"][10]), se=se, n_seeds=1)
        out["table5"] = [_check("the top 10 components are as close to all as in the paper "
                                "(our gap minus the paper's 1.15 points)", c, "=")]
    return out


#: the registry's claim (``mambaicl.analysis.claims``) for each table's checks; the curriculum's claim is its first
CLAIM_KEYS = {"main": "sst2-main", "table1": "sst2-table1", "table2": "sst2-table2", "tables3_4": "sst2-tables3-4",
              "curriculum": "sst2-curriculum", "table5": "sst2-table5"}


def judge(found: Dict[str, List[dict]], table: str):
    """Hand the checks of ``table`` (from :func:`claims`) to the registry of claims, which computes the verdict."""
    from ..analysis.claims import CLAIMS, Measured

    claim = CLAIMS[CLAIM_KEYS[table]]
    ms = [Measured(c["diff"], c["low"], c["high"], c["n_seeds"], tuple(c["values"])) for c in found[table]]
    if claim.criterion.kind == "all":
        return claim.judge(parts=ms[:len(claim.criterion.parts)])
    return claim.judge(per_seed=ms[0])


def _cell(ours: float, se: float, paper: Optional[float]) -> str:
    theirs = f"{paper:5.2f}" if paper is not None else "  -  "
    return f"{ours:5.1f} ± {se:3.1f} ({theirs})"


def format_table(table: Table, res: dict, runs: Optional[Tuple[str, ...]] = None) -> str:
    """Plain-text table: one row per (alpha, placement), one column per run as ``mean ± SE (paper)`` in %,
    and the encoder's in-context ceiling (:func:`oracle_accuracy`) in the last column."""
    names = runs or tuple(r.name for r in table.runs)
    width = max(22, *(len(n) for n in names))
    lines = ["alpha place  " + "  ".join(f"{n:>{width}}" for n in names) + "  ceiling"]
    for a in table.alphas:
        for p in table.placements:
            cells = [_cell(res["acc"][n][(a, p)], res["se"][n][(a, p)], table.paper.get(n, {}).get((a, p)))
                     for n in names]
            lines.append(f"{a:5.2f} {p:>5}  " + "  ".join(f"{c:>{width}}" for c in cells)
                         + f"  {res['oracle'][(a, p)]:7.1f}")
    return "\n".join(lines)


# ---------------------------------------------------------------- the experiment protocol


@dataclass(frozen=True)
class SST2Preset(Preset):
    """The whole SST-2 experiment: one or more regimes with their tables, PCA sizes of App. Table 5,
    the kept fractions of the filter's margin curve."""

    regimes: Tuple[Regime, ...] = ()
    pca_ks: Tuple[int, ...] = integers(PCA_KS, 1)
    keeps: Tuple[float, ...] = reals(KEEPS, 0.0, 1.0, low_open=True)

    def _check(self) -> None:
        if not self.regimes:
            raise ValueError("regimes must hold at least one Regime")
        if len({r.name for r in self.regimes}) != len(self.regimes):
            raise ValueError(f"regime names must be unique; got {[r.name for r in self.regimes]}")


ALL_TABLES = (MAIN_TABLE, TABLE_1, TABLE_2, CURRICULUM)
PAPER_PRESET = SST2Preset(name="paper", regimes=(
    Regime("held-out", DEFINITIONS["held-out"], HELD_OUT, (MAIN_TABLE,)),
    Regime("confident", DEFINITIONS["confident"], CONFIDENT, ALL_TABLES)))
FULL_PRESET = SST2Preset(name="full", regimes=(
    Regime("held-out", DEFINITIONS["held-out"], HELD_OUT, ALL_TABLES),
    Regime("confident", DEFINITIONS["confident"], CONFIDENT, ALL_TABLES)))
PRESETS = {"paper": PAPER_PRESET, "full": FULL_PRESET}
DEFAULT_PRESET = "paper"
DEFAULT_SEEDS = (0, 1, 2)


def _key(k) -> str:
    a, p = k
    return f"{a}/{p}"


def _table_json(table: Table, res: dict) -> dict:
    runs = {}
    for name in res["acc"]:
        runs[name] = {_key(k): {"per_seed": [a[k] for a in res["acc_seeds"][name]], "mean": res["acc"][name][k],
                                "se": res["se"][name][k], "paper": table.paper.get(name, {}).get(k),
                                "oracle": res["oracle"][k]} for k in res["acc"][name]}
    oracle = {_key(k): {"per_seed": [o[k] for o in res["oracle_seeds"]], "mean": res["oracle"][k],
                        "se": res["oracle_se"][k]} for k in res["oracle"]}
    return {"name": table.name, "rule": table.rule, "n_prompts": table.n_prompts, "runs": runs, "oracle": oracle}


@dataclass
class SST2Result(Result):
    """Per regime: its definition and data, probe ceilings, the filter's margin curve, App. Table 5, every
    table (per seed, mean, SE, the paper's number, the oracle ceiling), memorisation, the claims."""

    preset: str
    seeds: list
    regimes: dict
    raw: dict = internal()  # {regime: {table name: run_table(...) output, with the models}}
    features: dict = internal()  # {regime: SST2Features}


def run(preset: SST2Preset = PAPER_PRESET, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True,
        path=None, cache_dir=None) -> SST2Result:
    """Load, embed (cached), train and evaluate every table of every regime of ``preset`` for every seed."""
    seeds = resolve_seeds(seeds)
    raw_all, feats, regimes = {}, {}, {}
    for regime in preset.regimes:
        cfg = regime.data
        feat = prepare_features(cfg, path=path, cache_dir=cache_dir, device=device, progress=progress)
        raw, tables, shared = {}, {}, {}
        for table in regime.tables:
            reuse = {r.name: shared[_run_key(r)] for r in table.runs if _run_key(r) in shared}
            res = run_table(table, feat, seeds, cfg, device=device, progress=progress, models=reuse)
            for r in table.runs:
                shared.setdefault(_run_key(r), res["models"][r.name])
            raw[table.name] = res
            tables[table.name] = _table_json(table, res)
        pca = pca_table(feat, preset.pca_ks, cfg)
        found = claims(raw, pca, len(feat.test.s))
        entry = {"definition": regime.definition, "data": dataclasses.asdict(cfg), "sizes": feat.sizes,
                 "ceilings": probe_ceilings(feat, cfg), "pca": {str(k): list(v) for k, v in pca.items()},
                 "tables": tables, "claims": found, "verdicts": {k: judge(found, k).verdict for k in found}}
        if MAIN_TABLE.name in raw:
            memo = memorisation(raw[MAIN_TABLE.name], feat, cfg, device=device)
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
    return dataclasses.astuple(dataclasses.replace(run, name=""))
