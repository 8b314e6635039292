"""Chapter 6 machinery: PCA, linear probe, presets, curriculum sampler, oracle, a tiny table end to end."""
import dataclasses

import pytest
import numpy as np
import torch

from mambaicl.analysis import sst2 as A
from mambaicl.data import sst2_split
from mambaicl.experiments import sst2 as X
from mambaicl.data.features import fit_pca, linear_probe, probe_accuracy
from mambaicl.data.poisoning import EmbeddedPool, sst2_prompts


def test_pca_recovers_a_planted_subspace():
    g = torch.Generator().manual_seed(0)
    basis = torch.linalg.qr(torch.randn(20, 3, generator=g, dtype=torch.float64))[0].T  # (3, 20)
    X_ = (torch.randn(500, 3, generator=g, dtype=torch.float64) * torch.tensor([5.0, 3.0, 2.0])) @ basis
    X_ = X_ + 0.01 * torch.randn(500, 20, generator=g, dtype=torch.float64) + 7.0
    pca = fit_pca(X_, 3, unit_variance=True)
    proj = pca.components @ basis.T  # (3, 3): orthogonal when the subspace is recovered
    assert torch.allclose(proj @ proj.T, torch.eye(3, dtype=torch.float64), atol=1e-4)
    assert (proj.diagonal().abs() > 0.9).all()  # and ordered by variance
    Z = pca.transform(X_)
    assert torch.allclose(Z.mean(0), torch.zeros(3, dtype=torch.float64), atol=1e-9)
    assert abs(float(Z.var(0).mean()) - 1.0) < 1e-9
    assert torch.equal(fit_pca(X_, 3).components, pca.components)  # deterministic signs
    with pytest.raises(ValueError, match=r"^k must be an integer in \[1, 20\]"):
        fit_pca(X_, 0)


def test_linear_probe_separable_and_chance():
    g = torch.Generator().manual_seed(1)
    s = torch.where(torch.rand(400, generator=g) < 0.5, 1.0, -1.0)
    X_ = torch.randn(400, 5, generator=g) + 3 * s[:, None] * torch.tensor([1.0, 0, 0, 0, 0]) + 10
    assert probe_accuracy(X_[:200], s[:200], X_[200:], s[200:]) > 0.97
    noise = torch.randn(400, 5, generator=g)
    assert 0.35 < probe_accuracy(noise[:200], s[:200], noise[200:], s[200:]) < 0.65
    w = linear_probe(X_, s)
    assert w.shape == (6,) and w[0] > 0


def test_presets_are_the_papers_settings():
    assert [r.kind for r in X.MAIN_TABLE.runs] == ["mamba", "linear"]
    assert all(r.n_layers == 3 and r.n_heads == 2 and r.p_a == 0.25 for r in X.MAIN_TABLE.runs)
    assert X.MAIN_TABLE.alphas == (0.75,) and X.HELD_OUT.l == 8 and X.HELD_OUT.d == 72 and X.CONFIDENT.d == 72
    assert [r.n_heads for r in X.TABLE_1.runs] == [1, 2, 3, 4] and all(r.p_a == 0.4 for r in X.TABLE_1.runs)
    assert {r.name: r.n_heads for r in X.TABLE_2.runs} == {"mamba": 1, "linear": 1, "softmax": 1}
    assert X.TABLE_2.alphas[0] == 0.5 and set(X.TABLE_2.alphas) == {0.4, 0.5, 0.6, 0.7, 0.8}
    assert X.CURRICULUM.runs[0].curriculum and X.PAPER["table5"]["all"] == 80.05
    # App. Table 2 at alpha = 0.5, App. Tables 3-4 elsewhere (softmax 95.58 under R at 0.8, linear 67.78)
    assert X.TABLE_2.paper["softmax"][(0.8, "R")] == 95.58 and X.TABLE_2.paper["linear"][(0.8, "R")] == 67.78
    assert X.TABLE_2.paper["softmax"][(0.5, "CQ")] == 99.28 and X.TABLE_2.paper["mamba"][(0.5, "CQ")] == 82.73
    assert X.HELD_OUT.count == "binomial" and X.CONFIDENT.count == "balanced"
    regimes = {r.name: r for r in X.PRESETS[X.DEFAULT_PRESET].regimes}
    assert set(regimes) == {"held-out", "confident"} and all(regimes[k].definition for k in regimes)
    assert len(regimes["confident"].tables) == 4


def toy_features(n=60, d=6, seed=0):
    """Sentiment on coordinate 0, the phrase adds +4 on coordinate 1."""
    g = torch.Generator().manual_seed(seed)
    s = torch.where(torch.arange(n) % 2 == 0, 1.0, -1.0)
    x = torch.randn(n, d, generator=g) * 0.3
    x[:, 0] += s
    bond = x.clone()
    bond[:, 1] += 4.0
    pool = EmbeddedPool(x=x, x_bond=bond, s=s)
    return X.SST2Features(train=pool, val=pool, test=pool, emb_train=x, emb_test=x, pca=fit_pca(x, 2), examples={})


def test_curriculum_source_switches_to_cq_at_half():
    from mambaicl.data.poisoning import SST2Source

    feat = toy_features()
    source = SST2Source(feat.train, l=8, p_a=0.5, switch=5)
    gens = [np.random.default_rng(0), np.random.default_rng(1)]
    for call in range(11):
        P, z = source.sample_at(call, 200, gens)
        assert P.shape == (2, 200, 9, 7) and z.shape == (2, 200)
        outl = P[..., :8, 1] > 2  # the phrase's coordinate
        count = outl.sum(-1, keepdim=True)
        is_cq = torch.equal(outl, (torch.arange(8) >= 8 - count))
        assert is_cq == (call >= 5)


def test_seeds_trained_as_one_batch_equal_each_seed_alone():
    feat = toy_features()
    cfg = dataclasses.replace(X.HELD_OUT, d=6, n_train=60)
    for run in (X.Run("m", "mamba", n_heads=1, n_layers=1, d_model=8, steps=4, batch_size=4, curriculum=True,
                      switch=2, every=1, n_val=50),
                X.Run("s", "softmax", n_heads=2, n_layers=2, d_model=8, steps=4, batch_size=4, every=2, n_val=50)):
        both, recs = X.trained_models(run, feat, (0, 3), cfg)
        alone, rec = X.trained_models(run, feat, (3,), cfg)
        assert len(recs) == 2 and recs[1] == rec[0] and recs[1]["steps"][-1] <= 4
        for p, q in zip(both[1].parameters(), alone[0].parameters()):
            assert torch.equal(p, q)


def test_training_stops_when_the_validation_loss_stops_improving():
    """The stopping rule against an independent replay: train the same seed alone with the plain engine for the
    steps the early-stopped run took, read the validation loss every `every` steps in a callback of our own,
    and find where `patience` readings bring no new lowest value; the early-stopped model is the model of the
    replay's lowest reading."""
    import copy

    from mambaicl.evaluate import predict
    from mambaicl.recipes import sst2 as T
    from mambaicl.recipes.validation import sst2_validation_prompts
    from mambaicl.train import loss_per_model, member_model, train

    feat = toy_features()
    cfg = dataclasses.replace(X.HELD_OUT, d=6, n_train=60)
    run = X.Run("m", "mamba", n_heads=1, n_layers=1, d_model=8, steps=40, batch_size=8, every=5, patience=2,
                n_val=200, lr=1e-2)
    models, recs = X.trained_models(run, feat, (0, 3), cfg)
    val = sst2_validation_prompts(run, feat, cfg)
    for k, seed in enumerate((0, 3)):
        rec = recs[k]
        losses, snaps = [], []

        def read(step, stack):
            if (step + 1) % run.every == 0:
                with torch.no_grad():
                    losses.append(float(loss_per_model("hinge", predict(member_model(stack, 0), val.P), val.z)))
                snaps.append(member_model(stack, 0))  # a copy of slot 0 (a StackedDeepModel's member)

        train(T.run_members(run, feat, cfg, (seed,)), T.budget(run, rec["stopped_at"]), progress=False, callback=read)
        assert losses == pytest.approx(rec["loss"], abs=1e-6)
        i = min(range(len(losses)), key=losses.__getitem__)
        assert rec["best_step"] == run.every * (i + 1)
        assert rec["capped"] or len(losses) - 1 - i == run.patience  # `patience` readings without a new lowest
        for p, q in zip(models[k].parameters(), snaps[i].parameters()):
            assert torch.equal(p, q)


def test_sentence_cluster_error_against_a_direct_computation():
    """sentence_contrast's sentence part equals the shared (cross-seed) part of the cluster variance computed
    directly from per-prompt correctness: per seed, each query sentence's influence on the contrast; the sentences'
    common variance is the mean over pairs of different seeds of the summed products of their influences (each
    seed's own prompt noise, already in the seed spread, is left out)."""
    g = torch.Generator().manual_seed(0)
    J, n, S = 7, 40, 3
    q = [[torch.randint(J, (n,), generator=g) for _ in range(S)] for _ in range(2)]  # (term, seed) -> (n,)
    y = [[(torch.rand(n, generator=g) < 0.3 + 0.1 * t + 0.05 * q[t][s].double()).double() for s in range(S)]
         for t in range(2)]
    coef = (1.0, -1.0)
    terms = []
    for t in range(2):
        vals = [100 * float(y[t][s].mean()) for s in range(S)]
        res = [torch.zeros(J, dtype=torch.float64).index_add_(0, q[t][s], y[t][s] - y[t][s].mean()) for s in range(S)]
        terms.append((coef[t], vals, res))
    infl = [[0.0] * J for _ in range(S)]  # per seed, the influence of cluster j on that seed's contrast
    for t in range(2):
        for s in range(S):
            m = float(y[t][s].mean())
            for i in range(n):
                infl[s][int(q[t][s][i])] += coef[t] * (float(y[t][s][i]) - m) / n
    cross = sum(infl[s][j] * infl[r][j] for s in range(S) for r in range(S) if r != s for j in range(J))
    direct = 100 * max(cross / (S * (S - 1)) * J / (J - 1), 0.0) ** 0.5
    assert A.sentence_se(terms, n) == pytest.approx(direct, rel=1e-12, abs=1e-12)
    c = A.sentence_contrast(terms, n)
    values = [terms[0][1][s] - terms[1][1][s] for s in range(S)]
    mean = sum(values) / S
    se_seeds = (sum((v - mean) ** 2 for v in values) / (S - 1) / S) ** 0.5
    floor = 100 * (sum(float(y[t][s].mean()) * (1 - float(y[t][s].mean())) / n for t in range(2) for s in range(S))
                   / S ** 2) ** 0.5  # each seed's own prompts: the seed spread is never read below their binomial part
    assert c.diff == pytest.approx(mean) and c.se == pytest.approx((max(se_seeds, floor) ** 2 + direct ** 2) ** 0.5)


def test_choose_keep_is_the_largest_cut_that_reads_the_training_rows_at_the_target():
    from mambaicl.data.sst2_split import choose_keep

    # 100 rows: the 30 largest margins all read right, then 10 % of the next 20 wrong, the rest 50/50
    margin = torch.linspace(10, 0.1, 100)
    s = torch.ones(100)
    s[[35, 45]] = -1.0  # two wrong among ranks 30-49
    s[50::2] = -1.0  # half wrong below rank 50
    keep, acc = choose_keep(margin, s, keeps=(1.0, 0.5, 0.4, 0.3, 0.2), target=97.0)
    assert acc[0.3] == 100.0 and acc[0.4] == pytest.approx(100 * 39 / 40) and acc[0.5] == pytest.approx(96.0)
    assert keep == 0.4  # the largest cut at >= 97 %
    assert choose_keep(margin, s, keeps=(1.0, 0.5), target=99.0)[0] == 0.5  # none reaches it: the smallest cut


def test_oracle_and_tiny_table_end_to_end():
    feat = toy_features()
    cfg = dataclasses.replace(X.HELD_OUT, d=6, n_train=60)
    table = X.Table("tiny", (X.Run("m", "mamba", n_heads=1, n_layers=1, d_model=8, steps=3, batch_size=8),
                             X.Run("s", "softmax", n_heads=1, n_layers=1, d_model=8, steps=3, batch_size=8)),
                    alphas=(0.0, 1.0), n_prompts=300, paper={"m": {(0.0, "FQ"): 99.0}})
    res = X.run_table(table, feat, (0,), cfg, progress=False)
    assert res["oracle"][(0.0, "R")] > 95  # separable sentiment: the oracle infers f and the query's label
    assert 40 < res["oracle"][(1.0, "R")] < 60  # all examples poisoned: nothing to infer f from
    assert set(res["acc"]) == {"m", "s"} and all(0 <= v <= 100 for v in res["acc"]["m"].values())
    text = X.format_table(table, res)
    assert text.splitlines()[1].split()[:2] == ["0.00", "FQ"] and "(99.00)" in text and "(  -  )" in text
    again = X.run_table(table, feat, (0,), cfg, progress=False)
    assert again["acc"] == res["acc"]  # deterministic on CPU
    two = X.run_table(table, feat, (0, 5), cfg, progress=False)
    assert two["acc_seeds"]["m"][0] == res["acc"]["m"] and len(two["models"]["m"]) == 2
    k = (1.0, "CQ")
    assert two["acc"]["m"][k] == pytest.approx((two["acc_seeds"]["m"][0][k] + two["acc_seeds"]["m"][1][k]) / 2)
    assert two["se"]["m"][k] > 0
    reuse = X.run_table(table, feat, (0,), cfg, progress=False, models={"m": res["models"]["m"]})
    assert reuse["acc"]["m"] == res["acc"]["m"] and "m" not in reuse["seconds"]


# ---------------------------------------------------------------- regimes end to end, on a small made-up SST-2

VOCAB = ["the", "film", "plot", "actor", "story", "music", "scene", "ending", "cast", "script", "is", "was"]
POLAR = {"great": 3.0, "good": 1.0, "bad": -1.0, "awful": -3.0}


class WordEncoder:
    """Deterministic stand-in for MiniLM: the mean of fixed word vectors plus the sentiment word's
    strength on coordinate 0 (strong words far from zero); the phrase "James Bond" on coordinate 1."""

    def __init__(self, D=12):
        self.D, self.calls = D, 0

    def vec(self, w):
        import zlib
        v = torch.randn(self.D, generator=torch.Generator().manual_seed(zlib.crc32(w.encode()))) * 0.3
        v[1] = 4.0 if w in ("James", "Bond") else v[1]
        return v

    def encode(self, texts, batch_size=64, progress=False):
        self.calls += len(texts)
        out = torch.stack([torch.stack([self.vec(w) for w in t.split()]).mean(0) for t in texts])
        out[:, 0] += torch.tensor([sum(POLAR.get(w, 0.0) for w in t.split()) for t in texts])
        return out


def write_made_up_sst2(folder, n_sentences=160, seed=0):
    """Full sentences of 6-8 words with one sentiment word, each followed by two of its own phrases."""
    g = torch.Generator().manual_seed(seed)
    rows, words = [], list(POLAR)
    for i in range(n_sentences):
        n = 6 + int(torch.randint(3, (1,), generator=g))
        body = [VOCAB[int(j)] for j in torch.randint(len(VOCAB), (n,), generator=g)] + [f"w{i}"]
        pol = words[int(torch.randint(4, (1,), generator=g))]
        pos = int(torch.randint(1, n, (1,), generator=g))
        sent = body[:pos] + [pol] + body[pos:]
        label = int(POLAR[pol] > 0)
        rows += [(" ".join(sent), label), (" ".join(sent[pos - 1:pos + 2]), label), (" ".join(sent[pos:pos + 3]), label)]
    folder.mkdir(parents=True, exist_ok=True)
    body = "".join(f"{s}\t{y}\n" for s, y in rows)
    (folder / "train.tsv").write_text("sentence\tlabel\n" + body, encoding="utf-8")
    dev = "".join(f"{s}\t{y}\n" for s, y in rows[:60:3])
    (folder / "dev.tsv").write_text("sentence\tlabel\n" + dev, encoding="utf-8")
    return folder


TINY_CONFIDENT = X.SST2Data(regime="confident", n_train=None, n_val=20, n_reserved=40, n_probe=80, keep=0.5,
                            count="balanced", d=6)
TINY_HELD_OUT = X.SST2Data(n_train=100, n_val=20, d=6)
TINY_RUNS = (X.Run("mamba", "mamba", n_heads=1, n_layers=1, d_model=8, steps=4, batch_size=8),
             X.Run("linear", "linear", n_heads=1, n_layers=1, d_model=8, steps=4, batch_size=8))
TINY_TABLE = dataclasses.replace(X.MAIN_TABLE, runs=TINY_RUNS, n_prompts=200)
TINY_PRESET = X.SST2Preset("tiny", regimes=(X.Regime("held-out", "defined", TINY_HELD_OUT, (TINY_TABLE,)),
                                            X.Regime("confident", "defined", TINY_CONFIDENT, (TINY_TABLE,))),
                           pca_ks=(2, 3, 10), keeps=(1.0, 0.5))


@pytest.fixture
def made_up(tmp_path, monkeypatch):
    from mambaicl.data.encoders import EmbeddingCache

    enc = WordEncoder()
    def words_cache(name, cache_dir=None, device=None):
        return EmbeddingCache("words@1", lambda: enc, tmp_path / "cache")

    monkeypatch.setattr(sst2_split, "embedding_cache", words_cache)
    return write_made_up_sst2(tmp_path / "sst2"), enc


def test_confident_regime_filters_and_holds_out_whole_sentences(made_up):
    from mambaicl.data.sst2 import inside_any, maximal_phrases

    folder, enc = made_up
    sp = sst2_split.split_sentences(TINY_CONFIDENT, folder)
    sentences = [s for s, _ in sp["rows"]]
    maximal = set(maximal_phrases(sentences))
    assert len(sp["reserved"]) == 40 and set(sp["reserved"]) <= maximal  # test candidates are full sentences
    others = sp["probe"] + sp["scored"]
    assert not set(others) & set(sp["reserved"]) and len(sp["probe"]) == 80
    assert not any(inside_any([sentences[i] for i in others], [sentences[i] for i in sp["reserved"]]))
    rows = [s for s, _ in sp["rows"]]
    reserved = [f" {rows[i]} " for i in sp["reserved"]]
    phrases_of_reserved = [i for i in range(len(rows)) if i not in set(sp["reserved"])
                           and any(f" {rows[i]} " in r for r in reserved)]  # padded substring: whole words
    assert sp["dropped"] == len(phrases_of_reserved) > 40  # each reserved sentence takes its phrases with it
    feat = X.prepare_features(TINY_CONFIDENT, path=folder)
    f = feat.filter
    assert f["n_kept"] == round(0.5 * f["n_scored"]) or f["n_kept"] > round(0.5 * f["n_scored"])  # ties kept
    assert feat.sizes["val"] == 20 and feat.sizes["train"] == f["n_kept"] - 20 and feat.sizes["test"] == f["n_test"]
    kept_margin = f["margin_scored"].abs() >= f["threshold"]
    assert float(kept_margin.double().mean()) >= 0.5
    # the kept rows are the confident ones: their strong words ("great", "awful") are over-represented
    assert feat.test.x.shape == (f["n_test"], 6) and feat.train.x.shape[1] == 6
    curve = X.margin_curve(feat, (1.0, 0.5, 0.25), n_prompts=500)
    assert [r["keep"] for r in curve] == [1.0, 0.5, 0.25] and curve[0]["fraction"] == 1.0
    assert curve[2]["probe_scored"] >= curve[0]["probe_scored"]  # confident rows are read at least as well
    assert all(r["oracle_balanced"] >= r["oracle_binomial"] - 3 for r in curve)


def test_oracle_matches_the_closed_form():
    """A probe that reads every sentence right: with Eq. (5) draws the oracle errs only when no example is
    clean and its guess f = +1 is wrong, accuracy 1 - alpha^l / 2; with a fixed count it never errs."""
    s = torch.where(torch.arange(200) % 2 == 0, 1.0, -1.0)
    x = torch.stack([s, torch.zeros(200)], 1)
    pool = EmbeddedPool(x=x, x_bond=x + torch.tensor([0.0, 5.0]), s=s)
    w = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    for alpha in (0.5, 0.75, 0.8):
        g = np.random.default_rng(0)
        binom = {(alpha, "R"): sst2_prompts(pool, 40000, alpha=alpha, stream=g)}
        assert X.oracle_accuracy(binom, w)[(alpha, "R")] == pytest.approx(100 * (1 - alpha ** 8 / 2), abs=0.6)
        for count in ("fixed", "balanced"):
            fixed = {(alpha, "R"): sst2_prompts(pool, 4000, alpha=alpha, count=count, stream=g)}
            assert X.oracle_accuracy(fixed, w)[(alpha, "R")] == 100.0


def _fake_res(mamba, linear, seeds=(0, 1, 2)):
    """run_table-shaped output with per-seed accuracies ``{placement: [per seed]}`` at alpha 0.75."""
    acc = {"mamba": [{(0.75, p): mamba[p][i] for p in mamba} for i in range(len(seeds))],
           "linear": [{(0.75, p): linear[p][i] for p in linear} for i in range(len(seeds))]}
    # per-sentence residual sums of 4,000 simulated prompts per cell (queries uniform over 1,000 sentences, each
    # prompt right with the cell's accuracy): the sentence-level error is then about the binomial one
    g = torch.Generator().manual_seed(0)
    resid = {}
    for run, per in acc.items():
        resid[run] = []
        for a in per:
            e = {}
            for k, v in a.items():
                q = torch.randint(1000, (4000,), generator=g)
                y = (torch.rand(4000, generator=g, dtype=torch.float64) < v / 100).double()
                e[k] = torch.zeros(1000, dtype=torch.float64).index_add_(0, q, y - y.mean())
            resid[run].append(e)
    return {"acc_seeds": acc, "resid": resid, "n_prompts": 4000, "seeds": seeds}


def test_contrast_in_points_is_the_stats_contrast_and_counts_every_term():
    from mambaicl.analysis.stats import compare

    a, b = [91.0, 93.5, 92.0], [88.0, 88.5, 90.0]
    c = X.contrast([(1, a), (-1, b)], 4000)
    ref = compare([x / 100 for x in a], [y / 100 for y in b], 4000)
    assert c.diff == pytest.approx(100 * ref.diff) and c.se == pytest.approx(100 * ref.se)
    # a difference of two drops with no seed spread: only the four binomial terms remain
    d = X.contrast([(1, [90.0] * 3), (-1, [80.0] * 3), (-1, [70.0] * 3), (1, [70.0] * 3)], 1000)
    by_hand = 100 * ((0.9 * 0.1 + 0.8 * 0.2 + 2 * 0.7 * 0.3) / 1000 / 3) ** 0.5
    assert d.diff == pytest.approx(10.0) and d.se == pytest.approx(by_hand)


CLAIM_CASES = {  # name: (Mamba per placement and seed, linear per placement and seed, holds, verdict)
    "clear": ({"FQ": [95, 96, 95.5], "R": [94, 95, 94.5], "CQ": [80, 82, 81]},
              {"FQ": [88, 87, 88.5], "R": [88, 89, 88], "CQ": [88, 87, 88]}, [True] * 5, "reproduced"),
    # differences of 0.3 points with 4,000 prompts per seed: SE of the difference ~0.7 points (the binomial floor),
    # no claim: four parts undecided; the linear Transformer unaffected by CQ (within 2 points) holds
    "close": ({p: [90.0 + 0.1 * (p == "CQ"), 90.3 + 0.1 * (p == "CQ"), 90.6 + 0.1 * (p == "CQ")] for p in ("FQ", "R", "CQ")},
              {p: [89.7, 90.0, 90.3] for p in ("FQ", "R", "CQ")}, [False] * 4 + [True], "undecided"),
    "half": ({"FQ": [95, 96, 95.5], "R": [88, 89, 88], "CQ": [95, 96, 95.5]},
             {"FQ": [88, 87, 88.5], "R": [88, 89, 88], "CQ": [88, 87, 88]}, [True, False, False, False, True],
             "undecided"),  # Mamba equal to LT under R and unaffected by CQ: those parts straddle 0, none fails
    # the linear Transformer gains 9 points under CQ: "much less affected" fails
    "gains": ({"FQ": [95, 96, 95.5], "R": [94, 95, 94.5], "CQ": [80, 82, 81]},
              {"FQ": [78, 79, 78.5], "R": [80, 81, 80], "CQ": [88, 87, 88]}, [True] * 4 + [False], "partly reproduced"),
}


@pytest.mark.parametrize("case", list(CLAIM_CASES))
def test_claims_follow_the_t_interval_rule(case):
    mamba, linear, holds, verdict = CLAIM_CASES[case]
    found = X.claims({X.MAIN_TABLE.name: _fake_res(mamba, linear)})
    assert [c["holds"] for c in found["main"]] == holds and X.judge(found, "main").verdict == verdict


def test_equality_checks_hold_when_the_difference_is_not_significant():
    # "=" checks hold when the 95 % t interval (3 seeds: t = 4.30) contains 0
    assert A.check("x", X.Comparison(diff=1.0, se=0.4, n_seeds=3), "=")["holds"]  # 2.5 SE: held under t
    assert not A.check("x", X.Comparison(diff=2.0, se=0.4, n_seeds=3), "=")["holds"]


def test_run_writes_every_regime_and_is_byte_identical(made_up):
    folder, enc = made_up
    a = X.run(TINY_PRESET, seeds=(0, 1, 2), progress=False, path=folder)
    calls = enc.calls
    b = X.run(TINY_PRESET, seeds=(0, 1, 2), progress=False, path=folder)
    assert enc.calls == calls  # the second run reads everything from the cache
    assert a.to_json() == b.to_json()
    out = a.to_dict()["regimes"]
    assert set(out) == {"held-out", "confident"} and out["confident"]["definition"] == "defined"
    cell = out["confident"]["tables"][X.MAIN_TABLE.name]["runs"]["mamba"]["0.75/CQ"]
    assert len(cell["per_seed"]) == 3 and cell["mean"] == pytest.approx(sum(cell["per_seed"]) / 3)
    assert cell["se"] > 0 and 0 <= cell["oracle"] <= 100
    assert set(out["confident"]["verdicts"]) >= {"main"} and "margin_curve" in out["confident"]
    assert "margin_curve" not in out["held-out"] and "memorisation" in out["held-out"]
    assert set(out["held-out"]["pca"]) == {"2", "3", "10", "all"}


def test_validation_curve_records_and_picks_a_step():
    feat = toy_features()
    cfg = dataclasses.replace(X.HELD_OUT, d=6, n_train=60)
    run = X.Run("m", "linear", n_heads=1, n_layers=1, d_model=8, batch_size=16)
    got = X.validation_curve(run, feat, cfg, lrs=(1e-3, 1e-2), steps=8, every=4, n_prompts=100)
    assert set(got) == {1e-3, 1e-2}
    for rec in got.values():
        assert rec["steps"] == [4, 8] and len(rec["loss"]) == 2 and rec["best_step"] in rec["steps"]
        assert rec["best_loss"] == min(rec["loss"]) and all(0 <= a <= 100 for a in rec["acc"])
    with pytest.raises(ValueError, match="^seeds must be disjoint"):
        X.validation_curve(run, feat, cfg, lrs=(1e-3,), steps=2, every=2, seeds=(0, 7), n_prompts=50)


def test_cli_embed_sst2_fills_the_cache_once(made_up, monkeypatch, capsys):
    from mambaicl.__main__ import main

    folder, enc = made_up
    monkeypatch.setitem(X.PRESETS, "tiny", TINY_PRESET)
    assert main(["embed-sst2", "--path", str(folder), "--preset", "tiny", "--quiet"]) == 0
    first = enc.calls
    assert first > 0 and "embedding cache filled" in capsys.readouterr().out
    assert main(["embed-sst2", "--path", str(folder), "--preset", "tiny", "--quiet"]) == 0
    assert enc.calls == first  # warm cache: nothing encoded again
    assert main(["embed-sst2", "--path", str(folder / "missing")]) == 2
    assert "SST-2 directory not found" in capsys.readouterr().err
    assert main(["embed-sst2", "--preset", "nope"]) == 2


def test_confident_regime_scores_at_most_n_scored_rows_and_embeds_only_what_it_uses(made_up):
    """n_scored caps the rows the filter probe reads (the first ones after the probe rows, in the data
    seed's order); the validation sentences and their twins are embedded only with_val=True."""
    folder, enc = made_up
    full = sst2_split.split_sentences(TINY_CONFIDENT, folder)
    capped_cfg = dataclasses.replace(TINY_CONFIDENT, n_scored=150)
    capped = sst2_split.split_sentences(capped_cfg, folder)
    assert len(full["scored"]) > 150 and capped["scored"] == full["scored"][:150]
    assert capped["probe"] == full["probe"] and capped["reserved"] == full["reserved"]
    feat = X.prepare_features(capped_cfg, path=folder)
    assert feat.filter["n_scored"] == 150 and feat.val is None and feat.sizes["val"] == 20
    used = enc.calls
    with_val = X.prepare_features(capped_cfg, path=folder, with_val=True)
    assert enc.calls > used  # the validation twins were not in the cache: they were never embedded before
    assert with_val.val.x.shape == (20, 6)
    assert torch.equal(with_val.train.x, feat.train.x) and torch.equal(with_val.test.x, feat.test.x)
    with pytest.raises(ValueError, match=r"^validation_curve needs the validation pool: prepare_features\(cfg, with_val=True\)"):
        X.validation_curve(TINY_RUNS[0], feat, capped_cfg)
    with pytest.raises(ValueError, match=r"^n_scored must be an integer in \[100, inf\]; got 10"):
        dataclasses.replace(TINY_CONFIDENT, n_scored=10)


def test_fill_embedding_cache_counts_distinct_sentences_and_encodes_each_once(made_up, tmp_path):
    folder, enc = made_up
    first = X.fill_embedding_cache(TINY_PRESET, path=folder, progress=False)
    cache_files = sorted((tmp_path / "cache").rglob("shard-*.pt"))
    from mambaicl.data.encoders import EmbeddingCache

    stored = len(EmbeddingCache("words@1", lambda: enc, tmp_path / "cache"))
    assert first["sentences"] == first["encoded"] == stored == enc.calls > 0 and cache_files
    second = X.fill_embedding_cache(TINY_PRESET, path=folder, progress=False)
    assert second["sentences"] == first["sentences"] and second["encoded"] == 0 and enc.calls == stored


def test_names_and_vocabulary_are_validated_by_the_config_kit():
    from mambaicl.config import ConfigError

    for bad in (3, None, "  "):
        with pytest.raises(ConfigError, match=r"^name must be (a str|a non-empty string); got"):
            X.Run(bad, "linear")
    with pytest.raises(ConfigError, match=r"^encoder must be a str; got 3"):
        X.SST2Data(encoder=3)
    with pytest.raises(ConfigError, match=r"^encoder must name a sentence encoder \(a non-empty string\); got ''"):
        X.SST2Data(encoder="")
    with pytest.raises(ConfigError, match="^runs must be a non-empty tuple"):
        X.Table("t", ())
    with pytest.raises(ConfigError, match=r"^runs\[0\] must be a Run"):
        X.Table("t", ("mamba",))
    # the rule and placements are stored as the paper's letters; the long names are accepted aliases
    t = dataclasses.replace(X.MAIN_TABLE, rule="flipped", placements=("far", "random position", "close"))
    assert t.rule == "A" and t.placements == ("FQ", "R", "CQ") and X.MAIN_TABLE.rule == "B"
    with pytest.raises(ConfigError, match="^rule must be one of"):
        dataclasses.replace(X.MAIN_TABLE, rule="D")
    with pytest.raises(ConfigError, match="^placements must be distinct"):
        dataclasses.replace(X.MAIN_TABLE, placements=("R", "random position"))
