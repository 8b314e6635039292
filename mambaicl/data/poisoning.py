"""The "James Bond" poisoning of §4.2 / Example 1 and the SST-2 in-context prompts.

Glossary (code name -> paper symbol):

=================  ==========================================================================
``PHRASE``         the outlier phrase "James Bond", inserted at a random word position (§4.2)
``f``              the task, ``(batch,)`` in {+1, -1}: ``f = +1`` labels positive sentences +1
                   and negative ones -1 (tasks ``(mu_a, mu_b)`` = (positive, negative)); ``f = -1``
                   is the reversed task ``(negative, positive)`` (§3.2 with ``M_1 = 2``)
``s``              sentiment of a sentence in {+1, -1} (SST-2 label 1 / 0)
``y_i``            context label ``f * s_i`` for a clean example; by ``rule`` for an outlier
``z``              the query's label ``f * s_query`` (the query never carries the phrase)
``l``              context examples per prompt (8 in §4.2); prompts are ``(batch, l+1, d+1)``
``alpha``          probability that a context example carries the phrase, Eq. (5) (``p_a``
                   in training, Eq. (4))
``RULES``          outlier labels (§4.1's letters): ``B`` targeted (+1, Example 1), ``A`` flipped
                   (``-f s``), ``C`` random; display labels in :data:`LABELS` (:mod:`mambaicl.data.vocabulary`)
``PLACEMENTS``     ``FQ`` outliers farthest from the query, ``CQ`` closest, ``R`` random (§4.2)
=================  ==========================================================================

The outlier mask and outlier labels are the synthetic chapters' (:func:`mambaicl.data.prompts.
outlier_mask`, :func:`~mambaicl.data.prompts.outlier_labels`): ``FQ`` / ``CQ`` put a Binomial(l,
alpha) number of outliers at the far / near end, ``R`` draws each example independently. With
``count="fixed"`` every prompt has exactly ``round(alpha l)`` outlier examples instead (placed at
random positions for ``R``); with ``count="balanced"`` it has ``floor(alpha l)`` or ``ceil(alpha l)``
of them, the larger with probability ``alpha l - floor(alpha l)``, so the mean fraction is exactly
``alpha`` and a prompt keeps a clean example whenever ``alpha l <= l - 1``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Sequence

import torch

from ..config import PLACEMENTS, RULES, ConfigError, check_choice, check_int, check_real
from ..seeding import check_stream
from .patterns import value_key
from .prompts import outlier_labels, outlier_mask
from .source import KeyedSource
from .vocabulary import LABELS, placement_id, rule_id

__all__ = [
    "PHRASE",
    "RULES",
    "PLACEMENTS",
    "LABELS",
    "COUNTS",
    "insert_phrase",
    "poison_sentences",
    "EmbeddedPool",
    "SST2Prompts",
    "sst2_prompts",
    "SST2Source",
]

PHRASE = "James Bond"


def insert_phrase(sentence: str, position: int, phrase: str = PHRASE) -> str:
    """``sentence`` with ``phrase`` inserted before word ``position`` (0 = first, n_words = last)."""
    words = sentence.split()
    check_int("position", position, 0, len(words))  # 0 = before the first word, len(words) = after the last
    return " ".join(words[:position] + [phrase] + words[position:])


def poison_sentences(sentences: Sequence[str], generator: torch.Generator, phrase: str = PHRASE) -> List[str]:
    """Each sentence with ``phrase`` at a uniformly random word position (§4.2), reproducibly."""
    out = []
    for s in sentences:
        n_slots = len(s.split()) + 1
        pos = int(torch.randint(n_slots, (1,), generator=generator))
        out.append(insert_phrase(s, pos, phrase))
    return out


@dataclass
class EmbeddedPool:
    """Sentences of one split as features: clean ``x``, poisoned ``x_bond`` (both ``(n, d)``), ``s`` (n,)."""

    x: torch.Tensor
    x_bond: torch.Tensor
    s: torch.Tensor

    def __post_init__(self) -> None:
        n = self.s.shape[0]
        if self.x.shape != self.x_bond.shape or self.x.shape[0] != n or self.x.dim() != 2:
            raise ConfigError(f"x, x_bond must both be (n, d) with n = len(s) = {n}; "
                             f"got {tuple(self.x.shape)} and {tuple(self.x_bond.shape)}")
        if not bool(((self.s == 1) | (self.s == -1)).all()):
            raise ConfigError("sentiments s must be +1 (positive) or -1 (negative)")
        for c in (1, -1):
            if not bool((self.s == c).any()):
                raise ConfigError(f"the pool has no sentence of sentiment {c:+d}; prompts need both classes")

    @property
    def d(self) -> int:
        return self.x.shape[1]

    @property
    def key(self) -> str:
        """A value key (:func:`mambaicl.data.patterns.value_key` of ``x``, ``x_bond``, ``s``), computed once: pools
        with the same numbers have equal keys, whichever object holds them."""
        if "_key" not in self.__dict__:
            self.__dict__["_key"] = value_key(self.x, self.x_bond, self.s)
        return self.__dict__["_key"]


@dataclass
class SST2Prompts:
    """A batch of SST-2 prompts: ``P`` (batch, l+1, d+1), ``z`` (batch,), ``outlier`` (batch, l),
    the task ``f`` (batch,) and the sentence indices ``idx`` (batch, l+1) into the pool."""

    P: torch.Tensor
    z: torch.Tensor
    outlier: torch.Tensor
    f: torch.Tensor
    idx: torch.Tensor


def _sample_sentences(pool: EmbeddedPool, batch: int, l: int, stream) -> torch.Tensor:
    """Sentence indices ``(batch, l+1)``: each example positive or negative with probability 1/2 (Def. 1)."""
    pos, neg = torch.nonzero(pool.s == 1).squeeze(1), torch.nonzero(pool.s == -1).squeeze(1)
    want_pos = torch.from_numpy(stream.random((batch, l + 1)) < 0.5)  # (batch, l+1)
    i_pos = pos[torch.from_numpy(stream.integers(len(pos), size=(batch, l + 1)))]  # (batch, l+1)
    i_neg = neg[torch.from_numpy(stream.integers(len(neg), size=(batch, l + 1)))]  # (batch, l+1)
    return torch.where(want_pos, i_pos, i_neg)


COUNTS = ("binomial", "fixed", "balanced")


def _mask(u: torch.Tensor, alpha: float, placement: str, count: str, l: int, v: torch.Tensor | None = None) -> torch.Tensor:
    """Outlier examples from uniforms ``u`` ``(batch, l)``: Eq. (5) draws (``count="binomial"``), exactly
    ``round(alpha l)`` per prompt (``count="fixed"``), or ``floor``/``ceil`` of ``alpha l`` with mean
    ``alpha l`` (``count="balanced"``, the extra outlier decided by the uniforms ``v`` ``(batch,)``),
    arranged by ``placement``."""
    if count == "binomial":
        return outlier_mask(u, alpha, placement)
    if count == "fixed":
        k = torch.full((u.shape[0], 1), int(round(alpha * l)))
    else:
        lo = math.floor(alpha * l + 1e-9)
        k = (lo + (v < alpha * l - lo).long()).unsqueeze(1)  # (batch, 1)
    pos = torch.arange(l)[None]  # (1, l)
    if placement == "FQ":
        return (pos < k).expand(u.shape[0], l).clone()
    if placement == "CQ":
        return (pos >= l - k).expand(u.shape[0], l).clone()
    rank = u.argsort(dim=1).argsort(dim=1)  # a uniformly random permutation of positions per prompt
    return rank < k


def sst2_prompts(pool: EmbeddedPool, batch: int, *, l: int = 8, alpha: float = 0.0, placement: str = "R",
                 rule: str = "B", stream, target: int = 1,
                 count: str = "binomial") -> SST2Prompts:
    """In-context prompts on SST-2 with "James Bond" outliers (§4.2; Definitions 1-2, Example 1).

    Each prompt draws a task ``f`` in {+1, -1} and ``l + 1`` sentences (query last); clean labels
    are ``f * s``. Context example ``i`` is replaced by its poisoned twin (phrase inserted) when the
    outlier mask says so (probability ``alpha``, arranged by ``placement``) and then takes the
    label of ``rule`` (§4.1's letter; ``"B"``, Example 1's targeted +1, by default). The query is
    never poisoned; its label ``z = f * s_query``. The display labels (``"targeted"``, ``"far"``, ...)
    are accepted for ``rule`` and ``placement`` as aliases of the letters.

    ``stream`` is the prompt's NumPy stream (:func:`mambaicl.seeding.numpy_stream`).

    Returns:
        :class:`SST2Prompts` with ``P`` of shape ``(batch, l+1, d+1)`` (label entry of the query 0).
    """
    stream = check_stream("stream", stream)
    placement, rule = placement_id(placement), rule_id(rule)
    check_choice("count", count, COUNTS)  # Eq. (5), round(alpha l) per prompt, or floor/ceil of alpha l
    check_real("alpha", alpha, 0.0, 1.0)
    check_int("l", l, 1)
    check_int("batch", batch, 1)
    f = torch.where(torch.from_numpy(stream.random(batch) < 0.5), -1.0, 1.0)  # (batch,)
    idx = _sample_sentences(pool, batch, l, stream)  # (batch, l+1)
    y = f[:, None] * pool.s[idx].to(f.dtype)  # (batch, l+1) clean labels
    u = torch.from_numpy(stream.random((batch, 2, l)))  # (batch, 2, l): outlier and label-coin uniforms
    v = torch.from_numpy(stream.random(batch)) if count == "balanced" else None
    outlier = _mask(u[:, 0], alpha, placement, count, l, v)  # (batch, l)
    bad = outlier_labels(y[:, :l], rule, target, u[:, 1])  # (batch, l)
    x = pool.x[idx].clone()  # (batch, l+1, d)
    x[:, :l][outlier] = pool.x_bond[idx[:, :l][outlier]]
    y_ctx = torch.where(outlier, bad.to(y.dtype), y[:, :l])  # (batch, l)
    labels = torch.cat([y_ctx, torch.zeros(batch, 1)], dim=1).to(x.dtype)  # (batch, l+1)
    P = torch.cat([x, labels.unsqueeze(-1)], dim=-1)  # (batch, l+1, d+1)
    return SST2Prompts(P=P, z=y[:, l].to(x.dtype), outlier=outlier, f=f, idx=idx)


class SST2Source(KeyedSource):
    """Training prompts on SST-2 as the data of engine members (:class:`mambaicl.train.PromptSource`).

    Definition 1 on sentences: each context example carries the phrase with probability ``p_a``
    (placement R) and then a random label (rule C). With ``switch`` (App. 8.1's curriculum), the
    draws of the steps from ``switch`` on use placement CQ instead. ``sample_at(step, batch, streams)``
    draws one batch per NumPy stream for training step ``step`` (the engine passes it) and stacks them:
    ``P`` ``(S, batch, l+1, d+1)``, ``z`` ``(S, batch)``, batch ``s`` exactly the prompts
    ``sst2_prompts(..., stream=streams[s])`` of a run alone. The source holds no state: its draws
    depend only on the step and the streams. Two sources are equal (and share their draws) when they
    read pools of the same numbers (:attr:`EmbeddedPool.key`) with the same settings.
    """

    def __init__(self, pool: EmbeddedPool, *, l: int, p_a: float, switch: int | None = None) -> None:
        self.pool, self.l = pool, check_int("l", l, 1)
        self.p_a = check_real("p_a", p_a, 0.0, 1.0, high_open=True)
        self.switch = None if switch is None else check_int("switch", switch, 0)
        self.key = (pool.key, self.l, self.p_a, self.switch)

    @property
    def d(self) -> int:
        return self.pool.d

    def sample(self, batch: int, streams) -> tuple:
        """The draws of the first step (placement R): :meth:`sample_at` at step 0."""
        return self.sample_at(0, batch, streams)

    def sample_at(self, step: int, batch: int, streams) -> tuple:
        """The draws of training step ``step`` (0-based): placement CQ from step ``switch`` on, else R."""
        placement = "CQ" if self.switch is not None and step >= self.switch else "R"
        prs = [sst2_prompts(self.pool, batch, l=self.l, alpha=self.p_a, placement=placement, rule="C", stream=g)
               for g in streams]
        return torch.stack([pr.P for pr in prs]), torch.stack([pr.z for pr in prs])  # (S, batch, l+1, d+1), (S, batch)

    def __repr__(self) -> str:
        return f"SST2Source(l={self.l}, p_a={self.p_a}, switch={self.switch})"
