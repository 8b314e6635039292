"""SST-2 loading, poisoning and prompts (§4.2): every bad input gives a clear error.

All files here are small TSVs the tests write themselves; the real data is only read by the
chapter (and by ``test_real_sst2_shape`` when ``MAMBAICL_SST2_DIR`` is set).
"""
import os
from pathlib import Path

import pytest
import numpy as np
import torch

from mambaicl.config import ConfigError
from mambaicl.data import sst2
from mambaicl.data.poisoning import (PHRASE, EmbeddedPool, insert_phrase, poison_sentences,
                                     sst2_prompts)
from mambaicl.data.sst2 import ENV_VAR, load_sst2, read_glue_tsv
from mambaicl.models.gated_attention import check_prompt


def write_glue(folder: Path, train: str = "a good film\t1\nawful\t0\n", dev: str = "fine\t1\nbad\t0\n",
               header: str = "sentence\tlabel\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.tsv").write_text(header + train, encoding="utf-8")
    (folder / "dev.tsv").write_text(header + dev, encoding="utf-8")
    return folder


def test_load_from_path_and_env(tmp_path, monkeypatch):
    folder = write_glue(tmp_path / "glue")
    data = load_sst2(folder)
    assert data == {"train": [("a good film", 1), ("awful", 0)], "validation": [("fine", 1), ("bad", 0)]}
    monkeypatch.setenv(ENV_VAR, str(folder))
    assert load_sst2() == data


def test_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="SST-2 directory not found.*MAMBAICL_SST2_DIR"):
        load_sst2(tmp_path / "nowhere")


def test_missing_file(tmp_path):
    folder = write_glue(tmp_path / "glue")
    (folder / "dev.tsv").unlink()
    with pytest.raises(FileNotFoundError, match=r"^SST-2 file not found: .*dev\.tsv\. Provide SST-2"):
        load_sst2(folder)


MALFORMED = [  # (write_glue keyword arguments, what the error must say)
    *[(dict(header=h), r"train.tsv, line 1: expected the header 'sentence<TAB>label'")
      for h in ("", "text\tlabel\n", "a good film\t1\n")],
    *[(dict(train=f"a good film\t1\nawful\t{label}\n"), r"train.tsv, line 3: label must be 0 or 1")
      for label in ("2", "-1", "pos", "")],
    *[(dict(dev=f"fine\t1\n{row}\n"), r"dev.tsv, line 3") for row in ("no tab here", "too\tmany\t1", "\t1")],
]


@pytest.mark.parametrize("files, message", MALFORMED)
def test_malformed_file_names_file_and_line(tmp_path, files, message):
    with pytest.raises(ValueError, match=message):
        load_sst2(write_glue(tmp_path / "glue", **files))


def test_crlf_and_trailing_space(tmp_path):
    f = tmp_path / "x.tsv"
    f.write_bytes(b"sentence\tlabel\r\nit 's fine . \t1\r\n")
    assert read_glue_tsv(f) == [("it 's fine .", 1)]


def test_no_data_no_network(monkeypatch):
    """Neither a path nor the environment variable, and the hub fails: say how to provide the data."""
    monkeypatch.delenv(ENV_VAR, raising=False)

    def offline():
        raise ConnectionError("offline")

    monkeypatch.setattr(sst2, "_load_hub", offline)
    with pytest.raises(FileNotFoundError, match=r"(?s)hub failed.*train.tsv and dev.tsv.*MAMBAICL_SST2_DIR"):
        load_sst2()


@pytest.mark.skipif(not os.environ.get(ENV_VAR), reason="real SST-2 only when MAMBAICL_SST2_DIR is set (CI)")
def test_real_sst2_shape():
    data = load_sst2()
    assert len(data["train"]) == 67349 and len(data["validation"]) == 872
    assert sum(y for _, y in data["validation"]) == 444


def test_insert_phrase_every_position():
    assert insert_phrase("a b", 0) == f"{PHRASE} a b"
    assert insert_phrase("a b", 1) == f"a {PHRASE} b"
    assert insert_phrase("a b", 2) == f"a b {PHRASE}"
    with pytest.raises(ConfigError, match="^position must be an integer in"):
        insert_phrase("a b", 3)


def test_poison_sentences_reproducible_and_uniform():
    sents = ["w1 w2 w3"] * 4000
    a = poison_sentences(sents, torch.Generator().manual_seed(1))
    b = poison_sentences(sents, torch.Generator().manual_seed(1))
    assert a == b and all(s.replace(PHRASE + " ", "").replace(" " + PHRASE, "") == "w1 w2 w3" for s in a)
    counts = torch.bincount(torch.tensor([s.split().index("James") for s in a]), minlength=4).double()
    assert torch.allclose(counts / 4000, torch.full((4,), 0.25, dtype=torch.float64), atol=0.03)


def toy_pool(n=40, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    s = torch.where(torch.arange(n) % 2 == 0, 1.0, -1.0)
    x = torch.randn(n, d, generator=g)
    return EmbeddedPool(x=x, x_bond=x + 100.0, s=s)  # poisoned twins are easy to spot: +100


def test_sources_on_pools_of_the_same_numbers_are_equal():
    """A source is keyed by its pool's numbers, not by which object holds them: equal pools share their draws."""
    from mambaicl.data.poisoning import SST2Source

    a, b, other = toy_pool(), toy_pool(), toy_pool(seed=1)
    assert a is not b and a.key == b.key != other.key
    assert SST2Source(a, l=8, p_a=0.5) == SST2Source(b, l=8, p_a=0.5)
    assert hash(SST2Source(a, l=8, p_a=0.5)) == hash(SST2Source(b, l=8, p_a=0.5))
    assert SST2Source(a, l=8, p_a=0.5) != SST2Source(other, l=8, p_a=0.5)
    assert SST2Source(a, l=8, p_a=0.5) != SST2Source(a, l=8, p_a=0.25)


@pytest.mark.parametrize("placement", ["FQ", "CQ", "R"])
@pytest.mark.parametrize("rule", ["targeted", "flipped", "random label"])
def test_prompts_layout_labels_and_outliers(placement, rule):
    pool = toy_pool()
    pr = sst2_prompts(pool, 500, l=8, alpha=0.6, placement=placement, rule=rule,
                      stream=np.random.default_rng(0))
    check_prompt(pr.P, pool.d)
    assert pr.P.shape == (500, 9, 6)
    x, y = pr.P[..., :-1], pr.P[:, :8, -1]
    assert torch.equal(x[:, :8].mean(-1) > 50, pr.outlier)  # outliers are exactly the poisoned twins
    assert not (x[:, 8] > 50).any()  # the query is never poisoned
    clean = pool.s[pr.idx] * pr.f[:, None]  # (batch, l+1)
    assert torch.equal(pr.z, clean[:, 8])
    assert torch.equal(y[~pr.outlier], clean[:, :8][~pr.outlier])
    bad = y[pr.outlier]
    if rule == "targeted":
        assert (bad == 1).all()
    elif rule == "flipped":
        assert torch.equal(bad, -clean[:, :8][pr.outlier])
    else:
        assert 0.4 < float((bad == 1).double().mean()) < 0.6
    count = pr.outlier.sum(1)
    if placement == "FQ":
        assert torch.equal(pr.outlier, torch.arange(8)[None] < count[:, None])
    if placement == "CQ":
        assert torch.equal(pr.outlier, torch.arange(8)[None] >= 8 - count[:, None])
    assert abs(float(pr.outlier.double().mean()) - 0.6) < 0.03


def test_prompts_balanced_tasks_and_sentiments():
    pr = sst2_prompts(toy_pool(), 4000, stream=np.random.default_rng(3))
    assert abs(float(pr.f.mean())) < 0.05 and abs(float(pr.z.mean())) < 0.05
    assert not pr.outlier.any()  # alpha = 0 by default


def test_prompt_arguments_validated():
    g = np.random.default_rng(0)
    with pytest.raises(ConfigError, match="^placement must be one of"):
        sst2_prompts(toy_pool(), 2, placement="middle", stream=g)
    with pytest.raises(ConfigError, match="^rule must be one of"):
        sst2_prompts(toy_pool(), 2, rule="targeted label", stream=g)
    with pytest.raises(ConfigError, match=r"^alpha must be a real number in \[0.0, 1.0\]; got 1.5"):
        sst2_prompts(toy_pool(), 2, alpha=1.5, stream=g)
    with pytest.raises(ConfigError, match=r"^the pool has no sentence of sentiment -1; prompts need both classes"):
        EmbeddedPool(x=torch.zeros(3, 2), x_bond=torch.zeros(3, 2), s=torch.ones(3))


@pytest.mark.parametrize("placement", ["FQ", "CQ", "R"])
@pytest.mark.parametrize("alpha", [0.4, 0.75, 0.8])
def test_fixed_count_puts_exactly_round_alpha_l_outliers_in_every_prompt(placement, alpha):
    pr = sst2_prompts(toy_pool(), 2000, l=8, alpha=alpha, placement=placement, count="fixed",
                      stream=np.random.default_rng(4))
    k = {0.4: 3, 0.75: 6, 0.8: 6}[alpha]  # round(alpha * 8), counted by hand
    assert (pr.outlier.sum(1) == k).all()
    if placement == "R":  # every position equally likely to hold an outlier
        assert torch.allclose(pr.outlier.double().mean(0), torch.full((8,), k / 8, dtype=torch.float64), atol=0.04)
    binom = sst2_prompts(toy_pool(), 20000, l=8, alpha=alpha, placement=placement,
                         stream=np.random.default_rng(4))
    no_clean = float((binom.outlier.sum(1) == 8).double().mean())
    assert abs(no_clean - alpha ** 8) < 0.01  # Eq. (5): no clean example with probability alpha^l
    with pytest.raises(ConfigError, match="^count must be one of"):
        sst2_prompts(toy_pool(), 2, count="exact", stream=np.random.default_rng())


@pytest.mark.parametrize("placement", ["FQ", "CQ", "R"])
def test_balanced_count_has_mean_alpha_l_and_always_a_clean_example(placement):
    pr = sst2_prompts(toy_pool(), 20000, l=8, alpha=0.8, placement=placement, count="balanced",
                      stream=np.random.default_rng(5))
    k = pr.outlier.sum(1)
    assert set(k.tolist()) == {6, 7}  # 0.8 * 8 = 6.4: six or seven outliers, never eight
    assert abs(float((k == 7).double().mean()) - 0.4) < 0.015 and abs(float(pr.outlier.double().mean()) - 0.8) < 0.003
    if placement == "FQ":
        assert torch.equal(pr.outlier, torch.arange(8)[None] < k[:, None])
    if placement == "CQ":
        assert torch.equal(pr.outlier, torch.arange(8)[None] >= 8 - k[:, None])
    same = sst2_prompts(toy_pool(), 200, alpha=0.75, placement=placement, count="balanced",
                        stream=np.random.default_rng(1))
    assert (same.outlier.sum(1) == 6).all()  # alpha l an integer: exactly that many


def test_phrase_helpers_find_nested_rows():
    assert sst2.sub_phrases("a b c") == {("a",), ("b",), ("c",), ("a", "b"), ("b", "c")}
    assert sst2.sub_phrases("a b", proper=False) == {("a",), ("b",), ("a", "b")}
    rows = ["it 's a charming film .", "a charming film", "charming", "dull", "a dull , lifeless film", "film ."]
    assert sst2.maximal_phrases(rows) == [0, 4]  # "dull" sits inside row 4, "film ." inside row 0
    assert sst2.inside_any(rows, ["a charming film"]) == [False, True, True, False, False, False]
    assert sst2.inside_any(["charming film", "film charming"], rows) == [True, False]  # word order matters


def test_rules_and_placements_are_the_papers_letters_with_the_long_names_as_labels():
    from mambaicl.data.poisoning import LABELS, PLACEMENTS, RULES

    assert RULES == ("A", "B", "C") and PLACEMENTS == ("R", "FQ", "CQ")
    assert LABELS["rule"]["B"] == "targeted" and LABELS["placement"]["CQ"] == "close"
    # a display label is accepted as input and means its letter: the very same prompts
    for letters, labels in ((dict(rule="A", placement="CQ"), dict(rule="flipped", placement="close")),
                            (dict(rule="B", placement="FQ"), dict(rule="targeted", placement="far")),
                            (dict(rule="C", placement="R"), dict(rule="random label", placement="random position"))):
        a = sst2_prompts(toy_pool(), 50, alpha=0.5, stream=np.random.default_rng(5), **letters)
        b = sst2_prompts(toy_pool(), 50, alpha=0.5, stream=np.random.default_rng(5), **labels)
        assert torch.equal(a.P, b.P) and torch.equal(a.outlier, b.outlier)
