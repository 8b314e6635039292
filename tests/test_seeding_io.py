"""Seed streams derived from (seed, stage) without overlaps; atomic, durable writes with normal permissions."""
import os

import numpy as np
import pytest
import torch

from mambaicl.io import atomic_write_bytes, json_text, prepare_out_dir, write_json
from mambaicl.seeding import numpy_generator, stream_seed, torch_generator, torch_generators

STAGES = ("patterns", "init", "train", "test", "validation", "test/A/0.5")


def test_streams_are_distinct_across_seeds_and_stages():
    keys = {(s, st): stream_seed(s, st) for s in range(200) for st in STAGES}
    assert len(set(keys.values())) == len(keys)  # no two (seed, stage) pairs share a stream
    assert all(0 <= k < 2 ** 63 for k in keys.values())


def test_seed_s_init_is_not_seed_s_plus_1_patterns():
    """The overlap of the old `seed + offset` scheme: seed s's init stream was seed s+1's pattern stream."""
    for s in range(50):
        a = torch.rand(64, generator=torch_generator(s, "init"))
        b = torch.rand(64, generator=torch_generator(s + 1, "patterns"))
        assert not torch.equal(a, b)
        assert abs(float(torch.corrcoef(torch.stack([a, b]))[0, 1])) < 0.5


def test_streams_are_reproducible_and_numpy_agrees_on_the_key():
    assert torch.equal(torch.rand(5, generator=torch_generator(3, "train")),
                       torch.rand(5, generator=torch_generator(3, "train")))
    assert np.array_equal(numpy_generator(3, "train").random(4), numpy_generator(3, "train").random(4))
    gens = torch_generators([0, 1], "train")
    assert torch.equal(torch.rand(3, generator=gens[1]), torch.rand(3, generator=torch_generator(1, "train")))


@pytest.mark.parametrize("seed, stage, match", [(-1, "x", "seed"), (1.5, "x", "seed"), (True, "x", "seed"),
                                                (0, "", "stage"), (0, 3, "stage")])
def test_bad_seed_or_stage(seed, stage, match):
    with pytest.raises(ValueError, match=match):
        stream_seed(seed, stage)
    with pytest.raises(ValueError, match="distinct"):
        torch_generators([1, 1], "x")


def test_atomic_write_has_mode_0644_and_leaves_no_temporary_file(tmp_path):
    old = os.umask(0o077)  # even under a strict umask the results are world-readable, like a normal file
    try:
        path = atomic_write_bytes(tmp_path / "r.json", b"{}")
    finally:
        os.umask(old)
    assert path.read_bytes() == b"{}" and oct(path.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_atomic_write_failure_keeps_the_old_file(tmp_path, monkeypatch):
    from mambaicl import io as mio

    target = tmp_path / "r.json"
    write_json(target, {"a": 1})
    monkeypatch.setattr(mio.os, "replace", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        write_json(target, {"a": 2})
    assert target.read_text() == json_text({"a": 1}) and len(list(tmp_path.iterdir())) == 1


def test_write_into_a_missing_folder_and_bad_out_dirs(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        atomic_write_bytes(tmp_path / "no" / "r.json", b"")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        prepare_out_dir(tmp_path / "file")
    with pytest.raises(ValueError, match="cannot be created"):
        prepare_out_dir("/proc/nope/x")
    assert prepare_out_dir(tmp_path / "a" / "b").is_dir()


def test_json_text_is_sorted_and_stable():
    assert json_text({"b": 1, "a": [1.5, 2]}) == '{\n "a": [\n  1.5,\n  2\n ],\n "b": 1\n}\n'


def test_progress_stream_is_the_terminal_only_during_a_build(monkeypatch, capfd):
    """Outside the book's build a chapter shows its usual bar (None); during it, a text stream on the
    process's standard error (in a kernel: ipykernel's copy of the terminal's stderr, not the page)."""
    from mambaicl.notebook import BUILD_ENV, progress_stream

    monkeypatch.delenv(BUILD_ENV, raising=False)
    assert progress_stream() is None
    monkeypatch.setenv(BUILD_ENV, "1")
    stream = progress_stream()
    assert stream is not None
    stream.write("embedding 10/10\n")
    stream.close()
    assert "embedding 10/10" in capfd.readouterr().err
