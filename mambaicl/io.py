"""Files written by the package: atomically, durably, with normal permissions.

Every write goes to a temporary file in the destination folder, is flushed and ``fsync``-ed,
given mode ``0644`` (``mkstemp`` would leave ``0600``) and moved over the destination with
``os.replace``; the folder is then ``fsync``-ed so that the rename survives a crash. A reader
therefore sees either the old file or the complete new one, never a torn write.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write_bytes", "atomic_write_text", "write_json", "json_text", "prepare_out_dir"]

FILE_MODE = 0o644


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # some file systems do not allow opening a directory
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike, data: bytes, mode: int = FILE_MODE) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, ``os.replace``); returns the path.

    Raises:
        FileNotFoundError: the destination folder does not exist.
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise FileNotFoundError(f"cannot write {path}: folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(folder)
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """:func:`atomic_write_bytes` of UTF-8 ``text``."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def json_text(obj) -> str:
    """The book's JSON format: sorted keys, one-space indent, a final newline (byte-stable)."""
    return json.dumps(obj, indent=1, sort_keys=True, allow_nan=True) + "\n"


def write_json(path: str | os.PathLike, obj) -> Path:
    """Write ``obj`` as :func:`json_text` atomically."""
    return atomic_write_text(path, json_text(obj))


def prepare_out_dir(out: str | os.PathLike) -> Path:
    """Create the output folder ``out`` (and its parents) and check that it is writable.

    Raises:
        ValueError: ``out`` exists and is not a folder, cannot be created, or is not writable;
            the message says which.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"--out {out} cannot be created: {exc.strerror or exc}") from None
    if not os.access(out, os.W_OK):
        raise ValueError(f"--out {out} is not writable")
    return out
