"""The result store (mambaicl.experiments.store): a result read back equals the one computed; the key changes
with the arguments and the package's source; an unreadable file is set aside and the result computed again;
the store can be turned off."""
import hashlib
import warnings
from pathlib import Path

import pytest
import torch

import mambaicl
from mambaicl.config import ConfigError
from mambaicl.experiments import mechanism, store
from mambaicl.experiments.store import stored

CALLS = []


def counted(preset, *, seeds, scale=1.0, progress=False):
    """A stand-in experiment: a model and a number that depend on the arguments; counts its calls."""
    CALLS.append((preset, tuple(seeds), scale))
    g = torch.Generator().manual_seed(sum(seeds) + len(preset))
    return {"model": torch.nn.Linear(3, 2), "value": float(torch.rand(1, generator=g)) * scale}


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    CALLS.clear()
    monkeypatch.delenv(store.STORE_ENV_VAR, raising=False)


def test_a_second_call_reads_the_result_back_instead_of_computing(tmp_path):
    assert not store.is_stored(counted, "p", seeds=(0, 1), cache_dir=tmp_path)
    a = stored(counted, "p", seeds=(0, 1), cache_dir=tmp_path)
    assert store.is_stored(counted, "p", seeds=(0, 1), cache_dir=tmp_path)
    b = stored(counted, "p", seeds=(0, 1), cache_dir=tmp_path, progress=True)  # progress is not in the key
    assert len(CALLS) == 1 and b["value"] == a["value"]
    assert torch.equal(b["model"].weight, a["model"].weight)
    assert len(list((tmp_path / "results").glob("*.pt"))) == 1


def test_other_arguments_compute_anew(tmp_path):
    stored(counted, "p", seeds=(0, 1), cache_dir=tmp_path)
    stored(counted, "p", seeds=(0, 2), cache_dir=tmp_path)
    stored(counted, "p", seeds=(0, 1), scale=2.0, cache_dir=tmp_path)
    stored(counted, "q", seeds=(0, 1), cache_dir=tmp_path)
    assert len(CALLS) == 4


def test_the_key_follows_the_package_source(monkeypatch, tmp_path):
    """The digest is SHA-256 over every .py file of the package (computed here independently); another digest
    (a changed source) gives another key, so an old result is never read by new code."""
    root = Path(mambaicl.__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    assert store.source_digest() == h.hexdigest()
    before = store.store_key(counted, ("p",), {"seeds": (0,)})
    monkeypatch.setattr(store, "source_digest", lambda: "0" * 64)
    assert store.store_key(counted, ("p",), {"seeds": (0,)}) != before
    stored(counted, "p", seeds=(0,), cache_dir=tmp_path)
    assert len(CALLS) == 1


def test_an_unreadable_result_is_set_aside_and_computed_again(tmp_path):
    stored(counted, "p", seeds=(3,), cache_dir=tmp_path)
    (file,) = (tmp_path / "results").glob("*.pt")
    file.write_bytes(b"not a torch file")
    with pytest.warns(UserWarning, match="unreadable"):
        again = stored(counted, "p", seeds=(3,), cache_dir=tmp_path)
    assert len(CALLS) == 2 and isinstance(again["value"], float)
    assert (tmp_path / "results" / (file.name + ".bad")).read_bytes() == b"not a torch file"
    assert file.is_file()


def test_the_store_can_be_turned_off_and_rejects_other_values(monkeypatch, tmp_path):
    monkeypatch.setenv(store.STORE_ENV_VAR, "off")
    stored(counted, "p", seeds=(0,), cache_dir=tmp_path)
    stored(counted, "p", seeds=(0,), cache_dir=tmp_path)
    assert len(CALLS) == 2 and not (tmp_path / "results").exists()
    monkeypatch.setenv(store.STORE_ENV_VAR, "sometimes")
    with pytest.raises(ConfigError, match=f"^{store.STORE_ENV_VAR} must be one of"):
        stored(counted, "p", seeds=(0,), cache_dir=tmp_path)
    with pytest.raises(ConfigError, match="^fn must be callable"):
        stored("mechanism.run", cache_dir=tmp_path)


def test_a_mechanism_result_read_back_is_the_computed_one(tmp_path):
    """A real experiment result (a tiny Mamba-1 stack, models included) survives the store unchanged: the same
    JSON and the same parameters as a computation that does not use the store."""
    import dataclasses

    tiny = dataclasses.replace(mechanism.MAMBA1, name="tiny_m1", n_test=16, n_group=8, n_sums=4, n_norms=4,
                               n_val=16, lrs=(), searched_lr=0.0,
                               train=dataclasses.replace(mechanism.MAMBA1.train, steps=4, batch_size=4),
                               record_steps=(4,), val_every=2, patience=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = stored(mechanism.run, tiny, seeds=(0,), progress=False, cache_dir=tmp_path)
        back = stored(mechanism.run, tiny, seeds=(0,), progress=False, cache_dir=tmp_path)
        fresh = mechanism.run(tiny, seeds=(0,), progress=False)
    assert back.to_json() == first.to_json() == fresh.to_json()
    for p, q in zip(back.runs[0].model.parameters(), fresh.runs[0].model.parameters()):
        assert torch.equal(p, q)
