"""SST-2 for Chapter 6: one regime's sentence split, the confidence filter and the PCA features (§4.2, App. 8.1).

Glossary (code name -> paper symbol):

===================  ========================================================================
``SST2Data``         one *regime*: which sentences, which encoder, ``d`` after PCA (72, App. 8.1),
                     ``l`` (8), how test prompts count their outliers
``SST2Features``     the regime's pools of prompt features (clean ``x``, poisoned ``x_bond``, sentiment ``s``)
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

Every split is deterministic in ``SST2Data.seed`` (streams ``"sst2/split"``, ``"sst2/poison/..."`` of
:mod:`mambaicl.seeding`); embeddings come from the encoder's disk cache (:mod:`mambaicl.data.encoders`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch

from ..config import Config, ConfigError, check_instance, check_int, check_real, choice, integer, real, reals
from ..seeding import torch_generator
from .encoders import DEFAULT_ENCODER, embedding_cache
from .features import PCA, fit_pca, linear_probe
from .poisoning import COUNTS, EmbeddedPool, poison_sentences
from .sst2 import inside_any, load_sst2, maximal_phrases

__all__ = ["REGIMES", "KEEPS", "SST2Data", "SST2Features", "split_sentences", "texts_to_embed", "keep_threshold",
           "choose_keep", "prepare_features", "fill_cache"]

REGIMES = ("held-out", "confident")
KEEPS = (1.0, 0.7, 0.5, 0.3, 0.2, 0.1)  # kept fractions the filter's rule chooses from (and the margin curve reads)


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
    (:func:`mambaicl.experiments.sst2.validation_curve`) and for stopping training when the validation
    loss stops improving (:mod:`mambaicl.recipes.sst2`); they are embedded only when asked for
    (``prepare_features(..., with_val=True)``).
    """

    regime: str = choice("held-out", REGIMES)
    encoder: str = DEFAULT_ENCODER  # a sentence-transformers name (mambaicl.data.encoders): any text, checked in _check
    n_train: Optional[int] = integer(2000, 10, optional=True)
    n_val: int = integer(1000, 10)  # validation sentences carved from train.tsv (step sizes; never dev)
    n_test: Optional[int] = integer(None, 10, optional=True)  # held-out: dev rows used (None: all 872)
    n_reserved: int = integer(2500, 10)  # confident: maximal training sentences set aside as test candidates
    n_probe: int = integer(8000, 10)  # confident: rows the filter probe is fit on (then set aside)
    n_scored: Optional[int] = integer(None, 100, optional=True)  # confident: rows the probe scores (None: all the rest)
    # confident: fraction of the scored rows kept, by margin; None: chosen by choose_keep on the scored rows
    # (training rows, never test sentences): the largest of `keeps` at which the filter probe reads them at
    # `keep_target` % or more
    keep: Optional[float] = None
    keeps: Tuple[float, ...] = reals(KEEPS, 0.0, 1.0, low_open=True)
    keep_target: float = real(97.0, 50.0, 100.0)
    # test prompts: Eq. (5) draws, "fixed" round(alpha l) or "balanced" floor/ceil (mean alpha l)
    count: str = choice("binomial", COUNTS)
    d: int = integer(72, 1)  # PCA components kept: the "data dimension 72" of App. 8.1
    l: int = integer(8, 1)  # context examples per prompt (§4.2)
    probe_l2: float = real(1e-2, 0.0)  # ridge penalty of the logistic linear probes (not tuned on test sentences)
    seed: int = integer(0, 0)  # the data seed: sentence split, poisoning, PCA

    def _check(self) -> None:
        check_instance("encoder", self.encoder, str)
        if not self.encoder.strip():
            raise ConfigError("encoder must name a sentence encoder (a non-empty string); got ''")
        if self.n_train is not None:
            check_int("d", self.d, 1, self.n_train)
        if self.keep is not None:
            check_real("keep", self.keep, 0.0, 1.0, low_open=True)


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


def split_sentences(cfg: SST2Data, path=None) -> dict:
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
        check_int("n_train + n_val", n_train + cfg.n_val, 20, len(rows))  # rows of train.tsv
        out.update(train=perm[:n_train], val=perm[n_train:n_train + cfg.n_val], test=list(range(len(dev))))
        return out
    sentences = [s for s, _ in rows]
    maximal = set(maximal_phrases(sentences))
    check_int("n_reserved", cfg.n_reserved, 10, len(maximal))  # maximal sentences of train.tsv
    reserved = [i for i in perm if i in maximal][: cfg.n_reserved]
    res_set = set(reserved)
    others = [i for i in perm if i not in res_set]
    leak = inside_any([sentences[i] for i in others], [sentences[i] for i in reserved])
    rest = [i for i, bad in zip(others, leak) if not bad]
    check_int("n_probe", cfg.n_probe, 10, len(rest) - 100)  # leaves at least 100 rows to score
    scored = rest[cfg.n_probe:] if cfg.n_scored is None else rest[cfg.n_probe:cfg.n_probe + cfg.n_scored]
    out.update(reserved=reserved, probe=rest[: cfg.n_probe], scored=scored, dropped=len(others) - len(rest))
    return out


def texts_to_embed(cfg: SST2Data, path=None, *, split: Optional[dict] = None, with_val: bool = False) -> List[str]:
    """The sentences :func:`prepare_features` embeds first for ``cfg``, in order.

    Held-out: every sentence and poisoned twin of its pools (validation ones only ``with_val``).
    Confident: the clean text of every row the filter reads (reserved, probe, scored, dev); the
    twins of the kept rows follow once the probe has read them.
    """
    sp = split or split_sentences(cfg, path)
    rows, twins = sp["rows"], sp["twins"]
    if cfg.regime == "held-out":
        idx = sp["train"] + (sp["val"] if with_val else [])
        return ([rows[i][0] for i in idx] + [twins[i] for i in idx] + [s for s, _ in sp["dev"]] + sp["dev_twins"])
    idx = sp["reserved"] + sp["probe"] + sp["scored"]
    return [rows[i][0] for i in idx] + [s for s, _ in sp["dev"]]


def keep_threshold(margin: torch.Tensor, keep: float) -> float:
    """The margin ``|m|`` above which the fraction ``keep`` of ``margin`` lies (ties kept)."""
    k = max(1, int(round(keep * len(margin))))
    return float(margin.abs().sort(descending=True).values[k - 1])


def choose_keep(margin: torch.Tensor, s: torch.Tensor, keeps=KEEPS, target: float = 97.0) -> Tuple[float, dict]:
    """The filter's cut, chosen on held-out *training* rows only: the largest kept fraction of ``keeps`` at
    which the sign of the probe ``margin`` reads the sentiment ``s`` of the kept rows (largest ``|margin|``
    first) with accuracy ``>= target`` %; the smallest of ``keeps`` if none does. Returns ``(keep,
    {keep: accuracy %})``."""
    acc = {}
    for k in keeps:
        sel = margin.abs() >= keep_threshold(margin, k)
        acc[k] = 100.0 * float(((margin[sel] >= 0) == (s[sel] > 0)).double().mean())
    ok = [k for k in keeps if acc[k] >= target]
    return (max(ok) if ok else min(keeps)), acc


def _filter(cfg: SST2Data, sp: dict, cache, s_rows: torch.Tensor, s_dev: torch.Tensor, progress) -> tuple:
    """Regime ``"confident"``: fit the filter probe, keep the rows it reads with the largest margin.

    Returns ``(pools, test indices, filter record)``."""
    E = cache.embed(texts_to_embed(cfg, split=sp), progress=progress)
    n_res, n_pr, n_sc = len(sp["reserved"]), len(sp["probe"]), len(sp["scored"])
    E_res, E_probe, E_sc, E_dev = torch.split(E, [n_res, n_pr, n_sc, len(sp["dev"])])
    w = linear_probe(E_probe, s_rows[sp["probe"]], cfg.probe_l2)
    m_sc, m_res, m_dev = (X.double() @ w[:-1] + w[-1] for X in (E_sc, E_res, E_dev))
    keep, by_keep = (cfg.keep, {}) if cfg.keep is not None else choose_keep(m_sc, s_rows[sp["scored"]], cfg.keeps,
                                                                           cfg.keep_target)
    thr = keep_threshold(m_sc, keep)
    kept = [i for i, m in zip(sp["scored"], m_sc.tolist()) if abs(m) >= thr]
    test = [i for i, m in zip(sp["reserved"], m_res.tolist()) if abs(m) >= thr]
    n_train = len(kept) - cfg.n_val if cfg.n_train is None else min(cfg.n_train, len(kept) - cfg.n_val)
    if n_train < cfg.d:
        raise ConfigError(f"keep={keep} leaves {len(kept)} rows: too few for n_val={cfg.n_val} and d={cfg.d}")
    pools = {"train": kept[cfg.n_val:cfg.n_val + n_train], "val": kept[: cfg.n_val]}
    filt = {"keep": keep, "keep_rule": {str(k): v for k, v in by_keep.items()}, "threshold": thr, "margin_scored": m_sc.float(), "s_scored": s_rows[sp["scored"]],
            "margin_reserved": m_res.float(), "s_reserved": s_rows[sp["reserved"]],
            "margin_dev": m_dev.float(), "s_dev": s_dev, "n_probe": n_pr, "n_scored": n_sc,
            "n_reserved": n_res, "n_dropped": sp["dropped"], "n_kept": len(kept), "n_test": len(test)}
    return pools, test, filt


def prepare_features(cfg: SST2Data = SST2Data(), *, path=None, cache_dir=None, device=None,
                     progress=False, with_val: bool = False, cache=None) -> SST2Features:
    """Load SST-2, split it by ``cfg.regime``, poison, embed (cached), filter, project to ``d`` PCA features.

    The PCA is fitted on the training sentences and their poisoned twins together, so that the
    direction the phrase adds is kept; features are scaled to unit variance per coordinate. The
    validation pool (``n_val`` sentences for step sizes) is embedded only ``with_val``;
    otherwise ``val`` is ``None`` (nothing else depends on it). ``cache``: an
    :class:`~mambaicl.data.encoders.EmbeddingCache` to use (default: the encoder's cache in ``cache_dir``).
    """
    t0 = time.perf_counter()
    sp = split_sentences(cfg, path)
    rows, twins, dev, dev_twins = sp["rows"], sp["twins"], sp["dev"], sp["dev_twins"]
    cache = cache if cache is not None else embedding_cache(cfg.encoder, cache_dir=cache_dir, device=device)
    sentences = [s for s, _ in rows]
    s_rows = _sentiment([y for _, y in rows])
    s_dev = _sentiment([y for _, y in dev])
    filt = None
    if cfg.regime == "held-out":
        pools = {"train": sp["train"], "val": sp["val"]}
    else:
        pools, test, filt = _filter(cfg, sp, cache, s_rows, s_dev, progress)
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


def fill_cache(configs, *, path=None, cache_dir=None, device=None, progress=True, with_val: bool = False) -> Dict[str, object]:
    """Embed every sentence (and poisoned twin) that :func:`prepare_features` needs for each ``SST2Data`` of
    ``configs``, into the cache (one cache per encoder), with a progress bar (``True`` in a notebook, or
    a text stream such as the terminal of the book's build).

    Returns ``{"sentences": distinct sentences needed, "encoded": how many of them were encoded now (the
    rest came from the cache), "seconds": wall, "cpu_seconds": process CPU}``.
    """
    t0, c0 = time.perf_counter(), time.process_time()
    caches = {}
    for cfg in configs:
        if cfg.encoder not in caches:
            caches[cfg.encoder] = embedding_cache(cfg.encoder, cache_dir=cache_dir, device=device)
        prepare_features(cfg, path=path, device=device, progress=progress, cache=caches[cfg.encoder], with_val=with_val)
    return {"sentences": sum(len(c.requested) for c in caches.values()),
            "encoded": sum(c.encoded for c in caches.values()),
            "seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0}
