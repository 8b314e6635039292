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

from .data.encoders import DEFAULT_ENCODER, embedding_cache
from .data.features import PCA, fit_pca, linear_probe, probe_accuracy
from .data.poisoning import PLACEMENTS, RULES, EmbeddedPool, poison_sentences, sst2_prompts
from .data.sst2 import load_sst2
from .fit import fit
from .models.deep import KINDS, build_model

__all__ = [
    "SST2Data", "Run", "Table", "SST2Features", "PAPER", "DATA", "MAIN_TABLE", "TABLE_1",
    "TABLE_2", "TABLES_3_4", "CURRICULUM", "PCA_KS", "prepare_features", "probe_ceilings",
    "pca_table", "train_run", "evaluate", "oracle_accuracy", "run_table", "format_table",
]


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(msg)


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
        _check(isinstance(self.n_train, int) and self.n_train >= 10, f"n_train must be an int >= 10; got {self.n_train!r}")
        _check(self.n_validation is None or (isinstance(self.n_validation, int) and self.n_validation >= 10),
               f"n_validation must be None or an int >= 10; got {self.n_validation!r}")
        _check(isinstance(self.d, int) and 1 <= self.d <= self.n_train, f"d must be an int in [1, n_train]; got {self.d!r}")
        _check(isinstance(self.l, int) and self.l >= 1, f"l must be an int >= 1; got {self.l!r}")
        _check(self.probe_l2 >= 0, f"probe_l2 must be >= 0; got {self.probe_l2!r}")


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
    seed: int = 0

    def __post_init__(self) -> None:
        _check(self.kind in KINDS and self.kind != "mamba1", f"kind must be mamba, linear or softmax; got {self.kind!r}")
        for name in ("n_heads", "n_layers", "d_model", "steps", "batch_size"):
            v = getattr(self, name)
            _check(isinstance(v, int) and v >= 1, f"{name} must be a positive int; got {v!r}")
        _check(0.0 <= self.p_a < 1.0, f"p_a must lie in [0, 1); got {self.p_a!r}")
        _check(self.lr > 0, f"lr must be > 0; got {self.lr!r}")


@dataclass(frozen=True)
class Table:
    """Runs evaluated at test fractions ``alphas`` and ``placements``; ``paper[run][(alpha, placement)]`` in %."""

    name: str
    runs: Tuple[Run, ...]
    alphas: Tuple[float, ...]
    placements: Tuple[str, ...] = ("FQ", "R", "CQ")
    rule: str = "targeted"  # Example 1: outliers labelled +1
    n_prompts: int = 2000  # test prompts per (alpha, placement), the same for every run
    seed: int = 1  # of the test prompts
    train_seeds: Tuple[int, ...] = (0,)  # each run is trained once per seed; tables show the mean
    paper: Dict[str, Dict[Tuple[float, str], float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check(all(0.0 <= a <= 1.0 for a in self.alphas), f"alphas must lie in [0, 1]; got {self.alphas}")
        _check(all(p in PLACEMENTS for p in self.placements), f"placements must be in {tuple(PLACEMENTS)}")
        _check(self.rule in RULES, f"rule must be one of {tuple(RULES)}; got {self.rule!r}")
        _check(len({r.name for r in self.runs}) == len(self.runs), "run names must be unique")
        _check(len(self.train_seeds) >= 1 and len(set(self.train_seeds)) == len(self.train_seeds),
               f"train_seeds must be distinct and non-empty; got {self.train_seeds}")


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
MAIN_TABLE = Table("main (§4.2)", (_MAMBA, _LINEAR), alphas=(0.75,), train_seeds=(0, 1))
TABLE_1 = Table("App. Table 1", tuple(Run(f"linear H={h}", "linear", n_heads=h, p_a=0.4) for h in (1, 2, 3, 4)),
                alphas=(0.5,), paper=PAPER["table1"])
TABLE_2 = Table("App. Table 2", (Run("mamba", "mamba", n_heads=1, p_a=0.4), Run("linear", "linear", n_heads=1, p_a=0.4),
                                 Run("softmax", "softmax", n_heads=1, p_a=0.4)),
                alphas=(0.5,) + tuple(a for a in ALPHAS_3_4 if a != 0.5), paper=PAPER["table2"])
TABLES_3_4 = TABLE_2  # App. Tables 3-4 are the alpha sweep of Table 2's softmax and linear runs
CURRICULUM = Table("App. 8.1 curriculum", (dataclasses.replace(_MAMBA, name="mamba (R then CQ)", curriculum=True),),
                   alphas=(0.75,), paper=PAPER["curriculum"], train_seeds=(0, 1))


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
    g = torch.Generator().manual_seed(cfg.seed)
    keep = torch.randperm(len(data["train"]), generator=g)[: cfg.n_train].tolist()
    rows = {"train": [data["train"][i] for i in keep], "validation": data["validation"][: cfg.n_validation]}
    clean = {k: [s for s, _ in v] for k, v in rows.items()}
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


def train_run(run: Run, feat: SST2Features, cfg: SST2Data = DATA, device=None, progress: bool = False):
    """Build (``mambaicl.models.deep.build_model``) and train (``mambaicl.fit.fit``) one run; returns (model, history)."""
    model = build_model(run.kind, cfg.d, n_layers=run.n_layers, n_heads=run.n_heads, d_model=run.d_model,
                        generator=torch.Generator().manual_seed(run.seed), device=device)
    history = fit(model, _Sampler(feat.train, run, cfg.l), steps=run.steps, batch_size=run.batch_size, lr=run.lr,
                  optimizer=run.optimizer, loss=run.loss, seed=run.seed, device=device, record_every=50,
                  progress=progress)
    return model.eval(), history


def _test_prompts(table: Table, pool: EmbeddedPool, cfg: SST2Data):
    """The same test prompts for every run: ``{(alpha, placement): SST2Prompts}``."""
    out = {}
    for i, a in enumerate(table.alphas):
        for j, p in enumerate(table.placements):
            g = torch.Generator().manual_seed(table.seed * 10_000 + 100 * i + j)
            out[(a, p)] = sst2_prompts(pool, table.n_prompts, l=cfg.l, alpha=a, placement=p, rule=table.rule, generator=g)
    return out


@torch.no_grad()
def evaluate(model, prompts, device=None) -> Dict[Tuple[float, str], float]:
    """Accuracy (%) ``100 * mean 1[z F > 0]`` on each prompt set (Section 2's 0-1 error, as accuracy)."""
    device = device or next(model.parameters()).device
    return {k: 100 * float((pr.z.to(device) * model(pr.P.to(device)) > 0).double().mean()) for k, pr in prompts.items()}


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
        out[k] = 100 * float((f_hat * score[:, -1] * pr.z > 0).double().mean())
    return out


def run_table(table: Table, feat: SST2Features, cfg: SST2Data = DATA, device=None, progress: bool = True,
              models: Optional[dict] = None) -> dict:
    """Train every run of ``table`` once per training seed (or reuse ``models[name]``, a list with one
    model per seed) and evaluate all of them on the same test prompts.

    Returns ``{"acc": {run: {(alpha, placement): mean %}}, "acc_seeds": {run: [per-seed dicts]},
    "oracle": {...}, "seconds": {run: s}, "models": {run: [models]}, "history": {run: [histories]}}``.
    """
    prompts = _test_prompts(table, feat.validation, cfg)
    res = {"acc": {}, "acc_seeds": {}, "seconds": {}, "models": dict(models or {}), "history": {},
           "oracle": oracle_accuracy(feat, prompts, cfg)}
    for run in tqdm(table.runs, desc=table.name, disable=not progress):
        if run.name not in res["models"]:
            t0 = time.perf_counter()
            trained = [train_run(dataclasses.replace(run, seed=s), feat, cfg, device) for s in table.train_seeds]
            res["models"][run.name] = [m for m, _ in trained]
            res["history"][run.name] = [h for _, h in trained]
            res["seconds"][run.name] = time.perf_counter() - t0
        per_seed = [evaluate(m, prompts, device) for m in res["models"][run.name]]
        res["acc_seeds"][run.name] = per_seed
        res["acc"][run.name] = {k: sum(a[k] for a in per_seed) / len(per_seed) for k in prompts}
    return res


def _cell(ours: float, paper: Optional[float]) -> str:
    return f"{ours:5.1f} ({paper:5.2f})" if paper is not None else f"{ours:5.1f} (  -  )"


def format_table(table: Table, res: dict, runs: Optional[Tuple[str, ...]] = None) -> str:
    """Plain-text table: one row per (alpha, placement), one column per run as ``ours (paper)`` in %,
    and the encoder's in-context ceiling (:func:`oracle_accuracy`) in the last column."""
    names = runs or tuple(r.name for r in table.runs)
    width = max(15, *(len(n) for n in names))
    lines = ["alpha place  " + "  ".join(f"{n:>{width}}" for n in names) + "  ceiling"]
    for a in table.alphas:
        for p in table.placements:
            cells = [_cell(res["acc"][n][(a, p)], table.paper.get(n, {}).get((a, p))) for n in names]
            lines.append(f"{a:5.2f} {p:>5}  " + "  ".join(f"{c:>{width}}" for c in cells)
                         + f"  {res['oracle'][(a, p)]:7.1f}")
    return "\n".join(lines)
