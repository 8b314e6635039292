"""Seed streams derived from (seed, stage) without overlaps or birthday collisions; atomic, durable writes with
normal permissions; the outputs of a run land together."""
import os

import numpy as np
import pytest
import torch

from mambaicl.config import ConfigError
from mambaicl.io import atomic_write_bytes, json_text, prepare_out_dir, write_json, write_outputs
from mambaicl.seeding import numpy_stream, stream_seed, substage, torch_generator, torch_generators

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
    assert np.array_equal(numpy_stream(3, "train").random(4), numpy_stream(3, "train").random(4))
    gens = torch_generators([0, 1], "train")
    assert torch.equal(torch.rand(3, generator=gens[1]), torch.rand(3, generator=torch_generator(1, "train")))


def _first_draw(words: np.ndarray) -> np.ndarray:
    """The first 62-bit draw of torch's ``randint(0, 2**62)`` from twister words ``(N, 5)`` = state[0, 1, 2, 397, 398]:
    the first two MT19937 outputs (a twist of words 0-2 with 397-398, then tempering), high word first."""
    w = words.astype(np.uint64)

    def out(i):
        y = (w[:, i] & 0x80000000) | (w[:, i + 1] & 0x7FFFFFFF)
        x = w[:, 3 + i] ^ (y >> 1) ^ np.where(y & 1, 0x9908B0DF, 0).astype(np.uint64)
        x ^= x >> 11
        x ^= (x << 7) & 0x9D2C5680
        x ^= (x << 15) & 0xEFC60000
        return (x ^ (x >> 18)) & 0xFFFFFFFF

    return ((out(0) << 32) | out(1)) & ((1 << 62) - 1)


def _check_distinct_first_draws(n_seeds: int, n_stages: int = 100):
    """No two of the ``n_seeds x n_stages`` (seed, stage) streams share their first 62-bit draw.

    The draws are computed from each stream's twister words (vectorised), and checked against the
    generator's own draw on every 100th stream."""
    from mambaicl.seeding import _mt_words, seed_sequence

    pairs = [(s, f"stage {i}") for s in range(n_seeds) for i in range(n_stages)]
    words = np.stack([_mt_words(seed_sequence(s, st))[1][[0, 1, 2, 397, 398]] for s, st in pairs])
    first = _first_draw(words)
    assert len(pairs) == n_seeds * n_stages and np.unique(first).size == len(pairs)
    for k in range(0, len(pairs), 100):
        assert int(torch.randint(0, 2 ** 62, (1,), generator=torch_generator(*pairs[k]))) == int(first[k]), pairs[k]


def test_20000_streams_have_distinct_first_draws():
    """Full-state seeding, the unit run's size: no two of 20,000 (seed, stage) streams share their first
    62-bit draw (200 seeds x 100 stages; the slow test below checks 200,000)."""
    _check_distinct_first_draws(200)


@pytest.mark.slow
def test_200000_streams_have_distinct_first_draws():
    """Full-state seeding: no two of 200,000 (seed, stage) streams share their first 62-bit draw.

    Torch's ``manual_seed`` keeps 32 bits, so 200,000 streams seeded that way would share a first draw
    about 4.7 times (birthday bound 200,000^2 / 2^33); 62-bit draws of independent streams collide with
    probability ~4e-9. Slow (~7 s): the unit run checks 20,000 streams (test above)."""
    _check_distinct_first_draws(2000)


def test_the_32_bit_seed_collision_is_gone():
    a, b = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7 + 2 ** 32)
    assert torch.equal(torch.rand(4, generator=a), torch.rand(4, generator=b))  # the flaw of manual_seed
    g = torch_generator(0, "x")
    assert not torch.equal(torch.rand(4, generator=g), torch.rand(4, generator=torch_generator(2 ** 32, "x")))


def test_every_distribution_draws_from_the_loaded_state():
    g = torch_generator(5, "train")
    x = torch.cat([torch.rand(50_000, generator=g), torch.randn(50_000, generator=g).abs().clamp(max=1)])
    assert 0.3 < float(x[:50_000].mean()) < 0.7 and bool((x >= 0).all())
    assert torch.randint(0, 10, (2000,), generator=g).unique().numel() == 10
    assert torch.randperm(7, generator=g).sort().values.tolist() == list(range(7))


def test_substage_names_one_stream_per_item():
    assert substage("test", alpha=0.3) == "test/alpha=0.3" and substage("t", group="a b") == "t/group=a b"
    # positional parts: the names the package typed by hand before, byte for byte (every stream depends on them)
    rule, a, l, p_a, l_ts = "A", 0.3, 20, 0.6, 40
    assert substage("test", rule, float(a)) == f"test/{rule}/{float(a)}" == "test/A/0.3"
    assert substage("test", "linreg", int(l), float(a)) == f"test/linreg/{int(l)}/{float(a)}"
    assert substage("breakdown", p_a, l_ts) == f"breakdown/{p_a}/{l_ts}" and substage("validation", "kappa") == "validation/kappa"
    assert substage("sst2", "validation", 0.75, "CQ") == "sst2/validation/0.75/CQ"
    assert not torch.equal(torch.rand(3, generator=torch_generator(0, substage("test", alpha=0.3))),
                           torch.rand(3, generator=torch_generator(0, substage("test", alpha=0.5))))


@pytest.mark.parametrize("seed, stage, match", [(-1, "x", "^seed must"), (1.5, "x", "^seed must"),
                                                (True, "x", "^seed must"), (0, "", "^stage must"),
                                                (0, 3, "^stage must")])
def test_bad_seed_or_stage(seed, stage, match):
    with pytest.raises(ConfigError, match=match):
        stream_seed(seed, stage)
    with pytest.raises(ConfigError, match="^seeds must be distinct"):
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
    with pytest.raises(FileNotFoundError, match=r"^cannot write .*r\.json: folder .*no does not exist$"):
        atomic_write_bytes(tmp_path / "no" / "r.json", b"")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="^--out .* exists and is not a directory$"):
        prepare_out_dir(tmp_path / "file")
    with pytest.raises(FileNotFoundError, match="^--out /proc/nope/x cannot be created"):
        prepare_out_dir("/proc/nope/x")
    with pytest.raises(ConfigError, match="^--out .* holds other files \\(file\\)"):
        prepare_out_dir(tmp_path)  # the whole folder is replaced: refuse one holding other files
    assert prepare_out_dir(tmp_path / "a" / "b").is_dir()


def test_outputs_land_together_and_replace_the_old_pair(tmp_path):
    out = tmp_path / "run"
    write_outputs(out, {"results.json": b"old", "artifacts.pt": b"old-art"})
    write_outputs(out, {"results.json": b"new"})  # no artifacts this time: the old ones must not stay
    assert sorted(p.name for p in out.iterdir()) == ["results.json"] and (out / "results.json").read_bytes() == b"new"
    assert oct(out.stat().st_mode & 0o777) == "0o755" and oct((out / "results.json").stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # no temporary folder left
    with pytest.raises(ConfigError, match="^files must be among"):
        write_outputs(out, {"notes.txt": b""})


def test_a_crash_while_writing_the_pair_keeps_the_old_pair(tmp_path, monkeypatch):
    from mambaicl import io as mio

    out = tmp_path / "run"
    write_outputs(out, {"results.json": b"old", "artifacts.pt": b"old-art"})
    real = mio.os.chmod

    def crash_on_second_file(path, mode):
        if str(path).endswith("artifacts.pt"):
            raise OSError("disk full")
        return real(path, mode)

    monkeypatch.setattr(mio.os, "chmod", crash_on_second_file)
    with pytest.raises(OSError, match="^disk full$"):
        write_outputs(out, {"results.json": b"new", "artifacts.pt": b"new-art"})
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {"results.json": b"old", "artifacts.pt": b"old-art"}
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_the_two_rename_fallback_also_writes_the_pair(tmp_path, monkeypatch):
    from mambaicl import io as mio

    monkeypatch.setattr(mio, "_exchange", lambda a, b: False)  # a file system without renameat2
    out = tmp_path / "run"
    write_outputs(out, {"results.json": b"1", "artifacts.pt": b"a1"})
    write_outputs(out, {"results.json": b"2", "artifacts.pt": b"a2"})
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {"results.json": b"2", "artifacts.pt": b"a2"}
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


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


def test_the_stage_table_names_each_stream_once():
    """One table of stage names: every purpose has its own stream (the mechanism's validation keeps its "val")."""
    from mambaicl.seeding import STAGES as table

    assert len(set(table.values())) == len(table)
    assert table["validation"] == "validation" and table["mechanism validation"] == "val"
