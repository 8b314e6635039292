"""Chapter 6: the SST-2 "James Bond" experiments of §4.2 and App. 8.1-8.2, as named presets and runners.

Glossary (code name -> paper symbol):

===================  ========================================================================
``SST2Data``         which sentences, which encoder, ``d`` after PCA (72, App. 8.1), ``l`` (8)
``Run``              one trained model: kind, heads ``H``, layers, training ``p_a`` and schedule
``Table``            runs + test ``alpha`` values + placements (FQ / R / CQ) + the paper's numbers
``p_a``              fraction of training examples with the phrase (Eq. 4 / Def. 1)
``alpha``            fraction of test examples with the phrase (Eq. 5 / Def. 2)
``curriculum``       App. 8.1: placement R for the first half of training, CQ for the second
``oracle``           the encoder's in-context ceiling: knows which examples are clean, infers the
                     task from them with the linear probe, applies it to the query
===================  ========================================================================

The task on SST-2 (module :mod:`mambaicl.data.poisoning`): a prompt's task ``f`` says which
sentiment is labelled +1; the query's label is ``z = f * s_query``. Outlier examples carry the
phrase "James Bond" and, at test time, the targeted label +1 of Example 1.

Hyperparameters the paper does not give (``d_model``, steps, learning rate, batch size, the
training sentences, the probe's penalty) are fields of the presets below, validated on creation.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

import torch
from tqdm.auto import tqdm

from ..analysis.stats import error_mean_se
from ..config import DEEP_KINDS, LOSSES, OPTIMIZERS, check_bool, check_choice, check_int, check_real, check_reals
from ..data.encoders import DEFAULT_ENCODER, embedding_cache
from ..data.features import PCA, fit_pca, linear_probe, probe_accuracy
from ..data.poisoning import PLACEMENTS, RULES, EmbeddedPool, poison_sentences, sst2_prompts
from ..data.sst2 import load_sst2
from ..evaluate import predict, zero_one_error
from ..models import build_model
from ..seeding import torch_generator
from ..train import fit
from .base import Result, internal, resolve_device, resolve_seeds

__all__ = [
    "NAME", "DESCRIPTION", "SST2Data", "Run", "Table", "SST2Features", "PAPER", "DATA", "MAIN_TABLE",
    "TABLE_1", "TABLE_2", "TABLES_3_4", "CURRICULUM", "PCA_KS", "PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS",
    "prepare_features", "probe_ceilings", "pca_table", "train_run", "accuracy", "oracle_accuracy", "run_table",
    "SST2Preset", "SST2Result", "run", "format_table",
]

NAME = "sst2"
DESCRIPTION = "§4.2 and App. 8.1-8.2: SST-2 with 'James Bond' outliers (main table, App. Tables 1-5, CQ curriculum)"
DEFAULT_SEEDS = (0, 1)


@dataclass(frozen=True)
class SST2Data:
    """Sentences, encoder and features of §4.2 (every field validated)."""

    encoder: str = DEFAULT_ENCODER
    n_train: int = 2000  # sentences sampled (without replacement) from the 67,349 of train.tsv
    n_validation: Optional[int] = None  # None: all 872 sentences of dev.tsv
    d: int = 72  # PCA components kept: the "data dimension 72" of App. 8.1
    l: int = 8  # context examples per prompt (§4.2)
    probe_l2: float = 1e-2  # ridge penalty of the logistic linear probe (not tuned on dev)
    seed: int = 0

    def __post_init__(self) -> None:
        check_int("n_train", self.n_train, 10)
        if self.n_validation is not None:
            check_int("n_validation", self.n_validation, 10)
        check_int("d", self.d, 1, self.n_train)
        check_int("l", self.l, 1)
        check_real("probe_l2", self.probe_l2, 0.0)
        check_int("seed", self.seed, 0)


@dataclass(frozen=True)
class Run:
    """One model to train: architecture (§4.2: 3 layers) and training schedule."""

    name: str
    kind: str  # "mamba", "linear" or "softmax" (mambaicl.models.deep)
    n_heads: int = 2
    n_layers: int = 3
    d_model: int = 80  # >= d+1: the prompt enters the residual stream by zero padding
    p_a: float = 0.25
    steps: int = 300
    batch_size: int = 128
    lr: float = 3e-3
    optimizer: str = "adam"
    loss: str = "hinge"  # Section 2
    curriculum: bool = False  # App. 8.1: R for the first half, CQ for the second

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, tuple(k for k in DEEP_KINDS if k != "mamba1"))
        for name in ("n_heads", "n_layers", "d_model", "steps", "batch_size"):
            check_int(name, getattr(self, name), 1)
        check_real("p_a", self.p_a, 0.0, 1.0, high_open=True)
        check_real("lr", self.lr, 0.0, 1.0, low_open=True)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_choice("loss", self.loss, LOSSES)
        check_bool("curriculum", self.curriculum)


@dataclass(frozen=True)
class Table:
    """Runs evaluated at test fractions ``alphas`` and ``placements``; ``paper[run][(alpha, placement)]`` in %."""

    name: str
    runs: Tuple[Run, ...]
    alphas: Tuple[float, ...]
    placements: Tuple[str, ...] = ("FQ", "R", "CQ")
    rule: str = "targeted"  # Example 1: outliers labelled +1
    n_prompts: int = 2000  # test prompts per (alpha, placement, seed), the same for every run of a seed
    paper: Dict[str, Dict[Tuple[float, str], float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_reals("alphas", self.alphas, 0.0, 1.0)
        for i, p in enumerate(self.placements):
            check_choice(f"placements[{i}]", p, tuple(PLACEMENTS))
        check_choice("rule", self.rule, tuple(RULES))
        check_int("n_prompts", self.n_prompts, 1)
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

DATA = SST2Data()
PCA_KS = (5, 7, 10)
_MAMBA = Run("mamba", "mamba")
_LINEAR = Run("linear", "linear")
MAIN_TABLE = Table("main (§4.2)", (_MAMBA, _LINEAR), alphas=(0.75,))
TABLE_1 = Table("App. Table 1", tuple(Run(f"linear H={h}", "linear", n_heads=h, p_a=0.4) for h in (1, 2, 3, 4)),
                alphas=(0.5,), paper=PAPER["table1"])
TABLE_2 = Table("App. Table 2", (Run("mamba", "mamba", n_heads=1, p_a=0.4), Run("linear", "linear", n_heads=1, p_a=0.4),
                                 Run("softmax", "softmax", n_heads=1, p_a=0.4)),
                alphas=(0.5,) + tuple(a for a in ALPHAS_3_4 if a != 0.5), paper=PAPER["table2"])
TABLES_3_4 = TABLE_2  # App. Tables 3-4 are the alpha sweep of Table 2's softmax and linear runs
CURRICULUM = Table("App. 8.1 curriculum", (dataclasses.replace(_MAMBA, name="mamba (R then CQ)", curriculum=True),),
                   alphas=(0.75,), paper=PAPER["curriculum"])


@dataclass
class SST2Features:
    """Everything the tables need: pools of prompt features, raw embeddings, the PCA."""

    train: EmbeddedPool
    validation: EmbeddedPool
    emb_train: torch.Tensor  # (n_train, D) clean embeddings
    emb_validation: torch.Tensor  # (n_validation, D)
    pca: PCA
    examples: Dict[str, Tuple[str, str]]  # split -> (a sentence, its poisoned twin)
    seconds: float = 0.0


def _sentiment(rows) -> torch.Tensor:
    return torch.tensor([1.0 if y == 1 else -1.0 for _, y in rows])  # (n,)


def prepare_features(cfg: SST2Data = DATA, *, path=None, cache_dir=None, device=None, progress: bool = False) -> SST2Features:
    """Load SST-2, subsample, poison, embed (cached), and project to ``d`` PCA features (§4.2).

    The PCA is fitted on the training sentences and their poisoned twins together, so that the
    direction the phrase adds is kept; features are scaled to unit variance per coordinate.
    """
    t0 = time.perf_counter()
    data = load_sst2(path)
    keep = torch.randperm(len(data["train"]), generator=torch_generator(cfg.seed, "sst2/subsample"))[: cfg.n_train]
    rows = {"train": [data["train"][i] for i in keep.tolist()], "validation": data["validation"][: cfg.n_validation]}
    clean = {k: [s for s, _ in v] for k, v in rows.items()}
    g = torch_generator(cfg.seed, "sst2/poison")
    bond = {k: poison_sentences(v, g) for k, v in clean.items()}
    texts = clean["train"] + bond["train"] + clean["validation"] + bond["validation"]
    emb = embedding_cache(cfg.encoder, cache_dir=cache_dir, device=device).embed(texts, progress=progress)
    n, m = len(clean["train"]), len(clean["validation"])
    e_tr, b_tr, e_va, b_va = torch.split(emb, [n, n, m, m])  # each (n or m, D)
    pca = fit_pca(torch.cat([e_tr, b_tr]), cfg.d, unit_variance=True)

    def pool(e, b, split):
        return EmbeddedPool(pca.transform(e).float(), pca.transform(b).float(), _sentiment(rows[split]))

    return SST2Features(train=pool(e_tr, b_tr, "train"), validation=pool(e_va, b_va, "validation"),
                        emb_train=e_tr, emb_validation=e_va, pca=pca,
                        examples={k: (clean[k][0], bond[k][0]) for k in clean},
                        seconds=time.perf_counter() - t0)


def probe_ceilings(feat: SST2Features, cfg: SST2Data = DATA) -> Dict[str, float]:
    """Sentiment accuracy (%) of the linear probe on the validation split: raw embeddings, ``d`` features,
    and on the poisoned validation twins (does the phrase change the sentiment read-out?)."""
    tr, va = feat.train, feat.validation
    return {
        "embeddings": 100 * probe_accuracy(feat.emb_train, tr.s, feat.emb_validation, va.s, cfg.probe_l2),
        "features": 100 * probe_accuracy(tr.x, tr.s, va.x, va.s, cfg.probe_l2),
        "features, poisoned": 100 * probe_accuracy(tr.x, tr.s, va.x_bond, va.s, cfg.probe_l2),
        "phrase detection": 100 * probe_accuracy(torch.cat([tr.x, tr.x_bond]), torch.cat([torch.ones(len(tr.s)), -torch.ones(len(tr.s))]),
                                                 torch.cat([va.x, va.x_bond]), torch.cat([torch.ones(len(va.s)), -torch.ones(len(va.s))]),
                                                 cfg.probe_l2),
    }


def pca_table(feat: SST2Features, ks=PCA_KS, cfg: SST2Data = DATA) -> Dict[object, float]:
    """App. Table 5: probe accuracy (%) on the top-``k`` principal components of the clean embeddings, and on all."""
    pca = fit_pca(feat.emb_train, max(ks))
    out = {}
    for k in ks:
        def top(X):
            return (X.double() - pca.mean) @ pca.components[:k].T  # (n, k)
        out[k] = 100 * probe_accuracy(top(feat.emb_train), feat.train.s, top(feat.emb_validation), feat.validation.s, cfg.probe_l2)
    out["all"] = 100 * probe_accuracy(feat.emb_train, feat.train.s, feat.emb_validation, feat.validation.s, cfg.probe_l2)
    return out


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


def train_run(run: Run, feat: SST2Features, seed: int, cfg: SST2Data = DATA, device=None, progress: bool = False):
    """Build (:func:`mambaicl.models.build_model`) and train (:func:`mambaicl.train.fit`) one run for ``seed``;
    returns (model, history). Initial values from ``(seed, "init")``, training prompts from ``(seed, "train")``."""
    model = build_model(run.kind, cfg.d, n_layers=run.n_layers, n_heads=run.n_heads, d_model=run.d_model,
                        generator=torch_generator(seed, "init"), device=resolve_device(device))
    history = fit(model, _Sampler(feat.train, run, cfg.l), steps=run.steps, batch_size=run.batch_size, lr=run.lr,
                  optimizer=run.optimizer, loss=run.loss, seed=seed, device=device, record_every=50,
                  progress=progress)
    return model.eval(), history


def _test_prompts(table: Table, pool: EmbeddedPool, cfg: SST2Data, seed: int):
    """Seed ``seed``'s test prompts, the same for every run: ``{(alpha, placement): SST2Prompts}``."""
    return {(a, p): sst2_prompts(pool, table.n_prompts, l=cfg.l, alpha=a, placement=p, rule=table.rule,
                                 generator=torch_generator(seed, f"test/sst2/{a}/{p}"))
            for a in table.alphas for p in table.placements}


def accuracy(model, prompts) -> Dict[Tuple[float, str], float]:
    """Accuracy (%) ``100 (1 - zero_one_error)`` on each prompt set (the book's one 0-1 error)."""
    return {k: 100 * (1 - zero_one_error(predict(model, pr.P), pr.z)) for k, pr in prompts.items()}


def oracle_accuracy(feat: SST2Features, prompts, cfg: SST2Data = DATA) -> Dict[Tuple[float, str], float]:
    """The encoder's in-context ceiling (%): told which examples are clean, it reads each clean
    example's sentiment with the linear probe, infers the task ``f`` by a margin-weighted vote and
    predicts ``f * probe(query)``; with no clean example it guesses ``f = +1``."""
    w = linear_probe(feat.train.x, feat.train.s, cfg.probe_l2)
    out = {}
    for k, pr in prompts.items():
        score = pr.P[..., :-1].double() @ w[:-1] + w[-1]  # (batch, l+1) probe margins
        y = pr.P[:, :-1, -1].double()  # (batch, l)
        vote = (y * score[:, :-1] * (~pr.outlier)).sum(1)  # (batch,)
        f_hat = torch.where(vote >= 0, 1.0, -1.0).double()
        out[k] = 100 * (1 - zero_one_error(f_hat * score[:, -1], pr.z.double()))
    return out


def run_table(table: Table, feat: SST2Features, seeds=(0,), cfg: SST2Data = DATA, device=None,
              progress: bool = True, models: Optional[dict] = None) -> dict:
    """Train every run of ``table`` once per seed (or reuse ``models[name]``, one model per seed) and
    evaluate them on each seed's test prompts (the same prompts for every run of a seed).

    Returns ``{"acc": {run: {(alpha, placement): mean %}}, "acc_seeds": {run: [per-seed dicts]},
    "se": {run: {(alpha, placement): SE}}, "oracle": {(alpha, placement): mean %}, "seconds": {run: s},
    "models": {run: [models]}, "history": {run: [histories]}}``.
    """
    seeds = resolve_seeds(seeds)
    prompts = {s: _test_prompts(table, feat.validation, cfg, s) for s in seeds}
    oracle = [oracle_accuracy(feat, prompts[s], cfg) for s in seeds]
    keys = list(prompts[seeds[0]])
    res = {"acc": {}, "acc_seeds": {}, "se": {}, "seconds": {}, "models": dict(models or {}), "history": {},
           "oracle": {k: sum(o[k] for o in oracle) / len(oracle) for k in keys}}
    for run in tqdm(table.runs, desc=table.name, disable=not progress):
        if run.name not in res["models"]:
            t0 = time.perf_counter()
            trained = [train_run(run, feat, s, cfg, device) for s in seeds]
            res["models"][run.name] = [m for m, _ in trained]
            res["history"][run.name] = [h for _, h in trained]
            res["seconds"][run.name] = time.perf_counter() - t0
        per_seed = [accuracy(m, prompts[s]) for m, s in zip(res["models"][run.name], seeds)]
        res["acc_seeds"][run.name] = per_seed
        stats = {k: error_mean_se([a[k] / 100 for a in per_seed], table.n_prompts) for k in keys}
        res["acc"][run.name] = {k: 100 * m for k, (m, _) in stats.items()}
        res["se"][run.name] = {k: 100 * se for k, (_, se) in stats.items()}
    return res


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
class SST2Preset:
    """The whole SST-2 experiment: the data and features, the tables, the PCA sizes of App. Table 5."""

    name: str
    data: SST2Data = DATA
    tables: Tuple[Table, ...] = ()
    pca_ks: Tuple[int, ...] = PCA_KS

    def __post_init__(self) -> None:
        if not self.tables:
            raise ValueError("tables must hold at least one Table")
        for i, k in enumerate(self.pca_ks):
            check_int(f"pca_ks[{i}]", k, 1)


PAPER_TABLES = SST2Preset(name="paper", tables=(MAIN_TABLE, TABLE_1, TABLE_2, CURRICULUM))
PRESETS = {"paper": PAPER_TABLES}
DEFAULT_PRESET = "paper"


def _key(k) -> str:
    a, p = k
    return f"{a}/{p}"


def _table_json(table: Table, res: dict) -> dict:
    runs = {}
    for name in res["acc"]:
        runs[name] = {_key(k): {"per_seed": [a[k] for a in res["acc_seeds"][name]], "mean": res["acc"][name][k],
                                "se": res["se"][name][k], "paper": table.paper.get(name, {}).get(k),
                                "oracle": res["oracle"][k]} for k in res["acc"][name]}
    return {"name": table.name, "rule": table.rule, "n_prompts": table.n_prompts, "runs": runs}


@dataclass
class SST2Result(Result):
    """Every table (per seed, mean, SE, the paper's number, the oracle ceiling), probe ceilings, App. Table 5."""

    preset: str
    seeds: list
    data: dict
    ceilings: dict
    pca: dict
    tables: dict
    raw: dict = internal()  # {table name: run_table(...) output, with the models}
    features: object = internal()


def run(preset: SST2Preset = PAPER_TABLES, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True,
        path=None, cache_dir=None) -> SST2Result:
    """Load, embed (cached), train and evaluate every table of ``preset`` for every seed."""
    seeds = resolve_seeds(seeds)
    feat = prepare_features(preset.data, path=path, cache_dir=cache_dir, device=device, progress=progress)
    raw, tables, shared = {}, {}, {}
    for table in preset.tables:
        reuse = {r.name: shared[_run_key(r)] for r in table.runs if _run_key(r) in shared}
        res = run_table(table, feat, seeds, preset.data, device=device, progress=progress, models=reuse)
        for r in table.runs:
            shared.setdefault(_run_key(r), res["models"][r.name])
        raw[table.name] = res
        tables[table.name] = _table_json(table, res)
    pca = pca_table(feat, preset.pca_ks, preset.data)
    return SST2Result(preset=preset.name, seeds=list(seeds), data=dataclasses.asdict(preset.data),
                      ceilings=probe_ceilings(feat, preset.data), pca={str(k): v for k, v in pca.items()},
                      tables=tables, raw=raw, features=feat)


def _run_key(run: Run) -> tuple:
    """Two runs with equal settings (up to the name) are trained once and shared between tables."""
    return dataclasses.astuple(dataclasses.replace(run, name=""))
