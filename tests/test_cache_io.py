"""The embedding cache's failure paths: an unreadable shard is set aside (renamed *.bad), never deleted; a
MemoryError touches nothing; the folder is scanned once into an index; old temporary files are cleaned."""
import os
import time
import warnings

import pytest
import torch

from mambaicl.data.encoders import EmbeddingCache


class FakeEncoder:
    def __init__(self):
        self.calls = []

    def encode(self, texts, batch_size=64, progress=False):
        self.calls.append(list(texts))
        return torch.tensor([[len(t), t.count(" "), 1.0] for t in texts])


def make_cache(tmp_path):
    fake = FakeEncoder()
    return EmbeddingCache("fake@1", lambda: fake, tmp_path / "cache"), fake


def test_an_unreadable_shard_is_set_aside_not_deleted(tmp_path):
    cache, _ = make_cache(tmp_path)
    want = cache.embed(["one", "two words"])
    (shard,) = cache.shards()
    raw = shard.read_bytes()
    shard.write_bytes(raw[: len(raw) // 2])  # e.g. written by an incompatible torch, or truncated
    again, fake = make_cache(tmp_path)
    with pytest.warns(UserWarning, match=r"is corrupt or unreadable \(.*\); set aside as shard-.*\.pt\.bad"):
        got = again.embed(["one", "two words"])
    assert torch.equal(got, want) and fake.calls == [["one", "two words"]]
    bad = shard.with_name(shard.name + ".bad")
    assert bad.read_bytes() == raw[: len(raw) // 2]  # kept byte for byte, for whoever owns it
    assert [p.name for p in again.shards()] == [shard.name]  # the re-encoded shard, under its digest name
    shard.write_bytes(b"\0")  # a second bad copy of the same name does not overwrite the first
    with pytest.warns(UserWarning, match=r"\.pt\.bad\.1"):
        make_cache(tmp_path)[0].embed(["one"])
    assert bad.exists() and shard.with_name(shard.name + ".bad.1").exists()


def test_a_memory_error_while_loading_leaves_the_shard(tmp_path, monkeypatch):
    cache, _ = make_cache(tmp_path)
    cache.embed(["kept"])
    (shard,) = cache.shards()
    again, _ = make_cache(tmp_path)

    def oom(*a, **k):
        raise MemoryError("torch.load ran out of memory")

    monkeypatch.setattr(torch, "load", oom)
    with pytest.raises(MemoryError, match="^torch.load ran out of memory$"):
        again.embed(["kept"])
    assert cache.shards() == [shard] and not list(shard.parent.glob("*.bad"))


def test_the_folder_is_scanned_once_and_again_only_for_unknown_texts(tmp_path, monkeypatch):
    cache, _ = make_cache(tmp_path)
    cache.embed(["a", "b c"])
    reader, _ = make_cache(tmp_path)
    scans = []
    real = EmbeddingCache.shards
    monkeypatch.setattr(EmbeddingCache, "shards", lambda self: scans.append(self is reader) or real(self))
    for _ in range(5):
        reader.embed(["a", "b c"])
    assert scans == [True] and len(reader) == 2
    cache.embed(["new one"])  # another process adds a shard
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert reader.embed(["new one"]).tolist() == [[7.0, 1.0, 1.0]]
    assert scans.count(True) == 2 and reader.encoded == 0  # found on disk by one more scan, not encoded


def test_temporary_files_older_than_a_day_are_cleaned(tmp_path):
    cache, _ = make_cache(tmp_path)
    cache.embed(["x"])
    old, fresh = cache.dir / ".shard-abc.pt.1.tmp", cache.dir / ".shard-def.pt.2.tmp"
    for f in (old, fresh):
        f.write_bytes(b"partial")
    two_days_ago = time.time() - 2 * 86400
    os.utime(old, (two_days_ago, two_days_ago))
    make_cache(tmp_path)[0].embed(["x"])
    assert not old.exists() and fresh.exists()  # a fresh one may be another process's write in progress
