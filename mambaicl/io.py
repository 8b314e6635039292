"""Files written by the package: atomically, durably, with normal permissions.

Every write goes to a temporary file in the destination folder, is flushed and ``fsync``-ed,
given mode ``0644`` (``mkstemp`` would leave ``0600``) and moved over the destination with
``os.replace``; the folder is then ``fsync``-ed so that the rename survives a crash. A reader
therefore sees either the old file or the complete new one, never a torn write.

The outputs of one run (``results.json`` and ``artifacts.pt``) land *together*
(:func:`write_outputs`): both are written into a temporary folder beside the output folder, which
then takes the output folder's place in one atomic exchange (``renameat2(RENAME_EXCHANGE)``; two
renames where the file system lacks it). A crash leaves the old pair or the new pair, never one of each.
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import tempfile
from pathlib import Path

from .config import ConfigError

__all__ = ["atomic_write_bytes", "atomic_write_text", "set_aside", "write_json", "json_text", "prepare_out_dir",
           "write_outputs", "OUTPUT_FILES"]

FILE_MODE = 0o644
DIR_MODE = 0o755
OUTPUT_FILES = ("results.json", "artifacts.pt")  # what an output folder may hold


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


def set_aside(path: str | os.PathLike) -> Path:
    """Rename an unreadable file to ``<name>.bad`` (``<name>.bad.N`` if taken), never delete it; returns the new
    path (nothing happens if another process moved the file first)."""
    path = Path(path)
    bad, n = path.with_name(path.name + ".bad"), 0
    while bad.exists():
        n += 1
        bad = path.with_name(f"{path.name}.bad.{n}")
    try:
        os.replace(path, bad)
    except FileNotFoundError:
        pass
    return bad


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
    """Create the output folder ``out`` (and its parents) and check that :func:`write_outputs` can fill it.

    Raises:
        ConfigError: ``out`` exists and is not a folder, or holds files other than ``OUTPUT_FILES``
            (the whole folder is replaced by the new outputs).
        FileNotFoundError / PermissionError: ``out`` cannot be created (a parent is missing and cannot
            be made, or is read-only) or its parent is not writable; the message names ``--out``.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        cls = PermissionError if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) else FileNotFoundError
        raise cls(f"--out {out} cannot be created: {exc.strerror or exc}") from None
    others = sorted(p.name for p in out.iterdir() if p.name not in OUTPUT_FILES)
    if others:
        listed = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise ConfigError(f"--out {out} holds other files ({listed}); "
                          f"give a new folder or one holding only {' and '.join(OUTPUT_FILES)}")
    parent = out.resolve().parent
    if not os.access(out, os.W_OK) or not os.access(parent, os.W_OK):
        raise PermissionError(f"--out {out} is not writable (the folder and its parent {parent} must be)")
    return out


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically with Linux's ``renameat2(RENAME_EXCHANGE)``; ``False`` where unavailable."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(a))


def write_outputs(out: str | os.PathLike, files: dict) -> Path:
    """Write ``{name: bytes}`` as the content of folder ``out``, all files together (see the module doc).

    The files go into a temporary folder beside ``out`` (fsync-ed, mode ``0644``); that folder then
    takes ``out``'s place atomically, and the old content is removed. ``out`` must hold only
    ``OUTPUT_FILES`` (checked by :func:`prepare_out_dir`).
    """
    out = prepare_out_dir(out).resolve()
    bad = sorted(set(files) - set(OUTPUT_FILES))
    if bad:
        raise ConfigError(f"files must be among {OUTPUT_FILES}; got {bad}")
    stage = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        for name, data in files.items():
            with open(stage / name, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(stage / name, FILE_MODE)
        os.chmod(stage, DIR_MODE)
        _fsync_dir(stage)
        if not _exchange(stage, out):  # two renames: a crash between them leaves out missing, the pair in .old
            old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".old"))
            os.replace(out, old / "out")
            os.replace(stage, out)
            stage = old
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    _fsync_dir(out.parent)
    return out
