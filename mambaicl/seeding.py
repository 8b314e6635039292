"""Every random stream of the book, derived from ``(seed, stage)``.

A run is identified by a non-negative integer ``seed``; each *stage* of it that needs
randomness (drawing the patterns, initialising ``w``, drawing training prompts, drawing test
prompts, ...) gets its own stream, derived from the pair ``(seed, stage)`` by NumPy's
:class:`numpy.random.SeedSequence` with the stage name hashed (SHA-256) into its spawn key.
Two different pairs give statistically independent streams: seed ``s`` and seed ``s + 1``
share no stream, and neither do two stages of one seed.

**Full state, not a 32-bit seed.** Torch's CPU generator is a Mersenne Twister (MT19937) whose
``manual_seed(s)`` keeps only the low 32 bits of ``s`` (``manual_seed(s)`` and
``manual_seed(s + 2**32)`` draw the same numbers), so streams seeded that way would collide by
the birthday bound after ~2^16 streams. Instead, :func:`torch_generator` fills all 624 words of the
twister's state from the stream's ``SeedSequence`` (through a PCG64 of 255 bits seeded by it, which is
4x faster than ``generate_state(624)``) and loads them with ``Generator.set_state``: two streams share
a first draw only by chance (tested on 200,000 streams).

**Prompts draw from NumPy streams.** Every prompt builder of :mod:`mambaicl.data` (Definitions 1 and 2,
multi-class levels, linear regression, SST-2 prompts) takes its stream as an argument: a
:class:`numpy.random.Generator` on SFC64 seeded by the stream's ``SeedSequence``
(:func:`numpy_stream`; :func:`numpy_streams` for a seed-batched run, one per seed). SFC64 draws a batch
of uniforms in about a third of the Mersenne Twister's time and its 256-bit state is created from the
``SeedSequence`` directly, so a seed costs little. A stream is an object the caller holds and passes on;
nothing is attached to another generator. Torch generators (:func:`torch_generator`) remain for what
torch draws: parameter initialisation and the SST-2 split's own shuffles.

Stage names used by the book: the table :data:`STAGES` (any non-empty string is allowed as a stage):

========================  =====================================================================
``"patterns"``            the orthogonal patterns of §3.2
``"init"``                random initial parameters (``w ~ N(0, I/(d+1))`` of Section 2, deep models)
``"train"``               training prompts (Definition 1), one batch per SGD step
``"test"``                test prompts (Definition 2)
``"validation"``          held-out training-distribution prompts for step-size searches
``"val"``                 Chapter 5's deep stacks' validation prompts (early stopping and their step-size
                          search; named before the book settled on ``"validation"``, kept so that the
                          recorded runs keep their draws)
========================  =====================================================================

Experiments add their own (e.g. ``"test/alpha=0.3"``) where one seed needs several
independent test sets; :func:`substage` names them the same way everywhere.
"""
from __future__ import annotations

import functools
import hashlib

import numpy as np
import torch

from .config import ConfigError, check_seed, check_seeds, check_text

__all__ = ["STAGES", "stream_seed", "seed_sequence", "substage", "numpy_stream", "numpy_streams", "streams_for",
           "torch_generator", "torch_generators", "check_stream"]

#: the book's stage names, by purpose (the module's table)
STAGES = {"patterns": "patterns", "init": "init", "train": "train", "test": "test", "validation": "validation",
          "mechanism validation": "val"}

_MASK63 = (1 << 63) - 1
_MT_WORDS = 624  # MT19937 state size in 32-bit words
_MT_OFFSET = 24  # bytes before state[0] in torch's CPU generator state: initial seed u64, left i32, seeded i32,
#                 next u64; state[624] follows as u64 words holding 32 bits each


@functools.lru_cache(maxsize=4096)
def _stage_key(stage: str) -> int:
    return int.from_bytes(hashlib.sha256(check_text("stage", stage).encode("utf-8")).digest()[:8], "little")


def seed_sequence(seed: int, stage: str) -> np.random.SeedSequence:
    """``SeedSequence(entropy=seed, spawn_key=(sha256(stage)[:8],))``: the root of stream ``(seed, stage)``."""
    if not isinstance(stage, str):
        check_text("stage", stage)
    return np.random.SeedSequence(entropy=check_seed("seed", seed), spawn_key=(_stage_key(stage),))


def stream_seed(seed: int, stage: str) -> int:
    """A 63-bit integer summary of stream ``(seed, stage)`` (the generator's ``initial_seed()``).

    Seeds only non-CPU generators (CUDA's Philox keeps all 64 bits); CPU streams use the full state.
    """
    return int(seed_sequence(seed, stage).generate_state(2, dtype=np.uint64)[0]) & _MASK63


def substage(stage: str, *parts, **labels) -> str:
    """The stream name of one item of a sweep: ``stage``, then each of ``parts`` as ``str(part)``, then each label
    as ``key=value``, joined by ``/``. E.g. ``substage("test", "A", 0.3) == "test/A/0.3"`` (a rule and an alpha),
    ``substage("test", alpha=0.3) == "test/alpha=0.3"``.

    Each alpha of a sweep, each task group, ... then draws from its own stream, so its result does not
    depend on the other items of the list it sits in. Every composite stream name of the package is built
    here (the names, hashed into the streams, fix every number: give a float part as ``float(a)``).
    """
    return "/".join([check_text("stage", stage)] + [str(p) for p in parts] + [f"{k}={v}" for k, v in labels.items()])


def streams_for(seeds, stage: str):
    """One NumPy stream for an ``int`` seed (a single model), else one per seed (a seed-batched model)."""
    if isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        return numpy_stream(seeds, stage)
    return numpy_streams(seeds, stage)


_TEMPLATE: np.ndarray | None = None
_PCG = np.random.PCG64(0)  # its state is overwritten before every use (under its lock)


def _template() -> np.ndarray:
    """A valid CPU generator state (bytes), whose header and twister words :func:`torch_generator` overwrites."""
    global _TEMPLATE
    if _TEMPLATE is None:
        raw = torch.Generator().manual_seed(1).get_state().numpy().copy()
        words = raw[_MT_OFFSET : _MT_OFFSET + 8 * _MT_WORDS].view(np.uint64)
        if int(raw[:8].view(np.uint64)[0]) != 1 or int(words[0]) != 1 or int(words[1]) != 1812433254:
            raise RuntimeError("unexpected layout of torch.Generator().get_state(); update mambaicl.seeding")
        _TEMPLATE = raw
    return _TEMPLATE


def _mt_words(seq: np.random.SeedSequence) -> tuple[int, np.ndarray]:
    """An initial-seed summary and the 624 twister words ``(624,) uint32`` of stream ``seq``.

    ``seq.generate_state(8)`` gives 512 bits; words 4-7 (disjoint from the 4 that seed
    :func:`numpy_stream`'s SFC64, which takes words 0-2) set a PCG64 state of 128 + 127 bits whose first 312 outputs are
    the 624 words (``generate_state(624)`` itself costs 4x more; the tests draw from 200,000 streams).
    """
    w = [int(x) for x in seq.generate_state(8, dtype=np.uint64)]
    with _PCG.lock:
        _PCG.state = {"bit_generator": "PCG64", "has_uint32": 0, "uinteger": 0,
                      "state": {"state": (w[4] << 64) | w[5], "inc": (w[6] << 64) | w[7] | 1}}
        words = _PCG.random_raw(_MT_WORDS // 2).view(np.uint32)
    return w[4] & _MASK63, words


def _mt_state(seq: np.random.SeedSequence) -> torch.Tensor:
    """The byte state of a CPU generator whose 624 twister words come from ``seq``."""
    state = _template().copy()
    initial, words = _mt_words(seq)
    state[:8].view(np.uint64)[0] = initial  # initial_seed(): informative only
    state[8:16].view(np.int32)[:] = (1, 1)  # left = 1 (twist before the first draw, as after manual_seed), seeded
    state[16:24].view(np.uint64)[0] = 0  # next
    state[_MT_OFFSET : _MT_OFFSET + 8 * _MT_WORDS].view(np.uint64)[:] = words
    return torch.from_numpy(state)


def torch_generator(seed: int, stage: str, device: str | torch.device = "cpu") -> torch.Generator:
    """A ``torch.Generator`` on ``device`` for stream ``(seed, stage)``.

    On the CPU its whole Mersenne Twister state comes from :func:`seed_sequence`; on other devices
    (Philox, 64-bit seed) it is seeded by :func:`seed_by_summary`.
    """
    g = torch.Generator(device=device)
    if g.device.type != "cpu":
        return seed_by_summary(g, seed, stage)
    g.set_state(_mt_state(seed_sequence(seed, stage)))
    return g


def seed_by_summary(g: torch.Generator, seed: int, stage: str) -> torch.Generator:
    """``g`` seeded with :func:`stream_seed` of ``(seed, stage)``: how :func:`torch_generator` seeds a generator
    on a non-CPU device; on a CPU generator (the tests) it runs the same code without a GPU."""
    return g.manual_seed(stream_seed(seed, stage))


def torch_generators(seeds, stage: str) -> list[torch.Generator]:
    """One CPU generator per seed for ``stage``: the streams of a seed-batched run."""
    return [torch_generator(s, stage) for s in check_seeds("seeds", seeds)]


def numpy_stream(seed: int, stage: str) -> np.random.Generator:
    """The NumPy stream of ``(seed, stage)``: a ``Generator`` on SFC64 seeded by :func:`seed_sequence`.

    Every prompt builder draws from one of these (passed as its ``stream`` argument).
    """
    return np.random.Generator(np.random.SFC64(seed_sequence(seed, stage)))


def numpy_streams(seeds, stage: str) -> list[np.random.Generator]:
    """One NumPy stream per seed for ``stage``: the prompt streams of a seed-batched run."""
    return [numpy_stream(s, stage) for s in check_seeds("seeds", seeds)]


def check_stream(name: str, stream) -> np.random.Generator:
    """``stream`` if it is a NumPy ``Generator`` (what prompt builders draw from), else a ``ConfigError``."""
    if not isinstance(stream, np.random.Generator):
        raise ConfigError(f"{name} must be a numpy.random.Generator (mambaicl.seeding.numpy_stream(seed, stage)); "
                          f"got {type(stream).__name__}")
    return stream
