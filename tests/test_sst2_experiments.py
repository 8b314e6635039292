"""Chapter 6 machinery: PCA, linear probe, presets, curriculum sampler, oracle, a tiny table end to end."""
import dataclasses

import pytest
import torch

from mambaicl.experiments import sst2 as X
from mambaicl.data.features import fit_pca, linear_probe, probe_accuracy
from mambaicl.data.poisoning import EmbeddedPool


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
    with pytest.raises(ValueError, match="k"):
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
    assert X.MAIN_TABLE.alphas == (0.75,) and X.DATA.l == 8 and X.DATA.d == 72
    assert [r.n_heads for r in X.TABLE_1.runs] == [1, 2, 3, 4] and all(r.p_a == 0.4 for r in X.TABLE_1.runs)
    assert {r.name: r.n_heads for r in X.TABLE_2.runs} == {"mamba": 1, "linear": 1, "softmax": 1}
    assert X.TABLE_2.alphas[0] == 0.5 and set(X.TABLE_2.alphas) == {0.4, 0.5, 0.6, 0.7, 0.8}
    assert X.CURRICULUM.runs[0].curriculum and X.PAPER["table5"]["all"] == 80.05


@pytest.mark.parametrize("bad", [dict(kind="mamba1"), dict(n_heads=0), dict(p_a=1.0), dict(lr=0.0), dict(steps=1.5),
                                 dict(lr="big"), dict(optimizer="rmsprop"), dict(curriculum="yes")])
def test_run_validation(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        X.Run("x", **{"kind": "linear", **bad})


def test_data_and_table_validation():
    with pytest.raises(ValueError, match="n_train"):
        X.SST2Data(n_train=3)
    with pytest.raises(ValueError, match="placements"):
        X.Table("t", (), alphas=(0.5,), placements=("far",))
    with pytest.raises(ValueError, match="alphas"):
        X.Table("t", (), alphas=(1.5,))
    with pytest.raises(ValueError, match="n_prompts"):
        X.Table("t", (), alphas=(0.5,), n_prompts=0)
    with pytest.raises(ValueError, match="tables"):
        X.SST2Preset(name="x", tables=())
    with pytest.raises(ValueError, match="unique"):
        X.Table("t", (X.Run("a", "linear"), X.Run("a", "mamba")), alphas=(0.5,))


def toy_features(n=60, d=6, seed=0):
    """Sentiment on coordinate 0, the phrase adds +4 on coordinate 1."""
    g = torch.Generator().manual_seed(seed)
    s = torch.where(torch.arange(n) % 2 == 0, 1.0, -1.0)
    x = torch.randn(n, d, generator=g) * 0.3
    x[:, 0] += s
    bond = x.clone()
    bond[:, 1] += 4.0
    pool = EmbeddedPool(x=x, x_bond=bond, s=s)
    return X.SST2Features(train=pool, validation=pool, emb_train=x, emb_validation=x, pca=fit_pca(x, 2), examples={})


def test_curriculum_sampler_switches_to_cq_at_half():
    feat = toy_features()
    run = X.Run("c", "mamba", steps=10, p_a=0.5, curriculum=True)
    sampler = X._Sampler(feat.train, run, l=8)
    g = torch.Generator().manual_seed(0)
    for call in range(11):
        P, z = sampler(200, g)
        outl = P[:, :8, 1] > 2  # the phrase's coordinate
        count = outl.sum(1, keepdim=True)
        is_cq = torch.equal(outl, torch.arange(8)[None] >= 8 - count)
        assert is_cq == (call >= 5)


def test_oracle_and_tiny_table_end_to_end():
    feat = toy_features()
    cfg = dataclasses.replace(X.DATA, d=6, n_train=60)
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
