"""Every random stream of the book, derived from ``(seed, stage)``.

A run is identified by a non-negative integer ``seed``; each *stage* of it that needs
randomness (drawing the patterns, initialising ``w``, drawing training prompts, drawing test
prompts, ...) gets its own stream, derived from the pair ``(seed, stage)`` by NumPy's
:class:`numpy.random.SeedSequence` with the stage name hashed (SHA-256) into its spawn key.
Two different pairs give statistically independent streams: seed ``s`` and seed ``s + 1``
share no stream, and neither do two stages of one seed. (The code this replaces seeded stages
with ``seed + offset``, so that seed ``s``'s initialisation stream was seed ``s + 1``'s pattern
stream.)

Stage names used by the book (any string is allowed):

==================  =====================================================================
``"patterns"``      the orthogonal patterns of §3.2
``"init"``          random initial parameters (``w ~ N(0, I/(d+1))`` of Section 2, deep models)
``"train"``         training prompts (Definition 1), one batch per SGD step
``"test"``          test prompts (Definition 2)
``"validation"``    held-out training-distribution prompts for step-size searches
==================  =====================================================================

Experiments add their own (e.g. ``"test/alpha=0.3"``) where one seed needs several
independent test sets.
"""
from __future__ import annotations

import hashlib

import numpy as np
import torch

__all__ = ["stream_seed", "torch_generator", "torch_generators", "numpy_generator"]

_MASK63 = (1 << 63) - 1


def _check(seed, stage) -> None:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer; got {seed!r}")
    if not isinstance(stage, str) or not stage:
        raise ValueError(f"stage must be a non-empty string naming the stage; got {stage!r}")


def stream_seed(seed: int, stage: str) -> int:
    """The 63-bit integer that seeds the stream of ``stage`` in run ``seed``.

    ``SeedSequence(entropy=seed, spawn_key=(sha256(stage)[:8],))``: distinct ``(seed, stage)``
    pairs give independent, non-overlapping streams (up to a 2^-63 collision chance).
    """
    _check(seed, stage)
    key = int.from_bytes(hashlib.sha256(stage.encode("utf-8")).digest()[:8], "little")
    state = np.random.SeedSequence(entropy=int(seed), spawn_key=(key,)).generate_state(2, dtype=np.uint64)
    return int(state[0]) & _MASK63


def torch_generator(seed: int, stage: str, device: str | torch.device = "cpu") -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded with :func:`stream_seed`."""
    return torch.Generator(device=device).manual_seed(stream_seed(seed, stage))


def torch_generators(seeds, stage: str) -> list[torch.Generator]:
    """One CPU generator per seed for ``stage``: the streams of a seed-batched run."""
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds must be a non-empty sequence of non-negative integers")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct; got {seeds}")
    return [torch_generator(s, stage) for s in seeds]


def numpy_generator(seed: int, stage: str) -> np.random.Generator:
    """A NumPy ``Generator`` (PCG64) for ``(seed, stage)``, for code that draws with NumPy."""
    return np.random.Generator(np.random.PCG64(stream_seed(seed, stage)))
