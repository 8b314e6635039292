"""Chapter 6's measurements on SST-2: accuracies, the encoder's ceilings, the filter's margin curve,
App. Table 5, memorisation, and the paper's claims under the book's rule (§4.2, App. 8.1-8.2).

Glossary (code name -> paper symbol):

===================  ========================================================================
``accuracy``         ``100 (1 - zero_one_error)`` of a model on a prompt set, in %
``oracle``           the encoder's in-context ceiling: knows which examples are clean, infers the
                     task from them with the linear probe, applies it to the query
``probe ceilings``   sentiment accuracy of the linear probe (raw embeddings, ``d`` features, ...)
``PCA_KS``           App. Table 5's numbers of principal components (5, 7, 10; and all)
``contrast``         ``sum_i c_i acc_i`` over seeds (:func:`mambaicl.analysis.stats.contrast`), in points
===================  ========================================================================

Every claim is a linear contrast of per-seed accuracies judged by the book's rule (the 95 % t
interval over seeds, df = seeds - 1), its standard error counting each noise source once: the seed
spread (which contains each seed's own prompts) and the test sentences, which every seed reuses, by
the cross-seed covariance of the per-sentence residuals (:func:`sentence_contrast`); the registry of claims (:mod:`mambaicl.analysis.claims`) turns the checks
of one table into its verdict.
"""
from __future__ import annotations

import functools
import math
from typing import Dict, List, Optional, Tuple

import torch

from ..config import ConfigError
from ..data.features import fit_pca, linear_probe, probe_accuracy
from ..data.poisoning import EmbeddedPool, sst2_prompts
from ..data.sst2_split import KEEPS, SST2Data, SST2Features, keep_threshold
from ..evaluate import predict, zero_one_error
from ..metric import wrong
from ..seeding import numpy_stream, substage
from .stats import Comparison, Contrast, contrast as _contrast, error_mean_se, mean_se, shared_cluster_se

__all__ = ["PCA_KS", "KEEPS", "accuracy", "accuracy_sentences", "sentence_contrast", "sentence_stats",
           "oracle_accuracy", "acc_stats", "margin_curve", "probe_ceilings",
           "pca_table", "pca_paired", "paired_gap", "memorisation", "contrast", "check", "claims", "CLAIM_KEYS", "judge", "claim_parts", "format_table",
           "table_json"]

PCA_KS = (5, 7, 10)  # App. Table 5

#: ``sum_i c_i acc_i`` over seeds for accuracies in % (:func:`mambaicl.analysis.stats.contrast` with ``scale=100``)
contrast = functools.partial(_contrast, scale=100.0)


# ---------------------------------------------------------------- accuracies and ceilings


@torch.no_grad()
def accuracy(model, prompts, device=None) -> Dict[Tuple[float, str], float]:
    """Accuracy (%) ``100 (1 - zero_one_error)`` on each prompt set (the book's one 0-1 error)."""
    dev = torch.device("cpu") if device is None else torch.device(device)
    return {k: 100 * (1 - zero_one_error(predict(model, pr.P.to(dev)).cpu(), pr.z)) for k, pr in prompts.items()}


@torch.no_grad()
def accuracy_sentences(model, prompts, n_sentences: int, device=None) -> tuple:
    """Accuracy (%) on each prompt set and, per test sentence ``j``, the sum over the prompts whose query is
    ``j`` of ``correct - accuracy`` (a proportion): ``({key: %}, {key: (n_sentences,) float64})``, what
    :func:`sentence_contrast` needs (the book's 0-1 error: a prediction 0 counts as wrong)."""
    dev = torch.device("cpu") if device is None else torch.device(device)
    acc, resid = {}, {}
    for k, pr in prompts.items():
        F = predict(model, pr.P.to(dev)).cpu()
        acc[k] = 100 * (1 - zero_one_error(F, pr.z))
        correct = (~wrong(F, pr.z)).double()  # (n,) the book's 0-1 convention (mambaicl.metric)
        q = pr.idx[:, -1]  # (n,) the query's sentence
        resid[k] = torch.zeros(n_sentences, dtype=torch.float64).index_add_(0, q, correct - correct.mean())
    return acc, resid


def sentence_contrast(terms, n_prompts: int, scale: float = 100.0) -> Contrast:
    """``sum_i c_i a_i`` over seeds (``a_i`` accuracies in %), its standard error counting each noise source once:
    ``se^2 = se_seeds^2 + se_sentences^2``. Every seed draws its own prompts, so the seed spread contains the
    prompts' noise (:func:`mambaicl.analysis.stats.contrast`: floored at their binomial part); the test sentences are shared by every seed, and their common part is the cross-seed
    covariance of the per-sentence residuals (:func:`mambaicl.analysis.stats.shared_cluster_se`).

    ``terms``: ``(c_i, per-seed values, per-seed residual vectors)`` (:func:`accuracy_sentences`'s residual sums,
    ``n`` prompts per term and seed). ``Contrast.values`` are the per-seed contrasts; the sentence part alone is
    ``sentence_se(terms, n_prompts)``.
    """
    own = _contrast([(c, v) for c, v, _ in terms], n_prompts, scale)  # seed spread, floored at the prompts' part
    return Contrast(diff=own.diff, se=math.hypot(own.se, sentence_se(terms, n_prompts, scale)), n_seeds=own.n_seeds,
                    values=own.values)


def sentence_se(terms, n_prompts: int, scale: float = 100.0) -> float:
    """The standard error a seed-averaged contrast owes to the shared test sentences (:func:`sentence_contrast`)."""
    S = len(terms[0][1])
    resid = [sum(c * e[s] for c, _, e in terms) for s in range(S)]  # S x (J,)
    return shared_cluster_se(resid, n_prompts, scale)


def sentence_stats(per_seed: List[dict], resid: List[dict], keys, n: int) -> tuple:
    """Per key: mean accuracy (%), its standard error (seeds, prompts and sentences: :func:`sentence_contrast`)
    and the sentence-level part alone (:func:`sentence_se`)."""
    mean, se, se_sent = {}, {}, {}
    for k in keys:
        term = [(1.0, [a[k] for a in per_seed], [e[k] for e in resid])]
        c = sentence_contrast(term, n)
        mean[k], se[k], se_sent[k] = c.diff, c.se, sentence_se(term, n)
    return mean, se, se_sent


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


def acc_stats(per_seed: List[dict], keys, n: int):
    """Mean and standard error (seeds and ``n`` test prompts counted) of per-seed accuracies in %, per key."""
    stats = {k: error_mean_se([a[k] / 100 for a in per_seed], n) for k in keys}
    return {k: 100 * m for k, (m, _) in stats.items()}, {k: 100 * se for k, (_, se) in stats.items()}


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
        raise ConfigError("feat.filter must hold the 'confident' regime's filter probe for margin_curve; got None")
    out = []
    for keep in keeps:
        thr = keep_threshold(f["margin_scored"], keep)
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
                                             stream=numpy_stream(seed, substage("sst2", "margin-curve", keep, count)))}
            row[f"oracle_{count}"] = oracle_accuracy(pr, torch.tensor([1.0, 0.0], dtype=torch.float64))[(alpha, "R")]
        out.append(row)
    return out


def probe_ceilings(feat: SST2Features, cfg: SST2Data = SST2Data()) -> Dict[str, float]:
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


def pca_table(feat: SST2Features, ks=PCA_KS, cfg: SST2Data = SST2Data()) -> Dict[object, Tuple[float, float]]:
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


def paired_gap(first_only: int, second_only: int, n: int, scale: float = 100.0) -> Comparison:
    """Accuracy of a first classifier minus a second one scored on the *same* ``n`` items, from the discordant
    items alone: ``first_only`` read right only by the first, ``second_only`` only by the second. The difference is
    ``(first_only - second_only) / n`` and its standard error the paired one, ``sqrt(b + c - (b - c)^2 / n) / n``
    (the per-item differences' standard error; McNemar's pairs), not two independent binomial errors; one fit, so
    ``n_seeds = 1`` (the normal interval)."""
    b, c = int(first_only), int(second_only)
    if not (0 <= b and 0 <= c and b + c <= n):
        raise ConfigError(f"discordant counts must be non-negative and at most n = {n} together; got {b} and {c}")
    return Comparison(diff=scale * (b - c) / n, se=scale * math.sqrt(max(b + c - (b - c) ** 2 / n, 0.0)) / n,
                      n_seeds=1)


def pca_paired(feat: SST2Features, k: int = 10, cfg: SST2Data = SST2Data()) -> Dict[str, int]:
    """App. Table 5's two probes (all embedding dimensions, and the top ``k`` principal components, as
    :func:`pca_table` fits them) read on the same test sentences: ``{"k", "n", "all_only", "top_only"}``, the
    sentences only the full probe reads right and those only the top-``k`` probe reads right (:func:`paired_gap`)."""
    pca = fit_pca(feat.emb_train, k)

    def right(X_tr, X_te) -> torch.Tensor:  # (n_te,) bool: the probe reads the sentence's sentiment
        w = linear_probe(X_tr, feat.train.s, cfg.probe_l2)
        return ~wrong(X_te.double() @ w[:-1] + w[-1], feat.test.s.double())

    def top(X):
        return (X.double() - pca.mean) @ pca.components[:k].T  # (n, k)

    full, few = right(feat.emb_train, feat.emb_test), right(top(feat.emb_train), top(feat.emb_test))
    return {"k": k, "n": len(feat.test.s), "all_only": int((full & ~few).sum()), "top_only": int((few & ~full).sum())}


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
                                                        stream=numpy_stream(s, substage("test", "sst2-memo", name)))}
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


# ---------------------------------------------------------------- the paper's claims, under the book's rule


def _t(c: float, res: dict, run: str, keys) -> tuple:
    """A term of :func:`sentence_contrast`: ``c`` times run ``run``'s accuracy averaged over ``keys``."""
    keys = [keys] if isinstance(keys[0], float) else list(keys)
    vals = [sum(a[k] for k in keys) / len(keys) for a in res["acc_seeds"][run]]
    resid = [sum(e[k] for k in keys) / len(keys) for e in res["resid"][run]]
    return (c, vals, resid)


def _check(claim: str, terms, res: dict, expected: str) -> dict:
    """:func:`check` of a sentence contrast (:func:`sentence_contrast`), recording the part of its standard error
    that every seed shares through the reused test sentences (:func:`sentence_se`), which more seeds do not shrink."""
    return check(claim, sentence_contrast(terms, res["n_prompts"]), expected,
                 se_fixed=sentence_se(terms, res["n_prompts"]))


def check(claim: str, c: Comparison, expected: str, se_fixed: Optional[float] = None) -> dict:
    """One comparison and whether it holds by the book's rule (the 95 % interval of the difference: excludes 0
    on the ``expected`` side for ``">"``/``"<"``, contains 0 for ``"="``). With one seed (App. Table 5's single
    fit) the interval is the normal one of the sampling standard error. ``se_fixed``: the part of ``c.se`` that
    every seed shares (recorded as ``"se_fixed"``; :func:`mambaicl.analysis.outcomes.seeds_needed` reads it)."""
    from .claims import Measured

    m = Measured.from_se(c.diff, c.se, c.n_seeds, getattr(c, "values", ()))
    holds = (m.low <= 0 <= m.high) if expected == "=" else (m.low > 0 if expected == ">" else m.high < 0)
    out = {"claim": claim, "diff": c.diff, "se": c.se, "low": m.low, "high": m.high, "n_seeds": c.n_seeds,
           "values": list(m.values), "expected": expected, "verdict": c.verdict, "holds": holds}
    if se_fixed is not None:
        out["se_fixed"] = float(se_fixed)
    return out


def _main(main, table) -> list:
    a = table.alphas[0]

    def t(c, run, p):
        return _t(c, main, run, (a, p))

    return [
        _check("Mamba above the linear Transformer under FQ", [t(1, "mamba", "FQ"), t(-1, "linear", "FQ")], main, ">"),
        _check("Mamba above the linear Transformer under R", [t(1, "mamba", "R"), t(-1, "linear", "R")], main, ">"),
        _check("Mamba drops under CQ (FQ minus CQ)", [t(1, "mamba", "FQ"), t(-1, "mamba", "CQ")], main, ">"),
        _check("Mamba's CQ drop exceeds the linear Transformer's",
               [t(1, "mamba", "FQ"), t(-1, "mamba", "CQ"), t(-1, "linear", "FQ"), t(1, "linear", "CQ")], main, ">"),
        _check("the linear Transformer unaffected by CQ (FQ minus CQ)",
               [t(1, "linear", "FQ"), t(-1, "linear", "CQ")], main, "="),
    ]


def _table1(t1, table) -> list:
    a = table.alphas[0]
    h = {k: [(a, p) for p in table.placements] for k in (1, 2, 3, 4)}

    def t(c, k):
        return _t(c, t1, f"linear H={k}", h[k])

    return [_check("H=2 above H=1 (mean over FQ, R, CQ)", [t(1, 2), t(-1, 1)], t1, ">"),
            _check("H=3 below H=2", [t(1, 3), t(-1, 2)], t1, "<"),
            _check("H=4 below H=2", [t(1, 4), t(-1, 2)], t1, "<")]


def _table2(t2, table) -> list:
    a = 0.5
    every = [(a, p) for p in table.placements]

    def t(c, run, p):
        return _t(c, t2, run, (a, p))

    return [
        _check("softmax above linear (mean over FQ, R, CQ)",
               [_t(1, t2, "softmax", every), _t(-1, t2, "linear", every)], t2, ">"),
        _check("Mamba drops under CQ (FQ minus CQ)", [t(1, "mamba", "FQ"), t(-1, "mamba", "CQ")], t2, ">"),
        _check("no CQ drop for softmax (FQ minus CQ)", [t(1, "softmax", "FQ"), t(-1, "softmax", "CQ")], t2, "="),
        _check("Mamba's CQ drop exceeds softmax's",
               [t(1, "mamba", "FQ"), t(-1, "mamba", "CQ"), t(-1, "softmax", "FQ"), t(1, "softmax", "CQ")], t2, ">"),
    ]


def _tables3_4(t2, table) -> list:
    lo, hi = min(table.alphas), max(table.alphas)
    at = {x: [(x, p) for p in table.placements] for x in (lo, hi)}
    fall = [_t(1, t2, "linear", at[lo]), _t(-1, t2, "linear", at[hi]), _t(-1, t2, "softmax", at[lo]),
            _t(1, t2, "softmax", at[hi])]
    half = [_t(0.5, t2, "linear", at[lo]), _t(-0.5, t2, "linear", at[hi]), _t(-1, t2, "softmax", at[lo]),
            _t(1, t2, "softmax", at[hi])]
    return [_check(f"linear falls more than softmax from alpha={lo} to {hi} (mean over placements)", fall, t2, ">"),
            _check("softmax avoids the sharp drop: it falls less than half as much as linear "
                   "(half the linear fall minus the softmax fall)", half, t2, ">")]


def _curriculum(cur, main, table) -> list:
    a = table.alphas[0]
    c_cq = _t(1, cur, table.runs[0].name, (a, "CQ"))
    m_cq, m_fq = _t(-1, main, "mamba", (a, "CQ")), _t(-1, main, "mamba", (a, "FQ"))
    return [_check("the curriculum raises Mamba's CQ accuracy", [c_cq, m_cq], cur, ">"),
            _check("it recovers more than half of the CQ loss (CQ gain minus half the FQ-CQ drop)",
                   [c_cq, (-0.5, m_cq[1], m_cq[2]), (-0.5, m_fq[1], m_fq[2])], cur, ">")]


def claims(raw: Dict[str, dict], pca: Optional[dict] = None, n_test: Optional[int] = None, *, tables: dict,
           paper_gap: float, paired: Optional[dict] = None) -> Dict[str, List[dict]]:
    """Every comparison the paper states for SST-2, under the book's rule (95 % t intervals of per-seed contrasts),
    from ``run_table`` outputs keyed by table name (and App. Table 5's :func:`pca_table`).

    ``tables`` maps ``"main"``, ``"table1"``, ``"table2"``, ``"curriculum"`` to the tables (name, alphas,
    placements, runs) the outputs come from; ``paper_gap`` is the paper's App. Table 5 gap "all minus 10
    components" in points. Differences are in accuracy points; ``expected`` is ``">"`` (a > b claimed), ``"<"``,
    or ``"="`` (no difference claimed: holds when the difference is not significant). Tables absent from
    ``raw`` are skipped. App. Table 5's gap is judged on the paired standard error of ``paired``
    (:func:`pca_paired`: both probes read the same sentences); without it, on the two accuracies' binomial errors.
    """
    out = {}
    main = raw.get(tables["main"].name)
    if main:
        out["main"] = _main(main, tables["main"])
    t1 = raw.get(tables["table1"].name)
    if t1:
        out["table1"] = _table1(t1, tables["table1"])
    t2 = raw.get(tables["table2"].name)
    if t2:
        out["table2"] = _table2(t2, tables["table2"])
        out["tables3_4"] = _tables3_4(t2, tables["table2"])
    cur = raw.get(tables["curriculum"].name)
    if cur and main:
        out["curriculum"] = _curriculum(cur, main, tables["curriculum"])
    if pca is not None and n_test:
        gap = pca["all"][0] - pca[10][0]
        se = math.hypot(pca["all"][1], pca[10][1])
        if paired is not None:  # the same sentences read by both probes: the paired error of the difference
            pg = paired_gap(paired["all_only"], paired["top_only"], paired["n"])
            if abs(pg.diff - gap) > 1e-6:
                raise ConfigError(f"the paired counts give a gap of {pg.diff} points, the accuracies {gap}")
            se = pg.se
        c = Comparison(diff=gap - paper_gap, se=se, n_seeds=1)
        found = check("the top 10 components are as close to all as in the paper "
                      f"(our gap minus the paper's {paper_gap:.2f} points)", c, "=", se_fixed=se)
        found["values"] = [gap - paper_gap]  # one fit on one encoder: its single measurement is its per-seed value
        if paired is not None:  # per fit (one): the discordant sentences behind the paired error
            found["discordant"] = [[paired["all_only"], paired["top_only"]]]
        out["table5"] = [found]
    return out


#: the registry's claim (``mambaicl.analysis.claims``) for each table's checks; the curriculum's claim is its first
CLAIM_KEYS = {"main": "sst2-main", "table1": "sst2-table1", "table2": "sst2-table2", "tables3_4": "sst2-tables3-4",
              "curriculum": "sst2-curriculum", "table5": "sst2-table5"}


def claim_parts(found: Dict[str, List[dict]], table: str, ours: str = ""):
    """The checks of ``table`` (from :func:`claims`) as the registry's inputs (:class:`~mambaicl.analysis.claims.
    ClaimParts`, with the row's text ``ours``): each check's contrast with its interval, one per part."""
    from .claims import CLAIMS, ClaimParts, Measured

    claim = CLAIMS[CLAIM_KEYS[table]]
    ms = [Measured(c["diff"], c["low"], c["high"], c["n_seeds"], tuple(c["values"]), c.get("se_fixed"))
          for c in found[table]]
    if claim.criterion.kind == "all":
        return ClaimParts(ours, parts=ms[:len(claim.criterion.parts)])
    return ClaimParts(ours, per_seed=ms[0])


def judge(found: Dict[str, List[dict]], table: str):
    """Hand the checks of ``table`` (from :func:`claims`) to the registry of claims, which computes the verdict."""
    from .claims import judge_all

    return judge_all({CLAIM_KEYS[table]: claim_parts(found, table)})[CLAIM_KEYS[table]]


# ---------------------------------------------------------------- the tables as text


def _cell(ours: float, se: float, paper: Optional[float]) -> str:
    theirs = f"{paper:5.2f}" if paper is not None else "  -  "
    return f"{ours:5.1f} ± {se:3.1f} ({theirs})"


def format_table(table, res: dict, runs: Optional[Tuple[str, ...]] = None) -> str:
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


def _key(k) -> str:
    a, p = k
    return f"{a}/{p}"


def table_json(table, res: dict) -> dict:
    """One table's results for ``results.json``: per run and ``"alpha/placement"`` cell the per-seed accuracies,
    mean, SE (and its sentence-level part), the paper's number and the oracle ceiling, and per run the steps
    each seed trained (``"steps"``, ``"capped"``); the oracle's own per-seed values."""
    runs = {}
    for name in res["acc"]:
        runs[name] = {_key(k): {"per_seed": [a[k] for a in res["acc_seeds"][name]], "mean": res["acc"][name][k],
                                "se": res["se"][name][k], "se_sentences": res["se_sentences"][name][k],
                                "paper": table.paper.get(name, {}).get(k),
                                "oracle": res["oracle"][k]} for k in res["acc"][name]}
        runs[name]["steps"] = [r["best_step"] for r in res["stopping"][name]]
        runs[name]["capped"] = [r["capped"] for r in res["stopping"][name]]
    oracle = {_key(k): {"per_seed": [o[k] for o in res["oracle_seeds"]], "mean": res["oracle"][k],
                        "se": res["oracle_se"][k]} for k in res["oracle"]}
    return {"name": table.name, "rule": table.rule, "n_prompts": table.n_prompts, "n_sentences": res["n_sentences"],
            "runs": runs, "oracle": oracle}
