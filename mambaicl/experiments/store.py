"""A store of experiment results on disk: a run made once by one chapter is read back by another.

Chapter 5 and the Mamba-1 appendix both report the same ten Mamba-1 seeds (``mechanism.run(MAMBA1, seeds)``);
training them twice cost a first build about 75 CPU-seconds for nothing. :func:`stored` runs an experiment
once and keeps its whole result object (models included) in ``<cache>/results/``, next to the SST-2
embedding cache (``$MAMBAICL_CACHE_DIR`` or ``~/.cache/mambaicl``); the next call with the same key reads
it back instead of computing it again.

The key is everything the result depends on: the function (module and name), the ``repr`` of every
argument (presets are frozen dataclasses, so their ``repr`` lists every field), torch's version, and a
digest of the package's source (every ``.py`` file of ``mambaicl``), so that any change of the code
computes anew instead of reading a result the current code would not give. Runs are deterministic on a
CPU (the same bytes from the same command), so a result read back is the result a computation would give;
``tests/test_store.py`` checks that. A file that cannot be read (interrupted write, another torch) is set
aside (renamed ``*.bad``, never deleted) and the result computed again. ``MAMBAICL_RESULT_STORE=off``
turns the store off (every call computes).
"""
from __future__ import annotations

import functools
import hashlib
import io
import os
import warnings
from pathlib import Path
from typing import Any, Callable

import torch

from ..config import ConfigError
from ..data.encoders import default_cache_dir
from ..io import atomic_write_bytes, set_aside

__all__ = ["stored", "is_stored", "store_key", "source_digest", "results_dir", "STORE_ENV_VAR"]

#: set to ``off`` (or ``0``, ``false``, ``no``) to compute every result instead of reading the store
STORE_ENV_VAR = "MAMBAICL_RESULT_STORE"
#: keyword arguments that change how a run reports progress, never its result (left out of the key)
NOT_IN_KEY = ("progress",)


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """SHA-256 of the package's source: every ``.py`` file under ``mambaicl/`` (relative path and bytes)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def store_key(fn: Callable, args: tuple, kwargs: dict) -> str:
    """The store's key of ``fn(*args, **kwargs)``: SHA-256 of the function's name, the ``repr`` of its arguments
    (but :data:`NOT_IN_KEY`), torch's version and :func:`source_digest`."""
    kw = {k: v for k, v in sorted(kwargs.items()) if k not in NOT_IN_KEY}
    text = "\n".join([f"{fn.__module__}.{fn.__qualname__}", repr(args), repr(kw), torch.__version__, source_digest()])
    return hashlib.sha256(text.encode()).hexdigest()


def results_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """Where results are stored: ``<cache_dir>/results`` (default cache folder: ``$MAMBAICL_CACHE_DIR`` or
    ``~/.cache/mambaicl``)."""
    return (Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()) / "results"


def _enabled() -> bool:
    value = os.environ.get(STORE_ENV_VAR, "on").strip().lower()
    if value in ("on", "1", "true", "yes", ""):
        return True
    if value in ("off", "0", "false", "no"):
        return False
    raise ConfigError(f"{STORE_ENV_VAR} must be one of on, off (or 1/0, true/false, yes/no); got {value!r}")


def _file(fn: Callable, args: tuple, kwargs: dict, cache_dir) -> Path:
    return results_dir(cache_dir) / f"{fn.__module__.rsplit('.', 1)[-1]}-{store_key(fn, args, kwargs)[:32]}.pt"


def is_stored(fn: Callable[..., Any], *args, cache_dir: str | os.PathLike | None = None, **kwargs) -> bool:
    """Whether :func:`stored` with these arguments would read a stored result (the store on, the file there)."""
    return _enabled() and _file(fn, args, kwargs, cache_dir).is_file()


def stored(fn: Callable[..., Any], *args, cache_dir: str | os.PathLike | None = None, key_as: dict | None = None,
           **kwargs) -> Any:
    """``fn(*args, **kwargs)``, read from the store when this very call was made before (same key,
    :func:`store_key`), else computed and written to it (atomically).

    ``key_as``: stand-ins for keyword arguments in the key, e.g. ``{"reuse": "book run dynamics"}`` for a run that
    reuses another stored run's result (whose ``repr`` is no key): :mod:`mambaicl.experiments.book` names it so.

    Example: ``stored(mechanism.run, mechanism.MAMBA1, seeds=range(10), progress=False)``.
    """
    if not callable(fn):
        raise ConfigError(f"fn must be callable; got {fn!r}")
    if not _enabled():
        return fn(*args, **kwargs)
    file = _file(fn, args, {**kwargs, **(key_as or {})}, cache_dir)
    folder = file.parent
    if file.is_file():
        try:
            return torch.load(file, map_location="cpu", weights_only=False)
        except FileNotFoundError:  # set aside or replaced by another process meanwhile: compute
            pass
        except Exception as exc:  # noqa: BLE001 - any unreadable file is set aside, never trusted
            bad = set_aside(file)
            warnings.warn(f"stored result {file} is unreadable ({type(exc).__name__}); set aside as {bad.name}, "
                          "computing it again", stacklevel=2)
    result = fn(*args, **kwargs)
    buf = io.BytesIO()
    torch.save(result, buf)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(file, buf.getvalue())
    return result
